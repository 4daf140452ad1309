"""tinygrad's random numbers through its AMD LLVM backend, for the RDNA3 executor's corpus: the threefry generator
behind Tensor.rand (v_alignbit_b32 rotates), randn, randint, uniform, dropout, half rand. Regenerate: `hcqdsl emit
tests/amd_code/rand/rand.py -o tests/amd_code/rand/rand.hcq --amd-code`, then put back the `# hcq: run=no` line."""
import numpy as np
from tinygrad import Tensor, Device, dtypes
from tinygrad.helpers import Context

def main():
  dev = Device.DEFAULT
  Tensor.manual_seed(42)
  x = Tensor(np.ones((256,), dtype=np.float32), device=dev)
  out = [Tensor.rand(64, 8, device=dev), Tensor.randn(256, device=dev), Tensor.randint(100, low=-5, high=20, device=dev),
         Tensor.uniform(32, low=-2, high=3, device=dev), Tensor.rand(64, device=dev, dtype=dtypes.half).cast(dtypes.float32)]
  with Context(TRAINING=1): out.append(x.dropout(0.3))
  return out

if __name__ == "__main__":
  for t in main(): print(t.numpy())
