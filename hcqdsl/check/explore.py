"""The reference semantics, literally: every interleaving of the unrolled sequences, states deduplicated.

State = (executed steps of each sequence, value of each signal). A sequence's next step is *about to run* once the
host has submitted its launch; a wait runs only when its condition holds, every other step always runs. Verdicts are
read off every reachable state. Used as the test oracle for the happens-before analysis, and by `check` for programs
outside the exact fragment (with a state budget).

The one reduction: a `barrier`/`timestamp` step, or an access that overlaps no other sequence's conflicting access,
touches no state and takes part in no verdict, so when one is about to run we take it alone (it commutes with every
step, and the states the other orders reach have the verdicts of states reached this way).
"""
from __future__ import annotations
from .unroll import Unrolled, WAIT, WRITE, ACCESS, NOP, BARRIER, SUBMIT, R

__all__ = ["Exploration", "explore"]

class Exploration:
  def __init__(self):
    self.complete = True
    self.states = 0
    self.deadlocks: list = []   # (done tuple, values tuple), distinct deadlocked states
    self.races: dict = {}       # key -> (launch, (j, q, acc), (i, p, acc))
    self.signal_races: dict = {}  # key -> (launch, (j, q), (i, p))
    self.nonmono: dict = {}     # key -> (launch, (i, p), (j, q), signal, current value, new value)

def _key(u, a, b):
  x = (a[0], (a[1] - 1) % len(u.seqs[a[0]].ops))
  y = (b[0], (b[1] - 1) % len(u.seqs[b[0]].ops))
  return (min(x, y), max(x, y))

def _launch(u, i, pos): return (pos - 1) // len(u.seqs[i].ops) + 1

def explore(u: Unrolled, budget: int = 200_000, max_deadlocks: int = 64) -> Exploration:
  seqs = u.seqs
  S = len(seqs)
  totals = [u.total(i) for i in range(S)]
  # steps[i][p]: the step at 0-based position p: (kind, signal, value, accesses/submits)
  steps, gate = [], []
  for i, s in enumerate(seqs):
    st, gt = [], []
    for p in range(totals[i]):
      k, idx = divmod(p, len(s.ops))
      op = s.ops[idx]
      if op[0] in (WAIT, WRITE): st.append((op[0], op[1], u.value(op, k + 1), None))
      elif op[0] == ACCESS and k + 1 in u.idle.get(i, {}).get(idx, ()): st.append((NOP, None, None, None))  # writes nothing
      elif op[0] in (ACCESS, SUBMIT): st.append((op[0], None, None, op[1]))
      else: st.append((op[0], None, None, None))
      gt.append(u.gate_pos(i, k + 1) if i and idx == 0 else 0)
    steps.append(st); gate.append(gt)
  # accesses that conflict with no other sequence's access can never race: like barriers, they are run alone
  by_seq = [[a for op in s.ops if op[0] == ACCESS for a in op[1]] for s in seqs]
  def conflicts(i, acc):
    return any(a[0] == acc[0] and (a[3] != R or acc[3] != R) and a[1] < acc[2] and acc[1] < a[2]
               for j in range(S) if j != i for a in by_seq[j])
  quiet_op = [[op[0] in (NOP, BARRIER) or (op[0] == ACCESS and not any(conflicts(i, a) for a in op[1])) for op in s.ops]
              for i, s in enumerate(seqs)]
  ex = Exploration()

  def first(d: dict, key, launch, *rest):
    old = d.get(key)
    if old is None or launch < old[0]: d[key] = (launch, *rest)

  start = (tuple([0] * S), tuple(u.sig_init))
  seen = {start}
  stack = [start]
  while stack:
    done, vals = stack.pop()
    about = [i for i in range(S) if done[i] < totals[i] and done[0] >= gate[i][done[i]]]
    acc, wr, use = [], [], {}
    for i in about:
      kind, s, v, x = steps[i][done[i]]
      if kind == ACCESS: acc.append((i, x))
      elif kind == WRITE: wr.append((i, s, v)); use.setdefault(s, []).append(i)
      elif kind == WAIT: use.setdefault(s, []).append(i)
    for n, (i, xi) in enumerate(acc):
      for j, xj in acc[n + 1:]:
        for a in xi:
          for b in xj:
            if a[0] == b[0] and (a[3] != R or b[3] != R) and a[1] < b[2] and b[1] < a[2]:
              A, B = (j, done[j] + 1), (i, done[i] + 1)
              kA, kB = _launch(u, *A), _launch(u, *B)
              if kA != kB and u.rebound[a[0]]: continue  # a rebound buffer is other memory in another launch
              lo_first = (A[0], (A[1] - 1) % len(seqs[A[0]].ops)) <= (B[0], (B[1] - 1) % len(seqs[B[0]].ops))
              first(ex.races, _key(u, A, B) + (a[0],), (max(kA, kB),) + ((kA, kB) if lo_first else (kB, kA)),
                    (j, done[j] + 1, b), (i, done[i] + 1, a))
    for n, (i, s, v) in enumerate(wr):
      for j, s2, _ in wr[n + 1:]:
        if s == s2:
          A, B = (j, done[j] + 1), (i, done[i] + 1)
          first(ex.signal_races, _key(u, A, B), max(_launch(u, *A), _launch(u, *B)), A, B)
      if v < vals[s]:
        for j in use[s]:
          if j != i:
            A, B = (i, done[i] + 1), (j, done[j] + 1)
            first(ex.nonmono, _key(u, A, B), max(_launch(u, *A), _launch(u, *B)), A, B, s, vals[s], v)
    enabled = [i for i in about if steps[i][done[i]][0] != WAIT or vals[steps[i][done[i]][1]] >= steps[i][done[i]][2]]
    if not enabled:
      if any(done[i] < totals[i] for i in range(S)) and len(ex.deadlocks) < max_deadlocks: ex.deadlocks.append((done, vals))
      continue
    quiet = [i for i in enabled if quiet_op[i][done[i] % len(seqs[i].ops)]]
    for i in quiet[:1] or enabled:
      kind, s, v, _ = steps[i][done[i]]
      nd = done[:i] + (done[i] + 1,) + done[i + 1:]
      nv = vals[:s] + (v,) + vals[s + 1:] if kind == WRITE else vals
      nxt = (nd, nv)
      if nxt in seen: continue
      if len(seen) >= budget:
        ex.complete = False
        stack.clear()
        break
      seen.add(nxt)
      stack.append(nxt)
  ex.states = len(seen)
  return ex
