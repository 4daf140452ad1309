"""`hcqdsl capture SCRIPT.py[:FN]`: run a tinygrad script and record what it submits as a manifest."""
from __future__ import annotations
import os, sys
from ..tinygrad.capture import Capture
from ..tinygrad.script import run_script
from .util import add_script_args, script_of, check_output

NO_DEVICE = ("no AMD or NV queue was submitted to: run the script on tinygrad's AMD or NV runtime — an AMD or NVIDIA GPU, "
             "or tinygrad's mock GPUs (DEV=MOCKKFD+AMD, DEV=MOCK+NV) with a tinygrad checkout on PYTHONPATH (docs/lift.md, docs/nv.md)")

def add_args(p) -> None:
  add_script_args(p, [(("-o", "--output"), dict(metavar="FILE", help="the manifest (default: SCRIPT.capture.json)"))])

def run(a) -> int:
  script, fn, args = script_of(a)
  path = str(script)
  out = a.output or str(script.with_suffix(".capture.json"))
  check_output(out, "-o", script)
  target = os.path.abspath(out)   # resolved before the script runs: it may change the working directory
  cap = Capture()
  def finish(rc: int, err) -> int:   # also when the script calls os._exit: what was captured is written
    for w in cap.warnings(): sys.stderr.write(f"hcqdsl: warning: {w}\n")
    if err: sys.stderr.write(err + "\n")
    try: cap.save(target)
    except OSError as e:
      sys.stderr.write(f"hcqdsl: error: {out}: {e.strerror or e}\n")
      return 2
    subs = cap.submissions()
    if subs == 0 and rc == 0:
      sys.stderr.write(f"hcqdsl: error: {path}: {NO_DEVICE}\n")
      return 2
    sys.stderr.write(f"wrote {out}: {subs} submission{'s' * (subs != 1)} on {len(cap.rings)} queue{'s' * (len(cap.rings) != 1)}, "
                     f"{len(cap.host) - subs} host step{'s' * (len(cap.host) - subs != 1)}\n")
    return rc
  return run_script(script, fn, args, cap, finish)
