"""Vector clocks as rows of one matrix: an execution records each join as a row of `ClockRows` (which two rows it
joins and which entry it raises), `ClockRows.build` makes every row at once, level by level, and `Clocks` finds the
row holding at a step. `C[r][j]` = the last position of sequence j known to happen before the steps row r holds for."""
from __future__ import annotations
import attrs
import numpy as np

__all__ = ["ClockRows", "Clocks", "ClockLimit", "MAX_CLOCK_BYTES"]

# the most memory the clock rows may take (rows x sequences: 10**5 queues of one signal each would need 74.5 GiB)
MAX_CLOCK_BYTES = 4 << 30

class ClockLimit(Exception):
  """The program's clock rows would take more than MAX_CLOCK_BYTES (check reports it as a `bounds` error)."""

@attrs.frozen
class ClockRows:
  """The joins of one execution, one row each, as int64 columns; row 0 is all zeros (nothing known yet)."""
  prev: np.ndarray    # the sequence's row before the join (row 0 at its first)
  src: np.ndarray     # the row joined: the writer's at its write, the host's at its submit
  col: np.ndarray     # the entry raised: the writer's (submitter's) sequence ...
  val: np.ndarray     # ... to the position of the write (submit)
  level: np.ndarray   # 1 + the larger of its inputs' levels: rows of one level depend on none of each other
  held: np.ndarray    # `sequence * big + position`: the row holds for that sequence from that position on

  def renumbered(self, new: np.ndarray, order: np.ndarray) -> ClockRows:
    """The rows in the order `order`, row r becoming row `new[r]` (new = the inverse permutation of order)."""
    return ClockRows(new[self.prev[order]], new[self.src[order]], self.col[order], self.val[order], self.level[order],
                     self.held[order])

  def build(self, S: int) -> np.ndarray:
    """Every clock row (S entries each), built level by level: a row's two inputs are on lower levels, so a level is
    a few numpy operations whatever its size. Rows are built in level order (a level is a slice) and put back in
    order at the end, unless they come in level order. int32 when positions fit (half the memory to fault in and
    walk)."""
    n = len(self.level)
    dt = np.int32 if n == 1 or int(self.val.max()) < 1 << 31 else np.int64
    if (need := n * S * np.dtype(dt).itemsize) > MAX_CLOCK_BYTES:
      raise ClockLimit(f"the program is too big for check: its happens-before clocks are {n:,} rows of {S:,} sequences "
                       f"({need / 2**30:.1f} GiB), more than the {MAX_CLOCK_BYTES / 2**30:g} GiB check allows; check fewer "
                       f"queues or launches")
    if n == 1: return np.zeros((1, S), dtype=dt)
    lv = self.level
    rows, new = self, None
    if not bool((lv[1:] >= lv[:-1]).all()):
      order = np.argsort(lv, kind="stable")
      new = np.empty(n, dtype=np.int64)
      new[order] = np.arange(n)                  # a row's place in level order
      rows = self.renumbered(new, order)
    bounds = np.searchsorted(rows.level, np.arange(1, int(rows.level[-1]) + 2)).tolist()
    # each row starts as its raised entry and takes the maximum of its two inputs' rows (max is order-free: the same
    # as raising the inputs' maximum), so a level is four numpy calls
    C = np.zeros((n, S), dtype=dt)
    C.reshape(-1)[np.arange(n, dtype=np.int64) * S + rows.col] = rows.val
    mx, take, pv, sr = np.maximum, C.take, rows.prev, rows.src
    for a, b in zip(bounds, bounds[1:]):
      blk = C[a:b]
      mx(blk, take(pv[a:b], axis=0), out=blk)
      mx(blk, take(sr[a:b], axis=0), out=blk)
    return C if new is None else C.take(new, axis=0)

@attrs.frozen
class Clocks:
  """Built clock rows, found by the step they hold at."""
  C: np.ndarray       # the rows (ClockRows.build): C[r, j]
  keys: np.ndarray    # sorted `sequence * big + position` from which each row holds (each sequence's row 0 first) ...
  ids: np.ndarray     # ... and that row
  S: int              # sequences (the rows' length)
  big: int            # positions are below it

  @classmethod
  def of(cls, C: np.ndarray, held: np.ndarray, big: int) -> Clocks:
    S = C.shape[1]
    keys = np.concatenate([np.arange(S, dtype=np.int64) * big, held[1:]])
    ids = np.concatenate([np.zeros(S, dtype=np.int64), np.arange(1, len(C), dtype=np.int64)])
    order = np.argsort(keys, kind="stable")
    return cls(C, keys[order], ids[order], S, big)

  def row(self, seq, pos) -> np.ndarray:
    """The row holding at each step (seq, pos) (arrays)."""
    return self.ids[np.searchsorted(self.keys, seq * self.big + pos, side="right") - 1]

  def entry(self, seq, pos, col) -> np.ndarray:
    """C(seq, pos)[col]: the last position of sequence `col` known to happen before each step (seq, pos)."""
    return self.C.reshape(-1)[self.row(seq, pos) * self.S + col]
