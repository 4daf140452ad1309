"""`hcqdsl fmt FILES`: rewrite programs in canonical form (like black)."""
from __future__ import annotations
import difflib, pathlib, sys
from ..diagnostics import render_text
from .util import read_source


def add_args(p) -> None:
  p.add_argument("files", nargs="+", help=".hcq programs to rewrite in canonical form")
  p.add_argument("--check", action="store_true", help="exit 1 if a file would change; write nothing")
  p.add_argument("--diff", action="store_true", help="print a diff instead of writing")

def run(a) -> int:
  from ..lang.parse import parse_syntax
  from ..lang.format import format_program
  rc, changed = 0, 0
  for path in a.files:
    text = read_source(path)
    prog, diags = parse_syntax(text, path)
    if prog is None or any(d.code == "syntax" for d in diags):
      sys.stderr.write(render_text([d for d in diags if d.code == "syntax"], {path: text}))
      sys.stderr.write(f"error: cannot format {path}\n"); rc = 1; continue
    new = format_program(prog)
    if new == text: continue
    changed += 1
    if a.diff:
      sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True), path, path))
    if a.check or a.diff:
      if a.check: sys.stderr.write(f"would reformat {path}\n")
      continue
    pathlib.Path(path).write_text(new)
    sys.stderr.write(f"reformatted {path}\n")
  if a.check and changed: rc = max(rc, 1)
  n = len(a.files) - changed
  sys.stderr.write(f"{changed} file{'s' * (changed != 1)} {'would be ' if a.check or a.diff else ''}reformatted, {n} left unchanged\n")
  return rc
