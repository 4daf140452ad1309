"""tinygrad's stale JIT copy (docs/findings/stale-jit-copy.md): a TinyJit step whose copy reads a view of its input.
Prints each call's first values as JSON. With HCQDSL_FIX=1 docs/findings/stale-jit-copy.patch is applied first (in memory).
`jit_calls` is the same step for `hcqdsl emit` (what the step means, on tinygrad's CPU devices)."""
import json, os, pathlib, sys
import numpy as np
from tinygrad import Tensor, TinyJit, Device

def apply_fix():
  """docs/findings/stale-jit-copy.patch, applied to the imported tinygrad in memory (tests/upstream/tinygrad_patch.py):
  GraphRunner lists for input replacement every call argument that is an input or a view of one (a slice, a shard, one
  device's part of an MSTACK), with the shard and byte offset it is at; HCQGraph replaces it with that view of each
  call's input."""
  root = pathlib.Path(__file__).resolve().parents[2]
  sys.path.insert(0, str(root / "tests" / "upstream"))
  import tinygrad_patch
  tinygrad_patch.apply(root / "docs" / "findings" / "stale-jit-copy.patch")

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
