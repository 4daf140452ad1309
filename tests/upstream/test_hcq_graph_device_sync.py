"""HCQGraph._resolve_deps credits a queue with device syncs it has not waited for.

Every queue of an HCQGraph that touches device D's memory must first be ordered after D's graph start ("kickoff": D's
compute queue waited for everything D ran before the graph, then signalled). `dev_access[q]` is the set of devices q is
known to be ordered after. When queue q waits for `dep_queue >= dep_val`, `_resolve_deps` adds `dev_access[dep_queue]`
as it is *when the graph is built* - including devices dep_queue syncs with in commands after dep_val, which the wait
does not order q after. q then skips D's kickoff wait and can write D's memory while D's previous work still reads it.

The tensor-parallel chain below (two column/row-parallel blocks with `.to()` hops, longer than one JIT batch so TinyJit
makes two HCQGraphs) has such a command: in the first graph, device 1's copy queue writes device 3's all-reduce receive
buffer after waiting for device 0's copy queue at a value before that queue's wait for device 3's kickoff. Device 3's
reduce kernel of the *second* graph of the previous call reads that buffer; nothing orders it before the copy.

- test_every_access_after_its_devices_kickoff: the graph's own schedule (no execution order involved): fails on every
  HCQ device with 4 GPUs, naming the command.
- test_lagging_device: wrong numbers. The chain keeps a replicated state S (each device adds its own copy of the
  all-reduced result). On tinygrad's mock GPU, device 3's compute queue is made to lag (it runs a packet only when the
  host waits for a signal that is not set yet: a legal schedule, a real GPU may be that slow): call k+1's copy
  overwrites the receive buffer before device 3's call-k reduce kernel reads it, and device 3's replica of S goes wrong.
  The per-call output (device 0's copy) stays right, so nothing but the replica shows it.

Standalone: needs only tinygrad; drop it into tinygrad's test/ and run  DEV=MOCKKFD+AMD python -m pytest
test/test_hcq_graph_device_sync.py  (the second test needs tinygrad's mock GPU, test/mockgpu; the first runs on any 4
HCQ GPUs)."""
import sys, unittest
import numpy as np
from tinygrad import Tensor, TinyJit, Device
from tinygrad.uop.ops import Ops
from tinygrad.engine.realize import graph_cache
from tinygrad.runtime.graph.hcq import HCQGraph
from tinygrad.runtime.support.hcq import HCQCompiled, HCQSignal

def _devices(n):
  try: return tuple(Device[f"{Device.DEFAULT}:{i}"].device for i in range(n))
  except Exception: return None

class TensorParallel:
  """Two tensor-parallel blocks (column-parallel W1, relu, row-parallel W2 with its all-reduce) with `.to()` hops between
  them, and a replicated state S += the all-reduced result (on every device, from its own copy)."""
  def __init__(self, devs, d=8):
    self.devs, rng = devs, np.random.default_rng(0)
    self.w1, self.w2 = rng.standard_normal((d, 4 * d), dtype=np.float32) / 4, rng.standard_normal((4 * d, d), dtype=np.float32) / 4
    self.W1, self.W2 = Tensor(self.w1).shard(devs, axis=1).realize(), Tensor(self.w2).shard(devs, axis=0).realize()
    self.S, self.s = Tensor(np.zeros((2, d), np.float32)).shard(devs).realize(), np.zeros((2, d), np.float32)
    self.step = TinyJit(self._step)
    self.inputs = [np.arange(2 * d, dtype=np.float32).reshape(2, d) / 16 - i for i in range(5)]

  def block(self, x): return (x.to(self.devs) @ self.W1).relu() @ self.W2

  def _step(self, x):
    y = self.block((x + 1).contiguous())
    z = (y.to(self.devs[1]) * 2).contiguous()
    z = (z.to(self.devs[-1]) + 1).contiguous()
    out = self.block(z)
    ret = out.to(self.devs[0]).contiguous()
    Tensor.realize(self.S.assign(self.S + out.contiguous()), ret)
    return ret

  def reference(self, xn):
    y = np.maximum((xn + 1) @ self.w1, 0) @ self.w2
    return np.maximum((y * 2 + 1) @ self.w1, 0) @ self.w2

  def __call__(self, xn):
    self.s = self.s + self.reference(xn)
    return self.step(Tensor(xn, device=self.devs[0]).realize()).numpy()

  def graphs(self) -> list[HCQGraph]:
    return [graph_cache[c.src[0]] for c in self.step.captured.linear.src if c.src[0].op is Ops.CUSTOM_FUNCTION and c.src[0].arg == "graph"]

def kickoff_misses(g: HCQGraph) -> list[str]:
  """The commands of g that touch a device's memory without being ordered after that device's kickoff in g: follows the
  waits g encodes (ji_schedule) from the start of every queue."""
  kickoff_of = {id(sig): dev for dev, sig in g.signals.items() if dev in g.comp_queues}
  after, last, out = {}, {}, []
  for j, (_, ast, bufs, _) in enumerate(g.calls):
    enqueue_dev, queue, sync_signals, deps, _, _ = g.ji_schedule[j]
    # a compute queue starts with its device's kickoff; a copy queue with none
    devs = set(last.get(id(queue), {enqueue_dev} if queue is g.comp_queues.get(enqueue_dev) else set()))
    devs |= {kickoff_of[id(sig)] for sig, _ in sync_signals}
    for _, val in deps: devs |= after[val - 1]    # waiting for signal >= val orders this after command val-1 of that queue
    after[j] = last[id(queue)] = devs
    for b in bufs:
      if (d:=Device[b.device]) not in devs:
        what = f"copy {bufs[0].device} <- {bufs[1].device}" if ast.op is Ops.COPY else ast.arg.name
        out.append(f"command {j} ({what}, on {enqueue_dev.device}'s {'compute' if queue is g.comp_queues.get(enqueue_dev) else 'copy'} queue) "
                   f"touches {d.device}'s memory without waiting for {d.device}'s kickoff")
  return out

def lag_compute_queue(device: str):
  """On tinygrad's mock AMD GPU: `device`'s compute queue runs no packet until the host waits for a signal that is not
  set, then one packet at a time (descending into indirect buffers) until it is. Every other queue runs as soon as it can."""
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
    drv._executing = True
    try: return step(lagging)
    finally: drv._executing = False
  wait = HCQSignal.wait
  def lagging_wait(sig, value, timeout=None):
    run_others()
    while sig.value < value and lagging_step(): run_others()
    return wait(sig, value, timeout)
  drv._emulate_execute, HCQSignal.wait = run_others, lagging_wait
  def restore():
    HCQSignal.wait = wait
    del drv._emulate_execute
    drv._emulate_execute()   # the lagging queue catches up
  return restore

@unittest.skipIf(_devices(4) is None or not isinstance(Device[Device.DEFAULT], HCQCompiled), f"needs 4 HCQ {Device.DEFAULT} devices")
class TestHCQGraphDeviceSync(unittest.TestCase):
  def test_every_access_after_its_devices_kickoff(self):
    tp = TensorParallel(_devices(4))
    for xn in tp.inputs[:3]: np.testing.assert_allclose(tp(xn), tp.reference(xn), atol=1e-4)
    graphs = tp.graphs()
    self.assertGreaterEqual(len(graphs), 2)
    misses = [f"graph {i}: {m}" for i, g in enumerate(graphs) for m in kickoff_misses(g)]
    if misses: self.fail("\n".join(misses))

  @unittest.skipUnless(Device.DEFAULT == "AMD" and "test.mockgpu.mockgpu" in sys.modules, "needs tinygrad's mock AMD GPU (DEV=MOCKKFD+AMD)")
  def test_lagging_device(self):
    tp = TensorParallel(devs:=_devices(4))
    restore = lag_compute_queue(devs[3])
    try:
      for i, xn in enumerate(tp.inputs): np.testing.assert_allclose(tp(xn), tp.reference(xn), atol=1e-4, err_msg=f"call {i}")
    finally: restore()
    replicas = [tp.S.uop.buffer.bufs[k].numpy().view(np.float32).reshape(tp.s.shape) for k in range(len(devs))]
    wrong = [f"{devs[k]}'s replica of S: {r.ravel()[:4]}, want {tp.s.ravel()[:4]}"
             for k, r in enumerate(replicas) if not np.allclose(r, tp.s, atol=1e-4)]
    # S @ W1 is column-parallel: device k computes columns 8k..8k+7 from its own replica
    got, want = (tp.S @ tp.W1).numpy(), tp.s @ tp.w1
    if wrong or not np.allclose(got, want, atol=1e-3):
      self.fail("\n".join(wrong + [f"S @ W1: columns wrong: {sorted({int(c) for c in np.argwhere(~np.isclose(got, want, atol=1e-3))[:, 1]})}"]))

if __name__ == "__main__":
  unittest.main()
