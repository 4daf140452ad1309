"""A user's tinygrad script: loading its function, calling it, and one line (the script's own line) for what it raised.
Used by `hcqdsl emit`, `capture` and `sanitize`."""
from __future__ import annotations
import importlib.util, inspect, pathlib, runpy, sys, traceback
from typing import Optional
from .env import EmitError, tinygrad

__all__ = ["load_function", "call_script", "script_error", "script_line", "split_script", "run_script"]

def script_line(e: BaseException, path: str) -> str:
  """`path:LINE: ` for the innermost frame of `e`'s traceback in the script at `path`, else ''."""
  p = pathlib.Path(path).resolve()
  frames = [f for f in traceback.extract_tb(e.__traceback__) if pathlib.Path(f.filename).resolve() == p]
  return f"{path}:{frames[-1].lineno}: " if frames else ""

def script_error(e: BaseException, spec: str, what: str = "the script failed") -> EmitError:
  """One line for an exception out of the user's script (or tinygrad under it): the script's innermost line, then the
  exception, instead of tinygrad's traceback."""
  msg = str(e).strip().splitlines()
  return EmitError(f"{script_line(e, spec.partition(':')[0])}{what}: {type(e).__name__}" + (f": {msg[-1]}" if msg else ""))

def load_function(spec: str, default: str = "main"):
  """SCRIPT.py[:FN] -> the function (default `main`), the script imported with its directory on sys.path."""
  path, _, fname = spec.partition(":")
  p = pathlib.Path(path)
  if not p.is_file(): raise EmitError(f"{path}: no such file")
  tinygrad()  # before the script makes its first tensor
  mspec = importlib.util.spec_from_file_location(f"_hcq_emit_{p.stem}", p)
  mod = importlib.util.module_from_spec(mspec)
  sys.path.insert(0, str(p.parent.resolve()))
  try: mspec.loader.exec_module(mod)
  except Exception as e: raise script_error(e, spec, "importing the script failed") from None
  finally: sys.path.pop(0)
  fname = fname or default
  fn = getattr(mod, fname, None)
  if not callable(fn): raise EmitError(f"{path}: no function `{fname}`")
  return fn

def call_script(fn, devices: Optional[int] = None) -> tuple:
  """fn(), with `devices=N` when given and fn takes it; the result as a tuple."""
  kw = {}
  if devices is not None and "devices" in inspect.signature(fn).parameters: kw["devices"] = devices
  out = fn(**kw)
  return out if isinstance(out, (tuple, list)) else (out,)

OWN = str(pathlib.Path(__file__).resolve().parents[1])   # hcqdsl's own files
PASS_THROUGH = {"wrapped", "init", "fset", "get_runtime", "run_linear", "exec_kernel", "_exec_copy", "_wait_signal", "synchronize",
                "_emulate_execute"}  # the recorder's and the sanitizer's wrappers: they call tinygrad's own method

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
    return 1, f"hcqdsl: error: {script_line(e, str(script)) or f'{script}: '}{type(e).__name__}: {e}"
  finally:
    sys.argv = argv
    if where in sys.path: sys.path.remove(where)
  return 0, None
