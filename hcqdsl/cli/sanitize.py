"""`hcqdsl sanitize SCRIPT.py[:FN] [ARGS...]`: run a tinygrad script, check what its AMD runtime submits, and report
races and deadlocks with the kernel names and the script's lines of both commands (docs/sanitize.md)."""
from __future__ import annotations
import argparse, pathlib, sys
from ..tinygrad.script import split_script, run_script
from .capture import NO_DEVICE

def add_args(p) -> None:
  p.add_argument("script", help="SCRIPT.py (run as __main__) or SCRIPT.py:FN (import it, then call FN())")
  p.add_argument("--launches", type=int, metavar="N", help="check N launches (default: the launches captured)")
  p.add_argument("--format", choices=("text", "json"), default="text", help="the report: text (default) or one JSON object")
  p.add_argument("args", nargs=argparse.REMAINDER, help="everything after SCRIPT goes to the script (sys.argv[1:])")

def run(a) -> int:
  from ..tinygrad.sanitize import Sanitizer
  path, fn = split_script(a.script)
  script = pathlib.Path(path)
  if not script.is_file():
    sys.stderr.write(f"hcqdsl: error: {path}: no such file\n"); return 2
  if a.launches is not None and a.launches < 1:
    sys.stderr.write("hcqdsl: error: --launches: must be at least 1\n"); return 2
  s = Sanitizer(a.launches)
  args = list(a.args)[1:] if list(a.args)[:1] == ["--"] else list(a.args)
  rc, err = run_script(script, fn, args, s)
  if err: sys.stderr.write(err + "\n")
  if rc: return rc
  if not s.checked:
    sys.stderr.write(f"hcqdsl: error: {path}: {NO_DEVICE}\n"); return 2
  sys.stdout.write((s.to_json() if a.format == "json" else s.report()) + "\n")
  return 1 if s.findings else 0
