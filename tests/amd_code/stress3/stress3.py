"""A third stress workload for the RDNA3 executor's tests: gelu, layernorm, clip, argmin, pow, erf, an embedding
gather, cumprod, logsumexp, a bool count and a bitonic sort. Regenerate: `hcqdsl emit tests/amd_code/stress3/stress3.py
-o tests/amd_code/stress3/stress3.hcq --amd-code`."""
import numpy as np
from tinygrad import Tensor, Device

def main():
  rng = np.random.default_rng(4)
  x = Tensor(rng.standard_normal((4, 32), dtype=np.float32), device=Device.DEFAULT)
  t = Tensor(rng.integers(0, 10, (16,), dtype=np.int32), device=Device.DEFAULT)
  emb = Tensor(rng.standard_normal((10, 8), dtype=np.float32), device=Device.DEFAULT)
  return (x.gelu(), x.layernorm(), x.clip(-0.5, 0.5), x.argmin(axis=1), x.pow(2) + x.abs().pow(0.5), x.erf(),
          emb[t],
          x.cumprod(axis=1), x.logsumexp(axis=1), (x > 0).sum(axis=1), x.sort(1)[0])
