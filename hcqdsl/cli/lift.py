"""`hcqdsl lift FILE`: a checkable program from an image (its real code objects written next to the program) or a
raw-dump manifest."""
from __future__ import annotations
import pathlib, sys
from ..lift.manifest import lift_file
from .util import UsageError, check_output


def add_args(p) -> None:
  p.add_argument("file", help="an image (.hcqimg) or a dump manifest (JSON, see docs/lift.md)")
  p.add_argument("-o", "--output", metavar="FILE", help="write the program here (default: print it)")

def run(a) -> int:
  from ..lang.format import format_program
  p = pathlib.Path(a.file)
  if not p.is_file(): raise UsageError(f"{a.file}: no such file" if not p.exists() else f"{a.file}: not a file")
  check_output(a.output, "-o", a.file)
  try: prog = lift_file(a.file, a.output)
  except ValueError as e:
    sys.stderr.write(f"hcqdsl: error: {e}\n"); return 1
  text = format_program(prog)
  if not a.output: sys.stdout.write(text); return 0
  try: pathlib.Path(a.output).write_text(text)
  except OSError as e:
    sys.stderr.write(f"hcqdsl: error: {a.output}: {e.strerror or e}\n"); return 2
  sys.stderr.write(f"wrote {a.output}: {len(prog.queues)} queue{'s' * (len(prog.queues) != 1)}\n")
  return 0
