"""The pytest plugin (hcqdsl/pytest_plugin.py) on small scenario files, through pytester."""
import pytest
from hcqdsl.pytest_plugin import parse_markers
from hcqdsl.header import read_header as parse_options, HeaderError as HcqSpecError
import hcqdsl.runtime, hcqdsl.check.analyze, hcqdsl.amd.compile  # noqa: F401
# imported here so that pytester's in-process runs keep them: numpy cannot be loaded twice, and the parser and
# checker would be imported (and lark's tables built) again in every run

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
