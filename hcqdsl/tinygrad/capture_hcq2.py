"""The hcq2 half of `hcqdsl.capture()` (tinygrad's `HCQ2=1` path, `tinygrad/runtime/support/hcq2.py` and its AMD
lowering `extra/hcq2/ops_amd2.py`): there the command buffers, rings and doorbells are written by a submitter
program on HCQ_RUNTIME_DEV, not by HWQueue objects, so the recorder reads the rings themselves — what a raw dump of
real hardware gives. Each AMD queue's write pointer is compared with the last one recorded before the mock GPU runs a
doorbell (tinygrad's mock driver, when it is the device) and after every hcq program the submitter runs; the new
ring dwords are a submission. The host's steps are read from the hcq programs tinygrad runs on the host: `hcq_fence`
(wait until a device's timeline reaches the batch's epoch), `hcq_reset` (zero the queue signals), and the devices'
`_wait_signal` (synchronize). The host's own writes into host memory — tinygrad's copy of a new input into the staging
buffer (`realize.exec_copy`, a CPU buffer as destination) — are recorded as `write` steps with their bytes, and the
CPU device's worker queue (the CPU finalizer: waits for the AMD queues that read the staging buffer, then bumps the
CPU timeline) as the host's waits at the point the host synchronizes with the CPU device (`CPUDevice.synchronize`,
which `Buffer.as_memoryview` runs before every such copy): the host passes that point only after those waits."""
from __future__ import annotations
import ctypes, sys, time, types
from typing import Optional
from ..amd.meaning import pointer_dwords

__all__ = ["install", "Hcq2Recorder"]

def _u64(buf) -> int:
  """The first 8 bytes of a tinygrad Buffer (a queue's write pointer, a signal, an epoch slot)."""
  b = buf.ensure_allocated()._buf
  return ctypes.c_uint64.from_address(int(b.va_addr)).value

def _addr(buf) -> int: return int(buf.ensure_allocated()._buf.va_addr)

def _exec_copy(ctx, call, ast):
  """tinygrad's `exec_copy`, then the host's copy into host memory (a staging refill) as a `write` step with its bytes.
  (A pattern's function may hold no closure — tinygrad rebuilds it —, so the recorder is the class's `active`.)"""
  rec = Hcq2Recorder.active
  assert rec is not None and rec.orig_copy is not None, "installed while a capture runs"
  ret = rec.orig_copy(ctx, call, ast)
  with rec.cap.meter: rec.copied(ctx, call)
  return ret

class Hcq2Recorder:
  """The hcq2 hooks of one capture, with what they keep between calls."""
  active: Optional["Hcq2Recorder"] = None   # the installed one (for _exec_copy); None when no capture runs

  def __init__(self, cap):
    self.cap = cap
    self.polling = False      # inside poll(): the mock runs rings while poll reads them, which polls again
    self.cpu_puts: dict = {}  # id(CPU worker) -> how many of its ring's commands were read
    self.cpu_waits: list = [] # (addr, value) the CPU worker waits for, until the host synchronizes with the CPU device
    self.cpu_start = True     # a worker met before the capture started: its earlier commands are not this capture's
    self.images, self.seen = None, 0   # ops_amd2's loaded program images, and the program cache size they were made at
    self.orig_copy = None     # tinygrad's exec_copy
    self._devs: Optional[tuple] = None   # (how many devices tinygrad opened, the CPU ones, the AMD ones)
    self._cpu: dict = {}   # id(CPU device) -> (it, its workers' count, wait_prog's address, (id, write pointer, ring, worker) each)
    self._plan: Optional[tuple] = None   # (_devs, each AMD device's queues opened, the CPU devices, the AMD queues): poll's

  # ---- what the devices hold
  @staticmethod
  def amd_devices() -> list:
    from tinygrad.device import Device
    from tinygrad.runtime.support.hcq2 import HCQ2Compiled
    return [d for d in (Device[n] for n in list(Device._opened_devices)) if type(d).__name__ == "AMDDevice" and isinstance(d, HCQ2Compiled)]

  @staticmethod
  def cpu_devices() -> list:
    from tinygrad.device import Device
    return [Device[n] for n in list(Device._opened_devices) if type(Device[n]).__name__ == "CPUDevice"]

  @staticmethod
  def queues(dev) -> list:
    """(engine, index, queue) of each AMD queue the device has opened."""
    qs = [("compute", 0, dev.__dict__["compute_queue"])] if "compute_queue" in dev.__dict__ else []
    return qs + [("copy", i, q) for i, q in getattr(dev, "sdma_queues", {}).items() if q is not None]

  def note_signal(self, addr: int, dev, timeline: bool = False) -> None:
    """A signal an hcq2 host program or wait names (hcq2's timeline is the device's `signal("timeline")` buffer)."""
    if addr in self.cap.signals: return
    try: timeline = timeline or addr == int(dev.signal("timeline")._buf.va_addr)
    except Exception: pass
    self.cap.register_signal(addr, dev, timeline)

  def cpu_commands(self, dev) -> None:
    """New commands on the CPU device's worker rings (64 words each: the program's address, its arguments): the waits
    (`wait_prog`: address, value) are kept until the host synchronizes with the CPU device."""
    from tinygrad.runtime import ops_cpu
    got = self._cpu.get(id(dev))
    if got is None or got[0] is not dev or got[1] != len(dev.workers):   # (its workers' rings and write pointers: found once)
      got = self._cpu[id(dev)] = (dev, len(dev.workers), dev.prgs[ops_cpu.wait_prog].addr,
                                  [(id(w), ctypes.c_uint64.from_address(_addr(w.put)),
                                    (ctypes.c_uint64 * (ops_cpu.RING_SLOTS * ops_cpu.CMD_SIZE)).from_address(_addr(w.ring)), w)
                                   for w in list(dev.workers)])
    wait_addr = got[2]
    for wid, put_word, words, _ in got[3]:
      put = put_word.value
      old = self.cpu_puts.setdefault(wid, put if self.cpu_start else 0)
      if put <= old: continue
      self.cpu_puts[wid] = put
      for i in range(old, put):
        e = (i % ops_cpu.RING_SLOTS) * ops_cpu.CMD_SIZE
        if int(words[e]) == wait_addr: self.cpu_waits.append((int(words[e + 1]), int(words[e + 2])))

  def poll(self) -> None:
    """Record what each AMD ring got since the last look (the GPU has not run it yet when the mock calls this)."""
    if self.polling: return
    self.polling = True
    try:
      cpus, amds = self.plan()
      for dev in cpus: self.cpu_commands(dev)
      for dev, engine, ring, q, wbuf, wptr, words in amds:
        new = wptr.value if q.write_ptr._buf is wbuf else _u64(q.write_ptr)
        old = ring.put
        if new <= old: continue
        ring.put = new
        self.cap.submit(ring, self.cap.ring_span(words, pointer_dwords(engine, old, new)), dev, "hcq2")
    finally: self.polling = False

  def plan(self) -> tuple:
    """(the CPU devices, (device, engine, Ring, queue, write pointer's buffer and its word, ring's dwords) of each AMD
    queue): what `poll` reads, made again when a device or a queue was opened (the mock calls poll at every doorbell)."""
    from tinygrad.device import Device
    devs = self._devs
    if devs is None or devs[0] != len(Device._opened_devices):
      devs = self._devs = (len(Device._opened_devices), self.cpu_devices(), self.amd_devices())
    # (the queues' ids: the plan keeps the queues, so an id is no other queue's while it is the plan's)
    sig = tuple(id(x) for d in devs[2] for x in (d.__dict__.get("compute_queue"), *(getattr(d, "sdma_queues", None) or {}).values()))
    if self._plan is None or self._plan[0] is not devs or self._plan[1] != sig:
      amds = []
      for dev in devs[2]:
        for engine, idx, q in self.queues(dev):
          words = self.cap.ring_words(_addr(q.ring), q.ring.nbytes // 4)   # (the ring's memory read in place, as an array)
          amds.append((dev, engine, self.cap.ring(q, dev, engine, idx), q, q.write_ptr._buf, ctypes.c_uint64.from_address(_addr(q.write_ptr)), words))
      self._plan = (devs, sig, devs[1], amds)
    return self._plan[2], self._plan[3]

  # ---- the hooks: each runs tinygrad's own function with the same arguments
  def exec_kernel(self, orig, ctx, call, ast):
    """An hcq program the host runs: a fence (the host waits for each device's timeline to reach the batch's epoch) or
    a reset (the host zeroes the queue signals) is a host step; the rings are read before and after."""
    from tinygrad.device import Device
    name = str(getattr(call.arg, "name", ""))
    if type(getattr(call.arg, "aux", None)).__name__ == "HCQInfo":
      # each argument's buffer per device: a batch over several devices passes one MultiBuffer (MSTACK) per signal
      lanes = [list(getattr(b, "bufs", None) or [b]) for b in (getattr(s, "buffer", None) for s in call.src[1:]) if b is not None]
      def on_amd(b):
        return hasattr(b, "device") and str(b.device).startswith("AMD")
      if name == "hcq_fence" and len(lanes) >= 2:
        self.poll()
        for tl, epoch in zip(lanes[0], lanes[1]):   # per device: wait until its timeline reaches the batch's epoch
          if not on_amd(tl): continue
          self.note_signal(_addr(tl), Device[tl.device])
          self.cap.host_wait(_addr(tl), _u64(epoch))
      elif name == "hcq_reset":
        self.poll()
        for b in (b for row in lanes for b in row if on_amd(b)):
          self.note_signal(_addr(b), Device[b.device])
          self.cap.host_signal(_addr(b), 0)
    ret = orig(ctx, call, ast)
    self.poll()
    return ret

  def wait_signal(self, orig, dev, sig, value, timeout=None):
    """A device's `_wait_signal` (synchronize): the host waits for the signal."""
    if type(dev).__name__ == "AMDDevice":
      self.poll()
      try: addr = int(sig.addr)
      except AttributeError: addr = None
      if addr is not None and value > 0:  # a wait for >= 0 always passes: tinygrad's synchronize of an idle device
        self.note_signal(addr, dev, timeline=True)
        self.cap.host_wait(addr, int(value))
    return orig(dev, sig, value, timeout)

  def cpu_synchronize(self, orig, dev, *a, **kw):
    """The host is past every command the CPU worker got: its waits for the AMD queues' signals hold now."""
    ret = orig(dev, *a, **kw)
    self.poll()
    for addr, value in self.cpu_waits:
      if addr in self.cap.signals and value > 0: self.cap.host_wait(addr, value)
    self.cpu_waits.clear()
    return ret

  def copied(self, ctx, call) -> None:
    """After tinygrad's exec_copy: a copy into a CPU buffer (a staging refill) is the host's `write` of its bytes."""
    from tinygrad.engine import realize
    try: pairs = list(realize.unwrap_multi(call, realize.resolve_params(call, ctx.input_uops)))
    except Exception: pairs = []
    for bufs, _ in pairs:
      dest = bufs[0]
      if str(dest.device).split(":")[0] != "CPU" or not dest.is_allocated(): continue
      addr = int(dest._buf.va_addr)
      if (b := self.cap.read(addr, dest.nbytes)) is not None: self.cap.host_write(addr, b)

  def program(self, prog: int) -> Optional[dict]:
    """hcq2 has no AMDProgram objects: a program is its ELF image loaded into a buffer. Match the code at `prog`
    against the images of ops_amd2's program cache (name, code object, arguments: tinygrad's ProgramInfo)."""
    mod = sys.modules.get("extra.hcq2.ops_amd2")
    if mod is None: return None
    cache = getattr(mod, "_amd_program_cache", {})
    if self.images is None or self.seen != len(cache):  # programs compiled since the last look
      from tinygrad.runtime.support.elf import elf_loader
      self.images, self.seen = [], len(cache)
      for (lib, _), prg in list(cache.items()):
        try:
          image, _, relocs = elf_loader(lib)
          for off, sym, typ, add in relocs:
            if typ == 5: image[off:off + 8] = (sym - off + add).to_bytes(8, "little", signed=True)
          data, info = prg.arg
          self.images.append((bytes(image), data, info, lib))
        except Exception: continue
    for image, data, info, lib in self.images:
      start = prog - data.entry_point_offset
      if self.cap.read(start, len(image)) != image: continue
      outs, ins = tuple(getattr(info, "outs", ())), tuple(getattr(info, "ins", ()))
      def mode(i):
        return "inout" if i in outs and i in ins else "out" if i in outs else "in" if i in ins else "inout"
      # the argument shapes are the PROGRAM's (its TinyELF signature, as classic HCQ's AMDProgram has them): the PROGRAM
      # whose code this is, before ops_amd2 swapped its source for the loaded image
      sig, extents = None, {}
      from tinygrad.uop.ops import UOpMetaClass, Ops
      for ref in list(UOpMetaClass.ucache.values()):
        u = ref()
        if u is None or u.op is not Ops.PROGRAM or len(u.src) < 4 or getattr(u.src[3], "arg", None) != lib: continue
        try: sig, extents = [self.cap.sig_entry(s) for s in u.to_elf().signature], self.cap.param_extents(u)
        except Exception: sig = None
        if sig is not None: break
      if sig is not None:
        for i, s in enumerate(x for x in sig if x.get("name") is None):
          s["mode"] = mode(i)
          # (the bytes its kernel touches: a view's kernel reads part of it)
          if self.cap.useful_extent(extents.get(i), s.get("bytes")): s["extent"] = extents[i]
      else:
        sig = [{"name": None, "mode": mode(i)} for i, _ in enumerate(getattr(info, "globals", ()))]
        sig += [{"name": getattr(v, "expr", f"v{i}"), "dtype": "int", "itemsize": 4, "bytes": 4, "fmt": "i"}
                for i, v in enumerate(getattr(info, "vars", ()))]
      name = getattr(info, "function_name", None) or getattr(info, "name", f"k_{prog:x}")   # tinygrad's name without its colors
      return {"name": str(name), "lib": bytes(lib), "signature": sig, "kernargs": int(data.kernargs_segment_size)}
    return None

  # ---- installing
  def install(self) -> None:
    from tinygrad.engine import realize
    from tinygrad.runtime.support.hcq2 import HCQ2Compiled
    from tinygrad.runtime.ops_cpu import CPUDevice
    from tinygrad.uop.ops import PatternMatcher
    cap = self.cap
    for dev in self.amd_devices():  # what the rings held before the capture started is not this capture's
      for _, _, q in self.queues(dev): cap.ring_started_at(q, _u64(q.write_ptr))
    for dev in self.cpu_devices(): self.cpu_commands(dev)
    self.cpu_waits.clear()
    self.cpu_start = False   # a worker started while capturing: all of its commands are this capture's
    cap.program_finders.append(self.program)
    meter = cap.meter
    def hook(obj, name: str, method):
      orig = obj.__dict__[name]
      def timed(*a, **kw):   # tinygrad's own function, called by a hook: not hcqdsl's time
        meter.depth -= 1
        if meter.depth == 0: meter.cpu[meter.kind] += time.thread_time() - meter.t0
        try: return orig(*a, **kw)
        finally:
          if meter.depth == 0: meter.t0 = time.thread_time()
          meter.depth += 1
      def wrapped(*a, **kw):
        with meter: return method(timed, *a, **kw)
      setattr(wrapped, "__wrapped__", orig)
      cap.replace(obj, name, wrapped)
    hook(realize, "exec_kernel", self.exec_kernel)
    hook(HCQ2Compiled, "_wait_signal", self.wait_signal)
    hook(CPUDevice, "synchronize", self.cpu_synchronize)
    self.orig_copy = realize.exec_copy
    cap.replace(Hcq2Recorder, "active", self)
    pm = realize.pm_exec   # run_linear dispatches through this matcher: the copy's entry is swapped in a copy of it
    # every entry a fresh function object: tinygrad's matcher keeps what it builds from an entry's function (with the
    # module's globals as they were then) for that function object, so exec_hcq in a later capture's copy still called
    # the first capture's exec_kernel hook (the second sanitized test of a process recorded its signal resets into the
    # first, finished capture, and its check saw false races)
    cap.replace(realize, "pm_exec", PatternMatcher([(pat, _exec_copy if fxn is self.orig_copy else _fresh(fxn)) for pat, fxn in pm.patterns],
                                                   compiled=False))
    try:
      from test.mockgpu.amd.amddriver import AMDDriver
      run = AMDDriver.__dict__["_emulate_execute"]
      def emulate_execute(drv, *a, **kw):   # (as `hook`, but the mock's run of the rings is outside the meter: no clock
        if not drv._executing:              # reads around it, thousands a second)
          with meter: self.poll()
        return run(drv, *a, **kw)
      setattr(emulate_execute, "__wrapped__", run)
      cap.replace(AMDDriver, "_emulate_execute", emulate_execute)
    except ImportError: pass

def _fresh(fn):
  """A new function object with `fn`'s code, globals and closure (no cache keyed by `fn` knows it)."""
  return types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)

def install(cap) -> "Hcq2Recorder":
  """Record tinygrad's hcq2 path into `cap` until the capture ends."""
  rec = Hcq2Recorder(cap)
  rec.install()
  return rec
