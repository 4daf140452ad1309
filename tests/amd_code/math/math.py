"""tinygrad's transcendental functions through its AMD LLVM backend, for the RDNA3 executor's corpus: exp, log, sin,
cos, tan, sqrt, rsqrt, reciprocal, pow, tanh, sigmoid, softplus, mish, silu, erf in float32, half and float64, and
division. Regenerate: `hcqdsl emit tests/amd_code/math/math.py -o tests/amd_code/math/math.hcq --amd-code`, then put back the `# hcq: run=no` line."""
import numpy as np
from tinygrad import Tensor, Device, dtypes

def main():
  rng = np.random.default_rng(6)
  dev = Device.DEFAULT
  x = Tensor(rng.uniform(-4, 4, (64,)).astype(np.float32), device=dev)
  p = Tensor(rng.uniform(0.01, 50, (64,)).astype(np.float32), device=dev)
  big = Tensor((rng.uniform(-1, 1, (64,)) * 1e4).astype(np.float32), device=dev)
  out = [x.exp(), x.exp2(), p.log(), p.log2(), x.sin(), x.cos(), x.tan(), big.sin(), big.cos(), p.sqrt(), p.rsqrt(),
         p.reciprocal(), p.pow(x), x.tanh(), x.sigmoid(), x.softplus(), x.mish(), x.silu(), x.erf(), x / p, x.abs().pow(1.7)]
  h, ph = x.cast(dtypes.half), p.cast(dtypes.half)
  out += [t.cast(dtypes.float32) for t in (h.exp(), ph.log(), h.sin(), ph.sqrt(), ph.reciprocal(), h.tanh(), h / ph)]
  d, pd = x.cast(dtypes.float64), p.cast(dtypes.float64)
  out += [d.exp(), pd.log(), d.sin(), pd.sqrt(), pd.reciprocal(), d / pd]
  return out

if __name__ == "__main__":
  for t in main(): print(t.numpy())
