"""A ring of copies over NDEV (default 3) GPUs in a TinyJit called CALLS (default 3) times: each device adds one to
what it receives from its left neighbour (`.to()`), the ring passes the value round once; every call checks the
result with numpy. Saves device 0's last result."""
import os, sys
import numpy as np
from tinygrad import Tensor, TinyJit, Device

NDEV, CALLS = int(os.environ.get("NDEV", 3)), int(os.environ.get("CALLS", 3))
devs = [f"{Device.DEFAULT}:{i}" for i in range(NDEV)]

@TinyJit
def ring(x: Tensor) -> Tensor:
  for d in devs[1:] + devs[:1]: x = (x.to(d) + 1).contiguous()
  return x.realize()

for c in range(CALLS):
  xn = np.arange(32, dtype=np.float32) * (c + 1)
  out = ring(Tensor(xn, device=devs[0]).realize()).numpy()
  np.testing.assert_allclose(out, xn + NDEV)
if len(sys.argv) > 1: np.save(sys.argv[1], out)
