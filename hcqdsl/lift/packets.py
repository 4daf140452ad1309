"""How a lift reads a raw stream (a dump's or a capture's ring, no source map): statement-sized groups of packets, the
manifest's memory (`Mem`, what indirect buffers are spliced in from), and the names it gives what it finds. What a
packet means is amd/meaning.py's."""
from __future__ import annotations
import re
from typing import Optional
import attrs
from ..ir import Wait, SignalWrite, Epoch, Ref, Expr, epoch_of, epoch_wait
from .schema import LAUNCH_VAR

__all__ = ["group_packets", "Mem", "hexname", "epochs", "ident"]

# ---- what a stream's packets are

def group_packets(pk: list, engine: str) -> list:
  """Statement-sized groups of packets, by the shapes hcqdsl and tinygrad emit; anything else is a group of one."""
  out, i, n = [], 0, len(pk)
  def name(j):
    return pk[j].name if j < n and not pk[j].raw else None
  while i < n:
    p, f = pk[i], pk[i].fields
    take = 1
    if p.raw:  # a run of the same bad dword (unwritten ring space) is one comment
      while i + take < n and pk[i + take].raw and pk[i + take].note == p.note and pk[i + take].length == p.length == 1: take += 1
    elif engine == "compute":
      if p.name == "WAIT_REG_MEM" and f.get("mem_space") == 0 and name(i + 1) == "ACQUIRE_MEM": take = 2
      elif p.name == "RELEASE_MEM" and f.get("data_sel") == 0 and name(i + 1) == "RELEASE_MEM" and name(i + 2) == "ACQUIRE_MEM": take = 3
      elif p.name == "ACQUIRE_MEM":
        j = i + 1
        while name(j) == "SET_SH_REG": j += 1
        if name(j) == "DISPATCH_DIRECT": take = j - i + 1 + (name(j + 1) == "EVENT_WRITE")
      elif p.name in ("NOP", "TYPE2_NOP"):
        i += 1
        continue
    else:
      if p.name == "NOP":
        i += 1
        continue
      if p.name == "COPY_LINEAR":
        while name(i + take) == "COPY_LINEAR":
          a, b = pk[i + take - 1].fields, pk[i + take].fields
          if b["src_addr"] != a["src_addr"] + a["count"] + 1 or b["dst_addr"] != a["dst_addr"] + a["count"] + 1: break
          take += 1
    out.append(pk[i:i + take])
    i += take
  return out

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

def ident(name) -> str:
  name = re.sub(r"\x1b\[[0-9;]*m", "", str(name or "v"))  # tinygrad's names may carry terminal colors
  out = "".join(c if c.isalnum() or c == "_" else "_" for c in str(name or "v")) or "v"
  return out if not out[0].isdigit() else "v_" + out
