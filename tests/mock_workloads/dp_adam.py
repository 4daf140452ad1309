"""A data-parallel MLP + Adam step over NDEV (default 4) GPUs (tinygrad's beautiful_mnist_multigpu style): the weights
replicated on every device, each batch sharded over them, the gradients all-reduced, Adam's state from call 1; a
TinyJit called CALLS (default 5) times with a new batch. Saves the first layer's weights (device 0's copy) after the
last call."""
import os, sys
import numpy as np
from tinygrad import Tensor, TinyJit, Device, Context, nn
from tinygrad.nn.state import get_parameters

NDEV, CALLS = int(os.environ.get("NDEV", 4)), int(os.environ.get("CALLS", 5))
devs = tuple(f"{Device.DEFAULT}:{i}" for i in range(NDEV))

class MLP:
  def __init__(self): self.l1, self.l2 = nn.Linear(8, 8), nn.Linear(8, 4)
  def __call__(self, x): return self.l2(self.l1(x).relu())

Tensor.manual_seed(0)
model = MLP()
for p in get_parameters(model): p.realize().to_(devs)
opt = nn.optim.Adam(get_parameters(model), lr=0.01)

@TinyJit
def step(x, y):
  with Context(TRAINING=1):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss.realize()

RSS_EVERY = int(os.environ.get("RSS_EVERY", 0))   # benchmarks/sanitize.py: the process's resident memory every N calls, on stderr
for i in range(CALLS):
  if RSS_EVERY and i % RSS_EVERY == 0:
    print(f"rss {i} {int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE') // 1024}", file=sys.stderr, flush=True)
  rng = np.random.default_rng(i)
  x = Tensor(rng.standard_normal((2 * NDEV, 8), dtype=np.float32)).shard(devs, axis=0).realize()
  y = Tensor(rng.standard_normal((2 * NDEV, 4), dtype=np.float32)).shard(devs, axis=0).realize()
  loss = step(x, y).numpy()
if len(sys.argv) > 1: np.save(sys.argv[1], model.l1.weight.numpy())
print("loss", float(loss))
