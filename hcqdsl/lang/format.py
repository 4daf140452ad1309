"""IR → canonical text: one declaration or statement per line, two-space indent, a blank line around blocks.

`format_program(parse(t))` is a fixed point, and `parse(format_program(p)) == p`.
"""
from __future__ import annotations
import math, re
from ..ir import (Slice, Data, Impl, Device, Buffer, Signal, Var, Kernel, Wait, SignalWrite, Exec, Copy, Write, HostWrite, Poll, Barrier,
                 Timestamp, Epoch, Submit, Queue, Host, Expect, Program, U32_MAX)
from .lexical import size_text, range_text, quote, DIGITS, STRING, int_value
from ..ir import split_lines, launches_text

__all__ = ["format_program", "format_stmt", "format_decl"]

def _float(v: float) -> str:
  if math.isnan(v): return "nan"
  if math.isinf(v): return "inf" if v > 0 else "-inf"
  r = repr(float(v))
  return r if ("." in r or "e" in r or "n" in r) else r + ".0"

def _data(d: Data) -> str:
  if d.source is not None: return f"{d.dtype} from {quote(d.source[0])} [{quote(d.source[1])}]"
  # repr of a Python float is exactly _float's text (shortest round-trip, always a '.' or 'e', and nan/inf/-inf), so
  # the C-level map is the fast path for emitted buffers of thousands of values
  raw = d.values.tolist() if hasattr(d.values, "tolist") else d.values   # numpy values (emit, data files): Python numbers
  vals = map(repr, map(float, raw)) if d.dtype[0] == "f" else map(str, raw)
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
  if i.amd_code is not None: parts.append("amd " + quote(i.amd_code) + (f" code {i.code}" if i.code else ""))
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
  if isinstance(s, Write): return f"write {_slice(s.dst)} = {s.value}"
  if isinstance(s, HostWrite): return f"write {_slice(s.dst)} = {', '.join(map(_data, s.launch_inits))}"
  if isinstance(s, Poll): return f"poll {_slice(s.src)}{'' if s.mask == U32_MAX else f' & {s.mask}'} == {s.value}"
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

def _line(text: str, node, indent: str, hexes=None) -> list[str]:
  if hexes is not None: text = hexes.keep(text, node)
  out = [indent + c for c in node.comments]
  out.append(indent + text + (f"  {node.comment}" if node.comment else ""))
  return out

_INT_OR_STRING = re.compile(rf"{STRING}|(?<![A-Za-z0-9_.])((?:{DIGITS})[KMG]?)(?![A-Za-z0-9_.])")

class _Hexes:
  """Hex literals keep their spelling (`wait s >= 0x42` is not rewritten as `66`): a statement's canonical text with
  each integer put back as the source wrote it when the source wrote it in hex, matched in order (the canonical text
  holds the same integers in the same order; anything else keeps the canonical text)."""
  def __init__(self, source: str): self.lines = split_lines(source)
  def keep(self, text: str, node) -> str:
    sp = node.span
    if sp is None or not 1 <= sp.line <= sp.end_line <= len(self.lines): return text
    # the statement's own text (to its end: the rest of a line holding 32,000 statements is not searched per statement)
    ls = self.lines[sp.line - 1:sp.end_line]
    src = "\n".join(ls[:-1] + [ls[-1][:sp.end_column - 1]])[sp.column - 1:]
    if "0x" not in src and "0X" not in src: return text
    written = [m.group(1) for m in _INT_OR_STRING.finditer(src) if m.group(1)]
    canon = [m for m in _INT_OR_STRING.finditer(text) if m.group(1)]
    if len(written) < len(canon): return text
    for m, w in reversed(list(zip(canon, written))):
      if w[:2] in ("0x", "0X") and int_value(w) == int_value(m.group(1)): text = text[:m.start(1)] + w + text[m.end(1):]
    return text

def format_program(prog: Program) -> str:
  """Canonical text: one declaration or statement per line, two-space indent, a blank line around blocks."""
  out: list[str] = []
  prev_block = False
  src = prog.source
  hexes = _Hexes(src) if src and ("0x" in src or "0X" in src) else None
  for i, d in enumerate(prog.decls):
    block = isinstance(d, (Queue, Host))
    if i and (block or prev_block or d.comments or type(d) is not type(prog.decls[i - 1])): out.append("")
    if block:
      clause = f"launches {launches_text(d.launches)} " if d.launches is not None else ""
      head = f"queue {d.name} {d.engine} on {d.device.name} {clause}{{" if isinstance(d, Queue) else f"host {clause}{{"
      out += _line(head, d, "")
      for s in d.body: out += _line(format_stmt(s), s, "  ", hexes)
      out += ["  " + c for c in d.end_comments]
      out.append("}" + (f"  {d.end_comment}" if d.end_comment else ""))
    else: out += _line(format_decl(d), d, "", hexes)
    prev_block = block
  if prog.end_comments: out += ([""] if out else []) + list(prog.end_comments)
  return "\n".join(out) + "\n"
