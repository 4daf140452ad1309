"""`hcqdsl sanitize` and `check` of a capture on tinygrad's mock GPU, with bugs injected into tinygrad's HCQGraph
(tests/mock_workloads/buggy_graph.py) and into hcq2's planner (tests/mock_workloads/buggy_hcq2.py): each is reported
with the two commands involved and the user's line; tinygrad as it is checks clean."""
from __future__ import annotations
import json
import pytest
import hcqdsl
from hcqdsl.lift.manifest import lift_file
from hcqdsl.header import read_header
from mock_gpu import needs_mock, hcqdsl as run_hcqdsl, capture, report, verdicts, WORKLOADS

pytestmark = needs_mock
WORKLOAD = WORKLOADS / "buggy_graph.py"
USER_LINE = f"{WORKLOADS / 'multi_device.py'}:20"

def test_sanitize_reports_dropped_dependency():
  r = run_hcqdsl("sanitize", "--format", "json", WORKLOAD, BUG="dep")
  assert r.returncode == 1, r.stderr
  rep = report(r)
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
  codes = {f["code"] for f in report(r)["findings"]}
  assert codes & {"signal-race", "non-monotonic", "deadlock", "race"}, codes

def test_sanitize_context_manager(tmp_path):
  script = tmp_path / "s.py"
  script.write_text("import hcqdsl\nfrom tinygrad import Tensor\nwith hcqdsl.sanitize() as s:\n  a = Tensor([1.0, 2.0]).realize()\n"
                    "  b = (a * 2).contiguous().realize()\nprint(s.ok, s.capture.submissions() > 0)\n")
  import subprocess, sys
  from mock_gpu import env
  r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env(), timeout=300)
  assert r.stdout.strip() == "True True", r.stderr

@pytest.mark.parametrize("hcq2", [False, True], ids=["classic", "hcq2"])
def test_sanitize_blocks_in_one_process(tmp_path, hcq2):
  """One process, several sanitized blocks (what `pytest --hcq-sanitize` does, one per test), each tinygrad's
  test_jit_copyin: a later block sees rings an earlier one filled, whose doorbells may ring with nothing new (every test
  after test_jit_assign failed with hcqdsl's error until a ring nothing was submitted to was left out), and hcq2's hooks
  must record into the block's own capture (the second block's signal resets went to the first: false races)."""
  script = tmp_path / "s.py"
  script.write_text("import hcqdsl, numpy as np\nfrom tinygrad import Tensor, TinyJit\nfor i in range(3):\n"
                    "  with hcqdsl.sanitize() as s:\n    @TinyJit\n    def f(a): return a + Tensor([1, 2, 3])\n"
                    "    for _ in range(5):\n      b = Tensor.randn(3)\n"
                    "      np.testing.assert_allclose(f(b).numpy(), b.numpy() + [1, 2, 3], atol=1e-4, rtol=1e-5)\n"
                    "  print(s.ok, s.capture.submissions() > 0, s.incomplete)\n")
  import subprocess, sys
  from mock_gpu import env
  r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env(hcq2), timeout=300)
  assert r.stdout.splitlines() == ["True True []"] * 3, r.stdout + r.stderr[-3000:]

def test_sanitize_reports_dropped_memory_barrier():
  """HCQGraph's compute queues without their opening `memory_barrier`: the kernel reads kernel arguments the host
  patched (the new input's address) with no HDP flush after the write — tinygrad's "need memory_barrier after direct
  write to vram". Reported with the kernel and the host's submission, both at the user's line."""
  r = run_hcqdsl("sanitize", "--format", "json", WORKLOAD, BUG="barrier", WORKLOAD="jit_inputs")
  assert r.returncode == 1, r.stdout + r.stderr
  rep = report(r)
  vis = [f for f in rep["findings"] if f["code"] == "visibility"]
  assert vis and len(vis) == len(rep["findings"]), rep["findings"]   # one per launch of the graph: nothing else
  f = vis[0]
  assert "reads kargs_" in f["message"] and "written by the host" in f["message"] and "HDP" in f["message"], f
  kernel, host = f["commands"]
  assert kernel["what"].startswith("kernel E_4_4(out float[16], in float[16]")
  assert kernel["queue"].startswith("comp_gpu0") and kernel["device"] == "AMD"
  assert host["queue"] == "host" and host["text"].startswith("write kargs_") and "kernel arguments" in host["what"], host
  line = f"{WORKLOADS / 'jit_inputs.py'}:14"
  assert [f"{c['stack'][-1][0]}:{c['stack'][-1][1]}" for c in f["commands"]] == [line, line]
  assert rep["checks"] > 1 and rep["detected_at"][-1][0].endswith("jit_inputs.py"), rep  # found as the program ran
  r = run_hcqdsl("sanitize", "--format", "json", WORKLOAD, WORKLOAD="jit_inputs")   # tinygrad as it is: its barrier
  assert r.returncode == 0 and report(r)["findings"] == [], r.stdout + r.stderr

def test_check_reports_dropped_memory_barrier(tmp_path):
  man, _ = capture("buggy_graph", tmp_path, BUG="barrier", WORKLOAD="jit_inputs")
  prog = hcqdsl.parse(hcqdsl.format(lift_file(man, str(tmp_path / "b.hcq"), folded_only=True)), "b.hcq")   # the graph's launches
  hdp = [d for d in hcqdsl.check(prog, 3) if d.code == "visibility" and d.extra["cause"] == "hdp"]
  # the exec reads its kernel-argument block (`kargs_...`, its last argument), which the host rewrote before the launch
  assert hdp and all("reads kargs_" in d.message for d in hdp), [str(d) for d in hdp]
  assert hdp[0].related[0].message.startswith("the host writes kargs_")
  lines = hcqdsl.format(prog).splitlines()
  assert lines[hdp[0].span.line - 1].strip().startswith("exec E_4_4(")
  assert not any(isinstance(s, hcqdsl.ir.Barrier) for q in prog.queues for s in q.body)   # the barrier is gone

def test_sanitize_raises_at_the_enqueuing_line(tmp_path):
  """`hcqdsl.sanitize(raise_on_error=True)` checks as the program runs and raises out of the tinygrad call after which
  the first error is seen: the traceback ends in the user's loop, before the script's later calls run."""
  script = tmp_path / "s.py"
  script.write_text(f"import os, sys, traceback\nos.environ.update(BUG='dep', WORKLOAD='')\nsys.path.insert(0, {str(WORKLOADS)!r})\n"
                    "import buggy_graph, hcqdsl\nimport numpy as np\nfrom tinygrad import Tensor, TinyJit, Device\n"
                    "d0, d1 = Device.DEFAULT, f'{Device.DEFAULT}:1'\nw = Tensor(np.ones((8, 8), np.float32)).shard((d0, d1), axis=1).realize()\n"
                    "@TinyJit\ndef step(x):\n  return ((x + 0).contiguous().shard((d0, d1)) @ w).realize().to(d1).contiguous()\n"
                    "calls = 0\ntry:\n  with hcqdsl.sanitize(raise_on_error=True):\n    for i in range(6):\n"
                    "      step(Tensor(np.full((2, 8), i, np.float32)).realize()).numpy(); calls += 1\n"
                    "except hcqdsl.tinygrad.sanitize.SanitizerError as e:\n"
                    "  f = [x for x in traceback.extract_tb(e.__traceback__) if x.filename == __file__][-1]\n"
                    "  print(f.lineno, calls, str(e).splitlines()[0].split(':')[1].strip())\n")
  import subprocess, sys
  from mock_gpu import env
  r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env(), timeout=600)
  line, calls, code = r.stdout.split()
  assert (int(line), code) == (16, "race") and int(calls) < 6, r.stdout + r.stderr

# ---- tinygrad's hcq2 path (HCQ2=1 HCQ_RUNTIME_DEV=PYTHON): bugs injected into hcq2's planner (_build_wait_ins)
HCQ2_WORKLOAD = WORKLOADS / "buggy_hcq2.py"

def _line_of(c) -> str: return f"{c['stack'][-1][0]}:{c['stack'][-1][1]}"

def test_hcq2_sanitize_reports_dropped_dependency():
  """The AMD copy queue no longer waits for the compute queue that produced its source (hcq2 plans every schedule, so
  the weights' shard in multi_device.py's line 10 already has it): a race between the copy and the kernel, both
  enqueued at that line (tinygrad as it is: test_hcq2_sanitize_clean)."""
  r = run_hcqdsl("sanitize", "--format", "json", HCQ2_WORKLOAD, hcq2=True, BUG="dep")
  assert r.returncode == 1, r.stdout + r.stderr
  rep = report(r)
  f = next(f for f in rep["findings"] if f["code"] == "race")
  kinds = sorted(c["what"].split(" ")[0] for c in f["commands"])
  assert kinds == ["copy", "kernel"], f
  kernel = next(c for c in f["commands"] if c["what"].startswith("kernel"))
  assert kernel["what"].startswith("kernel E_8_4(") and kernel["device"] == "AMD", kernel   # tinygrad's name, no colors
  assert [_line_of(c) for c in f["commands"]] == [f"{WORKLOADS / 'multi_device.py'}:10"] * 2, f

@pytest.mark.slow
def test_hcq2_sanitize_clean():
  r = run_hcqdsl("sanitize", HCQ2_WORKLOAD, hcq2=True)
  assert r.returncode == 0 and r.stdout.splitlines()[-1].startswith("ok: 0 errors"), r.stdout + r.stderr

def test_hcq2_sanitize_reports_dropped_refill_wait():
  """The CPU device's finalizer no longer waits for the AMD copy that read the host staging buffer: the host's refill
  for the next input races that copy — the host's `write` and the `copy`, both at the user's line; tinygrad as it is: ok."""
  r = run_hcqdsl("sanitize", "--format", "json", HCQ2_WORKLOAD, hcq2=True, BUG="refill", WORKLOAD="two_inputs")
  assert r.returncode == 1, r.stdout + r.stderr
  f = next(f for f in report(r)["findings"] if f["code"] == "race")
  host, copy = sorted(f["commands"], key=lambda c: c["queue"] != "host")
  assert host["queue"] == "host" and host["text"].startswith("write "), f
  assert copy["what"].startswith("copy ") and copy["queue"].startswith("copy0_gpu0"), f
  # the refill of the second input (line 12) overtakes the copy out of the staging buffer of the first (line 11)
  assert (_line_of(copy), _line_of(host)) == (f"{WORKLOADS / 'two_inputs.py'}:11", f"{WORKLOADS / 'two_inputs.py'}:12"), f
  assert host["text"] == f"write {host['text'].split()[1]}" and "bytes into host memory" in host["what"], host
  r = run_hcqdsl("sanitize", "--format", "json", HCQ2_WORKLOAD, hcq2=True, WORKLOAD="two_inputs")
  assert r.returncode == 0 and report(r)["findings"] == [], r.stdout + r.stderr

@pytest.mark.parametrize("bug,workload,where", [pytest.param("dep", "multi_device", "copy0_gpu0", marks=pytest.mark.slow),
                                                ("refill", "two_inputs", "the host writes")])
def test_hcq2_check_reports_injected_bug(tmp_path, bug, workload, where):
  man, _ = capture("buggy_hcq2", tmp_path, hcq2=True, BUG=bug, WORKLOAD=workload)
  prog = hcqdsl.parse(hcqdsl.format(lift_file(man, str(tmp_path / f"{bug}.hcq"))), f"{bug}.hcq")
  races = [d for d in hcqdsl.check(prog, 2) if d.code == "race"]
  assert races and where in races[0].message and len(races[0].related) == 1, (bug, [str(d) for d in races])

# ---- issue 30: findings whatever the script did, hangs, every launch checked, the two paths agree
def _errors(rep: dict) -> list: return sorted(f["code"] for f in rep["findings"])

def test_sanitize_prints_findings_when_the_script_fails(tmp_path):
  """A sanitizer is run because the script fails: the findings come first, then the script's own error (exit 1)."""
  script = tmp_path / "fails.py"
  script.write_text(f"import os, runpy\nos.environ.update(BUG='dep')\nrunpy.run_path({str(WORKLOAD)!r}, run_name='__main__')\n"
                    "raise AssertionError('tinygrad gave wrong numbers')\n")
  r = run_hcqdsl("sanitize", script)
  assert r.returncode == 1, r.stdout + r.stderr
  assert "hcqdsl sanitize: race:" in r.stdout and r.stdout.splitlines()[-1].startswith("failed: "), r.stdout
  assert r.stderr.splitlines()[-1] == f"hcqdsl: error: {script}:4: AssertionError: tinygrad gave wrong numbers", r.stderr
  rep = report(run_hcqdsl("sanitize", "--format", "json", script))
  assert "race" in _errors(rep) and rep["error"] == "AssertionError: tinygrad gave wrong numbers", rep

def test_sanitize_reports_a_hang_as_a_deadlock():
  """HCQGraph's compute queue no longer signals the device's timeline (BUG=hang): tinygrad's next wait times out. That
  is reported as a hang, with the check of what was submitted up to it: the deadlock at the host's wait, at the user's line."""
  r = run_hcqdsl("sanitize", "--format", "json", WORKLOAD, BUG="hang", HCQDEV_WAIT_TIMEOUT_MS="1000")
  assert r.returncode == 1, r.stdout + r.stderr
  rep = report(r)
  assert rep["hang"] and "Wait timeout" in rep["hang"]["message"] and _line_of({"stack": rep["hang"]["stack"]}) == USER_LINE, rep["hang"]
  [dl] = [f for f in rep["findings"] if f["code"] == "deadlock"]
  [host] = dl["commands"]
  assert host["queue"] == "host" and host["text"].startswith("wait gpu") and _line_of(host) == USER_LINE, dl
  assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
  r = run_hcqdsl("sanitize", WORKLOAD, BUG="hang", HCQDEV_WAIT_TIMEOUT_MS="1000")
  assert "hcqdsl sanitize: hang: tinygrad gave up waiting for the GPU at" in r.stdout and "finds the deadlock above" in r.stdout, r.stdout

def test_sanitize_checks_every_graph_launch(tmp_path):
  """A 3-call TinyJit (call 1 eager, call 2 captured into an HCQGraph and launched, call 3 a replay) over a 3-device
  copy ring: every submission is checked — what sanitize finds is what `lift --whole` + `check` of the run finds,
  nothing left out —; `lift --folded-only` of the same capture leaves steps out and says so (`lift --strict` exits 1),
  the default lift and `lift --whole` do not."""
  r = run_hcqdsl("sanitize", "--format", "json", "--keep", tmp_path, WORKLOADS / "copy_ring.py")
  assert r.returncode == 0, r.stdout + r.stderr
  rep = report(r)
  assert rep["ok"] and rep["incomplete"] == [] and rep["submissions"] >= 30, rep
  found, whole = verdicts(tmp_path)
  assert found == whole and sum(whole.values()) > 0, (found - whole, whole - found)
  man, _ = capture("copy_ring", tmp_path)
  r = run_hcqdsl("lift", "--strict", "--folded-only", man)
  assert r.returncode == 1 and "not lifted, so no check sees it: steps 1.." in r.stderr and "`--whole` lift every step" in r.stderr, r.stderr
  r = run_hcqdsl("lift", "--strict", man, "-o", tmp_path / "default.hcq")
  assert r.returncode == 0 and "not lifted" not in r.stderr, r.stderr
  r = run_hcqdsl("lift", "--strict", "--whole", man, "-o", tmp_path / "whole.hcq")
  assert r.returncode == 0 and "not lifted" not in r.stderr, r.stderr
  assert len(hcqdsl.parse((tmp_path / "whole.hcq").read_text(),
                          "whole.hcq").queues) == sum(h["op"] == "submit" for h in json.loads(man.read_text())["host"])

# tinygrad's own styles, tinygrad as it is: no finding on either path, and `capture` + `lift --whole` + `check` of the
# same script gives the same verdict (the two commands must never disagree on a run)
AGREE = [("decode", False), ("convnet", False), ("copy_ring", False), ("decode", True), ("two_inputs", True),
         pytest.param("dp_adam", False, marks=pytest.mark.slow), pytest.param("copy_ring", True, marks=pytest.mark.slow),
         pytest.param("convnet", True, marks=pytest.mark.slow), pytest.param("train_step", False, marks=pytest.mark.slow)]

@pytest.mark.parametrize("workload,hcq2", AGREE)
def test_sanitize_agrees_with_capture_lift_check(tmp_path, workload, hcq2):
  """sanitize checks the run as it grows, forgetting what is ordered before everything still to come (docs/sanitize.md,
  "Memory"); what it finds is what `capture` + `lift --whole` + `check` of the same run finds, warning for warning, by
  the capture steps of the statements involved."""
  extra = {"NDEV": "2", "CALLS": "3"} if workload == "dp_adam" else {}
  r = run_hcqdsl("sanitize", "--format", "json", "--keep", tmp_path / "kept", WORKLOADS / f"{workload}.py", hcq2=hcq2, **extra)
  assert r.returncode == 0, r.stdout + r.stderr
  rep = report(r)
  assert rep["ok"] and rep["findings"] == [] and rep["incomplete"] == [] and rep["submissions"] > 0, rep
  found, whole = verdicts(tmp_path / "kept")
  assert found == whole, (found - whole, whole - found)
  assert not [k for k in whole if k[0] in ("race", "deadlock", "signal-race", "non-monotonic")], whole
  # another run, captured by `hcqdsl capture`: no error either (its host waits may differ: tinygrad waits only for what
  # is not done yet), and the folded lift (launches of one template) of it: no false error (eager dispatches take a
  # fresh kernel-argument slot each, so they are never folded into launches of one patched block)
  man, _ = capture(workload, tmp_path, hcq2=hcq2, **extra)
  assert [str(d) for d in hcqdsl.check(hcqdsl.parse(hcqdsl.format(lift_file(man, str(tmp_path / "c.hcq"), whole=True)), "c.hcq"), 1)
          if d.severity == "error"] == []
  folded = hcqdsl.parse(hcqdsl.format(lift_file(man, str(tmp_path / "f.hcq"))), "f.hcq")
  n = read_header(hcqdsl.format(folded)).get("launches", 1)
  assert [str(d) for d in hcqdsl.check(folded, n) if d.severity == "error"] == []

def test_hcq2_sanitize_prints_findings_when_tinygrads_numbers_are_wrong(tmp_path):
  """hcq2's dropped dependency really races on the mock: the script's own check of tinygrad's numbers fails (the
  workload's assert, kept on here). The race is reported first, then the script's AssertionError at its line."""
  script = tmp_path / "checks_numbers.py"
  script.write_text(f"import os, runpy\nos.environ.update(BUG='dep', WORKLOAD='')\nrunpy.run_path({str(HCQ2_WORKLOAD)!r})\n"
                    f"del os.environ['BUG']\nrunpy.run_path({str(WORKLOADS / 'multi_device.py')!r}, run_name='__main__')\n")
  r = run_hcqdsl("sanitize", "--format", "json", script, hcq2=True)
  assert r.returncode == 1, r.stdout + r.stderr
  rep = report(r)
  assert "race" in _errors(rep), rep
  assert rep["error"] and rep["error"].startswith("AssertionError"), rep["error"]
  assert any(l.startswith(f"hcqdsl: error: {script}:5: AssertionError: (array(") for l in r.stderr.splitlines()), r.stderr   # the numbers

def test_lifted_float_expects_hold_within_a_tolerance(tmp_path):
  """The conv net's weights after three Adam steps, lifted from a capture and run on hcqdsl's RDNA3 executor: float
  memory is expected as floats within a tolerance (the executor rounds transcendentals unlike tinygrad's emulator),
  integer memory exactly; the run passes on both the folded and the whole-run lift."""
  man, _ = capture("convnet", tmp_path)
  for whole in (False, True):
    prog = lift_file(man, str(tmp_path / f"c{whole}.hcq"), whole=whole)
    text = hcqdsl.format(prog)
    if whole: assert "~= f32 [" in text and " rtol 0.001 atol 0.001" in text, text[-3000:]   # (the folded launch may hold no float memory)
    (tmp_path / f"c{whole}.hcq").write_text(text)
    r = run_hcqdsl("run", tmp_path / f"c{whole}.hcq", "--no-check")
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "ok", r.stdout[-3000:] + r.stderr

def test_sanitize_progress_and_explain():
  r = run_hcqdsl("sanitize", "--explain", "race")
  assert r.returncode == 0 and r.stdout.startswith("race: Both commands were generated by tinygrad, not written by you"), r.stdout
  r = run_hcqdsl("sanitize", "--explain", "rac")
  assert r.returncode == 2 and r.stderr == "hcqdsl: error: --explain: `rac` is no diagnostic code (did you mean `race`?)\n", r.stderr
  r = run_hcqdsl("sanitize", WORKLOADS / "convnet.py")   # a long run: a progress line after each check past 5 s
  assert r.returncode == 0 and any(l.startswith("hcqdsl sanitize: ") and " submissions seen, " in l and " checks made" in l
                                   for l in r.stderr.splitlines()), r.stderr
  assert "what to do about" not in r.stdout   # advice only under findings

def test_sanitize_reports_the_stale_jit_copy():
  """tinygrad's stale JIT copy (docs/findings/stale-jit-copy.md) shows only across launches: sanitize also checks the
  capture with its HCQGraph launches folded, for `stale-input`, and reports the copy at the user's line."""
  r = run_hcqdsl("sanitize", "--format", "json", WORKLOADS / "stale_copy.py")
  assert r.returncode == 1, r.stdout + r.stderr
  rep = report(r)
  [f] = [f for f in rep["findings"] if f["code"] == "stale-input"]
  assert f["commands"][0]["text"].startswith("copy ") and f["commands"][0]["stack"][-1][0].endswith("stale_copy.py"), f

# ---- issue 39: sanitize's own options after the script, JSON stdout, the console script's frame
def test_sanitize_options_after_the_script(tmp_path):
  """`hcqdsl sanitize s.py:main --format json --keep out/`: the options are sanitize's (a JSON report, out/ written), the
  script's prints go to stderr, not into the JSON; an option that is not sanitize's is refused before `--`, and after
  `--` everything is the script's."""
  script = tmp_path / "s.py"
  script.write_text("import sys\nfrom tinygrad import Tensor\ndef main():\n  print('the script prints', sys.argv[1:])\n"
                    "  (Tensor([1.0, 2.0]) + 1).realize()\n")
  r = run_hcqdsl("sanitize", f"{script}:main", "--format", "json", "--keep", tmp_path / "out", "x.npy")
  assert r.returncode == 0, r.stdout + r.stderr
  rep = json.loads(r.stdout)   # one object: nothing the script printed
  assert rep["ok"] and rep["submissions"] > 0, rep
  assert "the script prints ['x.npy']" in r.stderr and (tmp_path / "out" / "capture.json").is_file()
  r = run_hcqdsl("sanitize", script, "--lr", "3")
  assert r.returncode == 2 and r.stderr.strip() == (f"hcqdsl: error: --lr: not an option of `hcqdsl sanitize`; the script's own "
                                                    f"options go after `--` (hcqdsl sanitize {script} -- --lr ...)"), r.stderr
  r = run_hcqdsl("sanitize", f"{script}:main", "-q", "--", "--lr", "3", "--format")
  assert r.returncode == 0 and "the script prints ['--lr', '3', '--format']" in r.stdout, r.stdout + r.stderr
  assert r.stdout.splitlines()[-1].startswith("ok: "), r.stdout

def test_sanitize_stacks_leave_out_the_console_script(tmp_path):
  """Run through the installed console script (`hcqdsl`, whose frame is `bin/hcqdsl:8 in <module>: sys.exit(main())`),
  a command's stack starts at the user's script."""
  import os, subprocess, sys
  from mock_gpu import env
  exe = os.path.join(os.path.dirname(sys.executable), "hcqdsl")
  if not os.path.exists(exe): pytest.skip("no `hcqdsl` console script beside this Python (pip install -e .)")
  r = subprocess.run([exe, "sanitize", "--format", "json", "--keep", str(tmp_path), str(WORKLOAD)], capture_output=True, text=True,
                     env=env(BUG="dep"), timeout=600)
  f = next(f for f in report(r)["findings"] if f["code"] == "race")
  for c in f["commands"]:
    assert c["stack"][0][0] == str(WORKLOAD) and not any(fr[0] == exe for fr in c["stack"]), c["stack"]
  steps = json.loads((tmp_path / "capture.json").read_text())["host"]
  assert all(fr[0] != exe for h in steps for fr in h.get("stack", ())), "the console script's frame in a step's stack"

# ---- issue 39: switched on by the environment, from an installed wheel
def test_hcq_sanitize_env_from_an_installed_wheel(tmp_path):
  """`HCQ_SANITIZE=1 python train.py` with hcqdsl installed from its wheel (not editable) into a fresh venv: the
  `hcqdsl_sanitize.pth` the wheel puts beside the package starts the sanitizer when the program imports tinygrad; the
  report comes at exit on stderr and the exit status is 1 on a finding; `HCQ_SANITIZE=json:FILE` writes the JSON report;
  unset, nothing of hcqdsl is imported."""
  import os, subprocess, sys, sysconfig
  from mock_gpu import env, tinygrad_repo, ROOT
  venv = tmp_path / "venv"
  subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
  py = str(venv / "bin" / "python")
  r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", str(ROOT)], capture_output=True, text=True, timeout=900)
  assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
  site = next((venv / "lib").glob("python3*/site-packages"))
  assert (site / "hcqdsl_sanitize.pth").is_file() and (site / "hcqdsl" / "__init__.py").is_file()
  (site / "zz_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")   # tinygrad, numpy, lark, attrs (this venv's)
  def run(code_or_script, **extra) -> subprocess.CompletedProcess:
    e = {k: v for k, v in env(**extra).items() if k != "HCQ_SANITIZE"}
    e["PYTHONPATH"] = str(tinygrad_repo())   # (not the source tree: the wheel's hcqdsl)
    e.update({k: v for k, v in extra.items() if k == "HCQ_SANITIZE"})
    args = [py, str(code_or_script)] if os.path.exists(str(code_or_script)) else [py, "-c", code_or_script]
    return subprocess.run(args, capture_output=True, text=True, env=e, timeout=600, cwd=str(tmp_path))
  probe = "import sys, tinygrad, hcqdsl; print(hcqdsl.__file__, 'hcqdsl.tinygrad.autostart' in sys.modules)"
  r = run("import sys, tinygrad; print(any(m.startswith('hcqdsl') for m in sys.modules))")
  assert r.stdout.strip() == "False", r.stdout + r.stderr
  r = run(probe, HCQ_SANITIZE="1")
  assert r.stdout.split() == [str(site / "hcqdsl" / "__init__.py"), "True"], r.stdout + r.stderr
  r = run(WORKLOAD, BUG="dep", HCQ_SANITIZE="1")
  assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-3000:]
  assert "hcqdsl sanitize: race: " in r.stderr and r.stderr.strip().splitlines()[-1].startswith("failed: "), r.stderr[-3000:]
  out = tmp_path / "report.json"
  r = run(WORKLOAD, HCQ_SANITIZE=f"json:{out}")
  assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
  rep = json.loads(out.read_text())
  assert rep["ok"] and rep["submissions"] > 0 and f"(the report: {out})" in r.stderr, r.stderr[-2000:]

# ---- issue 39: templates, the frontier, one report per bug
CHANGED_REPLAY = """
import json, sys, numpy as np, hcqdsl
from tinygrad import Tensor
with hcqdsl.sanitize(keep=sys.argv[1], every_call=True) as s:
  for i in range(14):
    x = Tensor(np.full(16, i, np.float32)).realize()
    y = (x * 2 + (5 if i == 8 else 1)).realize()   # call 8: the same steps but for one command (another kernel)
    y.numpy()
print(json.dumps({"log": list(s.live.log), "ok": s.ok, "live": s.live.live_steps(), "most": s.live.live_max}))
"""

@pytest.mark.parametrize("verify", [False, True], ids=["templates", "verified"])
def test_sanitize_templates_and_a_changed_replay(tmp_path, verify):
  """A loop whose calls repeat: after the first checks every later one is answered by a template (the key of its live
  part seen before: canon.py) — but the call with one changed command, which is checked as new, and the checks after
  it until its steps are forgotten. What they find is what `lift --whole` + `check` of the run finds; with
  HCQDSL_SANITIZE_VERIFY=1 every template hit is checked too and must give the template's outcome (else an error)."""
  import subprocess, sys
  from mock_gpu import env
  (tmp_path / "s.py").write_text(CHANGED_REPLAY)
  extra = {"HCQDSL_SANITIZE_VERIFY": "1"} if verify else {}
  r = subprocess.run([sys.executable, str(tmp_path / "s.py"), str(tmp_path / "kept")], capture_output=True, text=True,
                     env=env(**extra), timeout=600)
  assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
  out = json.loads(r.stdout.strip().splitlines()[-1])
  assert out["ok"], out
  log = [(kind, tuple(calls)) for kind, calls, _ in out["log"]]
  hit = "verified" if verify else "template"
  # each loop turn is three tinygrad calls (x's realize, y's, the copy out): turn 8's changed kernel is call 3 * 8 + 2
  changed = [kind for kind, (lo, hi) in log if lo <= 26 <= hi]
  assert changed == ["checked"], log
  before = [kind for kind, (lo, hi) in log if hi < 25]
  after = [kind for kind, (lo, hi) in log if lo > 28]
  assert hit in before[len(before) // 2:] and hit in after, log
  found, whole = verdicts(tmp_path / "kept")
  assert found == whole, (found - whole, whole - found)
  assert out["most"] < 60, out   # the live part stays small: what happens before everything to come is forgotten

def test_sanitize_memory_is_the_live_part(tmp_path):
  """The frontier (check/frontier.py) forgets what happens before everything still to come: the steps kept live stay as
  many at 24 calls as at 6 (tinygrad's data-parallel step: the host waits for each device at its next call)."""
  most = {}
  for calls in (6, 24):
    r = run_hcqdsl("sanitize", "--format", "json", "--stats", WORKLOADS / "dp_adam.py", NDEV="2", CALLS=str(calls))
    assert r.returncode == 0, r.stderr[-2000:]
    rep = report(r)
    most[calls] = rep["stats"]["live_steps_max"]
    assert rep["ok"] and rep["stats"]["templates"] > 0, rep["stats"]
  assert most[24] == most[6], most

def test_sanitize_one_report_per_bug(tmp_path):
  """HCQGraph's dropped dependency races in every replay: one finding, counted over the calls it was seen in (`× N
  calls` in text), not one per call; warnings are listed by kind, and all of them with -v."""
  r = run_hcqdsl("sanitize", "--format", "json", WORKLOAD, BUG="dep", CALLS="10")
  assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
  rep = report(r)
  races = [f for f in rep["findings"] if f["code"] == "race"]
  # (each copy the copy queue no longer orders is its own race: kernel E_4_4 against one copy, r_2_4_8 against another)
  assert 1 <= len(races) <= 2 and all(f["count"] >= 8 and f["first_call"] < f["last_call"] for f in races), races
  r = run_hcqdsl("sanitize", WORKLOAD, BUG="dep", CALLS="10")
  assert r.stdout.count("hcqdsl sanitize: race: ") == len(races), r.stdout
  assert all(f"(× {f['count']} calls: {f['first_call']}..{f['last_call']})" in r.stdout for f in races), r.stdout
  kinds = {w["code"] for w in rep["warnings"]}
  assert kinds and all(f"warning: {k}: " in r.stdout for k in kinds), r.stdout
  v = run_hcqdsl("sanitize", "-v", WORKLOAD, BUG="dep", CALLS="10")
  assert sum(ln.startswith("    this wait never orders anything") for ln in v.stdout.splitlines()) == \
    sum(1 for w in rep["warnings"] if w["code"] == "redundant-wait"), v.stdout

@pytest.mark.slow
@pytest.mark.parametrize("hcq2", [False, True], ids=["hcq", "hcq2"])
def test_replays_with_alternating_inputs_are_read_as_they_are(tmp_path, hcq2):
  """A TinyJit step called with fresh inputs: tinygrad's allocator hands its input buffers out in turn, so the replays'
  kernel-argument blocks and copy addresses alternate, and the sanitizer reuses what it read of each (shapes.py's
  variants, the capture's blocks, canon.py's readings). With HCQDSL_SANITIZE_VERIFY=1 every reused reading is checked
  against a fresh decode and every template hit against its own check; what it finds is `lift --whole` + `check`'s."""
  r = run_hcqdsl("sanitize", "--format", "json", "--stats", "--keep", tmp_path / "kept", WORKLOADS / "dp_adam.py", hcq2=hcq2,
                 NDEV="2", CALLS="10", HCQDSL_SANITIZE_VERIFY="1", timeout=1200)
  assert r.returncode in (0, 1), r.stdout[-2000:] + r.stderr[-3000:]
  rep = report(r)
  assert (r.returncode == 0) == rep["ok"] and rep["incomplete"] == [] and rep["stats"]["checks"] >= 10, rep["stats"]
  # (hcq2's planner races on this step, docs/findings: its copy on the source device waits for no earlier batch)
  assert {f["code"] for f in rep["findings"]} <= ({"race"} if hcq2 else set()), rep["findings"]
  found, whole = verdicts(tmp_path / "kept")
  assert found == whole, (found - whole, whole - found)
