"""A user's tinygrad script: loading its function, calling it, and one line (the script's own line) for what it raised.
Used by `hcqdsl emit` and `hcqdsl capture`."""
from __future__ import annotations
import importlib.util, inspect, pathlib, sys, traceback
from typing import Optional
from .env import EmitError, tinygrad

__all__ = ["load_function", "call_script", "script_error", "script_line"]

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
