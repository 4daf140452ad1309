"""A 2D convolution with bias and relu. Runs under plain tinygrad."""
import numpy as np
from tinygrad import Tensor, Device

def main():
  rng = np.random.default_rng(2)
  x = Tensor(rng.standard_normal((1, 2, 6, 6), dtype=np.float32), device=Device.DEFAULT)
  w = Tensor(rng.standard_normal((4, 2, 3, 3), dtype=np.float32), device=Device.DEFAULT)
  b = Tensor(rng.standard_normal((4,), dtype=np.float32), device=Device.DEFAULT)
  return x.conv2d(w, b, padding=1).relu()

if __name__ == "__main__":
  print(main().numpy())
