"""A block body's statements as columns of ints: how the parser's fast path reads a big body (scan.py's column path)
and how the checker reads it back, without a node, a span or a slice object per statement (a million-statement
program would be three million objects, ~1 µs each to build in CPython).

The statements of the common kinds written the usual way — `wait`, `signal`, an `exec` whose arguments are all
buffers, `copy`, `barrier`, `epoch`, on a line of their own without a comment — are rows of a `Column` per kind:
their row numbers in the body and their fields as ints: names by number in the file's `Pool`, values as (var,
offset), slices as (buffer, start, end, ranged) with -1 for a missing bound. Their spans are found from the text when
a node is built (`Spans`: where each chunk of lines was read). Every other statement
is a node the parser built (`Rows.node_rows`, `Rows.nodes_made`). The queue or host holding the body stores the
`Rows` (ir.stored_body) and builds the tuple of nodes from it when `body` is first read; a row's node is built once
(`rows[i]` builds one, and the tuple reuses it), so a node is the same object however it was reached. The stages
that read columns (the static checks, unroll) take `Rows.of(block)`: the stored rows, or rows over a body stored as
a tuple, all of them node rows.
"""
from __future__ import annotations
from bisect import bisect_left
from collections import deque
from itertools import accumulate, islice, repeat
from typing import Iterator, Optional
import attrs
from ..ir import Span, Ref, Expr, Slice, Wait, SignalWrite, Exec, Copy, Barrier, Epoch, stored_body, store_body

__all__ = ["Rows", "Column", "Pool", "RowsBuilder", "WAIT", "SIGNAL", "EXEC", "COPY", "BARRIER", "EPOCH", "fast_constructor"]

WAIT, SIGNAL, EXEC, COPY, BARRIER, EPOCH = range(6)   # the kinds of column rows

def fast_constructor(cls, names: str, at: bool = False):
  """A constructor of the attrs class `cls` taking every field positionally (in the order of `names`): it fills the
  slots of a subclass that may be written (plain slot stores) and then makes the object a `cls`: the same object attrs'
  `__init__` builds (the IR has no validators, converters or post-init hooks), in half its time (no per-field
  `object.__setattr__` call, no keyword arguments). The subclass adds no slots, so its layout is `cls`'s. With `at`,
  a statement and its one-line span in one call: make(file, line, column, end_column, *names but span)."""
  fields, order = attrs.fields(cls), names.split()
  assert sorted(order) == sorted(a.name for a in fields), cls
  assert all(a.validator is None and a.converter is None for a in fields) and not hasattr(cls, "__attrs_post_init__")
  draft = type(f"_Draft{cls.__name__}", (cls,), {"__slots__": (), "__setattr__": object.__setattr__,
                                                  "__delattr__": object.__delattr__})
  ns = {"new": object.__new__, "cls": cls, "draft": draft, "Span": Span}
  if not at:
    exec(f"def make({', '.join(order)}):\n  o = new(draft); {'; '.join(f'o.{n} = {n}' for n in order)}; o.__class__ = cls; return o", ns)
    return ns["make"]
  ns["sdraft"] = _DraftSpan
  rest = [n for n in order if n != "span"]
  exec(f"def make(file, line, column, end_column, {', '.join(rest)}):\n"
       f"  s = new(sdraft); s.file = file; s.line = line; s.column = column; s.end_line = line; s.end_column = end_column\n"
       f"  s.__class__ = Span\n  o = new(draft); o.span = s; {'; '.join(f'o.{n} = {n}' for n in rest)}; o.__class__ = cls; return o", ns)
  return ns["make"]

_DraftSpan = type("_DraftSpan", (Span,), {"__slots__": (), "__setattr__": object.__setattr__, "__delattr__": object.__delattr__})
_MAKE = {WAIT: fast_constructor(Wait, "signal value span comments comment", at=True),
         SIGNAL: fast_constructor(SignalWrite, "signal value span comments comment", at=True),
         EXEC: fast_constructor(Exec, "kernel args grid block span comments comment", at=True),
         COPY: fast_constructor(Copy, "dst src span comments comment", at=True),
         BARRIER: fast_constructor(Barrier, "span comments comment", at=True),
         EPOCH: fast_constructor(Epoch, "span comments comment", at=True)}
_slice = fast_constructor(Slice, "buffer start end ranged launch")
_NONE, _EMPTY = repeat(None), repeat(())

class Pool:
  """What one file's rows refer to by number: names (of signals, kernels, buffers, vars; `id`), the launch dimensions
  of execs (`dims`, (grid, block) pairs). The values they stand for are made once each (`ref`, `expr`)."""
  def __init__(self):
    self.names: list[str] = []
    self.ids: dict[str, int] = {}
    self.dims: list[tuple] = []
    self._refs: list[Optional[Ref]] = []
    self._exprs: dict[tuple[int, int], Expr] = {}

  def id(self, name: str) -> int:
    i = self.ids.get(name)
    if i is None:
      i = self.ids[name] = len(self.names)
      self.names.append(name)
    return i

  def ref(self, i: int) -> Ref:
    if len(self._refs) <= i: self._refs += [None] * (len(self.names) - len(self._refs))
    r = self._refs[i]
    if r is None: r = self._refs[i] = Ref(self.names[i])
    return r

  def expr(self, var: int, offset: int) -> Expr:
    e = self._exprs.get((var, offset))
    if e is None: e = self._exprs[(var, offset)] = Expr(None if var < 0 else self.ref(var), offset)
    return e

  def slice(self, buf: int, lo: int, hi: int, ranged: int) -> Slice:
    return _slice(self.ref(buf), None if lo < 0 else lo, None if hi < 0 else hi, bool(ranged), None)

class Spans:
  """Where a body's column rows were written: the chunks of whole lines the parser read them from (the first row's
  number and line, the text), each row's one-line span found from its line's text when asked (from its first to
  past its last non-blank character): a million rows keep no position of their own."""
  __slots__ = ("row0", "chunks", "hold", "_lines")

  def __init__(self):
    self.row0: list[int] = []
    self.chunks: list[tuple] = []          # (first line, text, start, end, the line of each row or None: row i on line i)
    self.hold = False                      # every chunk's lines kept (while all rows are built)
    self._lines: dict[int, list[str]] = {}   # the lines of the chunks read last

  def add(self, row0: int, line0: int, text: str, start: int, end: int, line_of: Optional[list[int]]) -> None:
    self.row0.append(row0)
    self.chunks.append((line0, text, start, end, line_of))

  def of(self, rows: list[int]) -> tuple[list[int], list[int], list[int]]:
    """(line, column, end column) of each of `rows` (ascending)."""
    lines: list[int] = []
    cols: list[int] = []
    stops: list[int] = []
    for c, r0 in enumerate(self.row0):
      a = bisect_left(rows, r0)
      b = bisect_left(rows, self.row0[c + 1]) if c + 1 < len(self.row0) else len(rows)
      if a == b: continue
      line0, text, start, end, line_of = self.chunks[c]
      if (ls := self._lines.get(c)) is None:
        ls = text[start:end].split("\n")
        if not self.hold and len(self._lines) > 1: self._lines = {}
        self._lines[c] = ls
      at = [r - r0 for r in rows[a:b]]
      if line_of is not None: at = [line_of[i] for i in at]
      ts = [ls[i] for i in at]
      lines += [line0 + i for i in at]
      cols += [len(t) - len(t.lstrip(" \t")) + 1 for t in ts]
      stops += [len(t.rstrip(" \t")) + 1 for t in ts]
    return lines, cols, stops

@attrs.define(slots=True, eq=False)
class Column:
  """The rows of one kind, in body order: row numbers (0-based, increasing) and ints.
  `x`, `y`, `z`: a wait's or signal's signal, var (-1: none) and offset; an exec's kernel, argument count and
  launch dimensions (Pool.dims; -1: none). `buf`, `lo`, `hi`, `ranged`: the slices, flat (a copy's destination and
  source, an exec's arguments in order), a missing bound -1. The fields a kind has not are empty."""
  rows: list[int]
  x: list[int] = attrs.field(factory=list)
  y: list[int] = attrs.field(factory=list)
  z: list[int] = attrs.field(factory=list)
  buf: list[int] = attrs.field(factory=list)
  lo: list[int] = attrs.field(factory=list)
  hi: list[int] = attrs.field(factory=list)
  ranged: list[int] = attrs.field(factory=list)
  firsts: Optional[list] = attrs.field(default=None, init=False)   # an exec's first slice, once asked

  def __len__(self) -> int: return len(self.rows)

  def slices(self, pool: Pool) -> list[Slice]:
    return list(map(pool.slice, self.buf, self.lo, self.hi, self.ranged))

  def make(self, kind: int, file: str, pool: Pool, spans: Spans) -> Iterator:
    """The nodes of the rows, in order."""
    f, pos = _MAKE[kind], (repeat(file), *spans.of(self.rows))
    if kind == WAIT or kind == SIGNAL:
      return map(f, *pos, map(pool.ref, self.x), map(pool.expr, self.y, self.z), _EMPTY, _NONE)
    if kind == COPY:
      s = self.slices(pool)
      return map(f, *pos, s[0::2], s[1::2], _EMPTY, _NONE)
    if kind == EXEC:
      it = iter(self.slices(pool))
      args = map(tuple, map(islice, repeat(it), self.y))
      dims = [pool.dims[d] if d >= 0 else (None, None) for d in self.z]
      return map(f, *pos, map(pool.ref, self.x), args, [d[0] for d in dims], [d[1] for d in dims], _EMPTY, _NONE)
    return map(f, *pos, _EMPTY, _NONE)

  def one(self, kind: int, file: str, pool: Pool, spans: Spans, j: int):
    """The node of the column's row j."""
    f, pos = _MAKE[kind], (file, *(x[0] for x in spans.of([self.rows[j]])))
    if kind == WAIT or kind == SIGNAL:
      return f(*pos, pool.ref(self.x[j]), pool.expr(self.y[j], self.z[j]), (), None)
    if kind == BARRIER or kind == EPOCH: return f(*pos, (), None)
    if kind == COPY: a, b = 2 * j, 2 * j + 2
    else:
      if self.firsts is None: self.firsts = starts(self.y)
      a = self.firsts[j]
      b = a + self.y[j]
    sl = list(map(pool.slice, self.buf[a:b], self.lo[a:b], self.hi[a:b], self.ranged[a:b]))
    if kind == COPY: return f(*pos, sl[0], sl[1], (), None)
    grid, block = pool.dims[self.z[j]] if self.z[j] >= 0 else (None, None)
    return f(*pos, pool.ref(self.x[j]), tuple(sl), grid, block, (), None)

class Rows:
  """The statements of one block body: column rows by kind (`columns`) and node rows (`node_rows`, `nodes_made`).
  A sequence of the statements: `len`, `rows[i]` (its node, built once), iteration (every node)."""
  __slots__ = ("file", "n", "pool", "spans", "columns", "node_rows", "nodes_made", "_built", "_one")

  def __init__(self, file: str, n: int, pool: Pool, spans: Spans, columns: dict, node_rows: list, nodes_made: list):
    self.file, self.n, self.pool, self.spans = file, n, pool, spans
    self.columns: dict[int, Column] = columns   # kind -> its rows (only kinds with rows)
    self.node_rows, self.nodes_made = node_rows, nodes_made
    self._built: Optional[tuple] = None   # every node, once built
    self._one: dict[int, object] = {}      # the column rows built one by one, before that

  @classmethod
  def of(cls, block) -> "Rows":
    """The rows of a Queue's or Host's body: as the parser stored them, else read from its nodes (`from_nodes`) and
    kept in their place, so every stage reads them once."""
    b = stored_body(block)
    if type(b) is not tuple: return b
    r = cls.from_nodes(b, block.span.file if block.span is not None else "<input>")
    store_body(block, r)
    return r

  @classmethod
  def from_nodes(cls, body: tuple, file: str) -> "Rows":
    """The nodes of `body` as rows: those of the column kinds with fields columns hold (no `x@k`, no bound past
    2**62, an exec's arguments all slices) as column rows, the others node rows; the nodes stay what `body` reads."""
    pool = Pool()
    rb = RowsBuilder(file, pool)
    cols: dict[int, tuple[list, dict]] = {}
    node_rows, nodes = [], []
    def add(kind, i, **f):
      rows, fields = cols.setdefault(kind, ([], {}))
      rows.append(i)
      for k, v in f.items(): fields.setdefault(k, []).extend(v)
    for i, st in enumerate(body):
      t = type(st)
      if t is Wait or t is SignalWrite:
        v = st.value
        if abs(v.offset) < _BIG:
          add(WAIT if t is Wait else SIGNAL, i, x=(pool.id(st.signal.name),), y=(-1 if v.var is None else pool.id(v.var.name),), z=(v.offset,))
          continue
      elif t is Copy:
        sl = _plain(pool, (st.dst, st.src))
        if sl is not None:
          add(COPY, i, **sl)
          continue
      elif t is Exec:
        sl = _plain(pool, st.args)
        if sl is not None:
          d = -1 if st.grid is None and st.block is None else len(pool.dims)
          if d >= 0: pool.dims.append((st.grid, st.block))
          add(EXEC, i, x=(pool.id(st.kernel.name),), y=(len(st.args),), z=(d,), **sl)
          continue
      elif t is Barrier or t is Epoch:
        add(BARRIER if t is Barrier else EPOCH, i)
        continue
      node_rows.append(i)
      nodes.append(st)
    rb.add_chunk(len(body), [(k, rows, f) for k, (rows, f) in cols.items()], node_rows, nodes)
    r = rb.finish()
    if type(r) is tuple: r = cls(file, len(body), pool, Spans(), {}, node_rows, nodes)
    r._built = body
    return r

  def __len__(self) -> int: return self.n
  def __iter__(self) -> Iterator: return iter(self.nodes())

  def __getitem__(self, i: int):
    if self._built is not None: return self._built[i]
    if i < 0: i += self.n
    if not 0 <= i < self.n: raise IndexError(i)
    if (x := self._one.get(i)) is not None: return x
    for kind, c in self.columns.items():
      j = bisect_left(c.rows, i)
      if j < len(c.rows) and c.rows[j] == i:
        x = self._one[i] = c.one(kind, self.file, self.pool, self.spans, j)
        return x
    return self.nodes_made[bisect_left(self.node_rows, i)]

  def nodes(self) -> tuple:
    """Every statement as its node, in order: what `body` reads."""
    if self._built is None:
      out: list = [None] * self.n
      self.spans.hold = True
      for kind, c in self.columns.items(): deque(map(out.__setitem__, c.rows, c.make(kind, self.file, self.pool, self.spans)), 0)
      self.spans.hold, self.spans._lines = False, {}
      deque(map(out.__setitem__, self.node_rows, self.nodes_made), 0)
      for i, x in self._one.items(): out[i] = x
      self._built = tuple(out)
      self._one = {}
    return self._built

class RowsBuilder:
  """A body's rows as the parser reads them: runs of nodes and chunks of columns, in order."""
  def __init__(self, file: str, pool: Pool):
    self.file, self.pool, self.n, self.spans = file, pool, 0, Spans()
    self.parts: dict[int, Column] = {}   # kind -> its column being filled
    self.node_rows: list[int] = []
    self.nodes: list = []

  def add_nodes(self, nodes: list) -> None:
    self.node_rows += range(self.n, self.n + len(nodes))
    self.nodes += nodes
    self.n += len(nodes)

  def add_chunk(self, n: int, columns: list, node_rows, nodes, where: Optional[tuple] = None) -> None:
    """A chunk of `n` rows: its columns, each (kind, rows, {field: ints}), and its node rows, row numbers counted from
    the chunk's start; `where` it was read: (first line, text, start, end, the line of each row when not row i on
    line i), for the column rows' spans."""
    for kind, rows, fields in columns:
      c = self.parts.get(kind)
      if c is None: c = self.parts[kind] = Column([])
      c.rows += map(self.n.__add__, rows) if self.n else rows
      for f, v in fields.items(): getattr(c, f).extend(v)
    if where is not None and columns: self.spans.add(self.n, *where)
    self.node_rows += map(self.n.__add__, node_rows)
    self.nodes += nodes
    self.n += n

  def finish(self):
    """The body: a tuple when there are only node rows, else the Rows (node rows in order)."""
    if not self.parts: return tuple(self.nodes)
    order = sorted(range(len(self.nodes)), key=self.node_rows.__getitem__)
    return Rows(self.file, self.n, self.pool, self.spans, dict(sorted(self.parts.items())), list(map(self.node_rows.__getitem__, order)),
                list(map(self.nodes.__getitem__, order)))

_BIG = 1 << 62   # a value or bound an int column holds (the checker's numpy columns take int64)

def _plain(pool: Pool, slices) -> Optional[dict]:
  """Slices as column ints ({buf, lo, hi, ranged}), None when one is no slice, `x@k` or has a bound past 2**62."""
  out: dict[str, list] = {"buf": [], "lo": [], "hi": [], "ranged": []}
  for sl in slices:
    if type(sl) is not Slice or sl.launch is not None: return None
    lo, hi = -1 if sl.start is None else sl.start, -1 if sl.end is None else sl.end
    if not (-1 <= lo < _BIG and -1 <= hi < _BIG): return None
    out["buf"].append(pool.id(sl.buffer.name))
    out["lo"].append(lo)
    out["hi"].append(hi)
    out["ranged"].append(int(sl.ranged))
  return out

def starts(counts) -> list[int]:
  """Where each row's run of flat items starts, from the runs' lengths."""
  return [0, *accumulate(counts)][:-1] if len(counts) else []
