"""A TinyJit decode loop: each call appends the new token's key and value to a KV cache at a symbolic position and
attends over the filled prefix (a reduction whose length is the Variable). `hcqdsl emit examples/tinygrad/jit_decode.py`
replays it call by call; `python examples/tinygrad/jit_decode.py` runs it under plain tinygrad."""
import numpy as np
from tinygrad import Tensor, Variable, TinyJit

MAX_CTX, DIM, STEPS = 16, 8, 6

def main(seed: int = 0, steps: int = STEPS):
  rng = np.random.default_rng(seed)
  wk, wv = (Tensor(rng.standard_normal((DIM, DIM), dtype=np.float32) / DIM).realize() for _ in range(2))
  cache_k = Tensor.zeros(MAX_CTX, DIM).contiguous().realize()
  cache_v = Tensor.zeros(MAX_CTX, DIM).contiguous().realize()
  pos = Variable("start_pos", 0, MAX_CTX - 1)

  @TinyJit
  def step(x: Tensor, p):
    cache_k[p:p + 1].assign((x @ wk).reshape(1, DIM)).realize()
    cache_v[p:p + 1].assign((x @ wv).reshape(1, DIM)).realize()
    keys, values = cache_k[0:p + 1], cache_v[0:p + 1]
    weights = (keys * x).sum(1).exp()                  # unnormalised attention over the filled prefix
    return ((weights.reshape(-1, 1) * values).sum(0) / weights.sum()).realize()

  calls = [(Tensor(rng.standard_normal(DIM, dtype=np.float32)).realize(), pos.bind(k)) for k in range(steps)]
  return step, calls

def reference(seed: int = 0, steps: int = STEPS):
  """tinygrad's own TinyJit over the same calls: the output after the last call."""
  jit, calls = main(seed, steps)
  for args in calls: out = jit(*args)
  return out.numpy()

if __name__ == "__main__": print(reference())
