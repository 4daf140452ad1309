"""`HCQ_SANITIZE=1 python train.py`: the sanitizer switched on as tinygrad's tools are (`DEBUG=2`, `VIZ=1`; PyTorch's
`TORCH_CUDA_SANITIZER=1`), by the environment (docs/sanitize.md, "Switching it on").

hcqdsl's `hcqdsl_sanitize.pth`, installed beside the package, has Python import this module at startup when
HCQ_SANITIZE is set (and nothing else when it is not: one lookup in the environment). The sanitizer starts when the
program imports tinygrad (so an environment the script sets before that is tinygrad's), records and checks what it
submits as `hcqdsl sanitize` does, and at exit writes the report — text on stderr (`HCQ_SANITIZE=1`), or JSON into a
file (`HCQ_SANITIZE=json:FILE`, the summary line on stderr) — and makes the exit status 1 when it found a problem or
the program hung. Under pytest the setting is `--hcq-sanitize` (`json:FILE`: `--hcq-sanitize-json FILE`): each test
is sanitized on its own by the pytest plugin."""
from __future__ import annotations
import atexit, importlib.abc, importlib.machinery, os, sys
from typing import Optional

__all__ = ["setting", "start", "SettingError"]

class SettingError(ValueError):
  """HCQ_SANITIZE has a value that is none of `1`, `text`, `json:FILE`."""

def setting(value: Optional[str] = None) -> Optional[tuple]:
  """("text", None) or ("json", FILE) for HCQ_SANITIZE's value (the environment's by default); None when it is off
  (unset, empty, 0)."""
  v = os.environ.get("HCQ_SANITIZE", "") if value is None else value
  if v.strip() in ("", "0"): return None
  if v.strip() in ("1", "text"): return ("text", None)
  if v.startswith("json:") and v[5:]: return ("json", v[5:])
  raise SettingError(f"HCQ_SANITIZE={v!r}: give 1 (the report on stderr at exit) or json:FILE (the JSON report into FILE)")

_state: dict = {}   # the running sanitizer, how to report, the exception the program ended with

def start() -> None:
  """Start the sanitizer (now: tinygrad is imported) and report at exit."""
  if _state or "_pytest" in sys.modules: return   # (under pytest: the plugin sanitizes each test)
  try: how = setting()
  except SettingError as e:
    sys.stderr.write(f"hcqdsl: error: {e}\n")
    return
  if how is None: return
  from .sanitize import Sanitizer
  s = Sanitizer()
  s.__enter__()
  _state.update(sanitizer=s, how=how, exc=(None, None, None))
  hook = sys.excepthook
  def excepthook(t, v, tb):   # the program's own uncaught exception (a hang: tinygrad's wait timing out) is kept for the report
    _state["exc"] = (t, v, tb)
    hook(t, v, tb)
  sys.excepthook = excepthook
  atexit.register(finish)

def finish() -> None:
  """At exit: the last check, the report, and exit status 1 when there were findings or a hang."""
  s, (kind, path), exc = _state["sanitizer"], _state["how"], _state["exc"]
  try: s.__exit__(*exc)
  except BaseException as e:
    sys.stderr.write(f"hcqdsl: internal error (not in the program): {type(e).__name__}: {e}\n")
    return
  if s.failure is not None:
    sys.stderr.write(f"hcqdsl: internal error (not in the program): {type(s.failure).__name__}: {s.failure}\n")
    return
  if not s.checked and s.hang is None: return   # nothing submitted to an AMD or NV queue: nothing to say
  if kind == "json":
    try:   # (whole or not at all: a reader never sees half a report)
      tmp = f"{path}.{os.getpid()}.tmp"
      with open(tmp, "w") as f: f.write(s.to_json() + "\n")
      os.replace(tmp, path)
    except OSError as e: sys.stderr.write(f"hcqdsl: error: HCQ_SANITIZE=json:{path}: {e.strerror or e}\n")
    sys.stderr.write(f"hcqdsl sanitize: {s.summary()} (the report: {path})\n")
  else: sys.stderr.write(s.report() + "\n")
  if s.findings or s.hang is not None:   # exit status 1 (the program's own exit status is lost then)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)

class _OnImport(importlib.abc.MetaPathFinder):
  """Starts the sanitizer once tinygrad's package has been imported (and takes itself off the import path)."""
  def find_spec(self, name, path=None, target=None):
    if name != "tinygrad": return None
    sys.meta_path.remove(self)
    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is None or spec.loader is None: return spec
    load = spec.loader.exec_module
    def exec_module(module):
      load(module)
      try: start()
      except Exception as e: sys.stderr.write(f"hcqdsl: internal error: the sanitizer could not start: {type(e).__name__}: {e}\n")
    spec.loader.exec_module = exec_module   # type: ignore[method-assign]
    return spec

if os.environ.get("HCQ_SANITIZE", "0").strip() not in ("", "0"):
  if "tinygrad" in sys.modules: start()
  else: sys.meta_path.insert(0, _OnImport())
