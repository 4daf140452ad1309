"""`--amd-code`: tinygrad's AMD code objects (gfx1100 ELF) for a schedule's kernels, lowered from the device-independent
AST by tinygrad's AMD LLVM renderer and compiler, and attached to a program (`amd "NAME.co"`, launch dims)."""
from __future__ import annotations
import pathlib
from typing import Optional
import attrs
from ..ir import Program, Kernel, Queue, Exec, Expr, Ref
from .env import EmitError
from .schedule import Schedule, schedule

__all__ = ["AMD_ARCH", "LLVM_HINT", "amd_renderer", "amd_code", "amd_code_unavailable", "attach_amd_code"]

AMD_ARCH = "gfx1100"

def amd_renderer(arch: str = AMD_ARCH):
  """tinygrad's AMD LLVM renderer for `arch`, built the way `DEV=AMD:AMDLLVM:gfx1100` builds it (0.14 renderers take a
  Target); its compiler loads libLLVM (Debian: libllvm19)."""
  from tinygrad.helpers import Target
  from tinygrad.renderer.llvmir import AMDLLVMRenderer
  return AMDLLVMRenderer(Target(device="AMD", renderer="AMDLLVM", arch=arch))

LLVM_HINT = "tinygrad's AMD LLVM backend needs libLLVM 19 (Debian: apt-get install libllvm19)"

def amd_code_unavailable(arch: str = AMD_ARCH) -> Optional[str]:
  """None when `--amd-code` works on this machine, else why (a one-element kernel compiled for `arch` as the probe:
  with only an older libLLVM, tinygrad loads it and fails at the first compile)."""
  if arch not in _amd_probe:
    try:
      from tinygrad import Tensor
      amd_code(schedule(Tensor([1.0, 2.0]).contiguous() + 1), arch)
      _amd_probe[arch] = None
    except Exception as e: _amd_probe[arch] = f"{e}".splitlines()[0]
  return _amd_probe[arch]
_amd_probe: dict = {}

def amd_code(s: Schedule, arch: str = AMD_ARCH) -> dict:
  """kernel name -> (ELF code object bytes, global_size, local_size): each kernel's AST lowered and compiled for `arch`
  by tinygrad (its own AMD optimizations, so the launch dims are AMD's, not the CPU's)."""
  from tinygrad.uop.ops import Ops
  from tinygrad.codegen import to_program
  try: ren = amd_renderer(arch)
  except Exception as e: raise EmitError(f"--amd-code: {LLVM_HINT}: {type(e).__name__}: {e}")
  out = {}
  for k in s.kernels:
    if (ast := s.asts.get(k.name)) is None: raise EmitError(f"--amd-code: no tinygrad AST for kernel {k.name}")
    try: prg = to_program(ast, ren)
    except Exception as e:
      raise EmitError(f"--amd-code: compiling {k.name} for {arch} failed ({LLVM_HINT}): {type(e).__name__}: {e}")
    info = prg.arg
    # hcqdsl passes one pointer per buffer parameter, in order, then the scalars (kernarg_layout): the code object must
    # take exactly that (tinygrad's AMD kernargs are the same: buffer pointers, then its variables as 32-bit ints)
    scalars = [p.name for p in k.params if p.scalar]
    nbuf = len(k.params) - len(scalars)
    if list(info.globals) != list(range(nbuf)) or len(info.vars) != len(scalars):
      raise EmitError(f"--amd-code: {k.name}: unexpected {arch} signature (buffers {info.globals}, vars {[v.expr for v in info.vars]})")
    names = {v.expr: n for v, n in zip(info.vars, scalars)}  # tinygrad's variable -> the .hcq var (emit may rename)
    lib = next(x.arg for x in prg.src if x.op is Ops.BINARY)
    out[k.name] = (lib, tuple(_dim(x, names, k.name) for x in info.global_size), tuple(_dim(x, names, k.name) for x in info.local_size))
  return out

def _dim(x, names: dict, kernel: str):
  """A launch dimension as .hcq writes it: an int, or `var + c` (tinygrad recomputes symbolic dims per call)."""
  from tinygrad.uop.ops import Ops
  if isinstance(x, int): return x
  if x.op is Ops.PARAM and x.arg.name in names: return Expr(Ref(names[x.arg.name]))
  if x.op is Ops.ADD and x.src[0].op is Ops.PARAM and x.src[0].arg.name in names and x.src[1].op is Ops.CONST:
    return Expr(Ref(names[x.src[0].arg.name]), int(x.src[1].arg))
  raise EmitError(f"--amd-code: {kernel}: launch dimension `{x.render()}` is not a var plus a constant (what .hcq launch dims take)")

def attach_amd_code(prog: Program, s: Schedule, outdir: pathlib.Path, arch: str = AMD_ARCH) -> Program:
  """Write each kernel's gfx1100 code object to OUTDIR/NAME.co, reference it (`amd "NAME.co"`), and give every exec of
  it tinygrad's AMD launch dims (grid = workgroups, block = workgroup size; the C kernels ignore them)."""
  code = amd_code(s, arch)
  for name, (lib, _, _) in code.items(): (outdir / f"{name}.co").write_bytes(lib)
  def dims(st):
    if not isinstance(st, Exec) or st.kernel.name not in code: return st
    _, g, l = code[st.kernel.name]
    return attrs.evolve(st, grid=g, block=l)
  decls = []
  for d in prog.decls:
    if isinstance(d, Kernel) and d.name in code and d.impl is not None: d = attrs.evolve(d, impl=attrs.evolve(d.impl, amd_code=f"{d.name}.co"))
    elif isinstance(d, Queue): d = attrs.evolve(d, body=tuple(dims(st) for st in d.body))
    decls.append(d)
  return attrs.evolve(prog, decls=tuple(decls))

