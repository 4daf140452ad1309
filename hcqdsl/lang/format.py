"""IR → canonical text: one declaration or statement per line, two-space indent, a blank line around blocks.

`format_program(parse(t))` is a fixed point, and `parse(format_program(p)) == p`.
"""
from __future__ import annotations
import math
from ..ir import (Slice, Data, Impl, Device, Buffer, Signal, Var, Kernel, Wait, SignalWrite, Exec, Copy, Barrier,
                 Timestamp, Epoch, Submit, Queue, Host, Expect, Program)
from .lexical import size_text, range_text, quote

__all__ = ["format_program", "format_stmt", "format_decl"]

def _float(v: float) -> str:
  if math.isnan(v): return "nan"
  if math.isinf(v): return "inf" if v > 0 else "-inf"
  r = repr(float(v))
  return r if ("." in r or "e" in r or "n" in r) else r + ".0"

def _data(d: Data) -> str:
  if d.source is not None: return f"{d.dtype} from {_quote(d.source[0])} [{_quote(d.source[1])}]"
  # repr of a Python float is exactly _float's text (shortest round-trip, always a '.' or 'e', and nan/inf/-inf), so
  # the C-level map is the fast path for emitted buffers of thousands of values
  vals = map(repr, map(float, d.values)) if d.dtype[0] == "f" else map(str, d.values)
  return f"{d.dtype} [{', '.join(vals)}]"

def _slice(s: Slice) -> str:
  name = s.buffer.name if s.launch is None else f"{s.buffer.name}@{s.launch}"
  return name + range_text(s.start, s.end) if s.ranged else name

def _impl(i: Impl) -> str:
  parts = []
  if i.builtin is not None:
    p = f"builtin {i.builtin}"
    if i.dtype: p += f"<{i.dtype}>"
    if i.args: p += "(" + ", ".join(_float(a) if isinstance(a, float) else str(a) for a in i.args) + ")"
    parts.append(p)
  if i.c_source is not None: parts.append("c " + quote(i.c_source))
  if i.amd_code is not None: parts.append("amd " + quote(i.amd_code))
  return " ".join(parts)

def _dim(d) -> str: return f"({', '.join(map(str, d))})"
def _arg(a) -> str: return _slice(a) if type(a) is Slice else str(a)

def format_stmt(s) -> str:
  if isinstance(s, Wait): return f"wait {s.signal.name} >= {s.value}"
  if isinstance(s, SignalWrite): return f"signal {s.signal.name} = {s.value}"
  if isinstance(s, Exec):
    out = f"exec {s.kernel.name}({', '.join(map(_arg, s.args))})"
    if s.grid is not None: out += f" grid {_dim(s.grid)}"
    if s.block is not None: out += f" block {_dim(s.block)}"
    return out
  if isinstance(s, Copy): return f"copy {_slice(s.dst)} <- {_slice(s.src)}"
  if isinstance(s, Barrier): return "barrier"
  if isinstance(s, Timestamp): return f"timestamp {s.signal.name}"
  if isinstance(s, Epoch): return "epoch"
  if isinstance(s, Submit): return "submit" + (" " + ", ".join(q.name for q in s.queues) if s.queues else "")
  raise TypeError(f"not a statement: {s!r}")

def format_decl(d) -> str:
  if isinstance(d, Device): return f"device {d.name} = {d.vendor}:{d.index}" + (f" {d.arch}" if d.arch else "")
  if isinstance(d, Buffer):
    out = f"buffer {d.name} on {d.device.name if d.device else 'host'} size {size_text(d.size)}"
    if d.per_launch is not None:
      return f"{out} {d.per_launch}" + (" = " + ", ".join(map(_data, d.launch_inits)) if d.launch_inits else "")
    return out + (f" = {_data(d.init)}" if d.init is not None else "")
  if isinstance(d, Signal):
    return f"signal {d.name} on {d.device.name if d.device else 'host'}" + (f" = {d.init}" if d.init else "")
  if isinstance(d, Var): return f"var {d.name}" + (f" = [{', '.join(map(str, d.values))}]" if d.values is not None else "")
  if isinstance(d, Kernel):
    out = f"kernel {d.name}({', '.join(f'{p.mode} {p.name}' for p in d.params)})"
    return out + (f" = {_impl(d.impl)}" if d.impl is not None else "")
  if isinstance(d, Expect):
    tol = "".join(f" {k} {_float(v)}" for k, v in (("rtol", d.rtol), ("atol", d.atol)) if v is not None)
    return f"expect {_slice(d.target)} {'~=' if d.approx else '=='} {_data(d.data)}{tol}"
  raise TypeError(f"not a declaration: {d!r}")

def _line(text: str, node, indent: str) -> list[str]:
  out = [indent + c for c in node.comments]
  out.append(indent + text + (f"  {node.comment}" if node.comment else ""))
  return out

def format_program(prog: Program) -> str:
  """Canonical text: one declaration or statement per line, two-space indent, a blank line around blocks."""
  out: list[str] = []
  prev_block = False
  for i, d in enumerate(prog.decls):
    block = isinstance(d, (Queue, Host))
    if i and (block or prev_block or d.comments or type(d) is not type(prog.decls[i - 1])): out.append("")
    if block:
      head = f"queue {d.name} {d.engine} on {d.device.name} {{" if isinstance(d, Queue) else "host {"
      out += _line(head, d, "")
      for s in d.body: out += _line(format_stmt(s), s, "  ")
      out += ["  " + c for c in d.end_comments]
      out.append("}" + (f"  {d.end_comment}" if d.end_comment else ""))
    else: out += _line(format_decl(d), d, "")
    prev_block = block
  if prog.end_comments: out += ([""] if out else []) + list(prog.end_comments)
  return "\n".join(out) + "\n"
