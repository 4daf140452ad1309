"""`hcqdsl parse FILE`: the IR as an indented tree or JSON."""
from __future__ import annotations
import json, sys
from ..diagnostics import render_text, has_errors
from .util import read_source


def add_args(p) -> None:
  p.add_argument("file", help="a .hcq program")
  p.add_argument("--json", action="store_true", help="print the IR as JSON (every node with its kind, fields and span)")

def run(a) -> int:
  from ..check import parse_with_diagnostics
  from ..lang.dump import program_to_json, program_to_tree
  text = read_source(a.file)
  prog, diags = parse_with_diagnostics(text, a.file)
  if diags: sys.stderr.write(render_text(diags, {a.file: text}))
  if prog is None or has_errors(diags): return 1
  sys.stdout.write(json.dumps(program_to_json(prog), indent=2) + "\n" if a.json else program_to_tree(prog))
  return 0
