"""A tensor-parallel chain over NDEV (default 4) GPUs in a TinyJit called CALLS (default 5) times (Megatron style): a
column-parallel W1 (sharded on its output axis: no communication), relu, a row-parallel W2 (sharded on its input
axis: each device holds a partial sum, all-reduced), then `.to()` hops of the result between devices and a second
block. The input is new memory every call. Saves the output after the last call.

Its HCQGraph (two graphs: the chain is longer than one JIT batch) shows tinygrad 0.14's `_resolve_deps` ordering bug
(docs/findings/resolve-deps-ordering.md): a copy into device 3's all-reduce receive buffer inherits "synchronized with
device 3" from a queue it waits for at a value before that queue's own wait for device 3, so it never waits for device
3's graph start. With HCQDSL_FIX=1 the proposed fix is applied first (by monkeypatch)."""
import os, sys
import numpy as np
from tinygrad import Tensor, TinyJit, Device

def apply_fix():
  """tinygrad 0.14's HCQGraph._resolve_deps with the proposed fix: a queue that waits for `dep_queue >= dep_val`
  inherits the devices `dep_queue` had synchronized with when it signalled `dep_val` (a snapshot per (queue, value)),
  not the set as it is when the graph is built. Everything else is tinygrad's code as it is."""
  from typing import cast
  from tinygrad.device import Buffer
  from tinygrad.runtime.graph.hcq import HCQGraph
  from tinygrad.runtime.support.hcq import HCQCompiled
  def _resolve_deps(self, bufs, outs, enqueue_queue, enqueue_dev, out_signal, j, is_copy, rdma_qp=None):
    at = self.__dict__.setdefault("dev_access_at", {})   # (queue, value) -> the devices it had synchronized with then
    rdeps = self._access_resources(bufs, outs, (enqueue_queue, j + 1))
    if rdma_qp is not None and (prev:=self.rdma_last_dest.get(id(rdma_qp))) is not None and prev[0] is not enqueue_queue:
      rdeps = rdeps + [(prev[0], prev[1])]
    if rdma_qp is not None: self.rdma_last_dest[id(rdma_qp)] = (enqueue_queue, j + 1)
    opt_deps, deps = [], rdeps + ([(enqueue_queue, prev_ji + 1)] if (prev_ji:=self.last_j[enqueue_queue]) is not None else [])
    for dep_queue, dep_val in sorted(deps, key=lambda x: x[1], reverse=True):
      if (qa:=self.queue_access[enqueue_queue][dep_queue]) is None or qa < dep_val:
        opt_deps.append((self.signals[dep_queue], dep_val))
        self.queue_access[enqueue_queue][dep_queue] = dep_val
        self.dev_access[enqueue_queue].update(at.get((dep_queue, dep_val), self.dev_access[dep_queue]))   # the fix
    sync_signals = [(self.signals[d], self.kickoff_var) for b in bufs
      if (d:=cast(HCQCompiled, Device[cast(Buffer, b).device])) not in self.dev_access[enqueue_queue]
      and (d.peer_group == enqueue_dev.peer_group or rdma_qp is None)]
    self.dev_access[enqueue_queue].update(cast(HCQCompiled, Device[cast(Buffer, b).device]) for b in bufs)
    at[(enqueue_queue, j + 1)] = frozenset(self.dev_access[enqueue_queue])                                # the fix
    dname = enqueue_dev.device.split(":", 1)[0]
    can_opt = dname in {"AMD", "QCOM"} or (dname == "NV" and len(sync_signals) == 0 and len(opt_deps) == 1 and id(opt_deps[0][0]) == id(out_signal))
    if (can_opt or is_copy) and rdma_qp is None: opt_deps = [x for x in opt_deps if id(x[0]) != id(out_signal)]
    for sig, val in opt_deps: self.ji_schedule[val - 1] = self.ji_schedule[val - 1][:5] + (val,)
    return sync_signals, opt_deps, rdeps
  HCQGraph._resolve_deps = _resolve_deps

if os.environ.get("HCQDSL_FIX") == "1": apply_fix()

NDEV, CALLS, D = int(os.environ.get("NDEV", 4)), int(os.environ.get("CALLS", 5)), int(os.environ.get("D", 8))
devs = tuple(f"{Device.DEFAULT}:{i}" for i in range(NDEV))
rng = np.random.default_rng(0)
w1n, w2n = rng.standard_normal((D, 4 * D), dtype=np.float32) / 4, rng.standard_normal((4 * D, D), dtype=np.float32) / 4
W1, W2 = Tensor(w1n).shard(devs, axis=1).realize(), Tensor(w2n).shard(devs, axis=0).realize()

def block(x: Tensor) -> Tensor:
  return (x.to(devs) @ W1).relu() @ W2       # column-parallel, then row-parallel with its all-reduce

@TinyJit
def chain(x: Tensor) -> Tensor:
  y = block((x + 1).contiguous())             # x on device 0, replicated to all for the first block
  z = (y.to(devs[1]) * 2).contiguous()        # a hop to device 1
  z = (z.to(devs[-1]) + 1).contiguous()       # and to the last device
  return block(z).to(devs[0]).contiguous().realize()

def reference(xn):
  def relu(a): return np.maximum(a, 0)
  y = relu((xn + 1) @ w1n) @ w2n
  return relu((y * 2 + 1) @ w1n) @ w2n

for i in range(CALLS):
  xn = np.arange(2 * D, dtype=np.float32).reshape(2, D) / 16 - i
  out = chain(Tensor(xn, device=devs[0]).realize()).numpy()
  assert np.allclose(out, reference(xn), atol=1e-4), (i, out, reference(xn))
if len(sys.argv) > 1: np.save(sys.argv[1], out)
