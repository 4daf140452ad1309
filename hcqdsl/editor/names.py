"""Where a program's names are declared and used, as an editor asks: the name under the cursor, its declaration, every
reference to it, and the document's outline. The IR says which names a declaration or statement refers to (`refs`);
the text inside its span says where (a whole-word occurrence outside strings and comments, after its first word, the
keyword: a buffer may be called `write`). Names are unique in a program, so a name means one declaration; a device's
implicit `D.timeline` and `D.epoch` are declared by the device, and `D` in them is a reference to it.

Positions here are 0-based lines and 0-based columns in characters of the text (`Pos`); the server converts columns
to the client's units."""
from __future__ import annotations
import bisect, re
from typing import Iterator, Optional
import attrs
from ..ir import (Program, Node, Device, Buffer, Signal, Var, Kernel, Queue, Host, Expect, Wait, SignalWrite, Exec, Copy,
                  Write, HostWrite, Poll, Timestamp, Submit, Slice, Expr, split_lines)
from ..lang.lexical import STRING

__all__ = ["Pos", "Range", "Occurrence", "Names", "refs", "KINDS"]

@attrs.frozen(order=True)
class Pos:
  line: int
  column: int

@attrs.frozen
class Range:
  start: Pos
  end: Pos
  def contains(self, p: Pos) -> bool:
    return (self.start.line, self.start.column) <= (p.line, p.column) <= (self.end.line, self.end.column)

@attrs.frozen
class Occurrence:
  """`name` written at `range`; `node` is the declaration or statement it is written in; `definition` when it is the
  name a declaration declares."""
  name: str
  range: Range
  node: Node
  definition: bool = False

# declaration kind -> the word an outline and a hover call it
KINDS = {Device: "device", Buffer: "buffer", Signal: "signal", Var: "var", Kernel: "kernel", Queue: "queue"}

def _expr(e) -> list[str]: return [e.var.name] if type(e) is Expr and e.var is not None else []
def _dims(d) -> list[str]: return [n for x in d or () for n in _expr(x)]

def refs(node) -> list[str]:
  """The names a declaration or statement refers to (a queue's and the host's: in their header only)."""
  t = type(node)
  if t in (Buffer, Signal): return [node.device.name] if node.device is not None else []
  if t is Queue: return [node.device.name]
  if t is Kernel: return [node.impl.code] if node.impl is not None and node.impl.code else []
  if t is Expect: return [node.target.buffer.name]
  if t in (Wait, SignalWrite): return [node.signal.name, *_expr(node.value)]
  if t is Timestamp: return [node.signal.name]
  if t is Exec:
    args = [n for a in node.args for n in ([a.buffer.name] if type(a) is Slice else _expr(a))]
    return [node.kernel.name, *args, *_dims(node.grid), *_dims(node.block)]
  if t is Copy: return [node.dst.buffer.name, node.src.buffer.name]
  if t in (Write, Poll): return [(node.dst if t is Write else node.src).buffer.name, *_expr(node.value)]
  if t is HostWrite: return [node.dst.buffer.name]
  if t is Submit: return [q.name for q in node.queues]
  return []

_TOKEN = re.compile(rf"{STRING}|#[^\n]*|(?<![A-Za-z0-9_.])([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)")

class Names:
  """The names of one parse of a text: `at(pos)` the name under a position, `declaration(name)`, `references(name)`,
  `node_at(pos)` the statement or declaration there. Built in one pass over the declarations (the per-line table of
  nodes); a node's text is scanned only when a question is about it."""
  def __init__(self, program: Program, text: str):
    self.program = program
    self.lines = split_lines(text)
    self.starts = [0]
    for ln in self.lines: self.starts.append(self.starts[-1] + len(ln) + 1)
    self.text = "\n".join(self.lines)
    self.decls = program.lookup()
    self.by_line: dict[int, list] = {}   # 0-based line -> the statements and declarations starting on it, innermost last
    for d in program.decls:
      for node in (d, *getattr(d, "body", ())):
        if node.span is not None and node.span.line >= 1: self.by_line.setdefault(node.span.line - 1, []).append(node)

  def _offset(self, line1: int, col1: int) -> int: return self.starts[min(line1 - 1, len(self.lines))] + col1 - 1
  def _pos(self, offset: int) -> Pos:
    i = bisect.bisect_right(self.starts, offset) - 1
    return Pos(i, offset - self.starts[i])

  def _extent(self, node) -> tuple[int, int]:
    """The offsets of a node's own text: a block's header only (up to its `{`)."""
    s = node.span
    lo, hi = self._offset(s.line, s.column), self._offset(s.end_line, s.end_column)
    if type(node) in (Queue, Host):
      brace = self.text.find("{", lo, hi)
      hi = brace if brace >= 0 else hi
    return lo, hi

  def occurrences(self, node) -> Iterator[Occurrence]:
    """The names written in `node`'s text that it declares or refers to, in order."""
    if node.span is None or node.span.line < 1: return
    lo, hi = self._extent(node)
    wanted = set(refs(node))
    declared = getattr(node, "name", None) if type(node) in KINDS else None
    first = True
    for m in _TOKEN.finditer(self.text, lo, hi):
      word = m.group(1)
      if word is None: continue
      if first:   # the keyword (or, in a declaration, the name comes right after it)
        first = False
        continue
      start = m.start(1)
      if declared is not None and word == declared:
        yield Occurrence(word, Range(self._pos(start), self._pos(start + len(word))), node, True)
        declared = None
        continue
      if word not in wanted: continue
      if "." in word and (dev := word.split(".", 1)[0]) in self.decls:   # `D` of `D.timeline` first: the cursor on it means D
        yield Occurrence(dev, Range(self._pos(start), self._pos(start + len(dev))), node)
      yield Occurrence(word, Range(self._pos(start), self._pos(m.end(1))), node)

  def node_at(self, pos: Pos):
    """The innermost statement or declaration whose text holds `pos` (a block: its header line), else None."""
    best = None
    for ln in range(pos.line, -1, -1):
      for node in self.by_line.get(ln, ()):
        s = node.span
        r = Range(Pos(s.line - 1, s.column - 1), Pos(s.end_line - 1, s.end_column - 1))
        if type(node) in (Queue, Host): r = Range(r.start, self._pos(self._extent(node)[1]))
        if r.contains(pos): best = node
      if best is not None or ln < pos.line - 200: return best   # (statements are at most a data list long)
    return best

  def at(self, pos: Pos) -> Optional[Occurrence]:
    """The name under `pos` (the cursor touching it at either end): a device for `D` in `D.timeline`."""
    node = self.node_at(pos)
    if node is None: return None
    for o in self.occurrences(node):
      if o.range.contains(pos): return o
    return None

  def declaration(self, name: str) -> Optional[Occurrence]:
    """Where `name` is declared: its declaration's name (a device's, for its `D.timeline` and `D.epoch`)."""
    d = self.decls.get(name)
    if d is not None and "." in name: d = self.decls.get(name.split(".", 1)[0])   # D.timeline, D.epoch: the device D
    if d is None: return None
    return next((o for o in self.occurrences(d) if o.definition), None)

  def references(self, name: str, include_declaration: bool = True) -> list[Occurrence]:
    """Every occurrence of `name` in the program, in order (a device's: in `D.timeline` and `D.epoch` too)."""
    out = []
    for d in self.program.decls:
      for node in (d, *getattr(d, "body", ())):
        if type(node) in KINDS and getattr(node, "name", None) == name:
          if include_declaration: out += [o for o in self.occurrences(node) if o.definition]
          continue
        names = refs(node)
        if name in names or any(n.startswith(name + ".") for n in names):
          out += [o for o in self.occurrences(node) if o.name == name and not o.definition]
    return out
