"""tinygrad's stale JIT copy (docs/findings/stale-jit-copy.md): a TinyJit step whose copy reads a view of its input.
Prints each call's first values as JSON. With HCQDSL_FIX=1 the proposed fix is applied first (by monkeypatch).
`jit_calls` is the same step for `hcqdsl emit` (what the step means, on tinygrad's CPU devices)."""
import json, os, sys
import numpy as np
from tinygrad import Tensor, TinyJit, Device

def apply_fix():
  """GraphRunner lists an argument for input replacement only when its uop is the PARAM itself; a view of one (a SHRINK
  or BITCAST of the PARAM, as `a[:8]` is) keeps the address it was captured with. The fix lists views too, with the
  view's byte offset into the input (0 here; HCQGraph then needs `HCQBuffer(var + offset, size)`). A shard of a
  sharded input (MSELECT of the PARAM, alone or as one device's part of an MSTACK: what an all-reduce of a JIT input
  reads) is the input's buffer on the shard's device: HCQGraph takes `bufs[dev_idx]` with the call's device index, so
  that call's index becomes the shard's."""
  from tinygrad.engine import jit
  from tinygrad.engine.realize import get_call_arg_uops, resolve_params, unwrap_multi
  from tinygrad.uop.ops import Ops
  def input_of(b, d: int):
    """(slot, shard or None) when call argument b is, on the call's d-th device, (a view of) a JIT input."""
    if b.op is Ops.MSTACK: b = b.src[d]
    if b.op is Ops.MSELECT and b.src[0].op is Ops.PARAM: return b.src[0].arg.slot, b.arg
    slot = next((u.arg.slot for u in b.toposort() if u.op is Ops.PARAM), None)
    return None if slot is None else (slot, None)
  orig = jit.GraphRunner.__init__
  def init(self, linear, input_uops=()):
    orig(self, linear, input_uops)
    replace, calls, j = [], list(self.calls), 0
    for call in self.linear.src:
      args = get_call_arg_uops(call)
      offsets = [b.buffer.offset if hasattr(b.buffer, "offset") else 0 for b in resolve_params(call, input_uops)]
      for d, _ in enumerate(unwrap_multi(call, resolve_params(call, input_uops))):
        found = [(p, x) for p, b in enumerate(args) if (x := input_of(b, d)) is not None]
        assert all(offsets[p] == 0 for p, _ in found), "a view at a non-zero offset also needs HCQBuffer(var + offset)"
        shards = {x[1] for _, x in found if x[1] is not None}
        assert len(shards) <= 1, "a call reading several shards of inputs needs a shard index per argument"
        if shards: calls[j] = (shards.pop(),) + tuple(calls[j][1:])
        replace.append([(p, x[0]) for p, x in found]); j += 1
    self.uop_replace, self.calls = replace, calls
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
