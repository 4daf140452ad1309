"""The lift of a raw dump (manifest without a capture's steps): with read pointers the work left at the dump (hang
triage), with host steps (version 1) its launches, else each queue's whole stream run once."""
from __future__ import annotations
import struct
from typing import Optional
import attrs
from ..ir import (Program, Device, Buffer, Signal, Var, Kernel, Param, Queue, Host, Wait, SignalWrite, Submit, Ref, Expr,
                  KEYWORDS, U32_MAX, NV_ARCHS, timeline_of)
from ..target.image import Image, QueueImage, Patch, Region
from ..target.lifting import Unliftable
from .image import lift_statements, queue_decl, lifted_program
from .schema import Manifest, ManifestError, LAUNCH_VAR
from ..amd.meaning import MEMORY_WAITS, meaning, signal_addrs, written_range, polled_range, dispatch, splice
from .packets import Mem, hexname, epochs
from ..amd.lift import lift_group, group_packets

__all__ = ["lift_raw", "RawLift", "Stream", "Plan", "HostStep"]

def _pending_wait(p, snapshot: dict) -> bool:
  """A wait the snapshot does not satisfy (the engine is executing it although its read pointer ran past it)."""
  m = meaning(p)
  if m is None or m.kind not in MEMORY_WAITS: return False
  return m.addr in snapshot and snapshot[m.addr]["value"] < m.value

@attrs.define
class Stream:
  """What of one queue is lifted."""
  dwords: list           # the dwords to lift, in order
  patches: list          # (offset, add): dwords that are `launch + add` (a version-1 capture's launches)
  done: Optional[int]    # triage: how many of them the engine had finished (its read pointer); else None
  ring_at: list          # the ring index of each dword (for the `@N` comments)

class RawLift:
  """The lift of one raw dump, phase by phase (`program()` runs them in order)."""
  def __init__(self, m: Manifest):
    self.m, self.mem = m, Mem(m.memory)
    self.notes: list = []   # `# note:` lines of the header
    self.triage = any(q.read_ptr is not None for q in m.queues)
    self.plan = _launches(m, self.notes) if (m.host is not None and not self.triage) else None
    self.used = {d["name"] for d in m.devices} | {q.name for q in m.queues} | {LAUNCH_VAR}   # names taken in the program

  def program(self) -> Program:
    self.streams()
    self.scan()
    self.name_signals()
    self.buffers()
    self.kernels()
    m, plan = self.m, self.plan
    # the pseudo image the statement lifter reads names from
    self.img = Image(m.queues[0].target, m.file, m.devices, [], self.regions, {n: a for a, n in self.signals.items()},
                     {n: (lo, size) for n, (lo, size, _) in self.bufs.items()}, self.ikernels, [], [], [])
    decls: list = [Device(d["name"], "AMD", d["index"], d["arch"]) for d in m.devices]
    decls += [Buffer(n, Ref(dev) if dev else None, size) for n, (lo, size, dev) in self.bufs.items()]
    for a, n in self.signals.items():
      info = m.signals.get(a, {})
      if not n.endswith(".timeline"): decls.append(Signal(n, Ref(info["device"]) if info.get("device") else None, info.get("value", 0)))
    if plan is not None and plan.uses_var: decls.append(Var(LAUNCH_VAR))
    decls += list(self.kdecl.values()) + [self.queue(q) for q in m.queues if q.name in self.decoded]
    if self.triage: decls = _mark_stuck(decls, {n: m.signals.get(a, {}).get("value", 0) for a, n in self.signals.items()})
    if plan is not None and plan.host: decls.append(Host(tuple(epochs(_host_stmt(h, self.signals), None) for h in plan.host)))
    launches = plan.launches if plan is not None else 1
    mode = "the work left at the dump: signals start at their snapshot values" if self.triage else \
      f"{launches} captured launch{'es' * (launches != 1)}" if plan is not None else "each queue's whole stream, run once"
    header = [f"# hcq: launches={launches}", f"# lifted from {m.file} by hcqdsl lift ({mode})"] + [f"# note: {x}" for x in self.notes]
    return lifted_program(decls, m.file, header)

  def streams(self) -> None:
    """Each queue's Stream (`stream`): the plan's launch template, else the ring from `start` to the write pointer."""
    self.stream: dict = {}
    for q in self.m.queues:
      if self.plan is not None:
        if q.name in self.plan.streams: self.stream[q.name] = self.plan.streams[q.name]
        continue
      n = len(q.dwords)
      wp = q.write_ptr if q.write_ptr is not None else n
      st = q.start if q.start is not None else (0 if wp <= n else q.read_ptr if q.read_ptr is not None else wp - n)
      dw = [q.dwords[p % n] for p in range(st, wp)] if n else []
      self.stream[q.name] = Stream(dw, [], None if q.read_ptr is None else q.read_ptr - st, [p % n for p in range(st, wp)] if n else [])

  def scan(self) -> None:
    """Decode each stream once (`decoded`: its statement groups) and collect what it names: signals, the byte ranges
    copies, writes and polls touch (`copies`), the dispatches (amd.meaning's `Dispatch`)."""
    self.decoded, self.sig_addrs, self.copies, self.dispatches = {}, list(self.m.signals), [], []
    for q in self.m.queues:
      if q.name not in self.stream: continue
      self.decoded[q.name] = groups = group_packets(splice(self.stream[q.name].dwords, q.engine, q.target, self.mem.read), q.engine)
      for g in groups:
        for p in g: self.sig_addrs += signal_addrs(p)
        if g and (m := meaning(g[0])) is not None and m.kind == "copy" and m.src is not None and m.addr is not None:   # a split copy's pieces
          size = sum(c.size for p in g if (c := meaning(p)) is not None)
          self.copies += [(m.src, size), (m.addr, size)]
        if q.engine == "compute" and (d := dispatch(g)) is not None: self.dispatches.append(d)
        self.copies += [w for p in g if (w := written_range(p) or polled_range(p)) is not None]   # a write's or poll's bytes are a buffer's too
    if self.m.host is not None: self.sig_addrs += [h["addr"] for h in self.m.host if h["op"] in ("signal", "wait")]

  def name_signals(self) -> None:
    """`signals`: addr -> name; a device's timeline is `D.timeline` (its epoch waits read as `epoch`) when its value
    needs no init."""
    self.signals: dict = {}
    for a in self.sig_addrs:
      if a in self.signals: continue
      info = self.m.signals.get(a, {})
      tl = timeline_of(info["device"]) if info.get("timeline") and not self.triage and not info.get("value") else None
      self.signals[a] = tl if tl and tl not in self.signals.values() else self.fresh(info.get("name"), hexname("s", a))

  def buffers(self) -> None:
    """`bufs`: name -> (address, size, device): the manifest's buffers, the copies' ranges and the kernel arguments'
    pointers, overlapping ranges merged; `kargs`: kernarg address -> (program, its pointers)."""
    ranges = [(b["addr"], b["addr"] + b["size"], b) for b in self.m.buffers] + [(a, a + n, None) for a, n in self.copies if n]
    self.kargs: dict = {}
    for d in self.dispatches:
      if d.kernargs not in self.kargs: self.kargs[d.kernargs] = (d.program, self.pointers(d.program, d.kernargs, ranges))
    for _, ptrs in self.kargs.values():
      ranges += [(w, w + 1, None) for w in ptrs if not any(lo <= w < hi for lo, hi, _ in ranges)]
    merged: list = []
    for lo, hi, b in sorted(ranges, key=lambda r: (r[0], -r[1])):
      if merged and lo < merged[-1][1]:
        merged[-1][1] = max(merged[-1][1], hi)
        merged[-1][2] = merged[-1][2] or b
      else: merged.append([lo, hi, b])
    self.bufs = {self.fresh((b or {}).get("name"), hexname("b", lo)): (lo, hi - lo, (b or {}).get("device")) for lo, hi, b in merged}

  def pointers(self, prog: int, ka: int, ranges: list) -> list:
    """The pointer arguments in the kernarg block at `ka`: as many as the kernel's `params`, else the leading 8-byte
    words that point into a known range (without ranges: any word >= 64K)."""
    blk = self.mem.block(ka)
    if blk is None: return []
    words = struct.unpack(f"<{len(blk) // 8}Q", blk[:len(blk) // 8 * 8])
    if (want := self.m.kernels.get(prog, {}).get("params")) is not None: return list(words[:len(want)])
    ptrs = []
    for w in words:
      if not (any(lo <= w < hi for lo, hi, _ in ranges) if ranges else w >= 0x10000): break
      ptrs.append(w)
    return ptrs

  def kernels(self) -> None:
    """One declaration per kernel (`kdecl`: the same named kernel on several devices, one code address each, is one),
    the kernarg regions (`regions`) and kernels (`ikernels`) the statement lifter reads."""
    self.kdecl: dict = {}   # (name, modes) -> Kernel
    kname: dict = {}
    self.regions: list = []
    for ka, (prog, ptrs) in self.kargs.items():
      info = self.m.kernels.get(prog, {})
      modes = tuple(info["params"][:len(ptrs)]) if info.get("params") else ("inout",) * len(ptrs)
      key = (info.get("name") or prog, modes)
      if key not in self.kdecl:
        self.kdecl[key] = Kernel(self.fresh(info.get("name"), hexname("k", prog)), tuple(Param(md, f"a{i}") for i, md in enumerate(modes)))
      kname[prog, len(ptrs)] = self.kdecl[key].name
      args = [[nm, off or None, None, bool(off), None] for nm, off in (self.buf_at(w) or (None, 0) for w in ptrs)]   # (every pointer is in a buffer)
      self.regions.append(Region(f"kernargs_{ka:x}", "kernargs", None, ka, 8 * len(ptrs), {"kernel": self.kdecl[key].name, "args": args}))
    kparams = {k.name: [[p.mode, p.name, 8 * i] for i, p in enumerate(k.params)] for k in self.kdecl.values()}
    self.ikernels = [{"name": n, "prog_addr": prog, "params": kparams[n]} for (prog, _), n in kname.items()]

  def queue(self, q) -> Queue:
    """Queue `q`'s statements; a triage's lists what ran as comments and starts where the engine stopped."""
    s = self.stream[q.name]
    qi = QueueImage(q.name, q.engine, q.device, q.target, 0, s.dwords, [Patch(o, LAUNCH_VAR, add) for o, add in s.patches], [])
    groups = self.decoded[q.name]
    head: tuple = ()
    if self.triage:
      rp = s.done or 0
      cut = next((k for k, g in enumerate(groups) if g[0].offset + sum(p.length for p in g) > rp), len(groups))
      while cut > 0 and len(groups[cut - 1]) == 1 and _pending_wait(groups[cut - 1][0], self.m.signals): cut -= 1
      ran = [f"# ran @{s.ring_at[g[0].offset]}: {_describe(self.img, qi, g)}" for g in groups[:cut]]
      where = f"read_ptr {q.read_ptr}, write_ptr {q.write_ptr if q.write_ptr is not None else len(q.dwords)}" \
        if q.read_ptr is not None else "no read_ptr: nothing known to have run"
      head = (*ran, f"# stopped here ({where})")
      groups = groups[cut:]
    def at(g): return f"@{s.ring_at[g[0].offset]}" if g and g[0].offset < len(s.ring_at) else None
    items = [epochs(x, q.device) for x in lift_statements(self.img, qi, [(g, at(g)) for g in groups])]
    return queue_decl(q.name, q.engine, q.device, items, head)

  def buf_at(self, a: int) -> Optional[tuple]:
    """(buffer name, offset) of address `a`."""
    return next(((n, a - lo) for n, (lo, size, _) in self.bufs.items() if lo <= a < lo + size), None)

  def fresh(self, name: Optional[str], fallback: str) -> str:
    """A manifest's name if it is free (names are global in .hcq, keywords are no names), else one from the address."""
    for n in (name, fallback):
      if n and n not in self.used and n not in KEYWORDS:
        self.used.add(n)
        return n
    i = 2
    while f"{fallback}_{i}" in self.used: i += 1
    self.used.add(n := f"{fallback}_{i}")
    return n

def lift_raw(m: Manifest) -> Program:
  """A program from a raw dump. With read pointers: the work still to do at the dump (signals start at the snapshot;
  what ran already is listed as comments; check with launches=1). With host steps (version 1): the launches, with a var
  `launch` wherever a dword changes by one per launch. Otherwise: every queue's whole stream, launches=1. A raw dump
  is AMD's PM4 and SDMA: an NV queue or device is refused (ManifestError naming the field)."""
  nv = [f"queues[{i}].target" for i, q in enumerate(m.queues) if q.target in NV_ARCHS] + \
       [f"devices[{i}].arch" for i, d in enumerate(m.devices) if d["arch"] in NV_ARCHS]
  if nv:
    arch = next(q.target for q in m.queues if q.target in NV_ARCHS) if nv[0].startswith("queues") else \
      next(d["arch"] for d in m.devices if d["arch"] in NV_ARCHS)
    raise ManifestError(f"{m.file}: {nv[0]}: `{arch}` is an NV arch, and a manifest without a capture's host steps (or with read "
                        f"pointers) is a raw dump of AMD's PM4/SDMA rings; an NV queue is lifted from its image (`hcqdsl lift "
                        f"P.hcqimg`) or from a capture of tinygrad's NV runtime (`hcqdsl capture`)")
  return RawLift(m).program()

def _mark_stuck(decls: list, values: dict) -> list:
  """The stop mark of a queue whose next statement is an unsatisfied wait says what it needs, what the signal holds
  and which queue's pending write could release it (or that none can)."""
  queues = [d for d in decls if isinstance(d, Queue)]
  out = []
  for d in decls:
    if not isinstance(d, Queue) or not d.body or not isinstance(d.body[0], Wait) or d.body[0].value.var is not None:
      out.append(d)
      continue
    w = d.body[0]
    sig, need, now = w.signal.name, w.value.offset, values.get(w.signal.name, 0)
    if now >= need:
      out.append(d)
      continue
    writers = [f"{q.name} `signal {sig} = {s.value}`{' ' + s.comment[2:] if s.comment else ''}" for q in queues for s in q.body
               if isinstance(s, SignalWrite) and s.signal.name == sig and s.value.var is None and s.value.offset >= need]
    why = f"# stuck: waits for {sig} >= {need}, which holds {now}; " + \
      (f"released only by {' or '.join(writers)}" if writers else "no pending write brings it there: nothing can release it")
    out.append(attrs.evolve(d, body=(attrs.evolve(w, comments=w.comments + (why,)),) + d.body[1:]))
  return out

def _describe(img, qi, g) -> str:
  from ..lang.format import format_stmt
  try: return "; ".join(format_stmt(s) for s in lift_group(img, qi, g, qi.engine))
  except (Unliftable, KeyError, IndexError, TypeError): return ", ".join(p.name for p in g)

def _host_stmt(h: "HostStep", signals: dict):
  if h.op == "submit": return Submit(tuple(Ref(q) for q in h.queues))
  e = Expr(Ref(LAUNCH_VAR), h.add) if h.add is not None else Expr(None, h.value)
  return (Wait if h.op == "wait" else SignalWrite)(Ref(signals[h.addr]), e)

@attrs.define
class HostStep:
  """A host statement of a version-1 capture's launch."""
  op: str                    # submit | signal | wait
  queues: list = attrs.field(factory=list)   # submit: the queues submitted together
  addr: int = 0              # signal, wait: the signal's address
  value: int = 0             # signal, wait: the value in launch 1
  add: Optional[int] = None  # signal, wait: `launch + add` when the value steps by one per launch

@attrs.define
class Plan:
  """A version-1 capture's host steps as launches: one template launch."""
  launches: int = 1          # how many launches were captured
  streams: dict = attrs.field(factory=dict)  # queue -> Stream: its launch-1 dwords, `launch + c` ones patched
  host: list = attrs.field(factory=list)     # of HostStep
  uses_var: bool = False     # some dword or value is `launch + c`

  def submit(self, q) -> None:
    """Queue `q` submitted next: with the submission just before it, one `submit` statement."""
    if self.host and self.host[-1].op == "submit": self.host[-1].queues.append(q.name)
    else: self.host.append(HostStep("submit", [q.name]))

  def fit(self, vals: list, what: str, notes: list) -> Optional[int]:
    """c with vals[k] == k + 1 + c (mod 2**32) for every launch k; None when they do not change, or change otherwise
    (noted)."""
    if len(set(vals)) == 1: return None
    c = vals[0] - 1
    if all((v - (k + 1 + c)) & U32_MAX == 0 for k, v in enumerate(vals)):
      self.uses_var = True
      return c if c <= U32_MAX // 2 else c - (1 << 32)
    notes.append(f"{what} changes between launches as {', '.join(str(v) for v in vals[:6])}: not `launch + c`; kept launch 1's value")
    return None

def _period(ev: list) -> Optional[int]:
  """The shortest period the host's steps repeat with (same ops on the same queues and addresses), each queue submitted
  at most once per period; None when there is none."""
  def shape(e):
    return (e["op"], e.get("queue"), e.get("addr"), e.get("length"))
  n = len(ev)
  for P in range(1, n + 1):
    if n % P or any(shape(ev[i]) != shape(ev[i % P]) for i in range(n)): continue
    subs = [e["queue"] for e in ev[:P] if e["op"] == "submit"]
    if len(subs) == len(set(subs)): return P
  return None

def _launches(m: Manifest, notes: list) -> Plan:
  """Split the host's steps into launches (the shortest period that repeats, each queue submitted at most once per
  launch) and make one template of them: a dword or host value that grows by one per launch becomes `launch + c`."""
  ev, qmap, out = m.host or [], {q.name: q for q in m.queues}, Plan()
  if (period := _period(ev)) is None:
    notes.append("the host's steps do not repeat launch by launch: lifted as one launch in which each queue's whole "
                 "stream is submitted at its first submission (later work may look submitted earlier than it was)")
    for e in ev:
      if e["op"] != "submit": out.host.append(HostStep(e["op"], addr=e["addr"], value=e["value"]))
      elif e["queue"] not in out.streams:
        q = qmap[e["queue"]]
        out.streams[q.name] = Stream(list(q.dwords), [], None, list(range(len(q.dwords))))
        out.submit(q)
    return out
  K = out.launches = len(ev) // period
  for i, e in enumerate(ev[:period]):
    if e["op"] == "submit":
      q = qmap[e["queue"]]
      per = [q.dwords[ev[i + k * period]["start"]:ev[i + k * period]["start"] + e["length"]] for k in range(K)]
      pats = [(o, c) for o in range(e["length"]) if (c := out.fit([d[o] for d in per], f"dword @{e['start'] + o} of `{q.name}`", notes)) is not None]
      out.streams[q.name] = Stream(per[0], pats, None, list(range(e["start"], e["start"] + e["length"])))
      out.submit(q)
    else:
      add = out.fit([ev[i + k * period]["value"] for k in range(K)], f"host {e['op']} on {e['addr']:#x} (step {i + 1})", notes)
      out.host.append(HostStep(e["op"], addr=e["addr"], value=e["value"], add=add))
  return out
