"""A user's tinygrad script: loading its function, calling it, and one line (the script's own line) for what it raised.
Used by `hcqdsl emit`, `capture` and `sanitize`."""
from __future__ import annotations
import importlib.util, inspect, os, pathlib, runpy, sys, traceback
from typing import Callable, Optional
from .env import EmitError, tinygrad

__all__ = ["load_function", "call_script", "script_error", "script_line", "split_script", "run_script", "ScriptFailed",
           "check_script", "exit_error", "exception_text", "ScriptGuard", "run_function"]

# Exit codes, the same in emit, capture and sanitize: a script that cannot be loaded (no such file, not valid Python:
# a syntax error, NUL bytes, UTF-16, no function FN) is unusable input, 2; a script that fails when it runs (an
# exception, any BaseException, a non-zero sys.exit) is the script's failure, 1 (a KeyboardInterrupt: 130), its own
# line named; a failure inside hcqdsl is hcqdsl's own, 3 (capture and sanitize; never the script's line).

def exception_text(e: BaseException) -> str:
  """`Type: message` of an exception out of the script (`Type` when it has no message), even when its `__str__`
  raises (the script's own exception class may be broken: its failure is still reported)."""
  try: msg = str(e)
  except BaseException as x: return f"{type(e).__name__} (its message cannot be read: str() raised {type(x).__name__})"
  return f"{type(e).__name__}: {msg}" if msg else type(e).__name__

def _last_text(e: BaseException) -> str:
  """`Type: the last line of its message` (`Type` without one; exception_text's words when it cannot be read)."""
  try: lines = str(e).strip().splitlines()
  except BaseException: return exception_text(e)
  return type(e).__name__ + (f": {lines[-1]}" if lines else "")

OS_EXIT = os._exit.__name__   # the process-ending call a script may make, replaced while it runs (ScriptGuard)
_STARTED_IN: list = []   # the working directory the last ScriptGuard was made in (a script may change it)

def _resolved(filename: str) -> pathlib.Path:
  """A frame's file, resolved as it was named: a relative name against the directory the script was started in."""
  p = pathlib.Path(filename)
  return (p if p.is_absolute() or not _STARTED_IN else pathlib.Path(_STARTED_IN[-1], p)).resolve()

class ScriptGuard:
  """What a user's script may do to the hcqdsl process that runs it, contained: `emit`, `capture` and `sanitize` run
  every script inside one (`run_script`, `run_function`), so the report about the script is hcqdsl's to write.
  - `os._exit(N)` ends the script, not the report: `on_exit(N, where)` (`where`: `SCRIPT:LINE: ` of the call) writes
    what was seen — capture its manifest, sanitize its report, emit that nothing was emitted — and returns the exit
    code the process then ends with (the script's own 3 is never hcqdsl's internal-error code);
  - a process the script forks runs the script's code and ends when the script ends in it: with the script's status,
    reporting nothing (its submissions are its own copy's; only the original process reports);
  - `sys.stdout` / `sys.stderr` replaced or closed by the script are put back (a closed one reopened on its file
    descriptor), so the report reaches where hcqdsl's output goes.
  The script's path is resolved on entry (`real`): a script may change the working directory."""
  def __init__(self, path, on_exit: Optional[Callable[[int, str], int]] = None):
    self.path, self.real, self.on_exit = str(path), pathlib.Path(path).resolve(), on_exit
    self.done = False
    _STARTED_IN[:] = [os.getcwd()]

  def __enter__(self) -> "ScriptGuard":
    self.pid, self.streams, self.exit = os.getpid(), (sys.stdout, sys.stderr), os._exit
    self.fds = tuple(_dup(fd) for fd in (1, 2))
    setattr(os, OS_EXIT, self._os_exit)
    return self

  def __exit__(self, et, e, tb):
    if os.getpid() != self.pid: self._child_ends(e)
    setattr(os, OS_EXIT, self.exit)
    self._restore_streams()
    for fd in self.fds:
      if fd is not None: os.close(fd)
    return False

  def where(self, frame=None) -> str:
    """`PATH:LINE: ` of the innermost frame of the stack (from `frame` out) in the script, else `PATH: `."""
    lines = [f.lineno for f in traceback.extract_stack(frame) if _resolved(f.filename) == self.real]
    return f"{self.path}:{lines[-1]}: " if lines else f"{self.path}: "

  def _os_exit(self, status) -> None:
    import operator
    code = operator.index(status)   # (what os._exit takes; anything else is the TypeError it raises)
    if os.getpid() != self.pid or self.done: self.exit(code)   # a forked child's, or a second one while reporting
    self.done = True
    setattr(os, OS_EXIT, self.exit)
    self._restore_streams()
    try: rc = self.on_exit(code, self.where(sys._getframe(1))) if self.on_exit is not None else code
    except BaseException as x:   # hcqdsl's own failure while writing what it saw
      sys.stderr.write(f"hcqdsl: internal error (not in {self.path}): {type(x).__name__}: {x}\n")
      rc = 3
    _flush()
    self.exit(rc)

  def _child_ends(self, e: Optional[BaseException]) -> None:
    """A process the script forked came back out of the script: it ends here with the script's status, reporting nothing."""
    if e is None: code = 0
    elif isinstance(e, SystemExit): code = e.code if isinstance(e.code, int) else int(e.code is not None)
    else:
      code = 130 if isinstance(e, KeyboardInterrupt) else 1
      try: sys.stderr.write(f"hcqdsl: error: {self.path}: in a process the script forked (pid {os.getpid()}): {exception_text(e)}\n")
      except BaseException: pass
    _flush()
    self.exit(code)

  def _restore_streams(self) -> None:
    for name, fd, was, dup in zip(("stdout", "stderr"), (1, 2), self.streams, self.fds):
      if getattr(sys, name) is was and not _closed(was): continue
      try: os.fstat(fd)
      except OSError:   # closing sys.stdout closed its descriptor: the saved duplicate is put back
        if dup is not None: os.dup2(dup, fd)
      if _closed(was) and dup is not None:
        was = open(fd, "w", encoding=getattr(was, "encoding", None) or "utf-8", errors="backslashreplace", closefd=False)
      setattr(sys, name, was)

def _dup(fd: int) -> Optional[int]:
  try: return os.dup(fd)
  except OSError: return None

def _closed(stream) -> bool:
  try: return bool(stream.closed)
  except Exception: return True

def _flush() -> None:
  for stream in (sys.stdout, sys.stderr):
    try: stream.flush()
    except Exception: pass

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

def exit_error(e: SystemExit, path: str, real: Optional[pathlib.Path] = None) -> str:
  """What a script's sys.exit says: its line (else its path), then its status (or its message)."""
  if e.code is None or isinstance(e.code, int): what = f"the script exited with status {e.code}"
  else: what = f"the script exited: {_last_text(e).partition(': ')[2]}"
  return f"{script_line(e, path, real) or f'{path}: '}{what}"

def script_line(e: BaseException, path: str, real: Optional[pathlib.Path] = None) -> str:
  """`path:LINE: ` for the innermost frame of `e`'s traceback in the script at `path` (`real`: its resolved path, taken
  before the script ran: it may have changed the working directory), else ''."""
  p = real or pathlib.Path(path).resolve()
  frames = [f for f in traceback.extract_tb(e.__traceback__) if _resolved(f.filename) == p]
  return f"{path}:{frames[-1].lineno}: " if frames else ""

def script_error(e: BaseException, spec: str, what: str = "the script failed", real: Optional[pathlib.Path] = None) -> EmitError:
  """One line for an exception out of the user's script (or tinygrad under it): the script's innermost line, then the
  exception, instead of tinygrad's traceback. A sys.exit is the script's exit status."""
  path = spec.partition(':')[0]
  if isinstance(e, SystemExit) and e.code in (None, 0):   # ended without failing, and without tensors: emit's error (2)
    return EmitError(f"{script_line(e, path, real) or f'{path}: '}the script exited (status 0) before it returned tensors")
  if isinstance(e, SystemExit): return ScriptFailed(exit_error(e, path, real))
  return ScriptFailed(f"{script_line(e, path, real)}{what}: {_last_text(e)}", 130 if isinstance(e, KeyboardInterrupt) else 1)

def emit_exit(status: int, where: str) -> int:
  """emit's report of a script's `os._exit(status)` before its function returned (ScriptGuard's `on_exit`): nothing
  was emitted; status 0 is emit's error (2), any other the script's failure (1)."""
  what = "exited (status 0, os._exit) before it returned tensors: nothing emitted" if status == 0 else \
         f"exited with status {status} (os._exit): nothing emitted"
  sys.stderr.write(f"hcqdsl: error: {where}the script {what}\n")
  return 2 if status == 0 else 1

def run_function(spec: str, devices: Optional[int] = None, recorder=None, on_exit=emit_exit) -> tuple:
  """emit's run of SCRIPT.py[:FN]: the script imported and FN (default `main`) called once, inside `recorder` (a
  context manager, or None) and a ScriptGuard; what FN returned, as a tuple. EmitError: it cannot be loaded, or ended
  (status 0) without returning; ScriptFailed: it failed (its line)."""
  import contextlib
  path = spec.partition(":")[0]
  guard = ScriptGuard(path, on_exit)
  with recorder if recorder is not None else contextlib.nullcontext(), guard:
    fn = load_function(spec)
    try: return call_script(fn, devices)
    except BaseException as e: raise script_error(e, spec, real=guard.real) from None

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

def run_script(script: pathlib.Path, fn: str, args: list, recorder, finish: Optional[Callable[[int, Optional[str]], int]] = None):
  """Run SCRIPT (as __main__, or import it and call FN) inside `recorder` and a ScriptGuard. Returns (exit code, error
  line or None): the script's own failure names its line; a failure inside hcqdsl is reported as hcqdsl's, never as
  the script's. `finish(code, error line)`: what the command does once the script ended (write the manifest, print the
  report), returning the process's exit code; given, run_script returns what it returns — also when the script calls
  `os._exit`, after which the process ends with it."""
  try: check_script(script)
  except EmitError as e: return _finish(finish, 2, f"hcqdsl: error: {e}")
  guard = ScriptGuard(script, lambda status, where: _exited(recorder, finish, status, where))
  argv, sys.argv = sys.argv, [str(script)] + args
  where = str(script.parent.resolve())
  sys.path.insert(0, where)
  try:
    with recorder, guard:
      g = runpy.run_path(str(script), run_name="__main__" if not fn else "__hcqdsl_capture__")
      if fn and callable(g.get(fn)): g[fn]()
    rc, err = (2, f"hcqdsl: error: {script}: no function `{fn}`") if fn and not callable(g.get(fn)) else (0, None)
  except BaseException as e: rc, err = _failure(e, script, guard.real)
  finally:
    sys.argv = argv
    if where in sys.path: sys.path.remove(where)
  return _finish(finish, rc, err)

def _finish(finish, rc: int, err: Optional[str]):
  return (rc, err) if finish is None else finish(rc, err)

def _exited(recorder, finish, status: int, where: str) -> int:
  """The script called os._exit(status): the recording ends there, and the command finishes with what it saw."""
  recorder.__exit__(None, None, None)
  rc, err = (0, None) if status == 0 else (1, f"hcqdsl: error: {where}the script exited with status {status} (os._exit)")
  if finish is not None: return finish(rc, err)
  if err: sys.stderr.write(err + "\n")
  return rc

def _failure(e: BaseException, script: pathlib.Path, real: pathlib.Path) -> tuple:
  """(exit code, error line) of what ended the script: a sys.exit, the script's exception (its line), or hcqdsl's own."""
  if isinstance(e, SystemExit):
    return (0, None) if e.code in (None, 0) else (1, f"hcqdsl: error: {exit_error(e, str(script), real)}")
  for f in reversed(traceback.extract_tb(e.__traceback__)):  # the innermost frame that is the script's or hcqdsl's own (not a recording wrapper's)
    p = _resolved(f.filename)
    if p == real: break
    if str(p).startswith(OWN) and f.name not in PASS_THROUGH and not p.name == "__main__.py" and p.parent.name != "cli":
      return 3, f"hcqdsl: internal error (not in {script}): {exception_text(e)} at {p.parent.name}/{p.name}:{f.lineno}"
  return 130 if isinstance(e, KeyboardInterrupt) else 1, f"hcqdsl: error: {script_line(e, str(script), real) or f'{script}: '}{exception_text(e)}"
