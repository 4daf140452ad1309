"""The IR for people and programs: an indented tree (`hcqdsl parse`) and JSON (`hcqdsl parse --json`), every node with
its kind, fields and source span."""
from __future__ import annotations
import math
import attrs
from ..ir import Span, launches_text

__all__ = ["program_to_json", "program_to_tree"]

def _value(v):
  if isinstance(v, Span): return {"line": v.line, "column": v.column, "end_line": v.end_line, "end_column": v.end_column}
  if attrs.has(type(v)):
    out = {"kind": type(v).__name__}
    for f in attrs.fields(type(v)):
      x = getattr(v, f.name)
      if f.name in ("comments", "end_comments") and not x: continue
      if f.name in ("comment", "end_comment") and x is None: continue
      if f.name == "launches" and x is None: continue   # (a block without a `launches` clause: every launch)
      out[f.name] = _value(x)
    return out
  if isinstance(v, (tuple, list)): return [_value(x) for x in v]
  if isinstance(v, float) and not math.isfinite(v): return str(v)
  return v

def program_to_json(prog) -> dict: return _value(prog)

_SKIP = {"span", "comments", "end_comments", "comment", "end_comment", "source", "file"}

def _short(v) -> str:
  """A field value on one line: names and expressions as written, data lists abbreviated."""
  from ..ir import Ref, Expr, Slice, Data
  if v is None or isinstance(v, (Ref, Expr)): return str(v) if v is not None else "-"
  if isinstance(v, Slice):
    return v.buffer.name if not v.ranged else f"{v.buffer.name}[{'' if v.start is None else v.start}:{'' if v.end is None else v.end}]"
  if isinstance(v, Data):
    vals = ", ".join(map(str, v.values[:8])) + (f", ... ({len(v.values)} values)" if len(v.values) > 8 else "")
    return f"{v.dtype} [{vals}]"
  if isinstance(v, (tuple, list)) and not any(attrs.has(type(x)) and not isinstance(x, (Ref, Expr, Slice, Data)) for x in v):
    return "(" + ", ".join(_short(x) for x in v) + ")"
  if attrs.has(type(v)):
    return f"{type(v).__name__}(" + ", ".join(f"{f.name}={_short(getattr(v, f.name))}" for f in attrs.fields(type(v)) if f.name not in _SKIP) + ")"
  if isinstance(v, (tuple, list)): return "(" + ", ".join(_short(x) for x in v) + ")"
  return repr(v) if isinstance(v, str) else str(v)

def program_to_tree(prog) -> str:
  """One line per node, `Kind field=value ...  @line:col`, statements of a queue or host indented under it."""
  out = [f"Program {prog.file}: {len(prog.decls)} declarations"]
  def node(n, depth):
    fields = [f for f in attrs.fields(type(n)) if f.name not in _SKIP and f.name != "body" and not (f.name == "launches" and n.launches is None)]
    at = f"  @{n.span.line}:{n.span.column}" if getattr(n, "span", None) is not None else ""
    def val(f):
      return launches_text(n.launches) if f.name == "launches" else _short(getattr(n, f.name))
    out.append("  " * depth + " ".join([type(n).__name__] + [f"{f.name}={val(f)}" for f in fields]) + at)
    for st in getattr(n, "body", ()): node(st, depth + 1)
  for d in prog.decls: node(d, 1)
  return "\n".join(out) + "\n"
