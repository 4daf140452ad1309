"""The user's code runs exactly once, and what a script does to the process that runs it never costs the report
(issue 37): `emit`, `capture` and `sanitize` run every script through tinygrad/script.py (ScriptGuard). One exact-message
test per cause. Every script here is a copy under tmp_path, run with its working directory there: what it removes or
changes is inside the test's own temporary directory."""
import subprocess, sys
import pytest
from cli_run import cli
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
@pytest.mark.slow
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

# ---- hostile scripts (item 5): one exact message per cause

BAD_STR = '''
class Bad(Exception):
  def __str__(self): raise RuntimeError("no")
def main(): raise Bad()
if __name__ == "__main__": main()
'''

def test_an_exception_whose_str_raises(tmp_path):
  what = "Bad (its message cannot be read: str() raised RuntimeError)"
  assert run(tmp_path, BAD_STR, "emit", "s.py") == (1, "", f"hcqdsl: error: s.py:4: the script failed: {what}\n")
  for cmd in ("capture", "sanitize"):
    rc, out, err = run(tmp_path, BAD_STR, cmd, *out_arg(cmd), "s.py")
    assert (rc, out, err.splitlines()[0]) == (1, "", f"hcqdsl: error: s.py:4: {what}"), (cmd, err)

STDOUT = '''
import io, sys
from tinygrad import Tensor
def main():
  {what}
  return (Tensor.ones(4) * 2).contiguous()
'''

@pytest.mark.parametrize("what", ["sys.stdout.close()", "sys.stdout = io.StringIO()", "sys.stdout = None"])
def test_a_script_that_closes_or_replaces_stdout(tmp_path, what):
  rc, out, err = run(tmp_path, STDOUT.format(what=what), "emit", "s.py")
  assert (rc, err) == (0, "") and out.startswith("# hcq: launches=1\n") and "expect out0 ~= f32 [2.0, 2.0, 2.0, 2.0]" in out

OS_EXIT = '''
import os
from tinygrad import Tensor
def main():
  print((Tensor.ones(16).contiguous() * 3).realize().numpy()[:2], flush=True)
  os._exit({status})
if __name__ == "__main__": main()
'''

def test_a_scripts_own_os_exit_3_is_its_failure_not_an_internal_error(tmp_path):
  text = OS_EXIT.format(status=3)   # (stderr's first line: the process then ends as os._exit ends it, and Python's
  for cmd in COMMANDS:               # resource tracker may warn of the semaphores tinygrad's CPU device left)
    rc, out, err = run(tmp_path, text, cmd, *out_arg(cmd), "s.py")
    want = "hcqdsl: error: s.py:6: the script exited with status 3 (os._exit)" + (": nothing emitted" if cmd == "emit" else "")
    assert (rc, out, err.splitlines()[0]) == (1, "[3. 3.]\n", want), cmd

def test_os_exit_0_still_writes_what_was_seen(tmp_path):
  text = OS_EXIT.format(status=0)
  rc, out, err = run(tmp_path, text, "emit", "s.py")
  assert (rc, out, err.splitlines()[0]) == \
    (2, "[3. 3.]\n", "hcqdsl: error: s.py:6: the script exited (status 0, os._exit) before it returned tensors: nothing emitted")
  rc, out, err = run(tmp_path, text, "capture", "-o", "m.json", "s.py")   # (nothing to capture on the CPU device: said so)
  assert (rc, out) == (2, "[3. 3.]\n") and "no AMD or NV queue was submitted to" in err and (tmp_path / "m.json").is_file()

@needs_mock
def test_os_exit_0_capture_and_sanitize_on_the_mock_gpu(tmp_path):
  """The capture is written and the report printed from the exit hook; before, the process ended at the script's
  os._exit: no manifest, no report, exit 0."""
  text = OS_EXIT.format(status=0)
  rc, out, err = run(tmp_path, text, "capture", "-o", "m.json", "s.py", mock=True)
  assert (rc, out) == (0, "[3. 3.]\n") and err.startswith("wrote m.json: ") and "submissions on" in err
  assert "  exec " in cli("lift", tmp_path / "m.json").stdout
  rc, out, err = run(tmp_path, text, "sanitize", "s.py", mock=True)
  assert rc == 0 and out.splitlines()[0] == "[3. 3.]" and out.splitlines()[-1].startswith("ok: 0 errors"), (out, err)

CHDIR = '''
import os
from tinygrad import Tensor
def main():
  os.makedirs("elsewhere", exist_ok=True)
  os.chdir("elsewhere")
  return (Tensor.ones(4) * 2).contiguous()
if __name__ == "__main__": main()
'''

def test_outputs_are_resolved_before_the_script_changes_directory(tmp_path):
  assert run(tmp_path, CHDIR, "emit", "-o", "out.hcq", "s.py") == (0, "", "")
  assert (tmp_path / "out.hcq").is_file() and not (tmp_path / "elsewhere" / "out.hcq").exists()
  rc, _, _ = run(tmp_path, CHDIR, "capture", "-o", "m.json", "s.py")
  assert rc == 2 and (tmp_path / "m.json").is_file() and not (tmp_path / "elsewhere" / "m.json").exists()
  # the script's own line, though its relative path no longer names it from the new directory
  failing = CHDIR.replace("  return (Tensor.ones(4) * 2).contiguous()", "  raise ValueError('after chdir')")
  assert run(tmp_path, failing, "emit", "s.py") == (1, "", "hcqdsl: error: s.py:7: the script failed: ValueError: after chdir\n")
  rc, _, err = run(tmp_path, failing, "sanitize", "s.py")
  assert (rc, err.splitlines()[0]) == (1, "hcqdsl: error: s.py:7: ValueError: after chdir")

FORK = '''
import os, sys
from tinygrad import Tensor
def main():
  pid = os.fork()
  if pid: os.waitpid(pid, 0)
  print("parent" if pid else "child", flush=True)
  return (Tensor.ones(4) * 2).contiguous()
if __name__ == "__main__": main()
'''

def test_a_script_that_forks_is_reported_once(tmp_path):
  rc, out, err = run(tmp_path, FORK, "emit", "s.py")
  assert (rc, err, out.count("# hcq: launches=1\n")) == (0, "", 1) and out.startswith("child\nparent\n# hcq: launches=1\n")
  rc, out, err = run(tmp_path, FORK, "sanitize", "s.py")
  assert (rc, out, err.count("hcqdsl: error: ")) == (2, "child\nparent\n", 1)

FORK_GPU = '''
import os
from tinygrad import Tensor
a = Tensor.ones(16).contiguous().realize()
pid = os.fork()
if pid == 0: print("child", flush=True)   # (no GPU work: the child would share its parent's queues)
else:
  os.waitpid(pid, 0)
  print((a * 3).contiguous().realize().numpy()[:2], flush=True)
'''

@needs_mock
@pytest.mark.slow
def test_a_script_that_forks_on_the_mock_gpu(tmp_path):
  rc, out, err = run(tmp_path, FORK_GPU, "capture", "-o", "m.json", "s.py", mock=True)
  assert (rc, out, err.count("wrote m.json")) == (0, "child\n[3. 3.]\n", 1), err
  rc, out, err = run(tmp_path, FORK_GPU, "sanitize", "s.py", mock=True)
  assert (rc, out.count("ok: 0 errors"), out.splitlines()[:2]) == (0, 1, ["child", "[3. 3.]"]), (out, err)

TWO_DEVICE_OBJECTS = '''
from tinygrad import Tensor, Device
a = (Tensor.ones(16).contiguous() * 2).realize().numpy()
# what two threads' first uses of the device do when they race (tinygrad's Device[] cache is not thread-safe): a second
# device object for AMD, with queues and a timeline of its own
Device._Device__get_canonicalized_item.cache_clear()
b = (Tensor.ones(16).contiguous() * 3).realize().numpy()
'''

@needs_mock
def test_a_device_opened_twice_by_script_threads(tmp_path):
  rc, out, err = run(tmp_path, TWO_DEVICE_OBJECTS, "capture", "-o", "m.json", "s.py", mock=True)
  assert rc == 0 and err.splitlines()[0] == (
    "hcqdsl: warning: tinygrad opened device AMD twice (the script's threads first used it at the same time: tinygrad's "
    "Device[] cache is not thread-safe); the second one, with queues and a timeline of its own, is gpu1 in the capture")
  text = cli("lift", tmp_path / "m.json").stdout   # before: `devices[1].name: device `gpu0` listed twice`
  assert "device gpu0 = AMD:0 gfx1100\ndevice gpu1 = AMD:1 gfx1100\n" in text
  # sanitize checks it (before: an internal error): the two objects' queues share no timeline, and the second's kernel
  # reads what the first's wrote with nothing ordering them, a race in what tinygrad submitted
  rc, out, err = run(tmp_path, TWO_DEVICE_OBJECTS, "sanitize", "s.py", mock=True)
  assert rc == 1 and out.startswith("hcqdsl sanitize: race: comp_gpu1 reads ") and "internal error" not in err, (out, err)
