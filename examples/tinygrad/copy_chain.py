"""A chain of computations hopping across devices with many `.to()` copies. Runs under plain tinygrad."""
import numpy as np
from tinygrad import Tensor, Device

def main(devices: int = 3, hops: int = 6):
  rng = np.random.default_rng(5)
  devs = [f"{Device.DEFAULT}:{i}" for i in range(devices)]
  x = Tensor(rng.standard_normal((32,), dtype=np.float32), device=devs[0])
  outs = []
  for i in range(1, hops + 1):
    x = (x.to(devs[i % devices]) * 1.5 + i).contiguous()
    outs.append(x)
  return outs[-1], outs[len(outs) // 2]

if __name__ == "__main__":
  for t in main(): print(t.numpy())
