"""A matmul sharded across N devices (rows of the left operand split, the right operand replicated). Runs under plain
tinygrad; `hcqdsl emit shard_matmul.py --devices 4`."""
import numpy as np
from tinygrad import Tensor, Device

def main(devices: int = 2):
  rng = np.random.default_rng(3)
  devs = tuple(f"{Device.DEFAULT}:{i}" for i in range(devices))
  a = Tensor(rng.standard_normal((4 * devices, 8), dtype=np.float32)).shard(devs, axis=0)
  b = Tensor(rng.standard_normal((8, 8), dtype=np.float32)).shard(devs)
  return (a @ b).relu()

def four(): return main(4)
def eight(): return main(8)

if __name__ == "__main__":
  print(main().numpy())
