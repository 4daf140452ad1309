"""The user's code runs exactly once, and what a script does to the process that runs it never costs the report
(issue 37): `emit`, `capture` and `sanitize` run every script through tinygrad/script.py (ScriptGuard). One exact-message
test per cause. Every script here is a copy under tmp_path, run with its working directory there: what it removes or
changes is inside the test's own temporary directory."""
import subprocess, sys
import pytest
from conftest import cli
from mock_gpu import needs_mock, env as mock_env

COMMANDS = ("emit", "capture", "sanitize")

def run(tmp_path, text: str, *argv, mock: bool = False, name: str = "s.py"):
  """`hcqdsl ARGV` on a copy of `text` at tmp_path/NAME, run there (tinygrad's CPU device, or its mock AMD GPU)."""
  (tmp_path / name).write_text(text)
  if not mock: return cli(*argv, cwd=tmp_path, env={"DEV": "CPU"}, timeout=600)
  r = subprocess.run([sys.executable, "-m", "hcqdsl", *map(str, argv)], capture_output=True, text=True, cwd=tmp_path,
                     env=mock_env(), timeout=600)
  return r.returncode, r.stdout, r.stderr

def out_arg(cmd: str) -> list:
  return ["-o", "m.json"] if cmd == "capture" else []

# ---- the user's function runs once (item 1)

COUNTING = '''
import pathlib
from tinygrad import Tensor
HERE = pathlib.Path(__file__).resolve().parent
def bump(name):
  p = HERE / name
  p.write_text(str(int(p.read_text()) + 1 if p.exists() else 1))
bump("imports")
def main():   # realizes its own result (as examples/gpt2.py's forward): emit called it a second time to capture it
  bump("calls")
  a = Tensor.ones(4, 4).contiguous().realize()
  return (a * 2 + 1).sum(axis=1).realize()
if __name__ == "__main__": main()
'''

def counts(tmp_path) -> tuple:
  return tuple(int((tmp_path / n).read_text()) if (tmp_path / n).exists() else 0 for n in ("imports", "calls"))

@pytest.mark.parametrize("spec", ["s.py", "s.py:main"])
@pytest.mark.parametrize("cmd", COMMANDS)
def test_the_script_runs_once(tmp_path, cmd, spec):
  rc, out, err = run(tmp_path, COUNTING, cmd, *out_arg(cmd), spec)
  assert counts(tmp_path) == (1, 1), (cmd, spec, err)
  if cmd == "emit":   # the program of that one call: both kernels, tinygrad's result
    assert rc == 0, err
    assert out.count("  exec ") == 2 and "expect out0 ~= f32 [12.0, 12.0, 12.0, 12.0]" in out
  else: assert rc == 2 and "no AMD or NV queue was submitted to" in err   # (tinygrad's CPU device: nothing to capture)

@needs_mock
def test_the_script_runs_once_on_the_mock_gpu(tmp_path):
  for cmd in ("capture", "sanitize"):
    for spec in ("s.py", "s.py:main"):
      for n in ("imports", "calls"): (tmp_path / n).unlink(missing_ok=True)
      rc, out, err = run(tmp_path, COUNTING, cmd, *out_arg(cmd), spec, mock=True)
      assert (rc, counts(tmp_path)) == (0, (1, 1)), (cmd, spec, err)

def test_the_python_api_calls_once():
  import hcqdsl
  from tinygrad import Tensor, TinyJit
  calls = []
  def realized():
    calls.append(1)
    a = Tensor.ones(4, 4).contiguous().realize()
    return (a * 2 + 1).sum(axis=1).realize()
  prog = hcqdsl.emit_jit(realized)
  from hcqdsl.ir import Exec
  assert len(calls) == 1 and sum(isinstance(st, Exec) for q in prog.queues for st in q.body) == 2
  assert list(prog.expects[0].data.values) == [12.0] * 4
  calls.clear()
  def step(x): calls.append(1); return (x * 2).sum()   # noqa: E702
  hcqdsl.emit_jit(TinyJit(step), [(Tensor([float(k)] * 4).realize(),) for k in range(4)])
  assert len(calls) == 4   # TinyJit's calls: 1 eager, 2..4 captured, each once
