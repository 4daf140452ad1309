"""The two tinygrad findings (docs/findings/) on tinygrad's mock GPU: the stale JIT copy reproduced with tinygrad
0.14's HCQGraph and gone with docs/findings/stale-jit-copy.patch applied (in memory); the `_resolve_deps` chain's race
as `check` reports it on the program `emit --planner tinygrad` derives from the TinyJit (HCQGraph's own schedule).
Skipped, naming how to enable it, where the mock GPU is not available (tests/mock_gpu.py). The standalone (tinygrad
only) reproductions are tests/upstream/, run by tests/test_upstream_findings.py."""
from __future__ import annotations
import json, subprocess, sys
import pytest
from mock_gpu import needs_mock, env, WORKLOADS, hcqdsl as hcqdsl_cli

pytestmark = needs_mock

def _calls(**extra) -> list:
  r = subprocess.run([sys.executable, str(WORKLOADS / "stale_copy.py"), "5"], capture_output=True, text=True, timeout=600,
                     env=env(**extra))
  assert r.returncode == 0, r.stderr
  return json.loads(r.stdout.strip().splitlines()[-1])

def test_stale_copy_reproduced_and_fixed():
  want = [[100.0 * i + 1, 100.0 * i + 2, 100.0 * i + 3] for i in range(5)]
  got = _calls()
  # calls 0 and 1 run eagerly / are captured; every graph replay copies from call 1's input
  assert got[:2] == want[:2] and got[2:] == [want[1]] * 3, got
  assert _calls(HCQDSL_FIX="1") == want

def _lift(man, tmp, folded_only: bool = False):
  import hcqdsl
  from hcqdsl.lift.manifest import lift_file
  path = tmp / (man.stem + ("_folded" if folded_only else "") + ".hcq")
  text = hcqdsl.format(lift_file(man, str(path), folded_only=folded_only))
  path.write_text(text)
  prog = hcqdsl.parse(text, str(path))
  return prog, int(text.splitlines()[0].split("=")[1]), path

def test_stale_copy_through_capture(tmp_path):
  """The capture records each HCQGraph call's inputs, so the lift knows the copy's fixed source is the first graph
  launch's input: `a@2` (the default lift: launch 1 is the eager call 0 and the uploads before it, launches 2..5 the
  captured call and the 3 replays), and check's stale-input names the copy and both launches; `run` of the lift gives
  tinygrad's wrong numbers. `--folded-only` finds it as `a@1` in launch 2. With the patch applied (in memory) the copy
  reads each launch's own input and the capture checks clean."""
  import hcqdsl, numpy as np
  from hcqdsl.ir import Copy
  from mock_gpu import capture
  man, _ = capture("stale_copy", tmp_path)
  prog, launches, path = _lift(man, tmp_path, folded_only=True)
  assert launches == 4   # the captured call (launch 1) and the 3 replays
  errors = [d for d in hcqdsl.check(prog, launches) if d.severity == "error"]
  assert [(d.code, d.extra["launch"], d.extra["input_launch"]) for d in errors] == [("stale-input", 2, 1)], errors
  default, n, _ = _lift(man, tmp_path)
  assert n == 5 and [(d.code, d.extra["launch"], d.extra["input_launch"]) for d in hcqdsl.check(default, n) if d.severity == "error"] == [
    ("stale-input", 3, 2)]
  assert {q.launches for q in default.queues} == {(1, 1), (2, 5)} and [h.launches for h in default.hosts] == [(1, 1), (2, 5)]
  copy = next(st for q in prog.queues for st in q.body if isinstance(st, Copy) and st.src.launch is not None)
  a = next(b for b in prog.buffers if b.name == copy.src.buffer.name)
  assert errors[0].span.line == copy.span.line and a.per_launch == "rebound" and copy.src.launch == 1
  assert (copy.src.start, copy.src.end) == (0, 32) and len(a.launch_inits) == launches   # a[:8] of a 16-float input
  assert errors[0].message.startswith(f"{errors[0].extra['queue']} reads {a.name}@1[0:32] at line {copy.span.line} in launch 2")
  for p, k in ((prog, launches), (default, n)):
    res = hcqdsl.run(p, launches=k)
    assert res.ok, res.summary()
    out = next(st.args[0].buffer.name for q in p.queues if q.launches != (1, 1) for st in q.body if type(st).__name__ == "Exec")
    assert np.frombuffer(bytes(res.memory[out])[:12], np.float32).tolist() == [101.0, 102.0, 103.0]   # call 1's, as tinygrad
  (tmp_path / "fixed").mkdir()
  man, _ = capture("stale_copy", tmp_path / "fixed", HCQDSL_FIX="1")
  prog, launches, _ = _lift(man, tmp_path / "fixed")
  assert [d for d in hcqdsl.check(prog, launches) if d.severity == "error"] == []
  prog, launches, fixed = _lift(man, tmp_path / "fixed", folded_only=True)
  assert [d for d in hcqdsl.check(prog, launches) if d.severity == "error"] == []
  copies = [st for q in prog.queues for st in q.body if isinstance(st, Copy) and (st.src.start, st.src.end) == (0, 32)]
  assert len(copies) == 1 and copies[0].src.launch is None
  assert next(b for b in prog.buffers if b.name == copies[0].src.buffer.name).per_launch == "rebound"
  # `hcqdsl diff --match` of what the step means (emit, on tinygrad's CPU devices: the graph's launches) against each
  # capture's graph launches (--folded-only): the copy, in every replay, and nothing else; the fixed capture runs
  # exactly what the schedule means
  emitted = tmp_path / "emitted.hcq"
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "emit", f"{WORKLOADS / 'stale_copy.py'}:jit_calls", "-o", emitted],
                     capture_output=True, text=True, timeout=600, env={**env(), "DEV": "CPU"})
  assert r.returncode == 0, r.stderr
  r = hcqdsl_cli("diff", "--match", emitted, path)
  lines = r.stdout.splitlines()
  assert r.returncode == 1 and lines[-1] == "3 differences: 0 in declarations, 3 in commands over 3 launches", r.stdout
  for k in (2, 3, 4):
    at = lines.index(f"@@ launch {k}, queue g0 copy")
    assert lines[at + 1].startswith(f"- copy buf0[0:32] <- in0@{k}[0:32]") and lines[at + 2].startswith("+ copy buf0[0:32] <- in0@1[0:32]")
    assert lines[at + 2].endswith(f"({path}:{copy.span.line})")
  r = hcqdsl_cli("diff", "--match", emitted, fixed)
  assert r.returncode == 0 and r.stdout == f"no differences between {emitted} and {fixed}\n", r.stdout

@pytest.mark.slow
def test_stale_allreduce_through_capture(tmp_path):
  """The same miss on a TinyJit'd all-reduce of a sharded input (tests/mock_workloads/allreduce.py STALE=1): every
  device's reduce kernel and the three copies of its shard read launch 1's input shard in every replay."""
  import hcqdsl
  from mock_gpu import capture
  man, _ = capture("allreduce", tmp_path, STALE="1")
  prog, launches, _ = _lift(man, tmp_path)
  errors = [d for d in hcqdsl.check(prog, launches) if d.severity == "error"]
  assert {d.code for d in errors} == {"stale-input"} and len(errors) == 16, [str(d) for d in errors]
  # (launch 1 is what came before the graph's launches: its first replay is launch 3)
  assert len({d.extra["buffer"] for d in errors}) == 4 and {d.extra["launch"] for d in errors} == {3}
  kinds = sorted(d.extra["queue"].split("_")[0][:4] for d in errors)
  assert kinds == ["comp"] * 4 + ["copy"] * 12
  # the patch (stale_copy.py's apply_fix; shards of a sharded input included): tinygrad's sums right (the workload
  # asserts them) and the capture checks clean
  (tmp_path / "fixed").mkdir()
  man, _ = capture("allreduce", tmp_path / "fixed", STALE="1", HCQDSL_FIX="1")
  prog, launches, _ = _lift(man, tmp_path / "fixed")
  assert [d for d in hcqdsl.check(prog, launches) if d.severity == "error"] == []
