"""More of the ISA than the examples use, for the RDNA3 executor's tests (tests/test_rdna3.py): softmax, argmax, a
1024-element sum, integer division/modulo/shifts/max, where/sqrt/exp and a round trip through half, a column max, a
matmul with relu. Regenerate: `hcqdsl emit tests/amd_code/stress/stress.py -o tests/amd_code/stress/stress.hcq --amd-code`."""
import numpy as np
from tinygrad import Tensor, Device, dtypes

def main():
  rng = np.random.default_rng(1)
  x = Tensor(rng.standard_normal((8, 32), dtype=np.float32), device=Device.DEFAULT)
  i = Tensor(rng.integers(-1000, 1000, (64,), dtype=np.int32), device=Device.DEFAULT)
  big = Tensor(rng.standard_normal((1024,), dtype=np.float32), device=Device.DEFAULT)
  ints = ((i * 7) // 3 + (i % 5) - (i >> 2)).maximum(i)
  c = (x > 0).where(x.sqrt().abs(), x.exp() * 0.5).cast(dtypes.half).cast(dtypes.float)
  return x.softmax(axis=1), x.argmax(axis=1), big.sum(), ints, c, x.max(axis=0), (big.reshape(32, 32) @ big.reshape(32, 32)).relu()

if __name__ == "__main__":
  for t in main(): print(t.numpy())
