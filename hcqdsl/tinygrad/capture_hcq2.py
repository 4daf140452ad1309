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
import ctypes

__all__ = ["install"]

def _u64(buf) -> int:
  """The first 8 bytes of a tinygrad Buffer (a queue's write pointer, a signal, an epoch slot)."""
  b = buf.ensure_allocated()._buf
  return ctypes.c_uint64.from_address(int(b.va_addr)).value

def _addr(buf) -> int: return int(buf.ensure_allocated()._buf.va_addr)

def _cpu_commands(dev, cap) -> None:
  """New commands on the CPU device's worker rings (64 words each: the program's address, its arguments): the waits
  (`wait_prog`: address, value) are kept until the host synchronizes with the CPU device."""
  from tinygrad.runtime import ops_cpu
  wait_addr = dev.prgs[ops_cpu.wait_prog].addr
  for w in list(dev.workers):
    put, ring = _u64(w.put), w.ring.ensure_allocated()._buf
    old = cap._cpu_puts.setdefault(id(w), put if cap._cpu_start else 0)
    if put <= old: continue
    cap._cpu_puts[id(w)] = put
    words = (ctypes.c_uint64 * (ops_cpu.RING_SLOTS * ops_cpu.CMD_SIZE)).from_address(int(ring.va_addr))
    for i in range(old, put):
      e = (i % ops_cpu.RING_SLOTS) * ops_cpu.CMD_SIZE
      if int(words[e]) == wait_addr: cap._cpu_waits.append((int(words[e + 1]), int(words[e + 2])))

_COPY: dict = {}   # the recorder and tinygrad's exec_copy: a pattern's function may hold no closure (tinygrad rebuilds it)

def _exec_copy(ctx, call, ast):
  """tinygrad's `exec_copy`, then the host's copy into host memory (a staging refill) as a `write` step with its bytes."""
  from tinygrad.engine import realize
  cap = _COPY["cap"]
  ret = _COPY["orig"](ctx, call, ast)
  try: pairs = list(realize.unwrap_multi(call, realize.resolve_params(call, ctx.input_uops)))
  except Exception: pairs = []
  for bufs, _ in pairs:
    dest = bufs[0]
    if str(dest.device).split(":")[0] != "CPU" or not dest.is_allocated(): continue
    addr = int(dest._buf.va_addr)
    if (b := cap._read(addr, dest.nbytes)) is not None: cap._step({"op": "write", "addr": addr, "hex": b.hex()})
  return ret

def install(cap) -> None:
  from tinygrad.engine import realize
  from tinygrad.device import Device
  from tinygrad.runtime.support.hcq2 import HCQ2Compiled
  from tinygrad.uop.ops import PatternMatcher

  def amd_devices():
    out = []
    for name in list(Device._opened_devices):
      d = Device[name]
      if type(d).__name__ == "AMDDevice" and isinstance(d, HCQ2Compiled): out.append(d)
    return out

  def queues(dev):
    qs = []
    if "compute_queue" in dev.__dict__: qs.append(("compute", 0, dev.__dict__["compute_queue"]))
    qs += [("copy", i, q) for i, q in getattr(dev, "sdma_queues", {}).items() if q is not None]
    return qs

  def cpu_devices(): return [Device[n] for n in list(Device._opened_devices) if type(Device[n]).__name__ == "CPUDevice"]

  def poll():
    """Record what each AMD ring got since the last look (the GPU has not run it yet when the mock calls this)."""
    if cap._polling: return
    cap._polling = True
    try:
      for dev in cpu_devices(): _cpu_commands(dev, cap)
      for dev in amd_devices():
        for engine, idx, q in queues(dev):
          ring = cap._ring(q, dev, engine, idx)
          new = _u64(q.write_ptr)
          old = ring["_put"]
          if new <= old: continue
          ring["_put"] = new
          base, n = _addr(q.ring), q.ring.nbytes // 4
          unit = 1 if engine == "compute" else 4
          words = (ctypes.c_uint32 * n).from_address(base)
          cap.path_kind = "hcq2"
          cap._submitted(ring, [int(words[(p // unit) % n]) for p in range(old, new, unit)], dev)
    finally: cap._polling = False

  cap._polling, cap._cpu_puts, cap._cpu_waits, cap._cpu_start = False, {}, [], True
  for dev in amd_devices():  # what the rings held before the capture started is not this capture's
    for engine, idx, q in queues(dev): cap._puts[id(q)] = _u64(q.write_ptr)
  for dev in cpu_devices(): _cpu_commands(dev, cap)
  cap._cpu_waits.clear()
  cap._cpu_start = False   # a worker started while capturing: all of its commands are this capture's

  orig_exec = realize.exec_kernel
  def exec_kernel(ctx, call, ast):
    name = str(getattr(call.arg, "name", ""))
    if type(getattr(call.arg, "aux", None)).__name__ == "HCQInfo":
      # each argument's buffer per device: a batch over several devices passes one MultiBuffer (MSTACK) per signal
      lanes = [list(getattr(b, "bufs", None) or [b]) for b in (getattr(s, "buffer", None) for s in call.src[1:]) if b is not None]
      on_amd = lambda b: hasattr(b, "device") and str(b.device).startswith("AMD")
      if name == "hcq_fence" and len(lanes) >= 2:
        poll()
        for tl, epoch in zip(lanes[0], lanes[1]):   # per device: wait until its timeline reaches the batch's epoch
          if not on_amd(tl): continue
          cap._note_signal(_addr(tl), Device[tl.device])
          cap._step({"op": "wait", "addr": _addr(tl), "value": _u64(epoch)})
      elif name == "hcq_reset":
        poll()
        for b in (b for row in lanes for b in row if on_amd(b)):
          cap._note_signal(_addr(b), Device[b.device])
          cap._step({"op": "signal", "addr": _addr(b), "value": 0})
    ret = orig_exec(ctx, call, ast)
    poll()
    return ret
  exec_kernel.__wrapped__ = orig_exec
  realize.exec_kernel = exec_kernel
  cap._saved.append((realize, "exec_kernel", orig_exec))

  orig_wait = HCQ2Compiled.__dict__["_wait_signal"]
  def _wait_signal(dev, sig, value, timeout=None):
    if type(dev).__name__ == "AMDDevice":
      poll()
      try: addr = int(sig.addr)
      except AttributeError: addr = None
      if addr is not None and value > 0:  # a wait for >= 0 always passes: tinygrad's synchronize of an idle device
        cap._note_signal(addr, dev, timeline=True)
        cap._step({"op": "wait", "addr": addr, "value": int(value)})
    return orig_wait(dev, sig, value, timeout)
  _wait_signal.__wrapped__ = orig_wait
  HCQ2Compiled._wait_signal = _wait_signal
  cap._saved.append((HCQ2Compiled, "_wait_signal", orig_wait))

  from tinygrad.runtime.ops_cpu import CPUDevice
  orig_sync = CPUDevice.__dict__["synchronize"]
  def synchronize(dev, *a, **kw):
    ret = orig_sync(dev, *a, **kw)
    poll()
    # the host is past every command the CPU worker got: its waits for the AMD queues' signals hold now
    for addr, value in cap._cpu_waits:
      if addr in cap.signals and value > 0: cap._step({"op": "wait", "addr": addr, "value": value})
    cap._cpu_waits.clear()
    return ret
  synchronize.__wrapped__ = orig_sync
  CPUDevice.synchronize = synchronize
  cap._saved.append((CPUDevice, "synchronize", orig_sync))

  _COPY.update(cap=cap, orig=realize.exec_copy)
  pm = realize.pm_exec   # run_linear dispatches through this matcher: the copy's entry is swapped in a copy of it
  realize.pm_exec = PatternMatcher([(pat, _exec_copy if fxn is _COPY["orig"] else fxn) for pat, fxn in pm.patterns], compiled=False)
  cap._saved.append((realize, "pm_exec", pm))

  try:  # tinygrad's mock GPU runs a ring when its doorbell (or signal memory) is written: look at the rings first
    from test.mockgpu.amd.amddriver import AMDDriver
    orig_emu = AMDDriver.__dict__["_emulate_execute"]
    def _emulate_execute(drv, *a, **kw):
      if not drv._executing: poll()
      return orig_emu(drv, *a, **kw)
    _emulate_execute.__wrapped__ = orig_emu
    AMDDriver._emulate_execute = _emulate_execute
    cap._saved.append((AMDDriver, "_emulate_execute", orig_emu))
  except ImportError: pass
