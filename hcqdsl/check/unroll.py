"""A Program unrolled over N launches: the host and every queue as a sequence of small op tuples.

Steps are not materialised (a 1M-statement program over 2 launches would be 2M objects): a sequence keeps one op per
statement, and its step at 1-based position `pos` is op `(pos-1) % len(ops)` of launch `(pos-1) // len(ops) + 1`.
Sequence 0 is always the host (it holds the implicit submit of queues no `submit` names), queues follow in order.

A block with a `launches` clause is absent from the other launches: its ops stay in every launch's place (positions
keep their meaning), and `Unrolled.absent` says in which launches an op is not there — every op of a queue outside its
launches (`Seq.off`), the ops of a host block outside its own (`Seq.op_off`; the host's sequence is every host block in
program order). The analyses skip an absent op as if it were not written; a queue takes its launch-k start from the
submit that hands it over in launch k (`Seq.gates`, when that differs between launches).
"""
from __future__ import annotations
import itertools
from collections import deque
from typing import Callable, Optional, Sequence
from itertools import chain, repeat
from operator import itemgetter
import attrs
import numpy as np
from ..ir import (KERNARGS, Program, Queue, Buffer, Wait, SignalWrite, Exec, Copy, Write, HostWrite, Poll, Barrier, Epoch, Submit, Span,
                  Slice, Timestamp,
                  Expr, U32_MAX, POLL_SIZE, epoch_wait, in_launches)
from ..lang import rows as R_
from ..lang.rows import Rows, Column, Pool

__all__ = ["R", "W", "RW", "WAIT", "WRITE", "ACCESS", "NOP", "BARRIER", "SUBMIT", "POLL", "Seq", "Unrolled", "AccessTable", "unroll",
           "INT64_SAFE", "PLAIN", "POLL_READ", "STORE", "KERNARGS_BYTES", "kernargs_buffer", "polled_word"]

# the pseudo-buffer of an exec whose kernel arguments the host patches at each submit: one access of its whole block
KERNARGS_BYTES = 8

def kernargs_buffer(kernel: str, queue: str, line: int) -> str:
  """The name check gives that pseudo-buffer, in its diagnostics and witnesses (the exec's kernel, queue and line)."""
  return f"the kernel arguments of `exec {kernel}` ({queue} line {line})"

def polled_word(buffer: str, lo: int, launch: Optional[int] = None) -> str:
  """A polled word as check names it, in its diagnostics and witnesses (`cq[60:64]`; `launch`: a rebound buffer's
  launch-k memory, `x@2[0:4]`)."""
  return f"{buffer}{'' if launch is None else f'@{launch}'}[{lo}:{lo + POLL_SIZE}]"

# op kinds. WAIT/WRITE: (kind, signal id, var name or None, offset). ACCESS: (kind, ((buffer id, lo, hi, mode), ...)).
# NOP (timestamp), BARRIER: (kind,). SUBMIT: (kind, (queue sequence ids ...)).
# POLL: (kind, cell, var name or None, offset, mask, pinned launch (0-based) or None, the 4-byte read access).
# An ACCESS that stores into polled words (a `write`, the host's rewrite of a `rewritten` buffer) has a third
# element: ((cell, pinned launch or None, bits kept, (bits stored in launch 1, 2, ...)), ...).
WAIT, WRITE, ACCESS, NOP, BARRIER, SUBMIT, POLL = range(7)
_BARRIER, _NOP = (BARRIER,), (NOP,)
INT64_SAFE = 1 << 62   # var values and offsets past this are left to Python ints (numpy's int64 would wrap)
R, W, RW = 0, 1, 2  # access modes: `mode != R` writes, `mode != W` reads
_MODE = {"in": R, "out": W, "inout": RW}

@attrs.define
class OpColumns:
  """A sequence's ops as numpy columns, made by the lowering of column rows (lang/rows.py) as it makes the ops, so the
  analyses that take them at once (`Unrolled.sync_columns`, `AccessTable`) do not read a million op tuples back.
  `kinds`: each op's kind; `sync`: its waits and writes as (op indices, kinds, signals, vars as columns of
  `sync_columns`' E, offsets); `acc`: its ACCESS ops' accesses as (op indices, index in the op's accesses, buffer,
  start, end, mode), None when some op also stores into polled words (the table reads the ops then)."""
  kinds: np.ndarray
  sync: tuple
  acc: Optional[tuple]

class Seq:
  __slots__ = ("index", "name", "device", "queue", "stmts", "ops", "gate", "gates", "off", "op_off", "_kinds", "cols")
  def __init__(self, index, name, device, queue, stmts, ops, cols: Optional[OpColumns] = None):
    self.index, self.name, self.device, self.queue, self.stmts, self.ops = index, name, device, queue, stmts, ops
    self.gate = -1  # queues: index in the host's ops of the submit that hands this queue over, each launch
    self.gates: Optional[list[int]] = None   # ... or per launch (0-based; -1: not in that launch), when they differ
    self.off: frozenset = frozenset()        # the launches (1-based) the whole sequence is absent from (a queue's clause)
    self.op_off: dict[int, frozenset] = {}   # op index -> the launches it is absent from (a host block's clause)
    self.cols = cols
    self._kinds = None if cols is None else cols.kinds
  def __repr__(self): return f"Seq({self.name})"

  def where_kind(self, *kinds) -> np.ndarray:
    """The indices of the ops of these kinds."""
    if self._kinds is None: self._kinds = np.fromiter(map(itemgetter(0), self.ops), dtype=np.int8, count=len(self.ops))
    return np.flatnonzero(np.isin(self._kinds, kinds))

  def sync(self, polls: bool = False, launch: Optional[int] = None) -> tuple[list, tuple]:
    """The ops the happens-before execution stops at (waits, writes, submits; with `polls`, also polls and the
    accesses that store into polled words): their indices, and the ops (`launch`: those present in it)."""
    if polls:
      at = [n for n in self.where_kind(WAIT, WRITE, SUBMIT, POLL, ACCESS).tolist() if self.ops[n][0] != ACCESS or len(self.ops[n]) > 2]
    else: at = self.where_kind(WAIT, WRITE, SUBMIT).tolist()
    if launch is not None and (self.off or self.op_off):
      at = [] if launch in self.off else [n for n in at if launch not in self.op_off.get(n, ())]
    return at, _gather(self.ops, at)

  @property
  def partial(self) -> bool:
    """Some op of it is absent from some launch (a `launches` clause)."""
    return bool(self.off or self.op_off)

  def absent(self, idx: int, launch: int) -> bool:
    """Op idx is not there in `launch` (1-based)."""
    return launch in self.off or launch in self.op_off.get(idx, ())

class Ops(Sequence):
  """A queue's ops, made from its OpColumns when read: `ops[i]` makes one, iteration (or many single reads) all, as
  `_Lowering.lower` makes them (tests/test_rows.py holds them equal). The happens-before pass and the passes read a
  million-statement program's ops at the statements they report, and its columns for the rest."""
  __slots__ = ("n", "cols", "var_of", "made", "_all", "_asked")
  ONE_BY_ONE = 256   # single reads before the rest are made at once

  def __init__(self, n: int, cols: OpColumns, var_of: list, made: dict):
    self.n, self.cols, self.var_of, self.made = n, cols, var_of, made   # var_of: a var column's name (0: None); made: node rows' ops
    self._all: Optional[list] = None
    self._asked = 0

  def __len__(self) -> int: return self.n
  def __iter__(self): return iter(self.all())
  def __eq__(self, other): return list(self) == list(other) if isinstance(other, (list, Ops)) else NotImplemented
  __hash__ = None   # type: ignore[assignment]

  def __getitem__(self, i):
    if self._all is not None or type(i) is not int: return self.all()[i]
    if i < 0: i += self.n
    if not 0 <= i < self.n: raise IndexError(i)
    if (op := self.made.get(i)) is not None: return op
    self._asked += 1
    if self._asked > self.ONE_BY_ONE: return self.all()[i]
    kind = int(self.cols.kinds[i])
    if kind == WAIT or kind == WRITE:
      at, k, sig, var, off = self.cols.sync
      j = int(np.searchsorted(at, i))
      return (kind, int(sig[j]), self.var_of[var[j]], int(off[j]))
    if kind == BARRIER: return _BARRIER
    assert kind == ACCESS and self.cols.acc is not None   # (other kinds are node rows)
    idx, _, buf, lo, hi, mode = self.cols.acc
    a, b = np.searchsorted(idx, [i, i + 1]).tolist()
    return (ACCESS, tuple(zip(buf[a:b].tolist(), lo[a:b].tolist(), hi[a:b].tolist(), mode[a:b].tolist())))

  def all(self) -> list:
    """Every op (made once)."""
    if self._all is None:
      out: list = [None] * self.n
      at, kind, sig, var, off = self.cols.sync
      deque(map(out.__setitem__, at.tolist(), zip(kind.tolist(), sig.tolist(), map(self.var_of.__getitem__, var.tolist()), off.tolist())), 0)
      kinds = self.cols.kinds
      deque(map(out.__setitem__, np.flatnonzero(kinds == BARRIER).tolist(), repeat(_BARRIER)), 0)
      if self.cols.acc is not None:
        idx, _, buf, lo, hi, mode = self.cols.acc
        ops = np.flatnonzero(kinds == ACCESS)
        n = np.diff(np.searchsorted(idx, np.r_[ops, self.n])).tolist()
        it = zip(buf.tolist(), lo.tolist(), hi.tolist(), mode.tolist())
        deque(map(out.__setitem__, ops.tolist(), zip(repeat(ACCESS), map(tuple, map(itertools.islice, repeat(it), n)))), 0)
      for i, op in self.made.items(): out[i] = op
      self._all = out
    return self._all

def var_names(envs: list[dict]) -> list[str]:
  """The vars of a program's launches, in the order of `Unrolled.sync_columns`' columns (from 1)."""
  return sorted({n for env in envs for n in env})

def _gather(xs, at: list) -> tuple:
  if type(xs) is Ops: xs = xs.all()
  if len(at) > 1: return itemgetter(*at)(xs)
  return (xs[at[0]],) if at else ()

class Unrolled:
  """Everything the analyses need, with names turned into small ints."""
  def __init__(self, program: Program, launches: int, envs: list, seqs: list, signals: list, buffers: list,
               host_span: Optional[Span]):
    self.program, self.launches, self.envs, self.seqs = program, launches, envs, seqs
    self.signals = signals          # [Signal]; id = index
    self.buffers = buffers          # [Buffer]; id = index
    self.sig_init = [s.init & U32_MAX for s in signals]
    self.buf_device = [b.device.name if b.device is not None else None for b in buffers]
    # a rebound buffer is new memory in each launch: its accesses in different launches never conflict
    self.rebound = [b.per_launch == "rebound" for b in buffers]
    self.idle: dict = {}   # seq -> {op index: launches in which that host write writes nothing}
    self.pinned: dict = {}  # seq -> {(op index, access index): launch index (0-based)}: `x@k` accesses
    self.host_span = host_span
    # the words `poll`s read: cell id -> (buffer id, byte offset); a rebound buffer's cell has one slot per launch's
    # memory (cell_slot), its initial value that launch's contents
    self.cells: list = []
    self.cell_slot: list = []   # cell id -> its first slot
    self.cell_init: list = []   # slot -> initial 32-bit value
    self._acc: Optional[AccessTable] = None
    self._sync: Optional[tuple] = None

  def total(self, i: int) -> int: return len(self.seqs[i].ops) * self.launches

  def slot(self, cell: int, pin, launch: int) -> int:
    """The slot of a cell's word that a step of `launch` (1-based) touches: a rebound buffer's launch memory (`pin`,
    0-based, for `x@k`), else the one word."""
    b = self.cells[cell][0]
    return self.cell_slot[cell] + ((launch - 1 if pin is None else pin) if self.rebound[b] else 0)

  def cell_name(self, cell: int) -> str:
    b, lo = self.cells[cell]
    return polled_word(self.buffers[b].name, lo)

  @property
  def polls(self) -> bool: return bool(self.cells)

  def sync_columns(self) -> Optional[tuple]:
    """The waits and writes as numpy columns, for the passes that take them all at once: (E, per sequence (op
    indices, kinds, signals, vars, offsets)), where a var is a column of E (0: none) and E[k] holds launch k+1's
    values (column 0 is 0). None when a value or an offset is too big for int64 arithmetic (those take the ops)."""
    if self._sync is None:
      names = var_names(self.envs)
      vid = {n: x + 1 for x, n in enumerate(names)}
      ok = all(-INT64_SAFE < env[n] < INT64_SAFE for env in self.envs for n in names)
      E = np.array([[0] + [env[n] for n in names] for env in self.envs] if ok else [], dtype=_I64).reshape(-1, len(names) + 1)
      cols = []
      for s in self.seqs:
        if s.cols is not None and ok:
          cols.append(s.cols.sync)
          continue
        at = s.where_kind(WAIT, WRITE)
        ops = _gather(s.ops, at.tolist())
        n = len(ops)
        try:
          kind, sig, var, off = (np.fromiter(m, dtype=_I64, count=n) for m in (
            map(itemgetter(0), ops), map(itemgetter(1), ops), map(vid.get, map(itemgetter(2), ops), repeat(0)),
            map(itemgetter(3), ops)))
        except OverflowError:
          ok = False
          break
        if n and np.abs(off).max() >= INT64_SAFE:
          ok = False
          break
        cols.append((at, kind, sig, var, off))
      self._sync = (E, cols) if ok else ()
    return self._sync or None

  def access_table(self) -> "AccessTable":
    if (acc := self._acc) is None: acc = self._acc = AccessTable(self)
    return acc

  def where(self, i: int, pos: int) -> tuple[int, int]:
    """(launch, op index) of sequence i's step at 1-based position pos."""
    k, idx = divmod(pos - 1, len(self.seqs[i].ops))
    return k + 1, idx

  def raw(self, op, launch: int) -> int:
    """The unwrapped value of a WAIT/WRITE op in a launch (may be outside 32 bits: `overflow`)."""
    return op[3] if op[2] is None else self.envs[launch - 1][op[2]] + op[3]

  def value(self, op, launch: int, host: bool = False) -> int:
    """What the op compares or stores: the 32-bit packets see the low 32 bits; the host's wait compares the signal's
    whole 64-bit memory (tinygrad's HCQSignal.wait), whose high half nothing in a program sets, so a host wait for
    2**32 or more never passes."""
    v = self.raw(op, launch)
    return v if host and op[0] == WAIT and v > U32_MAX else v & U32_MAX

  def gate_pos(self, i: int, launch: int) -> int:
    """The host position that submits queue i for `launch` (0: none needed, or the queue is not in that launch)."""
    s = self.seqs[i]
    g = s.gate if s.gates is None else s.gates[launch - 1]
    return 0 if g < 0 else (launch - 1) * len(self.seqs[0].ops) + g + 1

  @property
  def partial(self) -> bool:
    """Some sequence has ops absent from some launch (`launches` clauses)."""
    return any(s.partial for s in self.seqs)

  def absent(self, i: int, idx: int, launch: int) -> bool:
    """Sequence i's op idx is not there in `launch` (1-based)."""
    return self.seqs[i].absent(idx, launch)

  def stmt(self, i: int, pos: int):
    return self.seqs[i].stmts[self.where(i, pos)[1]]

  def span(self, i: int, pos: int) -> Optional[Span]:
    st = self.stmt(i, pos)
    return st.span if st is not None else self.host_span

  def line(self, i: int, pos: int) -> str:
    """`line N`, with the statement's provenance when it has one (`line N (from model.py:42: x = self.attn(x))`)."""
    st, sp = self.stmt(i, pos), self.span(i, pos)
    if sp is None or sp.line <= 0: return "the implicit submit"
    return f"line {sp.line}" + (f" (from {o})" if st is not None and (o := st.origin) else "")

_I64 = np.int64
def _col(xs) -> np.ndarray: return np.fromiter(xs, dtype=_I64)


def _ranked(accs, rows: int) -> np.ndarray:
  """The access columns of a program with byte offsets past int64 (a buffer of 2**63 bytes, a `bounds` error the
  analyses still run past): each offset replaced by its rank among all of them, which keeps every overlap test (the
  table's only use of offsets) exact."""
  flat = list(chain.from_iterable(chain.from_iterable(accs)))
  rank = {v: r for r, v in enumerate(sorted({x for a in flat for x in a[1:3]}))}
  return np.array([(b, rank[lo], rank[hi], m) for b, lo, hi, m in flat], dtype=_I64).reshape(4 * rows)

# an access row's role: a plain access, a poll's read of its word, or a store into polled words (a `write`, the host's
# rewrite): a poll's read and a store are the synchronization between them, never a race
PLAIN, POLL_READ, STORE = 0, 1, 2

class AccessTable:
  """Every access of every sequence's ops as numpy columns, one row per access of one op (the same in every launch):
  sequence, op index, index in the op's accesses, range id, mode, buffer, role."""
  def __init__(self, u: Unrolled):
    pieces = None if u.polls else _column_accesses(u)
    if pieces is not None:
      self.seq = np.repeat(np.arange(len(u.seqs), dtype=_I64), [len(p[0]) for p in pieces])
      self.idx, self.sub, buf, lo, hi, self.mode = (np.concatenate([p[f] for p in pieces]) for f in range(6))
      rows = len(self.seq)
    else: buf, lo, hi, rows = self._from_ops(u)
    # a range id per distinct (buffer, lo, hi)
    order = np.lexsort((hi, lo, buf))
    new = np.ones(len(order), dtype=bool)
    if len(order): new[1:] = (np.diff(buf[order]) != 0) | (np.diff(lo[order]) != 0) | (np.diff(hi[order]) != 0)
    self.rid = np.empty(len(order), dtype=_I64)
    self.rid[order] = np.cumsum(new) - 1
    first = order[new]
    self.nrange = len(first)
    self.range_buf, self.range_lo, self.range_hi = buf[first], lo[first], hi[first]
    self.buf = buf
    self.len = _col(len(s.ops) for s in u.seqs)[self.seq]
    self.rebound_range = np.asarray(u.rebound, dtype=_I64)[self.range_buf] if self.nrange else np.zeros(0, dtype=_I64)
    self.rebound = self.rebound_range[self.rid]
    # `x@k`: the launch whose memory the access is to (-1: the launch that runs it)
    self.pin = np.full(rows, -1, dtype=_I64)
    for i, ps in u.pinned.items():
      for (n, m), k in ps.items(): self.pin[(self.seq == i) & (self.idx == n) & (self.sub == m)] = k
    if u.polls:
      at = [s.where_kind(ACCESS, POLL) for s in u.seqs]
      counts = [_col(1 if op[0] == POLL else len(op[1]) for op in _gather(s.ops, a.tolist())) for s, a in zip(u.seqs, at)]
      roles = [_col(POLL_READ if op[0] == POLL else STORE if len(op) > 2 else PLAIN for op in _gather(s.ops, a.tolist()))
               for s, a in zip(u.seqs, at)]
      self.role = np.concatenate([np.repeat(r, c) for r, c in zip(roles, counts)])
    else: self.role = np.zeros(rows, dtype=_I64)
    # host writes that write nothing in some launches (a patched kernel argument whose values did not change), and the
    # accesses absent from a launch (a `launches` clause)
    self.idle: dict[int, np.ndarray] = {}   # launch index -> rows that write nothing in it
    def mark(k: int, rows: np.ndarray) -> None:
      m = self.idle.setdefault(k - 1, np.zeros(len(self.seq), dtype=bool))
      m |= rows
    for i, ops in u.idle.items():
      for n, ks in ops.items():
        for k in ks: mark(k, (self.seq == i) & (self.idx == n))
    for i, s in enumerate(u.seqs):
      if not s.partial: continue
      mine = self.seq == i
      for k in s.off: mark(k, mine)
      for n, ks in s.op_off.items():
        for k in ks: mark(k, mine & (self.idx == n))

  def _from_ops(self, u: Unrolled) -> tuple:
    """seq, idx, sub and mode from the ops themselves; returns (buffer, start, end, rows)."""
    at = [s.where_kind(ACCESS, POLL) for s in u.seqs]
    accs = [tuple((op[6],) if op[0] == POLL else op[1] for op in _gather(s.ops, a.tolist())) for s, a in zip(u.seqs, at)]
    counts = [_col(map(len, a)) for a in accs]
    self.seq = np.repeat(np.arange(len(u.seqs), dtype=_I64), _col(int(c.sum()) for c in counts))
    self.idx = np.concatenate([np.repeat(a, c) for a, c in zip(at, counts)])
    n = np.concatenate(counts)
    self.sub = np.arange(len(self.seq), dtype=_I64) - np.repeat(np.cumsum(n) - n, n)
    rows = int(n.sum())
    try: cols = np.fromiter(chain.from_iterable(chain.from_iterable(chain.from_iterable(accs))), dtype=_I64, count=4 * rows)
    except OverflowError: cols = _ranked(accs, rows)
    buf, lo, hi, self.mode = cols.reshape(rows, 4).T.copy()
    return buf, lo, hi, rows

  def neighbours(self, launches: int) -> tuple:
    """CSR over range instances (range id + nrange * launch for a rebound buffer's ranges, the range id otherwise):
    the instances each overlaps, itself included; (None, None) when every buffer's ranges are pairwise disjoint (each
    overlaps only itself)."""
    nr = self.nrange
    b, lo, hi = self.range_buf, self.range_lo, self.range_hi
    order = np.lexsort((hi, lo, b))
    same = b[order][1:] == b[order][:-1]
    crossing = np.unique(b[order][1:][same & (hi[order][:-1] > lo[order][1:])])
    if not len(crossing): return None, None
    else:
      nbs = [[r] for r in range(nr)]
      for buf in crossing.tolist():
        rs = sorted(zip(lo[b == buf].tolist(), hi[b == buf].tolist(), np.flatnonzero(b == buf).tolist()))
        for n, (l1, h1, r) in enumerate(rs):   # sorted by start: the ranges starting before h1 overlap it
          for l2, h2, r2 in rs[n + 1:]:
            if l2 >= h1: break
            if l1 < h1 and l2 < h2:
              nbs[r].append(r2)
              nbs[r2].append(r)
      cnt = _col(map(len, nbs))
      flat = _col(chain.from_iterable(nbs))
    counts, entries = [cnt], [flat]
    if launches > 1: owner_rebound = np.repeat(self.rebound_range, cnt) == 1
    for k in range(1, launches):
      counts.append(cnt * self.rebound_range)
      entries.append(flat[owner_rebound] + nr * k)
    ptr = np.zeros(nr * launches + 1, dtype=_I64)
    np.cumsum(np.concatenate(counts), out=ptr[1:])
    return ptr, np.concatenate(entries)

def _table(pool: Pool, ids: set, of: Callable, extra: int = 0) -> Optional[np.ndarray]:
  """pool id -> of(its name), for the ids given (the others 0), as a numpy lookup table; None when `of` gives None
  or a value past int64 (a buffer of 2**63 bytes: `lower` takes Python ints). `extra` more entries at the end (0),
  for id -1."""
  t = np.zeros(len(pool.names) + extra, dtype=_I64)
  for i in ids:
    if (x := of(pool.names[i])) is None or not -INT64_SAFE < x < INT64_SAFE: return None
    t[i] = x
  return t

def _sorted(pieces: list, width: int, keys: int) -> tuple:
  """Columns made in pieces, concatenated and sorted by their first `keys` columns (op index first)."""
  if not pieces: return tuple(np.zeros(0, dtype=_I64) for _ in range(width))
  cols = [np.concatenate([p[f] for p in pieces]) for f in range(width)]
  order = np.lexsort(tuple(cols[:keys][::-1]))
  return tuple(c[order] for c in cols)

def _column_accesses(u: Unrolled) -> Optional[list[tuple]]:
  """Per sequence (op indices, index in the op, buffer, start, end, mode) of its accesses: the lowering's columns,
  else read from its ops; None when a byte offset is past int64 (AccessTable ranks them)."""
  out = []
  for s in u.seqs:
    if s.cols is not None and s.cols.acc is not None:
      out.append(s.cols.acc)
      continue
    at = s.where_kind(ACCESS)
    accs = [op[1] for op in _gather(s.ops, at.tolist())]
    n = _col(map(len, accs))
    try: cols = np.fromiter(chain.from_iterable(chain.from_iterable(accs)), dtype=_I64, count=4 * int(n.sum())).reshape(-1, 4).T
    except OverflowError: return None
    out.append((np.repeat(at, n), np.arange(len(cols[0]), dtype=_I64) - np.repeat(np.cumsum(n) - n, n), *cols))
  return out

def _envs(program: Program, launches: int, var_values: Optional[dict]) -> list[dict]:
  out = []
  lists = {n: v for n, v in program.var_lists.items() if v}  # an empty list is a static error: launch numbers then
  for k in range(1, launches + 1):
    env = {}
    for name in program.vars:
      v = (var_values or {}).get(name, lists.get(name, k))
      env[name] = v[k - 1] if isinstance(v, (list, tuple)) else v(k) if callable(v) else v
    out.append(env)
  return out

def _contents(b: Buffer, launch: int) -> bytes:
  """A buffer's bytes as its data gives them (launch k's for a per-launch buffer; zeros past the data)."""
  d = b.init if b.per_launch is None else b.launch_inits[launch - 1] if launch <= len(b.launch_inits) else None
  if d is None: return bytes(b.size)
  return d.to_bytes()[:b.size].ljust(b.size, b"\0")

class _Lowering:
  """What lowering a program's statements to ops needs, built once per unroll: names as ids, each kernel's parameter
  modes, the polled words, and what it gathers as it goes (the kernel arguments the host patches, `x@k` accesses)."""
  def __init__(self, program: Program, launches: int, envs: list[dict]):
    self.launches, self.envs = launches, envs
    self.sig_id = {s.name: i for i, s in enumerate(program.signals)}
    self.buffers = list(program.buffers)   # [Buffer]; the kernel-argument pseudo-buffers are appended
    self.rebound = {b.name for b in self.buffers if b.per_launch == "rebound"}
    self.binfo = {b.name: (i, b.size) for i, b in enumerate(self.buffers)}
    self.kmodes = {k.name: [None if p.scalar else _MODE[p.mode] for p in k.params] for k in program.kernels}
    # the kernel arguments the host patches at each submit (a var-valued scalar, a rebound buffer's address): memory
    # the host writes while the previous launch's exec may still read it, unless something orders them
    self.kargs_of: dict[str, list[int]] = {}   # queue name -> [buffer ids]
    self.same: dict[int, frozenset[int]] = {}   # buffer id -> launches whose patched values all equal the previous launch's: nothing written
    # `amd "k.co" code B`: each exec of k reads B, the buffer its code was uploaded to (ties it to the upload)
    self.kcode = {k.name: (self.binfo[k.impl.code][0], 0, self.binfo[k.impl.code][1], R) for k in program.kernels
                  if k.impl is not None and k.impl.code in self.binfo}
    # a kernel whose last parameter is `in kernargs` reads its kernel-argument block through it (a lifted capture
    # names that memory, and the host's writes of it are the program's own `write`s): no implicit patch for it
    self.explicit = {k.name for k in program.kernels if k.params and k.params[-1].name == KERNARGS and k.params[-1].mode == "in"}
    # the polled words: one cell per (buffer, offset) some `poll` reads
    self.cells: dict[tuple[int, int], int] = {}
    for q in program.queues:
      for st in Rows.of(q).nodes_made:   # (a poll is never a column row)
        if type(st) is Poll and (bi := self.binfo.get(st.src.buffer.name)) is not None:
          self.cells.setdefault((bi[0], 0 if st.src.start is None else st.src.start), len(self.cells))
    self.by_buf: dict[int, list[tuple[int, int]]] = {}   # buffer id -> [(offset, cell)]
    for (b, lo), c in self.cells.items(): self.by_buf.setdefault(b, []).append((lo, c))
    self.pins: dict[Optional[str], dict[tuple[int, int], int]] = {}   # queue name -> {(op index, access index): launch index} of `x@k`
    self.nlists = {b.name: len(b.launch_inits) for b in self.buffers if b.per_launch == "rebound"}
    # on NV a `timestamp s` is a release of 0 into s (tinygrad's NVCommandQueue.timestamp: signal(s, 0)), the timer at +8
    self.nv = {d.name for d in program.devices if d.vendor == "NV"}
    self.vid: dict[Optional[str], int] = {n: x + 1 for x, n in enumerate(var_names(envs))}   # a var's column in `Unrolled.sync_columns`
    self.var_of: list[Optional[str]] = [None, *var_names(envs)]   # and back

  def stores(self, b: int, lo: int, hi: int, data: Callable[[int], bytes]) -> tuple:
    """What a store of bytes [lo, hi) of buffer b does to the polled words it touches: per cell, the bits it keeps and
    the bits it stores in each launch (`data(k)`: the stored bytes in launch k)."""
    out = []
    for c_lo, c in self.by_buf.get(b, ()):
      if c_lo + 4 <= lo or hi <= c_lo: continue
      keep = sum(0xFF << 8 * n for n in range(4) if not lo <= c_lo + n < hi)
      bits = tuple(sum((d[c_lo + n - lo] if c_lo + n - lo < len(d) else 0) << 8 * n for n in range(4) if lo <= c_lo + n < hi)
                   for d in map(data, range(1, self.launches + 1)))   # (zeros past the data: a value zero-extended)
      out.append((c, None, keep, bits))
    return tuple(out)

  def access(self, sl: Slice, mode: int) -> Optional[tuple[int, int, int, int]]:
    bi = self.binfo.get(sl.buffer.name)
    if bi is None: return None
    return (bi[0], 0 if sl.start is None else sl.start, bi[1] if sl.end is None else sl.end, mode)

  def patch(self, st: Exec, q: Queue, op: tuple, known: bool) -> tuple:
    """An exec whose kernel arguments the host patches: one more buffer, the host writes and the exec reads."""
    envs = self.envs
    line = st.span.line if st.span is not None else 0
    self.buffers.append(Buffer(kernargs_buffer(st.kernel.name, q.name, line), q.device, KERNARGS_BYTES, span=st.span))
    kb = len(self.buffers) - 1
    self.kargs_of.setdefault(q.name, []).append(kb)
    vals = [e for e in st.args if type(e) is Expr and e.var is not None]
    if not any(type(a) is Slice and a.buffer.name in self.rebound for a in st.args):  # a rebound address always changes
      self.same[kb] = frozenset(k for k in range(2, self.launches + 1) if all(e.eval(envs[k - 1]) == e.eval(envs[k - 2]) for e in vals))
    return (ACCESS, op[1] + ((kb, 0, KERNARGS_BYTES, R),)) if known else op

  def store_op(self, st, acc: tuple, first: int = 1) -> tuple:
    """The op of a `write` or a host write into the range of `acc`: also a store into the polled words it covers."""
    envs = self.envs
    if not acc or acc[0][0] not in self.by_buf: sv = None
    elif type(st) is Write:   # the value zero-extended to the 4 or 8 bytes, in each launch
      b, lo, hi, _ = acc[0]
      def value(k: int, e: Expr = st.value, n: int = min(hi - lo, 8)) -> bytes: return (e.eval(envs[k - 1]) & U32_MAX).to_bytes(n, "little")
      sv = self.stores(b, lo, hi, value)
      if sv and st.dst.launch is not None: sv = tuple((c, st.dst.launch - 1, keep, bits) for c, _, keep, bits in sv)
    else:                     # the host's store of each launch's bytes
      n = min((d.nbytes for d in st.launch_inits), default=0)
      def data(k: int, ds: tuple = st.launch_inits) -> bytes: return ds[min(max(k - first + 1, 1), len(ds)) - 1].to_bytes()
      sv = self.stores(acc[0][0], acc[0][1], acc[0][1] + n, data) if n else None
    return (ACCESS, acc, sv) if sv else (ACCESS, acc)

  def lower_rows(self, rows: Rows, q: Queue) -> tuple[Sequence[tuple], Optional[OpColumns]]:
    """The ops of a queue's statements, and their numpy columns: its column rows (lang/rows.py) a column at a time,
    when none of them needs more than its own fields (no kernel arguments the host patches: an order between
    statements), its node rows by `lower`; else every statement by `lower` (a list, and no columns). The ops of
    columns are made from the columns when read (`Ops`)."""
    done = [(at := np.array(c.rows, dtype=_I64), self.lower_column(k, c, at, q, rows.pool)) for k, c in rows.columns.items()]
    if any(x is None for _, x in done): return self.lower(rows.nodes(), q), None
    n = len(rows)
    kinds = np.empty(n, dtype=np.int8)
    sync, acc, made = [], [], {}
    for at, x in done:
      assert x is not None
      kind, sy, ac = x
      kinds[at] = kind
      if sy is not None: sync.append((at, *sy))
      if ac is not None: acc.append(ac)
    stored = False
    if rows.nodes_made:
      nat = rows.node_rows
      ops = self.lower(rows.nodes_made, q, nat)
      kinds[nat] = [op[0] for op in ops]
      try:
        sy = [(i, op[0], op[1], self.vid.get(op[2], 0), op[3]) for i, op in zip(nat, ops) if op[0] <= WRITE]
        if sy: sync.append(tuple(np.array(c, dtype=_I64) for c in zip(*sy)))
        ac = [(i, m, *a) for i, op in zip(nat, ops) if op[0] == ACCESS for m, a in enumerate(op[1])]
        if ac: acc.append(tuple(np.array(c, dtype=_I64) for c in zip(*ac)))
      except OverflowError: return self.lower(rows.nodes(), q), None
      stored = any(op[0] == POLL or (op[0] == ACCESS and len(op) > 2) for op in ops)
      made = dict(zip(nat, ops))
    accs = _sorted(acc, 6, 2)
    cols = OpColumns(kinds, _sorted(sync, 5, 1), None if stored else accs)
    lazy = Ops(n, OpColumns(kinds, cols.sync, accs), self.var_of, made)
    return (lazy.all() if stored else lazy), cols   # (stores into polled words: the table reads the ops)

  def lower_column(self, kind: int, c: Column, at: np.ndarray, q: Queue, pool: Pool) -> Optional[tuple]:
    """One column of rows (at op indices `at`) lowered as `lower` lowers each, each distinct name looked up once:
    (their ops' kind, their sync columns (kinds, signals, vars, offsets) or None, their accesses (op index, index in
    the op, buffer, start, end, mode) or None); None when a row needs `lower` (a patched kernel argument, an unknown
    name)."""
    n = len(c)
    if kind == R_.BARRIER: return BARRIER, None, None
    if kind == R_.EPOCH or kind == R_.WAIT or kind == R_.SIGNAL:
      k = WRITE if kind == R_.SIGNAL else WAIT
      if kind == R_.EPOCH:
        w = epoch_wait(q.device.name)
        assert w.value.var is not None   # (it waits for D.epoch - 1)
        return k, (np.full(n, k, dtype=_I64), np.full(n, self.sig_id[w.signal.name], dtype=_I64),
                   np.full(n, self.vid[w.value.var.name], dtype=_I64), np.full(n, w.value.offset, dtype=_I64)), None
      sig = _table(pool, set(c.x), self.sig_id.get)
      if sig is None: return None
      var = _table(pool, {i for i in set(c.y) if i >= 0}, self.vid.get, extra=1)   # (var -1, none: the table's last, 0)
      assert var is not None   # (a var the parser read is a var of the program: the static checks said so)
      return k, (np.full(n, k, dtype=_I64), sig[np.array(c.x, dtype=_I64)], var[np.array(c.y, dtype=_I64)], np.array(c.z, dtype=_I64)), None
    if (ends := self.ranges(c, pool)) is None: return None
    B, L, H = ends
    if kind == R_.COPY:   # (each row's destination, then its source; an op reads the source first)
      def swap(x) -> np.ndarray: return x.reshape(n, 2)[:, ::-1].ravel()
      return ACCESS, None, (np.repeat(at, 2), np.tile(np.arange(2, dtype=_I64), n), swap(B), swap(L), swap(H),
                            np.tile(np.array([R, W], dtype=_I64), n))
    got = self.lower_execs(c, at, pool, B, L, H)
    return None if got is None else (ACCESS, None, got)

  def ranges(self, c: Column, pool: Pool) -> Optional[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The buffer ids, starts and ends of a column's slices (a missing bound the buffer's start or end); None when a
    slice names no buffer."""
    bi = _table(pool, set(c.buf), lambda name: None if (b := self.binfo.get(name)) is None else b[0])
    size = _table(pool, set(c.buf), lambda name: None if (b := self.binfo.get(name)) is None else b[1])
    if bi is None or size is None: return None
    buf = np.array(c.buf, dtype=_I64)
    lo, hi = np.array(c.lo, dtype=_I64), np.array(c.hi, dtype=_I64)
    lo[lo < 0] = 0
    if (m := hi < 0).any(): hi[m] = size[buf[m]]
    return bi[buf], lo, hi

  def lower_execs(self, c: Column, rows: np.ndarray, pool: Pool, B: np.ndarray, L: np.ndarray, H: np.ndarray) -> Optional[tuple]:
    """The accesses of a column of execs (their arguments all slices), kernel by kernel: the argument in each buffer
    parameter's position an access in its mode, the kernel's code buffer last; None when an argument is a rebound
    buffer (the host patches its address into the kernel arguments) or the kernel unknown."""
    if any(pool.names[i] in self.rebound for i in set(c.buf)): return None
    argc, ker = np.array(c.y, dtype=_I64), np.array(c.x, dtype=_I64)
    firsts = np.cumsum(argc) - argc
    acc: list[tuple] = []
    for k in set(c.x):
      name = pool.names[k]
      ms = self.kmodes.get(name)
      if ms is None: return None
      at = np.flatnonzero(ker == k)
      if (argc[at] != len(ms)).any(): return None
      first, where, sub = firsts[at], rows[at], 0
      for p, m in enumerate(ms):
        if m is None: continue
        acc.append((where, np.full(len(at), sub, dtype=_I64), B[first + p], L[first + p], H[first + p], np.full(len(at), m, dtype=_I64)))
        sub += 1
      if name in self.kcode: acc.append((where, np.full(len(at), sub, dtype=_I64), *(np.full(len(at), v, dtype=_I64) for v in self.kcode[name])))
    return _sorted(acc, 6, 2)

  def lower(self, body: Sequence, q: Optional[Queue], where: Optional[Sequence[int]] = None, first: int = 1) -> list[tuple]:
    """The ops of a block's statements, in one loop (this runs once per statement of a possibly huge program, so
    statements are told apart by exact type and nothing is called per statement that need not be). `where`: the
    op index of each statement (its row in its block), when they are not all of the block from its start; `first`:
    the block's first launch (a host write's lists count from it)."""
    ops: list[tuple] = []
    app = ops.append
    sig_id, binfo, kmodes, rebound = self.sig_id, self.binfo, self.kmodes, self.rebound
    kcode, explicit, access = self.kcode, self.explicit, self.access
    def pin(sl, n):  # `x@k`: the access is to x's launch-k memory, whatever launch runs it
      if not 0 < sl.launch <= self.nlists.get(sl.buffer.name, 0): return   # no such memory: the static `bounds` error says so
      at = len(ops) if where is None else where[len(ops)]
      self.pins.setdefault(q.name if q is not None else None, {})[(at, n)] = sl.launch - 1
    for st in body:
      t = type(st)
      if t is Wait or t is SignalWrite:
        v = st.value
        e = v.var
        app((WAIT if t is Wait else WRITE, sig_id[st.signal.name], e if e is None else e.name, v.offset))
      elif t is Copy:
        src, dst = st.src, st.dst
        a, b = binfo.get(src.buffer.name), binfo.get(dst.buffer.name)
        if src.launch is not None: pin(src, 0)
        if dst.launch is not None: pin(dst, 1)
        if a is not None and b is not None:
          app((ACCESS, ((a[0], 0 if src.start is None else src.start, a[1] if src.end is None else src.end, R),
                        (b[0], 0 if dst.start is None else dst.start, b[1] if dst.end is None else dst.end, W))))
        else: app((ACCESS, tuple([x for x in (access(src, R), access(dst, W)) if x is not None])))
      elif t is Write or t is HostWrite:   # a store into the range, like a copy's destination; and into polled words
        if t is Write and st.dst.launch is not None: pin(st.dst, 0)
        app(self.store_op(st, tuple(x for x in (access(st.dst, W),) if x is not None), first))
      elif t is Poll:
        src = st.src
        bi = binfo.get(src.buffer.name)
        if bi is None:
          app(_NOP)
          continue
        lo = 0 if src.start is None else src.start
        if src.launch is not None: pin(src, 0)
        v = st.value
        app((POLL, self.cells[(bi[0], lo)], None if v.var is None else v.var.name, v.offset, st.mask,
             None if src.launch is None else src.launch - 1, (bi[0], lo, lo + 4, R)))
      elif t is Exec:
        ms = kmodes.get(st.kernel.name)
        args = st.args
        accs: list[tuple] = []
        patched = False
        for a, m in zip(args, ms or (None,) * len(args)):
          if type(a) is Slice:
            bn = a.buffer.name
            if bn in rebound: patched = True
            if m is not None and (bi := binfo.get(bn)) is not None:
              if a.launch is not None: pin(a, len(accs))
              accs.append((bi[0], 0 if a.start is None else a.start, bi[1] if a.end is None else a.end, m))
          elif a.var is not None: patched = True
        if st.kernel.name in kcode: accs.append(kcode[st.kernel.name])
        op = (ACCESS, tuple(accs))
        if patched and st.kernel.name not in explicit:
          assert q is not None   # (an exec in the host block is a static `syntax` error: no analysis runs)
          op = self.patch(st, q, op, ms is not None)
        app(op)
      elif t is Epoch:
        assert q is not None   # (an epoch in the host block is a static `syntax` error: no analysis runs)
        w = epoch_wait(q.device.name)
        ev = w.value.var
        assert ev is not None   # (it waits for D.epoch - 1)
        app((WAIT, sig_id[w.signal.name], ev.name, w.value.offset))
      elif t is Barrier: app(_BARRIER)
      elif t is Timestamp and q is not None and q.device.name in self.nv: app((WRITE, sig_id[st.signal.name], None, 0))
      else: app(_NOP)
    return ops

def unroll(program: Program, launches: int = 2, var_values: Optional[dict] = None) -> Unrolled:
  envs = _envs(program, launches, var_values)
  lw = _Lowering(program, launches, envs)
  qseqs = []
  for i, q in enumerate(program.queues):
    rows = Rows.of(q)
    qseqs.append(Seq(i + 1, q.name, q.device.name, q, rows if rows.columns else rows.nodes_made, *lw.lower_rows(rows, q)))
  for s in qseqs:   # a queue's clause: it is absent from the launches outside it
    if s.queue.launches is not None: s.off = frozenset(k for k in range(1, launches + 1) if not in_launches(s.queue.launches, k))
  seqs: list[Optional[Seq]] = [None, *qseqs]   # the host's is made last (it names the queues')
  host = program.host
  seqs[0], idle = _host(program, seqs, lw)
  u = Unrolled(program, launches, envs, seqs, program.signals, lw.buffers, host.span if host is not None else None)
  if idle: u.idle[0] = idle
  for (b, lo), c in lw.cells.items():   # initial values: the buffer's data (a rebound buffer's: each launch's)
    u.cells.append((b, lo))
    u.cell_slot.append(len(u.cell_init))
    bb = lw.buffers[b]
    for k in range(1, (max(launches, len(bb.launch_inits)) if bb.per_launch == "rebound" else 1) + 1):   # `x@k` past the launches too
      u.cell_init.append(int.from_bytes(_contents(bb, k)[lo:lo + 4].ljust(4, b"\0"), "little"))
  u.pinned = {s.index: lw.pins[s.name] for s in qseqs if s.name in lw.pins}
  return u

def _coverage(program: Program, seqs: list, body: list, k: Optional[int]) -> tuple[dict[int, int], tuple]:
  """Who submits each queue in launch k (None: every launch, a program without clauses): {queue seq: the host
  statement (index into `body`) whose submit covers it}, and the queues no submit covers (submitted implicitly, before
  the first host statement), among the queues in that launch."""
  queues = program.queues
  q_id = {q.name: i + 1 for i, q in enumerate(queues)}
  covered: dict[int, int] = {}
  for n, (st, r) in enumerate(body):
    if isinstance(st, Submit) and (k is None or in_launches(r, k)):
      names = [r.name for r in st.queues] if st.queues else [q.name for q in queues]
      for x in names:
        i = q_id.get(x)
        if i is not None and i not in covered and (k is None or k not in seqs[i].off): covered[i] = n
  return covered, tuple(i for i in range(1, len(seqs)) if i not in covered and (k is None or k not in seqs[i].off))

def _host(program: Program, seqs: list, lw: _Lowering) -> tuple[Seq, dict[int, frozenset[int]]]:
  """The host's sequence: its statements (every host block's, in program order), with each submit preceded by the
  host's writes it implies (a `rewritten` buffer's contents before the launch's first submit, the patched kernel
  arguments of the queues it submits), and the implicit submit of the queues no `submit` names before its first
  statement; and {op index: the launches in which that kernel-argument write writes nothing}. With `launches`
  clauses, who submits a queue is decided per launch (`Seq.gates`), and what is absent from a launch said (`op_off`):
  `_host_partial`."""
  body = [(st, h.launches) for h in program.hosts for st in h.body]
  if any(r is not None for _, r in body) or any(s.off for s in seqs[1:]): return _host_partial(program, seqs, lw, body)
  queues = program.queues
  q_id = {q.name: i + 1 for i, q in enumerate(queues)}
  covered: dict[int, int] = {}  # queue seq -> the submit statement covering it (the same in every launch)
  for n, (st, _) in enumerate(body):
    if isinstance(st, Submit):
      names = [r.name for r in st.queues] if st.queues else [q.name for q in queues]
      for x in names:
        if x in q_id and q_id[x] not in covered: covered[q_id[x]] = n
  stmts: list = []
  ops: list[tuple] = []
  rewritten = [b for b in program.buffers if b.per_launch == "rewritten"]
  buf_id = {b.name: i for i, b in enumerate(program.buffers)}
  idle: dict[int, frozenset[int]] = {}
  def submit(qs: tuple, st):
    if rewritten and not any(op[0] == SUBMIT for op in ops):
      # a `rewritten` buffer: the host writes launch k's contents in place just before its first submit of launch k
      for b in rewritten:
        x = buf_id[b.name]
        def contents(k: int, b: Buffer = b) -> bytes: return _contents(b, k)
        sv = lw.stores(x, 0, b.size, contents)
        stmts.append(b)
        ops.append((ACCESS, ((x, 0, b.size, W),), sv) if sv else (ACCESS, ((x, 0, b.size, W),)))
    # the host patches their kernel arguments (one write per exec, none in a launch where its values did not change),
    # then submits; an implicit submit is shown at the queue it submits
    for x in qs:
      for kb in lw.kargs_of.get(seqs[x].name, ()):
        if lw.same.get(kb): idle.setdefault(len(ops), lw.same[kb])
        stmts.append(st if st is not None else seqs[x].queue)
        ops.append((ACCESS, ((kb, 0, KERNARGS_BYTES, W),)))
    for x in qs: seqs[x].gate = len(ops)
    stmts.append(st)
    ops.append((SUBMIT, qs))
  rest = tuple(i for i in range(1, len(seqs)) if i not in covered)
  if rest: submit(rest, None)  # queues no submit covers are submitted before the first host statement
  for n, (st, _) in enumerate(body):
    if isinstance(st, Submit): submit(tuple(i for i, m in covered.items() if m == n), st)
    else:
      stmts.append(st)
      ops += lw.lower((st,), None)
  return Seq(0, "host", None, None, stmts, ops), idle

def _host_partial(program: Program, seqs: list, lw: _Lowering, body: list) -> tuple[Seq, dict[int, frozenset[int]]]:
  """`_host` of a program with `launches` clauses: the host's statements of every block, each absent from the launches
  outside its block's (`op_off`); each launch's submits decided over the blocks and queues of that launch, a queue
  handed over per launch by the submit that covers it there (`Seq.gates`)."""
  N = lw.launches
  every = set(range(1, N + 1))
  per = [_coverage(program, seqs, body, k) for k in range(1, N + 1)]
  stmts: list = []
  ops: list[tuple] = []
  op_off: dict[int, frozenset[int]] = {}
  rewritten = [b for b in program.buffers if b.per_launch == "rewritten"]
  buf_id = {b.name: i for i, b in enumerate(program.buffers)}
  idle: dict[int, frozenset[int]] = {}
  gates = [[-1] * N for _ in seqs]   # queue seq -> per launch: the op index of the submit that hands it over
  def first_submit(k: int) -> Optional[int]:   # launch k's first submit: the implicit one, else its first `submit`
    cov, rest = per[k - 1]
    return -1 if rest else next((n for n, (st, r) in enumerate(body) if isinstance(st, Submit) and in_launches(r, k)), None)
  firsts = [first_submit(k) for k in range(1, N + 1)]
  def add(st, op, off):
    if off: op_off[len(ops)] = frozenset(off)
    stmts.append(st)
    ops.append(op)
  def submit(n: int, st):
    """The host's ops of submit statement n (-1: the implicit submit) and of what it implies, in every launch."""
    here = [k for k in range(1, N + 1) if n == -1 and per[k - 1][1] or n >= 0 and in_launches(body[n][1], k)]
    qs = tuple(dict.fromkeys(i for k in here for i in (per[k - 1][1] if n == -1 else (i for i, m in per[k - 1][0].items() if m == n))))
    if n == -1 and not qs: return
    # a `rewritten` buffer: the host writes launch k's contents in place just before its first submit of launch k
    first = [k for k in range(1, N + 1) if firsts[k - 1] == n]
    for b in rewritten if first else ():
      x = buf_id[b.name]
      def contents(k: int, b: Buffer = b) -> bytes: return _contents(b, k)
      sv = lw.stores(x, 0, b.size, contents)
      add(b, (ACCESS, ((x, 0, b.size, W),), sv) if sv else (ACCESS, ((x, 0, b.size, W),)), every - set(first))
    # the host patches their kernel arguments (one write per exec, none in a launch where its values did not change),
    # then submits; an implicit submit is shown at the queue it submits
    mine = {x: {k for k in here if (x in per[k - 1][1] if n == -1 else per[k - 1][0].get(x) == n)} for x in qs}
    for x in qs:
      for kb in lw.kargs_of.get(seqs[x].name, ()):
        if lw.same.get(kb): idle.setdefault(len(ops), lw.same[kb])
        add(st if st is not None else seqs[x].queue, (ACCESS, ((kb, 0, KERNARGS_BYTES, W),)), every - mine[x])
    for x in qs:
      for k in mine[x]: gates[x][k - 1] = len(ops)
    add(st, (SUBMIT, qs), every - set(here))
  submit(-1, None)  # queues no submit covers are submitted before the first host statement of the launch
  for n, (st, r) in enumerate(body):
    if isinstance(st, Submit): submit(n, st)
    else:
      off = {k for k in range(1, N + 1) if not in_launches(r, k)} if r is not None else ()
      for op in lw.lower((st,), None, first=r[0] if r is not None else 1): add(st, op, off)
  for i, s in enumerate(seqs[1:], 1):   # one gate for every launch, or one per launch when they differ
    g = [x for k, x in enumerate(gates[i], 1) if k not in s.off]
    if len(set(g)) <= 1 and len(g) == N: s.gate = g[0] if g else -1
    else: s.gate, s.gates = (g[0] if g else -1), gates[i]
  h = Seq(0, "host", None, None, stmts, ops)
  h.op_off = op_off
  return h, idle
