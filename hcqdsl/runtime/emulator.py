"""The built-in emulator: one sparse numpy address space per machine, and per hardware queue a ring with read and
write pointers and an engine that decodes the bytes in its ring and executes them; the scheduler interleaves the host
program (runtime/submit.py, through runtime/host_steps.py's protocol) with the engines, in time order or in a seeded
random order. What packets do is the vendors' (target/engine.py's interface: amd/engine.py for PM4 and SDMA,
nv/engine.py for NV); what a run that did not finish reports is runtime/reports.py's; what things cost is
runtime/cost.py's. See docs/run.md for the model and the scheduler.

Decoding is content-addressed: the packet's dwords (a bytes object) key a per-(engine kind, arch) cache of prepared
`Op`s, so a packet is decoded once however often it is submitted. An op's operands are pre-extracted and, for the hot
packets (waits, signal writes, copies), pre-resolved to memoryview cells of emulated memory; a doorbell's dwords are
mapped to ops in one pass, and the engine then runs them in a tight loop: a list index, a few slot reads and a handler
that is a couple of int ops. An unknown, malformed or unsupported packet, or an access outside mapped memory, is a
Fault naming the queue, the ring offset and the decoded packet; the emulator never lets a Python exception out of an
engine."""
from __future__ import annotations
import bisect, random
from collections import Counter, deque
from typing import Any, Callable, Optional
import attrs
import numpy as np
from ..ir import SCALARS, U32_MAX, NV_ARCHS, vendor_of
from ..target.layout import WINDOWS   # a ring with no address: the next device's ring base
from ..amd.packet import Packet
from ..amd import engine as amd_engine
from ..nv import engine as nv_engine
from .cost import KERNEL_BYTES_PER_US, HOST_COST
from .device import Device, Ring, Memory
from ..target.engine import EngineKind, Prepared, fault, DeviceFault, Waiting
from .host_steps import Block, HostWait, RingSpace, CopyFree
from .kernels import KernelError, KernelFault
from .reports import Fault, Blocked, Hang

__all__ = ["Emulator", "MemoryMap", "Engine", "Codec", "Op", "LoadedKernel", "TraceEvent", "Flow", "SignalWritten", "KINDS"]

MAX_BATCH = 256                 # packets an engine runs before the scheduler looks again (time-ordered mode)
INF = float("inf")

PROGRESS, BLOCKED, IDLE, FAULT, DONE = range(5)

# the engine a ring's packets run on: (vendor, queue engine) -> kind, and each kind's description by its vendor
KINDS: dict[tuple[str, str], str] = {("amd", "compute"): "pm4", ("amd", "copy"): "sdma", ("nv", "compute"): "nv", ("nv", "copy"): "nv"}
_ENGINE_KINDS: dict[str, Callable[[str], EngineKind]] = {"pm4": amd_engine.pm4_kind, "sdma": amd_engine.sdma_kind, "nv": nv_engine.nv_kind}

@attrs.frozen(slots=True)
class Op:
  """One distinct packet, prepared: its handler and operands (runtime/engine.py), the decoded packet, its cost, its
  length in dwords, how far it moves the read pointer (write-pointer units), its index among the codec's ops (the
  engines count executions per index; `Codec.names[index]` is the packet's name) and whether it enters an indirect
  buffer."""
  handler: Callable
  operands: Any
  packet: Packet
  cost: float
  dwords: int
  advance: int
  index: int
  indirect: bool

@attrs.frozen(slots=True)
class LoadedKernel:
  """A kernel the emulator can run: its implementation (runtime/kernels.py, runtime/isa/rdna3.py) and per parameter
  (mode, kernel-argument byte offset), mode `in`/`out`/`inout` for a buffer or a scalar type of ir.SCALARS."""
  fn: Any
  params: tuple

@attrs.frozen(slots=True)
class TraceEvent:
  """A packet an engine executed, or a statement the host performed, in a traced run (runtime/trace.py's slices)."""
  queue: str
  device: Optional[str]
  launch: Optional[int]
  key: Optional[int]       # what consecutive packets of one statement instance share (None: never merged)
  text: str
  t0: float
  t1: float
  packet: str
  line: Optional[int]

@attrs.frozen(slots=True)
class Flow:
  """A signal write (the index of its trace event) and a wait it released (the index of the wait's event)."""
  write: int
  wait: int

@attrs.frozen(slots=True)
class SignalWritten:
  """A signal write of a traced run: when it landed, where, the 32-bit value after it."""
  time: float
  addr: int
  value: int

class Codec:
  """Per (engine kind, arch) of one machine: the vendor's EngineKind (decoder, length rule, prepare) and the
  content-addressed op cache; `names[index]` is the name of the packet of op `index`."""
  def __init__(self, kind: EngineKind, m: "Emulator"):
    self.kind, self.m = kind, m
    self.fast = not m.tracing  # traced runs use the generic handlers, which record trace events and flows
    self.dec, self.length, self.unit = kind.decoder, kind.length, kind.unit
    self.cache: dict = {}
    self.names: list = []   # op index -> packet name

  def cell(self, addr: int):
    """The memoryview cell of a mapped, aligned dword for a fast handler, or None (traced run, or the access would
    fault: then the generic handler faults when the packet executes)."""
    if not self.fast: return None
    try: return self.m.mem.cell(addr)
    except DeviceFault: return None

  def op(self, key: bytes) -> Op:
    """The op for the packet whose dwords are `key`."""
    op = self.cache.get(key)
    if op is None:
      dws = np.frombuffer(key, "<u4").tolist()
      p = self.dec.decode_one(dws, 0)
      if p.raw: got = Prepared(fault, p.note)
      else:
        try: got = self.kind.prepare(p, self)
        except DeviceFault as e: got = Prepared(fault, str(e))
        except (KeyError, TypeError) as e: got = Prepared(fault, f"malformed {p.name} ({e!r})")
      n = len(dws)
      op = Op(got.handler, got.operands, p, got.cost, n, 4 * n // self.unit, len(self.names), got.indirect)
      if len(self.cache) > 1 << 16: self.cache.clear()  # random rings: do not grow without bound
      self.cache[key] = op
      self.names.append(p.name)
    return op

# ---- engines

class Engine:
  """One queue's engine: its ring, read pointer, indirect-buffer stack, register file and clock; it fetches the packets
  its ring publishes and runs them as its vendor's ops (its Codec). `R_UD` and `R_PGM_LO`: the dispatch registers of
  a PM4 engine (EngineKind), which its SET_SH_REG counts and the RDNA3 executor reads."""
  def __init__(self, m: "Emulator", ring: Ring):
    self.m, self.mem, self.ring, self.name, self.device = m, m.mem, ring, ring.name, ring.device
    self.codec = m.codec(KINDS["nv" if ring.arch in NV_ARCHS else "amd", ring.engine], ring.arch)
    self.length, self.R_UD, self.R_PGM_LO = self.codec.length, self.codec.kind.user_data, self.codec.kind.pgm_lo
    r = self.mem.find(ring.addr, ring.size)
    self.ring_u32 = r.u32[(ring.addr - r.base) >> 2:(ring.addr - r.base + ring.size) >> 2]
    self.ndw, self.unit = ring.size // 4, ring.unit
    self.pcache: list = [None] * self.ndw  # ring dword -> op decoded there since the last doorbell (None: step())
    self.published: list = []              # ring dword ranges published by doorbells, not yet refreshed
    self.rptr = 0
    self.starts: deque = deque()  # (write pointer before a doorbell, host time of the doorbell)
    self.ib: list = []           # indirect buffers being executed: [base, size dwords, position dwords]
    self.push: Optional[tuple[int, int, bool]] = None   # (base, size, chain) of the indirect buffer the packet enters
    self.regs: dict = {}
    self.ud_count = 0            # PM4: the USER_DATA registers the last SET_SH_REG there set
    self.clock = 0.0
    self.cost = 0.0
    self.packets = 0
    self.counts: list = []       # op index -> times executed (by_name sums them per name)
    self.first: list = []        # op indices in order of first execution (by_name lists names in that order)
    self.blocked_at = -1         # mem.writes when the current wait last failed
    self.wait_info: Optional[Waiting] = None   # the failing wait (valid while blocked)
    self.cur: Optional[Packet] = None          # the packet being executed
    self.cur_pos: tuple[Optional[int], Optional[tuple[int, int]]] = (None, None)   # (ring byte offset, (ib base, dword))
    self.index = 0

  def busy(self) -> bool: return bool(self.ib) or self.rptr != self.ring.wptr

  def fetch(self):
    """The dwords of the next packet (as bytes: the op cache's key), or None when there is nothing to run."""
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
      return mem.view(a, 4 * n).tobytes()
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
    if i + n <= ndw: return ring[i:i + n].tobytes()
    return np.concatenate((ring[i:], ring[:i + n - ndw])).tobytes()

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
        pc[(x + i) % nd] = None if op.indirect else op  # the indirect-buffer stack is step()'s business
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
        if op is not None and self.rptr + op.advance <= self.ring.wptr: self.cur_pos = (4 * pos, None)
        else: op = None
      if op is None:
        got = self.fetch()
        if got is None: return IDLE
        op = self.codec.op(got)
        if not self.ib and not op.indirect: self.pcache[(self.rptr * self.unit >> 2) % self.ndw] = op
        self.grow_counts()
      p, self.cost, k = op.packet, op.cost, op.index
      self.cur = p
      start, r0 = self.clock, self.rptr
      if not op.handler(self, op.operands):
        self.blocked_at = self.mem.writes
        return BLOCKED
      self.clock += self.cost  # a wait may have moved the clock to the time its value was written
      if self.ib: self.ib[-1][2] += op.dwords
      else: self.rptr += op.advance
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
        if op is None: break
        adv = op.advance
        if rptr + adv > wptr: break
        self.cost = op.cost
        if not op.handler(self, op.operands):
          st = BLOCKED
          break
        self.clock += self.cost  # a wait may have moved the clock to the time its value was written
        rptr += adv
        k = op.index
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
      self.cur, self.cur_pos = op.packet, (4 * ((rptr * unit >> 2) % nd), None)
      if st == BLOCKED: self.blocked_at = self.mem.writes
      else: self.m.fault = self.make_fault(msg)
    return ran, st

  @property
  def by_name(self) -> Counter:
    c: Counter = Counter()
    for k in self.first: c[self.codec.names[k]] += self.counts[k]
    return c

  def enter_ib(self, base: int, size: int, chain: bool) -> None:
    """The packet being executed enters the indirect buffer of `size` dwords at `base` (`chain`: in place of the one
    it is in), once it is done."""
    self.push = (base, size, chain)

  def position(self):
    ring_off, ib = self.cur_pos
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

  def call_kernel(self, k, ka: int, grid: tuple, block: tuple, a) -> None:
    """Run kernel k on the kernel arguments at ka: buffer parameters as views of the ranges they may touch, scalars as
    values; `grid`/`block` for a kernel that wants the launch dims; `a`: the dispatch's operands for real machine code
    (None on NV)."""
    mem, m = self.mem, self.m
    fn, params = k.fn, k.params
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
  """The host program (a generator of host_steps.HostStep and Block) as an actor of the scheduler."""
  name, device, index = "host", None, 0
  def __init__(self, m: "Emulator", gen):
    self.m, self.gen, self.clock, self.done, self.blocked_at, self.steps = m, gen, 0.0, False, -1, 0
    self.pending: Optional[Block] = None   # the host step waiting on a signal
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
      else:  # a HostStep: a statement the host just performed
        t0 = self.clock
        self.clock += item.cost
        if m.tracing: m.trace_host(self, t0, self.clock, item.what, item.line, item.launch)
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
               max_steps: int = 50_000_000, policy: Optional[Any] = None):
    mm = memory_map or MemoryMap()
    self.mem = Memory()
    self.engines: list[Engine] = []
    self.by_ring: dict = {}
    self.kernels: dict[int, LoadedKernel] = {}   # by program address
    self.kernels_by_name: dict[str, LoadedKernel] = {}
    self.buffers = mm.buffers                # sorted (addr, end, name) for kernel argument ranges
    self.kernarg_ranges = mm.kernarg_ranges  # kernarg address -> [(lo, hi) or None] per parameter
    self.namer: Callable = mm.name_at
    self.locator: Optional[Any] = None   # the submitter while `run` runs: (ring, dword) -> (launch, stmt) for faults and hangs
    self.rng = random.Random(seed) if seed is not None else None
    self.seed, self.max_steps = seed, max_steps
    self.tracing = trace
    self.events: list[TraceEvent] = []
    self.flows: list[Flow] = []
    self.signal_log: list[SignalWritten] = []   # every signal write (traced runs)
    self.last_write: dict = {}       # signal address -> emulated time of its last write (a float: no allocation)
    self.write_event: dict = {}      # signal address -> trace event index of that write (traced runs)
    self.fault: Optional[Fault] = None
    self.hang: Optional[Hang] = None
    self._codecs: dict = {}
    self.ring_top: dict = {}
    self.host_actor: Optional[HostActor] = None
    self.gate: Optional[Any] = None   # a replay's ordering (runtime/replays.py): holds an engine before a statement; runs traced
    self.policy = policy              # picks the next actor, one step each (runtime/schedules.py's PCT): `pick(cands)`, `ran(actor)`

  def codec(self, kind: str, arch: str) -> Codec:
    """The codec of engine kind `kind` (KINDS' values) on `arch`, one per machine."""
    if (kind, arch) not in self._codecs: self._codecs[kind, arch] = Codec(_ENGINE_KINDS[kind](arch), self)
    return self._codecs[kind, arch]

  # ---- Device interface
  def allocate(self, addr, size, name, device=None): self.mem.add(addr, size, name, device)
  def map(self, addr, size): return self.mem.view(addr, size)
  def write(self, addr, data): self.mem.write(addr, data)
  def zero(self, addr, size): self.mem.zero(addr, size)
  def read(self, addr, size): return self.mem.view(addr, size).tobytes()
  def create_queue(self, name, engine, device, arch, ring_size, addr: Optional[int] = None) -> Ring:
    if addr is None: addr = self.ring_top.get(device, WINDOWS[vendor_of(arch)].ring_base(len(self.ring_top)))
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
    self.kernels[prog_addr] = self.kernels_by_name[name] = LoadedKernel(fn, tuple(tuple(p) for p in params))
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
      self.signal_log.append(SignalWritten(t, addr, self.mem.r32(addr)))
  def wait_satisfied(self, who, addr: int):
    t = self.last_write.get(addr)
    if t is None: return
    if t > who.clock: who.clock = t
    if self.tracing: self.flows.append(Flow(self.write_event[addr], len(self.events)))

  # ---- trace
  def trace_packet(self, e: Engine, p: Packet, t0: float, t1: float, rptr: int):
    launch, st = e.locate(rptr)
    self.events.append(TraceEvent(e.name, e.device, launch, st.offset if st else None, st.text if st else p.name, t0, t1,
                                  p.name, st.line if st else None))
    if self.gate is not None: self.gate.executed(e, launch, st.line if st else None)
  def trace_host(self, h: HostActor, t0: float, t1: float, what: str, line, launch):
    self.events.append(TraceEvent("host", None, launch, h.steps, what, t0, t1, "host", line))
    if self.gate is not None: self.gate.executed(h, launch, line)

  # ---- the scheduler
  def run(self, host, locator=None) -> None:
    """Interleave `host` (a generator, see submit.py) with the engines. Default: the ready actor with the smallest
    emulated clock runs next (ties round-robin), for a batch while it stays the earliest; with a seed: a uniformly
    random ready actor runs one step; with a policy (runtime/schedules.py's PCT): the actor it picks runs one step.
    Sets self.fault / self.hang. `locator` (the Submitter: `locate(ring, dword)`,
    `locate_ib(ring, base, pos)` -> (launch, SourceEntry)) names the statement of a fault or a hang."""
    self.locator = locator
    H = self.host_actor = HostActor(self, host)
    actors: list[Any] = [H, *self.engines]   # HostActor and Engines: busy, blocked_at, clock, index
    n, rr, steps, rng, gate, policy = len(actors), 0, 0, self.rng, self.gate, self.policy
    mem = self.mem
    while True:
      w = mem.writes
      cands = [a for a in actors if a.busy() and a.blocked_at != w]
      if gate is not None and cands: cands = gate.admit(self, cands)   # (one packet at a time, below)
      if not cands:
        if H.done and not any(e.busy() for e in self.engines): return
        self.hang = self.hang_report()
        return
      if policy is not None:
        a = policy.pick(cands)
        budget, limit = 1, None
      elif gate is not None:
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
      if policy is not None and st == PROGRESS: policy.ran(a)
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
      wi = e.wait_info or Waiting()
      addr = wi.addr
      out.append(Blocked(e.name, e.device, ring_off, e.cur, self.namer(addr) if addr is not None else None, addr,
                         wi.compare, wi.ref, wi.value, launch,
                         st.line if st else None, st.text if st else None, mask=wi.mask))
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
