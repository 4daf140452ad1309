"""The tinygrad process emit runs in, set up when emit is used, never on import.

emit schedules and runs tensors on tinygrad's CPU devices: `DEV=CPU` unless the user set `DEV`, and `CC` pointed at
the gcc wrapper when there is no clang (host_cc.use_for_tinygrad). Both must hold before tinygrad first picks its
default device (it opens every device it tries, and the CPU device compiles its queue workers then) and before it
first reads `CC`. `prepare()` does it; every emit entry point calls it before touching tinygrad, and
`hcqdsl.emit`/`hcqdsl.emit_jit` call it when looked up on the package, which Python does before it builds the
arguments of `hcqdsl.emit(Tensor(...))`. Importing a module of hcqdsl changes nothing."""
from __future__ import annotations
import os

__all__ = ["EmitError", "prepare", "tinygrad"]

class EmitError(Exception):
  """Why a tinygrad schedule or TinyJit cannot become a program (printed as `hcqdsl: error: ...` by the CLI)."""

def prepare() -> str | None:
  """`DEV=CPU` unless set, and a compiler for tinygrad's CPU device; returns why not when there is no compiler."""
  from ..host_cc import use_for_tinygrad, NoCompilerError
  os.environ.setdefault("DEV", "CPU")
  try: use_for_tinygrad()
  except NoCompilerError as e: return str(e)
  return None

def tinygrad():
  """The tinygrad package, after `prepare()`; an EmitError when tinygrad's CPU device cannot compile."""
  if (err := prepare()) is not None: raise EmitError(err)
  import tinygrad as tg
  return tg
