"""A 6-GPU multi-queue step in a TinyJit called CALLS (default 5) times: each device scales its own input, then
receives its two ring neighbours' results (`.to()`: copies on several SDMA queues when HCQ_NUM_SDMA=N or ALL2ALL=1)
and combines them. Every input is new memory each call. Saves device 0's result after the last call."""
import os, sys
import numpy as np
from tinygrad import Tensor, TinyJit, Device

NDEV, CALLS, N = int(os.environ.get("NDEV", 6)), int(os.environ.get("CALLS", 5)), int(os.environ.get("N", 16))
devs = tuple(f"{Device.DEFAULT}:{i}" for i in range(NDEV))

@TinyJit
def step(*xs):
  hs = [(x * (i + 1)).contiguous() for i, x in enumerate(xs)]
  outs = [(hs[i] + hs[(i + 1) % NDEV].to(devs[i]) - hs[(i - 1) % NDEV].to(devs[i])).contiguous() for i in range(NDEV)]
  Tensor.realize(*outs)
  return tuple(outs)

for c in range(CALLS):
  xn = [np.arange(N, dtype=np.float32) + 10 * i + 100 * c for i in range(NDEV)]
  outs = step(*[Tensor(x, device=d).realize() for x, d in zip(xn, devs)])
  hn = [x * (i + 1) for i, x in enumerate(xn)]
  for i, o in enumerate(outs):
    assert np.allclose(o.numpy(), hn[i] + hn[(i + 1) % NDEV] - hn[(i - 1) % NDEV]), (c, i)
if len(sys.argv) > 1: np.save(sys.argv[1], outs[0].numpy())
