"""`hcqdsl check`: static checks, then the happens-before analyses over several launches."""
from __future__ import annotations
from typing import Optional
from operator import attrgetter
from ..ir import Program
from ..diagnostics import Diagnostic
from ..static import check_static, StaticCheck, check_launches

__all__ = ["check", "check_text", "check_source", "check_static", "StaticCheck"]

_SPAN, _BODY = attrgetter("span"), attrgetter("body")

def _sorted(diags: list[Diagnostic]) -> list[Diagnostic]:
  """By (file, line, column), a diagnostic with no span first; stable. When every span is in one file (the common
  case, with a hundred thousand warnings at times) the key is one int per diagnostic."""
  f = next((s.file for s in map(_SPAN, diags) if s is not None), None)
  if f:
    keys = [-1 if s is None else (s.line << 32) + s.column if s.file is f and s.line >= 0 and 0 <= s.column < 1 << 32
            else -2 for s in map(_SPAN, diags)]
    if -2 not in keys: return list(map(diags.__getitem__, sorted(range(len(diags)), key=keys.__getitem__)))
  return sorted(diags, key=lambda d: (d.span.file, d.span.line, d.span.column) if d.span else ("", 0, 0))

# statements from which `jobs=2` runs the execution in a second process (below, forking costs more than it saves)
PARALLEL_MIN = 100_000

def check(program: Program, launches: int = 2, var_values: Optional[dict] = None, static: bool = True,
          max_states: Optional[int] = None, jobs: int = 1) -> list[Diagnostic]:
  """Every diagnostic for `program` over `launches` consecutive launches. When `syntax` or `name` errors are present
  only they are reported (the program has no meaning); `bounds` and `overflow` do not stop the other analyses.
  `jobs=2`: on a big program, the happens-before execution runs in a forked process while this one does the static
  checks and the other passes (same diagnostics; `hcqdsl check` does this by default)."""
  from .analyze import analyze, MAX_STATES
  u = execution = None
  if jobs > 1 and static and sum(map(len, map(_BODY, program.queues))) >= PARALLEL_MIN:
    from .unroll import unroll
    from .hb import execute_beside
    try: u = unroll(program, launches, var_values)
    except Exception: u = None   # a program the static checks reject: they say why, below
    if u is not None: execution = execute_beside(u)
  try:
    diags = check_static(program) if static else []
    if any(d.code in ("syntax", "name") and d.severity == "error" for d in diags):
      return _sorted([d for d in diags if d.code in ("syntax", "name")])
    if short := check_launches(program, launches, var_values or ()): return _sorted(diags + short)
    found = analyze(program, launches=launches, var_values=var_values,
                    max_states=MAX_STATES if max_states is None else max_states, unrolled=u, execution=execution)
    execution = None
    return _sorted(diags + found)
  finally:
    if execution is not None: execution.cancel()

def check_source(text: str, filename: str = "<input>", launches: int = 2, var_values: Optional[dict] = None,
                 pre=None, max_states: Optional[int] = None, jobs: int = 1) -> tuple[Optional[Program], list[Diagnostic]]:
  """Parse and check; returns (the program, or None when it does not parse, and every diagnostic). `pre(program)`,
  if given, runs between parsing and the analyses (the CLI checks `--var` names there). Never raises on any text."""
  from ..syntax import parse_syntax
  prog, diags = parse_syntax(text, filename)
  if prog is None: return None, diags
  if any(d.code == "syntax" for d in diags): return prog, _sorted([d for d in diags + check_static(prog) if d.code in ("syntax", "name")])
  if pre is not None: pre(prog)
  found = check(prog, launches, var_values, max_states=max_states, jobs=jobs)
  return prog, _sorted(diags + found) if diags else found

def check_text(text: str, filename: str = "<input>", launches: int = 2, var_values: Optional[dict] = None,
               max_states: Optional[int] = None) -> list[Diagnostic]:
  """Parse and check; never raises on any input text."""
  return check_source(text, filename, launches, var_values, max_states=max_states)[1]
