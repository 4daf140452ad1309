"""A data-parallel CNN train step as tinygrad's examples/beautiful_mnist_multigpu.py writes it: conv + BatchNorm +
linear, Adam, the weights replicated on 2 devices and each batch sharded over them, the batch drawn inside the JIT
(`Tensor.randint`), Adam's moments and step counters and BatchNorm's running statistics created and first written
by call 1. `hcqdsl emit examples/tinygrad/cnn_train.py -o t.hcq` emits it (call 1 eager, calls 2.. the launches);
`python examples/tinygrad/cnn_train.py` runs it under plain tinygrad."""
import numpy as np
from tinygrad import Tensor, TinyJit, Device, Context, nn
from tinygrad.nn.state import get_parameters

SAMPLES, BS, STEPS = 64, 16, 4

class Model:
  def __init__(self):
    self.c1, self.bn, self.l1 = nn.Conv2d(1, 4, 3), nn.BatchNorm(4), nn.Linear(4 * 3 * 3, 10)
  def __call__(self, x: Tensor) -> Tensor:
    return self.l1(self.bn(self.c1(x)).relu().max_pool2d((2, 2)).flatten(1))

def main(seed: int = 0, steps: int = STEPS, devices: int = 2):
  gpus = tuple(f"{Device.DEFAULT}:{i}" for i in range(devices))
  Tensor.manual_seed(seed)
  rng = np.random.default_rng(seed)
  X_train = Tensor(rng.standard_normal((SAMPLES, 1, 8, 8), dtype=np.float32))
  Y_train = Tensor(rng.integers(0, 10, SAMPLES, dtype=np.int32))
  model = Model()
  for k, x in nn.state.get_state_dict(model).items():
    x.realize().to_(gpus)   # the weights and BatchNorm's statistics on every device
  opt = nn.optim.Adam(get_parameters(model), lr=1e-2)

  @TinyJit
  def train_step() -> Tensor:
    with Context(TRAINING=1):
      opt.zero_grad()
      samples = Tensor.randint(BS, high=SAMPLES)
      Xt, Yt = X_train[samples].shard_(gpus, axis=0), Y_train[samples].shard_(gpus, axis=0)   # the batch split over the devices
      loss = model(Xt).sparse_categorical_crossentropy(Yt).backward()
      opt.step()
      return loss.realize()

  return train_step, [()] * steps

def reference(seed: int = 0, steps: int = STEPS, devices: int = 2):
  """tinygrad's own TinyJit over the same calls: the loss after the last call."""
  jit, calls = main(seed, steps, devices)
  for args in calls: loss = jit(*args)
  return loss.numpy()

if __name__ == "__main__": print(reference())
