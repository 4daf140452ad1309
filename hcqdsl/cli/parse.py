"""`hcqdsl parse FILE`: the IR as an indented tree or JSON."""
from __future__ import annotations
import json, sys
from ..diagnostics import render_text, render_json, has_errors
from .util import read_source, output_format


def add_args(p) -> None:
  p.add_argument("file", help="a .hcq program")
  from .util import add_format_arg
  add_format_arg(p, "the IR as an indented tree (text) or JSON (every node with its kind, fields and span; with errors, "
                 "`{\"diagnostics\": [...]}`)", json_alias=True)

def run(a) -> int:
  from ..check import parse_with_diagnostics
  from ..lang.dump import program_to_json, program_to_tree
  fmt = output_format(a)
  text = read_source(a.file)
  prog, diags = parse_with_diagnostics(text, a.file)
  if fmt == "json" and (prog is None or has_errors(diags)):
    print(render_json(diags))
    return 1
  if diags: sys.stderr.write(render_text(diags, {a.file: text}))
  if prog is None or has_errors(diags): return 1
  sys.stdout.write(json.dumps(program_to_json(prog), indent=2) + "\n" if fmt == "json" else program_to_tree(prog))
  return 0
