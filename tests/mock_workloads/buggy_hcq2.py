"""A workload on tinygrad's hcq2 path (HCQ2=1 HCQ_RUNTIME_DEV=PYTHON) with a bug injected into hcq2's planner
(`tinygrad/runtime/support/hcq2.py` `_build_wait_ins`, which turns a batch's dependencies into queue waits):
BUG=dep: an AMD copy queue drops its wait for the compute queue that produced its source (the two-device TinyJit of
multi_device.py); BUG=refill: the CPU device's finalizer drops its wait for the AMD copy queue that read the host
staging buffer, so the host refills the staging buffer for the next input while the copy may still read it (the
training step of train_step.py, whose x and y are staged one after the other). BUG unset: tinygrad as it is. WORKLOAD
names another workload of this folder; empty: only inject the bug, for a script importing this."""
import os, runpy, pathlib
from tinygrad.runtime.support import hcq2

BUG = os.environ.get("BUG", "")
orig_build_wait_ins = hcq2._build_wait_ins
def build_wait_ins(slots, dep_lanes, devices, queue):
  if BUG == "dep" and devices[0].startswith("AMD") and queue.startswith("COPY"):
    dep_lanes = [(dep, dl, lane) for dep, dl, lane in dep_lanes if not dep[1].startswith("COMPUTE")]
  if BUG == "refill" and devices[0].startswith("CPU"): dep_lanes = []
  return orig_build_wait_ins(slots, dep_lanes, devices, queue)
hcq2._build_wait_ins = build_wait_ins

if (workload := os.environ.get("WORKLOAD", {"refill": "train_step"}.get(BUG, "multi_device"))):
  runpy.run_path(str(pathlib.Path(__file__).with_name(workload + ".py")), run_name="__main__")
