"""A small conv net with BatchNorm trained under TinyJit (tinygrad's beautiful_mnist style: Conv2d, BatchNorm,
max_pool2d, Linear, Adam, `Context(TRAINING=1)`), called CALLS (default 3) times with a new batch: call 1 runs eagerly,
call 2 is captured into an HCQGraph, later calls replay it. Asserts the loss is finite; saves the last loss."""
import os, sys
import numpy as np
from tinygrad import Tensor, TinyJit, Context, nn
from tinygrad.nn.state import get_parameters

CALLS = int(os.environ.get("CALLS", 3))

class Net:
  def __init__(self):
    self.c1, self.bn1 = nn.Conv2d(1, 4, 3), nn.BatchNorm(4)
    self.l1 = nn.Linear(4 * 3 * 3, 10)
  def __call__(self, x: Tensor) -> Tensor:
    x = self.bn1(self.c1(x)).relu().max_pool2d((2, 2))
    return self.l1(x.flatten(1))

Tensor.manual_seed(0)
model = Net()
opt = nn.optim.Adam(get_parameters(model), lr=1e-3)

@TinyJit
def train_step(x: Tensor, y: Tensor) -> Tensor:
  with Context(TRAINING=1):
    opt.zero_grad()
    loss = model(x).sparse_categorical_crossentropy(y).backward()
    opt.step()
    return loss.realize()

rng = np.random.default_rng(0)
for i in range(CALLS):
  x = Tensor(rng.standard_normal((4, 1, 8, 8)).astype(np.float32)).realize()
  y = Tensor(rng.integers(0, 10, 4).astype(np.int32)).realize()
  loss = train_step(x, y).item()
  assert np.isfinite(loss), loss
if len(sys.argv) > 1: np.save(sys.argv[1], np.array([loss], np.float32))
