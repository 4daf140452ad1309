"""A GPT-2-style decoder as tinygrad's examples/gpt2.py writes it: the KV cache of each attention layer is created by
the first call (`if not hasattr(self, "cache_kv")`), the position is a bound Variable, and decoding is greedy: the
JIT returns the argmax token and the next call's input is that token, read back on the host (gpt2.py's `.item()`).
`hcqdsl emit examples/tinygrad/gpt2_decode.py -o d.hcq` emits it (call 1 eager, calls 2.. the launches);
`main(layers=8, dim=512)` is the 25M-parameter size of benchmarks/emit.py, `layers=12, dim=768, vocab=50257` GPT-2
small's (124M parameters)."""
import numpy as np
from tinygrad import Tensor, Variable, TinyJit

MAX_CTX, VOCAB, STEPS = 16, 64, 6   # GPT-2's vocabulary is 50257

class Attention:
  def __init__(self, dim, heads, rng):
    self.c_attn, self.c_proj, self.heads, self.head_dim = _w(rng, dim, 3 * dim), _w(rng, dim, dim), heads, dim // heads
  def __call__(self, x: Tensor, start_pos) -> Tensor:
    xqkv = x @ self.c_attn
    hd = self.heads * self.head_dim
    xq, xk, xv = [xqkv[:, :, i * hd:(i + 1) * hd].reshape(1, 1, self.heads, self.head_dim) for i in range(3)]
    if not hasattr(self, "cache_kv"):   # created by the first call, as gpt2.py does
      self.cache_kv = Tensor.zeros(2, 1, MAX_CTX, self.heads, self.head_dim).contiguous().realize()
    self.cache_kv[:, :, start_pos:start_pos + 1, :, :].assign(Tensor.stack(xk, xv)).realize()
    keys, values = self.cache_kv[0, :, 0:start_pos + 1], self.cache_kv[1, :, 0:start_pos + 1]
    xq, keys, values = xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)
    return xq.scaled_dot_product_attention(keys, values).transpose(1, 2).reshape(1, 1, -1) @ self.c_proj

class Block:
  def __init__(self, dim, heads, rng):
    self.attn, self.fc, self.proj = Attention(dim, heads, rng), _w(rng, dim, 4 * dim), _w(rng, 4 * dim, dim)
  def __call__(self, x, start_pos):
    h = x + self.attn(x.layernorm(), start_pos)
    return h + (h.layernorm() @ self.fc).gelu() @ self.proj

class Transformer:
  def __init__(self, layers, dim, heads, rng, vocab=VOCAB):
    self.wte, self.wpe = _w(rng, vocab, dim), _w(rng, MAX_CTX, dim)
    self.blocks = [Block(dim, heads, rng) for _ in range(layers)]   # the head is tied to wte, as GPT-2's
  def __call__(self, tok: Tensor, start_pos) -> Tensor:
    x = self.wte[tok].reshape(1, 1, -1) + self.wpe[start_pos].reshape(1, 1, -1)
    for b in self.blocks: x = b(x, start_pos)
    return (x.layernorm() @ self.wte.T).argmax(-1).reshape(1).realize()   # greedy: the next token

def _w(rng, *shape): return Tensor((rng.standard_normal(shape, dtype=np.float32) * 0.5 / np.sqrt(shape[0])).astype(np.float32)).realize()

def main(seed: int = 0, steps: int = STEPS, layers: int = 2, dim: int = 32, heads: int = 4, vocab: int = VOCAB):
  model = Transformer(layers, dim, heads, np.random.default_rng(seed), vocab)
  pos, last = Variable("start_pos", 0, MAX_CTX - 1), {}
  def jitted(tok, p):
    last["tok"] = model(tok, p)
    return last["tok"]
  def calls():   # the next token is the last call's output, read back as gpt2.py does (`.item()`)
    tok = 1
    for k in range(steps):
      yield (Tensor([tok]).realize(), pos.bind(k))
      tok = int(last["tok"].item())
  return TinyJit(jitted), calls()

def step(seed: int = 0, layers: int = 2, dim: int = 32, heads: int = 4, vocab: int = VOCAB):
  """One decode step without a TinyJit, as gpt2.py runs a prompt's first token: the forward realizes its own result
  (the KV cache write, the argmax), so `hcqdsl emit gpt2_decode.py:step` emits what that one call realized."""
  model = Transformer(layers, dim, heads, np.random.default_rng(seed), vocab)
  return model(Tensor([1]).realize(), Variable("start_pos", 0, MAX_CTX - 1).bind(0))

def reference(seed: int = 0, steps: int = STEPS, **kw):
  """tinygrad's own TinyJit over the same calls: the tokens it decodes."""
  jit, calls = main(seed, steps, **kw)
  return [int(jit(*args).item()) for args in calls]

if __name__ == "__main__": print(reference())
