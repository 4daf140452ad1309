"""How a lift reads a raw stream (a dump's or a capture's ring, no source map): the manifest's memory (`Mem`, what
indirect buffers are spliced in from) and the names it gives what it finds. What a packet means is amd/meaning.py's,
how AMD packets group into statements amd/lift.py's."""
from __future__ import annotations
from typing import Optional
import attrs
from ..ir import Wait, SignalWrite, Epoch, Ref, Expr, epoch_of, epoch_wait
from .schema import LAUNCH_VAR

__all__ = ["Mem", "hexname", "epochs"]

class Mem:
  def __init__(self, chunks): self.chunks = sorted(chunks)
  def read(self, addr: int, n: int) -> Optional[bytes]:
    for a, b in self.chunks:
      if a <= addr and addr + n <= a + len(b): return b[addr - a:addr - a + n]
    return None
  def block(self, addr: int) -> Optional[bytes]:
    for a, b in self.chunks:
      if a <= addr < a + len(b): return b[addr - a:]
    return None

def hexname(prefix: str, a: int) -> str: return f"{prefix}_{a:x}"

def epochs(s, device: Optional[str]):
  """A value on `D.timeline` that grows by one per launch is `D.epoch + c`; the queue's own `wait D.timeline >=
  D.epoch - 1` is `epoch` (every var is k in launch k, so this is the same program)."""
  if not isinstance(s, (Wait, SignalWrite)) or not s.signal.name.endswith(".timeline") or s.value.var != Ref(LAUNCH_VAR): return s
  d = s.signal.name[:-len(".timeline")]
  s = attrs.evolve(s, value=Expr(Ref(epoch_of(d)), s.value.offset))
  return Epoch(comments=s.comments, comment=s.comment) if d == device and s == epoch_wait(d) else s
