"""capture / lift / sanitize on tinygrad's NV runtime (ops_nv: NVComputeQueue, NVCopyQueue, HCQGraph) on tinygrad's mock
NV GPU (DEV=MOCK+NV; tests/mock_gpu.py): a two-device TinyJit and a plain realize capture, lift, check clean and run;
sanitize finds nothing on tinygrad as it is, agrees with capture + lift --whole + check, and reports a dependency
dropped from HCQGraph (tests/mock_workloads/buggy_graph.py) as a race with both lines; `pytest --hcq-sanitize` with
DEV=MOCK+NV; tools/nv_gpu_check.py's full path on the mock and its skip where there is no driver."""
from __future__ import annotations
import json, os, subprocess, sys
import pytest
import hcqdsl
from hcqdsl.lift.manifest import lift_file
from hcqdsl.lang.format import format_program
from mock_gpu import needs_mock, hcqdsl as run_hcqdsl, capture, manifest, report, verdicts, env, NV, WORKLOADS, ROOT

def checked(prog, launches: int = 1) -> tuple:
  ds = hcqdsl.check(hcqdsl.parse(format_program(prog), "l.hcq"), launches)
  return [d for d in ds if d.severity == "error"], [d for d in ds if d.severity != "error"]

@needs_mock
@pytest.mark.parametrize("workload", ["multi_device", "realize"])
def test_nv_capture_lift_check_run(workload, tmp_path):
  man, _ = capture(workload, tmp_path, **NV)
  m = manifest(man)
  assert {d["arch"] for d in m["devices"]} == {"sm_89"} and {q["engine"] for q in m["queues"]} == {"compute", "copy"}
  whole = lift_file(man, whole=True)
  text = format_program(whole)
  assert "device gpu0 = NV:0 sm_89" in text and ": cannot lift (" not in text
  errors, warnings = checked(whole)
  assert errors == [], [d.message for d in errors]
  assert {d.code for d in warnings} <= {"redundant-wait", "unused-signal"}
  folded = format_program(lift_file(man))
  if workload == "multi_device":   # a TinyJit called 5 times: its replays fold into launches, as on AMD
    assert "# hcq: launches=" in folded and "# hcq: launches=1\n" not in folded and folded.count("\nqueue ") < text.count("\nqueue ")
    errors, _ = checked(hcqdsl.parse(folded, "f.hcq"), int(folded.split("launches=")[1].split()[0]))
    assert errors == [], [d.message for d in errors]
  prog = hcqdsl.parse(text, "l.hcq")
  if workload == "multi_device":   # two devices, HCQGraph's queues: QMD chains with releases, cross-device copies
    assert len(m["devices"]) == 2 and len(prog.queues) >= 40 and "signal" in text and "copy b_" in text
    assert sum(s.__class__.__name__ == "Exec" for q in prog.queues for s in q.body) >= 8
  assert hcqdsl.run(prog, launches=1).ok

@needs_mock
def test_nv_sanitize_clean_and_agrees_with_capture_lift_check(tmp_path):
  r = run_hcqdsl("sanitize", "--format", "json", "--keep", tmp_path, WORKLOADS / "multi_device.py", **NV)
  rep = report(r)
  assert r.returncode == 0 and rep["ok"] and rep["findings"] == [] and not rep["incomplete"], r.stdout[-2000:] + r.stderr[-2000:]
  errors, warnings = checked(lift_file(tmp_path / "capture.json", whole=True))
  found, whole = verdicts(tmp_path)   # what sanitize found as the run grew, and what the whole run's check finds: equal
  assert errors == [] and warnings and found == whole, (found - whole, whole - found)
  r = run_hcqdsl("sanitize", WORKLOADS / "multi_device.py", **NV)
  assert r.stdout.strip().splitlines()[-1].startswith("ok: 0 errors") and "of tinygrad's NV runtime" in r.stdout

@needs_mock
def test_nv_lift_has_the_hosts_qmd_and_kernel_argument_writes(tmp_path):
  """The host writes each dispatch's constant bank and QMD (NVComputeQueue.exec; HCQGraph's updates) before it submits:
  a `write` of the kernel-argument block in the host block, which the exec reads (`in kernargs`)."""
  man, _ = capture("multi_device", tmp_path, **NV)
  text = format_program(lift_file(man, whole=True))
  writes = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("write kargs_")]
  assert writes and all(" = u32 [" in w for w in writes), text[-3000:]
  assert "in kernargs)" in text and ", kargs_" in text

@needs_mock
@pytest.mark.parametrize("api", [False, True])
def test_nv_sanitize_reports_the_stale_jit_copy(api, tmp_path):
  """tinygrad's stale JIT copy (docs/findings/stale-jit-copy.md) on NV:0 and NV:1, as on AMD (test_mock_sanitize): the
  folded lift of the capture checks `stale-input` and the copy is reported at the user's line — from the CLI and from
  `hcqdsl.sanitize()` around the script's calls."""
  if not api:
    r = run_hcqdsl("sanitize", "--format", "json", WORKLOADS / "stale_copy.py", **NV)
    assert r.returncode == 1, r.stdout + r.stderr
    found = report(r)["findings"]
  else:
    script = tmp_path / "api.py"
    script.write_text("import json, sys, hcqdsl\n"
                      f"sys.path.insert(0, {str(WORKLOADS)!r})\n"
                      "import stale_copy\n"
                      "with hcqdsl.sanitize() as s: stale_copy.main()\n"
                      "cmds = lambda f: [{'text': c.text, 'stack': c.stack} for c in f.commands]\n"
                      "print(json.dumps([{'code': f.code, 'commands': cmds(f)} for f in s.findings]))\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env(**NV), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    found = json.loads(r.stdout.strip().splitlines()[-1])
  [f] = [f for f in found if f["code"] == "stale-input"]
  assert f["commands"][0]["text"].startswith("copy ") and f["commands"][0]["stack"][-1][0].endswith("stale_copy.py"), f
  if not api:   # with docs/findings/stale-jit-copy.patch applied, the same run is clean
    r = run_hcqdsl("sanitize", "--format", "json", WORKLOADS / "stale_copy.py", HCQDSL_FIX="1", **NV)
    assert r.returncode == 0 and not report(r)["findings"], r.stdout + r.stderr

@needs_mock
def test_nv_sanitize_reports_a_dropped_dependency(tmp_path):
  r = run_hcqdsl("sanitize", "--format", "json", WORKLOADS / "buggy_graph.py", BUG="dep", **NV)
  rep = report(r)
  assert r.returncode == 1 and not rep["ok"], r.stderr[-2000:]
  races = [f for f in rep["findings"] if f["code"] == "race"]
  assert races and {f["code"] for f in rep["findings"]} == {"race"}
  f = races[0]
  copy, kern = f["commands"]
  assert copy["text"].startswith("copy ") and copy["device"] == "NV" and copy["queue"].startswith("copy0_gpu0")
  assert kern["what"].startswith("kernel E_4_4(out float[16], in float[16])") and kern["queue"].startswith("comp_gpu0")
  for c in (copy, kern): assert c["stack"][-1][:2] == [str(WORKLOADS / "multi_device.py"), 20]

@needs_mock
def test_nv_pytest_hcq_sanitize(tmp_path):
  (tmp_path / "test_tg.py").write_text(f"""
import os, runpy, sys
os.environ["WORKLOAD"] = ""
sys.path.insert(0, {str(WORKLOADS)!r})
import buggy_graph
def run(bug):
  buggy_graph.BUG = os.environ["BUG"] = bug
  try: runpy.run_path(os.path.join({str(WORKLOADS)!r}, "multi_device.py"), run_name="__main__")
  finally: buggy_graph.BUG = os.environ["BUG"] = ""
def test_clean(): run("")
def test_dropped_dependency(): run("dep")
""")
  out = tmp_path / "out.json"
  r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--hcq-sanitize-json", str(out),
                      "test_tg.py"],
                     capture_output=True, text=True, timeout=600, cwd=str(tmp_path), env=env(**NV))
  assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
  assert "FAILED test_tg.py::test_dropped_dependency - hcqdsl sanitize: race: " in r.stdout and "1 failed, 1 passed" in r.stdout
  assert "hcqdsl sanitize: race: copy0_gpu0" in r.stdout and "hcq-sanitize: 2 tests sanitized" in r.stdout
  by = {t["nodeid"].split("::")[1]: t for t in json.loads(out.read_text())["tests"]}
  assert by["test_clean"]["findings"] == [] and by["test_clean"]["submissions"] > 0
  assert {f["code"] for f in by["test_dropped_dependency"]["findings"]} == {"race"}

CHECK = ROOT / "tools" / "nv_gpu_check.py"

@needs_mock
def test_nv_gpu_check_on_the_mock(tmp_path):
  r = subprocess.run([sys.executable, str(CHECK), "--keep", str(tmp_path)], capture_output=True, text=True, timeout=600, env=env(**NV))
  assert r.returncode == 0, r.stdout + r.stderr[-2000:]
  lines = r.stdout.splitlines()
  assert any(ln.startswith("capture: wrote ") for ln in lines) and "check: 0 errors" in r.stdout and "run: ok" in lines
  assert any(ln.startswith("captured bytes == compile(lifted): yes (") for ln in lines), r.stdout
  assert (tmp_path / "lifted.hcq").is_file() and (tmp_path / "capture.json").is_file()

def test_nv_gpu_check_skips_without_a_driver():
  if os.path.exists("/dev/nvidiactl"): pytest.skip("an NVIDIA driver is present here")
  e = {k: v for k, v in os.environ.items() if k != "DEV"}
  r = subprocess.run([sys.executable, str(CHECK)], capture_output=True, text=True, timeout=120, env=e)
  assert (r.returncode, r.stderr) == (0, "") and r.stdout.startswith("skipped: no NVIDIA driver (/dev/nvidiactl absent)"), r
