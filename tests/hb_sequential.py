"""The happens-before pass as it was before it was split into an execution and a numpy pass over the accesses
(hcqdsl/check/hb.py): one sequential pass that handles every access as it runs, with its own per-range bookkeeping.
Kept as a second implementation: tests/test_check_hb.py holds the two equal (deadlock state, violations, races,
redundant waits) on generated programs, and visibility warnings by their definition (tests/visibility_reference.py)
on this pass's clocks,, including what the reference semantics do not define."""
from __future__ import annotations
from bisect import bisect_left
from heapq import heappush, heappop
from itertools import compress
from hcqdsl.ir import U32_MAX as MASK
from hcqdsl.check.unroll import Unrolled, WAIT, WRITE, ACCESS, SUBMIT, R
import attrs
from hcqdsl.check.accesses import SCAN_CAP, RACE_CAP
from visibility_reference import visibility

@attrs.define
class Trace:
  """What this pass found: the fields tests/test_check_hb.py compares with hcqdsl.check.hb.Trace's."""
  done: list
  values: list
  blocked: dict
  races: dict
  vis: dict
  violations: list
  wstats: dict
  vc: list

def happens_before(u: Unrolled) -> Trace:
  seqs, N = u.seqs, u.launches
  S = len(seqs)
  lens = [len(s.ops) for s in seqs]
  totals = [n * N for n in lens]
  envs = u.envs
  nsig = len(u.signals)
  done = [0] * S
  vc = [[0] * S for _ in range(S)]
  value = list(u.sig_init)
  hv = [[v] for v in value]              # values since the last lowering write: non-decreasing
  hs: list = [[-1] for _ in value]       # their writers' sequence (-1: the initial value),
  hp_: list = [[0] for _ in value]       # position,
  hc: list = [[None] for _ in value]     # and clock
  lw_s, lw_p = [-1] * nsig, [0] * nsig  # latest write in execution order: its sequence and position
  last_reset: list = [None] * nsig       # latest lowering write
  last_wait = [dict() for _ in range(nsig)]
  waiters: list = [[] for _ in range(nsig)]
  sub: list = [[None] * N for _ in range(S)]
  gate_blocked = [False] * S
  users = [[[], {}, 0, True] for _ in u.buffers]
  rb, rusers, idle = u.rebound, {}, u.idle   # a rebound buffer's accesses: one users entry per launch (new memory each launch)
  hist: list = [dict() for _ in range(S)]  # each step's clock (for visibility, decided afterwards by its definition)
  races: dict = {}
  partners: dict = {}   # (seq, op index, buffer) -> racing statements found: a racy program stops at RACE_CAP each
  violations: list = []
  wrun = [[0] * n for n in lens]         # per wait statement: instances run,
  wred = [[0] * n for n in lens]         # and instances already implied by happens-before
  ready = list(range(S - 1, -1, -1))

  def race(j, q, aj, i, p, ai):
    kj, ki = (q - 1) // lens[j] + 1, (p - 1) // lens[i] + 1
    a, b = (j, (q - 1) % lens[j]), (i, (p - 1) % lens[i])
    key = (min(a, b), max(a, b), aj[0])
    rank = (max(kj, ki),) + ((kj, ki) if a <= b else (ki, kj))  # the same instance the explorer keeps
    old = races.get(key)
    if old is None:
      races[key] = (rank, (j, q, aj), (i, p, ai))
      for x in (a, b): partners[x + (aj[0],)] = partners.get(x + (aj[0],), 0) + 1
    elif rank < old[0]: races[key] = (rank, (j, q, aj), (i, p, ai))

  def scan(j, jw, jr, cj, k2, b, i, idx, pos, acc, m):   # j's accesses of range k2 after cj race with this one
    oj, Lj = seqs[j].ops, lens[j]
    for pl, wr in ((jw, True), (jr, False)) if m != R else ((jw, True),):
      if pl and pl[-1] > cj and partners.get((i, idx, b), 0) < RACE_CAP:
        n, c = len(pl) - 1, 0
        while n >= 0 and pl[n] > cj and c < SCAN_CAP and partners.get((i, idx, b), 0) < RACE_CAP:
          q = pl[n]
          for a2 in oj[(q - 1) % Lj][1]:
            if a2[0] == b and (a2[1], a2[2]) == k2 and (a2[3] != R) == wr: race(j, q, a2, i, pos, acc)
          n -= 1
          c += 1

  while ready:
    i = ready.pop()
    if done[i] >= totals[i]: continue
    ops, L, v = seqs[i].ops, lens[i], vc[i]
    wr_i, wd_i = wrun[i], wred[i]
    idle_i = idle.get(i)
    pin_i = u.pinned.get(i)
    k, idx0 = divmod(done[i], L)
    p = totals[i]
    while k < N:   # one launch of this sequence per round, from idx0 until it blocks
      if idx0 == 0 and i:
        s_ = sub[i][k]
        if s_ is None:
          gate_blocked[i] = True
          p = k * L
          break
        hp, hclk = s_
        if hp > v[0]:
          v = vc[i] = list(map(max, v, hclk))
          v[0] = hp
      envk, base = envs[k], k * L
      for idx in range(idx0, L):
        op = ops[idx]
        kind = op[0]
        pos = base + idx + 1
        hist[i][pos] = v
        if kind == ACCESS:
          for n_, acc in enumerate(op[1] if idle_i is None or k + 1 not in idle_i.get(idx, ()) else ()):
            b, lo, hi, m = acc[:4]
            key = (lo, hi)
            km = pin_i.get((idx, n_), k) if pin_i else k   # `x@j`: launch j's memory
            # users[b]: [sorted distinct ranges, range -> [seq, its write positions, its read positions, seq, ...] (one
            # flat list: most ranges have one or two sequences), longest range, all ranges pairwise disjoint]
            ub = users[b] if not rb[b] else rusers.setdefault((b, km), [[], {}, 0, True])
            rmap = ub[1]
            by = rmap.get(key)
            if by is None:   # a new range: where it goes in the sorted list, and do the ranges stay pairwise disjoint?
              keys = ub[0]
              nk = len(keys)
              ti = nk if not nk or keys[-1] < key else bisect_left(keys, key)  # ranges mostly come in increasing order
              if ub[3] and ((ti and keys[ti - 1][1] > lo) or (ti < nk and keys[ti][0] < hi)): ub[3] = False
            if ub[3]:   # disjoint ranges: only the same range can overlap, and only another sequence's accesses matter
              cands = (key,) if by is not None and (len(by) > 3 or by[0] != i) else ()
            elif rmap:
              keys, lim = ub[0], lo - ub[2]
              t, cands = bisect_left(keys, (hi,)), []
              while t > 0:   # the ranges starting before hi, back to where none can reach lo
                t -= 1
                k2 = keys[t]
                if k2[0] <= lim: break
                if k2[1] > lo: cands.append(k2)
            else: cands = ()
            if cands:
              for k2 in cands:
                e = rmap[k2]
                for x in range(0, len(e), 3):   # e[x]: a sequence j; e[x + 1], e[x + 2]: its write, read positions
                  j = e[x]
                  if j == i: continue
                  cj = v[j]
                  pl, jr = e[x + 1], e[x + 2]
                  # j's accesses after cj are not ordered before this one: its writes race with anything, its reads
                  # only with a write (so shared read-only data costs nothing)
                  if (pl and pl[-1] > cj) or (m != R and jr and jr[-1] > cj): scan(j, pl, jr, cj, k2, b, i, idx, pos, acc, m)
            slot = 0 if m != R else 1
            if by is None:
              if ti == nk: keys.append(key)
              else: keys.insert(ti, key)
              rmap[key] = [i, [pos], None] if slot == 0 else [i, None, [pos]]
              if hi - lo > ub[2]: ub[2] = hi - lo
            else:
              x, n3 = 0, len(by)
              while x < n3 and by[x] != i: x += 3
              if x == n3: by += (i, [pos], None) if slot == 0 else (i, None, [pos])
              else:
                x += 1 + slot
                pl = by[x]
                if pl is None: by[x] = [pos]
                elif pl[-1] != pos: pl.append(pos)
        elif kind == WAIT:
          s = op[1]
          need = (op[3] if op[2] is None else envk[op[2]] + op[3]) & MASK
          if value[s] < need:
            heappush(waiters[s], (need, i))
            break
          # the latest lowering write must already be ordered before this wait (by the clock before the wait joins
          # anything): else the wait could also run, or sit blocked, while it lowers the signal
          r = last_reset[s]
          if r is not None and r[0] != i and r[1] > v[r[0]]: violations.append(("non-monotonic", r, (i, pos), s))
          x = bisect_left(hv[s], need)
          wj = hs[s][x]
          wr_i[idx] += 1
          if wj < 0 or wj == i or hp_[s][x] <= v[wj]: wd_i[idx] += 1
          else:
            v = vc[i] = list(map(max, v, hc[s][x]))
            v[wj] = hp_[s][x]
          last_wait[s][i] = pos
        elif kind == WRITE:
          s = op[1]
          val = (op[3] if op[2] is None else envk[op[2]] + op[3]) & MASK
          j = lw_s[s]
          if j >= 0 and j != i and lw_p[s] > v[j]: violations.append(("signal-race", (j, lw_p[s]), (i, pos), s))
          if val < value[s]:
            for j, wp in last_wait[s].items():
              if j != i and wp > v[j]: violations.append(("non-monotonic", (i, pos), (j, wp), s))
            hv[s], hs[s], hp_[s], hc[s] = [val], [i], [pos], [v]
            last_reset[s] = (i, pos)
          else:
            hv[s].append(val)
            hs[s].append(i)
            hp_[s].append(pos)
            hc[s].append(v)
          value[s] = val
          lw_s[s] = i
          lw_p[s] = pos
          wq = waiters[s]
          while wq and wq[0][0] <= val: ready.append(heappop(wq)[1])
        elif kind == SUBMIT:
          for q in op[1]:
            sub[q][k] = (pos, v)
            if gate_blocked[q]:
              gate_blocked[q] = False
              ready.append(q)
      else:
        k += 1
        idx0 = 0
        continue
      p = base + idx   # blocked at a wait
      break
    done[i] = p

  # a blocked wait must be ordered after the latest lowering write of its signal, or another execution runs it first
  blocked = {}
  for i in range(S):
    if done[i] >= totals[i]: continue
    if gate_blocked[i]:
      blocked[i] = "gate"
      continue
    blocked[i] = "wait"
    s = seqs[i].ops[done[i] % lens[i]][1]
    r = last_reset[s]
    if r is not None and r[0] != i and r[1] > vc[i][r[0]]: violations.append(("non-monotonic", r, (i, done[i] + 1), s))
  wstats = {(i, idx): (wrun[i][idx], wred[i][idx]) for i in range(S) for idx in compress(range(lens[i]), wrun[i])}
  return Trace(done=done, values=value, blocked=blocked, races=races, vis=visibility(u, hist, done), violations=violations,
               wstats=wstats, vc=vc)
