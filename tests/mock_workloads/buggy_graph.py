"""A TinyJit workload (the two-device one of multi_device.py unless WORKLOAD names another) with a bug injected into tinygrad's HCQGraph
while it builds its queues (BUG=dep: the copy queue drops its wait for the compute queue that produced its source; BUG=kick: every queue drops
its wait for the host's kickoff; BUG=barrier: the compute queues drop their opening `memory_barrier`, the HDP flush
after the host's writes of kernel arguments; BUG=hang: the compute queues no longer signal the device's timeline at
the end, so tinygrad's next wait for the graph times out — set HCQDEV_WAIT_TIMEOUT_MS low). Used by the sanitize and
check tests; BUG unset: tinygrad as it is."""
import os, runpy, pathlib
from tinygrad.runtime.graph.hcq import HCQGraph
from tinygrad.runtime.ops_amd import AMDComputeQueue, AMDCopyQueue
from tinygrad.uop.ops import UOp

BUG = os.environ.get("BUG", "")
building = []
orig_init = HCQGraph.__init__
def init(self, *a, **kw):
  building.append(self)
  try: orig_init(self, *a, **kw)
  finally: building.pop()
HCQGraph.__init__ = init

def dropping(cls):
  orig = cls.wait
  def wait(q, signal, value=0):
    if building:
      if BUG == "dep" and cls is AMDCopyQueue and isinstance(value, int) and signal in building[-1].signals.values(): return q
      if BUG == "kick" and isinstance(value, UOp) and "kickoff" in str(getattr(value, "arg", "")): return q
    return orig(q, signal, value)
  cls.wait = wait
for c in (AMDComputeQueue, AMDCopyQueue): dropping(c)

orig_signal = AMDComputeQueue.signal
def signal(q, sig, value=0):
  if building and BUG == "hang" and sig in building[-1].virt_timeline_signals.values(): return q
  return orig_signal(q, sig, value)
AMDComputeQueue.signal = signal

orig_barrier = AMDComputeQueue.memory_barrier
def memory_barrier(q):
  return q if building and BUG == "barrier" else orig_barrier(q)
AMDComputeQueue.memory_barrier = memory_barrier

# WORKLOAD: which workload of this folder runs (default multi_device; jit_inputs for BUG=barrier, whose kernels read a
# new input each call through kernel arguments the host patches; empty: only inject the bug, for a script importing this)
if (workload := os.environ.get("WORKLOAD", "multi_device")):
  runpy.run_path(str(pathlib.Path(__file__).with_name(workload + ".py")), run_name="__main__")
