"""hcq2 (HCQ2=1): a copy into device 1's memory, enqueued on device 0's copy queue, is not ordered after device 1's
earlier kernel that reads that memory (docs/findings/hcq2-cross-device-reuse.md, test_lagging_device_assign). Each
step reads t on device 1, then assigns t a new value copied from device 0. READ=0: the step's result is never read
(a race on a dead value)."""
import os
import numpy as np
from tinygrad import Tensor, Device

d0, d1 = Device.DEFAULT, f"{Device.DEFAULT}:1"
t = Tensor(np.zeros(16, np.float32), device=d1).contiguous().realize()
read = os.environ.get("READ", "1") == "1"
for it in range(3):
  src = Tensor(np.full(16, it + 1, np.float32), device=d0).contiguous().realize()
  out = (t * 2 + 1).realize()        # device 1 reads t
  t.assign(src.to(d1)).realize()     # t = it + 1, copied by device 0's copy queue
  if read: print(out.numpy()[:4])    # 2 * it + 1
  del out                            # (READ=0: a result nobody reads)
print(t.numpy()[:4])
