"""`hcqdsl capture SCRIPT.py[:FN]`: run a tinygrad script and record what it submits as a manifest."""
from __future__ import annotations
import argparse, pathlib, runpy, sys, traceback
from ..lift.capture import Capture

NO_DEVICE = ("no AMD queue was submitted to: run the script on tinygrad's AMD runtime — an AMD GPU, or tinygrad's mock "
             "GPU with DEV=MOCKKFD+AMD and a tinygrad checkout on PYTHONPATH (docs/lift.md)")
OWN = str(pathlib.Path(__file__).resolve().parents[1])
PASS_THROUGH = {"wrapped", "init", "fset", "get_runtime"}  # the recorder's wrappers: they call tinygrad's own method

def add_args(p) -> None:
  p.add_argument("script", help="SCRIPT.py (run as __main__) or SCRIPT.py:FN (import it, then call FN())")
  p.add_argument("-o", "--output", metavar="FILE", help="the manifest (default: SCRIPT.capture.json); give it before SCRIPT")
  p.add_argument("args", nargs=argparse.REMAINDER, help="everything after SCRIPT goes to the script (sys.argv[1:])")

def split_script(spec: str) -> tuple:
  path, _, fn = spec.rpartition(":")
  return (path, fn) if fn.isidentifier() and path else (spec, "")

def run_script(script: pathlib.Path, fn: str, args: list, recorder) -> tuple:
  """Run SCRIPT (as __main__, or import it and call FN) inside `recorder`. Returns (exit code, error line or None):
  the script's own failure names its line; a failure inside hcqdsl is reported as hcqdsl's, never as the script's."""
  argv, sys.argv = sys.argv, [str(script)] + args
  where = str(script.parent.resolve())
  sys.path.insert(0, where)
  try:
    with recorder:
      g = runpy.run_path(str(script), run_name="__main__" if not fn else "__hcqdsl_capture__")
      if fn:
        if not callable(g.get(fn)): raise LookupError(f"{script} defines no function `{fn}`")
        g[fn]()
  except SystemExit as e: return (0 if e.code in (None, 0) else 1), None
  except Exception as e:
    tb = traceback.extract_tb(e.__traceback__)
    for f in reversed(tb):  # the innermost frame that is the script's or hcqdsl's own (not a recording wrapper's)
      p = pathlib.Path(f.filename).resolve()
      if p == script.resolve(): break
      if str(p).startswith(OWN) and f.name not in PASS_THROUGH and not p.name == "__main__.py" and p.parent.name != "cli":
        return 3, f"hcqdsl: internal error (not in {script}): {type(e).__name__}: {e} at {p.parent.name}/{p.name}:{f.lineno}"
    frames = [f for f in tb if pathlib.Path(f.filename).resolve() == script.resolve()]
    at = f"{script}:{frames[-1].lineno}: " if frames else f"{script}: "
    return 1, f"hcqdsl: error: {at}{type(e).__name__}: {e}"
  finally:
    sys.argv = argv
    if where in sys.path: sys.path.remove(where)
  return 0, None

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
