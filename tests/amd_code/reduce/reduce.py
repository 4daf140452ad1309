"""Reductions through tinygrad's AMD LLVM backend, for the RDNA3 executor's corpus: sums large enough for tinygrad to
reduce across a workgroup in local memory (DS loads and stores, s_barrier), products, integer and half reductions,
argmax/argmin, cumulative sums, variance, any/all, softmax in half. Regenerate: `hcqdsl emit
tests/amd_code/reduce/reduce.py -o tests/amd_code/reduce/reduce.hcq --amd-code`, then put back the `# hcq: run=no` line."""
import numpy as np
from tinygrad import Tensor, Device, dtypes

def main():
  rng = np.random.default_rng(7)
  dev = Device.DEFAULT
  big = Tensor(rng.standard_normal((16384,), dtype=np.float32), device=dev)
  m = Tensor(rng.standard_normal((64, 256), dtype=np.float32), device=dev)
  n = Tensor(rng.integers(-50, 50, (64, 64), dtype=np.int32), device=dev)
  s = Tensor(rng.uniform(0.9, 1.1, (8, 16)).astype(np.float32), device=dev)
  return [big.sum(), big.max(), big.abs().mean(), m.sum(axis=1), m.sum(axis=0), m.max(axis=1), m.min(axis=0),
          m.argmax(axis=1), m.argmin(axis=0), m.var(axis=1), s.prod(axis=1), n.sum(axis=0), n.max(axis=1),
          n.cast(dtypes.int64).sum(axis=1), (n > 40).any(axis=1), (n > -60).all(axis=0), n.cumsum(axis=1),
          m.cast(dtypes.half).softmax(axis=1).cast(dtypes.float32), m.cast(dtypes.half).sum(axis=1).cast(dtypes.float32)]

if __name__ == "__main__":
  for t in main(): print(t.numpy())
