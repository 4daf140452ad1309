"""The CPU-side submit interpreter: resolve each launch's variables, patch the dwords whose value changed, put the
queues' commands on their rings, publish write pointers, ring doorbells, and run the host statements.

Ring mode (default): commands go on the ring directly (tinygrad's unbound `_submit`). The patched template stays on
the host and only dwords whose value differs from the previous launch are rewritten there (vectorised
compare-and-scatter); a ring copy per launch is one numpy slice assignment.

Indirect mode (`indirect=True`, tinygrad's bound path): each queue has COPIES resident command buffers used in turn,
patched in place per changed var; the ring gets an INDIRECT_BUFFER and a fence per launch, and a copy is patched
again only once its fence shows the engine has read it (launches overlap; docs/run.md says why the fence, not the read
pointer).

Rings: PM4 write pointers count dwords and a packet may wrap around the ring end (the CP reads modulo the ring);
SDMA write pointers count bytes and packets never straddle the end: the submission is split at a packet boundary and
the rest of the ring is filled with one SDMA NOP.

The host program is a generator the device runs (device.run): it performs submits and signal writes itself through
the device interface, yields a HostStep (what it did, what it cost) after each statement, and yields a Block
(HostWait, RingSpace, CopyFree) when it must wait; the device resumes it once the condition holds
(runtime/host_steps.py)."""
from __future__ import annotations
import bisect
from typing import Optional
import numpy as np
from ..ir import U32_MAX, NV_ARCHS, vendor_of, in_launches
from ..target.image import Image, QueueImage
from ..target.layout import WINDOWS   # rings sit at its ring_offset inside each device's window
from .device import Device, Ring
from .cost import HOST_COST
from .host_steps import HostStep, HostWait, RingSpace, CopyFree

__all__ = ["Submitter", "QueueState", "RING_MIN", "COPIES"]

COPIES = 4   # indirect mode: command-buffer copies per queue, used in turn (launches k+1..k+3 run ahead of k)
SMALL = 16   # a var with at most this many patch sites is written dword by dword (cheaper than a numpy scatter)

RING_MIN = 64 * 1024     # bytes; rings hold at least 4 launches of their queue's commands, rounded up to a power of 2

def _expr(var, add) -> str:
  if var is None: return str(add if add > U32_MAX else add & U32_MAX)   # (a host wait's value may be 64-bit)
  return var if add == 0 else f"{var} {'+' if add > 0 else '-'} {abs(add)}"

def _i64(v: int) -> int:
  """A patch's constant as a signed 64-bit int: `var + add` wraps modulo 2**64 alike (its low and high dwords are what
  the patch stores), and a constant past 64 bits (`kick + 2**63`, check's `overflow`) fits the arrays."""
  return ((v + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)

class QueueState:
  """One queue: its host-side patched template, patch table as arrays, ring and the source map of what it put there."""
  def __init__(self, qi: QueueImage, ring: Ring, ring_u32: np.ndarray, var_index: dict, device: Device):
    self.qi, self.name, self.ring, self.ring_u32 = qi, qi.name, ring, ring_u32
    # a ring whose pointer counts dwords (PM4, NV's methods) is read modulo its size, a command may wrap around its end;
    # SDMA's (bytes) takes whole packets only (`bounds`)
    self.pm4 = ring.unit == 4
    self.tmpl = np.array(qi.dwords, dtype=np.uint32)
    ps = qi.patches
    self.poffs = np.array([p.offset for p in ps], dtype=np.intp)
    self.pvar = np.array([var_index[p.var] if p.var is not None else len(var_index) for p in ps], dtype=np.intp)
    self.padd = np.array([_i64(p.add) for p in ps], dtype=np.int64)
    self.pshift = np.array([32 if p.encoding == "hi" else 0 for p in ps], dtype=np.int64)
    self.prev = self.tmpl[self.poffs].copy()
    mp = qi.mem_patches   # kernarg dwords (scalars, rebound buffer addresses): memory the host writes at submit
    self.mviews = [device.map(p.offset, 4).view("<u4") for p in mp]  # one dword view each: kernargs are many regions
    self.mvar = np.array([var_index[p.var] if p.var is not None else len(var_index) for p in mp], dtype=np.intp)
    self.madd = np.array([_i64(p.add) for p in mp], dtype=np.int64)
    self.mshift = np.array([32 if p.encoding == "hi" else 0 for p in mp], dtype=np.int64)
    self.mprev: Optional[np.ndarray] = None     # nothing written yet: the first submit writes every memory patch
    self.ndw = len(self.tmpl)
    self.ndw_ring = ring.size // 4
    self.bounds = _packet_starts(qi) if not self.pm4 else []   # SDMA: packet starts, where a submission may wrap
    self.seg_starts: list = []   # absolute ring dword of each submission's first command dword
    self.segs: list = []         # (abs start dword, dwords, launch, template offset)
    self.patched: list = []      # dwords rewritten per launch
    self.submitted = 0           # launches submitted
    self.ind: Optional[Indirect] = None   # indirect mode's resident copies

def _packet_starts(qi: QueueImage) -> list:
  from ..amd import sdma
  return [p.offset for p in sdma.decoder(qi.arch).decode(qi.dwords)] + [len(qi.dwords)]

class Indirect:
  """Indirect mode for one queue: COPIES resident command buffers, each patched in place only in the dwords of the
  vars whose value differs from the launch it last held, and a ring that gets per launch only an INDIRECT_BUFFER
  packet (tinygrad's bound `_submit`) and a fence: the queue's engine writes the launch number to the fence once it
  has read all of the copy's packets, and a copy is patched again only after its fence passed (docs/run.md)."""
  def __init__(self, sub: "Submitter", qs: QueueState, addr: int):
    qi, dev = qs.qi, sub.dev
    self.n = qs.ndw if qs.pm4 else -(-qs.ndw // 8) * 8     # an SDMA IB is padded with NOPs to 8 dwords (tinygrad)
    stride = -(-4 * self.n // 256) * 256
    self.fence = addr
    self.addrs = [addr + 256 + j * stride for j in range(COPIES)]
    dev.allocate(addr, 256 + COPIES * stride, f"{qi.name}.commands", qi.device)
    self.fence_now = dev.map(addr, 4).view("<u4").data.cast("B").cast("I")
    base = np.zeros(self.n, dtype=np.uint32)
    base[:qs.ndw] = qi.dwords
    for p in qi.patches:
      if p.var is None: base[p.offset] = p.add & U32_MAX        # constant patches hold for every launch
    self.views = []
    for a in self.addrs:
      dev.write(a, base.tobytes())
      v = dev.map(a, 4 * self.n).view("<u4")
      self.views.append((v, v.data.cast("B").cast("I")))
    self.held: list[Optional[list]] = [None] * COPIES    # the var values each copy's patch sites hold (None: the template's)
    self.launch = [0] * COPIES     # the launch each copy was last submitted for
    # per (var, add): the sites, as a Python list when few (dword stores), else a numpy index (one scalar scatter)
    sites: dict = {}
    for p in qi.patches:   # shift 32: the high dword of a 64-bit value (a rebound buffer's address)
      if p.var is not None: sites.setdefault((sub.var_index[p.var], p.add, 32 if p.encoding == "hi" else 0), []).append(p.offset)
    self.groups = sorted((v, add, sh, offs if len(offs) <= SMALL else None, np.array(offs, dtype=np.intp), len(offs))
                         for (v, add, sh), offs in sites.items())
    from ..amd import pm4, sdma
    enc = (pm4 if qs.pm4 else sdma).encoder(qi.arch)
    def ib(a: int) -> list:
      out: list[int] = []
      enc.indirect(out, a, self.n)
      return out
    fence: list[int] = []
    enc.signal(fence, self.fence, 0x5EED_F00D)
    self.value_at = len(ib(0)) + fence.index(0x5EED_F00D)   # the fence's value dword; the dword after it is 0
    # per copy: its INDIRECT_BUFFER packet and the fence, the value filled in per launch
    # 8 zero dwords (SDMA NOPs) ahead of each, for the padding that ends an SDMA INDIRECT on an 8-dword boundary
    self.ring_cmds = [np.array([0] * 8 + ib(a) + fence, dtype=np.uint32) for a in self.addrs]
    self.ring_mvs = [c.data.cast("B").cast("I") for c in self.ring_cmds]
    self.value_at += 8
    self.unit, self.ring_bytes = qs.ring.unit, qs.ring.size
    self.ring_mv = qs.ring_u32.data.cast("B").cast("I")
    self.ib_packet = ib

  def patch(self, j: int, vals: list) -> int:
    """Bring copy j's patch sites to `vals` (one value per var); returns the dwords written."""
    held, (arr, mv), n = self.held[j], self.views[j], 0
    for v, add, sh, small, offs, count in self.groups:
      x = vals[v]
      if held is not None and held[v] == x: continue
      x = ((x + add) >> sh) & U32_MAX
      if small is not None:
        for o in small: mv[o] = x
      else: arr[offs] = x
      n += count
    self.held[j] = vals
    return n

  def fence_packet(self, launch: int) -> list:
    """The fence after launch `launch`'s INDIRECT_BUFFER: the engine writes `launch` once it has read the copy."""
    k = 8 + len(self.ib_packet(0))
    c = self.ring_cmds[0][k:].tolist()
    c[self.value_at - k] = launch & U32_MAX
    return c

class Submitter:
  def __init__(self, image: Image, device: Device, var_values: Optional[dict] = None, ring_size: Optional[int] = None,
               timeout_us: float = 10_000_000.0, indirect: bool = False):
    self.image, self.dev, self.overrides, self.timeout_us = image, device, dict(var_values or {}), timeout_us
    self.indirect = indirect
    self.vars = list(image.vars)
    self.var_index = {v: i for i, v in enumerate(self.vars)}
    for r in image.regions: device.allocate(r.addr, r.size, r.name, r.device)
    for a, b in image.data: device.write(a, b)
    for q in image.queues:  # the resident command buffer: what a disassembler of device memory finds there
      if q.dwords: device.write(q.addr, np.array(q.dwords, dtype="<u4").tobytes())
    order = {d["name"]: i for i, d in enumerate(image.devices)}
    top: dict = {}
    self.queues: dict[str, QueueState] = {}
    self.by_ring: dict = {}
    for q in image.queues:
      size = ring_size or max(RING_MIN, 1 << (16 * len(q.dwords) + 64).bit_length())
      if q.arch in NV_ARCHS and indirect:
        raise ValueError(f"queue {q.name}: indirect submission is AMD's (INDIRECT_BUFFER); NV queues take the ring path")
      base = top.get(q.device, WINDOWS[vendor_of(q.arch)].ring_base(order[q.device]))
      top[q.device] = base + size
      ring = device.create_queue(q.name, q.engine, q.device, q.arch, size, addr=base)
      qs = QueueState(q, ring, device.map(ring.addr, size).view("<u4"), self.var_index, device)
      self.queues[q.name] = qs
      self.by_ring[id(ring)] = qs
      if indirect:
        qs.ind = Indirect(self, qs, top[q.device])
        top[q.device] += -(-(256 + COPIES * 4 * qs.ind.n) // 256) * 256 + COPIES * 256
    if any(not qs.pm4 for qs in self.queues.values()):
      from ..amd import sdma
      enc = sdma.encoder(next(qs.qi.arch for qs in self.queues.values() if not qs.pm4))
      self.sdma_nop, self.sdma_nop_max = enc.padding, enc.PADDING_MAX

  # ---- variables and patches
  def env_vector(self, launch: int) -> np.ndarray:
    env = self.image.env(launch, **self.overrides)
    return np.array([env[v] for v in self.vars] + [0], dtype=np.int64)  # last slot: constant patches

  def patch_memory(self, qs: QueueState, vec: np.ndarray) -> int:
    """Write the queue's kernel-argument dwords whose value changed since the last launch (all at the first submit);
    returns how many."""
    if not len(qs.mviews): return 0
    vals = (((vec[qs.mvar] + qs.madd) >> qs.mshift) & U32_MAX).astype(np.uint32)
    ch = np.ones(len(vals), bool) if qs.mprev is None else vals != qs.mprev
    views = qs.mviews
    for i, v in zip(np.flatnonzero(ch).tolist(), vals[ch].tolist()): views[i][0] = v
    qs.mprev = vals
    return int(np.count_nonzero(ch))

  def patch(self, qs: QueueState, vec: np.ndarray) -> int:
    """Rewrite the template dwords whose value changed since the last launch, and the kernel arguments; returns how
    many."""
    n = self.patch_memory(qs, vec)
    if not len(qs.poffs): return n
    vals = (((vec[qs.pvar] + qs.padd) >> qs.pshift) & U32_MAX).astype(np.uint32)
    ch = vals != qs.prev
    if (c := int(np.count_nonzero(ch))):
      qs.tmpl[qs.poffs[ch]] = vals[ch]
      qs.prev = vals
    return n + c

  # ---- rings
  def layout(self, qs: QueueState) -> tuple:
    """(bytes the submission takes on the ring incl. padding, split dword index or None, pad dwords)."""
    r = qs.ring
    pos = (r.wptr * r.unit >> 2) % qs.ndw_ring
    if qs.pm4 or pos + qs.ndw <= qs.ndw_ring: return 4 * qs.ndw, None, 0
    room = qs.ndw_ring - pos
    b = qs.bounds[bisect.bisect_right(qs.bounds, room) - 1]  # last packet boundary that fits before the end
    return 4 * (qs.ndw + room - b), b, room - b

  def put(self, qs: QueueState, launch: int, split, pad: int) -> None:
    """Copy the patched template onto the ring and ring the doorbell (space already checked)."""
    r, ring, nd, t = qs.ring, qs.ring_u32, qs.ndw_ring, qs.tmpl
    abs_dw = r.wptr * r.unit >> 2
    pos = abs_dw % nd
    if split is None:
      end = pos + qs.ndw
      if end <= nd: ring[pos:end] = t
      else:
        ring[pos:] = t[:nd - pos]
        ring[:end - nd] = t[nd - pos:]
      self._seg(qs, abs_dw, 0, qs.ndw, launch)
    else:
      ring[pos:pos + split] = t[:split]
      self._seg(qs, abs_dw, 0, split, launch)
      p, left = pos + split, pad
      while left:
        k = min(left, self.sdma_nop_max)
        ring[p] = self.sdma_nop(k)
        ring[p + 1:p + k] = 0
        p += k
        left -= k
      ring[:qs.ndw - split] = t[split:]
      self._seg(qs, abs_dw + split + pad, split, qs.ndw - split, launch)
    total = qs.ndw + pad
    self.dev.doorbell(r, r.wptr + 4 * total // r.unit)

  def _seg(self, qs, abs_dw, off, n, launch):
    if n:
      qs.seg_starts.append(abs_dw)
      qs.segs.append((abs_dw, n, launch, off))

  def locate(self, ring: Ring, abs_dw: int):
    """(launch, SourceEntry of the image's source map) of the command at absolute ring dword `abs_dw`."""
    qs = self.by_ring.get(id(ring))
    if qs is None: return None, None
    i = bisect.bisect_right(qs.seg_starts, abs_dw) - 1
    if i < 0: return None, None
    start, n, launch, off = qs.segs[i]
    if abs_dw >= start + n: return None, None
    return launch, qs.qi.span_at(off + abs_dw - start)

  def locate_ib(self, ring: Ring, base: int, pos: int):
    """(launch, statement) of the command at dword `pos` of the indirect buffer at `base` (indirect mode)."""
    qs = self.by_ring.get(id(ring))
    ind = qs.ind if qs is not None else None
    if qs is None or ind is None or base not in ind.addrs: return None, None
    return ind.launch[ind.addrs.index(base)], qs.qi.span_at(pos)

  # ---- indirect mode
  def ib_ring(self, qs: QueueState, launch: int):
    """The dwords this launch puts on the ring (a memoryview): the INDIRECT_BUFFER to its copy and the fence (SDMA: NOPs
    first so that the INDIRECT ends on an 8-dword boundary, as tinygrad pads it)."""
    ind = qs.ind
    assert ind is not None
    cmds = ind.ring_mvs[launch % COPIES]
    cmds[ind.value_at] = launch & U32_MAX
    return cmds[8:] if qs.pm4 else cmds[8 - (8 - ((qs.ring.wptr >> 2) + 6) % 8) % 8:]

  def put_ib(self, qs: QueueState, launch: int, cmds) -> None:
    r, ind, nd = qs.ring, qs.ind, qs.ndw_ring
    assert ind is not None
    wptr = r.wptr
    pos = (wptr * ind.unit >> 2) % nd
    n = len(cmds)
    if pos + n <= nd: ind.ring_mv[pos:pos + n] = cmds
    elif qs.pm4:  # the CP reads the ring modulo its size
      ind.ring_mv[pos:] = cmds[:nd - pos]
      ind.ring_mv[:n - (nd - pos)] = cmds[nd - pos:]
    else:         # SDMA packets do not straddle the ring end: a NOP to the end, then this launch from the start
      room = nd - pos
      qs.ring_u32[pos] = self.sdma_nop(room)
      qs.ring_u32[pos + 1:] = 0
      self.dev.doorbell(r, wptr + 4 * room // ind.unit)
      self.put_ib(qs, launch, self.ib_ring(qs, launch))
      return
    self.dev.doorbell(r, wptr + 4 * n // ind.unit)

  def submit_indirect(self, qs: QueueState, launch: int, vals: list, vec: np.ndarray):
    """Patch this launch's copy and put its INDIRECT_BUFFER on the ring; a Block when the copy or the ring is busy."""
    ind = qs.ind
    assert ind is not None
    j = launch % COPIES
    prev = ind.launch[j]
    if prev and ind.fence_now[0] < prev: return CopyFree(qs.ring, ind.fence, prev)
    r = qs.ring
    if ind.ring_bytes - (r.wptr - self.dev.read_ptr(r)) * ind.unit < 256: return RingSpace(r, 256, self.dev)
    qs.patched.append(ind.patch(j, vals) + self.patch_memory(qs, vec))
    ind.launch[j] = launch
    self.put_ib(qs, launch, self.ib_ring(qs, launch))
    qs.submitted = launch
    return None

  # ---- the host program
  def submit(self, qs: QueueState, launch: int, vec: np.ndarray, line):
    if self.indirect:
      vals = vec.tolist()
      while (b := self.submit_indirect(qs, launch, vals, vec)) is not None: yield b
      yield HostStep(HOST_COST["submit"] + HOST_COST["submit_dword"] * qs.patched[-1], f"submit {qs.name}", line, launch)
      return
    qs.patched.append(self.patch(qs, vec))
    need, split, pad = self.layout(qs)
    if need > qs.ring.size: raise ValueError(f"queue {qs.name}: {need} bytes of commands do not fit its {qs.ring.size}-byte ring")
    space = RingSpace(qs.ring, need, self.dev)
    if not space.ready(None): yield space
    self.put(qs, launch, split, pad)
    qs.submitted = launch
    yield HostStep(HOST_COST["submit"] + HOST_COST["submit_dword"] * qs.ndw, f"submit {qs.name}", line, launch)

  def host(self, launches: int):
    """The host program of `launches` consecutive launches, as a generator (see the module docstring)."""
    img = self.image
    rewrites: dict = {}   # an image lists a rewrite's bytes; the host writes them and zeros to the buffer's end
    size_at = dict(img.buffers.values())
    for k, a, b in img.rewrites: rewrites.setdefault(k, []).append((a, b, size_at[a]))
    for k in range(1, launches + 1):
      # what takes part in launch k (`launches` clauses): the host steps of its host blocks, its queues
      steps = [st for st in img.host if in_launches(st.get("launches"), k)]
      here = {q.name for q in img.queues if in_launches(q.launches, k)}
      named = {q for st in steps if st["op"] == "submit" for q in st["queues"]}
      bare = any(st["op"] == "submit" and not st["queues"] for st in steps)
      vec = self.env_vector(k)
      env = dict(zip(self.vars, vec.tolist()))
      done: set = set()
      def sub(names, line):
        for name in names:
          if name in done or name not in here: continue   # (a queue not in this launch is not submitted in it)
          if not done:  # a `rewritten` buffer: the host writes launch k's contents in place before its first submit
            for a, b, size in rewrites.get(k, ()):
              self.dev.write(a, b)
              if size > len(b): self.dev.zero(a + len(b), size - len(b))   # in place: a 1 GiB buffer is no 1 GiB bytes
              yield HostStep(HOST_COST["signal"] + HOST_COST["submit_dword"] * size / 4, f"rewrite {img.name_at(a)}", line, k)
          done.add(name)
          yield from self.submit(self.queues[name], k, vec, line)
      # queues that no submit covers go first (a bare submit covers every queue)
      yield from sub([] if bare else [q.name for q in img.queues if q.name not in named], None)
      for st in steps:
        op = st["op"]
        if op == "submit": yield from sub(st["queues"] or [q.name for q in img.queues], st["line"])
        elif op == "write":   # the host stores launch k's bytes at this point of its block (its lists: its block's launches)
          n = k - (st["launches"][0] if st.get("launches") else 1)
          b = st["data"][n] if n < len(st["data"]) else b""
          self.dev.write(st["addr"], b)
          yield HostStep(HOST_COST["signal"] + HOST_COST["submit_dword"] * len(b) / 4, f"write {st['buffer']}", st["line"], k)
        else:
          v = (env[st["var"]] if st["var"] is not None else 0) + st["add"]
          if op == "signal" or v <= U32_MAX: v &= U32_MAX   # the host's wait compares 64 bits: past 32 it never passes
          text = f"{op} {st['signal']} {'>=' if op == 'wait' else '='} {_expr(st['var'], st['add'])}"
          if op == "signal":
            self.dev.signal_write(st["addr"], v)
            yield HostStep(HOST_COST["signal"], text, st["line"], k)
          else: yield HostWait(st["addr"], v, st["signal"], st["line"], k, text, self.timeout_us)
