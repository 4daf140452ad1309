"""The built-in AMD emulator: one sparse numpy address space per machine, and per hardware queue a ring with read and
write pointers and an engine (PM4 for compute queues, SDMA for copy queues) that decodes the bytes in its ring with
hcqdsl.amd's decoders and executes them. See docs/run.md for the model, the cost table and the scheduler.

Decoding is content-addressed: the packet's dwords (a bytes object) key a per-(engine, arch) cache of prepared ops, so
a packet is decoded once however often it is submitted. An op is a flat tuple (handler, operands, packet, cost, ...)
whose operands are pre-extracted and, for the hot packets (waits, signal writes, copies), pre-resolved to memoryview
cells of emulated memory; a doorbell's dwords are mapped to ops in one pass, and the engine then runs them in a tight
loop: a list index, a tuple unpack and a handler that is a couple of int ops. An unknown, malformed or unsupported
packet, or an access outside mapped memory, is a Fault naming the queue, the ring offset and the decoded packet; the
emulator never lets a Python exception out of an engine."""
from __future__ import annotations
import bisect, operator, random
from collections import Counter, deque
from typing import Any, Callable, Optional
import attrs
import numpy as np
from ..ir import SCALARS, U32_MAX
from ..amd import pm4, sdma
from ..amd.packet import Packet
from ..amd.pm4 import WAIT_FUNCTIONS, FUNC_GE
from ..amd.codeobj import SYNTH_MAGIC, ENTRY_OFFSET
from ..ir import NV_ARCHS
from ..nv import pushbuf
from . import nv_engine
from .device import Device, Ring, Memory, DeviceFault
from .kernels import KernelError, KernelFault

__all__ = ["Emulator", "Fault", "Blocked", "Hang", "COST", "HOST_COST", "Block", "HostWait", "RingSpace", "CopyFree"]

# ---- cost model (emulated microseconds); see docs/run.md
COST = {"NOP": 0.02, "TYPE2_NOP": 0.01, "WAIT_REG_MEM": 0.3, "POLL_REGMEM": 0.3, "RELEASE_MEM": 0.8, "FENCE": 0.5,
        "ACQUIRE_MEM": 0.4, "EVENT_WRITE": 0.2, "SET_SH_REG": 0.05, "SET_UCONFIG_REG": 0.05, "INDIRECT_BUFFER": 0.1,
        "DISPATCH_DIRECT": 4.0, "COPY_LINEAR": 1.0, "TIMESTAMP_GET_GLOBAL": 0.2, "TRAP": 0.2, "WRITE_UNTILED": 0.3,
        "WRITE_DATA": 0.3, "CONSTANT_FILL": 0.5}
KERNEL_BYTES_PER_US = 500_000   # a dispatch also costs its argument bytes at 500 GB/s
COPY_BYTES_PER_US = 25_000      # SDMA copies at 25 GB/s
CLOCK_MHZ = 100                 # the GPU clock counter RELEASE_MEM / TIMESTAMP write (AMD's 100 MHz reference)
HOST_COST = {"submit": 1.0, "submit_dword": 0.001, "signal": 0.1, "wait": 0.5}
MAX_BATCH = 256                 # packets an engine runs before the scheduler looks again (time-ordered mode)
INF = float("inf")

_COMPARE = {"always": lambda v, r: True, "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
            ">=": operator.ge, ">": operator.gt}
FUNCS = {code: _COMPARE[op] for code, op in WAIT_FUNCTIONS.items()}   # WAIT_REG_MEM / POLL_REGMEM function codes
FUNC_TEXT = WAIT_FUNCTIONS

PROGRESS, BLOCKED, IDLE, FAULT, DONE = range(5)

# ---- reports

@attrs.define
class Fault:
  queue: str
  device: Optional[str]
  ring_offset: Optional[int]   # bytes into the ring (None: the host)
  packet: Optional[Packet]
  message: str
  launch: Optional[int] = None
  line: Optional[int] = None
  stmt: Optional[str] = None
  ib: Optional[tuple] = None   # (IB address, dword offset) when the packet came from an indirect buffer
  def __str__(self):
    where = f"ring offset {self.ring_offset:#x}" if self.ring_offset is not None else "host"
    if self.ib: where += f", IB {self.ib[0]:#x}+{4 * self.ib[1]:#x}"
    s = f"fault on queue {self.queue} ({where}): {self.message}"
    if self.packet is not None:
      s += f"\n    packet {self.packet.name} [{' '.join(f'{d:08x}' for d in self.packet.dwords[:16])}" \
           f"{' ...' if len(self.packet.dwords) > 16 else ''}]" + (f" ({self.packet.note})" if self.packet.note else "")
    if self.line: s += f"\n    from line {self.line}: `{self.stmt}` (launch {self.launch})"
    return s

@attrs.define
class Blocked:
  """One blocked queue (or the host) in a hang."""
  queue: str
  device: Optional[str]
  ring_offset: Optional[int]
  packet: Optional[Packet]
  signal: Optional[str]      # .hcq name of the polled address (None: not a signal)
  addr: Optional[int]
  func: str
  needed: Optional[int]
  now: Optional[int]
  launch: Optional[int] = None
  line: Optional[int] = None
  stmt: Optional[str] = None
  reason: str = "wait"       # wait | ring-full | timeout
  release: Optional[str] = None  # which statement's write could release the wait, or that none can
  mask: Optional[int] = None     # the bits compared (a `poll`'s mask; all 32 for a wait)
  def __str__(self):
    where = f"ring offset {self.ring_offset:#x} {self.packet.name if self.packet else ''}".rstrip() if self.ring_offset is not None else "host"
    if self.reason == "ring-full": what = f"ring full: needs {self.needed} free bytes, has {self.now}"
    elif self.func == "==" and self.mask is not None:   # a `poll` (tinygrad's poll_bit)
      what = f"polls {self.signal or hex(self.addr or 0)} & {self.mask:#x} == {self.needed:#x}, value now {self.now:#x}"
    else: what = f"waits {self.signal or hex(self.addr or 0)} {self.func} {self.needed}, value now {self.now}"
    s = f"{self.queue}{f' ({self.device})' if self.device else ''} [{where}]: {what}"
    if self.reason == "timeout": s += " (timed out)"
    if self.line: s += f"\n      at line {self.line}: `{self.stmt}` (launch {self.launch})"
    if self.release: s += f"\n      {self.release}"
    return s

@attrs.define
class Hang:
  blocked: list
  def __str__(self): return "hang: no queue can progress\n" + "\n".join(f"  {b}" for b in self.blocked)
  @property
  def lines(self) -> set: return {b.line for b in self.blocked if b.line}

# ---- host-side blocking conditions (yielded by the host program, see submit.py)

class Block:
  def ready(self, mem: Memory) -> bool: raise NotImplementedError

@attrs.define(eq=False)
class HostWait(Block):
  addr: int
  value: int
  signal: str
  line: int
  launch: int
  stmt: str
  timeout_us: float = 10_000_000.0
  def ready(self, mem): return mem.r32(self.addr) | mem.r32(self.addr + 4) << 32 >= self.value  # 64 bits, as tinygrad's host

@attrs.define(eq=False)
class RingSpace(Block):
  ring: Ring
  need: int          # bytes
  emu: Device
  def free(self) -> int: return self.ring.size - (self.ring.wptr - self.emu.read_ptr(self.ring)) * self.ring.unit
  def ready(self, mem): return self.free() >= self.need

@attrs.define(eq=False)
class CopyFree(Block):
  """The host waits for a queue's fence to reach `value`: the engine has read all of a command-buffer copy's packets
  (the fence follows its INDIRECT_BUFFER on the ring), so the copy may be patched for a new launch."""
  ring: Ring
  addr: int
  value: int
  def ready(self, mem): return mem.r32(self.addr) >= self.value

# ---- ops: packet name -> prepare(fields, ctx) -> args; handler(engine, args) -> True (done) | False (blocked)

def _fault(e, msg): raise DeviceFault(msg)

def _wait_mem(e, a):
  addr, ref, mask, func = a
  return e.poll(addr, e.mem.r32(addr), ref, mask, func)

# Fast variants of the hot handlers, chosen at prepare time when the run is not traced and the address is mapped (so
# the resolved memoryview cell stays valid: regions never move or go away). Their operands carry the cell, the
# emulator's write-time table and the Memory, so they touch no attribute chains and allocate nothing. Otherwise the
# generic handlers above run, and an unmapped or misaligned address faults at execution, as it always did.

def _wait_ge_cell(e, a):  # WAIT_REG_MEM / POLL_REGMEM, memory, `>=`, full mask
  cell, i, ref, addr, last_write = a
  v = cell[i]
  if v >= ref:
    t = last_write.get(addr)
    if t is not None and t > e.clock: e.clock = t  # the wait ends when the satisfying write landed
    return True
  e.wait_info = (addr, ref, U32_MAX, FUNC_GE, v)
  return False

def _store_cell(e, a):  # RELEASE_MEM 32-bit data, FENCE
  cell, i, v, addr, mem, last_write = a
  cell[i] = v
  mem.writes += 1
  last_write[addr] = e.clock + e.cost  # the write lands at the end of the packet
  return True

def _copy_spans(e, a):  # COPY_LINEAR; its per-byte cost is in the op's cost
  dst, src, mem = a
  dst[:] = src  # a memmove: overlapping ranges copy as if through a buffer
  mem.writes += 1
  return True

def _wait_reg(e, a):
  req, done, ref, mask, func, op = a
  if op == 1: e.regs[req] = e.regs[done] = ref  # write, wait, write (HDP flush): the flush completes at once
  v = e.regs.get(done, 0)
  return e.poll(None, v, ref, mask, func)

def _release(e, a):
  sel, addr = a[0], a[1]
  if sel == 0: return True
  end = e.clock + e.cost
  if sel == 1: e.mem.w32(addr, a[2])
  elif sel == 2: e.mem.w64(addr, a[2] | a[3] << 32)
  else: e.mem.w64(addr, int(end * CLOCK_MHZ))  # 3: GPU clock counter
  e.m.note_write(addr, end)
  return True

def _nothing(e, a): return True

def _set_reg(e, a):
  off, vals = a
  for i, v in enumerate(vals): e.regs[off + i] = v
  if off == e.R_UD: e.ud_count = len(vals)
  return True

def _dispatch(e, a):
  e.dispatch(a)
  return True

def _ib(e, a):
  base, size, valid, chain = a
  if valid and size: e.push = (base, size, chain)
  return True

def _write_data(e, a):
  addr, data = a
  for i, v in enumerate(data): e.mem.w32(addr + 4 * i, v)
  e.m.note_write(addr, e.clock + e.cost)
  return True

def _copy(e, a):
  src, dst, n = a
  s, d = e.mem.view(src, n), e.mem.view(dst, n)
  d[:] = s.copy() if src < dst + n and dst < src + n else s  # overlapping: copy as if through a buffer
  e.mem.writes += 1
  e.cost += n / COPY_BYTES_PER_US
  return True

def _fence(e, a):
  addr, v = a
  e.mem.w32(addr, v)
  e.m.note_write(addr, e.clock + e.cost)
  return True

def _timestamp(e, a):
  e.mem.w64(a, int((e.clock + e.cost) * CLOCK_MHZ))
  return True

def _const_fill(e, a):
  dst, n, v, dw = a
  d = e.mem.view(dst, n)
  if dw: d[:n - n % 4].view("<u4")[:] = v
  else: d[:] = v & 0xFF
  e.mem.writes += 1
  return True

def _prep_wait(addr, ref, mask, func, c):
  cell = c.cell(addr) if func == FUNC_GE and mask == U32_MAX else None
  if cell is not None: return _wait_ge_cell, (*cell, ref, addr, c.m.last_write)
  return _wait_mem, (addr, ref, mask, func)

def _prep_store(addr, v, c):
  cell = c.cell(addr)
  if cell is not None: return _store_cell, (*cell, v & U32_MAX, addr, c.m.mem, c.m.last_write)
  return _fence, (addr, v)

def _prep_copy(f, c):
  src, dst, n = f["src_addr"], f["dst_addr"], f["count"] + 1
  if c.fast:
    try: return _copy_spans, (c.m.mem.span(dst, n), c.m.mem.span(src, n), c.m.mem)
    except DeviceFault: pass
  return _copy, (src, dst, n)

def _prep_wrm(f, c):
  if f["function"] not in FUNCS: raise DeviceFault(f"WAIT_REG_MEM function {f['function']} is reserved")
  if f["mem_space"] == 1: return _prep_wait(f["addr"], f["reference"], f["mask"], f["function"], c)
  return _wait_reg, (f["addr_lo"], f["addr_hi"], f["reference"], f["mask"], f["function"], f["operation"])

def _prep_release(f, c):
  if f["data_sel"] not in (0, 1, 2, 3): raise DeviceFault(f"RELEASE_MEM data_sel {f['data_sel']} is not supported")
  if f.get("dst_sel", 0) not in (0, 1): raise DeviceFault(f"RELEASE_MEM dst_sel {f['dst_sel']} is not supported")
  if f["data_sel"] == 1: return _prep_store(f["addr"], f["data_lo"], c)
  return _release, (f["data_sel"], f["addr"], f["data_lo"], f["data_hi"])

def _prep_poll(f, c):
  if f["func"] not in FUNCS: raise DeviceFault(f"POLL_REGMEM function {f['func']} is reserved")
  if not f["mem_poll"]: raise DeviceFault("POLL_REGMEM of a register is not supported by the emulator")
  return _prep_wait(f["addr"], f["value"], f["mask"], f["func"], c)

PM4_OPS: dict[str, Callable] = {
  "NOP": lambda f, c: (_nothing, None), "TYPE2_NOP": lambda f, c: (_nothing, None),
  "WAIT_REG_MEM": _prep_wrm, "RELEASE_MEM": _prep_release,
  "ACQUIRE_MEM": lambda f, c: (_nothing, None),     # memory is coherent: cache actions only cost time
  "EVENT_WRITE": lambda f, c: (_nothing, None),     # dispatches complete before the next packet: flushes are free
  "SET_SH_REG": lambda f, c: (_set_reg, (f["reg_offset"], f["values"])),
  "SET_UCONFIG_REG": lambda f, c: (_set_reg, (pm4.UCONFIG_REG_START + f["reg_offset"], f["values"])),
  "DISPATCH_DIRECT": lambda f, c: (_dispatch, (f["dim_x"], f["dim_y"], f["dim_z"], f["dispatch_initiator"])),
  "INDIRECT_BUFFER": lambda f, c: (_ib, (f["ib_base"], f["ib_size"], f["valid"], f["chain"])),
  "WRITE_DATA": lambda f, c: (_write_data, (f["dst_addr_lo"] | f["dst_addr_hi"] << 32, f["data"])),
}
SDMA_OPS: dict[str, Callable] = {
  "NOP": lambda f, c: (_nothing, None), "TRAP": lambda f, c: (_nothing, None),  # the interrupt has no listener
  "COPY_LINEAR": _prep_copy,
  "FENCE": lambda f, c: _prep_store(f["addr"], f["data"], c),
  "POLL_REGMEM": _prep_poll,
  "TIMESTAMP_GET_GLOBAL": lambda f, c: (_timestamp, f["write_addr"]),
  "WRITE_UNTILED": lambda f, c: (_write_data, (f["dst_addr"], (f["data0"],) + tuple(f.get("data", ())[1:]))),
  "INDIRECT": lambda f, c: (_ib, (f["ib_base"], f["ib_size"], 1, 0)),
  "CONSTANT_FILL": lambda f, c: (_const_fill, (f["dst_addr"], f["count"] + 1, f["src_data_31_0"], f["fillsize"] == 2)),
}

class _Length:
  """The decoder's packet-length rule (amd.pm4.packet_length, amd.sdma.Decoder.packet_length), memoized by header
  dword; -1 in `memo`: the length is in a later dword (SDMA WRITE_UNTILED)."""
  def __init__(self, rule, header_only): self.rule, self.header_only, self.memo = rule, header_only, {}
  def __call__(self, h: int, get) -> int:
    n = self.memo.get(h)
    if n is None:
      n = self.memo[h] = self.header_only(h)
      if len(self.memo) > 1 << 16: self.memo.clear()  # random rings: do not grow without bound
    return n if n > 0 else self.rule(h, get)

class _Codec:
  """Per (engine kind, arch) of one machine: decoder, length function, handler table and the content-addressed op
  cache. An op is the flat tuple (handler, operands, packet, cost, dwords, read-pointer advance, op index); the op
  index numbers distinct packets for the engines' execution counts (`names[index]` is the packet's name)."""
  def __init__(self, kind: str, arch: str, m: "Emulator"):
    self.kind, self.arch, self.m = kind, arch, m
    self.fast = not m.tracing  # traced runs use the generic handlers, which record trace events and flows
    self.unit = 1 if kind == "sdma" else 4  # bytes per write-pointer unit: PM4 and NV count dwords, SDMA bytes
    self.dec: pm4.Decoder | sdma.Decoder | pushbuf.Decoder
    self.table: Any   # name -> prepare function: a dict, or NV's one-for-all _Ops (.get)
    if kind == "nv":   # an NV queue's pushbuffer methods (runtime/nv_engine.py)
      self.dec, self.length, self.table = pushbuf.decoder(arch), _Length(pushbuf.packet_length, pushbuf.packet_length), nv_engine.OPS
      self.R_PGM_LO = self.R_UD = -1
    elif kind == "pm4":
      self.dec, self.length, self.table = pm4.decoder(arch), _Length(pm4.packet_length, pm4.packet_length), PM4_OPS
      enc = pm4.encoder(arch)
      self.R_PGM_LO, self.R_UD = enc.R_PGM_LO, enc.R_USER_DATA
      self.R_NUM_THREAD = enc.START_X[1] + 3   # COMPUTE_NUM_THREAD_X/Y/Z: the workgroup size
    else:
      self.dec = dec = sdma.decoder(arch)
      self.table, self.length = SDMA_OPS, _Length(dec.packet_length, lambda h: dec.header_length(h) or -1)
      self.R_PGM_LO = self.R_UD = -1
    self.cache: dict = {}
    self.names: list = []   # op index -> packet name

  def cell(self, addr: int):
    """The memoryview cell of a mapped, aligned dword for a fast handler, or None (traced run, or the access would
    fault: then the generic handler faults when the packet executes)."""
    if not self.fast: return None
    try: return self.m.mem.cell(addr)
    except DeviceFault: return None

  def op(self, key: bytes) -> tuple:
    """The op for the packet whose dwords are `key`."""
    op = self.cache.get(key)
    if op is None:
      dws = np.frombuffer(key, "<u4").tolist()
      p = self.dec.decode_one(dws, 0)
      prep = self.table.get(p.name)
      cost = 0.0
      a: Any   # the handler's operands: a fault's message, or what prepare computed
      if p.raw: h, a = _fault, p.note
      elif prep is None: h, a = _fault, f"{p.name} is not supported by the emulator"
      else:
        cost = COST.get(p.name, 0.1) + (0.02 * (p.length - 1) if p.name == "NOP" else 0.0)
        try:
          if self.kind == "nv": h, a, cost = prep(p, self)
          else: h, a = prep(p.fields, self)
        except DeviceFault as e: h, a = _fault, str(e)
        except (KeyError, TypeError) as e: h, a = _fault, f"malformed {p.name} ({e!r})"
        if h is _copy_spans: cost += a[0].nbytes / COPY_BYTES_PER_US  # what _copy adds at run time
      n = len(dws)
      op = (h, a, p, cost, n, 4 * n // self.unit, len(self.names))
      if len(self.cache) > 1 << 16: self.cache.clear()  # random rings: do not grow without bound
      self.cache[key] = op
      self.names.append(p.name)
    return op

# ---- engines

class Engine:
  def __init__(self, m: "Emulator", ring: Ring):
    self.m, self.mem, self.ring, self.name, self.device = m, m.mem, ring, ring.name, ring.device
    self.kind = "nv" if ring.arch in NV_ARCHS else "pm4" if ring.engine == "compute" else "sdma"
    self.codec = m.codec(self.kind, ring.arch)
    self.length, self.R_UD, self.R_PGM_LO = self.codec.length, self.codec.R_UD, self.codec.R_PGM_LO
    r = self.mem.find(ring.addr, ring.size)
    self.ring_u32 = r.u32[(ring.addr - r.base) >> 2:(ring.addr - r.base + ring.size) >> 2]
    self.ndw, self.unit = ring.size // 4, ring.unit
    self.pcache: list = [None] * self.ndw  # ring dword -> op decoded there since the last doorbell (None: step())
    self.published: list = []              # ring dword ranges published by doorbells, not yet refreshed
    self.rptr = 0
    self.starts: deque = deque()  # (write pointer before a doorbell, host time of the doorbell)
    self.ib: list = []           # PM4 indirect buffers being executed: [base, size dwords, position dwords]
    self.push: Optional[tuple[int, int, bool]] = None   # (base, size, chain) of a pending INDIRECT_BUFFER chain
    self.regs: dict = {}
    self.ud_count = 0
    self.clock = 0.0
    self.cost = 0.0
    self.packets = 0
    self.counts: list = []       # op index -> times executed (by_name sums them per name)
    self.first: list = []        # op indices in order of first execution (by_name lists names in that order)
    self.blocked_at = -1         # mem.writes when the current wait last failed
    self.wait_info: Optional[tuple] = None   # (addr, ref, mask, func, value) of the failing wait (valid while blocked)
    self.cur: Optional[Any] = None           # (packet, ring offset, ib) of the packet being executed
    self.cur_pos: tuple[Optional[int], Optional[tuple[int, int]]] = (None, None)   # (ring byte offset, (ib base, dword))
    self.index = 0

  def busy(self) -> bool: return bool(self.ib) or self.rptr != self.ring.wptr

  def fetch(self):
    """(dwords as bytes, length) of the next packet, or None when there is nothing to run."""
    if self.ib:
      f = self.ib[-1]
      base, size, pos = f
      if pos >= size:
        self.ib.pop()
        return self.fetch()
      a = base + 4 * pos
      mem = self.mem
      h = mem.r32(a)
      n = self.length(h, lambda i: mem.r32(a + 4 * i))
      if pos + n > size: raise DeviceFault(f"packet of {n} dwords runs past the end of the indirect buffer ({size - pos} left)")
      self.cur_pos = (None, (base, pos))
      return mem.view(a, 4 * n).tobytes(), n
    self.cur_pos = ((self.rptr * self.unit) % self.ring.size, None)
    avail = (self.ring.wptr - self.rptr) * self.unit
    st = self.starts
    while st and st[0][0] <= self.rptr:  # a submission cannot start before its doorbell rang
      if st[0][1] > self.clock: self.clock = st[0][1]
      st.popleft()
    if avail <= 0:
      if avail < 0: raise DeviceFault(f"write pointer {self.ring.wptr} is behind the read pointer {self.rptr}")
      return None
    if avail & 3 or self.rptr * self.unit & 3: raise DeviceFault("ring pointers are not dword aligned")
    ndw, ring = self.ndw, self.ring_u32
    i = (self.rptr * self.unit >> 2) % ndw
    self.cur_pos = (4 * i, None)
    n = self.length(int(ring[i]), lambda k: int(ring[(i + k) % ndw]))
    if 4 * n > avail: raise DeviceFault(f"packet of {n} dwords runs past the write pointer ({avail // 4} dwords published)")
    if i + n <= ndw: return ring[i:i + n].tobytes(), n
    return np.concatenate((ring[i:], ring[:i + n - ndw])).tobytes(), n

  def refresh(self) -> None:
    """Invalidate and predecode the ring ranges published since the engine last ran."""
    for a, b in self.published:
      if b - a >= self.ndw: self.pcache[:] = [None] * self.ndw
      elif b > a:
        x, y = a % self.ndw, b % self.ndw
        if x < y: self.pcache[x:y] = [None] * (y - x)
        else:
          self.pcache[x:] = [None] * (self.ndw - x)
          self.pcache[:y] = [None] * y
    pub, self.published = self.published, []
    for a, b in pub:
      if 0 < b - a < self.ndw: self.predecode(a, b)

  def predecode(self, a: int, b: int) -> None:
    """Map the packets just published in ring dwords [a, b) (absolute) to ops in one pass: one bulk copy of the dwords,
    then per packet a length, a bytes slice and an op-cache lookup. Anything odd is left to the slow path in fetch."""
    nd, ring = self.ndw, self.ring_u32
    x, y = a % nd, b % nd
    arr = ring[x:y] if x < y else np.concatenate((ring[x:], ring[:y]))
    lst, buf, pc = arr.tolist(), arr.tobytes(), self.pcache
    cache, op_of = self.codec.cache, self.codec.op
    memo = self.length.memo
    i, n_all = 0, len(lst)
    try:
      while i < n_all:
        h = lst[i]
        n = memo.get(h)
        if n is None or n < 0: n = self.length(h, lambda k: lst[i + k] if i + k < n_all else 0)
        j = i + n
        if j > n_all: break
        key = buf[4 * i:4 * j]
        op = cache.get(key) or op_of(key)
        pc[(x + i) % nd] = op if op[0] is not _ib else None  # the indirect-buffer stack is step()'s business
        i = j
    except IndexError: pass
    self.grow_counts()

  def grow_counts(self) -> None:
    """Make room in `counts` for every op index the codec has handed out (ops are numbered as they are decoded)."""
    k = len(self.codec.names) - len(self.counts)
    if k > 0: self.counts.extend([0] * k)

  def step(self) -> int:
    """One packet (or IDLE / BLOCKED / FAULT) through the general path: indirect buffers, doorbell times, tracing,
    packets not predecoded."""
    self.cur = None
    if self.published: self.refresh()
    try:
      # a ring position decoded since its doorbell (positions are invalidated when the host publishes new bytes
      # there, so the cache always describes the ring's current contents between rptr and wptr)
      op = None
      if not self.ib and (not self.starts or self.starts[0][0] > self.rptr):
        pos = (self.rptr * self.unit >> 2) % self.ndw
        op = self.pcache[pos]
        if op is not None and self.rptr + op[5] <= self.ring.wptr: self.cur_pos = (4 * pos, None)
        else: op = None
      if op is None:
        got = self.fetch()
        if got is None: return IDLE
        op = self.codec.op(got[0])
        if not self.ib and op[0] is not _ib: self.pcache[(self.rptr * self.unit >> 2) % self.ndw] = op
        self.grow_counts()
      h, a, p, self.cost, n, adv, k = op
      self.cur = p
      start, r0 = self.clock, self.rptr
      if not h(self, a):
        self.blocked_at = self.mem.writes
        return BLOCKED
      self.clock += self.cost  # a wait may have moved the clock to the time its value was written
      if self.ib: self.ib[-1][2] += n
      else: self.rptr += adv
      if self.push is not None:
        base, size, chain = self.push
        self.push = None
        if chain and self.ib: self.ib.pop()
        if len(self.ib) >= 2: raise DeviceFault("INDIRECT_BUFFER nested deeper than 2 levels")
        if base & 3: raise DeviceFault(f"INDIRECT_BUFFER base {base:#x} is not dword aligned")
        self.ib.append([base, size, 0])
      self.packets += 1
      c = self.counts[k]
      self.counts[k] = c + 1
      if not c: self.first.append(k)
      if self.m.tracing: self.m.trace_packet(self, p, start, self.clock, r0)
      self.blocked_at = -1
      return PROGRESS
    except (DeviceFault, KernelError) as e:
      self.m.fault = self.make_fault(str(e))
      return FAULT
    except Exception as e:  # a bug of ours still is a report, never a traceback out of the device
      self.m.fault = self.make_fault(f"internal emulator error: {e!r}")
      return FAULT

  def run_batch(self, budget: int, limit) -> int:
    """Up to `budget` packets while the clock stays <= limit (None: no limit). Runs of predecoded ring packets go
    through run_ring; the packet that stops one (an indirect buffer, a new submission's doorbell time, a position
    not predecoded, a traced run) goes through step()."""
    if self.published: self.refresh()
    lim = INF if limit is None else limit
    fast = not self.m.tracing
    st = PROGRESS
    while budget > 0:
      if fast and not self.ib:
        ran, st = self.run_ring(budget, lim)
        budget -= ran
        if st is not None: return st
        if budget <= 0: return PROGRESS
      budget -= 1
      st = self.step()
      if st != PROGRESS or self.clock > lim: return st
    return st

  def run_ring(self, budget: int, lim: float) -> tuple:
    """The hot loop: execute predecoded ring packets, up to `budget` of them, until one blocks or faults or the clock
    passes `lim`. Returns (packets run, status), status None when the next packet needs step(). Everything step()
    keeps per packet that nobody reads in between (read pointer, packet counts, current packet) is kept in locals
    and stored once on the way out."""
    pc, nd, unit, wptr, counts, first = self.pcache, self.ndw, self.unit, self.ring.wptr, self.counts, self.first
    nxt = self.starts[0][0] if self.starts else INF  # the next submission must wait for its doorbell: step()
    rptr = self.rptr
    ran, st = 0, None
    op: Any = None
    try:
      while ran < budget and rptr < nxt:
        op = pc[(rptr * unit >> 2) % nd]
        if op is None or rptr + op[5] > wptr: break
        h, a, _, self.cost, _, adv, k = op
        if not h(self, a):
          st = BLOCKED
          break
        self.clock += self.cost  # a wait may have moved the clock to the time its value was written
        rptr += adv
        c = counts[k]
        counts[k] = c + 1
        if not c: first.append(k)
        ran += 1
        if self.clock > lim:
          st = PROGRESS
          break
    except (DeviceFault, KernelError) as e:
      st, msg = FAULT, str(e)
    except Exception as e:  # a bug of ours still is a report, never a traceback out of the device
      st, msg = FAULT, f"internal emulator error: {e!r}"
    self.rptr = rptr
    self.packets += ran
    if ran: self.blocked_at = -1
    if st == BLOCKED or st == FAULT:  # the packet that stopped: what hang and fault reports show
      self.cur, self.cur_pos = op[2], (4 * ((rptr * unit >> 2) % nd), None)
      if st == BLOCKED: self.blocked_at = self.mem.writes
      else: self.m.fault = self.make_fault(msg)
    return ran, st

  @property
  def by_name(self) -> Counter:
    c: Counter = Counter()
    for k in self.first: c[self.codec.names[k]] += self.counts[k]
    return c

  def poll(self, addr, v, ref, mask, func) -> bool:
    if FUNCS[func](v & mask, ref):
      if addr is not None: self.m.wait_satisfied(self, addr)
      self.wait_info = None
      return True
    self.wait_info = (addr, ref, mask, func, v)
    return False

  def position(self):
    ring_off, ib = getattr(self, "cur_pos", (None, None))
    return ring_off, ib

  def locate(self, rptr: Optional[int] = None):
    """(launch, SourceEntry) of the packet at the read pointer, from the submitter's source map."""
    loc = self.m.locator
    if loc is None: return None, None
    if self.ib: return loc.locate_ib(self.ring, self.ib[-1][0], self.ib[-1][2])
    return loc.locate(self.ring, (self.rptr if rptr is None else rptr) * self.unit >> 2)

  def make_fault(self, msg: str) -> Fault:
    ring_off, ib = self.position()
    launch, st = self.locate()
    return Fault(self.name, self.device, ring_off, self.cur, msg, launch, st.line if st else None, st.text if st else None, ib)

  def dispatch(self, a):
    regs, mem, m = self.regs, self.mem, self.m
    prog = ((regs.get(self.R_PGM_LO + 1, 0) << 32) | regs.get(self.R_PGM_LO, 0)) << 8
    k = m.kernels.get(prog)
    if k is None:
      try: marker = mem.view(prog - ENTRY_OFFSET + 64, 64).tobytes()
      except DeviceFault: marker = b""
      name = marker[len(SYNTH_MAGIC):].split(b"\0")[0].decode(errors="replace") if marker.startswith(SYNTH_MAGIC) else None
      k = m.kernels_by_name.get(name)
      if k is None: raise DeviceFault(f"DISPATCH_DIRECT: no known kernel at program address {prog:#x}"
                                      + (f" (marker names `{name}`)" if name else ""))
    n = self.ud_count
    if n < 2: raise DeviceFault("DISPATCH_DIRECT: no kernarg pointer in COMPUTE_USER_DATA")
    ka = regs.get(self.R_UD + n - 2, 0) | regs.get(self.R_UD + n - 1, 0) << 32
    nt = self.codec.R_NUM_THREAD
    self.call_kernel(k, ka, tuple(a[:3]), (regs.get(nt, 1), regs.get(nt + 1, 1), regs.get(nt + 2, 1)), a)

  def call_kernel(self, k, ka: int, grid: tuple, block: tuple, a) -> None:
    """Run kernel k (fn, params) on the kernel arguments at ka: buffer parameters as views of the ranges they may
    touch, scalars as values; `grid`/`block` for a kernel that wants the launch dims; `a`: the dispatch's operands for
    real machine code (None on NV)."""
    mem, m = self.mem, self.m
    fn, params = k
    views: list = []   # scalars (int) and memoryviews, in parameter order
    nbytes = 0
    for i, (mode, off) in enumerate(params):
      if mode in SCALARS:  # a value in the kernel arguments, as the patched kernargs hold it
        v = mem.r32(ka + off)
        views.append(v - (1 << 32) if mode == "i32" and v >> 31 else v)
        continue
      ptr = mem.r32(ka + off) | mem.r32(ka + off + 4) << 32
      lo, hi = m.arg_range(ka, i, ptr)
      views.append(mem.view(lo, hi - lo))
      nbytes += hi - lo
    if getattr(fn, "wants_dims", False): fn.dims = (grid, block)  # the launch dims as the packets (patched per launch) have them
    try:
      if getattr(fn, "machine", None) is not None:  # real machine code (rdna3.py)
        if a is None: raise DeviceFault("AMD machine code on an NV queue")
        fn.machine(self, a)
      else: fn.run(views)
    except KernelFault as e: raise DeviceFault(f"kernel `{fn.name}`: {self.fault_text(e)}") from None
    except KernelError as e: raise DeviceFault(f"kernel `{fn.name}`: {e}") from None
    mem.writes += 1
    self.cost += nbytes / KERNEL_BYTES_PER_US + fn.extra_us

  def fault_text(self, e) -> str:
    """A C kernel's memory fault in words: the buffer and the offset it touched (its guard pages catch the first byte
    past either end), else the address."""
    got = self.m.mem.host_region(e.addr)
    if got is None: return f"crashed ({e.signame}: an access to host address {e.addr:#x}, in no buffer)"
    r, off = got
    where = "past its end" if off >= r.size else "before its start" if off < 0 else "inside it"
    return f"out-of-bounds access ({e.signame}): buffer `{r.name}` at offset {off}, {where} (`{r.name}` is {r.size} bytes)"

class HostActor:
  name, device, index = "host", None, 0
  def __init__(self, m: "Emulator", gen):
    self.m, self.gen, self.clock, self.done, self.blocked_at, self.steps = m, gen, 0.0, False, -1, 0
    self.pending: Optional[Block] = None   # the host step waiting on a signal
    self.blocked_since = 0.0
  def busy(self) -> bool: return not self.done
  def step(self) -> int:
    m = self.m
    try:
      if self.pending is not None:
        b = self.pending
        if not b.ready(m.mem):
          self.blocked_at = m.mem.writes
          return BLOCKED
        if isinstance(b, HostWait):
          t0 = self.clock
          m.wait_satisfied(self, b.addr)
          self.clock += HOST_COST["wait"]
          if m.tracing: m.trace_host(self, t0, self.clock, b.stmt, b.line, b.launch)
          if self.clock - t0 > b.timeout_us:
            m.hang = Hang([Blocked("host", None, None, None, b.signal, b.addr, ">=", b.value, None, b.launch, b.line, b.stmt, "timeout")])
            return FAULT
        self.pending = None
      try: item = next(self.gen)
      except StopIteration:
        self.done = True
        return DONE
      self.steps += 1
      if isinstance(item, Block): self.pending = item
      else:  # (cost, what, line, launch) of a statement the host just performed
        t0 = self.clock
        self.clock += item[0]
        if m.tracing: m.trace_host(self, t0, self.clock, *item[1:])
      self.blocked_at = -1
      return PROGRESS
    except DeviceFault as e:
      m.fault = Fault("host", None, None, None, str(e))
      return FAULT

@attrs.frozen
class MemoryMap:
  """What the emulator knows of the compiled image's memory plan: names for addresses in faults and hangs, and the
  byte range each kernel argument may touch (C kernels get pointers to exactly that)."""
  name_at: Callable = lambda addr: None
  buffers: tuple = ()                                  # sorted (addr, end, name) of the buffer regions
  kernarg_ranges: dict = attrs.field(factory=dict)     # kernarg address -> [(lo, hi), or None for a scalar] per param

  @staticmethod
  def of_image(img) -> "MemoryMap":
    ranges = {}
    for r in img.regions:
      if r.kind != "kernargs": continue
      out: list[Optional[tuple[int, int]]] = []
      for arg in r.meta.get("args", []):
        if arg is None:  # a scalar
          out.append(None)
          continue
        b, lo, hi, _, launch = arg   # launch: `x@k`, the memory of a rebound buffer's launch k
        a, n = img.buffers[b]
        if launch is not None: a = img.var_values[f"{b}.addr"][launch - 1]
        out.append((a + (lo or 0), a + (n if hi is None else hi)))
      ranges[r.addr] = out
    return MemoryMap(img.name_at, tuple(sorted((r.addr, r.addr + r.size, r.name) for r in img.regions if r.kind == "buffer")),
                     ranges)

class Emulator(Device):
  """A machine: memory, engines, kernels. `run(host)` interleaves the host program with the engines until all are
  done, a queue faults, or nothing can progress (a hang)."""
  def __init__(self, memory_map: Optional["MemoryMap"] = None, seed: Optional[int] = None, trace: bool = False,
               max_steps: int = 50_000_000):
    mm = memory_map or MemoryMap()
    self.mem = Memory()
    self.engines: list[Engine] = []
    self.by_ring: dict = {}
    self.kernels: dict = {}          # program address -> (KernelFn, nparams)
    self.kernels_by_name: dict = {}
    self.buffers = mm.buffers                # sorted (addr, end, name) for kernel argument ranges
    self.kernarg_ranges = mm.kernarg_ranges  # kernarg address -> [(lo, hi) or None] per parameter
    self.namer: Callable = mm.name_at
    self.locator: Optional[Any] = None   # the submitter while `run` runs: (ring, dword) -> (launch, stmt) for faults and hangs
    self.rng = random.Random(seed) if seed is not None else None
    self.seed, self.max_steps = seed, max_steps
    self.tracing = trace
    self.events: list[tuple] = []
    self.flows: list[tuple] = []
    self.signal_log: list = []       # (time, signal address, value) of every signal write (traced runs)
    self.last_write: dict = {}       # signal address -> emulated time of its last write (a float: no allocation)
    self.write_event: dict = {}      # signal address -> trace event index of that write (traced runs)
    self.fault: Optional[Fault] = None
    self.hang: Optional[Hang] = None
    self._codecs: dict = {}
    self.ring_top: dict = {}
    self.host_actor: Optional[HostActor] = None
    self.gate: Optional[Any] = None   # a replay's ordering (runtime/replays.py): holds an engine before a statement; runs traced

  def codec(self, kind: str, arch: str) -> _Codec:
    if (kind, arch) not in self._codecs: self._codecs[kind, arch] = _Codec(kind, arch, self)
    return self._codecs[kind, arch]

  # ---- Device interface
  def allocate(self, addr, size, name, device=None): self.mem.add(addr, size, name, device)
  def map(self, addr, size): return self.mem.view(addr, size)
  def write(self, addr, data): self.mem.write(addr, data)
  def read(self, addr, size): return self.mem.view(addr, size).tobytes()
  def write_dwords(self, addr, idx, values):
    r = self.mem.find(addr, 4)
    r.u32[(addr - r.base >> 2) + idx] = values
    self.mem.writes += 1
  def create_queue(self, name, engine, device, arch, ring_size, addr: Optional[int] = None) -> Ring:
    if addr is None: addr = self.ring_top.get(device, RING_BASE[0] + RING_BASE[1] * len(self.ring_top))
    self.ring_top[device] = addr + ring_size
    self.allocate(addr, ring_size, f"{name}.ring", device)
    ring = Ring(name, engine, device, arch, addr, ring_size)
    e = Engine(self, ring)
    e.index = len(self.engines) + 1
    self.engines.append(e)
    self.by_ring[id(ring)] = e
    return ring
  def doorbell(self, ring, wptr):
    h, e = self.host_actor, self.by_ring[id(ring)]
    e.starts.append((ring.wptr, (h.clock if h else 0.0) + HOST_COST["submit"]))
    # the dwords just published: the engine forgets their old decode and predecodes them when it next runs (the
    # doorbell itself stays an MMIO-cheap store for the submitting CPU)
    e.published.append((ring.wptr * e.unit >> 2, -(-wptr * e.unit >> 2)))
    ring.wptr = wptr
    self.mem.writes += 1
  def read_ptr(self, ring): return self.by_ring[id(ring)].rptr
  def signal_write(self, addr, value):
    """A host `signal`: a 64-bit store of the 32-bit value (tinygrad's HCQSignal.value setter writes the whole slot),
    which the waits it satisfies are ordered after (time, trace flows)."""
    self.mem.w64(addr, value & U32_MAX)
    h = self.host_actor
    if h is not None: self.note_write(addr, h.clock + HOST_COST["signal"])

  # ---- kernels
  def add_kernel(self, prog_addr: int, name: str, fn, params):
    """`params`: the number of buffer parameters (8-byte pointers in order), or [(mode, kernarg byte offset)] per
    parameter, mode a scalar type of ir.SCALARS for a value."""
    if isinstance(params, int): params = [("inout", 8 * i) for i in range(params)]
    self.kernels[prog_addr] = self.kernels_by_name[name] = (fn, [tuple(p) for p in params])
  def arg_range(self, ka: int, i: int, ptr: int) -> tuple:
    """The byte range kernel parameter i sees: the kernarg block's recorded range if the pointer is the one the
    image put there, else from the pointer to the end of its buffer."""
    rs = self.kernarg_ranges.get(ka)
    r = rs[i] if rs is not None and i < len(rs) else None
    if r is not None and r[0] == ptr: return r
    j = bisect.bisect_right(self.buffers, (ptr, float("inf"))) - 1
    if j >= 0 and self.buffers[j][0] <= ptr <= self.buffers[j][1]:
      # a patched pointer (a rebound buffer's memory in this launch) keeps the recorded range's length
      return (ptr, min(ptr + r[1] - r[0], self.buffers[j][1])) if r is not None else (ptr, self.buffers[j][1])
    raise DeviceFault(f"kernel argument {i} points at {ptr:#x}, outside every buffer")

  # ---- time and flows
  def note_write(self, addr: int, t: float):
    self.last_write[addr] = t
    if self.tracing:
      self.write_event[addr] = len(self.events)
      self.signal_log.append((t, addr, self.mem.r32(addr)))
  def wait_satisfied(self, who, addr: int):
    t = self.last_write.get(addr)
    if t is None: return
    if t > who.clock: who.clock = t
    if self.tracing: self.flows.append((self.write_event[addr], len(self.events), who.name))

  # ---- trace
  def trace_packet(self, e: Engine, p: Packet, t0: float, t1: float, rptr: int):
    launch, st = e.locate(rptr)
    self.events.append((e.name, e.device, launch, st.offset if st else None, st.text if st else p.name, t0, t1, p.name,
                        st.line if st else None))
    if self.gate is not None: self.gate.executed(e, launch, st.line if st else None)
  def trace_host(self, h: HostActor, t0: float, t1: float, what: str, line, launch):
    self.events.append(("host", None, launch, h.steps, what, t0, t1, "host", line))
    if self.gate is not None: self.gate.executed(h, launch, line)

  # ---- the scheduler
  def run(self, host, locator=None) -> None:
    """Interleave `host` (a generator, see submit.py) with the engines. Default: the ready actor with the smallest
    emulated clock runs next (ties round-robin), for a batch while it stays the earliest; with a seed: a uniformly
    random ready actor runs one step. Sets self.fault / self.hang. `locator` (the Submitter: `locate(ring, dword)`,
    `locate_ib(ring, base, pos)` -> (launch, SourceEntry)) names the statement of a fault or a hang."""
    self.locator = locator
    H = self.host_actor = HostActor(self, host)
    actors: list[Any] = [H, *self.engines]   # HostActor and Engines: busy, blocked_at, clock, index
    n, rr, steps, rng, gate = len(actors), 0, 0, self.rng, self.gate
    mem = self.mem
    while True:
      w = mem.writes
      cands = [a for a in actors if a.busy() and a.blocked_at != w]
      if gate is not None and cands: cands = gate.admit(self, cands)   # (one packet at a time, below)
      if not cands:
        if H.done and not any(e.busy() for e in self.engines): return
        self.hang = self.hang_report()
        return
      if gate is not None:
        a = min(cands, key=lambda x: (x.clock, (x.index - rr) % n))
        budget, limit = 1, None
      elif rng is not None:
        a = cands[rng.randrange(len(cands))]
        budget, limit = 1, None
      else:
        if len(cands) == 1: a, limit = cands[0], None
        else:
          cands.sort(key=lambda x: (x.clock, (x.index - rr) % n))
          a, limit = cands[0], cands[1].clock
        budget = MAX_BATCH
      rr = a.index + 1
      if a is H:
        st = a.step()
        steps += 1
      else:
        p0 = a.packets
        st = a.run_batch(budget, limit)
        steps += a.packets - p0 + 1
      if st == FAULT: return
      if steps > self.max_steps:
        self.fault = Fault("machine", None, None, None, f"step limit ({self.max_steps} steps) reached")
        return

  def hang_report(self) -> Hang:
    out = []
    H = self.host_actor
    for e in self.engines:
      if not e.busy(): continue
      ring_off, ib = e.position()
      launch, st = e.locate()
      wi = e.wait_info or (None, None, None, 5, None)
      addr = wi[0]
      out.append(Blocked(e.name, e.device, ring_off, e.cur, self.namer(addr) if addr is not None else None, addr,
                         FUNC_TEXT.get(wi[3], "?"), wi[1], wi[4], launch, st.line if st else None, st.text if st else None, mask=wi[2]))
    if H is not None and not H.done and H.pending is not None:
      b = H.pending
      if isinstance(b, HostWait):
        out.insert(0, Blocked("host", None, None, None, b.signal, b.addr, ">=", b.value, self.mem.r32(b.addr), b.launch, b.line, b.stmt))
      elif isinstance(b, CopyFree):
        out.insert(0, Blocked("host", None, None, None, None, b.addr, ">=", b.value, self.mem.r32(b.addr), None, None,
                              f"submit {b.ring.name}", "command buffer in use"))
      elif isinstance(b, RingSpace):
        out.insert(0, Blocked("host", None, None, None, None, None, ">=", b.need, b.free(), None, None,
                              f"submit {b.ring.name}", "ring-full"))
    return Hang(out)

  @property
  def time_us(self) -> float:
    return max([e.clock for e in self.engines] + [self.host_actor.clock if self.host_actor else 0.0])

# rings live high in each device's part of the address space, far above the image's memory plan
RING_BASE = (0x0800_0000_0000 + 0x1000_0000_0000, 0x1000_0000_0000)
