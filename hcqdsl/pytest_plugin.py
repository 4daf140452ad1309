"""pytest plugin: every `.hcq` file under the test paths is a test (see docs/scenarios.md).

Registered through the `pytest11` entry point, so it is on once hcqdsl is installed; `-p no:hcqdsl` turns it off.
Each file gives up to two items:

  FILE::check   `hcqdsl check` must report exactly the diagnostics the inline markers name, line by line:
                `# E: code` (error) / `# W: code` (warning) on the reported line; several per line as
                `# E: race W: visibility` (or `# E: race, E: race` for two reports of one code). No markers: clean.
  FILE::run     only when the file has `expect`s: run it on the built-in emulator; every expect must hold in every
                schedule, with no hang or fault (skipped when hcqdsl.runtime cannot be imported).

Header options, on comment lines starting `# hcq:` anywhere in the file: `launches=N` (both items; default: the CLIs'
defaults, 2 for check and 1 for run), `seeds=K` (run seeds 0..K-1; default one time-ordered run), `target=gfx1100`,
`run=no`. ini options: `hcq_files` (globs on file names, default `*.hcq`), `hcq_run` (default true).

`--hcq-sanitize` (docs/sanitize.md, "Every test under the sanitizer"): every test's call runs inside
`hcqdsl.tinygrad.sanitize.Sanitizer`; a test whose AMD submissions have findings fails with the sanitizer's report (a
test that fails on its own keeps its own error, the report is added as a section), hcqdsl's own failure fails the
test as hcqdsl's, and the run ends with `hcq-sanitize: N tests sanitized, M submissions checked, K findings`.
`--hcq-sanitize-json F` (implies `--hcq-sanitize`) writes one JSON object: per test its nodeid, outcome,
submissions, checks, findings (Finding.to_json), warnings (a count), incomplete, error and duration.
"""
from __future__ import annotations
import collections, fnmatch, json, os, re, traceback
from typing import Any, Optional
import pytest
from .ir import Span
from .header import read_header, header_lines, HeaderError
from .diagnostics import Diagnostic, render_text, split_lines

__all__ = ["parse_markers", "compare", "Marker", "HcqFile", "HcqCheckItem", "HcqRunItem", "SanitizePlugin"]

Marker = collections.namedtuple("Marker", "line column severity code")
SEVERITY = {"E": "error", "W": "warning"}
# a run of markers right after a `#`: `# E: race`, `# E: race W: visibility`, `# E: race, E: deadlock`
_RUN = re.compile(r"#[ \t]*((?:[EW]:[ \t]*[A-Za-z][\w-]*[ \t,]*)+)")
_ONE = re.compile(r"([EW]):[ \t]*([A-Za-z][\w-]*)")

def _comment_start(line: str) -> int:
  """Index of the `#` that opens the line's comment (outside "strings"), or -1."""
  inside = False
  i = 0
  while i < len(line):
    ch = line[i]
    if inside:
      if ch == "\\": i += 1
      elif ch == '"': inside = False
    elif ch == '"': inside = True
    elif ch == "#": return i
    i += 1
  return -1

def parse_markers(text: str) -> list[Marker]:
  out, headers = [], {n for n, _ in header_lines(text)}   # header lines carry no markers
  for n, line in enumerate(split_lines(text), 1):
    c = _comment_start(line)
    if c < 0 or n in headers: continue
    for run in _RUN.finditer(line, c):
      for m in _ONE.finditer(run.group(1)):
        out.append(Marker(n, run.start(1) + m.start() + 1, SEVERITY[m.group(1)], m.group(2)))
  return out

def compare(markers: list, diags: list, filename: str) -> tuple[list, list]:
  """(missing, unexpected) as Diagnostics: markers no diagnostic matches (a stand-in at the marker), and reported
  errors/warnings no marker names (and an `incomplete` note: such a verdict passes nothing). Matching is by (line,
  severity, code), counting duplicates; other notes are ignored."""
  want = collections.Counter((m.line, m.severity, m.code) for m in markers)
  unexpected = []
  for d in diags:
    if d.code == "incomplete":  # a verdict cut short matches no marker
      unexpected.append(d)
      continue
    if d.severity not in ("error", "warning"): continue
    key = (d.span.line if d.span else 0, d.severity, d.code)
    if want[key] > 0: want[key] -= 1
    else: unexpected.append(d)
  missing = []
  for m in markers:
    key = (m.line, m.severity, m.code)
    if want[key] > 0:
      want[key] -= 1
      tag = "E" if m.severity == "error" else "W"
      missing.append(Diagnostic(m.code, f"marked `{tag}: {m.code}` here, but check reports no such {m.severity} on this line",
                                Span(filename, m.line, m.column, m.line, m.column + len(tag) + 2 + len(m.code)),
                                severity=m.severity))
  return missing, unexpected

class HcqFailure(Exception):
  """A scenario that does not behave as written; the message is the whole report."""

# ---- hooks

def pytest_addoption(parser):
  parser.addini("hcq_files", type="args", default=["*.hcq"],
                help="glob(s) of .hcq scenario files to collect as tests (hcqdsl plugin)")
  parser.addini("hcq_run", type="bool", default=True,
                help="run scenario files with `expect`s on the built-in emulator (hcqdsl plugin)")
  g = parser.getgroup("hcqdsl")
  g.addoption("--hcq-sanitize", action="store_true", default=False,
              help="run every test under hcqdsl's sanitizer: a test whose tinygrad AMD submissions have races or "
                   "deadlocks fails with the report (docs/sanitize.md)")
  g.addoption("--hcq-sanitize-json", metavar="FILE", default=None,
              help="with --hcq-sanitize (implied): write each test's submissions and findings to FILE as JSON")

def pytest_configure(config):
  env = _env_setting()   # HCQ_SANITIZE=1 is --hcq-sanitize, HCQ_SANITIZE=json:FILE --hcq-sanitize-json FILE
  if config.getoption("hcq_sanitize", False) or config.getoption("hcq_sanitize_json", None) or env:
    config.pluginmanager.register(SanitizePlugin(config, env), "hcqdsl-sanitize")
  config.addinivalue_line("markers", "hcq_check: a .hcq scenario's `check` against its inline markers")
  config.addinivalue_line("markers", "hcq_run: a .hcq scenario's `expect`s verified on the emulator")

def pytest_collect_file(file_path, parent):
  globs = parent.config.getini("hcq_files")
  if any(fnmatch.fnmatch(file_path.name, g) for g in globs):
    return HcqFile.from_parent(parent, path=file_path)
  return None

def _display(path, config) -> str:
  """The file name diagnostics show: relative to where pytest was started, as a user would pass it to the CLI."""
  try: return os.path.relpath(path, config.invocation_params.dir)
  except ValueError: return str(path)

class HcqFile(pytest.File):
  text: str
  filename: str
  options: dict[str, Any]
  def collect(self):
    self.text = self.path.read_bytes().decode("utf-8", errors="replace")
    self.filename = _display(self.path, self.config)
    try: self.options = read_header(self.text)
    except HeaderError as e: raise self.CollectError(f"{self.filename}: bad `# hcq:` header: {e}")
    check = HcqCheckItem.from_parent(self, name="check")
    check.add_marker("hcq_check")
    yield check
    if re.search(r"^\s*expect\b", self.text, re.M) and self.options.get("run", True) and self.config.getini("hcq_run"):
      item = HcqRunItem.from_parent(self, name="run")
      item.add_marker("hcq_run")
      yield item

class _Item(pytest.Item):
  # no fixtures, said the way pytest's own Function items say it: pytest-lsp 1.0's pytest_runtest_call wrapper returns
  # without yielding (pluggy's "did not yield" error) on an item with no `funcargs`, so every .hcq test failed where
  # pytest-lsp is installed (the `test` extra has it)
  funcargs: dict = {}

  @property
  def file(self) -> HcqFile:
    assert isinstance(self.parent, HcqFile)
    return self.parent
  def repr_failure(self, excinfo, style=None):
    if isinstance(excinfo.value, HcqFailure): return str(excinfo.value)
    return super().repr_failure(excinfo, style)

class HcqCheckItem(_Item):
  def runtest(self):
    from .check import check_text
    f = self.file
    launches = f.options.get("launches", 2)
    diags = check_text(f.text, f.filename, launches)
    missing, unexpected = compare(parse_markers(f.text), diags, f.filename)
    if not missing and not unexpected: return
    src = {f.filename: f.text}
    out = [f"{f.filename}: `hcqdsl check --launches {launches}` differs from the file's markers"]
    if missing: out += [f"-- missing: {len(missing)} marked, not reported", render_text(missing, src).rstrip("\n")]
    if unexpected: out += [f"-- unexpected: {len(unexpected)} reported, not marked", render_text(unexpected, src).rstrip("\n")]
    raise HcqFailure("\n".join(out))

  def reportinfo(self): return self.path, 0, f"hcq check: {self.file.filename}"

class HcqRunItem(_Item):
  def runtest(self):
    try:
      from .runtime import run, compare as compare_runs
    except ImportError as e:
      pytest.skip(f"expects not verified: hcqdsl.runtime is not importable ({e})")
    from .diagnostics import HcqError
    f = self.file
    launches, seeds = f.options.get("launches", 1), f.options.get("seeds")
    seed_list = list(range(seeds)) if seeds else [None]
    kw = dict(launches=launches, filename=f.filename, target=f.options.get("target", "gfx1100"))
    src = {f.filename: f.text}
    try: results = [run(f.text, seed=s, **kw) for s in seed_list]
    except HcqError as e:
      raise HcqFailure(f"{f.filename}: cannot run\n" + render_text(e.diagnostics, src).rstrip("\n"))
    bad = [r for r in results if not r.ok]
    races = compare_runs(results)
    if not bad and not races: return
    how = f"--launches {launches}" + (f" --schedules {seeds}" if seeds else "")
    out = [f"{f.filename}: `hcqdsl run {how}`: {len(bad)} of {len(results)} schedule{'s' * (len(results) != 1)} failed"]
    spans = {e.span.line: e.span for e in _expects(f.text, f.filename)}
    for r in bad[:3]:
      sched = "time-ordered schedule" if r.seed is None else f"seed {r.seed}"
      failed = [Diagnostic("expect", f"{e.message} ({sched})", spans.get(e.line, Span(f.filename, e.line, 1, e.line, 1)))
                for e in r.expects if not e.ok]
      if failed: out.append(render_text(failed, src).rstrip("\n"))
      out.append(r.summary())
    out += [str(x) for x in races]
    raise HcqFailure("\n".join(out))

  def reportinfo(self): return self.path, 0, f"hcq run: {self.file.filename}"

def _expects(text: str, filename: str) -> list:
  from .check import parse_with_diagnostics
  prog, _ = parse_with_diagnostics(text, filename)
  return [] if prog is None else [e for e in prog.expects if e.span is not None]


# ---- --hcq-sanitize: every test's call under the sanitizer

def _plural(n: int, word: str) -> str: return f"{n} {word}{'s' * (n != 1)}"

class SanitizePlugin:
  """Registered by `--hcq-sanitize`. The call phase of each test runs inside a Sanitizer (fixtures' setup and teardown
  do not; a unittest TestCase's setUp and tearDown do, they run in the call). What the sanitizer saw is kept on the
  call's report (`report.hcq_sanitize`, a JSON-able dict), so the summary and the JSON file are made from reports."""
  def __init__(self, config, env: Optional[tuple] = None):
    self.config = config
    self.json_path = config.getoption("hcq_sanitize_json", None) or (env[1] if env and env[0] == "json" else None)
    self.json_note = f"hcq-sanitize: JSON written to {self.json_path}"
    if self.json_path: self.json_path = _json_output(self.json_path, config)
    self.results: list = []
    self.running: dict = {}   # nodeid -> the record of the test whose call is running or just ran

  @pytest.hookimpl(hookwrapper=True)
  def pytest_runtest_call(self, item):
    rec = {"nodeid": item.nodeid, "outcome": None, "submissions": 0, "checks": 0, "findings": [], "warnings": 0,
           "incomplete": None, "error": None, "report": None}
    self.running[item.nodeid] = rec
    s = None
    try:
      from .tinygrad.sanitize import Sanitizer
      s = Sanitizer()
      s.__enter__()
    except Exception as e:
      s = None
      rec["error"] = _hcq_error("could not start the sanitizer", e)
    outcome = yield
    if s is None: return
    exc = outcome.excinfo or (None, None, None)
    try: s.__exit__(*exc)
    except Exception as e: rec["error"] = _hcq_error("failed while checking this test's AMD submissions", e)
    try:
      failure = getattr(s, "failure", None)   # hcqdsl's failure in a check while the test ran (kept, not raised, when the test failed)
      if failure is not None and rec["error"] is None:
        rec["error"] = _hcq_error("failed while checking this test's AMD submissions", failure)
      _trim_stacks(s)
      rec["submissions"], rec["checks"] = s.capture.submissions(), s.checks
      rec["findings"] = [f.to_json() for f in s.findings]
      rec["warnings"] = len(s.warnings)
      rec["incomplete"] = getattr(s, "incomplete", None)
      if s.findings: rec["report"] = s.report()
    except Exception as e:
      if rec["error"] is None: rec["error"] = _hcq_error("failed reading the sanitizer's results", e)

  @pytest.hookimpl(hookwrapper=True, tryfirst=True)   # outermost: sees the report after xfail's changes
  def pytest_runtest_makereport(self, item, call):
    outcome = yield
    if call.when != "call": return
    rec = self.running.pop(item.nodeid, None)
    if rec is None: return
    rep = outcome.get_result()
    problem = "\n\n".join(x for x in (rec["report"], rec["error"]) if x)
    if problem:
      if rep.passed:   # the test passed on its own: it fails with the sanitizer's report (or hcqdsl's failure)
        rep.outcome, rep.longrepr = "failed", problem
        if hasattr(rep, "wasxfail"): del rep.wasxfail
      else:            # its own failure stays its failure text; the sanitizer's report is added as a section
        rep.sections.append(("hcq-sanitize", problem))
    elif rec["incomplete"]:
      rep.sections.append(("hcq-sanitize", f"hcq-sanitize: incomplete: {rec['incomplete']}"))
    rec["outcome"] = "xfailed" if rep.skipped and hasattr(rep, "wasxfail") else rep.outcome
    rec["duration"] = round(getattr(rep, "duration", 0.0), 3)   # the call's, with the sanitizer's checks
    del rec["report"]
    rep.hcq_sanitize = rec

  def pytest_runtest_logreport(self, report):
    rec = getattr(report, "hcq_sanitize", None)
    if report.when == "call" and rec is not None and rec["outcome"] != "skipped": self.results.append(rec)

  def summary(self) -> dict:
    """Tests on which hcqdsl failed are not counted as sanitized (nor their submissions as checked): `errors`."""
    ok = [r for r in self.results if r["error"] is None]
    return {"tests": len(ok), "submissions": sum(r["submissions"] for r in ok), "findings": sum(len(r["findings"]) for r in ok),
            "errors": len(self.results) - len(ok), "incomplete": sum(bool(r["incomplete"]) for r in ok)}

  def pytest_terminal_summary(self, terminalreporter):
    t = self.summary()
    tr = terminalreporter
    for r in self.results:
      if r["incomplete"]: tr.write_line(f"hcq-sanitize: {r['nodeid']}: incomplete: {r['incomplete']}")
    tr.write_line(f"hcq-sanitize: {_plural(t['tests'], 'test')} sanitized, {_plural(t['submissions'], 'submission')} "
                  f"checked, {_plural(t['findings'], 'finding')}")
    if t["errors"]: tr.write_line(f"hcq-sanitize: hcqdsl failed on {_plural(t['errors'], 'more test')}, not counted above (their reports say where)")
    if self.json_path: tr.write_line(self.json_note)

  def pytest_sessionfinish(self, session):
    if not self.json_path or hasattr(session.config, "workerinput"): return   # an xdist worker: the controller writes it
    from .files import write_atomic
    text = json.dumps({"summary": self.summary(), "tests": self.results}, indent=1) + "\n"
    try: write_atomic(self.json_path, text)
    except OSError as e:   # (checked writable before the tests ran; it changed since): the results go elsewhere, not lost
      import tempfile
      fd, kept = tempfile.mkstemp(prefix="hcq-sanitize-", suffix=".json")
      with os.fdopen(fd, "w", encoding="utf-8") as f: f.write(text)
      self.json_note = f"hcq-sanitize: could not write --hcq-sanitize-json {e.filename}: {e.strerror}; the JSON is in {kept}"

def _json_output(path: str, config) -> str:
  """The --hcq-sanitize-json path, checked before any test runs (its results would be lost at the end): writable,
  and not a file it would destroy — a file given to pytest, or any existing file that is not an earlier report."""
  from .files import check_writable, same_file
  full = os.path.join(str(config.invocation_params.dir), path)
  flag = f"--hcq-sanitize-json {path}"
  for arg in config.args:
    if same_file(full, os.path.join(str(config.invocation_params.dir), arg.split("::")[0])):
      raise pytest.UsageError(f"{flag} is the test path {arg}: writing the report would overwrite it; give another file")
  try: check_writable(full)
  except OSError as e: raise pytest.UsageError(f"{flag}: {e.strerror}{f' ({e.filename})' if e.filename != full else ''}") from None
  if os.path.isfile(full) and os.path.getsize(full):
    try:
      with open(full, "rb") as f: held = json.loads(f.read(1 << 26))
      earlier = isinstance(held, dict) and set(held) == {"summary", "tests"}
    except (OSError, ValueError): earlier = False
    if not earlier:
      raise pytest.UsageError(f"{flag} exists and is not an earlier hcq-sanitize report: writing would overwrite it; give another file")
  return full

def _env_setting() -> Optional[tuple]:
  """HCQ_SANITIZE's setting (hcqdsl/tinygrad/autostart.py), or None; a bad value is a usage error of the run."""
  if os.environ.get("HCQ_SANITIZE", "").strip() in ("", "0"): return None
  from .tinygrad.autostart import setting, SettingError
  try: return setting()
  except SettingError as e: raise pytest.UsageError(str(e)) from None

def _runner_dirs() -> tuple:
  import _pytest, pluggy
  return tuple(os.path.dirname(os.path.abspath(str(m.__file__))) + os.sep for m in (pytest, _pytest, pluggy))

def _trim_stacks(s) -> None:
  """Drop pytest's and pluggy's frames from the findings' stacks (the sanitizer keeps every frame outside tinygrad,
  hcqdsl and Python's own library; under pytest a stack would start with some 30 of the runner's): each stack starts
  at the test."""
  dirs = _runner_dirs()
  def keep(stack): return [f for f in stack if not os.path.abspath(str(f[0])).startswith(dirs)] if stack else stack
  for f in s.findings:
    for c in getattr(f, "commands", None) or ():
      if isinstance(getattr(c, "stack", None), list): c.stack = keep(c.stack)
  if isinstance(getattr(s, "detected_at", None), list): s.detected_at = keep(s.detected_at)

def _hcq_error(what: str, e: BaseException) -> str:
  tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip("\n")
  return (f"hcq-sanitize: hcqdsl {what} (an error in hcqdsl, not in the test: please report it)\n{tb}")
