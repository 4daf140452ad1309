"""An all-reduce over NDEV (default 4) GPUs in a TinyJit called CALLS (default 5) times: each device scales its shard
of the input, then the sum over the sharded axis is all-reduced (tinygrad's schedule/allreduce.py: naive by default,
RING=2 a ring, ALL2ALL=1/2 all-to-all, HCQ_NUM_SDMA=N copy queues per device in HCQGraph). The input is new memory
every call. Saves the sum after the last call (device 0's copy). STALE=1 all-reduces the JIT input itself (no kernel
first): tinygrad 0.14's HCQGraph then keeps call 1's input for every copy and reduce kernel
(docs/findings/stale-jit-copy.md); HCQDSL_FIX=1 applies that write-up's fix first (stale_copy.py, by monkeypatch)."""
import os, pathlib, sys
import numpy as np
from tinygrad import Tensor, TinyJit, Device

NDEV, CALLS, N = int(os.environ.get("NDEV", 4)), int(os.environ.get("CALLS", 5)), int(os.environ.get("N", 64))
STALE, FIX = os.environ.get("STALE") == "1", os.environ.get("HCQDSL_FIX") == "1"
if FIX:
  sys.path.insert(0, str(pathlib.Path(__file__).parent))
  from stale_copy import apply_fix
  apply_fix()
devs = tuple(f"{Device.DEFAULT}:{i}" for i in range(NDEV))

@TinyJit
def allreduce(x):
  h = x if STALE else (x * 2).contiguous()
  return h.sum(0).contiguous().realize()

for i in range(CALLS):
  xn = np.arange(NDEV * N, dtype=np.float32).reshape(NDEV, N) + 100 * i
  out = allreduce(Tensor(xn).shard(devs, axis=0).realize()).numpy()
  want = xn.sum(0) * (1 if STALE else 2)
  if not STALE or FIX: assert np.allclose(out, want), (i, out[:4], want[:4])
  print(i, out[:2].tolist(), want[:2].tolist())
if len(sys.argv) > 1: np.save(sys.argv[1], out)
