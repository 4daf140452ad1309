import collections, contextlib, io, os, pathlib, subprocess, sys
from typing import NamedTuple, Optional
import pytest
sys.path.insert(0, str(pathlib.Path(__file__).parent))  # tests share strategies.py and helpers
ROOT = pathlib.Path(__file__).resolve().parent.parent

class Cli(NamedTuple):
  returncode: int
  stdout: str
  stderr: str

def cli(*argv, proc: bool = False, cwd=None, env: Optional[dict] = None, timeout: Optional[float] = None) -> Cli:
  """`hcqdsl ARGV` as a user runs it: (exit code, stdout, stderr), unpacked or by name. In this process by default (an
  exit through SystemExit, argparse's, is its code); `proc=True`, or a cwd, env or timeout, runs `python -m hcqdsl` on
  this tree in a fresh interpreter: for what only one shows (a working directory, import-time setup, the exit path)."""
  args = [str(a) for a in argv]
  if proc or cwd is not None or env is not None or timeout is not None:
    e = {**os.environ, **(env or {})}
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([e["PYTHONPATH"]] if e.get("PYTHONPATH") else []))
    r = subprocess.run([sys.executable, "-m", "hcqdsl", *args], capture_output=True, text=True, cwd=cwd, env=e, timeout=timeout)
    return Cli(r.returncode, r.stdout, r.stderr)
  from hcqdsl.cli import main
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try: rc = main(args)
    except SystemExit as x: rc = x.code if isinstance(x.code, int) else int(x.code is not None)
  return Cli(rc, out.getvalue(), err.getvalue())

# The peer tier (`pytest.mark.peer`: tinygrad's mock GPU from a tinygrad checkout, tests/mock_gpu.py) skips where the
# mock cannot run, naming how to enable it; the end of the run says how many skipped and why, not only `-rs`.
_peer_skips: collections.Counter = collections.Counter()

def pytest_collection_modifyitems(config, items):
  peer = [it for it in items if it.get_closest_marker("peer") is not None]
  if not peer: return
  import mock_gpu
  why = mock_gpu.unavailable()
  if why is not None:
    for it in peer: it.add_marker(pytest.mark.skip(reason=why))

def pytest_runtest_logreport(report):
  if report.skipped and "peer" in report.keywords and not hasattr(report, "wasxfail"):
    why = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    _peer_skips[why.removeprefix("Skipped: ")] += 1

def pytest_terminal_summary(terminalreporter):
  for why, n in _peer_skips.items():
    terminalreporter.write_line(f"peer tier: {n} test{'s' * (n != 1)} skipped: {why}")
