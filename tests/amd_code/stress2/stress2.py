"""Still more of the ISA for the RDNA3 executor's tests: sin/log2/tanh/sigmoid (tinygrad's integer range reduction:
v_clz, 64-bit compares and EXEC save/restore), cumsum, gather, uint8 and int64 arithmetic, integer division,
float-to-int casts and roundings, conv2d + max_pool2d, std/mean, denormal exp2. Regenerate: `hcqdsl emit
tests/amd_code/stress2/stress2.py -o tests/amd_code/stress2/stress2.hcq --amd-code`."""
import numpy as np
from tinygrad import Tensor, Device, dtypes

def main():
  rng = np.random.default_rng(2)
  x = Tensor(rng.standard_normal((4, 16), dtype=np.float32), device=Device.DEFAULT)
  idx = Tensor(rng.integers(0, 16, (8,), dtype=np.int32), device=Device.DEFAULT)
  u8 = Tensor(rng.integers(0, 255, (32,), dtype=np.uint8), device=Device.DEFAULT)
  a = Tensor(rng.integers(1, 100, (32,), dtype=np.int32), device=Device.DEFAULT)
  b = Tensor(rng.integers(1, 9, (32,), dtype=np.int32), device=Device.DEFAULT)
  img = Tensor(rng.standard_normal((1, 2, 10, 10), dtype=np.float32), device=Device.DEFAULT)
  w = Tensor(rng.standard_normal((4, 2, 3, 3), dtype=np.float32), device=Device.DEFAULT)
  return (x.sin(), x.log2().abs(), x.cumsum(axis=1), x.gather(1, idx.reshape(1, 8).expand(4, 8)),
          (u8.cast(dtypes.int32) * 3).cast(dtypes.uint8), a // b, a % b, x.cast(dtypes.int32), (x > 0.5) & (x < 1.5),
          img.conv2d(w, padding=1).relu().max_pool2d(), x.std(axis=1), x.mean(), (x * 1e-40).exp2(), x.tanh(), x.sigmoid(),
          a.cast(dtypes.int64) * 1000000000, x.trunc(), x.floor(), x.ceil(), x.round())
