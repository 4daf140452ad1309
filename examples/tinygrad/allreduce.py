"""A cross-device all-reduce-style sum: each device holds a partial, the sum lands on every device. Runs under plain
tinygrad."""
import numpy as np
from tinygrad import Tensor, Device

def main(devices: int = 2):
  rng = np.random.default_rng(4)
  devs = tuple(f"{Device.DEFAULT}:{i}" for i in range(devices))
  x = Tensor(rng.standard_normal((devices, 16), dtype=np.float32)).shard(devs, axis=0)
  return x.sum(axis=0, keepdim=True).to(devs[0]), (x * 2).sum(axis=0)

if __name__ == "__main__":
  for t in main(): print(t.numpy())
