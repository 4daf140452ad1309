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
"""
from __future__ import annotations
import collections, fnmatch, os, re
import pytest
from .ir import Span
from .header import read_header, HeaderError
from .diagnostics import Diagnostic, render_text, split_lines

__all__ = ["parse_markers", "compare", "Marker", "HcqFile", "HcqCheckItem", "HcqRunItem"]

Marker = collections.namedtuple("Marker", "line column severity code")
SEVERITY = {"E": "error", "W": "warning"}
# a run of markers right after a `#`: `# E: race`, `# E: race W: visibility`, `# E: race, E: deadlock`
_RUN = re.compile(r"#[ \t]*((?:[EW]:[ \t]*[A-Za-z][\w-]*[ \t,]*)+)")
_ONE = re.compile(r"([EW]):[ \t]*([A-Za-z][\w-]*)")
_HEADER = re.compile(r"^\s*#\s*hcq:(.*)$")  # header lines carry no markers

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
  out = []
  for n, line in enumerate(split_lines(text), 1):
    c = _comment_start(line)
    if c < 0 or _HEADER.match(line): continue
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
    if d.code == "incomplete": unexpected.append(d); continue   # a verdict cut short matches no marker
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

def pytest_configure(config):
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
  def collect(self):
    self.text = self.path.read_bytes().decode("utf-8", errors="replace")
    self.filename = _display(self.path, self.config)
    try: self.options = read_header(self.text)
    except HeaderError as e: raise self.CollectError(f"{self.filename}: bad `# hcq:` header: {e}")
    item = HcqCheckItem.from_parent(self, name="check")
    item.add_marker("hcq_check")
    yield item
    if re.search(r"^\s*expect\b", self.text, re.M) and self.options.get("run", True) and self.config.getini("hcq_run"):
      item = HcqRunItem.from_parent(self, name="run")
      item.add_marker("hcq_run")
      yield item

class _Item(pytest.Item):
  def repr_failure(self, excinfo, style=None):
    if isinstance(excinfo.value, HcqFailure): return str(excinfo.value)
    return super().repr_failure(excinfo, style)

class HcqCheckItem(_Item):
  def runtest(self):
    from .check import check_text
    f = self.parent
    launches = f.options.get("launches", 2)
    diags = check_text(f.text, f.filename, launches)
    missing, unexpected = compare(parse_markers(f.text), diags, f.filename)
    if not missing and not unexpected: return
    src = {f.filename: f.text}
    out = [f"{f.filename}: `hcqdsl check --launches {launches}` differs from the file's markers"]
    if missing: out += [f"-- missing: {len(missing)} marked, not reported", render_text(missing, src).rstrip("\n")]
    if unexpected: out += [f"-- unexpected: {len(unexpected)} reported, not marked", render_text(unexpected, src).rstrip("\n")]
    raise HcqFailure("\n".join(out))

  def reportinfo(self): return self.path, 0, f"hcq check: {self.parent.filename}"

class HcqRunItem(_Item):
  def runtest(self):
    try:
      from .runtime import run, compare as compare_runs
    except ImportError as e:
      pytest.skip(f"expects not verified: hcqdsl.runtime is not importable ({e})")
    from .diagnostics import HcqError
    f = self.parent
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

  def reportinfo(self): return self.path, 0, f"hcq run: {self.parent.filename}"

def _expects(text: str, filename: str) -> list:
  from .check import parse_with_diagnostics
  prog, _ = parse_with_diagnostics(text, filename)
  return [] if prog is None else [e for e in prog.expects if e.span is not None]
