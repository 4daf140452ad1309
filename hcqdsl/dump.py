"""The IR as JSON (`hcqdsl parse --json`): every node as an object with its `kind`, fields and source span."""
from __future__ import annotations
import math
import attrs
from .ir import Span

__all__ = ["program_to_json"]

def _value(v):
  if isinstance(v, Span): return {"line": v.line, "column": v.column, "end_line": v.end_line, "end_column": v.end_column}
  if attrs.has(type(v)):
    out = {"kind": type(v).__name__}
    for f in attrs.fields(type(v)):
      x = getattr(v, f.name)
      if f.name in ("comments", "end_comments") and not x: continue
      if f.name in ("comment", "end_comment") and x is None: continue
      out[f.name] = _value(x)
    return out
  if isinstance(v, (tuple, list)): return [_value(x) for x in v]
  if isinstance(v, float) and not math.isfinite(v): return str(v)
  return v

def program_to_json(prog) -> dict: return _value(prog)
