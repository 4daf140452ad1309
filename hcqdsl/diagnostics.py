"""Diagnostics: what every stage reports, and how it is printed (text with carets, JSON, SARIF)."""
from __future__ import annotations
import json
from collections import Counter, deque
from operator import attrgetter
from itertools import repeat
from typing import Optional, Sequence
import attrs
from .ir import Span, split_lines

__all__ = ["Diagnostic", "LazyDiagnostic", "Related", "HcqError", "render_text", "render_json", "render_sarif", "CODES", "has_errors",
           "split_lines", "printable", "summary", "did_you_mean"]

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
}

@attrs.frozen
class Related:
  """A secondary location: a hop of a cycle, the other access of a race, a note."""
  message: str
  span: Optional[Span] = None

@attrs.frozen
class Diagnostic:
  code: str
  message: str
  span: Optional[Span]
  severity: str = "error"  # error | warning | note
  related: tuple = ()      # of Related, printed indented under the diagnostic
  notes: tuple = ()        # of str, free text printed after the related locations
  extra: dict = attrs.field(factory=dict, eq=False)  # launch, queue, buffer, range, ... (JSON only)

  def to_json(self) -> dict:
    s = self.span
    out = {"code": self.code, "severity": self.severity, "file": s.file if s else None, "line": s.line if s else None,
           "column": s.column if s else None, "end_line": s.end_line if s else None,
           "end_column": s.end_column if s else None, "message": self.message,
           "related": [{"message": r.message, **({"file": r.span.file, "line": r.span.line, "column": r.span.column}
                                                  if r.span else {})} for r in self.related],
           "notes": list(self.notes)}
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
  notes = ()
  message, related, extra = _lazy_field("message"), _lazy_field("related"), _lazy_field("extra")

  def __new__(cls, *args, **kw): return Diagnostic(*args, **kw)  # what attrs.evolve calls
  def __reduce__(self):
    return Diagnostic, (self.code, self.message, self.span, self.severity, self.related, self.notes, self.extra)

  @classmethod
  def many(cls, spans: list, build, args: list) -> list:
    """One diagnostic per (span, args) pair, made in C loops (no Python call per diagnostic)."""
    out = list(map(_new, repeat(cls, len(spans))))
    deque(map(_set_span, out, spans), 0)
    deque(map(_set_args, out, zip(repeat(build), args)), 0)
    return out

  def _fields(self) -> tuple: return (self.code, self.message, self.span, self.severity, self.related, self.notes)
  def __eq__(self, other):
    if not isinstance(other, Diagnostic): return NotImplemented
    return self._fields() == LazyDiagnostic._fields(other)
  def __ne__(self, other):
    eq = self.__eq__(other)
    return eq if eq is NotImplemented else not eq
  __hash__ = Diagnostic.__hash__
  def __repr__(self): return "Diagnostic" + Diagnostic.__repr__(self)[len(type(self).__qualname__):]

_new = object.__new__
_set_span, _set_args = Diagnostic.__dict__["span"].__set__, LazyDiagnostic._args.__set__

class HcqError(Exception):
  """Raised by API entry points (parse, compile, ...) when the input has errors; carries the diagnostics."""
  def __init__(self, diagnostics: Sequence[Diagnostic], sources: Optional[dict] = None):
    self.diagnostics = list(diagnostics)
    self.sources = sources or {}
    super().__init__(render_text(self.diagnostics, self.sources))

_CODE, _SEV = attrgetter("code"), attrgetter("severity")

def has_errors(diags: Sequence[Diagnostic]) -> bool: return "error" in map(_SEV, diags)

def did_you_mean(name: str, names) -> str:
  """` (did you mean `x`?)` for the closest of `names` (difflib's ratio >= 0.6), or an empty string."""
  import difflib
  close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
  return f" (did you mean `{close[0]}`?)" if close else ""

def printable(line: str) -> tuple[str, Optional[list]]:
  """`line` as shown in an excerpt: a tab is one space, other unprintable characters are escaped (`\\x0c`, `\\u2028`).
  Returns the shown text and, when it differs in length, the shown column of every character (and of the end)."""
  if line.isprintable(): return line, None
  parts, cols, w = [], [], 0
  for c in line:
    cols.append(w)
    r = c if c.isprintable() else " " if c == "\t" else repr(c)[1:-1]
    parts.append(r); w += len(r)
  cols.append(w)
  return "".join(parts), cols

def _excerpt(span: Span, lines: Optional[list]) -> list[str]:
  if lines is None or not 1 <= span.line <= len(lines): return []
  raw = lines[span.line - 1]
  start = min(max(span.column - 1, 0), len(raw))
  end = span.end_column - 1 if span.end_line == span.line else len(raw)
  end = min(max(end, start + 1), max(len(raw), start + 1))
  line, cols = printable(raw)
  if cols is not None:  # an escaped character is as wide as its escape; a span past the end keeps its width
    start, end = cols[start], cols[min(end, len(raw))] + max(0, end - len(raw))
  return [f"    {line}", f"    {' ' * start}^{'~' * (max(1, end - start) - 1)}"]

def _head_lines(text: str, n: int) -> list[str]:
  """`split_lines(text)` as far as line n (then the rest of the text in one piece)."""
  return split_lines(text) if "\r" in text else text.split("\n", n)

def _plural(n: int, word: str, words: str = "") -> str: return f"{n:,} {word if n == 1 else words or word + 's'}"

def render_text(diags: Sequence[Diagnostic], sources: Optional[dict] = None, max_per_code: int = 0) -> str:
  """`file:line:col: severity[code]: message`, the source line with a caret under the span, then the related
  locations and notes indented under it. Each source is split into lines once, however many diagnostics it has.
  With `max_per_code` > 0 only the first that many warnings (and notes) of each code are printed in full, then one
  `... and N more CODE warnings` line per code; errors are always printed in full."""
  sources = sources or {}
  out: list[str] = []
  shown, hidden = _capped(list(diags), max_per_code) if max_per_code > 0 else (diags, {})
  # a source is split only as far as the last line shown (the first twenty warnings of a million-line program)
  last: dict = {}
  for d in shown:
    if d.span and d.span.file in sources: last[d.span.file] = max(last.get(d.span.file, 0), d.span.line)
  lines = {f: _head_lines(sources[f], n) for f, n in last.items()}
  for d in shown:
    where = f"{d.span}: " if d.span else ""
    out.append(f"{where}{d.severity}[{d.code}]: {d.message}")
    if d.span: out += _excerpt(d.span, lines.get(d.span.file))
    for r in d.related: out.append(f"  {r.span}: {r.message}" if r.span else f"  {r.message}")
    for n in d.notes: out.append(f"  note: {n}")
  for (code, sev), n in hidden.items():
    out.append(f"... and {n:,} more {code} {sev if n == 1 else sev + 's'} (--max-diagnostics 0 shows all)")
  return "\n".join(out) + ("\n" if out else "")

def _capped(diags: Sequence[Diagnostic], cap: int) -> tuple[list, dict]:
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

def render_json(diags: Sequence[Diagnostic]) -> str:
  """`{"diagnostics": [...]}`, one diagnostic a line."""
  return '{"diagnostics": ' + _lines(list(map(Diagnostic.to_json, diags)), "") + "}"

def render_sarif(diags: Sequence[Diagnostic], tool_version: Optional[str] = None) -> str:
  """SARIF 2.1.0, as GitHub code scanning loads it; `tool_version` defaults to hcqdsl's."""
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
    r = {"ruleId": d.code, "level": level.get(d.severity, "error"), "message": {"text": d.message},
         "locations": [loc(d.span)] if d.span else []}
    rel = [loc(x.span, x.message) for x in d.related if x.span]
    if rel: r["relatedLocations"] = [dict(x, id=i) for i, x in enumerate(rel)]
    results.append(r)
  rules = [{"id": c, "shortDescription": {"text": t}} for c, t in CODES.items()]
  head = json.dumps({"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0",
                     "runs": [{"tool": {"driver": {"name": "hcqdsl", "version": tool_version,
                                                   "informationUri": "https://github.com/hcqdsl/hcqdsl", "rules": rules}},
                               "results": []}]}, indent=2)
  # the results one a line (see render_json); the head is small
  at = head.rindex('"results": []') + len('"results": ')
  return head[:at] + _lines(results, "      ") + head[at + 2:]
