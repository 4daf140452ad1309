"""tinygrad's stale JIT copy (docs/findings/stale-jit-copy.md): a TinyJit step whose copy reads a view of its input.
Prints each call's first values as JSON. With HCQDSL_FIX=1 the proposed fix is applied first (by monkeypatch).
`jit_calls` is the same step for `hcqdsl emit` (what the step means, on tinygrad's CPU devices)."""
import json, os, sys
import numpy as np
from tinygrad import Tensor, TinyJit, Device

def apply_fix():
  """GraphRunner lists an argument for input replacement only when its uop is the PARAM itself; a view of one (a SHRINK
  or BITCAST of the PARAM, as `a[:8]` is) keeps the address it was captured with. The fix lists views too, with the
  view's byte offset into the input (0 here; HCQGraph then needs `HCQBuffer(var + offset, size)`)."""
  from tinygrad.engine import jit
  from tinygrad.engine.realize import get_call_arg_uops, resolve_params, unwrap_multi
  from tinygrad.uop.ops import Ops
  orig = jit.GraphRunner.__init__
  def init(self, linear, input_uops=()):
    orig(self, linear, input_uops)
    replace = []
    for call in self.linear.src:
      slots = [next((u.arg.slot for u in b.toposort() if u.op is Ops.PARAM), None) for b in get_call_arg_uops(call)]
      row = [(p, s) for p, s in enumerate(slots) if s is not None]
      offsets = [b.buffer.offset if hasattr(b.buffer, "offset") else 0 for b in resolve_params(call, input_uops)]
      assert all(offsets[p] == 0 for p, _ in row), "a view at a non-zero offset also needs HCQBuffer(var + offset)"
      replace += [row] * sum(1 for _ in unwrap_multi(call, resolve_params(call, input_uops)))
    self.uop_replace = replace
  jit.GraphRunner.__init__ = init

def step_and_inputs(calls: int = 5):
  """The TinyJit step and its calls' inputs (device 0's tensor of 16 floats, new memory every call)."""
  d0, d1 = Device.DEFAULT, f"{Device.DEFAULT}:1"
  @TinyJit
  def step(a): return (a[:8].contiguous().to(d1) + 1).realize()
  return step, (Tensor(np.arange(16, dtype=np.float32) + 100 * i, device=d0).realize() for i in range(calls))

def jit_calls(calls: int = 5):
  step, inputs = step_and_inputs(calls)
  return step, [(a,) for a in inputs]

def main(calls: int = 5):
  if os.environ.get("HCQDSL_FIX") == "1": apply_fix()
  step, inputs = step_and_inputs(calls)
  return [step(a).numpy()[:3].tolist() for a in inputs]

if __name__ == "__main__":   # ARG: the number of calls, or where to save the last call's first values (.npy; 5 calls)
  arg = sys.argv[1] if len(sys.argv) > 1 else "5"
  out = main(5 if arg.endswith(".npy") else int(arg))
  if arg.endswith(".npy"): np.save(arg, np.array(out[-1], np.float32))
  print(json.dumps(out))
