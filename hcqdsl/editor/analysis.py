"""A document checked as `hcqdsl check FILE` checks it, as plain data an editor's diagnostics are made of: each
diagnostic's range, severity, code, message (with the notes, the root cause and its fix, and the launch numbers the
checker's messages carry), its related locations, and its quick fixes as text edits (editor/fixes.py). Plain data
(JSON), so the checking can run in a worker process (editor/worker.py) while the server answers the editor.

Positions are [line, column], 0-based, columns in characters."""
from __future__ import annotations
import gc, pathlib
from typing import Any, Optional
from ..diagnostics import Diagnostic, RULES
from ..header import read_header, HeaderError
from .names import Names, Pos

# A rule's page, where it exists: the docs/ of the checkout the package runs from (an editable install); a wheel has
# none, and then a diagnostic links nowhere rather than to a made-up address.
DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"

__all__ = ["check_document", "to_plain", "DEFAULT_LAUNCHES", "MAX_DIAGNOSTICS", "SEVERITY", "DELAY"]

DELAY = 0.3   # seconds from the last edit to the check (an open or a save: at once): the server's default
DEFAULT_LAUNCHES = 2     # as `hcqdsl check`: the file's `# hcq: launches=N`, else 2
MAX_DIAGNOSTICS = 5000   # published per document (every error first); a note counts the rest
SEVERITY = {"error": 1, "warning": 2, "note": 3}   # LSP's DiagnosticSeverity: Error, Warning, Information

def _range(span) -> list:
  return [[max(span.line - 1, 0), max(span.column - 1, 0)], [max(span.end_line - 1, 0), max(span.end_column - 1, 0)]]

def _message(d: Diagnostic) -> str:
  """The message as `check` prints it under the caret: the notes, the root cause and its fix, and related lines
  without a location (those with one are related locations)."""
  out = [d.message]
  if "root_cause" in d.extra: out += [f"root cause: {d.extra['root_cause']}", f"fix: {d.extra['fix']}"]
  out += [r.message for r in d.related if r.span is None]
  out += [f"note: {n}" for n in d.notes]
  return "\n".join(out)

def _pos(p: Pos) -> list: return [p.line, p.column]

def to_plain(d: Diagnostic, path: str, names: Optional[Names]) -> dict[str, Any]:
  """One diagnostic as plain data (with its quick fixes when the program parsed)."""
  from .fixes import fixes
  out: dict[str, Any] = {"range": _range(d.span) if d.span is not None else [[0, 0], [0, 0]], "severity": SEVERITY.get(d.severity, 1),
                         "code": d.code, "message": _message(d),
                         "related": [{"range": _range(r.span), "message": r.message} for r in d.related
                                     if r.span is not None and r.span.file == path]}
  if d.code in RULES and DOCS.is_dir(): out["href"] = f"{DOCS.as_uri()}/{RULES[d.code].doc}"
  if d.cause is not None: out["cause"] = list(d.cause)
  if names is not None:
    out["fixes"] = [{"title": f.title, "preferred": f.preferred,
                     "changes": [[_pos(c.range.start), _pos(c.range.end), c.new_text] for c in f.changes]} for f in fixes(names, d)]
  return out

def check_document(text: str, path: str, launches: Optional[int] = None) -> dict[str, Any]:
  """{"diagnostics": [...], "launches": N, "count": every diagnostic found}: `text` (the file at `path`) checked over
  `launches`, else its header's count, else DEFAULT_LAUNCHES. A bad `# hcq:` header is an error on its line."""
  from ..check import check_source
  try: n = launches or read_header(text).get("launches", DEFAULT_LAUNCHES)
  except HeaderError as e:
    line = max(e.line - 1, 0)
    msg = str(e).split(": ", 1)[1]
    return {"diagnostics": [{"range": [[line, 0], [line, len(text.split("\n")[line]) if text else 0]], "severity": 1, "code": "header",
                             "message": f"bad `# hcq:` header: {msg}", "related": []}], "launches": None, "count": 1}
  enabled = gc.isenabled()
  gc.disable()   # (as `hcqdsl check`: the IR of a big program is millions of acyclic objects)
  try:
    prog, diags = check_source(text, path, n)
    names = Names(prog, text) if prog is not None else None
    ordered = [d for d in diags if d.severity == "error"] + [d for d in diags if d.severity != "error"]
    out = [to_plain(d, path, names) for d in ordered[:MAX_DIAGNOSTICS]]
  finally:
    if enabled: gc.enable()
  if len(diags) > MAX_DIAGNOSTICS:
    out.append({"range": [[0, 0], [0, 0]], "severity": 3, "code": "truncated", "related": [],
                "message": f"{len(diags) - MAX_DIAGNOSTICS:,} more diagnostics not shown (`hcqdsl check {path} --max-diagnostics 0` lists all)"})
  return {"diagnostics": out, "launches": n, "count": len(diags)}
