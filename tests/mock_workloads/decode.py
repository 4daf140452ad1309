"""A decode step with a symbolic start_pos (tinygrad's llama style): a KV cache written at start_pos, read up to it."""
import sys
import numpy as np
from tinygrad import Tensor, TinyJit, Variable

cache = Tensor.zeros(8, 4).contiguous().realize()

@TinyJit
def decode(tok, start_pos):
  cache[start_pos:start_pos + 1].assign(tok).realize()
  return cache[0:start_pos + 1].sum(0).contiguous()

for pos in range(4):
  v = Variable("start_pos", 0, 7).bind(pos)
  out = decode(Tensor([[float(pos + 1)] * 4]).realize(), v).numpy()
if len(sys.argv) > 1: np.save(sys.argv[1], out)
