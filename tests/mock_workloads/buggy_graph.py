"""A TinyJit workload (the two-device one of multi_device.py unless WORKLOAD names another) with a bug injected into tinygrad's HCQGraph
while it builds its queues (on AMD, or NV with DEV=MOCK+NV; BUG=dep: the copy queue drops its wait for the compute queue that produced its
source; BUG=kick: every queue drops
its wait for the host's kickoff; BUG=barrier: the compute queues drop their opening `memory_barrier`, the HDP flush
after the host's writes of kernel arguments; BUG=hang: the compute queues no longer signal the device's timeline at
the end, so tinygrad's next wait for the graph times out — set HCQDEV_WAIT_TIMEOUT_MS low). Used by the sanitize and
check tests; BUG unset: tinygrad as it is."""
import os, runpy, pathlib
from tinygrad.runtime.graph.hcq import HCQGraph
from tinygrad.runtime.ops_amd import AMDComputeQueue, AMDCopyQueue
from tinygrad.runtime.ops_nv import NVComputeQueue, NVCopyQueue   # the same bugs on NV (DEV=MOCK+NV)
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
      if BUG == "dep" and cls in (AMDCopyQueue, NVCopyQueue) and isinstance(value, int) and signal in building[-1].signals.values(): return q
      if BUG == "kick" and isinstance(value, UOp) and "kickoff" in str(getattr(value, "arg", "")): return q
    return orig(q, signal, value)
  cls.wait = wait
for c in (AMDComputeQueue, AMDCopyQueue, NVComputeQueue, NVCopyQueue): dropping(c)   # (each class gets its own wrapper)

def breaking(cls):
  orig_signal, orig_barrier = cls.signal, cls.memory_barrier
  def signal(q, sig, value=0):
    if building and BUG == "hang" and sig in building[-1].virt_timeline_signals.values(): return q
    return orig_signal(q, sig, value)
  def memory_barrier(q): return q if building and BUG == "barrier" else orig_barrier(q)
  cls.signal, cls.memory_barrier = signal, memory_barrier
for c in (AMDComputeQueue, NVComputeQueue): breaking(c)

# WORKLOAD: which workload of this folder runs (default multi_device; jit_inputs for BUG=barrier, whose kernels read a
# new input each call through kernel arguments the host patches; empty: only inject the bug, for a script importing this)
if (workload := os.environ.get("WORKLOAD", "multi_device")):
  runpy.run_path(str(pathlib.Path(__file__).with_name(workload + ".py")), run_name="__main__")
