"""The pytest plugin (hcqdsl/pytest_plugin.py): small scenario files through pytester; `--hcq-sanitize` with a stand-in
Sanitizer, then (the peer tier) with the real one on tinygrad's mock GPU, and on tinygrad's own tests (`-m slow`)."""
import collections, json, os, re, subprocess, sys, types
import pytest
import hcqdsl.tinygrad.sanitize as sanitize_mod
from mock_gpu import needs_mock, env as mock_env, WORKLOADS, tinygrad_repo
from hcqdsl.pytest_plugin import parse_markers
from hcqdsl.header import read_header as parse_options, HeaderError as HcqSpecError
import hcqdsl.runtime, hcqdsl.check.pipeline, hcqdsl.amd.compile  # noqa: F401
# imported here so that pytester's in-process runs keep them: numpy cannot be loaded twice, and the parser and
# checker would be imported (and lark's tables built) again in every run
import tinygrad.uop.ops, tinygrad.runtime.support.hcq2, tinygrad.runtime.ops_amd, tinygrad.runtime.ops_nv  # noqa: F401
# and tinygrad's modules that declare a ContextVar: tinygrad registers each name once per process, so a module an
# in-process run imported and pytester then dropped cannot be imported again (a later test's CPU device: "no usable
# devices")

pytest_plugins = ["pytester"]

CYCLE = """device gpu0 = AMD:0 gfx1100
signal s on gpu0
signal t on gpu0
queue q0 compute on gpu0 {
  wait t >= 1@M1@
  signal s = 1
}
queue q1 compute on gpu0 {
  wait s >= 1@M2@
  signal t = 1
}
"""

RUN = """# hcq: launches=2 seeds=3
device gpu0 = AMD:0 gfx1100
buffer x on gpu0 size 16
kernel init(out x) = builtin iota<u32>(1)
queue c0 compute on gpu0 {
  epoch
  exec init(x)
  signal gpu0.timeline = gpu0.epoch
}
host {
  wait gpu0.timeline >= gpu0.epoch
}
expect x == u32 [@V@]
"""

def rp(pytester, *args):
  """An in-process run without the benchmark and hypothesis plugins (their start-up is ~2 s a run, ours ~0.1 s)."""
  return pytester.runpytest("-p", "no:benchmark", "-p", "no:hypothesispytest", *args)

def lines(r, pats):
  """fnmatch_lines with `[` taken literally (diagnostics print `error[code]`)."""
  r.stdout.fnmatch_lines([p.replace("[", "[[]") for p in pats])

def cycle(m1, m2): return CYCLE.replace("@M1@", m1).replace("@M2@", m2)
def run(values): return RUN.replace("@V@", values)

def test_markers_parse():
  text = 'wait s >= 1  # E: race W: visibility\nexec k(a)  # E: race, E: race  # W: redundant-wait\n' \
         'kernel k(out a) = c "x # E: name"\n# the spec says E: race here, in prose\n# hcq: launches=3\n'
  got = [(m.line, m.severity, m.code) for m in parse_markers(text)]
  assert got == [(1, "error", "race"), (1, "warning", "visibility"), (2, "error", "race"), (2, "error", "race"),
                 (2, "warning", "redundant-wait")]
  assert parse_markers("x  # E: race")[0].column == 6

def test_options_parse():
  assert parse_options("# hcq: launches=3 seeds=20\n# hcq: target=gfx942 run=no\n") == \
    {"launches": 3, "seeds": 20, "target": "gfx942", "run": False}
  for bad in ("# hcq: launchs=2", "# hcq: seeds=x", "# hcq: launches=0", "# hcq: target=gfx9", "# hcq: run"):
    with pytest.raises(HcqSpecError): parse_options(bad)

def test_passing_file(pytester):
  pytester.makefile(".hcq", cycle=cycle("  # E: deadlock", ""))
  pytester.makefile(".hcq", clean=cycle("", "").replace("  wait t >= 1\n  signal s = 1", "  signal s = 1\n  wait t >= 1"))
  r = rp(pytester, "-v")
  r.assert_outcomes(passed=2)
  lines(r, ["clean.hcq::check PASSED*", "cycle.hcq::check PASSED*"])

def test_missing_marker(pytester):
  pytester.makefile(".hcq", cycle=cycle("  # E: deadlock W: visibility", ""))
  r = rp(pytester, )
  r.assert_outcomes(failed=1)
  lines(r, ["cycle.hcq: `hcqdsl check --launches 2` differs from the file's markers",
                          "-- missing: 1 marked, not reported",
                          "cycle.hcq:5:30: warning[visibility]: marked `W: visibility` here, but check reports no such warning on this line",
                          "      wait t >= 1  # E: deadlock W: visibility",
                          "    * ^~~~~~~~~~~~~"])
  assert "unexpected" not in r.stdout.str()

def test_unexpected_diagnostic(pytester):
  pytester.makefile(".hcq", cycle=cycle("", ""))
  r = rp(pytester, )
  r.assert_outcomes(failed=1)
  lines(r, ["-- unexpected: 1 reported, not marked",
                          "cycle.hcq:5:3: error[deadlock]: q0 waits forever for t >= 1 (launch 1)*",
                          "      wait t >= 1", "  cycle.hcq:5:3: q0 waits for t >= 1 (launch 1), which q1 writes only at line 10"])
  assert "-- missing" not in r.stdout.str()

def test_wrong_code_is_missing_and_unexpected(pytester):
  pytester.makefile(".hcq", cycle=cycle("  # E: race", ""))
  r = rp(pytester, )
  r.assert_outcomes(failed=1)
  lines(r, ["-- missing: 1 marked, not reported", "cycle.hcq:5:18: error[race]: marked `E: race` here*",
                          "-- unexpected: 1 reported, not marked", "cycle.hcq:5:3: error[deadlock]: *"])

def test_expect_verified(pytester):
  pytester.makefile(".hcq", good=run("1, 2, 3, 4"), bad=run("1, 2, 3, 5"))
  r = rp(pytester, "-v")
  r.assert_outcomes(passed=3, failed=1)
  lines(r, ["bad.hcq::check PASSED*", "bad.hcq::run FAILED*", "good.hcq::check PASSED*", "good.hcq::run PASSED*"])
  lines(r, ["bad.hcq: `hcqdsl run --launches 2 --schedules 3`: 3 of 3 schedules failed",
                          "bad.hcq:13:1: error[expect]: `x` element 3: got *4*, expected *5*(1 of 4 differ) (seed 0)",
                          "    expect x == u32 [1, 2, 3, 5]", "*FAILED"])

def test_run_options(pytester):
  pytester.makefile(".hcq", off=run("9").replace("seeds=3", "run=no"))
  pytester.makeini("[pytest]\nhcq_run = false\n")
  pytester.makefile(".hcq", good=run("1, 2, 3, 4"))
  r = rp(pytester, "-v")
  r.assert_outcomes(passed=2)   # only the two check items: run=no in one file, hcq_run = false for all
  pytester.makeini("[pytest]\n")
  rp(pytester, "-rs").assert_outcomes(passed=3)

def test_runtime_missing_skips(pytester):
  pytester.makefile(".hcq", good=run("1, 2, 3, 4"))
  pytester.makeconftest("import sys\nsys.modules['hcqdsl.runtime'] = None  # as if the runtime could not be imported\n")
  r = rp(pytester, "-rs")
  r.assert_outcomes(passed=1, skipped=1)
  lines(r, ["*expects not verified: hcqdsl.runtime is not importable*"])

def test_bad_header_is_a_collection_error(pytester):
  pytester.makefile(".hcq", bad="# hcq: launches=two\n" + cycle("  # E: deadlock", ""))
  r = rp(pytester, )
  r.assert_outcomes(errors=1)
  lines(r, ["*bad.hcq: bad `# hcq:` header: line 1: `launches=two`: launches takes an integer*"])

def test_files_glob(pytester):
  pytester.makefile(".hcq", scenario_a=cycle("  # E: deadlock", ""), other="garbage {")
  pytester.makeini("[pytest]\nhcq_files = scenario_*.hcq\n")
  rp(pytester, ).assert_outcomes(passed=1)

def test_opt_out(pytester):
  pytester.makefile(".hcq", cycle=cycle("", ""))
  r = rp(pytester, "-p", "no:hcqdsl")
  assert r.ret == pytest.ExitCode.NO_TESTS_COLLECTED
  rp(pytester, ).assert_outcomes(failed=1)

def test_incomplete_verdict_is_never_a_pass():
  from hcqdsl.pytest_plugin import compare
  from hcqdsl.diagnostics import Diagnostic
  d = Diagnostic("incomplete", "exploring it exceeded the budget", None, severity="note")
  assert compare([], [d], "f.hcq") == ([], [d])

# ---- --hcq-sanitize: each test's call under hcqdsl's Sanitizer (a stand-in here; the real one in the peer tier)


class FakeFinding:
  def __init__(self, code, message): self.code, self.message, self.commands = code, message, []
  def format(self): return f"hcqdsl sanitize: {self.code}: {self.message}"
  def to_json(self): return {"code": self.code, "message": self.message, "commands": []}

class FakeSanitizer:
  """The Sanitizer's public surface: a test reaches the running one as `Sanitizer.current` and says what it submitted
  (`submit(n, finding)`), or that hcqdsl fails (`crash`: on exit when the test passed, kept in `failure` when it
  failed, as the real one does), or what was left unchecked (`incomplete`)."""
  current = None
  def __init__(self):
    self.findings, self.warnings, self.checks, self.n, self.crash, self.failure, self.incomplete = [], [], 0, 0, None, None, None
    self.capture = types.SimpleNamespace(submissions=lambda: self.n)
  def __enter__(self):
    FakeSanitizer.current = self
    return self
  def __exit__(self, *exc):
    FakeSanitizer.current = None
    if self.crash is not None:
      if exc[0] is None: raise self.crash
      self.failure = self.crash
    return False
  def submit(self, n=1, finding=None, warnings=0):
    self.n += n
    self.checks += 1
    self.warnings += [None] * warnings
    if finding: self.findings.append(FakeFinding(*finding))
  def report(self):
    return "\n".join([f.format() for f in self.findings] + [f"failed: {len(self.findings)} errors in {self.n} submissions"])

FAKE_TESTS = """
import pytest
import hcqdsl.tinygrad.sanitize as S
def submit(*a, **kw):   # what the real Sanitizer would see tinygrad submit (nothing sees it without --hcq-sanitize)
  if S.Sanitizer.current is not None: S.Sanitizer.current.submit(*a, **kw)
def test_clean(): submit(2, warnings=3)
def test_race(): submit(1, ("race", "copy0 reads b[0:64] and comp writes it"))
def test_own_failure_and_race():
  submit(1, ("deadlock", "q0 waits forever"))
  assert 1 == 2, "the test's own failure"
def test_no_amd(): pass
def test_skipped(): pytest.skip("not here")
"""

@pytest.fixture
def fake(monkeypatch):
  monkeypatch.setattr(sanitize_mod, "Sanitizer", FakeSanitizer)

def test_sanitize_findings_fail_the_test(pytester, fake):
  pytester.makepyfile(test_x=FAKE_TESTS)
  out = pytester.path / "out.json"
  r = rp(pytester, "-v", "-rfs", "--hcq-sanitize-json", str(out))   # the JSON option implies --hcq-sanitize
  r.assert_outcomes(passed=2, failed=2, skipped=1)
  lines(r, ["*test_clean PASSED*", "*test_race FAILED*", "*test_own_failure_and_race FAILED*", "*test_no_amd PASSED*",
            "*_ test_race _*", "hcqdsl sanitize: race: copy0 reads b[0:64] and comp writes it", "failed: 1 errors in 1 submissions",
            "*_ test_own_failure_and_race _*", "*AssertionError: the test's own failure*",
            "*- hcq-sanitize -*", "hcqdsl sanitize: deadlock: q0 waits forever",
            "hcq-sanitize: 4 tests sanitized, 4 submissions checked, 2 findings", f"hcq-sanitize: JSON written to {out}",
            "FAILED test_x.py::test_race - hcqdsl sanitize: race: copy0 reads*",   # (cut to the terminal's width)
            "FAILED test_x.py::test_own_failure_and_race - AssertionError: the test*"])
  rep = json.loads(out.read_text())
  assert rep["summary"] == {"tests": 4, "submissions": 4, "findings": 2, "errors": 0, "incomplete": 0}
  assert all(t["duration"] >= 0 for t in rep["tests"])
  got = {t["nodeid"].split("::")[1]: (t["outcome"], t["submissions"], [f["code"] for f in t["findings"]], t["warnings"])
         for t in rep["tests"]}
  assert got == {"test_clean": ("passed", 2, [], 3), "test_race": ("failed", 1, ["race"], 0),
                 "test_own_failure_and_race": ("failed", 1, ["deadlock"], 0), "test_no_amd": ("passed", 0, [], 0)}
  assert rep["tests"][1]["findings"][0] == {"code": "race", "message": "copy0 reads b[0:64] and comp writes it", "commands": []}

def test_sanitize_off_by_default(pytester, fake):
  pytester.makepyfile(test_x=FAKE_TESTS)
  r = rp(pytester)
  r.assert_outcomes(passed=3, failed=1, skipped=1)
  assert "hcq-sanitize" not in r.stdout.str()

def test_sanitize_hcqdsl_failure_is_reported_as_hcqdsl(pytester, fake):
  pytester.makepyfile(test_x="""
import hcqdsl.tinygrad.sanitize as S
def test_passes():
  S.Sanitizer.current.submit(1)
  S.Sanitizer.current.crash = KeyError("lift: no queue for ring 0x1000")
def test_fails_too():
  S.Sanitizer.current.crash = KeyError("lift: no queue for ring 0x2000")
  raise ValueError("the test's own error")
""")
  r = rp(pytester, "--hcq-sanitize")
  r.assert_outcomes(failed=2)
  lines(r, ["*_ test_passes _*",
            "hcq-sanitize: hcqdsl failed while checking this test's AMD submissions (an error in hcqdsl, not in the test: please report it)",
            "Traceback (most recent call last):", "*KeyError: 'lift: no queue for ring 0x1000'",
            "*_ test_fails_too _*", "*ValueError: the test's own error", "*- hcq-sanitize -*",
            "hcq-sanitize: hcqdsl failed while checking*", "*KeyError: 'lift: no queue for ring 0x2000'",
            "hcq-sanitize: 0 tests sanitized, 0 submissions checked, 0 findings",
            "hcq-sanitize: hcqdsl failed on 2 more tests, not counted above (their reports say where)",
            "FAILED test_x.py::test_passes - hcq-sanitize: hcqdsl failed*", "FAILED test_x.py::test_fails_too - ValueError: the test*"])

def test_sanitize_incomplete_is_said(pytester, fake):
  pytester.makepyfile(test_x="""
import hcqdsl.tinygrad.sanitize as S
def test_big():
  S.Sanitizer.current.submit(5)
  S.Sanitizer.current.incomplete = "launch 3 not checked: the state budget ran out"
""")
  r = rp(pytester, "--hcq-sanitize")
  r.assert_outcomes(passed=1)
  lines(r, ["hcq-sanitize: test_x.py::test_big: incomplete: launch 3 not checked: the state budget ran out",
            "hcq-sanitize: 1 test sanitized, 5 submissions checked, 0 findings"])

def test_sanitize_real_sanitizer_without_amd(pytester):
  """The real Sanitizer around tests that never touch an AMD device: sanitized, with 0 submissions."""
  pytester.makepyfile(test_x="def test_a(): pass\ndef test_b(): assert [1, 2] == [1, 2]\n")
  r = rp(pytester, "--hcq-sanitize")
  r.assert_outcomes(passed=2)
  lines(r, ["hcq-sanitize: 2 tests sanitized, 0 submissions checked, 0 findings"])

# -- the peer tier: the real Sanitizer on tinygrad's mock GPU

def _pytest_on_mock(cwd, *args, hcq2=False, timeout=600, **extra):
  """`python -m pytest ARGS` in a fresh process with tinygrad on the mock GPU (tinygrad picks its device on import);
  `.stdout` also matches fnmatch lines like pytester's."""
  r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", *map(str, args)],
                     capture_output=True, text=True, timeout=timeout, cwd=str(cwd), env=mock_env(hcq2, **extra))
  r.lines = pytest.LineMatcher(r.stdout.splitlines())
  return r

BUGGY_TESTS = """
import os, runpy, sys
os.environ["WORKLOAD"] = ""          # buggy_graph.py only injects its bug into HCQGraph; BUG switches it per test
sys.path.insert(0, @WORKLOADS@)
import buggy_graph
def run(bug):
  buggy_graph.BUG = os.environ["BUG"] = bug
  try: runpy.run_path(os.path.join(@WORKLOADS@, "multi_device.py"), run_name="__main__")
  finally: buggy_graph.BUG = os.environ["BUG"] = ""
def test_clean(): run("")
def test_dropped_dependency(): run("dep")
def test_dropped_dependency_and_fails():
  run("dep")
  assert False, "the test's own failure"
def test_no_amd(): pass
"""

@needs_mock
def test_sanitize_on_the_mock(pytester):
  pytester.makepyfile(test_tg=BUGGY_TESTS.replace("@WORKLOADS@", repr(str(WORKLOADS))))
  out = pytester.path / "out.json"
  r = _pytest_on_mock(pytester.path, "--hcq-sanitize", "--hcq-sanitize-json", out, "test_tg.py")
  assert r.returncode == pytest.ExitCode.TESTS_FAILED, r.stdout + r.stderr
  text = r.stdout
  lines(types.SimpleNamespace(stdout=r.lines), ["*_ test_dropped_dependency _*",
                                                "hcqdsl sanitize: race: copy0_gpu0* reads b_* and comp_gpu0* writes b_*",
            "  the first command: copy (b_*) on AMD (queue copy0_gpu0*)",
            f"    enqueued at {WORKLOADS / 'multi_device.py'}:20 in <module>: out = step(Tensor(xn).realize()).numpy()",
            "    stack (most recent call last):", "      *test_tg.py:* in test_dropped_dependency: def test_dropped_dependency(): run(\"dep\")",
            "*_ test_dropped_dependency_and_fails _*", "E   *AssertionError: the test's own failure", "*- hcq-sanitize -*",
            "hcqdsl sanitize: race: *", "hcq-sanitize: 4 tests sanitized, * submissions checked, * findings",
            "FAILED test_tg.py::test_dropped_dependency - hcqdsl sanitize: race: *",
            "FAILED test_tg.py::test_dropped_dependency_and_fails - AssertionError*", "*2 failed, 2 passed*"])
  assert "site-packages" not in text   # the stacks start at the test, not in pytest and pluggy
  rep = json.loads(out.read_text())
  by = {t["nodeid"].split("::")[1]: t for t in rep["tests"]}
  assert by["test_clean"]["findings"] == [] and by["test_clean"]["submissions"] > 0 and by["test_no_amd"]["submissions"] == 0
  assert {f["code"] for f in by["test_dropped_dependency"]["findings"]} == {"race"}
  assert rep["summary"]["submissions"] == sum(t["submissions"] for t in rep["tests"])

# -- tinygrad's own multi-GPU and JIT tests under --hcq-sanitize, on both of its paths (classic: 18 min on 2 cores)

TINYGRAD_TESTS = ("test/backend/test_multitensor.py", "test/backend/test_jit.py", "test/unit/test_jit.py", "test/unit/test_multitensor.py")
# tinygrad's tests that fail on their own on the mock: the peer checkout has no extra/lr_scheduler.py, examples/hlb_cifar10.py
OWN_FAILURES = {"unit/test_multitensor.py::TestMultiTensor::test_lr_scheduler_OneCycleLR",
                "unit/test_multitensor.py::TestBatchNorm::test_synced_vs_unsynced_bn",
                "unit/test_multitensor.py::TestBatchNorm::test_unsynced_backprop_conv_bn",
                "unit/test_multitensor.py::TestBatchNorm::test_unsynced_backprop_standalone_bn",
                "unit/test_multitensor.py::TestBatchNorm::test_unsynced_backprop_sync_weights"}
# and two that fail on tinygrad 0.14's hcq2 path without hcqdsl (checked: the same run without --hcq-sanitize)
OWN_FAILURES_HCQ2 = {"backend/test_jit.py::TestJit::test_jit_input_view", "backend/test_jit.py::TestJitFree::test_free_intermediates"}
# What --hcq-sanitize reports on them today (docs/sanitize.md, "tinygrad's own tests"): every finding and every failure
# of hcqdsl must be one of these kinds, each a real tinygrad bug; a new kind fails the test (a regression of the lift or
# check, or a new bug to write up under docs/findings/).
KINDS = {
  # tinygrad 0.14's missed input replacement (docs/findings/stale-jit-copy.md): the test's all-ones inputs hide it, its
  # body with a new value per call returns call 2's sum from call 3 on
  "stale-input": ("stale-input", r"is rebound, so launch 2's input is new memory .* \(an input replacement missed\)"),
  # hcq2 orders a copy into another device's memory after its source device's work only
  # (docs/findings/hcq2-cross-device-reuse.md): the copy and the destination device's kernel, in either order
  "cross-device": ("race", r"^(copy\d+_gpu(?P<a>\d+)\S* (writes|reads) b_\w+\[\d+:\d+\] at line \d+ \(launch \d+\) and "
                           r"comp_gpu(?!(?P=a)[_ ])\d+|comp_gpu(?P<b>\d+)\S* (writes|reads) b_\w+\[\d+:\d+\] at line \d+ "
                           r"\(launch \d+\) and copy\d+_gpu(?!(?P=b)[_ ])\d+)"),
}
KNOWN = {False: {"stale-input"}, True: {"cross-device"}}

def _kind(code: str, message: str):
  return next((k for k, (c, pat) in KINDS.items() if c == code and re.search(pat, message)), None)

@pytest.mark.slow
@needs_mock
@pytest.mark.skipif(not os.environ.get("HCQDSL_TINYGRAD_TESTS"), reason="tinygrad's own tests under --hcq-sanitize take 20 to 60 "
                    "minutes per path on 2 cores (beyond CI's budget): set HCQDSL_TINYGRAD_TESTS=1 to run them")
@pytest.mark.parametrize("hcq2", [False, True], ids=["classic", "hcq2"])
def test_tinygrad_tests_under_sanitize(tmp_path, hcq2):
  out = tmp_path / "sanitize.json"
  r = _pytest_on_mock(tinygrad_repo(), "-q", "-rf", "--hcq-sanitize-json", out, *TINYGRAD_TESTS, hcq2=hcq2, timeout=3 * 3600,
                      PYTHONDONTWRITEBYTECODE="1", COLUMNS="400")
  assert out.exists(), r.stdout[-3000:] + r.stderr[-3000:]
  rep = json.loads(out.read_text())
  s = rep["summary"]
  r.lines.fnmatch_lines([f"hcq-sanitize: {s['tests']} tests sanitized, {s['submissions']} submissions checked, {s['findings']} findings"])
  assert s["tests"] + s["errors"] == len(rep["tests"]) > 150 and s["submissions"] > 1000
  tests = {re.search(r"((?:backend|unit)/test_\w+\.py::.*)", t["nodeid"]).group(1): t for t in rep["tests"]}
  own = OWN_FAILURES | (OWN_FAILURES_HCQ2 if hcq2 else set())
  for name in OWN_FAILURES:   # a test that fails on its own keeps its own error
    assert tests[name]["outcome"] == "failed"
    r.lines.fnmatch_lines([f"FAILED *{name} - ModuleNotFoundError: No module named *"])
  kinds, unknown = collections.Counter(), []
  for name, t in tests.items():
    if t["outcome"] == "failed" and name not in own: assert t["findings"] or t["error"], name  # failed for the sanitizer
    for f in t["findings"]:
      k = _kind(f["code"], f["message"])
      if k is None: unknown.append(f"{name}: {f['code']}: {f['message']}")
      kinds[k] += 1
    if t["error"]:
      k = _kind("hcqdsl-error", t["error"])
      if k is None: unknown.append(f"{name}: hcqdsl failed: {t['error'].splitlines()[-1]}")
      kinds[k] += 1
  assert not unknown, "\n".join(unknown)
  assert set(kinds) <= KNOWN[hcq2], kinds

def test_sanitize_switched_on_by_the_environment(pytester, fake, monkeypatch):
  """HCQ_SANITIZE=1 (what switches the sanitizer on for `python train.py`) is `--hcq-sanitize` under pytest, and
  HCQ_SANITIZE=json:FILE is `--hcq-sanitize-json FILE`; a value that is neither is refused."""
  pytester.makepyfile(test_x=FAKE_TESTS)
  monkeypatch.setenv("HCQ_SANITIZE", "1")
  r = rp(pytester)
  r.assert_outcomes(passed=2, failed=2, skipped=1)
  lines(r, ["hcq-sanitize: 4 tests sanitized, 4 submissions checked, 2 findings"])
  out = pytester.path / "env.json"
  monkeypatch.setenv("HCQ_SANITIZE", f"json:{out}")
  rp(pytester).assert_outcomes(passed=2, failed=2, skipped=1)
  assert json.loads(out.read_text())["summary"]["findings"] == 2
  monkeypatch.setenv("HCQ_SANITIZE", "yes")
  r = rp(pytester)
  assert r.ret == pytest.ExitCode.USAGE_ERROR and "HCQ_SANITIZE='yes': give 1" in r.stderr.str(), r.stderr.str()
