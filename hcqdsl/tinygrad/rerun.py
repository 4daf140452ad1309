"""One more run of a user's tinygrad script for `sanitize --confirm`, in a process of its own (tinygrad, its caches and
the mock GPU start fresh, as they did for the sanitized run):

  python -m hcqdsl.tinygrad.rerun SPEC.json OUT.json

SPEC: {"script", "fn", "args", "orders": [{"held": Place, "until": Place}, ...]}. The script runs as the sanitizer ran
it, with Python's, numpy's legacy and tinygrad's random seeds fixed (two runs compute the same numbers), what it reads
back recorded (readback.py), and the orders forced on the mock GPU (mock_order.py). OUT: {"rc", "error", "reads",
"final", "hold": {"orders": [{"ran", "reached", "infeasible"}, ...], "wrong"}}."""
from __future__ import annotations
import contextlib, json, os, pathlib, random, sys

__all__ = ["main"]

def _seeds() -> None:
  random.seed(0)
  try:
    import numpy as np
    np.random.seed(0)
  except ImportError: pass
  from tinygrad import Tensor
  Tensor.manual_seed(0)   # (tinygrad's default seed is the time: two runs would draw different numbers)

def main(argv: list) -> int:
  spec = json.loads(pathlib.Path(argv[0]).read_text())
  out_path = pathlib.Path(argv[1])
  from .script import run_script
  from .readback import ReadBack
  _seeds()
  hold = None
  out: dict = {"rc": None, "error": None, "reads": [], "final": [], "hold": None}
  try:
    if spec.get("orders"):
      from .mock_order import Hold, Place
      from tinygrad import Device
      Device[Device.DEFAULT]   # opens the device: tinygrad imports its mock GPU then
      hold = Hold([(Place(**o["held"]), Place(**o["until"])) for o in spec["orders"]]).install()
    rb = ReadBack().install()
    try: rc, err = run_script(pathlib.Path(spec["script"]), spec.get("fn") or "", list(spec.get("args") or []), contextlib.nullcontext())
    finally:
      if hold is not None: hold.restore()
    rb.finish()
    rb.restore()
    out.update(rc=rc, error=err, **rb.to_json())
    if hold is not None:
      out["hold"] = {"orders": [o.to_json() for o in hold.orders], "wrong": hold.wrong}
  except Exception as e:   # hcqdsl's own failure here: the caller reports the confirmation as not tried, with this
    out["failure"] = f"{type(e).__name__}: {e}"
  tmp = out_path.with_suffix(".tmp")
  tmp.write_text(json.dumps(out))
  os.replace(tmp, out_path)
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(0)   # tinygrad's finalizers would synchronize devices the run may have left held

if __name__ == "__main__": main(sys.argv[1:])
