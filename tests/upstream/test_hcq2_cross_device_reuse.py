"""hcq2 (HCQ2=1): a copy into another device's memory is not ordered after that device's earlier work.

hcq2 enqueues a copy on its source device's copy queue (`_get_enqueue_devs` in tinygrad/runtime/support/hcq2.py: copies
push from the src device), and a batch orders its queues after earlier batches only through each queue's own devices'
timelines (`_finalize_batch`: "first queue use, sync prior device work with the device timeline"). A copy from device 0
into device 1's memory waits for device 0's earlier work, not device 1's. The destination can be memory that device 1's
earlier work still reads: the memory planner's arena of one realize goes back to the LRU allocator's cache when it is
freed (freeing it synchronizes only device 0, which mapped it for the copy) and is handed to the next realize. Classic
HCQ has no such gap: its `_transfer` makes the copy wait for both devices' timelines.

    x = Tensor(a).shard(devs, axis=0).realize()   # device 1: copy a[2:] into arena A (on device 0's copy queue), then a
                                                  #   kernel reads A into x's shard
    y = Tensor(b).shard(devs, axis=0).realize()   # copy b[2:] into arena A again (x's arena, reused): not ordered after
                                                  #   device 1's kernel of the line above

- test_every_peer_access_after_its_devices_timeline: hcq2's own schedule of the two realizes (no execution order
  involved): the copy into device 1's memory is ordered after no wait on device 1's timeline, neither its own queue's
  nor one it waits for. Any 2 hcq2 AMD devices.
- test_lagging_device: wrong numbers. On tinygrad's mock GPU, device 1's compute queue is made to lag (it runs a packet
  only when the host waits for a signal that is not set yet: a legal schedule, a real GPU may be that slow, e.g. busy
  with earlier work): y's copy overwrites the arena before device 1's kernel of x reads it, and x's shard on device 1
  gets y's numbers. The arena is released when Python's garbage collector collects the first realize's schedule (a
  reference cycle); gc.collect() between the realizes makes that deterministic (in a training loop it happens by itself).
- test_lagging_device_assign: the same missing order with no memory reuse: device 1 reads t (`t * 2 + 1`), then
  `t.assign(src.to(device 1))` copies into t on device 0's copy queue; with device 1 lagging the kernel reads t's new value.

Standalone: needs only tinygrad; drop it into tinygrad's test/ and run
  HCQ2=1 HCQ_RUNTIME_DEV=PYTHON DEV=MOCKKFD+AMD python -m pytest test/test_hcq2_cross_device_reuse.py"""
import gc, sys, unittest
from unittest.mock import patch
import numpy as np
from tinygrad import Tensor, Device
from tinygrad.helpers import getenv, to_tuple
from tinygrad.uop.ops import Ops

def _devices(n):
  try: return tuple(Device[f"{Device.DEFAULT}:{i}"].device for i in range(n))
  except Exception: return None

HCQ2 = bool(getenv("HCQ2")) and Device.DEFAULT == "AMD" and _devices(2) is not None
if HCQ2:
  from tinygrad.runtime.support import hcq2
  from tinygrad.runtime.support.hcq2 import HCQ2Compiled

def shard_pair(devs, it):
  """dp_adam's inputs: x (4, 8) and y (4, 4), sharded one after the other; two schedules of their own."""
  a = np.arange(32, dtype=np.float32).reshape(4, 8) + 1000 * it
  b = np.arange(16, dtype=np.float32).reshape(4, 4) + 1000 * it + 100
  x = Tensor(a).shard(devs, axis=0).realize()
  gc.collect()   # x's schedule (its memory-planner arena among it) is freed here
  y = Tensor(b).shard(devs, axis=0).realize()
  return a, b, x, y

def peer_misses(batch_out):
  """The commands of one hcq2 batch (the output of `_finalize_batch`) that touch a device's memory (of their queue's device
  group) without being ordered after that device's timeline: follows the waits the batch encodes, in submission order."""
  waited = {}     # (devices, queue, lane) -> devices whose timeline that lane of the queue is ordered after
  signalled = {}  # (device, signal slot, value) -> what the storing queue's lane was ordered after when it stored
  out = []
  for c in batch_out:
    if c.op is not Ops.CALL or not str(c.arg.name).startswith("submit"): continue
    devs, queue = (lin:=hcq2.get_submit(c).src[0]).arg
    for ins in lin.src:
      for lane, dev in enumerate(devs):
        have = waited.setdefault((devs, queue, lane), set())
        if ins.op is Ops.INS and ins.arg == "wait":
          sig = ins.src[0].src[lane] if ins.src[0].op is Ops.MSTACK else ins.src[0]
          sdev = to_tuple(sig.device)[lane] if len(to_tuple(sig.device)) == len(devs) else to_tuple(sig.device)[0]
          if sig.tag == "timeline_signal": have.add(sdev)
          elif sig.tag == "signal": have |= signalled.get((sdev, sig.arg.slot, ins.src[1].arg), set())
        elif ins.op is Ops.INS and ins.arg == "store" and ins.src[0].tag == "signal":
          signalled[(dev, ins.src[0].arg.slot, ins.src[1].arg)] = set(have)
        elif ins.op is Ops.CALL:
          for b in hcq2._get_call_bufs_by_lane(ins, devs)[lane]:
            bdev = to_tuple(b.device)[lane] if len(to_tuple(b.device)) == len(devs) else to_tuple(b.device)[0]
            if bdev.split(":")[0] == dev.split(":")[0] and bdev not in have:
              what = f"copy {ins.src[1].device} <- {ins.src[2].device}" if ins.src[0].op is Ops.COPY else ins.arg.name
              out.append(f"{what} (on {dev}'s {queue} queue) touches {bdev}'s memory without waiting for {bdev}'s timeline")
  return out

def lag_compute_queue(device: str):
  """On tinygrad's mock AMD GPU: `device`'s compute queue runs no packet until the host waits for a signal that is not
  set, then one packet at a time (descending into indirect buffers) until it is. Every other queue runs as soon as it can.
  (hcq2's host waits: HCQ2Compiled._wait_signal, which every device's synchronize runs.)"""
  import tinygrad.runtime.autogen.amd_gpu as amd_gpu
  from test.mockgpu.mockgpu import drivers
  from test.mockgpu.amd.amddriver import AMDDriver
  from test.mockgpu.amd.amdgpu import PM4Executor
  drv = next(d for d in drivers if isinstance(d, AMDDriver))
  lagging = next(q for q in drv.gpus[Device[device].iface.gpu_id].queues if isinstance(q, PM4Executor))
  def run_others():
    if drv._executing: return
    drv._executing = True
    try:
      progress = True
      while progress:
        progress = False
        for gpu in drv.gpus.values():
          for q in gpu.queues:
            if q is not lagging and q.executing: progress |= q.execute() > 0
    finally: drv._executing = False
  def step(q) -> bool:
    if q.ib_executor is not None:
      if step(q.ib_executor) or not q.ib_executor.executing:
        if not q.ib_executor.executing: q.ib_executor = None
        return True
      return False
    if q.rptr[0] >= q.wptr[0]: return False
    header = q.queue[q.rptr[0] % (q.size // 4)]
    n, op = (header >> 16) & 0x3FFF, (header >> 8) & 0xFF
    if op == amd_gpu.PACKET3_INDIRECT_BUFFER:
      q._next_dword()
      q._exec_indirect_buffer(n)
      return True
    wptr, q.wptr[0] = q.wptr[0], q.rptr[0] + n + 2   # one packet (a wait that does not pass makes no progress)
    try: return q.execute() > 0
    finally: q.wptr[0] = wptr
  def lagging_step() -> bool:
    # no garbage collection inside a packet: a Buffer freed there would synchronize a device from inside the mock GPU
    drv._executing, gc_was = True, gc.isenabled()
    gc.disable()
    try: return step(lagging)
    finally:
      drv._executing = False
      if gc_was: gc.enable()
  wait = HCQ2Compiled.__dict__["_wait_signal"]
  def lagging_wait(dev, sig, value, timeout=None):
    # the mock GPU's own waits (its kernel emulator runs on tinygrad's CPU device) are not the host's
    if drv._executing: return wait(dev, sig, value, timeout)
    run_others()
    while sig[0] < value and lagging_step(): run_others()
    return wait(dev, sig, value, timeout)
  drv._emulate_execute, HCQ2Compiled._wait_signal = run_others, lagging_wait
  def restore():
    HCQ2Compiled._wait_signal = wait
    del drv._emulate_execute
    drv._emulate_execute()   # the lagging queue catches up
  return restore

@unittest.skipUnless(HCQ2, "needs 2 AMD devices on tinygrad's hcq2 path (HCQ2=1)")
class TestHCQ2CrossDeviceReuse(unittest.TestCase):
  def test_every_peer_access_after_its_devices_timeline(self):
    batches, orig = [], hcq2._finalize_batch
    def record(batch, profile):
      batches.append(ret:=orig(batch, profile))
      return ret
    # compile the two schedules afresh (not from hcq2's compile cache) with the batches recorded
    with patch.object(hcq2, "_finalize_batch", record), patch.dict(hcq2.hcq_compile_cache, clear=True):
      a, _, x, _ = shard_pair(_devices(2), 0)
    np.testing.assert_equal(x.numpy(), a)
    misses = [f"batch {i}: {m}" for i, out in enumerate(batches) for m in peer_misses(out)]
    if misses: self.fail("\n".join(misses))

  @unittest.skipUnless("test.mockgpu.mockgpu" in sys.modules, "needs tinygrad's mock AMD GPU (DEV=MOCKKFD+AMD)")
  def test_lagging_device_assign(self):
    # no memory reuse needed: device 1 reads t, then device 0's copy queue overwrites t in place
    d0, d1 = _devices(2)
    t = Tensor(np.zeros(16, np.float32), device=d1).contiguous().realize()
    for it in range(3):
      src = Tensor(np.full(16, it + 1, np.float32), device=d0).contiguous().realize()
      restore = lag_compute_queue(d1) if it == 2 else None
      try:
        out = (t * 2 + 1).realize()     # device 1 reads t (it holds it)
        t.assign(src.to(d1)).realize()  # t = it + 1, copied by device 0's copy queue
      finally:
        if restore is not None: restore()
      if (got:=out.numpy()[0]) != 2 * it + 1: self.fail(f"call {it}: t * 2 + 1 = {got}, want {2 * it + 1} (t's next value read)")
      np.testing.assert_equal(t.numpy(), np.full(16, it + 1, np.float32))

  @unittest.skipUnless("test.mockgpu.mockgpu" in sys.modules, "needs tinygrad's mock AMD GPU (DEV=MOCKKFD+AMD)")
  def test_lagging_device(self):
    devs = _devices(2)
    for it in range(3):   # the first calls compile and link the schedules (that synchronizes every device); the last lags
      restore = lag_compute_queue(devs[1]) if it == 2 else None
      try: a, b, x, y = shard_pair(devs, it)
      finally:
        if restore is not None: restore()
      got = x.numpy()
      if not np.array_equal(got, a):
        self.fail(f"call {it}: x's shard on {devs[1]}: {got[2:].ravel().tolist()}, want {a[2:].ravel().tolist()} (y's shard there: "
                  f"{b[2:].ravel().tolist()})")
      np.testing.assert_equal(y.numpy(), b)

if __name__ == "__main__":
  unittest.main()
