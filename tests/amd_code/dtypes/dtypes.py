"""Every dtype through tinygrad's AMD LLVM backend, for the RDNA3 executor's corpus: int8/uint8/int16/uint16/uint32/
int64/uint64 arithmetic (multiply, divide, modulo, shifts, compares, max), bool logic, half and bfloat16 arithmetic,
float64, casts between them and a bitcast. Regenerate: `hcqdsl emit tests/amd_code/dtypes/dtypes.py -o
tests/amd_code/dtypes/dtypes.hcq --amd-code`, then put back the `# hcq: run=no` line."""
import numpy as np
from tinygrad import Tensor, Device, dtypes

def main():
  rng = np.random.default_rng(5)
  dev = Device.DEFAULT
  f = Tensor(rng.standard_normal((32,), dtype=np.float32) * 40, device=dev)
  i = Tensor(rng.integers(-3000, 3000, (32,), dtype=np.int32), device=dev)
  j = Tensor(rng.integers(1, 37, (32,), dtype=np.int32), device=dev)
  out = []
  for dt in (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.uint32, dtypes.int64, dtypes.uint64):
    a, b = i.cast(dt), j.cast(dt)
    out += [a * b + a, a // b, a % b, (a << 3) >> 1, a.maximum(b), (a < b).where(a, b)]
  big = i.cast(dtypes.int64) * 3037000499 + j.cast(dtypes.int64)
  out += [big // 7, big % 1000003, big >> 17, big.cast(dtypes.float32), big.cast(dtypes.uint64) >> 3]
  bl = f > 0
  out += [bl & (i > 0), bl | (j > 20), bl ^ (i < 0), bl.logical_not(), bl.cast(dtypes.int32).sum()]
  for dt in (dtypes.half, dtypes.bfloat16):
    h, g = f.cast(dt), (f * 0.5 + 1).cast(dt)
    out += [(h * g + h).cast(dtypes.float32), (h / (g.abs() + 1)).cast(dtypes.float32), h.maximum(g).cast(dtypes.float32),
            h.cast(dtypes.int32), i.cast(dt).cast(dtypes.float32), (h < g).cast(dtypes.int32)]
  d = f.cast(dtypes.float64)
  out += [(d * d + 1).sqrt(), d / 3, (d * 1048576.5).cast(dtypes.float32), i.cast(dtypes.float64) * 0.1, d.cast(dtypes.int64)]
  out += [f.cast(dtypes.uint8), f.cast(dtypes.int16), f.cast(dtypes.uint32), f.bitcast(dtypes.uint32) >> 23,
          i.bitcast(dtypes.float32).isnan(), f.cast(dtypes.half).bitcast(dtypes.int16)]
  return out

if __name__ == "__main__":
  for t in main(): print(t.numpy())
