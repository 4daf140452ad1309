"""`hcqdsl lift FILE`: a checkable program from an image (its real code objects written next to the program) or a
raw-dump manifest."""
from __future__ import annotations
import pathlib, sys
from ..lift.manifest import lift_file
from .util import UsageError, check_output, write_output


def add_args(p) -> None:
  p.add_argument("file", help="an image (.hcqimg) or a dump manifest (JSON, see docs/lift.md)")
  p.add_argument("-o", "--output", metavar="FILE", help="write the program here (default: print it)")
  how = p.add_mutually_exclusive_group()
  how.add_argument("--whole", action="store_true", help="a capture as the run happened: every step in one launch (what "
                   "`hcqdsl sanitize` checks), instead of its repeated launches folded into N launches of one template")
  how.add_argument("--folded-only", action="store_true", help="a capture's repeated launches alone: what came before them "
                   "is their initial state, the steps after them are left out (the default lifts those as launches of their own)")
  p.add_argument("--strict", action="store_true", help="exit 1 when the lifted program leaves captured work out")

def run(a) -> int:
  from ..lang.format import format_program
  p = pathlib.Path(a.file)
  if not p.is_file(): raise UsageError(f"{a.file}: no such file" if not p.exists() else f"{a.file}: not a file")
  check_output(a.output, "-o", a.file)
  trace: dict = {}
  try: prog = lift_file(a.file, a.output, whole=a.whole, trace=trace, folded_only=a.folded_only)
  except ValueError as e:
    sys.stderr.write(f"hcqdsl: error: {e}\n")
    return 1
  text = format_program(prog)
  left = trace.get("left_out") or []
  if left: sys.stderr.write(f"hcqdsl: {'error' if a.strict else 'warning'}: not lifted, so no check sees it: {'; '.join(left)}"
                            f"{'' if a.whole else ' (the default lift and `--whole` lift every step)' if a.folded_only else ''}\n")
  rc = 1 if left and a.strict else 0
  if not a.output:
    sys.stdout.write(text)
    return rc
  write_output(a.output, text)
  sys.stderr.write(f"wrote {a.output}: {len(prog.queues)} queue{'s' * (len(prog.queues) != 1)}\n")
  return rc
