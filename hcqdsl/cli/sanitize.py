"""`hcqdsl sanitize SCRIPT.py[:FN] [ARGS...]`: run a tinygrad script, check what its AMD runtime submits, and report
races and deadlocks with the kernel names and the script's lines of both commands (docs/sanitize.md)."""
from __future__ import annotations
import sys
from ..tinygrad.script import run_script
from .capture import NO_DEVICE
from .util import add_script_args, script_of

def add_args(p) -> None:
  add_script_args(p, [(("--launches",), dict(type=int, metavar="N", help="check N launches (default: the launches captured)")),
                      (("--format",), dict(choices=("text", "json"), default="text", help="the report: text (default) or one JSON object"))])

def run(a) -> int:
  from ..tinygrad.sanitize import Sanitizer
  script, fn, args = script_of(a)
  path = str(script)
  if a.launches is not None and a.launches < 1:
    sys.stderr.write("hcqdsl: error: --launches: must be at least 1\n"); return 2
  s = Sanitizer(a.launches)
  rc, err = run_script(script, fn, args, s)
  if err: sys.stderr.write(err + "\n")
  if rc: return rc
  if not s.checked:
    sys.stderr.write(f"hcqdsl: error: {path}: {NO_DEVICE}\n"); return 2
  sys.stdout.write((s.to_json() if a.format == "json" else s.report()) + "\n")
  return 1 if s.findings else 0
