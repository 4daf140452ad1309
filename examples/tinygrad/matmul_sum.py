"""Matmul + sum on one device. Runs under plain tinygrad: `python examples/tinygrad/matmul_sum.py`."""
import numpy as np
from tinygrad import Tensor, Device

def main():
  rng = np.random.default_rng(0)
  a = Tensor(rng.standard_normal((8, 8), dtype=np.float32), device=Device.DEFAULT)
  b = Tensor(rng.standard_normal((8, 8), dtype=np.float32), device=Device.DEFAULT)
  c = a @ b
  return c, c.sum(axis=1)

if __name__ == "__main__":
  for t in main(): print(t.numpy())
