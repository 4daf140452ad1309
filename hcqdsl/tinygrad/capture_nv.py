"""The NV half of `hcqdsl.capture()`: what tinygrad's NV runtime (ops_nv.py: NVComputeQueue, NVCopyQueue, HCQGraph on
NV devices) gives the GPU. Each submission is recorded where tinygrad hands a queue to a GPFIFO
(`NVCommandQueue._submit_to_gpfifo`), before the doorbell: the queue's method dwords (what the GPFIFO entry points at:
tinygrad copies them into the device's command queue page, or a bound graph queue is already there), and what they
refer to, read before the GPU runs them — each QMD a SEND_PCAS_A launches and the QMDs it chains (DEPENDENT_QMD0), with
constant bank 0 before it (the kernel arguments: one memory reading from the bank to the QMD's end, as NVComputeQueue.exec
lays them out), the semaphores the methods and the QMDs' releases name, the memory copies and writes touch. The host's
signal writes and waits, HCQGraph's inputs and the allocations are Capture's own (vendor-neutral) recording.
Programs are named from NVProgram objects by their code address (the QMD's program address). Device memory is what
NVKIface.alloc gave without `host` (an NV buffer's metadata does not say). tinygrad's mock NV GPU reports SM version
3.5; its compute class (ADA_COMPUTE_A) says which architecture its queues are: the manifest names that one."""
from __future__ import annotations
import gc
from typing import Any
from ..ir import NV_ARCHS, U32_MAX
from ..nv import pushbuf
from ..nv.qmd import QMD
from ..nv.meaning import meaning, launch, qmd_chain, copy_length, SIGNAL_MEMORY
from ..nv.targets import BOARDS, get_target

__all__ = ["install", "nv_arch"]

_BY_CLASS = {cls: arch for arch, (_, cls) in BOARDS.items()}

def nv_arch(dev) -> str:
  """The architecture the manifest names: tinygrad's arch string when it is one of NV's targets, else the one of the
  device's compute class (the mock's SM version 3.5 is none)."""
  arch = str(getattr(dev, "arch", ""))
  if arch in NV_ARCHS: return arch
  return _BY_CLASS.get(int(getattr(getattr(dev, "iface", None), "compute_class", 0) or 0), "sm_89")

def _is_nv(dev) -> bool: return type(dev).__name__ == "NVDevice"

class _Recorder:
  def __init__(self, cap): self.cap = cap

  def program(self, prg) -> None:
    """An NVProgram: its code address is its QMD template's program address; its arguments tinygrad's signature. On
    the mock, NVArgsState stores every scalar as 8 bytes (its executor's convention): the signature says so."""
    dev = getattr(prg, "dev", None)
    try: addr = launch(QMD.of(get_target(nv_arch(dev)), bytearray(bytes(prg.qmd.mv)))).program
    except Exception: return
    mock = type(getattr(dev, "iface", None)).__name__.startswith("MOCK")
    sig = []
    for s in getattr(prg, "signature", ()) or ():
      try: e = self.cap.sig_entry(s)
      except Exception: e = {"name": None}
      if mock and e.get("name") is not None: e.update(bytes=8, itemsize=8)
      sig.append(e)
    self.cap.add_kernel(addr, str(prg.name), bytes(getattr(prg, "lib", b"") or b""), sig, prg)

  def alloc(self, iface, size, host=False, uncached=False, *a, ret=None, **kw) -> None:
    if ret is not None: self.cap.add_allocation(ret, vram=not host and not uncached)

  def submit(self, q, dev, gpfifo) -> None:
    """A queue handed to a GPFIFO: record its dwords and what they refer to, before the doorbell."""
    if gpfifo is dev.compute_gpfifo: engine = "compute"
    elif gpfifo is dev.dma_gpfifo: engine = "copy"
    else: return   # the video decoder's: no .hcq statement
    cap = self.cap
    cap.path_kind = cap.path_kind or "hcq"
    ring = cap.ring(gpfifo, dev, engine, 0)
    dw = [int(x) & U32_MAX for x in q._q]
    if engine == "copy":
      for addr, n in self.staged(dw, dev): cap.host_write(addr, cap.read(addr, n) if cap.contents else None, n, staged=True)
    sigs = self.scan(dw, dev, cap.steps())
    cap.submitted(ring, dw, sigs)

  def staged(self, dw: list, dev) -> list:
    """(address, bytes) of each copy piece out of one of the device's staging buffers (tinygrad's HCQAllocator._copyin,
    which NV shares with AMD: the host wrote the chunk into `allocator.b[b_next]` right before this submission, after
    waiting for the copy that read it last) — the host's write comes first, as capture.py records it on AMD."""
    bufs = getattr(getattr(dev, "allocator", None), "b", None) or ()
    spans = [(int(b.va_addr), int(b.size)) for b in bufs if hasattr(b, "va_addr")]
    out, pk = [], pushbuf.decoder(nv_arch(dev)).decode(dw)
    for j, p in enumerate(pk):
      if (m := meaning(p)) is None or m.kind != "copy": continue
      n = copy_length(pk, j)
      if n and any(a <= m.src and m.src + n <= a + sz for a, sz in spans): out.append((m.src, n))
    return out

  def signal(self, addr: int, dev, sigs: dict) -> None:
    tl = getattr(dev, "timeline_signal", None)
    self.cap.register_signal(addr, dev, tl is not None and int(tl.value_addr) == addr)
    b = self.cap.read(addr, 8)
    sigs[addr] = int.from_bytes(b, "little") if b and len(b) == 8 else 0

  def memory(self, addr: int, n: int, step: int) -> None:
    """Memory a command reads or writes: its allocation is used, its bytes (from `addr`) remembered as of now."""
    a = self.cap.use(addr)
    if a is None: return
    if self.cap.contents: self.cap.remember(addr, min(n, a[0] + a[1] - addr), step)

  def scan(self, dw: list, dev, step: int) -> dict:
    """Signals, QMDs with their kernel arguments and memory the methods refer to; returns the signals' values now."""
    t, sigs = get_target(nv_arch(dev)), dict[int, int]()
    for p in pushbuf.decoder(t.name).decode(dw):
      if (m := meaning(p)) is None: continue
      if m.kind in SIGNAL_MEMORY: self.signal(m.addr, dev, sigs)
      elif m.kind in ("write", "poll"): self.memory(m.addr, 8, step)   # a buffer's word: the semaphore's 8 bytes
      elif m.kind == "copy":
        self.memory(m.src, 1, step)
        self.memory(m.addr, 1, step)
      elif m.kind == "dispatch": self.qmds(m.addr, t, dev, sigs, step)
    return sigs

  def qmds(self, qa: int, t, dev, sigs: dict, step: int) -> None:
    """A QMD chain from `qa`: each QMD with constant bank 0 before it (its kernel arguments), its releases' semaphores,
    the buffers its argument pointers point into."""
    cap = self.cap
    def read(a: int):
      b = cap.read(a, t.qmd_size)
      return QMD.of(t, bytearray(b)) if b is not None and len(b) >= t.qmd_size else None
    for qa, _, got in qmd_chain(qa, read):
      ka = got.kernargs
      cap.use(qa)
      if 0 < qa - ka <= 1 << 20 and cap.read(ka, qa - ka + t.qmd_size) is not None: cap.remember(ka, qa - ka + t.qmd_size, step)
      else: cap.remember(qa, t.qmd_size, step)
      k = cap.kernels.get(got.program)
      nbuf = sum(1 for s in (k or {}).get("signature", ()) if s.get("name") is None)
      args = cap.read(ka + t.args_offset, 8 * nbuf) or b""
      for i in range(len(args) // 8):
        if (ptr := int.from_bytes(args[8 * i:8 * i + 8], "little")): self.memory(ptr, (k["signature"][i].get("bytes") or 1), step)
      for r in got.releases: self.signal(r.addr, dev, sigs)

def install(cap) -> None:
  """Record NV submissions in `cap` (as capture.py imports ops_amd, this imports ops_nv: no device is opened)."""
  from tinygrad.runtime import ops_nv
  rec = _Recorder(cap)
  prev = cap.arch_of
  cap.arch_of = lambda dev: nv_arch(dev) if _is_nv(dev) else prev(dev)
  from tinygrad.runtime.support.hcq import HCQBuffer
  for obj in gc.get_objects():   # what exists already: programs, and which allocations are device memory
    if type(obj) is ops_nv.NVProgram: rec.program(obj)
    elif type(obj) is HCQBuffer and _is_nv(getattr(obj, "owner", None)):
      meta: Any = getattr(obj, "meta", None)
      # (a host object's handle is one of NVKIface's host_object_enumerator's; device memory's come from rm_alloc after them)
      if getattr(obj, "_base", None) is None and hasattr(meta, "hMemory"):
        cap.add_allocation(obj, vram=meta.hMemory > ops_nv.NVKIface.host_object_enumerator)
  cap.wrap(ops_nv.NVProgram, "__init__", after=lambda p, *a, **k: rec.program(p))
  cap.wrap(ops_nv.NVCommandQueue, "_submit_to_gpfifo", before=rec.submit)
  orig = ops_nv.NVKIface.__dict__["alloc"]
  def alloc(iface, size, *a, **kw):
    ret = orig(iface, size, *a, **kw)
    try: rec.alloc(iface, size, *a, ret=ret, **kw)
    except Exception: pass
    return ret
  setattr(alloc, "__wrapped__", orig)
  cap.replace(ops_nv.NVKIface, "alloc", alloc)
