"""What the packets of a raw stream (a dump's or a capture's ring, no source map) mean to a lift: statement-sized groups,
the signals and buffer words they name, dispatches, indirect buffers spliced in from the manifest's memory."""
from __future__ import annotations
import re, struct
from typing import Optional
import attrs
from ..ir import Wait, SignalWrite, Epoch, Ref, Expr, U32_MAX, POLL_SIZE
from ..amd.pm4 import FUNC_EQ
from ..amd.disasm import decoder
from .schema import LAUNCH_VAR

__all__ = ["group_packets", "signal_addrs", "written_range", "polled_range", "dispatch", "Mem", "follow", "hexname", "epochs", "ident"]

def group_packets(pk: list, engine: str) -> list:
  """Statement-sized groups of packets, by the shapes hcqdsl and tinygrad emit; anything else is a group of one."""
  out, i, n = [], 0, len(pk)
  name = lambda j: pk[j].name if j < n and not pk[j].raw else None
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
      elif p.name in ("NOP", "TYPE2_NOP"): i += 1; continue
    else:
      if p.name == "NOP": i += 1; continue
      if p.name == "COPY_LINEAR":
        while name(i + take) == "COPY_LINEAR":
          a, b = pk[i + take - 1].fields, pk[i + take].fields
          if b["src_addr"] != a["src_addr"] + a["count"] + 1 or b["dst_addr"] != a["dst_addr"] + a["count"] + 1: break
          take += 1
    out.append(pk[i:i + take]); i += take
  return out

def signal_addrs(p) -> list:
  f = p.fields
  if p.raw: return []
  # a masked poll (tinygrad's poll_bit: function `==`, a mask) reads memory, not a signal
  if p.name == "WAIT_REG_MEM" and f.get("mem_space") == 1 and f.get("function") == 5 and f.get("mask") == U32_MAX: return [f["addr"]]
  if p.name == "RELEASE_MEM" and f.get("data_sel") == 1 and (f.get("cache_action") or f.get("int_sel")): return [f["addr"]]
  if p.name == "RELEASE_MEM" and f.get("data_sel") == 3: return [f["addr"] - 8]
  if p.name == "POLL_REGMEM" and f.get("mem_poll") == 1 and f.get("func") == 5 and f.get("mask") == U32_MAX: return [f["addr"]]
  if p.name == "FENCE": return [f["addr"]]
  if p.name == "TIMESTAMP_GET_GLOBAL": return [f["write_addr"] - 8]
  return []

def written_range(p) -> Optional[tuple]:
  """(address, bytes) a `write` packet stores (tinygrad's HWQueue.write: RELEASE_MEM with no cache action, SDMA WRITE)."""
  f = p.fields
  if p.raw: return None
  if p.name == "RELEASE_MEM" and f.get("data_sel") in (1, 2) and not f.get("cache_action") and not f.get("int_sel"): return f["addr"], 4 * f["data_sel"]
  if p.name == "WRITE_UNTILED" and f.get("count") in (0, 1): return f["dst_addr"], 4 * (f["count"] + 1)
  return None

def polled_range(p) -> Optional[tuple]:
  """(address, 4) of the word a `poll` packet reads (tinygrad's poll_bit: WAIT_REG_MEM, memory, function `==`)."""
  f = p.fields
  if p.raw or p.name != "WAIT_REG_MEM" or f.get("mem_space") != 1 or f.get("function") != FUNC_EQ: return None
  return f["addr"], POLL_SIZE

def dispatch(g: list) -> Optional[tuple]:
  """(program address, kernarg address) of an exec group."""
  regs = {p.fields["reg"]: p.fields["values"] for p in g if p.name == "SET_SH_REG"}
  pgm, user = regs.get("regCOMPUTE_PGM_LO"), regs.get("regCOMPUTE_USER_DATA_0")
  if not any(p.name == "DISPATCH_DIRECT" for p in g) or not pgm or len(pgm) < 2 or not user or len(user) < 2: return None
  return ((pgm[1] << 32) | pgm[0]) << 8, (user[-1] << 32) | user[-2]

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

def follow(dw: list, engine: str, target: str, mem: Mem, depth: int = 0) -> tuple:
  """Packets of `dw` with indirect buffers whose contents the manifest holds spliced in (their packets keep the
  offset of the IB packet, so comments point at the ring). Returns (packets, notes)."""
  pk = decoder(engine, target).decode(dw)
  out = []
  for p in pk:
    ib = (p.fields.get("ib_base"), p.fields.get("ib_size")) if p.name in ("INDIRECT_BUFFER", "INDIRECT") and not p.raw else None
    if ib is None or None in ib or depth > 2: out.append(p); continue
    b = mem.read(ib[0], 4 * ib[1])
    if b is None:
      out.append(attrs.evolve(p, note=f"indirect buffer at {ib[0]:#x} ({ib[1]} dwords) is not in the manifest's memory")); continue
    sub = follow(list(struct.unpack(f"<{len(b) // 4}I", b)), engine, target, mem, depth + 1)
    out += [attrs.evolve(x, offset=p.offset) for x in sub]
  return out

def hexname(prefix: str, a: int) -> str: return f"{prefix}_{a:x}"

def epochs(s, device: Optional[str]):
  """A value on `D.timeline` that grows by one per launch is `D.epoch + c`; the queue's own `wait D.timeline >=
  D.epoch - 1` is `epoch` (every var is k in launch k, so this is the same program)."""
  if not isinstance(s, (Wait, SignalWrite)) or not s.signal.name.endswith(".timeline") or s.value.var != Ref(LAUNCH_VAR): return s
  d = s.signal.name[:-len(".timeline")]
  e = Expr(Ref(f"{d}.epoch"), s.value.offset)
  if isinstance(s, Wait) and d == device and e.offset == -1: return Epoch(comments=s.comments, comment=s.comment)
  return attrs.evolve(s, value=e)

def ident(name) -> str:
  name = re.sub(r"\x1b\[[0-9;]*m", "", str(name or "v"))  # tinygrad's names may carry terminal colors
  out = "".join(c if c.isalnum() or c == "_" else "_" for c in str(name or "v")) or "v"
  return out if not out[0].isdigit() else "v_" + out
