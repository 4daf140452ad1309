"""`hcqdsl ARGV` run as a user runs it, for tests (its own module: `conftest` is also tests/upstream's module name, so
`from cli_run import` inside a test could get the other one)."""
import contextlib, io, os, pathlib, subprocess, sys
from typing import NamedTuple, Optional

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
