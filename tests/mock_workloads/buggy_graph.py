"""The two-device TinyJit of multi_device.py with a bug injected into tinygrad's HCQGraph while it builds its queues
(BUG=dep: the copy queue drops its wait for the compute queue that produced its source; BUG=kick: every queue drops
its wait for the host's kickoff). Used by the sanitize and check tests; BUG unset: tinygrad as it is."""
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

runpy.run_path(str(pathlib.Path(__file__).with_name("multi_device.py")), run_name="__main__")
