"""tinygrad's CPU C for a kernel, in the runtime's calling convention (one pointer per buffer, then the scalars)."""
from __future__ import annotations
import re
from .env import EmitError
from ..host_cc import gcc_compatible

__all__ = ["c_source", "scalar_type", "C_TYPE"]

C_TYPE = {"int": "int", "uint": "unsigned int"}   # tinygrad variable dtypes -> C, and -> .hcq scalar types
_SCALAR = {"int": "i32", "uint": "u32"}

def scalar_type(v, kernel: str) -> str:
  """The .hcq scalar type of tinygrad Variable `v` (a parameter of `kernel`)."""
  if v.dtype.name not in _SCALAR: raise EmitError(f"{kernel}: variable `{v.expr}` is {v.dtype.name}; .hcq scalars are {', '.join(_SCALAR)}")
  return _SCALAR[v.dtype.name]

def c_source(prg, name: str) -> str:
  """tinygrad's CPU C for a PROGRAM, as `void name(T0* p0, T1* p1, ...)` (one pointer per buffer argument): gcc-friendly
  vector typedefs, and a wrapper when tinygrad's signature has more (`core_id` threads)."""
  from tinygrad.uop.ops import Ops
  src = next(s.arg for s in prg.src if s.op is Ops.SOURCE)
  info, fn = prg.arg, prg.arg.function_name
  src = gcc_compatible(src)  # the runtime compiles it with whichever of clang or gcc the machine has
  if list(info.globals) != list(range(len(info.globals))): raise EmitError(f"{fn}: unexpected buffer order {info.globals}")
  extra = [v.expr for v in info.vars]  # symbolic variables are scalar parameters after the buffers, core_id a thread index
  if "core_id" not in extra and fn == name: return src
  if "core_id" not in extra: return re.sub(rf"\b{re.escape(fn)}\(", f"{name}(", src, count=1)
  body = f"{name}_body"
  src = re.sub(rf"\b{re.escape(fn)}\(", f"{body}(", src, count=1)
  n, threads = len(info.globals), info.global_size[0]
  vs = [v for v in info.vars if v.expr != "core_id"]
  ps = ", ".join([f"void* p{i}" for i in range(n)] + [f"{C_TYPE[v.dtype.name]} v{i}" for i, v in enumerate(vs)])
  args = ", ".join([f"p{i}" for i in range(n)] + [f"v{vs.index(v)}" if v.expr != "core_id" else "c" for v in info.vars])
  return src + (f"\n/* tinygrad runs {threads} threads, core_id = 0..{threads - 1} */\nvoid {name}({ps}) {{\n"
                f"  for (int c = 0; c < {threads}; c++) {body}({args});\n}}\n")
