"""TinyJit with a graph: a call argument that is a *view* of a JIT input keeps the captured call's address.

GraphRunner lists an argument for input replacement only when its uop is the PARAM itself. A view of an input - a slice
(SHRINK of the PARAM: `a[:8]` as a COPY source), one device's part of an input stacked with its copies (MSTACK: the
tensor-parallel `x.to(devices) @ W_sharded`, the kernel on the input's device reads the input in place), a shard of a
sharded input (MSELECT: an all-reduce of a JIT input) - is baked into the graph with the captured buffer's address, so
every replay reads the input of the call the JIT captured (the graph keeps that buffer alive). Call 0 runs eagerly,
call 1 is captured, calls 2.. replay the graph and are wrong. With JIT=2 (no graph) every call is right.

Standalone: needs only tinygrad; drop it into tinygrad's test/ and run it on a device with a multi-device graph, e.g.
tinygrad's mock GPU:  DEV=MOCKKFD+AMD python -m pytest test/test_jit_input_view.py  (needs 4 devices of the default
type). Each test compares every call with numpy and fails naming the call, the values it got and the ones expected."""
import unittest
import numpy as np
from tinygrad import Tensor, TinyJit, Device

CALLS = 4

def _devices(n):
  try: return tuple(Device[f"{Device.DEFAULT}:{i}"].device for i in range(n))
  except Exception: return None

@unittest.skipIf(_devices(4) is None, f"needs 4 {Device.DEFAULT} devices")
class TestJitInputView(unittest.TestCase):
  def setUp(self):
    self.devs = _devices(4)
    self.rng = np.random.default_rng(0)

  def _check(self, step, inputs, reference):
    for i, xn in enumerate(inputs):
      got, want = step(xn).numpy(), reference(xn)
      bad = ~np.isclose(got, want, atol=1e-4, rtol=1e-4)
      if bad.any(): self.fail(f"call {i}: {bad.sum()} of {bad.size} values wrong, first at {np.argwhere(bad)[0].tolist()}: got {got[bad][:4]}, "
                              f"want {want[bad][:4]} (the graph reads the captured call's input)")

  def test_copy_of_slice(self):
    # COPY src is SHRINK(PARAM) at byte offset 0
    @TinyJit
    def step(a): return (a[:8].contiguous().to(self.devs[1]) + 1).realize()
    self._check(lambda an: step(Tensor(an, device=self.devs[0]).realize()),
                [np.arange(16, dtype=np.float32) + 100 * i for i in range(CALLS)], lambda an: an[:8] + 1)

  def test_copy_of_offset_slice(self):
    # COPY src is SHRINK(PARAM) at byte offset 32: the replacement must keep the offset
    @TinyJit
    def step(a): return (a[8:].contiguous().to(self.devs[1]) + 1).realize()
    self._check(lambda an: step(Tensor(an, device=self.devs[0]).realize()),
                [np.arange(16, dtype=np.float32) + 100 * i for i in range(CALLS)], lambda an: an[8:] + 1)

  def test_tensor_parallel_matmul(self):
    # x.to(devs) is MSTACK(PARAM, copy, copy, copy): the kernel on device 0 reads the input in place
    wn = self.rng.standard_normal((8, 32), dtype=np.float32)
    W = Tensor(wn).shard(self.devs, axis=1).realize()
    @TinyJit
    def step(x): return (x.to(self.devs) @ W).realize()
    self._check(lambda xn: step(Tensor(xn, device=self.devs[0]).realize()),
                [np.arange(16, dtype=np.float32).reshape(2, 8) / 16 - i for i in range(CALLS)], lambda xn: xn @ wn)

  def test_tensor_parallel_matmul_input_on_other_device(self):
    # the input is the MSTACK's part on device 2: the kernel on device 2 reads it in place
    wn = self.rng.standard_normal((8, 32), dtype=np.float32)
    W = Tensor(wn).shard(self.devs, axis=1).realize()
    @TinyJit
    def step(x): return (x.to(self.devs) @ W).realize()
    self._check(lambda xn: step(Tensor(xn, device=self.devs[2]).realize()),
                [np.arange(16, dtype=np.float32).reshape(2, 8) / 16 - i for i in range(CALLS)], lambda xn: xn @ wn)

  def test_tensor_parallel_matmul_of_slice(self):
    # MSTACK(SHRINK(PARAM), ...): device 0's part is a view at byte offset 32
    wn = self.rng.standard_normal((8, 32), dtype=np.float32)
    W = Tensor(wn).shard(self.devs, axis=1).realize()
    @TinyJit
    def step(x): return (x[1:].to(self.devs) @ W).realize()
    self._check(lambda xn: step(Tensor(xn, device=self.devs[0]).realize()),
                [np.arange(24, dtype=np.float32).reshape(3, 8) / 16 - i for i in range(CALLS)], lambda xn: xn[1:] @ wn)

  def test_allreduce_of_sharded_input(self):
    # each shard (MSELECT(PARAM)) is copied to the other devices and read in place by its device's reduce kernel
    @TinyJit
    def step(x): return x.sum(0).contiguous().realize()
    self._check(lambda xn: step(Tensor(xn).shard(self.devs, axis=0).realize()),
                [np.arange(4 * 16, dtype=np.float32).reshape(4, 16) + 100 * i for i in range(CALLS)], lambda xn: xn.sum(0))

if __name__ == "__main__":
  unittest.main()
