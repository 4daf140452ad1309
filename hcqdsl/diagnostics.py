"""Diagnostics: what every stage reports, and how it is printed (text with carets, JSON, SARIF)."""
from __future__ import annotations
import json
from typing import Optional, Sequence
import attrs
from .ir import Span

__all__ = ["Diagnostic", "Related", "HcqError", "render_text", "render_json", "render_sarif", "CODES", "has_errors"]

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
  "visibility": "a cross-device read with no barrier after the wait that orders it",
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

class HcqError(Exception):
  """Raised by API entry points (parse, compile, ...) when the input has errors; carries the diagnostics."""
  def __init__(self, diagnostics: Sequence[Diagnostic], sources: Optional[dict] = None):
    self.diagnostics = list(diagnostics)
    self.sources = sources or {}
    super().__init__(render_text(self.diagnostics, self.sources))

def has_errors(diags: Sequence[Diagnostic]) -> bool: return any(d.severity == "error" for d in diags)

def _excerpt(span: Span, sources: dict) -> list[str]:
  text = sources.get(span.file)
  if text is None or span.line < 1: return []
  lines = text.splitlines()
  if span.line > len(lines): return []
  line = lines[span.line - 1].expandtabs(1)
  start = max(span.column - 1, 0)
  end = span.end_column - 1 if span.end_line == span.line else len(line)
  width = max(1, min(end, max(len(line), start + 1)) - start)
  return [f"    {line}", f"    {' ' * start}^{'~' * (width - 1)}"]

def render_text(diags: Sequence[Diagnostic], sources: Optional[dict] = None) -> str:
  """`file:line:col: severity[code]: message`, the source line with a caret under the span, then the related
  locations and notes indented under it."""
  sources = sources or {}
  out: list[str] = []
  for d in diags:
    where = f"{d.span}: " if d.span else ""
    out.append(f"{where}{d.severity}[{d.code}]: {d.message}")
    if d.span: out += _excerpt(d.span, sources)
    for r in d.related: out.append(f"  {r.span}: {r.message}" if r.span else f"  {r.message}")
    for n in d.notes: out.append(f"  note: {n}")
  return "\n".join(out) + ("\n" if out else "")

def render_json(diags: Sequence[Diagnostic]) -> str:
  return json.dumps({"diagnostics": [d.to_json() for d in diags]}, indent=2)

def render_sarif(diags: Sequence[Diagnostic], tool_version: str = "0.1.0") -> str:
  """SARIF 2.1.0, as GitHub code scanning loads it."""
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
  return json.dumps({"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0",
                     "runs": [{"tool": {"driver": {"name": "hcqdsl", "version": tool_version,
                                                   "informationUri": "https://github.com/hcqdsl/hcqdsl", "rules": rules}},
                               "results": results}]}, indent=2)
