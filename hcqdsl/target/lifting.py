"""What every vendor's lifter (lift/image.py's packets, nv/lift.py's methods and QMDs) asks of an image when it turns
commands back into statements: which signal an address is, which buffer slice a range of bytes is, and the exception
for a group of commands that is no statement."""
from __future__ import annotations
from typing import Optional
from ..ir import Ref, Slice
from .image import Image

__all__ = ["Unliftable", "signal_at", "buffer_slice"]

class Unliftable(Exception):
  """A group of commands that is no .hcq statement (the message says why; the lifters keep the group as a comment)."""

def signal_at(img: Image, addr: int) -> Optional[str]:
  """The signal whose value is at `addr`, else None."""
  return next((n for n, a in img.signals.items() if a == addr), None)

def buffer_slice(img: Image, addr: int, size: int, patched: bool = True) -> Optional[Slice]:
  """The slice at addr. A dword the host patches per launch holds a rebound buffer's launch-1 address (`x`); a fixed
  one a plain buffer's, or one launch's memory of a rebound buffer (`x@k`). (A capture's lift needs the distinction:
  tinygrad reuses memory, so a rebound buffer's launch-1 address may also be a plain buffer's.)"""
  def piece(n: str, base: int, sz: int, k: Optional[int] = None) -> Slice:
    lo = addr - base
    return Slice(Ref(n), launch=k) if lo == 0 and size == sz else Slice(Ref(n), lo, lo + size, True, k)
  def inside(base, sz):
    return base <= addr and addr + size <= base + sz
  per = {n: img.var_values[f"{n}.addr"] for n in img.buffers if img.var_values.get(f"{n}.addr")}
  if patched:
    for n, (a, sz) in img.buffers.items():
      if n in per and inside(a, sz): return piece(n, a, sz)
  else:
    for n, (a, sz) in img.buffers.items():
      if n not in per and inside(a, sz): return piece(n, a, sz)
    for n, bases in per.items():
      for k, base in enumerate(bases):
        if inside(base, img.buffers[n][1]): return piece(n, base, img.buffers[n][1], k + 1)
  for n, (a, sz) in img.buffers.items():  # whatever holds it (records that disagree with the packets)
    if inside(a, sz): return piece(n, a, sz)
  return None
