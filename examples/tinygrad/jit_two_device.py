"""A TinyJit step over two devices: every call brings new input tensors on both devices, device 1's partial result is
copied to device 0, and a running accumulator on device 0 adds both, so the final result depends on every call.
`hcqdsl emit examples/tinygrad/jit_two_device.py` replays it; `python examples/tinygrad/jit_two_device.py` runs it."""
import numpy as np
from tinygrad import Tensor, TinyJit, Device

N, STEPS = 16, 6

def main(seed: int = 0, steps: int = STEPS, devices: int = 2):
  rng = np.random.default_rng(seed)
  d0, d1 = f"{Device.DEFAULT}:0", f"{Device.DEFAULT}:1"
  acc = Tensor.zeros(N, device=d0).contiguous().realize()
  w = Tensor(rng.standard_normal(N, dtype=np.float32), device=d1).realize()

  @TinyJit
  def step(a: Tensor, b: Tensor):
    partial = (b * w + 1).to(d0)                # device 1's work, copied to device 0
    acc.assign(acc + a * 2 + partial).realize()
    return (acc * 1).realize()

  calls = [(Tensor(rng.standard_normal(N, dtype=np.float32), device=d0).realize(),
            Tensor(rng.standard_normal(N, dtype=np.float32), device=d1).realize()) for _ in range(steps)]
  return step, calls

def reference(seed: int = 0, steps: int = STEPS):
  jit, calls = main(seed, steps)
  for args in calls: out = jit(*args)
  return out.numpy()

if __name__ == "__main__": print(reference())
