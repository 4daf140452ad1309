"""`hcqdsl sanitize` and `check` of a capture on tinygrad's mock GPU, with bugs injected into tinygrad's HCQGraph
(tests/mock_workloads/buggy_graph.py): each is reported with the two commands involved and the user's line; tinygrad
as it is checks clean."""
from __future__ import annotations
import json
import pytest
import hcqdsl
from hcqdsl.lift.manifest import lift_file
from mock_gpu import needs_mock, hcqdsl as run_hcqdsl, capture, WORKLOADS

pytestmark = needs_mock
WORKLOAD = WORKLOADS / "buggy_graph.py"
USER_LINE = f"{WORKLOADS / 'multi_device.py'}:20"

def test_sanitize_reports_dropped_dependency():
  r = run_hcqdsl("sanitize", "--format", "json", WORKLOAD, BUG="dep")
  assert r.returncode == 1, r.stderr
  rep = json.loads(r.stdout)
  races = [f for f in rep["findings"] if f["code"] == "race"]
  assert races and not rep["ok"]
  f = races[0]
  assert len(f["commands"]) == 2
  kinds = sorted(c["what"].split(" ")[0] for c in f["commands"])
  assert kinds == ["copy", "kernel"], f
  for c in f["commands"]:
    assert f"{c['stack'][-1][0]}:{c['stack'][-1][1]}" == USER_LINE and c["stack"][-1][3] == "out = step(Tensor(xn).realize()).numpy()"
  r = run_hcqdsl("sanitize", WORKLOAD, BUG="dep")  # the text report: both commands, their lines
  assert r.returncode == 1 and r.stdout.count(f"enqueued at {USER_LINE}") >= 2 and "kernel E_4_4(out float[16], in float[16])" in r.stdout

def test_check_reports_dropped_dependency(tmp_path):
  man, _ = capture("buggy_graph", tmp_path, BUG="dep")
  prog = hcqdsl.parse(hcqdsl.format(lift_file(man, str(tmp_path / "b.hcq"))), "b.hcq")
  races = [d for d in hcqdsl.check(prog, 2) if d.code == "race"]
  assert races
  assert "copy0_gpu0" in races[0].message and "comp_gpu0" in races[0].message and len(races[0].related) == 1

@pytest.mark.slow
def test_sanitize_clean_and_dropped_kickoff():
  r = run_hcqdsl("sanitize", WORKLOAD)
  assert r.returncode == 0, r.stdout + r.stderr
  assert r.stdout.splitlines()[-1].startswith("ok: 0 errors")
  r = run_hcqdsl("sanitize", "--format", "json", WORKLOAD, BUG="kick")
  assert r.returncode == 1
  codes = {f["code"] for f in json.loads(r.stdout)["findings"]}
  assert codes & {"signal-race", "non-monotonic", "deadlock", "race"}, codes

def test_sanitize_context_manager(tmp_path):
  script = tmp_path / "s.py"
  script.write_text("import hcqdsl\nfrom tinygrad import Tensor\nwith hcqdsl.sanitize() as s:\n  a = Tensor([1.0, 2.0]).realize()\n"
                    "  b = (a * 2).contiguous().realize()\nprint(s.ok, s.capture.submissions() > 0)\n")
  import subprocess, sys
  from mock_gpu import env
  r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env(), timeout=300)
  assert r.stdout.strip() == "True True", r.stderr
