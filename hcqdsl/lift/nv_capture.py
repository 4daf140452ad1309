"""A capture of tinygrad's NV runtime (hcqdsl/tinygrad/capture_nv.py) as the program it ran: the run as it happened —
every host step in one launch, each submission a queue (named as its GPFIFO's: `comp_gpu0`, `comp_gpu0_2`, ...), its
methods lifted by hcqdsl.nv.lift with the QMDs and constant banks as they were when it was submitted (an exec, its
release semaphores, the QMD it launches), signals starting at the values they held when the capture first saw them.
Folding repeated launches (TinyJit replays as `launch + c`, rebound inputs) is the AMD lift's (lift/manifest.py); an NV
capture lifts whole either way, with a note. Names are from addresses: `s_<addr>` signals, `D.timeline` (or `tl_D`),
`b_<addr>` for each allocation a command touches (commands read and write byte ranges of it), kernels by tinygrad's
names. Kernel arguments are constant bank 0's after the driver part (Target.args_offset): 8-byte pointers, then the
scalars (8 bytes each on tinygrad's mock NV GPU, whose capture says so in the signature's `bytes`)."""
from __future__ import annotations
import bisect
from typing import Optional
from ..ir import (Device, Buffer, Signal, Kernel, Param, Host, Wait, SignalWrite, Submit, Expr, Ref, U32_MAX, NV_ARCHS, KEYWORDS,
                  vendor_of)
from ..amd.image import Image, QueueImage, Region
from ..nv import pushbuf, lift as nv_lift
from ..nv.qmd import QMD
from ..nv.targets import get_target
from .image import attach_comments, queue_decl, lifted_program

__all__ = ["is_nv_capture", "lift_nv_capture"]

_MAX_CHAIN = 4096

def is_nv_capture(m) -> bool:
  """A manifest with host steps whose queues are NV's."""
  return bool(m.host) and any(q.target in NV_ARCHS for q in m.queues)

def _ident(s: str) -> str:
  out = "".join(c if c.isalnum() or c == "_" else "_" for c in str(s)) or "k"
  return out if not out[0].isdigit() else "k_" + out

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

def lift_nv_capture(m, code_dir=None, program_dir=None, trace: Optional[dict] = None, whole: bool = False):
  notes = ["the run as it happened: every step of the capture in one launch"]
  if not whole: notes.append("an NV capture lifts as the run as it happened (folding TinyJit launches is the AMD lift's)")
  # a fresh signal's creation (HCQSignal.__init__ writes its first value) is its initial value, no step
  used, keep = set(), []
  for i, e in enumerate(m.host):
    if e["op"] == "submit": used.update(e.get("signals", ()))
    elif e.get("init") and e["op"] == "signal" and e["addr"] not in used: continue
    elif "addr" in e: used.add(e["addr"])
    keep.append(i)
  qmap = {q.name: q for q in m.queues}
  allocs, mem = _Allocs(m.buffers), _Memory(m.steps)
  taken = {d["name"] for d in m.devices} | set(qmap)
  def fresh(base: str) -> str:
    name, i = base, 2
    while name in taken or name in KEYWORDS: name, i = f"{base}_{i}", i + 1
    taken.add(name); return name
  # ---- signals: every address a host step or a submission's snapshot names
  sig_addrs = list(dict.fromkeys([a for i in keep for a in (m.host[i].get("signals") or ())] +
                                 [m.host[i]["addr"] for i in keep if m.host[i]["op"] in ("signal", "wait")]))
  initial = {a: m.signals.get(a, {}).get("value", 0) for a in sig_addrs}
  for i in keep:   # a signal first seen in a submission's snapshot: its value then
    for a, v in (m.host[i].get("signals") or {}).items(): initial.setdefault(a, v)
  signals: dict = {}
  for a in sig_addrs:
    info = m.signals.get(a, {})
    dev = info.get("device")
    if info.get("timeline") and dev and initial[a] == 0 and f"{dev}.timeline" not in signals.values(): signals[a] = f"{dev}.timeline"
    else: signals[a] = fresh(f"tl_{dev}" if info.get("timeline") and dev else f"s_{a:x}")
  # ---- each submission: its QMD regions (constant bank 0 .. the QMD's end, as read before it was submitted)
  subs, count = [], {}
  kernels: dict = {}   # prog addr -> (name, [Param], [param offsets])
  bufs: dict = {}      # allocation (addr, size, device) -> name
  def buf_name(al) -> str:
    if al not in bufs: bufs[al] = fresh(f"b_{al[0]:x}")
    return bufs[al]
  def touch(addr: int, n: int):
    al = allocs.find(addr)
    if al is None: al = (addr, max(n, 1), None)
    buf_name(al)
  for i in keep:
    e = m.host[i]
    if e["op"] != "submit": continue
    q = qmap[e["queue"]]
    count[q.name] = count.get(q.name, 0) + 1
    name = q.name if count[q.name] == 1 else fresh(f"{q.name}_{count[q.name]}")
    taken.add(name)
    dw = q.dwords[e["start"]:e["start"] + e["length"]]
    t = get_target(q.target)
    regions, data = [], []
    for p in pushbuf.decoder(t.name).decode(dw):
      if p.raw: continue
      f = p.fields
      if p.name == "OFFSET_IN_UPPER..OFFSET_OUT_LOWER": touch(f["src_addr"], 1); touch(f["dst_addr"], 1)
      elif p.name == "SEM_ADDR_LO..SEM_EXECUTE" and f["sem_addr"] not in signals: touch(f["sem_addr"], 8)
      elif p.name == "SEND_PCAS_A":
        qa, seen = f["qmd_addr"], set()
        while qa and qa not in seen and len(seen) < _MAX_CHAIN:
          seen.add(qa)
          b = mem.at(qa, t.qmd_size, i)
          if b is None: break
          qmd = QMD.of(t, bytearray(b))
          ka, prog = qmd.address("cbuf0"), qmd.address("program")
          blk = mem.at(ka, qa - ka + t.qmd_size, i) if 0 < qa - ka <= 1 << 20 else None
          if blk is None: break
          kinfo = m.kernels.get(prog, {})
          sig = kinfo.get("signature") or []
          if prog not in kernels:
            ps, offs, off = [], [], t.args_offset
            for j, s in enumerate(x for x in sig if x.get("name") is None):
              ps.append(Param(s.get("mode") if s.get("mode") in ("in", "out", "inout") else "inout", f"a{j}")); offs.append(off); off += 8
            for s in (x for x in sig if x.get("name") is not None):
              sz = s.get("bytes") or 4
              off += -off % sz
              ps.append(Param("u32" if "uint" in (s.get("dtype") or "") else "i32", _ident(s["name"]))); offs.append(off); off += sz
            # the capture's name (one per tinygrad name and code: a program loaded on two devices is one kernel), so
            # sanitize finds its signature by it
            mname = _ident(kinfo.get("name") or kinfo.get("tinygrad_name") or f"k_{prog:x}")
            kn = next((k_[0] for k_ in kernels.values() if k_[3] == mname), None) or fresh(mname)
            kernels[prog] = (kn, ps, offs, mname)
          kn, ps, offs, _ = kernels[prog]
          args = []
          for j, (p_, o) in enumerate(zip(ps, offs)):
            if p_.scalar: args.append(None); continue
            ptr = int.from_bytes(blk[o:o + 8], "little")
            nb = next((s.get("bytes") for k_, s in enumerate(x for x in sig if x.get("name") is None) if k_ == j), None) or 1
            al = allocs.find(ptr) or (ptr, nb, None)
            nm, lo = buf_name(al), ptr - al[0]
            hi = min(lo + nb, al[1])
            args.append([nm, lo, hi, True, None])
          regions.append(Region(f"kernargs_{ka:x}", "kernargs", None, ka, len(blk), {"kernel": kn, "args": args}))
          data.append((ka, blk))
          for r in range(2):
            if qmd.read(qmd.release_fields(r)[0]) and (a := qmd.address(f"release{r}")) not in signals:
              signals[a] = fresh(f"s_{a:x}"); initial[a] = m.signals.get(a, {}).get("value", 0)
          qa = qmd.address("dependent") if qmd.read("dependent_qmd0_enable") else 0
    subs.append({"name": name, "ring": q, "step": i, "dwords": dw, "regions": regions, "data": data})
  # ---- declarations
  decls: list = [Device(d["name"], vendor_of(d["arch"]), d["index"], d["arch"]) for d in m.devices]
  decls += [Buffer(nm, Ref(al[2]) if al[2] else None, al[1]) for al, nm in bufs.items()]
  for a, n in signals.items():
    if n.endswith(".timeline"): continue
    info = m.signals.get(a, {})
    decls.append(Signal(n, Ref(info["device"]) if info.get("device") else None, initial.get(a, 0) & U32_MAX))
  decls += list({kn: Kernel(kn, tuple(ps)) for kn, ps, _, _ in kernels.values()}.values())
  ikernels = [{"name": kn, "prog_addr": prog, "params": [[p.mode, p.name, o] for p, o in zip(ps, offs)]} for prog, (kn, ps, offs, _) in kernels.items()]
  ibufs = {nm: (al[0], al[1]) for al, nm in bufs.items()}
  for s in subs:
    img = Image(s["ring"].target, m.file, m.devices, [], s["regions"], {n: a for a, n in signals.items()}, ibufs, ikernels, [], s["data"], [])
    qi = QueueImage(s["name"], s["ring"].engine, s["ring"].device, s["ring"].target, 0, s["dwords"], [], [])
    items = nv_lift.lift_queue(img, qi)
    decls.append(queue_decl(s["name"], s["ring"].engine, s["ring"].device, attach_comments(items)))
  # ---- the host block: every step in order (adjacent submissions one `submit`)
  host, host_steps, sub_of = [], [], {s["step"]: s["name"] for s in subs}
  for i in keep:
    e = m.host[i]
    if e["op"] == "submit":
      if host and isinstance(host[-1], Submit): host[-1] = Submit(host[-1].queues + (Ref(sub_of[i]),)); host_steps[-1].append(i)
      else: host.append(Submit((Ref(sub_of[i]),))); host_steps.append([i])
    elif e["op"] in ("signal", "wait"):
      host.append((Wait if e["op"] == "wait" else SignalWrite)(Ref(signals[e["addr"]]), Expr(None, e["value"] & U32_MAX))); host_steps.append([i])
      if e["value"] > U32_MAX: notes.append(f"a host {e['op']} of {signals[e['addr']]} with {e['value']} (more than 32 bits): its low 32 bits are lifted")
  if host: decls.append(Host(tuple(host)))
  if trace is not None:
    trace.update(start=0, period=len(keep), launches=1, steps=list(keep), left_out=[],
                 queues={s["name"]: [(0, len(s["dwords"]), s["step"], m.host[s["step"]]["start"])] for s in subs}, host=host_steps,
                 # what a comparison with `compile` of the lifted program needs: the captured addresses' names, and each
                 # lifted queue's dwords and kernel-argument blocks (constant bank 0 .. QMD) as submitted
                 signals=dict(signals), buffers={nm: (al[0], al[1]) for al, nm in bufs.items()},
                 submitted={s["name"]: (s["ring"].target, s["dwords"], s["data"]) for s in subs},
                 pointers={prog: sum(not p.scalar for p in ps) for prog, (_, ps, _, _) in kernels.items()})
  header = ["# hcq: launches=1", f"# lifted from {m.file} by hcqdsl lift (tinygrad's NV runtime, steps 1..{len(m.host)} of {len(m.host)})"]
  return lifted_program(decls, m.file, header + [f"# note: {x}" for x in dict.fromkeys(notes)])
