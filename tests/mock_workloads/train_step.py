"""A training step on one device: a tiny MLP (two Linear layers) trained with SGD under TinyJit, called 4 times with
new batches (tinygrad's examples style: `Context(TRAINING=1)`, `optim.zero_grad()`, `loss.backward()`, `optim.step()`)."""
import sys
import numpy as np
from tinygrad import Tensor, TinyJit, Context, nn

class MLP:
  def __init__(self):
    self.l1, self.l2 = nn.Linear(8, 16), nn.Linear(16, 4)
  def __call__(self, x): return self.l2(self.l1(x).relu())

Tensor.manual_seed(0)
model = MLP()
opt = nn.optim.SGD(nn.state.get_parameters(model), lr=0.1)

@TinyJit
def step(x, y):
  with Context(TRAINING=1):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean().backward()
    opt.step()
    return loss.realize()

rng = np.random.default_rng(0)
for i in range(4):
  x, y = rng.standard_normal((4, 8), dtype=np.float32), rng.standard_normal((4, 4), dtype=np.float32)
  loss = step(Tensor(x).realize(), Tensor(y).realize()).numpy()
w = model.l1.weight.numpy()
if len(sys.argv) > 1: np.save(sys.argv[1], w)
