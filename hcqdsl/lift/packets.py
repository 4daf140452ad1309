"""What the packets of a raw stream (a dump's or a capture's ring, no source map) mean to a lift: statement-sized groups,
the signals and buffer words they name, dispatches, indirect buffers spliced in from the manifest's memory."""
from __future__ import annotations
import functools, struct
from typing import Optional
import attrs
from ..ir import Wait, SignalWrite, Epoch, Ref, Expr, U32_MAX, POLL_SIZE, epoch_of, epoch_wait
from ..amd import pm4, sdma
from ..amd.pm4 import FUNC_GE, FUNC_EQ, DATA_SEL_32, DATA_SEL_64, DATA_SEL_CLOCK
from ..target.layout import TIMESTAMP_OFFSET
from ..amd.disasm import decoder
from .schema import LAUNCH_VAR

__all__ = ["group_packets", "signal_addrs", "written_range", "polled_range", "dispatch", "kernarg_at", "Mem", "follow", "hexname",
           "epochs", "field_at", "address_at", "per_launch", "ADDRESS", "PER_LAUNCH", "DATA_BYTES"]

# ---- where a packet's fields sit: from the decoders' layouts (pm4.py's specs, sdma.py's from tinygrad's headers)

@functools.cache
def field_at(engine: str, target: str, packet: str, field: str) -> int:
  """The dword (0: the header) of `packet` that holds `field` (a decoder's name: `addr_lo`, `src_addr_31_0`, ...)."""
  return pm4.field_at(packet, field) if engine == "compute" else sdma.field_at(decoder(engine, target).layouts, packet, field)

# the low dword of the address a packet waits on, writes or polls (the high dword follows it)
ADDRESS = {"WAIT_REG_MEM": "addr_lo", "RELEASE_MEM": "addr_lo", "POLL_REGMEM": "addr_31_0", "FENCE": "addr_31_0",
           "WRITE_UNTILED": "dst_addr_31_0"}

def address_at(engine: str, target: str, p, field: Optional[str] = None) -> int:
  """The dword offset of packet `p`'s address (`field`: which one, by default ADDRESS's) in the stream it was decoded from."""
  return p.offset + field_at(engine, target, p.name, field or ADDRESS[p.name])

# the dwords of a packet that a launch may change, by field: a value (a signal's, a write's, a launch dim), which the
# lift writes as `launch + c` or a listed var, or the low dword of an address the host patches per launch (a copy's
# source or destination: a `rebound` buffer)
PER_LAUNCH = {"WAIT_REG_MEM": {"reference": "value"}, "RELEASE_MEM": {"data_lo": "value"}, "POLL_REGMEM": {"value": "value"},
              "FENCE": {"data": "value"}, "WRITE_UNTILED": {"data0": "value"},
              "DISPATCH_DIRECT": {"dim_x": "value", "dim_y": "value", "dim_z": "value"},
              "COPY_LINEAR": {"src_addr_31_0": "address", "dst_addr_31_0": "address"}}

def per_launch(engine: str, target: str, packet: str) -> list:
  """[(dword in the packet, "value" | "address")] of PER_LAUNCH's fields of `packet`."""
  return [(field_at(engine, target, packet, f), role) for f, role in PER_LAUNCH.get(packet, {}).items()]

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

def signal_addrs(p) -> list:
  """The signals a packet waits on or writes (a `timestamp`'s: the signal whose slot the clock goes to)."""
  f = p.fields
  if p.raw: return []
  # a wait is `>=` on every bit; a masked poll (tinygrad's poll_bit: function `==`, a mask) reads memory, not a signal
  if p.name == "WAIT_REG_MEM" and f.get("mem_space") == 1 and f.get("function") == FUNC_GE and f.get("mask") == U32_MAX: return [f["addr"]]
  if p.name == "RELEASE_MEM" and f.get("data_sel") == DATA_SEL_32 and (f.get("cache_action") or f.get("int_sel")): return [f["addr"]]
  if p.name == "RELEASE_MEM" and f.get("data_sel") == DATA_SEL_CLOCK: return [f["addr"] - TIMESTAMP_OFFSET]
  if p.name == "POLL_REGMEM" and f.get("mem_poll") == 1 and f.get("func") == FUNC_GE and f.get("mask") == U32_MAX: return [f["addr"]]
  if p.name == "FENCE": return [f["addr"]]
  if p.name == "TIMESTAMP_GET_GLOBAL": return [f["write_addr"] - TIMESTAMP_OFFSET]
  return []

DATA_BYTES = {DATA_SEL_32: 4, DATA_SEL_64: 8}   # what a RELEASE_MEM of that data_sel stores

def written_range(p) -> Optional[tuple]:
  """(address, bytes) a `write` packet stores (tinygrad's HWQueue.write: RELEASE_MEM with no cache action, SDMA WRITE)."""
  f = p.fields
  if p.raw: return None
  if p.name == "RELEASE_MEM" and f.get("data_sel") in DATA_BYTES and not f.get("cache_action") and not f.get("int_sel"):
    return f["addr"], DATA_BYTES[f["data_sel"]]
  if p.name == "WRITE_UNTILED" and f.get("count") in (0, 1): return f["dst_addr"], 4 * (f["count"] + 1)
  return None

def polled_range(p) -> Optional[tuple]:
  """(address, 4) of the word a `poll` packet reads (tinygrad's poll_bit: WAIT_REG_MEM, memory, function `==`)."""
  f = p.fields
  if p.raw or p.name != "WAIT_REG_MEM" or f.get("mem_space") != 1 or f.get("function") != FUNC_EQ: return None
  return f["addr"], POLL_SIZE

def kernarg_at(user_data) -> int:
  """The dword offset of the kernel-argument pointer (lo, hi) in the SET_SH_REG of COMPUTE_USER_DATA_0: its last two
  values (tinygrad puts the pointer after the dispatch packet's and the scratch's words)."""
  return user_data.offset + user_data.length - 2

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

def follow(dw: list, engine: str, target: str, mem: Mem, depth: int = 0) -> list:
  """Packets of `dw` with indirect buffers whose contents the manifest holds spliced in (their packets keep the
  offset of the IB packet, so comments point at the ring). Returns (packets, notes)."""
  pk = decoder(engine, target).decode(dw)
  out = []
  for p in pk:
    ib = (p.fields.get("ib_base"), p.fields.get("ib_size")) if p.name in ("INDIRECT_BUFFER", "INDIRECT") and not p.raw else None
    if ib is None or None in ib or depth > 2:
      out.append(p)
      continue
    b = mem.read(ib[0], 4 * ib[1])
    if b is None:
      out.append(attrs.evolve(p, note=f"indirect buffer at {ib[0]:#x} ({ib[1]} dwords) is not in the manifest's memory"))
      continue
    sub = follow(list(struct.unpack(f"<{len(b) // 4}I", b)), engine, target, mem, depth + 1)
    out += [attrs.evolve(x, offset=p.offset) for x in sub]
  return out

def hexname(prefix: str, a: int) -> str: return f"{prefix}_{a:x}"

def epochs(s, device: Optional[str]):
  """A value on `D.timeline` that grows by one per launch is `D.epoch + c`; the queue's own `wait D.timeline >=
  D.epoch - 1` is `epoch` (every var is k in launch k, so this is the same program)."""
  if not isinstance(s, (Wait, SignalWrite)) or not s.signal.name.endswith(".timeline") or s.value.var != Ref(LAUNCH_VAR): return s
  d = s.signal.name[:-len(".timeline")]
  s = attrs.evolve(s, value=Expr(Ref(epoch_of(d)), s.value.offset))
  return Epoch(comments=s.comments, comment=s.comment) if d == device and s == epoch_wait(d) else s

