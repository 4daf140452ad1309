"""Program 4 of `hcqdsl fuzz --seed 7` (docs/fuzz.md), shortened: on hcq2 the memory planner reuses device 0's arena
for the gather of z while device 0's first kernel reads only the first rows of the copy of x in that arena. Before the
capture recorded how much of its argument a kernel touches (`extent`), the lift took the whole copy as read and check
reported 8 races no order could make observable (`--confirm`: not-observed) — a false positive, now gone."""
import numpy as np
from tinygrad import Tensor, TinyJit, Device

devs = tuple(f"{Device.DEFAULT}:{i}" for i in range(3))
rng = np.random.default_rng(7004)

@TinyJit
def step(x):
  y = x.shard(devs, axis=0).contiguous().realize().contiguous().realize()
  z = ((y * 3).relu()).contiguous()
  out = z.to(devs[0]).contiguous()
  return out.realize()

for i in range(3):
  x = Tensor(rng.standard_normal((12, 24), dtype=np.float32), device=devs[2]).realize()
  out = step(x)
  print(i, out.numpy().sum())
