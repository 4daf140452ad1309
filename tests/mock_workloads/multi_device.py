"""A TinyJit over two devices: a sharded matmul and cross-device copies, called 4 times (CALLS). (The input is copied to
the second device from a computed buffer: tinygrad 0.14's HCQGraph keeps call 1's address for a copy whose source is
a view of a JIT input, issue 26.)"""
import os, sys
import numpy as np
from tinygrad import Tensor, TinyJit, Device

d0, d1 = Device.DEFAULT, f"{Device.DEFAULT}:1"
wn = np.arange(64, dtype=np.float32).reshape(8, 8) / 64
w = Tensor(wn).shard((d0, d1), axis=1).realize()

@TinyJit
def step(x):
  h = (x + 0).contiguous()
  y = (h.shard((d0, d1)) @ w).realize()
  return (y.to(d1) + 1).contiguous()

for i in range(int(os.environ.get("CALLS", 4))):
  xn = np.full((2, 8), i, dtype=np.float32)
  out = step(Tensor(xn).realize()).numpy()
  # tinygrad's numbers; a bug injected into its queues (buggy_graph.py, buggy_hcq2.py: BUG) may really change them
  # (tinygrad's mock NV GPU runs no kernel: its numbers are zeros there)
  assert os.environ.get("BUG") or "NV" in os.environ.get("DEV", "") or np.allclose(out, xn @ wn + 1), (out, xn @ wn + 1)
if len(sys.argv) > 1: np.save(sys.argv[1], out)
