"""AMD queues back to .hcq statements: statement-sized groups of PM4/SDMA packets (an image's source map gives them; a
raw stream is grouped by the shapes hcqdsl and tinygrad emit, `group_packets`), each group lifted by what its packets
mean (amd/meaning.py). Whole images (hcqdsl/lift/image.py), raw dumps and captures (hcqdsl/lift/raw.py,
hcqdsl/lift/captured.py) lift AMD queues here, as NV's are lifted by hcqdsl/nv/lift.py."""
from __future__ import annotations
from typing import Optional
from ..ir import Wait, SignalWrite, Exec, Copy, Write, Poll, Barrier, Timestamp, Epoch, Ref, Expr, Slice, POLL_SIZE, epoch_wait
from ..target.image import Image, QueueImage
from ..target.lifting import Unliftable, signal_at, buffer_slice
from .disasm import decoder
from .meaning import meaning, dispatch, field_at

__all__ = ["lift_queue", "lift_group", "statement_groups", "group_packets", "LIFT_ERRORS"]

# what a group of packets may raise on an image whose records disagree with its packets: kept as a comment
LIFT_ERRORS = (Unliftable, KeyError, IndexError, TypeError)

def _args(img: Image, q: QueueImage, k: dict, kr, ka: int):
  """An exec's arguments from its kernel-argument region: slices by the region's record, scalar parameters (`None`
  there) from the queue's kernel-argument patches, else the value stored in the kernel arguments."""
  mem = {p.offset: p for p in q.mem_patches}
  data = dict(img.data)
  params = k.get("params") or []
  for i, a in enumerate(kr.meta["args"]):
    if a is not None:
      yield Slice(Ref(a[0]), a[1], a[2], a[3], a[4])
      continue
    off = params[i][2]
    if (p := mem.get(ka + off)) is not None:
      yield Expr(Ref(p.var) if p.var else None, p.add)
      continue
    raw = int.from_bytes(data.get(ka, b"")[off:off + 4].ljust(4, b"\0"), "little")
    yield Expr(None, raw)  # as the program wrote it: a literal is 0 .. 2**32-1 (an i32 parameter takes its bits), never negative

def lift_group(img: Image, q: QueueImage, pk: list, engine: str) -> list:
  """The statements a group of packets (one statement's, or one packet without a source map) stands for. Raises
  Unliftable when it stands for none."""
  if any(p.note for p in pk): raise Unliftable(pk[0].note or "raw packet")
  out = _Group(img, q, engine).statements(pk)
  if out is None: raise Unliftable("packets " + ", ".join(p.name for p in pk) + " are no .hcq statement")
  return out

# a group's shape, by its packets' kinds (amd.meaning.KINDS) -> the _Group method that lifts it; a dispatch's
# packets are its register writes and cache actions around the DISPATCH_DIRECT
SHAPES = {("wait",): "wait", ("poll",): "wait", ("compare",): "wait", ("barrier", "acquire"): "barrier", (): "barrier",
          ("write",): "write", ("signal",): "signal", ("timestamp",): "timestamp",
          (None, "timestamp", "acquire"): "timestamp"}

class _Group:
  """Lifts one group of packets of queue `q`; a dword the queue patches per launch is its var's expression. Where a
  field sits in its packet is the decoders' (amd.meaning.field_at), as the patch table's offsets are."""
  def __init__(self, img: Image, q: QueueImage, engine: str):
    self.img, self.q, self.engine, self.patches = img, q, engine, {p.offset: p for p in q.patches}

  def statements(self, pk: list) -> Optional[list]:
    ms = [meaning(p) for p in pk]
    kinds = tuple(m.kind if m is not None else None for m in ms)
    if self.engine == "copy" and pk and all(k == "copy" for k in kinds): return [self.copy(ms, pk)]
    if self.engine == "compute" and "dispatch" in kinds: return [self.exec(pk)]
    how = SHAPES.get(kinds)
    if how is None or (how == "barrier" and (not pk) != (self.engine == "copy")): return None
    if how == "barrier": return [Barrier()]   # compute: the HDP flush's register wait, then ACQUIRE_MEM; copy: no packets
    m, p = next((m, p) for m, p in zip(ms, pk) if m is not None and m.kind != "acquire")
    if m.addr is None: return None   # a packet too short for its address
    if how == "timestamp": return [Timestamp(Ref(self.sig(m.addr)))]
    if how == "write": return [self.write(p, m)]
    if how != "signal": return [self.wait(p, m)]
    if m.value_field is None or m.value is None: return None
    return [SignalWrite(Ref(self.sig(m.addr)), self.expr(self.at(p, m.value_field), m.value))]

  def at(self, p, field: str) -> int:
    """The dword offset of packet `p`'s `field` in the queue."""
    return p.offset + field_at(self.engine, self.q.arch, p.name, field)

  def expr(self, off: int, v: int) -> Expr:
    p = self.patches.get(off)
    return Expr(Ref(p.var), p.add) if p and p.var else Expr(None, v)

  def copy(self, ms: list, pk: list) -> Copy:
    """A `copy`: its copy packets (`ms` their meanings), one after the other (a split copy is one statement)."""
    m, img, size = ms[0], self.img, sum(x.size for x in ms)
    s = buffer_slice(img, m.src, size, self.at(pk[0], m.src_field) in self.patches)
    d = buffer_slice(img, m.addr, size, self.at(pk[0], m.addr_field) in self.patches)
    if s is None or d is None: raise Unliftable("copy outside every buffer")
    return Copy(d, s)

  def wait(self, p, m):
    """A `wait` (`>=` on every bit), or on a compute queue tinygrad's poll_bit (`==` under a mask): a `poll`."""
    off = self.at(p, m.value_field)
    if m.kind == "poll": return self.poll(p, m.addr, off, m.value, m.mask)
    if m.kind != "wait":   # only tinygrad's compute queue has poll_bit
      raise Unliftable(f"masked poll (function {m.function}, mask {m.mask:#x}) of {m.addr:#x}: a `wait` compares `>=` with every bit"
                       + (", and a `poll` (`==`) runs on compute queues only (tinygrad's AMDCopyQueue has no poll_bit)"
                          if self.engine != "compute" else ""))
    name = signal_at(self.img, m.addr)
    if name is None: raise Unliftable(f"wait on {m.addr:#x}, which is no signal")
    return Epoch() if (w := Wait(Ref(name), self.expr(off, m.value))) == epoch_wait(self.q.device) else w

  def poll(self, p, addr: int, off: int, v: int, mask: int):
    """tinygrad's poll_bit: `(word & mask) == value` on a buffer's word (a signal is no buffer: no `poll` names it)."""
    if (name := signal_at(self.img, addr)) is not None:
      raise Unliftable(f"masked poll (mask {mask:#x}) of signal {name}: a `poll` reads a buffer's word, and a `wait` compares `>=`")
    sl = buffer_slice(self.img, addr, POLL_SIZE, self.at(p, "addr_lo") in self.patches)
    if sl is None: raise Unliftable(f"poll of {addr:#x}, which is in no buffer")
    return Poll(sl, mask, self.expr(off, v))

  def sig(self, addr: int) -> str:
    if (name := signal_at(self.img, addr)) is None: raise Unliftable(f"write to {addr:#x}, which is no signal")
    return name

  def write(self, p, m) -> Write:
    """`write`: a store into a buffer (tinygrad's HWQueue.write; `m` its amd.meaning.Meaning); a signal's memory is no buffer."""
    sl = buffer_slice(self.img, m.addr, m.size, self.at(p, m.addr_field) in self.patches)
    if sl is None: raise Unliftable(f"{m.size}-byte write to {m.addr:#x}, which is in no buffer")
    return Write(sl, self.expr(self.at(p, m.value_field), m.value))

  def exec(self, pk: list) -> Exec:
    """An `exec`: its program, kernel arguments, grid and workgroup size, as amd.meaning.dispatch reads its packets."""
    img, d = self.img, dispatch(pk)
    if d is None or d.block is None or d.block_at is None: raise Unliftable("dispatch without program/user data")
    k = next((k for k in img.kernels if k["prog_addr"] == d.program), None)
    kr = next((r for r in img.regions if r.kind == "kernargs" and r.addr == d.kernargs), None)
    if k is None or kr is None: raise Unliftable(f"dispatch of unknown program {d.program:#x}")
    def dims(vals, at):  # launch dims: patched dwords are expressions over vars
      return tuple(e if e.var is not None else e.offset for e in (self.expr(at + j, v) for j, v in enumerate(vals)))
    grid, block = dims(d.grid, d.grid_at), dims(d.block, d.block_at)
    return Exec(Ref(k["name"]), tuple(_args(img, self.q, k, kr, d.kernargs)), None if grid == (1, 1, 1) else grid,
                None if block == (1, 1, 1) else block)

def statement_groups(q: QueueImage) -> list:
  """The packets of each statement: the image's source map groups them (a split copy stays one `copy`, the
  packet-less SDMA barrier is an empty group); without one, each packet is a group."""
  pk = decoder(q.engine, q.arch).decode(q.dwords)
  if not q.stmts: return [[p] for p in pk]
  return [[p for p in pk if s.covers(p.offset)] for s in q.stmts]

def lift_queue(img: Image, q: QueueImage) -> list:
  """An AMD queue's statements, recovered from its packets; a group that is no statement lifts to a comment string."""
  out: list = []
  for g in statement_groups(q):
    try: out += lift_group(img, q, g, q.engine)
    except LIFT_ERRORS as e: out.append(f"# dwords {g[0].offset if g else '?'}: cannot lift ({e})")
  return out

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
      if (m := meaning(p)) is not None and m.kind == "copy":   # a split copy: its pieces one after the other
        while i + take < n and (b := meaning(pk[i + take])) is not None and b.kind == "copy":
          if (a := meaning(pk[i + take - 1])) is None or not a.continued_by(b): break
          take += 1
    out.append(pk[i:i + take])
    i += take
  return out
