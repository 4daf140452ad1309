"""`hcqdsl capture SCRIPT.py[:FN]`: run a tinygrad script and record what it submits as a manifest."""
from __future__ import annotations
import argparse, pathlib, runpy, sys
from ..lift.capture import Capture
from ..tinygrad.script import script_line


def add_args(p) -> None:
  p.add_argument("script", help="SCRIPT.py (run as __main__) or SCRIPT.py:FN (import it, then call FN())")
  p.add_argument("-o", "--output", metavar="FILE", help="the manifest (default: SCRIPT.capture.json); give it before SCRIPT")
  p.add_argument("args", nargs=argparse.REMAINDER, help="everything after SCRIPT goes to the script (sys.argv[1:])")

def run(a) -> int:
  path, _, fn = a.script.rpartition(":")
  if not fn.isidentifier() or not path: path, fn = a.script, ""
  script = pathlib.Path(path)
  if not script.is_file():
    sys.stderr.write(f"hcqdsl: error: {path}: no such file\n"); return 2
  out = a.output or str(script.with_suffix(".capture.json"))
  rc, cap = 0, Capture()
  args = list(a.args)[1:] if list(a.args)[:1] == ["--"] else list(a.args)
  argv, sys.argv = sys.argv, [str(script)] + args
  sys.path.insert(0, str(script.parent.resolve()))
  try:
    with cap:
      g = runpy.run_path(str(script), run_name="__main__" if not fn else "__hcqdsl_capture__")
      if fn:
        if not callable(g.get(fn)): raise LookupError(f"{path} defines no function `{fn}`")
        g[fn]()
  except SystemExit as e: rc = 0 if e.code in (None, 0) else 1
  except Exception as e:
    where = script_line(e, path) or f"{path}: "
    sys.stderr.write(f"hcqdsl: error: {where}{type(e).__name__}: {e}\n"); rc = 1
  finally:
    sys.argv = argv
    if str(script.parent.resolve()) in sys.path: sys.path.remove(str(script.parent.resolve()))
  try: cap.save(out)
  except OSError as e:
    sys.stderr.write(f"hcqdsl: error: {out}: {e.strerror or e}\n"); return 2
  subs = sum(h["op"] == "submit" for h in cap.host)
  sys.stderr.write(f"wrote {out}: {subs} submission{'s' * (subs != 1)} on {len(cap.rings)} queue{'s' * (len(cap.rings) != 1)}, "
                   f"{len(cap.host) - subs} host step{'s' * (len(cap.host) - subs != 1)}\n")
  return rc
