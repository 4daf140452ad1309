"""A TinyJit over a Variable-sized batch: each call scores the first `n` rows of a new input (n a bound Variable) with
weights the host overwrites in place between calls (the same buffer, new contents: `w.assign(...)` outside the JIT),
and keeps a running total. `hcqdsl emit examples/tinygrad/jit_var_batch.py` replays it."""
import numpy as np
from tinygrad import Tensor, Variable, TinyJit

ROWS, COLS, STEPS = 8, 4, 6

def main(seed: int = 0, steps: int = STEPS):
  rng = np.random.default_rng(seed)
  w = Tensor(rng.standard_normal(COLS, dtype=np.float32)).contiguous().realize()
  total = Tensor.zeros(1).contiguous().realize()
  n = Variable("batch", 1, ROWS)

  @TinyJit
  def step(x: Tensor, b):
    rows = x[0:b]                                       # the filled part of the batch
    total.assign(total + (rows * w).sum().reshape(1)).realize()
    return (total * 1).realize()

  news = [rng.standard_normal(COLS, dtype=np.float32) for _ in range(steps)]
  sizes = [int(s) for s in rng.integers(1, ROWS + 1, steps)]
  calls = [(Tensor(rng.standard_normal((ROWS, COLS), dtype=np.float32)).realize(), n.bind(s)) for s in sizes]
  def rewrite(k: int): w.assign(Tensor(news[k])).realize()   # the host's in-place overwrite before call k
  return step, calls, rewrite

def jit_calls(seed: int = 0, steps: int = STEPS):
  """(jit_fn, calls) for `hcqdsl emit ...:jit_calls`: a generator, so the host overwrites `w` just before each call."""
  step, calls, rewrite = main(seed, steps)
  def each():
    for k, args in enumerate(calls):
      rewrite(k)
      yield args
  return step, each()

def reference(seed: int = 0, steps: int = STEPS):
  step, calls, rewrite = main(seed, steps)
  for k, args in enumerate(calls):
    rewrite(k)
    out = step(*args)
  return out.numpy()

if __name__ == "__main__": print(reference())
