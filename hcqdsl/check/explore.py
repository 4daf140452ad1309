"""The reference semantics over the synchronization skeleton: every interleaving of the waits, signal writes, submits
and launch starts of the unrolled sequences, states deduplicated.

Accesses, `barrier` and `timestamp` never block and never change a signal, so they are left out of the state. A
sequence's steps split into *segments*: the non-blocking steps between two consecutive *sync points* (a wait, a
write, a submit, a poll, a store into a polled word, or the start of a launch the host must submit first). A
skeleton state is (sync points passed per sequence, value of each signal and each polled word). The full states of
the reference semantics (steps executed per sequence, values) reachable from it are exactly those with each sequence anywhere in its current segment, up to and including being
about to run its next sync point: non-blocking steps are always enabled and commute with every step, and a full
execution projected onto its sync steps is a skeleton execution. So, over the reachable skeleton states:

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
from .unroll import Unrolled, WAIT, WRITE, ACCESS, SUBMIT, POLL, R

__all__ = ["Exploration", "explore"]

GATE = -1  # a sync point: the start of a launch the host must have submitted
STORE = -2  # a sync point: an access that stores into polled words (a `write`, the host's rewrite)
# a segment's entries are tagged: a poll's read of its word is the synchronization with the stores into it (as a
# wait's read of its signal is with the signal's writes), never a race with them
_PLAIN, _POLLED, _STORED = 0, 1, 2

class Exploration:
  def __init__(self):
    self.complete = True
    self.states = 0
    self.deadlocks: list = []   # (done tuple, values tuple): per blocked wait statement, a state of its first launch
    self.races: dict = {}       # key -> (launch rank, (j, q, acc), (i, p, acc))
    self.signal_races: dict = {}  # key -> (launch, (j, q), (i, p))
    self.nonmono: dict = {}     # (write key, use key) -> ((write's launch, use's launch), (i, p), (j, q), signal, current
                                # value, new value): the report names the lowering write's launch, so its first is kept

def _conflict(a, b) -> bool: return a[0] == b[0] and (a[3] != R or b[3] != R) and a[1] < b[2] and b[1] < a[2]

def explore(u: Unrolled, budget: int = 1_000_000) -> Exploration:
  seqs = u.seqs
  S = len(seqs)
  lens = [len(s.ops) for s in seqs]
  # sync[i]: (kind, signal, value, 0-based position; for GATE the host sync points that must have passed)
  # segs[i][c]: accesses (1-based position, accesses) between sync points c-1 and c of sequence i (c = len: the tail)
  # POLL: (POLL, value slot, (value, mask), p); STORE: (STORE, ((slot, bits kept, bits stored), ...), None, p). Value
  # slots: the signals, then the polled words (u.cell_init)
  sync, segs = [], []
  nsig = len(u.sig_init)
  host_after: dict = {}  # host 1-based position p -> host sync points among its first p steps
  for i, s in enumerate(seqs):
    sy, sg, cur = [], [], []
    idle = u.idle.get(i, {})
    for p in range(u.total(i)):
      k, idx = divmod(p, lens[i])
      op = s.ops[idx]
      if i and idx == 0 and s.gate >= 0 and u.gate_pos(i, k + 1):
        sy.append((GATE, None, None, p)); sg.append(cur); cur = []
      if op[0] in (WAIT, WRITE): sy.append((op[0], op[1], u.value(op, k + 1, i == 0), p)); sg.append(cur); cur = []
      elif op[0] == SUBMIT: sy.append((SUBMIT, None, None, p)); sg.append(cur); cur = []
      elif op[0] == POLL:
        cur.append((p + 1, (op[6],), _POLLED))
        sy.append((POLL, nsig + u.slot(op[1], op[5], k + 1), (u.value(op, k + 1), op[4]), p)); sg.append(cur); cur = []
      elif op[0] == ACCESS and len(op) > 2:
        cur.append((p + 1, op[1], _STORED))
        sy.append((STORE, tuple((nsig + u.slot(c, pin, k + 1), keep, bits[k]) for c, pin, keep, bits in op[2]), None, p))
        sg.append(cur); cur = []
      elif op[0] == ACCESS and op[1] and k + 1 not in idle.get(idx, ()): cur.append((p + 1, op[1], _PLAIN))  # idle: writes nothing
      if i == 0: host_after[p + 1] = len(sy)
    sg.append(cur)
    sync.append(sy); segs.append(sg)
  for i in range(1, S):  # a gate's requirement: the host has run the submit, i.e. passed all its sync points up to it
    sync[i] = [(GATE, host_after[u.gate_pos(i, x[3] // lens[i] + 1)], None, x[3]) if x[0] == GATE else x for x in sync[i]]
  nsync = [len(x) for x in sync]
  # a segment takes part in races only if one of its accesses conflicts with some access of another sequence
  # (decided once per distinct access of a statement, not per launch)
  by_seq = [{a for op in s.ops if op[0] in (ACCESS, POLL) for a in (op[1] if op[0] == ACCESS else (op[6],))} for s in seqs]
  racy = {(i, a) for i in range(S) for a in by_seq[i] if any(_conflict(a, b) for j in range(S) if j != i for b in by_seq[j])}
  hot = [[any((i, a) in racy for _, acc, _ in sg for a in acc) for sg in segs[i]] for i in range(S)]
  # passive queues (no wait, write or submit: only launch starts) are left out of the states: each can be in any
  # launch the host has submitted, whatever the others do, so their segments pair with what the host count allows
  passive = [i for i in range(1, S) if all(x[0] == GATE for x in sync[i])]
  active = [i for i in range(S) if i not in passive]
  ahot: dict = {}         # (active seq, segment) hot -> the most host sync points passed while it was current
  hmax = 0
  ex = Exploration()
  pairs: set = set()      # (i, c_i, j, c_j), i < j: hot segments current together
  dl_best: dict = {}      # blocked wait statement -> launch of the first deadlocked state found blocking it

  def first(d: dict, key, rank, *rest):
    old = d.get(key)
    if old is None or rank < old[0]: d[key] = (rank, *rest)

  def launch(i, pos1): return (pos1 - 1) // lens[i] + 1
  def key(i, pos1): return (i, (pos1 - 1) % lens[i])

  start = (tuple([0] * S), tuple(u.sig_init) + tuple(u.cell_init))
  seen = {start}
  stack = [start]
  while stack:
    cnt, vals = stack.pop()
    h = cnt[0]
    if h > hmax: hmax = h
    hs = [i for i in active if hot[i][cnt[i]]]
    for n, i in enumerate(hs):
      if passive and ahot.get((i, cnt[i]), -1) < h: ahot[(i, cnt[i])] = h
      for j in hs[n + 1:]: pairs.add((i, cnt[i], j, cnt[j]))
    at = [(i, sync[i][cnt[i]]) for i in active if cnt[i] < nsync[i]]   # (seq, the sync point it is at)
    enabled, writes = [], []
    for i, (kind, s, v, p) in at:
      if kind == WAIT: enabled.append(i) if vals[s] >= v else None
      elif kind == GATE: enabled.append(i) if cnt[0] >= s else None
      elif kind == POLL: enabled.append(i) if vals[s] & v[1] == v[0] else None
      else:
        enabled.append(i)
        if kind == WRITE: writes.append((i, s, v, p))
    for n, (i, s, v, p) in enumerate(writes):
      for j, s2, _, q in writes[n + 1:]:
        if s == s2:
          A, B = (j, q + 1), (i, p + 1)
          first(ex.signal_races, (min(key(*A), key(*B)), max(key(*A), key(*B))), max(launch(*A), launch(*B)), A, B)
      if v < vals[s]:
        for j, (k2, s2, _, q) in at:
          if j != i and s2 == s and k2 in (WAIT, WRITE):
            A, B = (i, p + 1), (j, q + 1)
            first(ex.nonmono, (key(*A), key(*B)), (launch(*A), launch(*B)), A, B, s, vals[s], v)
    if not enabled:
      if at:
        done = tuple(next((x[3] for x in sync[i] if x[1] > h), u.total(i)) if i in passive else
                     sync[i][cnt[i]][3] if cnt[i] < nsync[i] else u.total(i) for i in range(S))
        better = False
        for i, (kind, s, v, p) in at:
          if kind == WAIT or kind == POLL:
            k = key(i, p + 1)
            if k not in dl_best or launch(i, p + 1) < dl_best[k]: dl_best[k] = launch(i, p + 1); better = True
        if better: ex.deadlocks.append((done, vals))
      continue
    # the one reduction: a host submit or a passable gate, after a segment that takes part in no race, is taken alone.
    # Either stays enabled until taken, changes no signal, and is observed by no verdict; the states the other orders
    # reach show nothing the state after it does not (the skeleton graph is acyclic: no cycle proviso needed)
    quiet = next((i for i in enabled if (i == 0 and sync[0][cnt[0]][0] == SUBMIT and not hot[0][cnt[0]])
                  or (sync[i][cnt[i]][0] == GATE and not hot[i][cnt[i]])), None)
    for i in enabled if quiet is None else (quiet,):
      kind, s, v, _ = sync[i][cnt[i]]
      if kind == STORE:
        nv = list(vals)
        for x, keep, bits in s: nv[x] = nv[x] & keep | bits
        nv = tuple(nv)
      else: nv = vals[:s] + (v,) + vals[s + 1:] if kind == WRITE else vals
      nxt = (cnt[:i] + (cnt[i] + 1,) + cnt[i + 1:], nv)
      if nxt in seen: continue
      if len(seen) >= budget:
        ex.complete = False
        stack.clear()
        break
      seen.add(nxt)
      stack.append(nxt)
  ex.states = len(seen)
  def reach(i, h): return [c for c in range(nsync[i] + 1) if hot[i][c] and (c == 0 or sync[i][c - 1][1] <= h)]
  for (j, cj), h in ahot.items():
    for i in passive:
      for c in reach(i, h): pairs.add((i, c, j, cj) if i < j else (j, cj, i, c))
  for n, i in enumerate(passive):
    for j in passive[n + 1:]:
      for c in reach(i, hmax):
        for d in reach(j, hmax): pairs.add((i, c, j, d))
  pins = u.pinned
  def memory(i, p, n, k):   # the launch whose memory access n of sequence i's step p touches
    pin = pins.get(i)
    return k if pin is None else pin.get((u.where(i, p)[1], n), k - 1) + 1
  # races: every conflicting pair of accesses of two segments that are current together
  for i, ci, j, cj in sorted(pairs):
    for p, xi, ti in segs[i][ci]:
      for q, xj, tj in segs[j][cj]:
        if ti | tj == _POLLED | _STORED and ti != tj: continue   # a poll and a store into its word: synchronization
        for na, a in enumerate(xi):
          for nb, b in enumerate(xj):
            if _conflict(a, b):
              A, B = (i, p), (j, q)
              kA, kB = launch(*A), launch(*B)
              # a rebound buffer is other memory in another launch (`x@k`: launch k's memory, whatever the launch)
              if u.rebound[a[0]] and memory(i, p, na, kA) != memory(j, q, nb, kB): continue
              lo_first = key(*A) <= key(*B)
              first(ex.races, (min(key(*A), key(*B)), max(key(*A), key(*B)), a[0]),
                    (max(kA, kB),) + ((kA, kB) if lo_first else (kB, kA)), (j, q, b), (i, p, a))
  return ex
