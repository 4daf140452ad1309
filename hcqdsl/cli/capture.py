"""`hcqdsl capture SCRIPT.py[:FN]`: run a tinygrad script and record what it submits as a manifest."""
from __future__ import annotations
import argparse, pathlib, sys
from ..lift.capture import Capture
from ..tinygrad.script import split_script, run_script

NO_DEVICE = ("no AMD queue was submitted to: run the script on tinygrad's AMD runtime — an AMD GPU, or tinygrad's mock "
             "GPU with DEV=MOCKKFD+AMD and a tinygrad checkout on PYTHONPATH (docs/lift.md)")
def add_args(p) -> None:
  p.add_argument("script", help="SCRIPT.py (run as __main__) or SCRIPT.py:FN (import it, then call FN())")
  p.add_argument("-o", "--output", metavar="FILE", help="the manifest (default: SCRIPT.capture.json); give it before SCRIPT")
  p.add_argument("args", nargs=argparse.REMAINDER, help="everything after SCRIPT goes to the script (sys.argv[1:])")

def run(a) -> int:
  path, fn = split_script(a.script)
  script = pathlib.Path(path)
  if not script.is_file():
    sys.stderr.write(f"hcqdsl: error: {path}: no such file\n"); return 2
  out = a.output or str(script.with_suffix(".capture.json"))
  cap = Capture()
  args = list(a.args)[1:] if list(a.args)[:1] == ["--"] else list(a.args)
  rc, err = run_script(script, fn, args, cap)
  if err: sys.stderr.write(err + "\n")
  try: cap.save(out)
  except OSError as e:
    sys.stderr.write(f"hcqdsl: error: {out}: {e.strerror or e}\n"); return 2
  subs = cap.submissions()
  if subs == 0 and rc == 0:
    sys.stderr.write(f"hcqdsl: error: {path}: {NO_DEVICE}\n"); return 2
  sys.stderr.write(f"wrote {out}: {subs} submission{'s' * (subs != 1)} on {len(cap.rings)} queue{'s' * (len(cap.rings) != 1)}, "
                   f"{len(cap.host) - subs} host step{'s' * (len(cap.host) - subs != 1)}\n")
  return rc
