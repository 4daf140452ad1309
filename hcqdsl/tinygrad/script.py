"""A user's tinygrad script: loading its function, calling it, and one line (the script's own line) for what it raised.
Used by `hcqdsl emit`, `capture` and `sanitize`."""
from __future__ import annotations
import importlib.util, inspect, pathlib, runpy, sys, traceback
from typing import Optional
from .env import EmitError, tinygrad

__all__ = ["load_function", "call_script", "script_error", "script_line", "split_script", "run_script", "ScriptFailed",
           "check_script", "exit_error"]

# Exit codes, the same in emit, capture and sanitize: a script that cannot be loaded (no such file, not valid Python:
# a syntax error, NUL bytes, UTF-16, no function FN) is unusable input, 2; a script that fails when it runs (an
# exception, any BaseException, a non-zero sys.exit) is the script's failure, 1 (a KeyboardInterrupt: 130), its own
# line named; a failure inside hcqdsl is hcqdsl's own, 3 (capture and sanitize; never the script's line).

class ScriptFailed(EmitError):
  """The script ran and failed: `rc` is the exit code (1; 130 for a KeyboardInterrupt)."""
  def __init__(self, message: str, rc: int = 1):
    super().__init__(message)
    self.rc = rc

def check_script(path) -> None:
  """EmitError `PATH:LINE:COLUMN: ...` when the file at `path` is not a Python script (a syntax error, NUL bytes,
  UTF-16 or other text Python cannot read): found before it runs, so that it is never the script's failure."""
  try: b = pathlib.Path(path).read_bytes()
  except OSError as e: raise EmitError(f"{path}: {e.strerror or e}") from None
  if b[:2] in (b"\xff\xfe", b"\xfe\xff"): raise EmitError(f"{path}:1:1: not a Python script: UTF-16 text (Python reads UTF-8)")
  if (i := b.find(b"\0")) >= 0:
    line, col = b.count(b"\n", 0, i) + 1, len(b[b.rfind(b"\n", 0, i) + 1:i].decode("utf-8", errors="replace")) + 1
    raise EmitError(f"{path}:{line}:{col}: not a Python script: a NUL byte")
  try: compile(b, str(path), "exec", dont_inherit=True)
  except SyntaxError as e:
    raise EmitError(f"{path}:{e.lineno or 1}:{e.offset or 1}: not a Python script: {type(e).__name__}: {e.msg}") from None
  except (ValueError, MemoryError, RecursionError) as e:
    raise EmitError(f"{path}:1:1: not a Python script: {type(e).__name__}: {e}") from None

def exit_error(e: SystemExit, path: str) -> str:
  """What a script's sys.exit says: its line (else its path), then its status (or its message)."""
  what = f"the script exited with status {e.code}" if e.code is None or isinstance(e.code, int) else f"the script exited: {e.code}"
  return f"{script_line(e, path) or f'{path}: '}{what}"

def script_line(e: BaseException, path: str) -> str:
  """`path:LINE: ` for the innermost frame of `e`'s traceback in the script at `path`, else ''."""
  p = pathlib.Path(path).resolve()
  frames = [f for f in traceback.extract_tb(e.__traceback__) if pathlib.Path(f.filename).resolve() == p]
  return f"{path}:{frames[-1].lineno}: " if frames else ""

def script_error(e: BaseException, spec: str, what: str = "the script failed") -> EmitError:
  """One line for an exception out of the user's script (or tinygrad under it): the script's innermost line, then the
  exception, instead of tinygrad's traceback. A sys.exit is the script's exit status."""
  path = spec.partition(':')[0]
  if isinstance(e, SystemExit) and e.code in (None, 0):   # ended without failing, and without tensors: emit's error (2)
    return EmitError(f"{script_line(e, path) or f'{path}: '}the script exited (status 0) before it returned tensors")
  if isinstance(e, SystemExit): return ScriptFailed(exit_error(e, path))
  msg = str(e).strip().splitlines()
  return ScriptFailed(f"{script_line(e, path)}{what}: {type(e).__name__}" + (f": {msg[-1]}" if msg else ""),
                      130 if isinstance(e, KeyboardInterrupt) else 1)

def load_function(spec: str, default: str = "main"):
  """SCRIPT.py[:FN] -> the function (default `main`), the script imported with its directory on sys.path."""
  path, _, fname = spec.partition(":")
  p = pathlib.Path(path)
  if not p.is_file(): raise EmitError(f"{path}: no such file")
  check_script(p)
  tinygrad()  # before the script makes its first tensor
  mspec = importlib.util.spec_from_file_location(f"_hcq_emit_{p.stem}", p)
  assert mspec is not None and mspec.loader is not None   # (a .py path always has a source loader)
  mod = importlib.util.module_from_spec(mspec)
  sys.path.insert(0, str(p.parent.resolve()))
  try: mspec.loader.exec_module(mod)
  except BaseException as e: raise script_error(e, spec, "importing the script failed") from None
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
  return tuple(out) if isinstance(out, (tuple, list)) else (out,)

OWN = str(pathlib.Path(__file__).resolve().parents[1])   # hcqdsl's own files
PASS_THROUGH = {"wrapped", "init", "fset", "get_runtime", "run_linear", "exec_kernel", "_exec_copy", "_wait_signal", "synchronize",
                "_emulate_execute"}  # the recorder's and the sanitizer's wrappers: they call tinygrad's own method

def split_script(spec: str) -> tuple:
  path, _, fn = spec.rpartition(":")
  return (path, fn) if fn.isidentifier() and path else (spec, "")

def run_script(script: pathlib.Path, fn: str, args: list, recorder) -> tuple:
  """Run SCRIPT (as __main__, or import it and call FN) inside `recorder`. Returns (exit code, error line or None):
  the script's own failure names its line; a failure inside hcqdsl is reported as hcqdsl's, never as the script's."""
  try: check_script(script)
  except EmitError as e: return 2, f"hcqdsl: error: {e}"
  argv, sys.argv = sys.argv, [str(script)] + args
  where = str(script.parent.resolve())
  sys.path.insert(0, where)
  missing = False
  try:
    with recorder:
      g = runpy.run_path(str(script), run_name="__main__" if not fn else "__hcqdsl_capture__")
      if fn:
        missing = not callable(g.get(fn))
        if not missing: g[fn]()
  except SystemExit as e:
    if e.code in (None, 0): return 0, None
    return 1, f"hcqdsl: error: {exit_error(e, str(script))}"
  except BaseException as e:   # an exception, a KeyboardInterrupt, a BaseException of the script's own
    tb = traceback.extract_tb(e.__traceback__)
    for f in reversed(tb):  # the innermost frame that is the script's or hcqdsl's own (not a recording wrapper's)
      p = pathlib.Path(f.filename).resolve()
      if p == script.resolve(): break
      if str(p).startswith(OWN) and f.name not in PASS_THROUGH and not p.name == "__main__.py" and p.parent.name != "cli":
        return 3, f"hcqdsl: internal error (not in {script}): {type(e).__name__}: {e} at {p.parent.name}/{p.name}:{f.lineno}"
    msg = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    return 130 if isinstance(e, KeyboardInterrupt) else 1, f"hcqdsl: error: {script_line(e, str(script)) or f'{script}: '}{msg}"
  finally:
    sys.argv = argv
    if where in sys.path: sys.path.remove(where)
  if missing: return 2, f"hcqdsl: error: {script}: no function `{fn}`"
  return 0, None
