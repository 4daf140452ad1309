"""The reference semantics over the synchronization skeleton: every interleaving of the waits, signal writes, submits
and launch starts of the unrolled sequences, states deduplicated.

Accesses, `barrier` and `timestamp` never block and never change a signal, so they are left out of the state. A
sequence's steps split into *segments*: the non-blocking steps between two consecutive *sync points* (a wait, a
write, a submit, a poll, a store into a polled word, or the start of a launch the host must submit first). A
skeleton state is (sync points passed per sequence, value of each signal and each polled word). The full states of
the reference semantics (steps executed per sequence, values) reachable from it are exactly those with each sequence
anywhere in its current segment, up to and including being about to run its next sync point: non-blocking steps are
always enabled and commute with every step, and a full execution projected onto its sync steps is a skeleton execution.
So, over the reachable skeleton states:

* `deadlock`: no sync point can pass and some sequence has one left (every sequence then sits at its sync point: a
  wait or a poll whose condition does not hold, or a launch not submitted);
* `race`: two conflicting accesses lie in segments that are current together (a poll's read and a store's access sit
  in the segment that ends at them; a poll's read and a store never race: they are the synchronization);
* `signal-race`: two sequences are at writes of one signal;
* `non-monotonic`: a sequence is at a write lowering the signal's current value while another is at a wait on, or a
  write to, that signal (a gate not yet passed is not about to run anything).

The exploration is exact when it finishes within its state budget (`complete`). `tests/reference.py` checks it, and
the happens-before pass, against a literal full-state explorer.
"""
from __future__ import annotations
from typing import Optional
import attrs
from .findings import Stuck, Party, RacePair
from .unroll import Unrolled, WAIT, WRITE, ACCESS, SUBMIT, POLL, R

__all__ = ["Exploration", "explore"]

GATE = -1  # a sync point: the start of a launch the host must have submitted
STORE = -2  # a sync point: an access that stores into polled words (a `write`, the host's rewrite)
# a segment's entries are tagged: a poll's read of its word is the synchronization with the stores into it (as a
# wait's read of its signal is with the signal's writes), never a race with them
_PLAIN, _POLLED, _STORED = 0, 1, 2

@attrs.define
class Exploration:
  """What exploring the skeleton found (the verdicts of the reference semantics, each at its first launch)."""
  complete: bool = True   # every reachable state was explored within the budget
  states: int = 0
  deadlocks: list[Stuck] = attrs.field(factory=list)   # per blocked wait statement, a state of its first launch
  races: dict[tuple, RacePair] = attrs.field(factory=dict)
  signal_races: dict[tuple, tuple] = attrs.field(factory=dict)   # key -> (launch, (j, q), (i, p))
  # (write key, use key) -> ((write's launch, use's launch), (i, p), (j, q), signal, current value, new value): the
  # report names the lowering write's launch, so its first is kept
  nonmono: dict[tuple, tuple] = attrs.field(factory=dict)

def _conflict(a, b) -> bool: return a[0] == b[0] and (a[3] != R or b[3] != R) and a[1] < b[2] and b[1] < a[2]

def _first(d: dict, key, rank, *rest) -> None:
  """Keep (rank, *rest) at key unless a smaller rank is there."""
  old = d.get(key)
  if old is None or rank < old[0]: d[key] = (rank, *rest)

@attrs.frozen
class _Skeleton:
  """The sequences cut at their sync points."""
  # sync[i]: (kind, signal, value, 0-based position; for GATE the host sync points that must have passed). POLL:
  # (POLL, value slot, (value, mask), p); STORE: (STORE, ((slot, bits kept, bits stored), ...), None, p). Value slots:
  # the signals, then the polled words (u.cell_init)
  sync: list[list[tuple]]
  # segs[i][c]: the accesses (1-based position, accesses, tag) between sync points c-1 and c of sequence i (c = len:
  # the tail)
  segs: list[list[list[tuple]]]
  hot: list[list[bool]]   # hot[i][c]: segment c of i has an access that conflicts with some other sequence's
  passive: list[int]      # queues with no wait, write or submit (only launch starts): left out of the states
  active: list[int]       # the others

  @classmethod
  def of(cls, u: Unrolled) -> _Skeleton:
    seqs, S = u.seqs, len(u.seqs)
    host_after: dict[int, int] = {}   # host 1-based position p -> host sync points among its first p steps
    cuts = [_cut(u, i, host_after if i == 0 else None) for i in range(S)]
    sync, segs = [c[0] for c in cuts], [c[1] for c in cuts]
    lens = [len(s.ops) for s in seqs]
    for i in range(1, S):  # a gate's requirement: the host has run the submit, i.e. passed all its sync points up to it
      sync[i] = [(GATE, host_after[u.gate_pos(i, x[3] // lens[i] + 1)], None, x[3]) if x[0] == GATE else x for x in sync[i]]
    # a segment takes part in races only if one of its accesses conflicts with some access of another sequence
    # (decided once per distinct access of a statement, not per launch)
    by_seq = [{a for op in s.ops if op[0] in (ACCESS, POLL) for a in (op[1] if op[0] == ACCESS else (op[6],))} for s in seqs]
    racy = {(i, a) for i in range(S) for a in by_seq[i] if any(_conflict(a, b) for j in range(S) if j != i for b in by_seq[j])}
    hot = [[any((i, a) in racy for _, acc, _ in sg for a in acc) for sg in segs[i]] for i in range(S)]
    # passive queues (no wait, write or submit: only launch starts) are left out of the states: each can be in any
    # launch the host has submitted, whatever the others do, so their segments pair with what the host count allows
    passive = [i for i in range(1, S) if all(x[0] == GATE for x in sync[i])]
    return cls(sync, segs, hot, passive, [i for i in range(S) if i not in passive])

def _cut(u: Unrolled, i: int, after: Optional[dict[int, int]]) -> tuple[list[tuple], list[list[tuple]]]:
  """Sequence i's sync points over every launch and the segments of accesses between them (`after`, for the host:
  1-based position -> sync points among the steps up to it)."""
  s, L, nsig = u.seqs[i], len(u.seqs[i].ops), len(u.sig_init)
  sy: list[tuple] = []
  sg: list[list[tuple]] = []
  cur: list[tuple] = []
  idle = u.idle.get(i, {})
  for p in range(u.total(i)):
    k, idx = divmod(p, L)
    op = s.ops[idx]
    if i and idx == 0 and s.gate >= 0 and u.gate_pos(i, k + 1):
      sy.append((GATE, None, None, p))
      sg.append(cur)
      cur = []
    if s.partial and s.absent(idx, k + 1): pass   # (not there in this launch: a `launches` clause)
    elif op[0] in (WAIT, WRITE):
      sy.append((op[0], op[1], u.value(op, k + 1, i == 0), p))
      sg.append(cur)
      cur = []
    elif op[0] == SUBMIT:
      sy.append((SUBMIT, None, None, p))
      sg.append(cur)
      cur = []
    elif op[0] == POLL:
      cur.append((p + 1, (op[6],), _POLLED))
      sy.append((POLL, nsig + u.slot(op[1], op[5], k + 1), (u.value(op, k + 1), op[4]), p))
      sg.append(cur)
      cur = []
    elif op[0] == ACCESS and len(op) > 2:
      cur.append((p + 1, op[1], _STORED))
      sy.append((STORE, tuple((nsig + u.slot(c, pin, k + 1), keep, bits[k]) for c, pin, keep, bits in op[2]), None, p))
      sg.append(cur)
      cur = []
    elif op[0] == ACCESS and op[1] and k + 1 not in idle.get(idx, ()): cur.append((p + 1, op[1], _PLAIN))  # idle: writes nothing
    if after is not None: after[p + 1] = len(sy)
  sg.append(cur)
  return sy, sg

def explore(u: Unrolled, budget: int = 1_000_000) -> Exploration:
  ex = Exploration()
  x = _Search(u, _Skeleton.of(u), ex)
  x.run(budget)
  x.passive_pairs()
  x.races()
  return ex

class _Search:
  """The depth-first search over skeleton states (sync points passed per sequence, values), and its verdicts."""
  def __init__(self, u: Unrolled, sk: _Skeleton, ex: Exploration):
    self.u, self.sk, self.ex = u, sk, ex
    self.S, self.lens, self.nsync = len(u.seqs), [len(s.ops) for s in u.seqs], [len(x) for x in sk.sync]
    self.ahot: dict[tuple[int, int], int] = {}   # (active seq, segment) hot -> the most host sync points passed while it was current
    self.hmax = 0                                # the most host sync points passed in any state
    self.pairs: set[tuple[int, int, int, int]] = set()   # (i, c_i, j, c_j), i < j: hot segments current together
    self.dl_best: dict[tuple[int, int], int] = {}   # blocked wait statement -> launch of the first deadlocked state found blocking it

  def launch(self, i: int, pos1: int) -> int: return (pos1 - 1) // self.lens[i] + 1
  def key(self, i: int, pos1: int) -> tuple[int, int]: return (i, (pos1 - 1) % self.lens[i])

  def run(self, budget: int) -> None:
    sync, nsync, hot, active, passive, ahot, pairs = (self.sk.sync, self.nsync, self.sk.hot, self.sk.active, self.sk.passive,
                                                       self.ahot, self.pairs)
    start = (tuple([0] * self.S), tuple(self.u.sig_init) + tuple(self.u.cell_init))
    seen = {start}
    stack = [start]
    while stack:
      cnt, vals = stack.pop()
      h = cnt[0]
      if h > self.hmax: self.hmax = h
      hs = [i for i in active if hot[i][cnt[i]]]
      for n, i in enumerate(hs):
        if passive and ahot.get((i, cnt[i]), -1) < h: ahot[(i, cnt[i])] = h
        for j in hs[n + 1:]: pairs.add((i, cnt[i], j, cnt[j]))
      at = [(i, sync[i][cnt[i]]) for i in active if cnt[i] < nsync[i]]   # (seq, the sync point it is at)
      enabled = self._enabled(cnt, vals, at)
      if not enabled:
        if at: self._deadlock(cnt, vals, at)
        continue
      # the one reduction: a host submit or a passable gate, after a segment that takes part in no race, is taken
      # alone. Either stays enabled until taken, changes no signal, and is observed by no verdict; the states the other
      # orders reach show nothing the state after it does not (the skeleton graph is acyclic: no cycle proviso needed)
      quiet = next((i for i in enabled if (i == 0 and sync[0][cnt[0]][0] == SUBMIT and not hot[0][cnt[0]])
                    or (sync[i][cnt[i]][0] == GATE and not hot[i][cnt[i]])), None)
      for i in enabled if quiet is None else (quiet,):
        nxt = self._next(cnt, vals, i)
        if nxt in seen: continue
        if len(seen) >= budget:
          self.ex.complete = False
          stack.clear()
          break
        seen.add(nxt)
        stack.append(nxt)
    self.ex.states = len(seen)

  def _enabled(self, cnt: tuple, vals: tuple, at: list[tuple[int, tuple]]) -> list[int]:
    """The sequences whose sync point can pass; and the verdicts on the writes about to run (signal-race,
    non-monotonic)."""
    enabled, writes = [], []
    for i, (kind, s, v, p) in at:
      if kind == WAIT: enabled.append(i) if vals[s] >= v else None
      elif kind == GATE: enabled.append(i) if cnt[0] >= s else None
      elif kind == POLL: enabled.append(i) if vals[s] & v[1] == v[0] else None
      else:
        enabled.append(i)
        if kind == WRITE: writes.append((i, s, v, p))
    key, launch, ex = self.key, self.launch, self.ex
    for n, (i, s, v, p) in enumerate(writes):
      for j, s2, _, q in writes[n + 1:]:
        if s == s2:
          A, B = (j, q + 1), (i, p + 1)
          _first(ex.signal_races, (min(key(*A), key(*B)), max(key(*A), key(*B))), max(launch(*A), launch(*B)), A, B)
      if v < vals[s]:
        for j, (k2, s2, _, q) in at:
          if j != i and s2 == s and k2 in (WAIT, WRITE):
            A, B = (i, p + 1), (j, q + 1)
            _first(ex.nonmono, (key(*A), key(*B)), (launch(*A), launch(*B)), A, B, s, vals[s], v)
    return enabled

  def _deadlock(self, cnt: tuple, vals: tuple, at: list[tuple[int, tuple]]) -> None:
    """A state where nothing can run: kept when it is the first (lowest launch) to block one of its waits."""
    u, sync, nsync, h = self.u, self.sk.sync, self.nsync, cnt[0]
    done = tuple(next((x[3] for x in sync[i] if x[1] > h), u.total(i)) if i in self.sk.passive else
                 sync[i][cnt[i]][3] if cnt[i] < nsync[i] else u.total(i) for i in range(self.S))
    better = False
    for i, (kind, s, v, p) in at:
      if kind == WAIT or kind == POLL:
        k, n = self.key(i, p + 1), self.launch(i, p + 1)
        if k not in self.dl_best or n < self.dl_best[k]:
          self.dl_best[k] = n
          better = True
    if better: self.ex.deadlocks.append(Stuck(done, vals))

  def _next(self, cnt: tuple, vals: tuple, i: int) -> tuple[tuple, tuple]:
    """The state after sequence i passes its sync point."""
    kind, s, v, _ = self.sk.sync[i][cnt[i]]
    if kind == STORE:
      nv = list(vals)
      for x, keep, bits in s: nv[x] = nv[x] & keep | bits
      vals = tuple(nv)
    elif kind == WRITE: vals = vals[:s] + (v,) + vals[s + 1:]
    return cnt[:i] + (cnt[i] + 1,) + cnt[i + 1:], vals

  def passive_pairs(self) -> None:
    """The hot segments of passive queues current together with others: any segment of a launch the host had submitted."""
    sync, hot, passive, pairs = self.sk.sync, self.sk.hot, self.sk.passive, self.pairs
    def reach(i, h): return [c for c in range(self.nsync[i] + 1) if hot[i][c] and (c == 0 or sync[i][c - 1][1] <= h)]
    for (j, cj), h in self.ahot.items():
      for i in passive:
        for c in reach(i, h): pairs.add((i, c, j, cj) if i < j else (j, cj, i, c))
    for n, i in enumerate(passive):
      for j in passive[n + 1:]:
        for c in reach(i, self.hmax):
          for d in reach(j, self.hmax): pairs.add((i, c, j, d))

  def races(self) -> None:
    """Every conflicting pair of accesses of two segments that are current together."""
    u, segs, key, launch = self.u, self.sk.segs, self.key, self.launch
    pins = u.pinned
    def memory(i, p, n, k):   # the launch whose memory access n of sequence i's step p touches
      pin = pins.get(i)
      return k if pin is None else pin.get((u.where(i, p)[1], n), k - 1) + 1
    for i, ci, j, cj in sorted(self.pairs):
      for p, xi, ti in segs[i][ci]:
        for q, xj, tj in segs[j][cj]:
          if ti | tj == _POLLED | _STORED and ti != tj: continue   # a poll and a store into its word: synchronization
          for na, a in enumerate(xi):
            for nb, b in enumerate(xj):
              if not _conflict(a, b): continue
              A, B = (i, p), (j, q)
              kA, kB = launch(*A), launch(*B)
              # a rebound buffer is other memory in another launch (`x@k`: launch k's memory, whatever the launch)
              if u.rebound[a[0]] and memory(i, p, na, kA) != memory(j, q, nb, kB): continue
              lo_first = key(*A) <= key(*B)
              rk, rkey = (max(kA, kB),) + ((kA, kB) if lo_first else (kB, kA)), (min(key(*A), key(*B)), max(key(*A), key(*B)), a[0])
              if (old := self.ex.races.get(rkey)) is None or rk < old.rank: self.ex.races[rkey] = RacePair(rk, Party(j, q, b), Party(i, p, a))
