"""The checker's front door: parse with the static checks (`hcqdsl.parse`), then the happens-before analyses over
several launches (`hcqdsl.check`)."""
from __future__ import annotations
import pathlib, re
from typing import Optional
from operator import attrgetter
from ..ir import Program, Span
from ..diagnostics import Diagnostic, HcqError, CODES, did_you_mean
from ..lang.parse import parse_syntax
from .static import check_static, StaticCheck, check_launches

__all__ = ["parse", "parse_file", "parse_with_diagnostics", "check", "check_text", "check_source", "check_static", "StaticCheck",
           "unknown_var"]

_SPAN = attrgetter("span")

def _sorted(diags: list[Diagnostic]) -> list[Diagnostic]:
  """By (file, line, column), a diagnostic with no span first; stable. When every span is in one file (the common
  case, with a hundred thousand warnings at times) the key is one int per diagnostic."""
  f = next((s.file for s in map(_SPAN, diags) if s is not None), None)
  if f:
    keys = [-1 if s is None else (s.line << 32) + s.column if s.file is f and s.line >= 0 and 0 <= s.column < 1 << 32
            else -2 for s in map(_SPAN, diags)]
    if -2 not in keys: return list(map(diags.__getitem__, sorted(range(len(diags)), key=keys.__getitem__)))
  return sorted(diags, key=lambda d: (d.span.file, d.span.line, d.span.column) if d.span else ("", 0, 0))

# ---- parsing with the static checks: what `hcqdsl.parse` means

def parse_with_diagnostics(text: str, filename: str = "<input>") -> tuple[Optional[Program], list[Diagnostic]]:
  """Parse and run the static checks. Returns (program or None, diagnostics). Never raises on any input text."""
  prog, diags = parse_syntax(text, filename)
  if prog is None: return None, diags
  diags = diags + check_static(prog)
  diags.sort(key=lambda d: (d.span.line, d.span.column) if d.span else (0, 0))
  return prog, diags

def parse(text: str, filename: str = "<input>") -> Program:
  """Parse .hcq text into a Program. Raises HcqError (with every diagnostic) if the text has errors."""
  prog, diags = parse_with_diagnostics(text, filename)
  if prog is None or any(d.severity == "error" for d in diags): raise HcqError(diags, {filename: text})
  return prog

def parse_file(path) -> Program:
  return parse(pathlib.Path(path).read_text(), str(path))

# ---- the analyses

def unknown_var(program: Program, var_values) -> Optional[str]:
  """Why `var_values` does not fit `program` (a name that is no var or D.epoch of it), or None."""
  from ..diagnostics import did_you_mean
  known = program.vars
  for name in var_values or ():
    if name not in known:
      return (f"`{name}` is not a var of {program.file}{did_you_mean(name, known)} (vars: {', '.join(known) or 'none'})")
  return None

def check(program: Program, launches: int = 2, var_values: Optional[dict] = None, static: bool = True,
          max_states: Optional[int] = None, causes: bool = True, keep: Optional[dict] = None) -> list[Diagnostic]:
  """Every diagnostic for `program` over `launches` consecutive launches. When `syntax` or `name` errors are present
  only they are reported (the program has no meaning); `bounds` and `overflow` do not stop the other analyses.
  With `causes`, errors that follow from one cause name it in their `cause` (check/causes.py). Raises ValueError
  when `var_values` names something that is not a var of the program. `keep`: a dict that gets the unrolled program and
  the happens-before trace of the analysis (pipeline.analyze), when it runs."""
  if (why := unknown_var(program, var_values)) is not None: raise ValueError(f"var_values: {why}")
  diags = check_static(program) if static else []
  if any(d.code in ("syntax", "name") and d.severity == "error" for d in diags):
    return _sorted([d for d in diags if d.code in ("syntax", "name")])
  if short := check_launches(program, launches, var_values or ()): return _sorted(diags + short)
  from .pipeline import analyze, MAX_STATES
  states = MAX_STATES if max_states is None else max_states
  found = _suppress(program, _consistent(_sorted(diags + analyze(program, launches=launches, var_values=var_values,
                                                                    max_states=states, keep=keep))))
  if not causes: return found
  from .causes import RootCauses
  return RootCauses().run(program, found, lambda p: check(p, launches, var_values, static, states, causes=False))

_IGNORE = re.compile(r"#.*?\bhcq:[ \t]*ignore\[([^\]]*)\]")

def _suppress(program: Program, diags: list[Diagnostic]) -> list[Diagnostic]:
  """Per-line suppression: a comment `# hcq: ignore[visibility]` (codes separated by commas) at the end of a
  declaration or statement drops the diagnostics of those codes on its lines; one that drops nothing is an
  `unused-ignore` warning at the comment."""
  if program.source is not None and "ignore[" not in program.source: return diags   # (one C search of the text)
  marks = []   # (first line, last line, codes, node)
  for d in program.decls:
    for node in (d, *getattr(d, "body", ())):
      c = getattr(node, "comment", None)
      if c and "hcq:" in c and (m := _IGNORE.search(c)) and node.span is not None:
        codes = {x.strip() for x in m.group(1).split(",") if x.strip()}
        marks.append((node.span.line, node.span.end_line, codes, node, c))
  if not marks: return diags
  by_line: dict[int, list[int]] = {}
  used: set[tuple[int, str]] = set()
  for n, (a, b, codes, _, _) in enumerate(marks):
    for ln in range(a, b + 1): by_line.setdefault(ln, []).append(n)
  out = []
  for d in diags:
    hit = next((n for n in by_line.get(d.span.line if d.span else -1, ()) if d.code in marks[n][2]), None)
    if hit is None:
      out.append(d)
      continue
    used.add((hit, d.code))
  from ..ir import split_lines
  lines = split_lines(program.source) if program.source else None
  for n, (a, b, codes, node, c) in enumerate(marks):
    for code in sorted(codes):
      if (n, code) in used: continue
      line = lines[b - 1] if lines and b <= len(lines) else ""
      at = line.find(c, node.span.end_column - 1 if a == b else 0)
      col = at + 1 if at >= 0 else node.span.column
      why = f"no {code} diagnostic on this line" if code in CODES else f"`{code}` is no diagnostic code{did_you_mean(code, CODES)}"
      out.append(Diagnostic("unused-ignore", f"`# hcq: ignore[{code}]` suppresses nothing: {why}",
                            Span(program.file, b, col, b, col + len(c)), severity="warning"))
  return _sorted(out)

# a warning that an error at the same statement contradicts: a wait that never finishes, or that no 32-bit value
# can satisfy, is not "already satisfied"
_CONTRADICTED = {"redundant-wait": ("deadlock", "overflow")}

def _consistent(diags: list[Diagnostic]) -> list[Diagnostic]:
  """Without the warnings an error at the same statement contradicts (the error's span is the statement's or inside it)."""
  errs = [d for d in diags if d.severity == "error" and d.span is not None and d.code in ("deadlock", "overflow")]
  if not errs: return diags
  at: dict[tuple[str, int], list[Diagnostic]] = {}
  for e in errs:
    if (s := e.span) is not None: at.setdefault((s.file, s.line), []).append(e)   # (errs have spans)
  def inside(a, b): return (b.line, b.column) <= (a.line, a.column) and (a.end_line, a.end_column) <= (b.end_line, b.end_column)
  return [d for d in diags if not (d.code in _CONTRADICTED and d.span is not None and
                                   any(e.code in _CONTRADICTED[d.code] and inside(e.span, d.span) for e in at.get((d.span.file, d.span.line), ())))]

def check_source(text: str, filename: str = "<input>", launches: int = 2, var_values: Optional[dict] = None,
                 pre=None, max_states: Optional[int] = None, keep: Optional[dict] = None) -> tuple[Optional[Program], list[Diagnostic]]:
  """Parse and check; returns (the program, or None when it does not parse, and every diagnostic). `pre(program)`,
  if given, runs between parsing and the analyses (the CLI checks `--var` names there). Never raises on any text."""
  prog, diags = parse_syntax(text, filename)
  if prog is None: return None, diags
  if any(d.code == "syntax" for d in diags): return prog, _sorted([d for d in diags + check_static(prog) if d.code in ("syntax", "name")])
  if pre is not None: pre(prog)
  found = check(prog, launches, var_values, max_states=max_states, keep=keep)
  return prog, _sorted(diags + found) if diags else found

def check_text(text: str, filename: str = "<input>", launches: int = 2, var_values: Optional[dict] = None,
               max_states: Optional[int] = None) -> list[Diagnostic]:
  """Parse and check; never raises on any input text."""
  return check_source(text, filename, launches, var_values, max_states=max_states)[1]
