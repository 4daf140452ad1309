"""`hcqdsl diff A.hcq B.hcq`: launch by launch, what differs between two programs (declarations, and each queue's
commands with the launch's values resolved). Exit 0 when they run the same commands, 1 when they differ."""
from __future__ import annotations
from .util import UsageError, read_source, launches_of, launches_arg, add_format_arg, output_format

def add_args(p) -> None:
  p.add_argument("a", help="the first program (e.g. what `hcqdsl emit` derived from tinygrad's schedule)")
  p.add_argument("b", help="the second program (e.g. what `hcqdsl capture` + `lift` recorded from tinygrad's runtime)")
  p.add_argument("--launches", type=int, help="launches to compare (default: A's `# hcq: launches=N`, else 2)")
  add_format_arg(p, "the differences as text, or JSON (`{\"differences\": [...]}`, one a line)", json_alias=True)
  p.add_argument("--match", action="store_true", help="pair devices by index and buffers by how the execs and copies use "
                 "them (a capture's lift names them by address), and compare only those commands")

def run(a) -> int:
  import json, attrs
  from ..check import parse_with_diagnostics
  from ..check.diff import diff_programs, render_changes
  from ..diagnostics import render_text
  from ..ir import Program
  launches_arg(a.launches)
  fmt = output_format(a)
  progs: list[Program] = []
  for path in (a.a, a.b):
    text = read_source(path)
    prog, diags = parse_with_diagnostics(text, path)
    if prog is None or any(d.severity == "error" for d in diags):
      print(render_text([d for d in diags if d.severity == "error"], {path: text}), end="")
      raise UsageError(f"{path} has errors: fix them (`hcqdsl check {path}`) before comparing it")
    progs.append(prog)
  n = launches_of(read_source(a.a), a.a, a.launches)
  from ..check.static import check_launches
  for path, prog in zip((a.a, a.b), progs):   # a var list or per-launch buffer shorter than the launches compared
    if short := check_launches(prog, n):
      print(render_text(short, {path: read_source(path)}), end="")
      raise UsageError(f"{path} lists values for fewer than the {n} launches compared: give --launches at most what it lists")
  changes = diff_programs(progs[0], progs[1], launches=n, match=a.match)
  if fmt == "json": print('{"differences": [' + ",\n ".join(json.dumps(attrs.asdict(c)) for c in changes) + "]}")
  else: print(render_changes(changes, a.a, a.b), end="")
  return 1 if changes else 0
