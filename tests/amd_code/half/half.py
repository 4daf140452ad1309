"""Half precision for the RDNA3 executor's tests: a 16x16 half matmul that tinygrad lowers to
v_wmma_f32_16x16x16_f16 (tensor cores), f16 fma/max with v_pack_b32_f16, a half sum. Regenerate:
`hcqdsl emit tests/amd_code/half/half.py -o tests/amd_code/half/half.hcq --amd-code`."""
import numpy as np
from tinygrad import Tensor, Device
def main():
  rng = np.random.default_rng(3)
  a = Tensor(rng.standard_normal((16, 16), dtype=np.float32), device=Device.DEFAULT).half()
  b = Tensor(rng.standard_normal((16, 16), dtype=np.float32), device=Device.DEFAULT).half()
  return (a @ b).float(), (a * b + a).relu(), a.sum(axis=1)
