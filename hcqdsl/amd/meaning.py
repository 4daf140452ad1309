"""What AMD's packets mean, stated once: for each decoded PM4 or SDMA packet, which statement kind it is (wait, signal,
write, poll, timestamp, indirect buffer, barrier; a dispatch from the registers its SET_SH_REGs set) and where its
fields sit. Every consumer (capture, the lifts, the emulator's engine, the RDNA3 executor) asks this module; none
re-derives a packet's meaning from its fields. The rules are a table (`MEANINGS`), first match per packet wins."""
from __future__ import annotations
import functools, struct
from typing import Callable, Optional
import attrs
from ..ir import U32_MAX, POLL_SIZE
from ..target.layout import TIMESTAMP_OFFSET
from .pm4 import FUNC_GE, FUNC_EQ, DATA_SEL_32, DATA_SEL_64, DATA_SEL_CLOCK
from .disasm import decoder
from .targets import get_target
from . import pm4, sdma

__all__ = ["Meaning", "Rule", "Dispatch", "MEANINGS", "KINDS", "SIGNALS", "SIGNAL_MEMORY", "MEMORY_WAITS", "STORES", "DATA_BYTES", "PER_LAUNCH",
           "meaning", "field_at", "address_at", "per_launch", "signal_addrs", "written_range", "polled_range", "program_address",
           "kernarg_address", "kernarg_at", "dispatch", "Registers", "KernelRegisters", "kernel_registers", "splice", "IB_DEPTH",
           "WPTR_BYTES", "pointer_dwords", "pm4_header"]

# bytes one step of a ring's write (and read) pointer covers, per engine: the CP counts a PM4 ring's pointer in dwords,
# the SDMA engine its ring's in bytes (tinygrad's AMDQueueDesc.put_value: `+= len(cmds)` on compute queues, `+= 4 *
# len(cmds)` on SDMA). Ring position of pointer p: p * WPTR_BYTES[engine] bytes from the ring's start (mod its size)
WPTR_BYTES = {"compute": 4, "copy": 1}

def pointer_dwords(engine: str, old: int, new: int) -> range:
  """The dwords (counted from the ring's start, not wrapped) a ring's write pointer covers moving from `old` to `new`."""
  b = WPTR_BYTES[engine]
  return range(old * b >> 2, new * b >> 2)

def pm4_header(h: int) -> tuple:
  """(body dwords, opens an indirect buffer) of the PM4 packet whose header dword is `h`: what a CP stepping a ring a
  packet at a time reads of it (tinygrad/mock_order.py's, on the mock GPU)."""
  typ3 = pm4.packet_type(h) == pm4.pm4_nv.PACKET_TYPE3
  return pm4.packet_count(h) if typ3 else -1, typ3 and pm4.packet_opcode(h) == pm4.pm4_nv.PACKET3_INDIRECT_BUFFER

DATA_BYTES = {DATA_SEL_32: 4, DATA_SEL_64: 8}   # what a RELEASE_MEM of that data_sel stores

# the kinds a packet may mean; `compare` (a memory wait that is no `wait` nor `poll`: another function or a mask) and
# `release` (a 64-bit store with a cache action) are no .hcq statement, `store` is an SDMA WRITE longer than a `write`
# `acquire` (ACQUIRE_MEM: caches invalidated) ends a barrier's, a timestamp's and a dispatch's packets; `interrupt` is
# the KFD's (SDMA TRAP), which orders nothing
KINDS = ("wait", "signal", "write", "poll", "timestamp", "indirect", "barrier", "compare", "release", "store", "acquire", "dispatch", "copy",
         "interrupt")
SIGNALS = ("wait", "signal", "timestamp")   # the kinds that name a signal, as the lifts classify them
# what capture records as a signal's memory (its value read before the GPU runs): a superset of SIGNALS, so that what
# the lifters later classify was recorded
SIGNAL_MEMORY = SIGNALS + ("compare", "release")
MEMORY_WAITS = ("wait", "poll", "compare")   # the kinds whose packet waits until a word of memory compares true
STORES = ("write", "store")                 # the kinds that store into memory a buffer may hold (capture records its use)

@attrs.frozen
class Rule:
  """One row of MEANINGS: `packet` means `kind` when `when(fields)`; its address in field `addr` (the decoder's joined
  64-bit field, `addr_lo` the dword of its low half), the value compared or stored in `value`, `size(fields)` bytes;
  a memory wait's `mask` and compare `function` in those fields."""
  packet: str
  kind: str
  when: Callable[[dict], bool]
  addr: Optional[str] = None
  addr_lo: Optional[str] = None
  value: Optional[str] = None
  size: Callable[[dict], int] = lambda f: 0
  bias: int = 0          # subtracted from the address: a timestamp's clock sits TIMESTAMP_OFFSET into its signal's slot
  mask: Optional[str] = None
  function: Optional[str] = None
  src: Optional[str] = None      # a copy's source address (`addr` its destination), `src_lo` the dword of its low half
  src_lo: Optional[str] = None

def _mem_wait(f: dict) -> bool: return f.get("mem_space") == 1
def _plain_store(f: dict) -> bool: return f.get("data_sel") in DATA_BYTES and not f.get("cache_action") and not f.get("int_sel")
def _four(f: dict) -> int: return 4

MEANINGS: tuple = (
  # PM4 (compute queues)
  Rule("WAIT_REG_MEM", "poll", lambda f: _mem_wait(f) and f.get("function") == FUNC_EQ, "addr", "addr_lo", "reference", lambda f: POLL_SIZE,
       mask="mask", function="function"),
  Rule("WAIT_REG_MEM", "wait", lambda f: _mem_wait(f) and f.get("function") == FUNC_GE and f.get("mask") == U32_MAX, "addr", "addr_lo",
       "reference", _four, mask="mask", function="function"),
  Rule("WAIT_REG_MEM", "compare", _mem_wait, "addr", "addr_lo", "reference", _four, mask="mask", function="function"),
  Rule("WAIT_REG_MEM", "barrier", lambda f: f.get("mem_space") == 0),   # the HDP flush's done register, then ACQUIRE_MEM
  Rule("ACQUIRE_MEM", "acquire", lambda f: True),
  Rule("RELEASE_MEM", "write", _plain_store, "addr", "addr_lo", "data_lo", lambda f: DATA_BYTES[f["data_sel"]]),   # HWQueue.write
  Rule("RELEASE_MEM", "signal", lambda f: f.get("data_sel") == DATA_SEL_32, "addr", "addr_lo", "data_lo", _four),
  Rule("RELEASE_MEM", "release", lambda f: f.get("data_sel") == DATA_SEL_64, "addr", "addr_lo", "data_lo", lambda f: 8),
  Rule("RELEASE_MEM", "timestamp", lambda f: f.get("data_sel") == DATA_SEL_CLOCK, "addr", "addr_lo", None, lambda f: 8, TIMESTAMP_OFFSET),
  Rule("DISPATCH_DIRECT", "dispatch", lambda f: True),   # its program and kernel arguments: dispatch(), from the registers set before it
  Rule("INDIRECT_BUFFER", "indirect", lambda f: True, "ib_base", "ib_base_lo", None, lambda f: 4 * f["ib_size"]),
  # SDMA (copy queues)
  Rule("POLL_REGMEM", "wait", lambda f: f.get("mem_poll") == 1 and f.get("func") == FUNC_GE and f.get("mask") == U32_MAX, "addr",
       "addr_31_0", "value", _four, mask="mask", function="func"),
  Rule("POLL_REGMEM", "compare", lambda f: f.get("mem_poll") == 1, "addr", "addr_31_0", "value", _four, mask="mask", function="func"),
  Rule("FENCE", "signal", lambda f: True, "addr", "addr_31_0", "data", _four),
  Rule("TIMESTAMP_GET_GLOBAL", "timestamp", lambda f: True, "write_addr", "write_addr_31_3", None, lambda f: 8, TIMESTAMP_OFFSET),
  Rule("WRITE_UNTILED", "write", lambda f: f.get("count") in (0, 1), "dst_addr", "dst_addr_31_0", "data0", lambda f: 4 * (f["count"] + 1)),
  Rule("WRITE_UNTILED", "store", lambda f: True, "dst_addr", "dst_addr_31_0", "data0", lambda f: 4 * (f["count"] + 1)),
  Rule("COPY_LINEAR", "copy", lambda f: True, "dst_addr", "dst_addr_31_0", None, lambda f: f["count"] + 1, src="src_addr", src_lo="src_addr_31_0"),
  Rule("TRAP", "interrupt", lambda f: True),   # the KFD's interrupt after a signal's mailbox FENCE: orders nothing
  Rule("INDIRECT", "indirect", lambda f: True, "ib_base", "ib_base_31_0", None, lambda f: 4 * f["ib_size"]),
)
assert {r.kind for r in MEANINGS} <= set(KINDS)
_BY_PACKET: dict = {}
for _r in MEANINGS: _BY_PACKET.setdefault(_r.packet, []).append(_r)

@attrs.frozen
class Meaning:
  """What one packet means: its kind, the address it waits on, stores to, reads or points at (a timestamp: its
  signal's), the bytes there, the value it compares or stores, and the fields holding the address's low dword and the
  value (a decoder's names, for field_at); a memory wait's mask and compare function (pm4.WAIT_FUNCTIONS' codes); a
  copy's source address and its field (`addr` the destination's, `size` the bytes)."""
  kind: str
  addr: Optional[int] = None
  size: int = 0
  value: Optional[int] = None
  addr_field: Optional[str] = None
  value_field: Optional[str] = None
  mask: Optional[int] = None
  function: Optional[int] = None
  src: Optional[int] = None
  src_field: Optional[str] = None

  def continued_by(self, b: Meaning) -> bool:
    """`b`, a copy, copies on where this one ended: two pieces of one split copy."""
    if self.src is None or self.addr is None or b.src is None or b.addr is None: return False
    return b.src == self.src + self.size and b.addr == self.addr + self.size

def meaning(p) -> Optional[Meaning]:
  """What packet `p` (a decoded PM4 or SDMA packet) means, by MEANINGS; None: nothing a statement says."""
  if p.raw: return None
  f = p.fields
  for r in _BY_PACKET.get(p.name, ()):
    if r.when(f):
      a = f.get(r.addr) if r.addr else None
      return Meaning(r.kind, None if a is None else a - r.bias, r.size(f), f.get(r.value) if r.value else None, r.addr_lo, r.value,
                     f.get(r.mask) if r.mask else None, f.get(r.function) if r.function else None, f.get(r.src) if r.src else None, r.src_lo)
  return None

# ---- where a packet's fields sit: from the decoders' layouts (pm4.py's specs, sdma.py's from tinygrad's headers)

@functools.cache
def field_at(engine: str, target: str, packet: str, field: str) -> int:
  """The dword (0: the header) of `packet` that holds `field` (a decoder's name: `addr_lo`, `src_addr_31_0`, ...)."""
  return pm4.field_at(packet, field) if engine == "compute" else sdma.field_at(decoder(engine, target).layouts, packet, field)

def address_at(engine: str, target: str, p, field: Optional[str] = None) -> int:
  """The dword offset of packet `p`'s address (`field`: which one, by default its meaning's) in the stream it was decoded from."""
  if field is None and (m := meaning(p)) is not None: field = m.addr_field
  if field is None: raise ValueError(f"{p.name} names no address")
  return p.offset + field_at(engine, target, p.name, field)

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

# ---- the questions the lifts ask of one packet

def signal_addrs(p) -> list:
  """The signals a packet waits on or writes (a `timestamp`'s: the signal whose slot the clock goes to)."""
  m = meaning(p)
  return [m.addr] if m is not None and m.kind in SIGNALS else []

def written_range(p) -> Optional[tuple]:
  """(address, bytes) a `write` packet stores (tinygrad's HWQueue.write: RELEASE_MEM with no cache action, SDMA WRITE)."""
  m = meaning(p)
  return (m.addr, m.size) if m is not None and m.kind == "write" else None

def polled_range(p) -> Optional[tuple]:
  """(address, 4) of the word a `poll` packet reads (tinygrad's poll_bit: WAIT_REG_MEM, memory, function `==`)."""
  m = meaning(p)
  return (m.addr, m.size) if m is not None and m.kind == "poll" else None

# ---- dispatches: the program at COMPUTE_PGM_LO/HI (address >> 8), the kernel arguments at the pointer in the last two
# COMPUTE_USER_DATA registers (tinygrad puts it after the dispatch packet's and the scratch's words)

PGM_REG, USER_DATA_REG, START_REG = "regCOMPUTE_PGM_LO", "regCOMPUTE_USER_DATA_0", "regCOMPUTE_START_X"

@attrs.frozen
class Dispatch:
  """A DISPATCH_DIRECT's program address and kernel-argument address; its grid (DIM_X..Z) and the dword offset of
  DIM_X; the workgroup size (COMPUTE_NUM_THREAD_X..Z, the values after COMPUTE_START_X..Z: None when not set) and the
  dword offset of NUM_THREAD_X — the offsets in the stream decoded, where a launch's patches sit."""
  program: int
  kernargs: int
  grid: tuple = (1, 1, 1)
  grid_at: int = 0
  block: Optional[tuple] = None
  block_at: Optional[int] = None
  kernargs_at: int = 0   # the dword offset of the kernel-argument pointer (lo, hi): where a launch's pointer sits
  program_at: int = 0    # the dword offset of COMPUTE_PGM_LO (then PGM_HI): where the program address sits

def program_address(pgm) -> int:
  """The program address COMPUTE_PGM_LO, COMPUTE_PGM_HI (`pgm`: their two values) hold."""
  return ((pgm[1] << 32) | pgm[0]) << 8

def kernarg_address(user) -> int:
  """The kernel-argument address in COMPUTE_USER_DATA_* (`user`: the values set, the pointer in the last two)."""
  return (user[-1] << 32) | user[-2]

def kernarg_at(user_data) -> int:
  """The dword offset of the kernel-argument pointer (lo, hi) in the SET_SH_REG packet of COMPUTE_USER_DATA_0."""
  return user_data.offset + user_data.length - 2

def dispatch(g: list) -> Optional[Dispatch]:
  """The dispatch of a group of packets (its SET_SH_REGs, then DISPATCH_DIRECT); None when it has none or lacks the
  registers. With `g` a prefix of a stream, the registers as of its last packet."""
  sets = {p.fields["reg"]: p for p in g if p.name == "SET_SH_REG" and not p.raw}
  regs = {r: p.fields["values"] for r, p in sets.items()}
  pgm, user, start = regs.get(PGM_REG), regs.get(USER_DATA_REG), regs.get(START_REG)
  d = next((p for p in g if p.name == "DISPATCH_DIRECT"), None)
  if d is None or not pgm or len(pgm) < 2 or not user or len(user) < 2: return None
  grid = tuple(d.fields.get(f, 1) for f in ("dim_x", "dim_y", "dim_z"))   # a malformed one (raw) has no fields
  sx = sets.get(START_REG)
  block, block_at = (tuple(start[3:6]), sx.offset + sx.length - len(start) + 3) if sx is not None and start and len(start) >= 6 else (None, None)
  sp = sets[PGM_REG]
  return Dispatch(program_address(pgm), kernarg_address(user), grid, d.offset + pm4.field_at("DISPATCH_DIRECT", "dim_x"), block, block_at,
                  kernarg_at(sets[USER_DATA_REG]), sp.offset + sp.length - len(pgm))

class Registers:
  """The registers a stream's SET_SH_REGs have set so far, packet by packet: `see(p)` each packet in order; at a
  DISPATCH_DIRECT it gives the dispatch, as `dispatch` reads the registers as of that packet."""
  def __init__(self): self.sets: dict = {}   # register -> the SET_SH_REG that set it last

  def see(self, p) -> Optional[Dispatch]:
    if p.raw: return None
    if p.name == "SET_SH_REG": self.sets[p.fields["reg"]] = p
    return dispatch([*self.sets.values(), p]) if p.name == "DISPATCH_DIRECT" else None

@attrs.frozen
class KernelRegisters:
  """What the registers a DISPATCH_DIRECT runs with say about its kernel (what the gfx11 executor needs): the entry
  point, COMPUTE_PGM_RSRC1/2 raw and decoded (`rsrc1`, `rsrc2`: their fields by name), the workgroup size
  (COMPUTE_NUM_THREAD_X..Z), the user SGPRs (RSRC2's user_sgpr COMPUTE_USER_DATA_* values), COMPUTE_TMPRING_SIZE
  decoded, and DISPATCH_INITIATOR decoded (`initiator`: use_thread_dimensions, cs_w32_en, ...)."""
  entry: int
  rsrc1_raw: int
  rsrc2_raw: int
  rsrc1: dict
  rsrc2: dict
  block: tuple
  user: tuple
  tmpring: dict
  initiator: dict

def kernel_registers(arch: str, get: Callable[[int, int], int], initiator: int) -> KernelRegisters:
  """The KernelRegisters of a dispatch on `arch`: `get(offset, default)` reads the SH register at `offset` (from
  SET_SH_REG's start: what SET_SH_REG's `reg_offset` counts) as the engine holds it; `initiator` is the
  DISPATCH_DIRECT's DISPATCH_INITIATOR."""
  t = get_target(arch)
  gc, start = t.gc, t.pm4.PACKET3_SET_SH_REG_START
  def reg(name: str, default: int = 0) -> int: return get(getattr(gc, name).addr[0] - start, default)
  pgm = getattr(gc, PGM_REG).addr[0] - start
  r1, r2 = reg("regCOMPUTE_PGM_RSRC1"), reg("regCOMPUTE_PGM_RSRC2")
  f2 = gc.regCOMPUTE_PGM_RSRC2.decode(r2)
  ud = getattr(gc, USER_DATA_REG).addr[0] - start
  return KernelRegisters(program_address((get(pgm, 0), get(pgm + 1, 0))), r1, r2, gc.regCOMPUTE_PGM_RSRC1.decode(r1), f2,
                         tuple(reg(f"regCOMPUTE_NUM_THREAD_{c}", 1) & 0xFFFF for c in "XYZ"), tuple(get(ud + i, 0) for i in range(f2["user_sgpr"])),
                         gc.regCOMPUTE_TMPRING_SIZE.decode(reg("regCOMPUTE_TMPRING_SIZE")), gc.regCOMPUTE_DISPATCH_INITIATOR.decode(initiator))

# ---- indirect buffers: their packets spliced in place of the INDIRECT_BUFFER / INDIRECT packet, as the engine reads them

IB_DEPTH = 3   # levels of indirect buffers followed below the ring (a deeper one stays a packet: a chain that loops ends)

def splice(dw: list, engine: str, target: str, read: Callable[[int, int], Optional[bytes]], depth: int = 0) -> list:
  """The packets of `dw` with each indirect buffer whose bytes `read(addr, n)` gives spliced in (its packets keep the
  offset of the IB packet, so a comment points at the ring); one it cannot read stays, with a note saying so."""
  out = []
  for p in decoder(engine, target).decode(dw):
    m = meaning(p)
    if m is None or m.kind != "indirect" or m.addr is None or depth >= IB_DEPTH:
      out.append(p)
      continue
    b = read(m.addr, m.size)
    if b is None or len(b) != m.size:
      out.append(attrs.evolve(p, note=f"indirect buffer at {m.addr:#x} ({m.size // 4} dwords) is not in the manifest's memory"))
      continue
    out += [attrs.evolve(x, offset=p.offset) for x in splice(list(struct.unpack(f"<{len(b) // 4}I", b)), engine, target, read, depth + 1)]
  return out
