"""An MLP forward and backward step with an SGD update. Runs under plain tinygrad."""
import numpy as np
from tinygrad import Tensor, Device, nn
from tinygrad.helpers import Context

def main():
  rng = np.random.default_rng(1)
  dev = Device.DEFAULT
  x = Tensor(rng.standard_normal((4, 8), dtype=np.float32), device=dev)
  y = Tensor(rng.integers(0, 3, (4,), dtype=np.int32), device=dev)
  w1 = Tensor(rng.standard_normal((8, 16), dtype=np.float32) * 0.3, device=dev)
  w2 = Tensor(rng.standard_normal((16, 3), dtype=np.float32) * 0.3, device=dev)
  opt = nn.optim.SGD([w1, w2], lr=0.1, momentum=0.9)
  with Context(TRAINING=1):
    loss = (x @ w1).relu().matmul(w2).sparse_categorical_crossentropy(y)
    opt.zero_grad()
    loss.backward()
    return [loss] + opt.schedule_step()

if __name__ == "__main__":
  for t in main(): print(t.numpy())
