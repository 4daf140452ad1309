"""Matrix multiplies tinygrad lowers to gfx1100's WMMA (tensor cores), for the RDNA3 executor's corpus: half inputs with
float and half accumulation, bfloat16 inputs, a batched half matmul and a float matmul. Regenerate: `hcqdsl emit
tests/amd_code/tc/tc.py -o tests/amd_code/tc/tc.hcq --amd-code`."""
import numpy as np
from tinygrad import Tensor, Device, dtypes

def main():
  rng = np.random.default_rng(8)
  dev = Device.DEFAULT
  a = Tensor(rng.standard_normal((64, 64), dtype=np.float32), device=dev)
  b = Tensor(rng.standard_normal((64, 32), dtype=np.float32), device=dev)
  ah, bh = a.cast(dtypes.half), b.cast(dtypes.half)
  ab, bb = a.cast(dtypes.bfloat16), b.cast(dtypes.bfloat16)
  c = Tensor(rng.standard_normal((4, 32, 32), dtype=np.float32), device=dev).cast(dtypes.half)
  return [ah.matmul(bh, dtype=dtypes.float32), (ah @ bh).cast(dtypes.float32), ab.matmul(bb, dtype=dtypes.float32),
          (c @ c).cast(dtypes.float32), a @ b]

if __name__ == "__main__":
  for t in main(): print(t.numpy())
