"""`hcqdsl compile FILE`: the image (or `--hex` dwords) of a program: PM4/SDMA for AMD devices' queues, pushbuffers
and QMDs for NV devices' (docs/nv.md)."""
from __future__ import annotations
import pathlib, sys
from ..ir import TARGETS
from ..diagnostics import HcqError
from ..vendors import compile_program


def add_args(p) -> None:
  from .util import add_var_arg, add_no_check_arg
  p.add_argument("file", help="a .hcq program")
  p.add_argument("--target", default="gfx1100", choices=TARGETS,
                 help="arch of devices that do not declare one (default gfx1100; an NV device takes an NV target, else sm_89)")
  p.add_argument("-o", "--output", metavar="FILE", help="write the image here (default: FILE with suffix .hcqimg)")
  p.add_argument("--hex", action="store_true", help="print each queue's dwords (patched for launch 1) as `queue NAME ENGINE ARCH: dwords` lines, "
                 "which `hcqdsl disasm` reads back, instead of writing an image")
  add_var_arg(p)
  add_no_check_arg(p)

def run(a) -> int:
  from ..diagnostics import render_text
  from .util import read_source, precheck_launches, parse_vars, check_vars, warn_check_errors, check_output, write_output
  out = a.output or str(pathlib.Path(a.file).with_suffix(".hcqimg"))
  if not a.hex: check_output(out, "-o" if a.output else "the default output (-o)", a.file)
  text = read_source(a.file)
  var_values = parse_vars(a.var)
  from ..check import parse
  try:
    prog = parse(text, a.file)
    check_vars(var_values, prog, a.file)
    img = compile_program(prog, a.target)
  except HcqError as e:
    sys.stderr.write(render_text(e.diagnostics, {a.file: text}))
    return 1
  if not a.no_check: warn_check_errors(prog, a.file, precheck_launches(text, a.file), var_values)
  if a.hex:
    for q in img.queues:
      print(f"queue {q.name} {q.engine} {q.arch}: " + " ".join(f"{x:08x}" for x in img.patched(q, img.env(1, **var_values))))
    return 0
  write_output(out, img.to_bytes())
  sys.stderr.write(f"wrote {out}: {len(img.queues)} queue{'s' * (len(img.queues) != 1)}, "
                   f"{sum(len(q.dwords) for q in img.queues)} dwords, {sum(len(q.patches) for q in img.queues)} patches\n")
  return 0
