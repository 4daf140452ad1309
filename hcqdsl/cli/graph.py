"""`hcqdsl graph FILE`: the queues and signal edges of a program as DOT, SVG, PNG or PDF."""
from __future__ import annotations
import shutil, subprocess, sys
from ..graph import to_dot


def add_args(p) -> None:
  from .util import add_var_arg
  p.add_argument("file", help="a .hcq program")
  p.add_argument("-o", "--output", metavar="OUT", help="OUT.dot (DOT text), OUT.svg (through Graphviz `dot`, else hcqdsl's "
                 "own layout), or OUT.png / OUT.pdf (through `dot`); default: DOT text on stdout")
  p.add_argument("--launches", type=int, help="launches to check and to follow signal edges over (default: the file's "
                 "`# hcq: launches=N`, else 2)")
  add_var_arg(p)

def run(a) -> int:
  from .util import read_source, launches_of, launches_arg, parse_vars, check_vars, UsageError, check_output, write_output
  from ..lang.parse import parse_syntax
  from ..diagnostics import render_text
  from ..check import check
  launches_arg(a.launches)
  check_output(a.output, "-o", a.file)
  var_values = parse_vars(a.var)
  text = read_source(a.file)
  a.launches = launches_of(text, a.file, a.launches, 2)
  prog, diags = parse_syntax(text, a.file)
  if prog is not None and not any(d.code == "syntax" for d in diags): check_vars(var_values, prog, a.file)
  # a program with syntax or name errors has no meaning to draw; bounds and overflow errors are drawn in red
  diags = diags if prog is None or any(d.code == "syntax" for d in diags) else diags + check(prog, a.launches, var_values)
  bad = [d for d in diags if d.code in ("syntax", "name") and d.severity == "error"]
  if not bad and prog is not None:   # a var list or per-launch buffer shorter than the launches: no launch-k value to draw
    from ..check.static import check_launches
    bad = check_launches(prog, a.launches, var_values)
  if bad:
    sys.stderr.write(render_text(bad, {a.file: text}))
    return 1
  assert prog is not None   # (no program: a syntax error, reported above)
  dot = to_dot(prog, diags, a.launches, var_values)
  if not a.output:
    sys.stdout.write(dot)
    return 0
  fmt = a.output.rsplit(".", 1)[-1].lower() if "." in a.output else "dot"
  if fmt in ("dot", "gv"):
    write_output(a.output, dot)
    return 0
  if fmt not in ("svg", "png", "pdf"): raise UsageError(f"{a.output}: write .dot, .svg, .png or .pdf")
  exe = shutil.which("dot")
  if exe is None and fmt == "svg":   # no Graphviz: hcqdsl's own layout of the same graph (hcqdsl/graph.py)
    from ..graph import dot_to_svg
    write_output(a.output, dot_to_svg(dot))
    return 0
  if exe is None: raise UsageError(f"{a.output}: Graphviz `dot` is not installed (apt-get install graphviz), or write .svg or .dot")
  r = subprocess.run([exe, f"-T{fmt}"], input=dot.encode(), capture_output=True)
  if r.returncode != 0:
    sys.stderr.write(r.stderr.decode(errors="replace"))
    return 1
  write_output(a.output, r.stdout)   # (whole or not at all, as every output)
  return 0
