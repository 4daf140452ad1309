"""Diagnostics: what every stage reports, and how it is printed (text with carets, JSON, SARIF)."""
from __future__ import annotations
import json
from collections import Counter, deque
from operator import attrgetter
from itertools import repeat
from typing import Any, Optional, Sequence
import attrs
from .ir import Span, split_lines

__all__ = ["Diagnostic", "LazyDiagnostic", "Related", "Edit", "TextEdit", "HcqError", "render_text", "render_json", "render_sarif", "CODES",
           "has_errors",
           "head_lines",
           "split_lines", "printable", "summary", "did_you_mean",
           "Rule", "RULES", "explain"]

# code -> one-line meaning (the spec's stable codes, plus warnings of the checker)
CODES = {
  "syntax": "the text does not parse",
  "name": "an unknown, duplicate or misused name",
  "deadlock": "in some execution a queue (or the host) waits forever",
  "race": "two unordered accesses to overlapping bytes of a buffer, at least one a write",
  "signal-race": "two unordered writes to one signal",
  "non-monotonic": "a write that lowers a signal while another sequence may wait on or write it",
  "overflow": "a signal value outside 32 bits",
  "bounds": "a byte range outside its buffer, or a copy whose sides differ in length",
  "redundant-wait": "a wait already implied by happens-before",
  "unused-signal": "a signal written but never waited on",
  "visibility": "a compute read the packets let see stale data (no barrier where one is needed)",
  "stale-input": "a launch's command reads an earlier launch's rebound input (input replacement missed)",
  "incomplete": "exhaustive exploration ran past its state budget: the verdict covers the states explored",
  "unused-ignore": "a `# hcq: ignore[CODE]` comment that suppresses nothing on its line",
}

@attrs.frozen
class Rule:
  """What `hcqdsl check --explain CODE` prints and SARIF's rule carries: what the code means, a short program that
  draws it (`example`), the same program fixed (`fixed`, None where no edit applies), how to fix it, and where the
  docs say more."""
  description: str
  example: str
  fixed: Optional[str]
  fix: str
  doc: str   # docs/FILE.md#anchor

_G = "device g = AMD:0 gfx1100\n"
_RACE = (_G + "buffer a on g size 4K\nbuffer b on g size 4K\nsignal done on g\nsignal copied on g\nvar kick\n"
         "kernel fill(out dst)\nqueue c compute on g {\n  wait copied >= kick - 1\n  exec fill(a)\n  signal done = kick\n}\n"
         "queue x copy on g {\n  wait done >= kick\n  copy b <- a\n  signal copied = kick\n}\nhost {\n  wait copied >= kick\n}\n")
RULES = {
  "syntax": Rule("The text does not parse: a misspelled keyword, a missing `>=`, a block left open, a keyword used as "
                 "a name, a statement in the wrong block, a file that is not text.",
                 _G + "signal s on g\nqueue q compute on g {\n  wiat s >= 1\n}\n",
                 _G + "signal s on g\nqueue q compute on g {\n  wait s >= 1\n}\n",
                 "Edit the text where the caret points; the message says what was expected there (and the keyword "
                 "you probably meant).", "language.md#diagnostics"),
  "name": Rule("A name that is unknown, declared twice or of the wrong kind (a buffer passed as a signal, an `exec` on a "
               "copy queue, a wrong argument count).",
               _G + "signal ready on g\nqueue q compute on g {\n  wait raedy >= 1\n}\n",
               _G + "signal ready on g\nqueue q compute on g {\n  wait ready >= 1\n}\n",
               "Use the declared name the message suggests, or declare the one you meant.", "language.md#diagnostics"),
  "bounds": Rule("A byte range outside its buffer (or empty, or reversed), a copy whose sides differ in length, data "
                 "longer than its buffer, a memory plan the target cannot address, a `launches` range that is empty, starts at 0 "
                 "or lies past the launches asked for.",
                 _G + "buffer a on g size 4K\nkernel fill(out dst)\nqueue q compute on g {\n  exec fill(a[2K:6K])\n}\n",
                 _G + "buffer a on g size 4K\nkernel fill(out dst)\nqueue q compute on g {\n  exec fill(a[2K:4K])\n}\n",
                 "Keep ranges inside the buffer (`a[lo:hi]` with hi <= its size), or make the buffer bigger.",
                 "language.md#diagnostics"),
  "overflow": Rule("A signal value outside 32 bits: signals are 32-bit memory, and a value past 2**32-1 would wrap in the "
                   "packets (a literal, a `var + n` in some launch, a `--var`).",
                   _G + "signal s on g\nqueue q compute on g {\n  wait s >= 4294967296\n}\n",
                   _G + "signal s on g\nqueue q compute on g {\n  wait s >= 4294967295\n}\n",
                   "Keep values in 0 .. 4294967295; for a var, check the launches it is checked over (`--launches`).",
                   "check.md#overflow-error"),
  "deadlock": Rule("In some execution a queue (or the host) waits for a value no remaining write brings: a cycle of "
                   "waits, a wait for a signal nothing writes, a wait for a later launch's value, or a `poll` whose word "
                   "no remaining `write` makes `(word & mask) == value` (none stores it, a later store undid it before "
                   "the poll looked, or the value has a bit outside the mask).",
                   _G + "signal s on g\nsignal t on g\nqueue a compute on g {\n  wait t >= 1\n  signal s = 1\n}\n"
                   "queue b compute on g {\n  wait s >= 1\n  signal t = 1\n}\n",
                   _G + "signal s on g\nsignal t on g\nqueue a compute on g {\n  signal s = 1\n  wait t >= 1\n}\n"
                   "queue b compute on g {\n  wait s >= 1\n  signal t = 1\n}\n",
                   "Follow the cycle the report lists and apply its `fix:` note (a signal moved above the wait that "
                   "blocks its writer, or a wait for the value the signal already holds). `hcqdsl run FILE --replay "
                   "W.json` (after `check --witness W.json`) shows the hang.", "check.md#deadlock-error"),
  "race": Rule("Two accesses to overlapping bytes of a buffer, at least one a write, with no happens-before order "
               "between them: the result depends on which runs first (within a launch, or across launches).",
               _RACE.replace("  wait done >= kick\n  copy", "  copy"), _RACE,
               "Add the wait the `fix:` note names (on a signal the other side writes after its access) before the "
               "later access. `check --witness W.json` then `run FILE --replay W.json` shows the race happen.",
               "check.md#race-error"),
  "signal-race": Rule("Two writes to one signal from different queues (or the host) with no order between them: its "
                      "final value depends on the schedule, and waits on it may pass or hang by chance.",
                      _G + "signal s on g\nvar kick\nqueue a compute on g {\n  signal s = kick\n}\nqueue b compute on g {\n"
                      "  signal s = kick\n}\nhost {\n  wait s >= kick\n}\n",
                      _G + "signal s on g\nsignal t on g\nvar kick\nqueue a compute on g {\n  signal s = kick\n}\n"
                      "queue b compute on g {\n  signal t = kick\n}\nhost {\n  wait s >= kick\n  wait t >= kick\n}\n",
                      "Give each signal one writer (or order the writers with a wait).", "check.md#signal-race-error"),
  "non-monotonic": Rule("A write that lowers a signal (a reset) while another queue may still wait on it or write it: "
                        "a wait can miss its value and hang, or pass early. The usual case: the host resets signals "
                        "for the next launch while the previous launch still uses them.",
                        _G + "signal level on g\nqueue a compute on g {\n  signal level = 2\n  signal level = 1\n}\n"
                        "queue b compute on g {\n  wait level >= 1\n}\n",
                        _G + "signal level on g\nvar kick\nqueue a compute on g {\n  signal level = kick\n}\n"
                        "queue b compute on g {\n  wait level >= kick\n}\n",
                        "Write values that only grow (`signal s = kick`, as tinygrad's timelines do), or order the "
                        "lowering write after every other use (the host: wait for the previous launch, "
                        "`wait D.timeline >= D.epoch - 1`, before its resets).", "check.md#non-monotonic-error"),
  "redundant-wait": Rule("A wait that happens-before already implies in every checked launch: it orders nothing and costs "
                         "a packet.",
                         _G + "signal s on g\nqueue a compute on g {\n  signal s = 1\n}\nqueue b compute on g {\n"
                         "  wait s >= 1\n  wait s >= 1\n}\n",
                         _G + "signal s on g\nqueue a compute on g {\n  signal s = 1\n}\nqueue b compute on g {\n  wait s >= 1\n}\n",
                         "Delete it, or `# hcq: ignore[redundant-wait]` on its line if it is there for code outside the "
                         "program.", "check.md#redundant-wait-warning"),
  "unused-signal": Rule("A signal written but waited on by nobody (a device's `D.timeline` is exempt: it is waited on "
                        "outside the program).",
                        _G + "signal progress on g\nqueue a compute on g {\n  signal progress = 1\n}\n", None,
                        "Wait on it where its writer's work is needed, or drop the write.", "check.md#unused-signal-warning"),
  "visibility": Rule("A compute read the packets let see stale data (docs/check.md, cache semantics): the host wrote the "
                     "device's memory (a `rewritten` buffer, patched kernel arguments) and no `barrier` (HDP flush) "
                     "of that device's compute queues comes between; or, on gfx942, another writer replaced bytes the "
                     "reading device's L2 may still hold, with no L2 invalidation after the wait.",
                     _G + "buffer w on g size 8 rewritten = u32 [1], u32 [2]\nkernel use(in src)\n"
                     "queue q compute on g {\n  exec use(w)\n}\n",
                     _G + "buffer w on g size 8 rewritten = u32 [1], u32 [2]\nkernel use(in src)\n"
                     "queue q compute on g {\n  barrier\n  exec use(w)\n}\n",
                     "Put a `barrier` before the read, after the write (tinygrad: `memory_barrier` at the start of the "
                     "graph, after the host's writes).", "check.md#visibility-warning"),
  "stale-input": Rule("A launch's command reads the memory of an earlier launch's `rebound` input (`x@k`): the input "
                      "was replaced, but this command kept the address it was captured with (tinygrad's HCQGraph "
                      "missing an input replacement, docs/findings/).",
                      _G + "buffer a on g size 16 rebound = u32 [1], u32 [2]\nbuffer b on g size 16\n"
                      "queue x copy on g {\n  epoch\n  copy b <- a@1\n  signal g.timeline = g.epoch\n}\n"
                      "host {\n  wait g.timeline >= g.epoch - 1\n}\n",
                      _G + "buffer a on g size 16 rebound = u32 [1], u32 [2]\nbuffer b on g size 16\n"
                      "queue x copy on g {\n  epoch\n  copy b <- a\n  signal g.timeline = g.epoch\n}\n"
                      "host {\n  wait g.timeline >= g.epoch - 1\n}\n",
                      "Read the launch's own input (`a`, not `a@1`): in tinygrad, replace the input's address in that "
                      "command at every call.", "check.md#stale-input-error"),
  "incomplete": Rule("The program is outside the fragment where happens-before is exact, and exploring its states ran "
                     "past `--max-states`: the problems listed come from the states explored, others may be missing.",
                     "(any program whose check says `exploring it exceeded the budget`; try `--max-states 10` on "
                     "programs/hcqgraph_kickoff.hcq)", None,
                     "Raise `--max-states`, or order the writes the note names so the program is in the exact fragment.",
                     "check.md#the-model"),
  "unused-ignore": Rule("A `# hcq: ignore[CODE]` comment on a line where no CODE diagnostic is reported: the problem it "
                        "silenced is gone (or the code is misspelled).",
                        _G + "signal s on g\nqueue a compute on g {\n  signal s = 1  # hcq: ignore[race]\n}\nhost {\n  wait s >= 1\n}\n",
                        _G + "signal s on g\nqueue a compute on g {\n  signal s = 1\n}\nhost {\n  wait s >= 1\n}\n",
                        "Delete the comment (or the codes in it that no longer apply).", "check.md#suppressing-a-diagnostic"),
}

def explain(code: str) -> str:
  """`hcqdsl check --explain CODE`: what it means, an example, the example fixed, how to fix it, where to read more."""
  r = RULES[code]
  sev = "note" if code == "incomplete" else "warning" if code in ("redundant-wait", "unused-signal", "visibility", "unused-ignore") else "error"
  out = [f"{code} ({sev}): {CODES[code]}", "", r.description, "", "Example:", ""]
  out += ["    " + l for l in r.example.rstrip("\n").split("\n")]
  if r.fixed is not None: out += ["", "Fixed:", ""] + ["    " + l for l in r.fixed.rstrip("\n").split("\n")]
  return "\n".join(out + ["", f"How to fix: {r.fix}", "", f"More: docs/{r.doc}", ""])

@attrs.frozen
class Related:
  """A secondary location: a hop of a cycle, the other access of a race, a note."""
  message: str
  span: Optional[Span] = None

@attrs.frozen
class Edit:
  """A concrete fix: insert `stmts` (IR statements) into the block of queue `block` (or "host", the first host block;
  "host 2" the second: `host_block`) before its statement number `index` (0-based; the block's length: at its end), or
  replace that statement with them (`replace`). `text` says it in words, with the line where the edit goes."""
  block: str
  index: int
  stmts: tuple
  text: str
  replace: bool = False

def host_block(n: int) -> str:
  """An Edit's name of the program's host block n (0-based): `host`, then `host 2`, `host 3`, ..."""
  return "host" if n == 0 else f"host {n + 1}"

def edit_block(program, name: str):
  """The block (queue, or host block) an Edit names; None if there is none (a host block the edit would make)."""
  from .ir import Queue, Host
  hosts = [d for d in program.decls if isinstance(d, Host)]
  if name == "host" or name.startswith("host "):
    n = 0 if name == "host" else int(name.split()[1]) - 1
    return hosts[n] if n < len(hosts) else None
  return next((d for d in program.decls if isinstance(d, Queue) and d.name == name), None)

@attrs.frozen
class TextEdit:
  """An edit of a file's text: the text from (line, column) up to (end_line, end_column) — 1-based, the end
  excluded; equal ends: an insertion — replaced by `text`. A fix (`Edit`) as text: hcqdsl/check/fixes.py makes them,
  JSON and SARIF carry them, `check --fix` applies them."""
  line: int
  column: int
  end_line: int
  end_column: int
  text: str
  def to_json(self) -> dict[str, Any]:
    return {"content": self.text, "location": {"line": self.line, "column": self.column},
            "end_location": {"line": self.end_line, "column": self.end_column}}
  def to_sarif(self) -> dict[str, Any]:
    """A SARIF 2.1.0 `replacement` (an insertion's deletedRegion is empty: its end is its start)."""
    return {"deletedRegion": {"startLine": self.line, "startColumn": self.column, "endLine": self.end_line, "endColumn": self.end_column},
            "insertedContent": {"text": self.text}}

@attrs.frozen
class Diagnostic:
  code: str
  message: str
  span: Optional[Span]
  severity: str = "error"  # error | warning | note
  related: tuple = ()      # of Related, printed indented under the diagnostic
  notes: tuple = ()        # of str, free text printed after the related locations
  extra: dict = attrs.field(factory=dict, eq=False)  # launch, queue, buffer, range, ... (JSON only)
  fix: Optional[Edit] = attrs.field(default=None, eq=False)    # the edit the notes suggest, when it is one
  cause: Optional[tuple] = attrs.field(default=None, eq=False)  # the root cause's key() when this follows from it

  def key(self) -> tuple:
    """(code, file, line, column): how a consequence names its cause."""
    s = self.span
    return (self.code, s.file if s else None, s.line if s else None, s.column if s else None)

  def __str__(self) -> str: return render_text([self]).rstrip("\n")

  def to_json(self) -> dict[str, Any]:
    s = self.span
    out: dict[str, Any] = {"code": self.code, "severity": self.severity, "file": s.file if s else None, "line": s.line if s else None,
           "column": s.column if s else None, "end_line": s.end_line if s else None,
           "end_column": s.end_column if s else None, "message": self.message,
           "related": [{"message": r.message, **({"file": r.span.file, "line": r.span.line, "column": r.span.column}
                                                  if r.span else {})} for r in self.related],
           "notes": list(self.notes)}
    if self.cause is not None: out["cause"] = dict(zip(("code", "file", "line", "column"), self.cause))
    out.update(self.extra)
    return out

_SLOT = {f: Diagnostic.__dict__[f] for f in ("message", "related", "extra")}

def _lazy_field(name: str):
  slot = _SLOT[name]
  def get(self):
    try: return slot.__get__(self)
    except AttributeError:  # not built yet
      build, args = self._args
      for f, v in zip(("message", "related", "extra"), build(args)): _SLOT[f].__set__(self, v)
      return slot.__get__(self)
  return property(get, doc=f"the diagnostic's {name}, built on first use")

class LazyDiagnostic(Diagnostic):
  """A Diagnostic whose message, related locations and extra fields are built when first read, by `build(args)` ->
  (message, related, extra): a big program can draw a hundred thousand warnings of one kind, of which the text report
  prints twenty. A subclass per kind sets `code` and `severity`; an instance holds only its span and (build, args).
  It is equal to, hashes like and prints as the Diagnostic with the built fields; `attrs.evolve` and pickling give
  that Diagnostic."""
  __slots__ = ("_args",)
  notes, fix, cause = (), None, None
  message, related, extra = _lazy_field("message"), _lazy_field("related"), _lazy_field("extra")

  def __new__(cls, *args, **kw): return Diagnostic(*args, **kw)  # what attrs.evolve calls
  def __reduce__(self):
    return Diagnostic, (self.code, self.message, self.span, self.severity, self.related, self.notes, self.extra, self.fix,
                        self.cause)

  @classmethod
  def many(cls, spans: Sequence[Optional[Span]], build, args: list) -> list[Diagnostic]:
    """One diagnostic per (span, args) pair, made in C loops (no Python call per diagnostic)."""
    out: list[Diagnostic] = list(map(_new, repeat(cls, len(spans))))
    deque(map(_set_span, out, spans), 0)
    deque(map(_set_args, out, zip(repeat(build), args)), 0)
    return out

  def _fields(self) -> tuple: return (self.code, self.message, self.span, self.severity, self.related, self.notes)
  def __eq__(self, other):
    if not isinstance(other, Diagnostic): return NotImplemented
    return self._fields() == LazyDiagnostic._fields(other)  # type: ignore[arg-type]  # any Diagnostic has the fields
  def __ne__(self, other):
    eq = self.__eq__(other)
    return eq if eq is NotImplemented else not eq
  __hash__ = Diagnostic.__hash__
  def __repr__(self): return "Diagnostic" + Diagnostic.__repr__(self)[len(type(self).__qualname__):]

_new = object.__new__
_set_span, _set_args = Diagnostic.__dict__["span"].__set__, LazyDiagnostic.__dict__["_args"].__set__   # the slots' setters

class HcqError(Exception):
  """Raised by API entry points (parse, compile, ...) when the input has errors; carries the diagnostics."""
  def __init__(self, diagnostics: Sequence[Diagnostic], sources: Optional[dict[str, str]] = None):
    self.diagnostics = list(diagnostics)
    self.sources = sources or {}
    super().__init__(render_text(self.diagnostics, self.sources))

_CODE, _SEV, _CAUSE = attrgetter("code"), attrgetter("severity"), attrgetter("cause")

def has_errors(diags: Sequence[Diagnostic]) -> bool: return "error" in map(_SEV, diags)

def did_you_mean(name: str, names) -> str:
  """` (did you mean `x`?)` for the closest of `names` (difflib's ratio >= 0.6), or an empty string."""
  import difflib
  close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
  return f" (did you mean `{close[0]}`?)" if close else ""

def printable(line: str) -> tuple[str, Optional[list[int]]]:
  """`line` as shown in an excerpt: a tab is one space, other unprintable characters are escaped (`\\x0c`, `\\u2028`).
  Returns the shown text and, when it differs in length, the shown column of every character (and of the end)."""
  if line.isprintable(): return line, None
  parts, cols, w = [], [], 0
  for c in line:
    cols.append(w)
    r = c if c.isprintable() else " " if c == "\t" else repr(c)[1:-1]
    parts.append(r)
    w += len(r)
  cols.append(w)
  return "".join(parts), cols

def _excerpt(span: Span, lines: Optional[list[str]]) -> list[str]:
  if lines is None or not 1 <= span.line <= len(lines): return []
  raw = lines[span.line - 1]
  start = min(max(span.column - 1, 0), len(raw))
  end = span.end_column - 1 if span.end_line == span.line else len(raw)
  end = min(max(end, start + 1), max(len(raw), start + 1))
  line, cols = printable(raw)
  if cols is not None:  # an escaped character is as wide as its escape; a span past the end keeps its width
    start, end = cols[start], cols[min(end, len(raw))] + max(0, end - len(raw))
  if len(line) > _WIDTH:  # a long line (a data list, a binary file): the part around the span, cut with `...`
    lo = max(0, min(start - _WIDTH // 3, len(line) - _WIDTH))
    hi = min(len(line), lo + _WIDTH)
    line = ("..." if lo else "") + line[lo:hi] + ("..." if hi < len(line) else "")
    shift = lo - (3 if lo else 0)
    start, end = start - shift, min(end, hi) - shift
  return [f"    {line}", f"    {' ' * start}^{'~' * (max(1, end - start) - 1)}"]

_WIDTH = 120   # characters of a source line an excerpt shows at most

def head_lines(text: str, n: int) -> list[str]:
  """`split_lines(text)` as far as line n (then the rest of the text in one piece)."""
  return split_lines(text) if "\r" in text else text.split("\n", n)

def _plural(n: int, word: str, words: str = "") -> str: return f"{n:,} {word if n == 1 else words or word + 's'}"

def render_text(diags: Sequence[Diagnostic], sources: Optional[dict[str, str]] = None, max_per_code: int = 0) -> str:
  """`file:line:col: severity[code]: message`, the source line with a caret under the span, then the related
  locations and notes indented under it. Each source is split into lines once, however many diagnostics it has.
  With `max_per_code` > 0 only the first that many warnings (and notes) of each code are printed in full, then one
  `... and N more CODE warnings` line per code; errors are always printed in full."""
  sources = sources or {}
  out: list[str] = []
  diags = list(diags)
  under: dict = {}   # a root cause's key -> its consequences, printed compactly under it (roots first)
  if any(map(_CAUSE, diags)):
    for d in diags:
      if d.cause is not None: under.setdefault(d.cause, []).append(d)
  if under:
    roots = {d.key() for d in diags if d.key() in under}
    diags = [d for d in diags if d.key() in roots and d.cause is None] + [d for d in diags if d.cause is None and d.key() not in roots]
  shown, hidden = _capped(diags, max_per_code) if max_per_code > 0 else (diags, {})
  # a source is split only as far as the last line shown (the first twenty warnings of a million-line program)
  last: dict = {}
  for d in shown:
    if d.span and d.span.file in sources: last[d.span.file] = max(last.get(d.span.file, 0), d.span.line)
  lines = {f: head_lines(sources[f], n) for f, n in last.items()}
  for d in shown:
    where = f"{d.span}: " if d.span else ""
    out.append(f"{where}{d.severity}[{d.code}]: {d.message}")
    if d.span: out += _excerpt(d.span, lines.get(d.span.file))
    if "root_cause" in d.extra: out += [f"  root cause: {d.extra['root_cause']}", f"  fix: {d.extra['fix']}"]
    for r in d.related: out.append(f"  {r.span}: {r.message}" if r.span else f"  {r.message}")
    for n in d.notes: out.append(f"  note: {n}")
    if d.cause is None and (cs := under.get(d.key())):
      out.append(f"  {_plural(len(cs), 'consequence')} of this cause:")
      out += [f"    {c.span}: {c.severity}[{c.code}]: {c.message}" if c.span else f"    {c.severity}[{c.code}]: {c.message}" for c in cs]
  for (code, sev), n in hidden.items():
    out.append(f"... and {n:,} more {code} {sev if n == 1 else sev + 's'} (--max-diagnostics 0 shows all)")
  return "\n".join(out) + ("\n" if out else "")

def _capped(diags: Sequence[Diagnostic], cap: int) -> tuple[list[Diagnostic], dict[tuple[str, str], int]]:
  """The diagnostics printed in full (every error, the first `cap` others of each (code, severity)) and, per
  (code, severity) in the order their first unprinted one comes, how many are not printed. Found with C-level scans
  (`list.index`): only the printed ones are looked at one by one."""
  codes, sevs = list(map(_CODE, diags)), list(map(_SEV, diags))
  show = [i for i, s in enumerate(sevs) if s == "error"]
  over = []
  for (code, sev), n in Counter(zip(codes, sevs)).items():
    if sev == "error": continue
    i, k = -1, 0
    while k <= min(n - 1, cap):
      i = codes.index(code, i + 1)
      if sevs[i] != sev: continue
      if k < cap: show.append(i)
      else: over.append((i, (code, sev), n - cap))
      k += 1
  return [diags[i] for i in sorted(show)], {key: n for _, key, n in sorted(over)}

def summary(diags: Sequence[Diagnostic], launches: Optional[int] = None, queues: Optional[int] = None) -> str:
  """The last line of `check`'s text output, counting every diagnostic (shown or not):
  `ok: 0 errors, 0 warnings over 2 launches, 12 queues`, or `failed: ...` when there are errors."""
  count = Counter(map(_SEV, diags))
  errs, warns = count["error"], count["warning"]
  notes = len(diags) - errs - warns
  inc = "incomplete" in map(_CODE, diags)   # a verdict cut short by `--max-states` is never `ok`
  s = f"{'failed' if errs else 'incomplete' if inc else 'ok'}: {_plural(errs, 'error')}, {_plural(warns, 'warning')}"
  if notes: s += f", {_plural(notes, 'note')}"
  over = [_plural(n, *w) for n, w in ((launches, ("launch", "launches")), (queues, ("queue",))) if n is not None]
  if over: s += " over " + ", ".join(over)
  return s + (", incomplete (raise --max-states)" if inc else "")

# one object a line, each by json's C encoder: `indent` takes its pure-Python encoder, ~50 µs a diagnostic (10 s for the
# 182k warnings of a 1M-statement program)
_encode = json.JSONEncoder(separators=(", ", ": ")).encode

def _lines(items, indent: str) -> str:
  """A JSON list of `items`, one a line."""
  return f"[\n{indent}  " + f",\n{indent}  ".join(map(_encode, items)) + f"\n{indent}]" if items else "[]"

def render_json(diags: Sequence[Diagnostic], fixes=None) -> str:
  """`{"diagnostics": [...]}`, one diagnostic a line. `fixes(d) -> [TextEdit]` (hcqdsl/check/fixes.py, which reads
  the source): a diagnostic with a fix then carries `"fixes": [{"message", "edits": [{"content", "location",
  "end_location"}]}]`."""
  def one(d: Diagnostic) -> dict:
    out = d.to_json()
    if fixes is not None and d.fix is not None and (edits := fixes(d)):
      out["fixes"] = [{"message": d.fix.text, "edits": [e.to_json() for e in edits]}]
    return out
  return '{"diagnostics": ' + _lines(list(map(one, diags)), "") + "}"

def render_sarif(diags: Sequence[Diagnostic], tool_version: Optional[str] = None, fixes=None) -> str:
  """SARIF 2.1.0, as GitHub code scanning loads it; `tool_version` defaults to hcqdsl's. `fixes(d) -> [TextEdit]`: a
  result with a fix carries SARIF's `fixes` (a description, and the file's replacements). No `informationUri` or
  `helpUri`: the project has no public web page; each rule's help names the doc section instead."""
  if tool_version is None: from . import __version__ as tool_version
  def loc(span: Span, message: Optional[str] = None):
    l = {"physicalLocation": {"artifactLocation": {"uri": span.file},
                              "region": {"startLine": max(span.line, 1), "startColumn": max(span.column, 1),
                                         "endLine": max(span.end_line, 1), "endColumn": max(span.end_column, 1)}}}
    if message: l["message"] = {"text": message}
    return l
  level = {"error": "error", "warning": "warning", "note": "note"}
  results = []
  for d in diags:
    r: dict[str, Any] = {"ruleId": d.code, "level": level.get(d.severity, "error"), "message": {"text": d.message},
         "locations": [loc(d.span)] if d.span else []}
    rel = [loc(x.span, x.message) for x in d.related if x.span]
    if rel: r["relatedLocations"] = [dict(x, id=i) for i, x in enumerate(rel)]
    if d.cause is not None: r["properties"] = {"cause": dict(zip(("code", "file", "line", "column"), d.cause))}
    if fixes is not None and d.fix is not None and d.span is not None and (edits := fixes(d)):
      r["fixes"] = [{"description": {"text": d.fix.text},
                     "artifactChanges": [{"artifactLocation": {"uri": d.span.file}, "replacements": [e.to_sarif() for e in edits]}]}]
    results.append(r)
  rules = [{"id": c, "shortDescription": {"text": t}, "fullDescription": {"text": RULES[c].description},
            "help": {"text": f"{RULES[c].fix} More: docs/{RULES[c].doc}"}, "properties": {"doc": f"docs/{RULES[c].doc}"}}
           for c, t in CODES.items()]
  head = json.dumps({"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0",
                     "runs": [{"tool": {"driver": {"name": "hcqdsl", "version": tool_version, "rules": rules}},
                               "results": []}]}, indent=2)
  # the results one a line (see render_json); the head is small
  at = head.rindex('"results": []') + len('"results": ')
  return head[:at] + _lines(results, "      ") + head[at + 2:]
