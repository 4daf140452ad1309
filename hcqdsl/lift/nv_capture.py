"""A capture of tinygrad's NV runtime (hcqdsl/tinygrad/capture_nv.py) as the program it ran: the run as it happened —
every host step in one launch, each submission a queue (named as its GPFIFO's: `comp_gpu0`, `comp_gpu0_2`, ...), its
methods lifted by hcqdsl.nv.lift with the QMDs and constant banks as they were when it was submitted (an exec, its
release semaphores, the QMD it launches), signals starting at the values they held when the capture first saw them.
Folding repeated launches (TinyJit replays as `launch + c`, rebound inputs) is the AMD lift's (lift/captured.py); an NV
capture lifts whole either way, with a note. Names are from addresses: `s_<addr>` signals, `D.timeline` (or `tl_D`),
`b_<addr>` for each allocation a command touches (commands read and write byte ranges of it), kernels by tinygrad's
names. Kernel arguments are constant bank 0's after the driver part (Target.args_offset): 8-byte pointers, then the
scalars (8 bytes each on tinygrad's mock NV GPU, whose capture says so in the signature's `bytes`)."""
from __future__ import annotations
import bisect
from typing import Optional
from ..lang.lexical import identifier
from ..ir import (Device, Buffer, Signal, Kernel, Param, Host, Wait, SignalWrite, Submit, Expr, Ref, U32_MAX, NV_ARCHS, KEYWORDS,
                  vendor_of)
from ..target.image import Image, QueueImage, Region
from ..nv import pushbuf, lift as nv_lift
from ..nv.qmd import QMD
from ..nv.targets import get_target
from .image import attach_comments, queue_decl, lifted_program

__all__ = ["is_nv_capture", "lift_nv_capture"]

_MAX_CHAIN = 4096

def is_nv_capture(m) -> bool:
  """A manifest with host steps whose queues are NV's."""
  return bool(m.host) and any(q.target in NV_ARCHS for q in m.queues)

class _Allocs:
  def __init__(self, buffers: list):
    self.items = sorted((b["addr"], b["size"], b.get("device")) for b in buffers)
    self.starts = [a for a, _, _ in self.items]
  def find(self, addr: int) -> Optional[tuple]:
    i = bisect.bisect_right(self.starts, addr) - 1
    while i >= 0:
      lo, size, dev = self.items[i]
      if lo <= addr < lo + size: return self.items[i]
      i -= 1
      if i >= 0 and self.items[i][0] + self.items[i][1] <= lo: return None
    return None

class _Memory:
  """The capture's memory readings: the bytes at an address as read last before a step."""
  def __init__(self, steps: list):
    self.by_addr: dict = {}
    for a, b, st in sorted(steps, key=lambda x: x[2]): self.by_addr.setdefault(a, []).append((st, b))
    self.starts = sorted(self.by_addr)
  def at(self, addr: int, n: int, step: int) -> Optional[bytes]:
    """[addr, addr + n) from the last reading at or before `step` that holds it."""
    best = None
    for a in self.starts[:bisect.bisect_right(self.starts, addr)][::-1][:64]:
      for st, b in self.by_addr[a]:
        if st <= step and a + len(b) >= addr + n and (best is None or st > best[0]): best = (st, b[addr - a:addr - a + n])
    return best[1] if best else None

class _Lift:
  """One NV capture's lift: names (signals, allocations, kernels), each submission's QMD regions, the program."""
  def __init__(self, m):
    self.m, self.qmap = m, {q.name: q for q in m.queues}
    self.allocs, self.mem = _Allocs(m.buffers), _Memory(m.steps)
    self.taken = {d["name"] for d in m.devices} | set(self.qmap)
    self.signals: dict = {}   # addr -> name
    self.initial: dict = {}   # addr -> value when the capture first saw it
    self.kernels: dict = {}   # prog addr -> (name, [Param], [offsets in constant bank 0], the capture's name)
    self.bufs: dict = {}      # allocation (addr, size, device) -> name
    self.subs: list = []
    # a fresh signal's creation (HCQSignal.__init__ writes its first value) is its initial value, no step
    used: set = set()
    self.keep = []
    for i, e in enumerate(m.host):
      if e["op"] == "submit": used.update(e.get("signals", ()))
      elif e.get("init") and e["op"] == "signal" and e["addr"] not in used: continue
      elif "addr" in e: used.add(e["addr"])
      self.keep.append(i)

  def fresh(self, base: str) -> str:
    name, i = base, 2
    while name in self.taken or name in KEYWORDS: name, i = f"{base}_{i}", i + 1
    self.taken.add(name)
    return name

  def buf_name(self, al: tuple) -> str:
    if al not in self.bufs: self.bufs[al] = self.fresh(f"b_{al[0]:x}")
    return self.bufs[al]

  def touch(self, addr: int, n: int) -> None: self.buf_name(self.allocs.find(addr) or (addr, max(n, 1), None))

  def name_signals(self) -> None:
    """Every address a host step or a submission's snapshot names: `D.timeline` when a device's timeline starts at 0."""
    m, hs = self.m, [self.m.host[i] for i in self.keep]
    addrs = list(dict.fromkeys([a for e in hs for a in (e.get("signals") or ())] + [e["addr"] for e in hs if e["op"] in ("signal", "wait")]))
    self.initial = {a: m.signals.get(a, {}).get("value", 0) for a in addrs}
    for e in hs:   # a signal first seen in a submission's snapshot: its value then
      for a, v in (e.get("signals") or {}).items(): self.initial.setdefault(a, v)
    for a in addrs:
      info = m.signals.get(a, {})
      dev = info.get("device")
      if info.get("timeline") and dev and self.initial[a] == 0 and f"{dev}.timeline" not in self.signals.values(): self.signals[a] = f"{dev}.timeline"
      else: self.signals[a] = self.fresh(f"tl_{dev}" if info.get("timeline") and dev else f"s_{a:x}")

  def kernel(self, prog: int, t) -> tuple:
    """The kernel a QMD's program address runs: parameters from tinygrad's signature (8-byte pointers, then the scalars
    at their sizes) at their offsets in constant bank 0; named as the capture names it (one per tinygrad name and code:
    a program loaded on two devices is one kernel), so sanitize finds its signature by that name."""
    if prog in self.kernels: return self.kernels[prog]
    kinfo = self.m.kernels.get(prog, {})
    sig = kinfo.get("signature") or []
    ps, offs, off = [], [], t.args_offset
    for j, s in enumerate(x for x in sig if x.get("name") is None):
      ps.append(Param(s.get("mode") if s.get("mode") in ("in", "out", "inout") else "inout", f"a{j}"))
      offs.append(off)
      off += 8
    for s in (x for x in sig if x.get("name") is not None):
      sz = s.get("bytes") or 4
      off += -off % sz
      ps.append(Param("u32" if "uint" in (s.get("dtype") or "") else "i32", identifier(s["name"], "k")))
      offs.append(off)
      off += sz
    mname = identifier(kinfo.get("name") or kinfo.get("tinygrad_name") or f"k_{prog:x}", "k")
    kn = next((k[0] for k in self.kernels.values() if k[3] == mname), None) or self.fresh(mname)
    self.kernels[prog] = (kn, ps, offs, mname, [x.get("bytes") or 1 for x in sig if x.get("name") is None])
    return self.kernels[prog]

  def qmd_chain(self, qa: int, t, step: int, regions: list, data: list) -> None:
    """The QMDs from `qa` as read before `step`: each a kernel-argument region (constant bank 0 .. the QMD's end) whose
    pointers are byte ranges of the allocations they point into; their releases' semaphores are signals."""
    seen: set = set()
    while qa and qa not in seen and len(seen) < _MAX_CHAIN:
      seen.add(qa)
      b = self.mem.at(qa, t.qmd_size, step)
      if b is None: return
      qmd = QMD.of(t, bytearray(b))
      ka = qmd.address("cbuf0")
      blk = self.mem.at(ka, qa - ka + t.qmd_size, step) if 0 < qa - ka <= 1 << 20 else None
      if blk is None: return
      kn, ps, offs, _, sizes = self.kernel(qmd.address("program"), t)
      args: list = []
      for j, (p, o) in enumerate(zip(ps, offs)):
        if p.scalar:
          args.append(None)
          continue
        ptr = int.from_bytes(blk[o:o + 8], "little")
        al = self.allocs.find(ptr) or (ptr, sizes[j], None)
        lo = ptr - al[0]
        args.append([self.buf_name(al), lo, min(lo + sizes[j], al[1]), True, None])
      regions.append(Region(f"kernargs_{ka:x}", "kernargs", None, ka, len(blk), {"kernel": kn, "args": args}))
      data.append((ka, blk))
      for r in range(2):
        if qmd.read(qmd.release_fields(r)[0]) and (a := qmd.address(f"release{r}")) not in self.signals:
          self.signals[a] = self.fresh(f"s_{a:x}")
          self.initial[a] = self.m.signals.get(a, {}).get("value", 0)
      qa = qmd.address("dependent") if qmd.read("dependent_qmd0_enable") else 0

  def submissions(self) -> None:
    """Each submission a queue (`comp_gpu0`, `comp_gpu0_2`, ...) with its QMD regions and the memory its methods touch."""
    count: dict = {}
    for i in self.keep:
      e = self.m.host[i]
      if e["op"] != "submit": continue
      q = self.qmap[e["queue"]]
      count[q.name] = count.get(q.name, 0) + 1
      name = q.name if count[q.name] == 1 else self.fresh(f"{q.name}_{count[q.name]}")
      self.taken.add(name)
      dw, t = q.dwords[e["start"]:e["start"] + e["length"]], get_target(q.target)
      regions: list = []
      data: list = []
      for p in pushbuf.decoder(t.name).decode(dw):
        if p.raw: continue
        f = p.fields
        if p.name == "OFFSET_IN_UPPER..OFFSET_OUT_LOWER":
          self.touch(f["src_addr"], 1)
          self.touch(f["dst_addr"], 1)
        elif p.name == "SEM_ADDR_LO..SEM_EXECUTE" and f["sem_addr"] not in self.signals: self.touch(f["sem_addr"], 8)
        elif p.name == "SEND_PCAS_A": self.qmd_chain(f["qmd_addr"], t, i, regions, data)
      self.subs.append({"name": name, "ring": q, "step": i, "dwords": dw, "regions": regions, "data": data})

  def declarations(self) -> list:
    m = self.m
    decls: list = [Device(d["name"], vendor_of(d["arch"]), d["index"], d["arch"]) for d in m.devices]
    decls += [Buffer(nm, Ref(al[2]) if al[2] else None, al[1]) for al, nm in self.bufs.items()]
    for a, n in self.signals.items():
      if n.endswith(".timeline"): continue
      info = m.signals.get(a, {})
      decls.append(Signal(n, Ref(info["device"]) if info.get("device") else None, self.initial.get(a, 0) & U32_MAX))
    decls += list({k[0]: Kernel(k[0], tuple(k[1])) for k in self.kernels.values()}.values())
    ikernels = [{"name": k[0], "prog_addr": prog, "params": [[p.mode, p.name, o] for p, o in zip(k[1], k[2])]} for prog, k in self.kernels.items()]
    ibufs = {nm: (al[0], al[1]) for al, nm in self.bufs.items()}
    names = {n: a for a, n in self.signals.items()}
    for s in self.subs:   # each lifted by hcqdsl.nv.lift from a pseudo image of its QMD regions
      img = Image(s["ring"].target, m.file, m.devices, [], s["regions"], names, ibufs, ikernels, [], s["data"], [])
      qi = QueueImage(s["name"], s["ring"].engine, s["ring"].device, s["ring"].target, 0, s["dwords"], [], [])
      decls.append(queue_decl(s["name"], s["ring"].engine, s["ring"].device, attach_comments(nv_lift.lift_queue(img, qi))))
    return decls

  def host(self, notes: list) -> tuple:
    """The host block: every step in order (adjacent submissions one `submit`), and the steps of each statement."""
    host: list = []
    steps: list = []
    sub_of = {s["step"]: s["name"] for s in self.subs}
    for i in self.keep:
      e = self.m.host[i]
      if e["op"] == "submit" and host and isinstance(host[-1], Submit):
        host[-1] = Submit(host[-1].queues + (Ref(sub_of[i]),))
        steps[-1].append(i)
      elif e["op"] == "submit":
        host.append(Submit((Ref(sub_of[i]),)))
        steps.append([i])
      elif e["op"] in ("signal", "wait"):
        host.append((Wait if e["op"] == "wait" else SignalWrite)(Ref(self.signals[e["addr"]]), Expr(None, e["value"] & U32_MAX)))
        steps.append([i])
        if e["value"] > U32_MAX:
          notes.append(f"a host {e['op']} of {self.signals[e['addr']]} with {e['value']} (more than 32 bits): its low 32 bits are lifted")
    return host, steps

  def trace(self, host_steps: list) -> dict:
    """What sanitize maps findings back with, and what a comparison with `compile` of the lift needs: the captured
    addresses' names, each lifted queue's dwords and kernel-argument blocks as submitted."""
    return dict(start=0, period=len(self.keep), launches=1, steps=list(self.keep), left_out=[], host=host_steps,
                queues={s["name"]: [(0, len(s["dwords"]), s["step"], self.m.host[s["step"]]["start"])] for s in self.subs},
                signals=dict(self.signals), buffers={nm: (al[0], al[1]) for al, nm in self.bufs.items()},
                submitted={s["name"]: (s["ring"].target, s["dwords"], s["data"]) for s in self.subs},
                pointers={prog: sum(not p.scalar for p in k[1]) for prog, k in self.kernels.items()})

def lift_nv_capture(m, code_dir=None, program_dir=None, trace: Optional[dict] = None, whole: bool = False):
  """The program an NV capture ran, as it happened (module docstring). `trace` gets what sanitize and
  tools/nv_gpu_check.py read (the steps of each queue and host statement, the names of captured addresses)."""
  notes = ["the run as it happened: every step of the capture in one launch"]
  if not whole: notes.append("an NV capture lifts as the run as it happened (folding TinyJit launches is the AMD lift's)")
  L = _Lift(m)
  L.name_signals()
  L.submissions()
  decls = L.declarations()
  host, steps = L.host(notes)
  if host: decls.append(Host(tuple(host)))
  if trace is not None: trace.update(L.trace(steps))
  header = ["# hcq: launches=1", f"# lifted from {m.file} by hcqdsl lift (tinygrad's NV runtime, steps 1..{len(m.host)} of {len(m.host)})"]
  return lifted_program(decls, m.file, header + [f"# note: {x}" for x in dict.fromkeys(notes)])
