"""Happens-before over an unrolled program: one execution of its synchronization, then every access at once.

The execution: every sequence runs until it blocks (at a wait whose condition does not hold, or at the start of a
launch the host has not submitted yet); a write wakes the sequences waiting for a value it reaches. In the exact
fragment (writes to each signal totally ordered, lowering writes ordered against every other use of their signal)
progress is confluent, so this one execution decides `deadlock`, and the clocks it builds are the happens-before of
every execution. Only waits, writes, submits, polls and stores into polled words take part in it: other accesses,
barriers and timestamps neither block nor order anything. A poll is in the fragment when the stores into its word are
totally ordered and ordered against it (the store before the run of values that pass it, before it; the first that
fails it after the run, after it): it then waits for one store, as a wait for one write.
Two implementations: `execute_loop` runs every wait, write, submit, poll and store; `execute_direct` guesses each
signal's write order up front (launch, then sequence with the host first, then position: what a program that resets
its signals from the host between launches does), so that the write satisfying each wait is a binary search, runs only
the joins, and then verifies on the clocks both the fragment and that its guess was the order. It takes most programs
without polls and falls back to the loop (returns None) on the rest; tests/test_check_hb.py holds the two equal.

Clocks: `vc[i][j]` = the last position of sequence j known to happen before sequence i's current step. A wait joins
the clock of the write that satisfies it (the first write reaching the value since the last lowering write); a
queue's first step of a launch joins the host's clock at the submit. A join builds a new list and nothing mutates it
afterwards, so the list itself is the snapshot a write or submit keeps, and each sequence's history of clocks (the
position from which each holds) is kept as it goes: O(joins * sequences) memory.

Accesses, afterwards and in numpy: access X of sequence i at position p and a conflicting access Y of j at q (one of
them writes, their byte ranges overlap, another sequence) race iff neither is ordered before the other: q > C_i(p)[j]
and p > C_j(q)[i]. Clocks only grow along a sequence, so among j's accesses of one range the first with q > C_i(p)[j]
is the one to test: O(accesses * sequences sharing their ranges) searches, no execution order needed. A compute
queue's read that crosses devices draws `visibility` when the last write it is ordered after is not also ordered
before the queue's latest `barrier` (or the launch start). Only a racy program goes back to Python, to enumerate its
racing pairs (capped per statement).
"""
from __future__ import annotations
import functools
from bisect import bisect_left
from heapq import heappush, heappop
from operator import itemgetter
from array import array
import attrs
import numpy as np
from ..ir import U32_MAX
from .unroll import Unrolled, WAIT, WRITE, ACCESS, BARRIER, NOP, POLL, R, W, INT64_SAFE, POLL_READ, STORE
from .caches import SIGNAL_INVALIDATES_L2, STALE_READS, device_arch

__all__ = ["Trace", "happens_before", "execute_direct", "execute_loop", "ClockLimit", "MAX_CLOCK_BYTES"]

# the most memory the clock rows may take (rows x sequences: 10**5 queues of one signal each would need 74.5 GiB)
MAX_CLOCK_BYTES = 4 << 30

class ClockLimit(Exception):
  """The program's clock rows would take more than MAX_CLOCK_BYTES (check reports it as a `bounds` error)."""

@attrs.frozen
class VisColumns:
  """The `visibility` findings, one per statement (its first launch, first access, first writer), as columns of ints:
  the read (sequence, op index, index of the access in the op, position), the write it may not see (the same four),
  the kind (0: the host's write with no HDP flush after it; 1: a stale L2 line an earlier access left), and for kind 1
  that access (the same four; -1 for kind 0)."""
  seq: list[int]; op: list[int]; sub: list[int]; pos: list[int]
  wseq: list[int]; wop: list[int]; wsub: list[int]; wpos: list[int]
  kind: list[int]
  aseq: list[int]; aop: list[int]; asub: list[int]; apos: list[int]
  def __len__(self) -> int: return len(self.seq)
  def rows(self) -> list[tuple[int, ...]]: return list(zip(*attrs.astuple(self, recurse=False)))

_NO_VIS = VisColumns(*([],) * 13)
SCAN_CAP = 4096   # unordered accesses looked at per access and sequence (only a racy program gets near it)
RACE_CAP = 16     # racing statements reported per statement and buffer

class Trace:
  """What the one execution found. Positions are 1-based; a step is (seq, pos)."""
  def __init__(self, **kw): self.__dict__.update(kw)
  @property
  def exact(self) -> bool: return not self.violations
  @functools.cached_property
  def vis(self) -> dict:
    """{(seq, op index): (seq, pos, access, writer seq, its pos, its access, kind, A's seq, its pos, its access)}: one
    visibility finding per statement (kind 0: the host's write with no HDP flush after it; 1: a stale L2 line A's
    access may have left, A None for kind 0). Built on first use from `vis_found`: per finding (seq, op index, access
    index in the op, pos, writer seq, its op index, its access index, its pos, kind, A's seq, op index, access index,
    pos), columns of ints (what VisibilityAnalysis reads)."""
    ops, (ii, idx, m, p, jj, jdx, jm, q, kind, kk, kdx, km, kp) = self.ops, attrs.astuple(self.vis_found, recurse=False)
    acc = lambda i, x, n: ops[i][x][1][n] if i >= 0 else None
    return {(i, x): (i, pp, acc(i, x, n), j, qq, acc(j, y, o), kd, k if k >= 0 else None, kq if k >= 0 else None, acc(k, z, r))
            for i, x, n, pp, j, y, o, qq, kd, k, z, r, kq in zip(ii, idx, m, p, jj, jdx, jm, q, kind, kk, kdx, km, kp)}

def happens_before(u: Unrolled) -> Trace:
  x = _execute(u)
  races, vis = _accesses(u, x)
  return Trace(done=x.done, values=x.values, blocked=x.blocked, races=races, vis_found=vis, ops=[s.ops for s in u.seqs],
               violations=x.violations, wstats=x.wstats, vc=x.vc)

class _Execution:
  def __init__(self, **kw): self.__dict__.update(kw)

def _execute(u: Unrolled) -> _Execution:
  """The execution: `execute_direct` when its guess of every signal's write order is the order, else `execute_loop`."""
  return execute_direct(u) or execute_loop(u)

def execute_direct(u: Unrolled):
  """The execution without running the writes, for the programs where a guess of each signal's write order holds:
  launch by launch, sequence by sequence (the host first), position by position. The guess fixes the segments between
  lowering writes, which segment each wait falls in (the writes before it in the same order), and so the write that
  satisfies it (the first in its segment reaching its value: a binary search). What is left to run is the order: each
  sequence's joins (a wait satisfied by another sequence's write, a queue's launch start) as events, a sequence
  running until an event whose write (or submit) its writer has not reached. Then every check `execute_loop` makes
  is made on the clocks, plus that the guess was the execution's order; if one fails, None (the loop decides)."""
  seqs, N, S = u.seqs, u.launches, len(u.seqs)
  lens = [len(s.ops) for s in seqs]
  big = max(lens) * N + 2
  nsig = len(u.signals)
  KS = N * S * big   # the guessed order's keys within one signal: (launch * S + sequence) * big + position
  cols = u.sync_columns()
  if cols is None or nsig * KS >= INT64_SAFE or any(s.gate < 0 for s in seqs[1:]) or u.polls: return None   # (polls: the loop)
  E, cols = cols
  I64 = np.int64
  # every wait and write instance: sequence, position, signal, value, key in the guessed order
  inst = {WAIT: [], WRITE: []}
  for i, (at, kind, sig, var, off) in enumerate(cols):
    for kd in (WAIT, WRITE):
      m = kind == kd
      if not m.any(): continue
      a, sg, vr, of = at[m], sig[m], var[m], off[m]
      for k in range(N):
        pos = a + (k * lens[i] + 1)
        v = E[k][vr] + of
        # the host's waits compare 64 bits (a value past 32 bits never passes), the packets 32
        v = np.where(v > U32_MAX, v, v & U32_MAX) if i == 0 and kd == WAIT else v & U32_MAX
        inst[kd].append((np.full(len(a), i, dtype=I64), pos, sg, v, (k * S + i) * big + pos))
  cat = lambda xs: tuple(np.concatenate(c) for c in zip(*xs)) if xs else tuple(np.zeros(0, dtype=I64) for _ in range(5))
  # the writes and, first in each signal, its initial value (sequence -1), in the guessed order
  wq, wp, ws, wv, wk = cat(inst.pop(WRITE))   # (popped: a big program's peak memory is its page faults)
  ws = np.concatenate([ws, np.arange(nsig, dtype=I64)])
  wq, wp = np.concatenate([wq, np.full(nsig, -1, dtype=I64)]), np.concatenate([wp, np.zeros(nsig, dtype=I64)])
  wv = np.concatenate([wv, np.asarray(u.sig_init, dtype=I64)])
  full = ws * KS + np.concatenate([wk, np.zeros(nsig, dtype=I64)])
  order = np.argsort(full, kind="stable")
  wq, wp, ws, wv, full = wq[order], wp[order], ws[order], wv[order], full[order]
  del order, wk
  is_init = wq < 0
  lowering = np.r_[False, wv[1:] < wv[:-1]] & ~is_init
  seg = np.cumsum(is_init | lowering) - 1                  # segment: an initial value or a lowering write, and on
  seg_start = np.flatnonzero(is_init | lowering)           # by segment
  segkey = (seg << 32) | wv                                # sorted: values never fall within a segment
  # each wait's segment (that of the write just before it in the guessed order), and the write satisfying it
  aq, ap, as_, an, ak = cat(inst.pop(WAIT))
  ag = seg[np.searchsorted(full, as_ * KS + ak, side="right") - 1]
  del full, ak
  t = np.searchsorted(segkey, (ag << 32) | an, side="left")
  ok = t < len(segkey)
  ok[ok] = seg[t[ok]] == ag[ok]
  t = np.where(ok, t, 0)
  never = 1 << 62
  j = np.where(ok, wq[t], aq)            # no write reaches its value: blocked for ever (on itself)
  q = np.where(ok, wp[t], never)
  ev_mask = (j >= 0) & ((j != aq) | (q > ap))   # else the initial value, or its own earlier write: no join, no wait
  # each sequence's events in position order: position, the sequence it needs, the position that one must reach, and
  # the position from which the join's clock row holds (a launch start: its own position; a wait: the next)
  ev = []
  m = np.flatnonzero(ev_mask)                    # grouped by sequence (the instances were made sequence by sequence)
  cut = np.searchsorted(aq[m], np.arange(S + 1)).tolist()
  for i in range(S):
    mi = m[cut[i]:cut[i + 1]]
    P, J, Q = ap[mi], j[mi], q[mi]
    if i:
      st = np.arange(N, dtype=I64) * lens[i] + 1
      P, J, Q = np.concatenate([st, P]), np.concatenate([np.zeros(N, dtype=I64), J]), \
                np.concatenate([np.arange(N, dtype=I64) * lens[0] + seqs[i].gate + 1, Q])
      H = np.concatenate([st, ap[mi] + 1])
      o = np.argsort(2 * P + (H > P), kind="stable")
      P, J, Q, H = P[o], J[o], Q[o], H[o]
    else: H = P + 1
    ev.append((P, J, Q, H))
  # run: a sequence goes on until an event whose needed position its sequence has not reached. Only the order is run
  # here: each join's level (one more than its inputs'), in one flat list (index 0: row 0's level, 0); the rows are
  # built from the events afterwards. G: the flat index of the level of the row holding where an event's join reads
  cnt = np.asarray([len(x[0]) for x in ev], dtype=I64)
  first = np.r_[0, np.cumsum(cnt)] + 1                        # each sequence's first event's flat index
  P, J, Q, H = (np.concatenate([x[f] for x in ev]) for f in range(4))
  sq = np.repeat(np.arange(S, dtype=I64), cnt)
  y = np.searchsorted(sq * big + H, J * big + Q, side="right") - 1   # J's last event holding by Q
  G = np.where((y >= 0) & (sq[np.maximum(y, 0)] == J), y + 1, 0)
  Q = np.where(J == sq, never, Q)                                   # waiting on itself: for ever
  del y, t, ok, j, q, ev_mask, m, segkey, an
  # flat lists indexed like L (event f at f + 1): a sequence's events run from its first to the next one's
  Pl, Jl, Ql, Gl = (np.r_[0, c].tolist() for c in (P, J, Q, G))
  L = [0] * (len(P) + 1)
  at_ev, ends, xs = first[:-1].tolist(), first[1:].tolist(), [0] * S
  done = [0] * S
  waiters: list = [[] for _ in range(S)]
  ready = list(range(S - 1, -1, -1))
  while ready:
    i = ready.pop()
    k, end, x = at_ev[i], ends[i], xs[i]
    while k < end:
      q = Ql[k]
      if done[Jl[k]] < q:
        heappush(waiters[Jl[k]], (q, i))
        break
      y = L[Gl[k]]
      if y > x: x = y
      x += 1
      L[k] = x
      k += 1
    at_ev[i], xs[i] = k, x
    d = done[i] = Pl[k] - 1 if k < end else lens[i] * N
    wl = waiters[i]
    while wl and wl[0][0] <= d: ready.append(heappop(wl)[1])
  del Pl, Jl, Ql, Gl
  at_ev = [k - f for k, f in zip(at_ev, first[:-1].tolist())]   # events run, per sequence
  # the rows: each event run (row 0: all zeros)
  run = np.arange(len(P)) - (first - 1)[sq] < np.asarray(at_ev, dtype=I64)[sq]
  newid = np.cumsum(run)                                      # row id of each event run
  cnt = np.asarray(at_ev, dtype=I64)
  first = np.r_[0, np.cumsum(cnt)] + 1
  lv = np.r_[0, np.asarray(L[1:], dtype=I64)[run]]
  y = np.where(G > 0, G - 1, 0)
  sr = np.r_[0, np.where(G > 0, newid[y] * run[y], 0)[run]]
  del L, G, y, newid
  P, J, Q, H, sq = P[run], J[run], Q[run], H[run], sq[run]
  nr = len(P)
  pv = np.r_[0, np.arange(nr, dtype=I64)]                     # the previous row of its sequence, or row 0
  pv[first[:-1][cnt > 0]] = 0
  cl, vl = np.r_[0, J], np.r_[0, Q]
  hd = np.r_[0, sq * big + H]
  # renumbered in level order (row 0 stays first): `_clocks` builds them as they are
  order = np.argsort(lv, kind="stable")
  new = np.empty(len(order), dtype=I64)
  new[order] = np.arange(len(order))
  starts = new[np.flatnonzero(H == P) + 1].tolist()
  cur = [int(new[first[i] + cnt[i] - 1]) if cnt[i] else 0 for i in range(S)]
  pv, sr, cl, vl, lv, hd = new[pv[order]], new[sr[order]], cl[order], vl[order], lv[order], hd[order]
  C = _clocks(S, pv, sr, cl, vl, lv)
  Cf = C.reshape(-1)
  keys = np.concatenate([np.arange(S, dtype=I64) * big, hd[1:]])
  rid = np.concatenate([np.zeros(S, dtype=I64), np.arange(1, len(C), dtype=I64)])
  o = np.argsort(keys, kind="stable")
  keys, rid = keys[o], rid[o]
  clock = lambda sq, p, col: Cf[rid[np.searchsorted(keys, sq * big + p, side="right") - 1] * S + col]  # at (sq, p)
  D = np.asarray(done, dtype=I64)
  # the checks, and that the guess was the order: the writes run are a prefix of each signal's guessed order
  ran = is_init | (wp <= D[np.maximum(wq, 0)])
  if (~ran[:-1] & ran[1:] & ~is_init[1:]).any(): return None
  # consecutive writes of a signal by two sequences: ordered (else signal-race)
  c = np.flatnonzero(ran[1:] & ~is_init[1:] & (wq[:-1] >= 0) & (wq[1:] != wq[:-1])) + 1
  if len(c) and (clock(wq[c], wp[c], wq[c - 1]) < wp[c - 1]).any(): return None
  # a wait that ran after its segment's lowering write (else non-monotonic), and before the next lowering write
  aran = ap <= D[aq]
  r0 = seg_start[ag]
  c = np.flatnonzero(aran & ~is_init[r0] & (wq[r0] != aq))
  if len(c) and (clock(aq[c], ap[c], wq[r0[c]]) < wp[r0[c]]).any(): return None
  low = np.flatnonzero(lowering & ran)
  if len(low):
    x = np.flatnonzero(aran)
    if len(low) * S > 1 << 22: return None
    gk = (as_[x] * S + aq[x]) * (seg[-1] + 1) + ag[x]
    o = np.lexsort((ap[x], gk))
    gk, x = gk[o], x[o]
    lw = np.repeat(low, S)
    js = np.tile(np.arange(S, dtype=I64), len(low))
    want = (ws[lw] * S + js) * (seg[-1] + 1) + seg[lw]
    y = np.searchsorted(gk, want, side="left") - 1
    hit = (y >= 0) & (js != wq[lw])
    hit[hit] = gk[y[hit]] // (seg[-1] + 1) == want[hit] // (seg[-1] + 1)
    lw, js, y = lw[hit], js[hit], x[y[hit]]
    if len(lw) and (clock(wq[lw], wp[lw], js) < ap[y]).any(): return None
  # a wait left blocked: its segment is the last its signal reached, and ordered after that segment's lowering write
  blocked = {}
  for i, (P, J, Q, H) in enumerate(ev):
    e = at_ev[i]
    if e >= len(P): continue
    if H[e] == P[e]: blocked[i] = "gate"; continue
    blocked[i] = "wait"
    lo, hi = np.searchsorted(aq, [i, i + 1])   # its waits, by position
    w = lo + int(np.searchsorted(ap[lo:hi], P[e]))
    sgn = as_[w]
    lo, hi = np.searchsorted(ws, [sgn, sgn + 1])
    last = lo + np.flatnonzero((is_init | lowering)[lo:hi] & ran[lo:hi])[-1]
    if last != r0[w]: return None
    if not is_init[last] and wq[last] != i and C[cur[i], wq[last]] < wp[last]: return None
  # final values: each signal's last write run
  values = list(u.sig_init)
  fin = np.flatnonzero(ran & ~is_init & np.r_[~ran[1:] | is_init[1:], True])
  for s_, val in zip(ws[fin].tolist(), wv[fin].tolist()): values[s_] = val
  return _Execution(done=done, values=values, blocked=blocked, polled=(), violations=[], wstats=_wait_stats(u, done, starts, C, pv, cl, vl, hd, big),
                    vc=[C[cur[i]].tolist() for i in range(S)], C=C, held=hd)

def execute_loop(u: Unrolled) -> _Execution:
  """Runs the synchronization. Clocks are not computed as it goes: each join is recorded as a row (the sequence's
  previous row, the row it joins, the column it raises and to what) and each check on a clock as (row, column, bound);
  `_clocks` then builds every row at once, level by level, and the checks are settled on them."""
  seqs, N = u.seqs, u.launches
  S = len(seqs)
  lens = [len(s.ops) for s in seqs]
  big = max(lens) * N + 2                # positions are below it: (sequence, position) and (column, value) pack in one int
  sync = [s.sync(u.polls) for s in seqs]   # per sequence: (op indices, ops)
  envs = u.envs
  nsig = len(u.signals)
  value = list(u.sig_init)
  hv = [[v] for v in value]              # values since the last lowering write: non-decreasing,
  hw: list = [[(-1, 0, 0)] for _ in value]   # and their writes: (sequence (-1: the initial value), position, clock row)
  lw_s, lw_p = [-1] * nsig, [0] * nsig  # latest write in execution order: its sequence and position
  last_reset: list = [None] * nsig       # latest lowering write
  last_wait = [dict() for _ in range(nsig)]
  waiters: list = [[] for _ in range(nsig)]
  sub: list = [[None] * N for _ in range(S)]
  gate_blocked = [False] * S
  checks: list = []                      # (row, column, bound, violation): a violation unless clock[row][column] >= bound
  launch, at = [0] * S, [0] * S          # where each sequence stands: launch, index into its sync ops
  # clock rows; row 0 is all zeros. Row r = max(row prev[r], row src[r]) with column `raise // big` raised to
  # `raise % big`; it holds for sequence `held // big` from position `held % big` on. lvl: 1 + the levels of its inputs
  prev, src, raise_, held, lvl = (array("q", [0]) for _ in range(5))
  nrow = 0
  cur = [0] * S                          # each sequence's current row
  starts: list = []                      # the rows joining the submit at a launch start (the others: a wait's)
  ready = list(range(S - 1, -1, -1))
  started = [0] * S                      # launches whose start row each sequence has
  # polled words, per value slot: the stores in execution order, (sequence (-1: the initial value), position, its
  # clock row, the word after it); the polls blocked on the slot; the polls run, for the checks made at the end
  cv = list(u.cell_init)
  stores: list = [[(-1, 0, 0, w)] for w in cv]
  pollers: list = [[] for _ in cv]
  polls_run: list = []                   # (slot, store index the poll saw, sequence, position, mask, value)
  poll_joins: list = []                  # the rows joining a store (not a wait's: the redundant-wait statistics)

  while ready:
    i = ready.pop()
    k = launch[i]
    if k >= N: continue
    (sidx, so), L, v, c = sync[i], lens[i], cur[i], at[i]
    hsub = sub[i][k][0] if i and sub[i][k] is not None else 0   # the host position this launch's submit joined
    n = len(so)
    ib = i * big
    while k < N:   # one launch of this sequence per round, from sync op c until it blocks
      if c == 0 and i and started[i] <= k:   # (a queue blocked at its first op has its start row already)
        s_ = sub[i][k]
        if s_ is None:
          gate_blocked[i] = True
          break
        hsub, hr = s_
        prev.append(v); src.append(hr); raise_.append(hsub); held.append(ib + k * L + 1)
        x = lvl[v]; y = lvl[hr]; lvl.append((x if x > y else y) + 1)
        nrow += 1; v = nrow
        starts.append(v); started[i] = k + 1
      envk, base = envs[k], k * L
      for c in range(c, n):
        op = so[c]
        kind = op[0]
        if kind == WAIT:
          _, s, var, val = op
          need = val if var is None else envk[var] + val
          if i or need <= U32_MAX: need &= U32_MAX   # the host's wait compares 64 bits: past 32 it never passes
          if value[s] < need:
            heappush(waiters[s], (need, i))
            break
          pos = base + sidx[c] + 1
          # the latest lowering write must already be ordered before this wait (by the clock before the wait joins
          # anything): else the wait could also run, or sit blocked, while it lowers the signal. The submit orders
          # the host up to hsub
          r = last_reset[s]
          if r is not None and r[0] != i and (r[0] or r[1] > hsub): checks.append((v, r[0], r[1], ("non-monotonic", r, (i, pos), s)))
          wj, wp, hr = hw[s][bisect_left(hv[s], need)]
          if wj >= 0 and wj != i:
            prev.append(v); src.append(hr); raise_.append(wj * big + wp); held.append(ib + pos + 1)
            x = lvl[v]; y = lvl[hr]; lvl.append((x if x > y else y) + 1)
            nrow += 1; v = nrow
          last_wait[s][i] = pos
        elif kind == WRITE:
          _, s, var, val = op
          val = (val if var is None else envk[var] + val) & U32_MAX
          pos = base + sidx[c] + 1
          j = lw_s[s]
          if j >= 0 and j != i and (j or lw_p[s] > hsub): checks.append((v, j, lw_p[s], ("signal-race", (j, lw_p[s]), (i, pos), s)))
          if val < value[s]:
            for j, wp in last_wait[s].items():
              if j != i: checks.append((v, j, wp, ("non-monotonic", (i, pos), (j, wp), s)))
            hv[s], hw[s] = [val], [(i, pos, v)]
            last_reset[s] = (i, pos)
          else:
            hv[s].append(val); hw[s].append((i, pos, v))
          value[s] = val
          lw_s[s] = i; lw_p[s] = pos
          wq = waiters[s]
          while wq and wq[0][0] <= val: ready.append(heappop(wq)[1])
        elif kind == POLL:
          _, cell, var, val, mask, pin, _a = op
          need = (val if var is None else envk[var] + val) & U32_MAX
          x = u.slot(cell, pin, k + 1)
          if cv[x] & mask != need:
            pollers[x].append((i, mask, need))
            break
          pos = base + sidx[c] + 1
          # the store that satisfied it: the first of the run of stores, ending at the current one, that all leave the
          # word satisfying the poll (the checks at the end make that run the poll's window in every execution)
          h = stores[x]
          e = f = len(h) - 1
          while f and h[f - 1][3] & mask == need: f -= 1
          polls_run.append((x, e, i, pos, mask, need))
          if f >= 2 and h[f - 1][0] != i:   # the store just before the run must be ordered before the poll already
            checks.append((v, h[f - 1][0], h[f - 1][1], ("poll", (i, pos), h[f - 1][:2], nsig + x)))
          wj, wp, hr, _w = h[f]
          if wj >= 0 and wj != i:
            prev.append(v); src.append(hr); raise_.append(wj * big + wp); held.append(ib + pos + 1)
            lx = lvl[v]; y = lvl[hr]; lvl.append((lx if lx > y else y) + 1)
            nrow += 1; v = nrow
            poll_joins.append(v)
        elif kind == ACCESS:   # a store into polled words (a `write`, the host's rewrite): no signal, but polls see it
          pos = base + sidx[c] + 1
          for cell, pin, keep, bits in op[2]:
            x = u.slot(cell, pin, k + 1)
            h = stores[x]
            j, q = h[-1][0], h[-1][1]
            # stores into one word are totally ordered, or which value a poll sees depends on the interleaving
            if j >= 0 and j != i: checks.append((v, j, q, ("store-order", (j, q), (i, pos), nsig + x)))
            w = cv[x] = cv[x] & keep | bits[k]
            h.append((i, pos, v, w))
            if pollers[x]:
              woken = [p_ for p_ in pollers[x] if w & p_[1] == p_[2]]
              if woken:
                pollers[x] = [p_ for p_ in pollers[x] if w & p_[1] != p_[2]]
                ready.extend(p_[0] for p_ in woken)
        else:   # SUBMIT
          pos = base + sidx[c] + 1
          for q in op[1]:
            sub[q][k] = (pos, v)
            if gate_blocked[q]:
              gate_blocked[q] = False
              ready.append(q)
      else:
        k += 1; c = 0
        continue
      break
    launch[i], at[i], cur[i] = k, c, v

  done = [lens[i] * N if launch[i] >= N else launch[i] * lens[i] + (sync[i][0][at[i]] if at[i] or not gate_blocked[i] else 0)
          for i in range(S)]
  # a blocked wait must be ordered after the latest lowering write of its signal, or another execution runs it first
  blocked = {}
  for i in range(S):
    if launch[i] >= N: continue
    if gate_blocked[i]: blocked[i] = "gate"; continue
    op = seqs[i].ops[done[i] % lens[i]]
    if op[0] == POLL:
      # a blocked poll: no value since the stores already ordered before it satisfied it (else another execution
      # runs it): the store after the last satisfying value must be ordered before it
      blocked[i] = "poll"
      _, cell, var, val, mask, pin, _a = op
      need = u.value(op, launch[i] + 1)
      x = u.slot(cell, pin, launch[i] + 1)
      h = stores[x]
      t = next((t for t in range(len(h) - 1, -1, -1) if h[t][3] & mask == need), None)
      if t is not None and h[t + 1][0] != i:
        checks.append((cur[i], h[t + 1][0], h[t + 1][1], ("poll", (i, done[i] + 1), h[t + 1][:2], nsig + x)))
      continue
    blocked[i] = "wait"
    s = op[1]
    r = last_reset[s]
    if r is not None and r[0] != i: checks.append((cur[i], r[0], r[1], ("non-monotonic", r, (i, done[i] + 1), s)))
  # a poll that ran: the first store after it that leaves the word not satisfying it must be ordered after it (else
  # another execution undoes the value before the poll looks)
  for x, e, i, pos, mask, need in polls_run:
    h = stores[x]
    g = next((g for g in range(e + 1, len(h)) if h[g][3] & mask != need), None)
    if g is not None and h[g][0] != i: checks.append((h[g][2], i, pos, ("poll", (i, pos), h[g][:2], nsig + x)))
  pv, sr, rz, hd, lv = (np.frombuffer(x, dtype=np.int64) for x in (prev, src, raise_, held, lvl))
  cl, vl = rz // big, rz % big
  C = _clocks(S, pv, sr, cl, vl, lv)
  violations = []
  if checks:
    row, c_, bound = (np.fromiter(map(itemgetter(f), checks), dtype=np.int64, count=len(checks)) for f in range(3))
    violations = [checks[n][3] for n in np.flatnonzero(C[row, c_] < bound).tolist()]
  return _Execution(done=done, values=value + cv, blocked=blocked, polled=[i for i, b in blocked.items() if b == "poll"],
                    violations=violations, wstats=_wait_stats(u, done, starts + poll_joins, C, pv, cl, vl, hd, big),
                    vc=[C[cur[i]].tolist() for i in range(S)], C=C, held=hd)

def _wait_stats(u: Unrolled, done, not_waits, C, pv, cl, vl, hd, big) -> dict:
  """{(sequence, op index): (instances run, instances redundant)} for the wait statements with a redundant instance:
  one whose satisfying write was already ordered before it (or the initial value, or its own sequence's write)."""
  lens = [len(s.ops) for s in u.seqs]
  M = max(lens) + 1
  waits = [s.where_kind(WAIT) for s in u.seqs]
  keys = np.concatenate([w + n * M for n, w in enumerate(waits)])   # every wait statement, sorted
  # instances run: the launches whose instance lies at or before where its sequence stopped
  runs = np.concatenate([(d - w - 1) // max(L, 1) + 1 for w, d, L in zip(waits, done, lens)]).clip(0, u.launches)
  is_wait = np.ones(len(pv), dtype=bool)
  is_wait[0] = False
  is_wait[not_waits] = False   # a launch start's join, a poll's
  joins = np.flatnonzero(is_wait)
  joins = joins[C.reshape(-1)[pv[joins] * C.shape[1] + cl[joins]] < vl[joins]]   # the joins that order something new
  sq = hd[joins] // big
  idx = (hd[joins] % big - 2) % np.asarray(lens, dtype=np.int64)[sq]
  red = runs - np.bincount(np.searchsorted(keys, sq * M + idx), minlength=len(runs))
  hit = np.flatnonzero(red > 0)
  return {(i, x): (n, r) for i, x, n, r in zip((keys[hit] // M).tolist(), (keys[hit] % M).tolist(), runs[hit].tolist(),
                                                red[hit].tolist())}

def _clocks(S: int, pv, sr, cl, vl, lv) -> np.ndarray:
  """Every clock row, built level by level: a row's two inputs are on lower levels, so a level is a few numpy
  operations whatever its size. Rows are built in level order (a level is a slice) and put back in order at the end,
  unless they come in level order. int32 when positions fit (half the memory to fault in and walk)."""
  n = len(lv)
  dt = np.int32 if n == 1 or int(vl.max()) < 1 << 31 else np.int64
  if (need := n * S * np.dtype(dt).itemsize) > MAX_CLOCK_BYTES:
    raise ClockLimit(f"the program is too big for check: its happens-before clocks are {n:,} rows of {S:,} sequences "
                     f"({need / 2**30:.1f} GiB), more than the {MAX_CLOCK_BYTES / 2**30:g} GiB check allows; check fewer "
                     f"queues or launches")
  if n == 1: return np.zeros((1, S), dtype=dt)
  ordered = bool((lv[1:] >= lv[:-1]).all())
  if not ordered:
    order = np.argsort(lv, kind="stable")
    new = np.empty(n, dtype=np.int64)
    new[order] = np.arange(n)                  # a row's place in level order
    pv, sr, cl, vl, lv = new[pv[order]], new[sr[order]], cl[order], vl[order], lv[order]
  bounds = np.searchsorted(lv, np.arange(1, int(lv[-1]) + 2)).tolist()
  # each row starts as its raised entry and takes the maximum of its two inputs' rows (max is order-free: the same
  # as raising the inputs' maximum), so a level is four numpy calls
  C = np.zeros((n, S), dtype=dt)
  C.reshape(-1)[np.arange(n, dtype=np.int64) * S + cl] = vl
  mx, take = np.maximum, C.take
  for a, b in zip(bounds, bounds[1:]):
    blk = C[a:b]
    mx(blk, take(pv[a:b], axis=0), out=blk)
    mx(blk, take(sr[a:b], axis=0), out=blk)
  return C if ordered else C.take(new, axis=0)

def _accesses(u: Unrolled, x: _Execution) -> tuple[dict, dict]:
  """(races, vis) from every executed access, given the execution's clock histories."""
  seqs, N, S = u.seqs, u.launches, len(u.seqs)
  lens = [len(s.ops) for s in seqs]
  A = u.access_table()
  if not len(A.seq): return {}, _NO_VIS
  # every executed access instance: its table row, sequence, position, range instance (a rebound buffer's ranges are
  # other memory in each launch). A poll left blocked is about to run: its read takes part too
  done = np.asarray(x.done, dtype=np.int64)
  done[list(x.polled)] += 1
  done = done[A.seq]
  pinned = bool(u.pinned)
  NI = max(N, int(A.pin.max(initial=-1)) + 1)   # memory instances: a launch's, or the one `x@k` names
  rows, pos, rinst = [], [], []
  for k in range(N):
    p = A.idx + (1 + k * A.len)
    keep = p <= done
    if k in A.idle: keep &= ~A.idle[k]
    r = np.flatnonzero(keep)
    rows.append(r); pos.append(p[r])
    rinst.append(A.rid[r] + (A.nrange * np.where(A.pin[r] >= 0, A.pin[r], k)) * A.rebound[r] if k or pinned else A.rid[r])
  rows, pos, rinst = np.concatenate(rows), np.concatenate(pos), np.concatenate(rinst)
  if not len(rows): return {}, _NO_VIS
  seq, mode = A.seq[rows], A.mode[rows]
  big = int(max(lens) * N + 2)

  # clocks: C[row] for the clock holding at (seq, pos)
  C = x.C
  Cf = C.reshape(-1)
  # each sequence's rows by the position from which they hold (row 0, all zeros, before the first)
  keys = np.concatenate([np.arange(S, dtype=np.int64) * big, x.held[1:]])
  ids = np.concatenate([np.zeros(S, dtype=np.int64), np.arange(1, len(C), dtype=np.int64)])
  order = np.argsort(keys, kind="stable")
  ckeys, cids = keys[order], ids[order]
  del keys, ids, order
  def clock_row(sq, p): return cids[np.searchsorted(ckeys, sq * big + p, side="right") - 1]
  xrow = clock_row(seq, pos)

  # per (range instance, sequence): its write positions, its read positions (sorted keys, and the access of each)
  def index(sel):
    r = np.flatnonzero(sel)
    key = (rinst[r] * S + seq[r]) * big + pos[r]
    order = np.argsort(key, kind="stable")
    key = key[order]
    g = key // big
    first = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if len(g) else g
    # CSR: range instance -> the sequences accessing it
    ptr = np.searchsorted(g[first] // S, np.arange(A.nrange * NI + 1))
    return key, r[order], ptr, g[first] % S
  writes, reads = mode != R, mode != W
  wkey, wrec, wptr, wseq = index(writes)
  rkey, rrec, rptr, rseq = index(reads)
  nb_ptr, nb = A.neighbours(NI)   # range instance -> the range instances it overlaps (itself included)
  # a poll's read and a store into its word are the synchronization, never a race: polls are searched among the
  # writes that are not stores, stores among the reads that are not polls
  role = A.role[rows]
  polls, stored = role == POLL_READ, role == STORE

  def pairs(sel, ptr, sq, keyarr):
    """Each (access of `sel`, range r2 overlapping it, other sequence j accessing r2): the index into `keyarr` of j's
    first access of r2 not ordered before the access (may point past j's accesses of r2), and the segment start."""
    ri = rinst[sel]
    if nb is None: a, r2 = sel, ri   # every buffer's ranges disjoint: a range overlaps only itself
    else:
      cnt = nb_ptr[ri + 1] - nb_ptr[ri]
      a, r2 = np.repeat(sel, cnt), nb[_ranges(nb_ptr[ri], cnt)]
    cnt2 = ptr[r2 + 1] - ptr[r2]
    j = sq[_ranges(ptr[r2], cnt2)]
    if cnt2.max(initial=0) > 1: a, r2 = np.repeat(a, cnt2), np.repeat(r2, cnt2)
    else: keep = cnt2 > 0; a, r2 = a[keep], r2[keep]
    other = j != seq[a]
    a, r2, j = a[other], r2[other], j[other]
    base = (r2 * S + j) * big
    return a, j, base, np.searchsorted(keyarr, base + Cf[xrow[a] * S + j], side="right")

  races: dict = {}
  partners: dict = {}
  if polls.any():
    ww = pairs(np.flatnonzero(~polls), wptr, wseq, wkey)   # every other access against other sequences' writes
    pkey, prec, pptr, pseq = index(writes & ~stored)
    qkey, qrec, qptr, qseq = index(reads & ~polls)
    searches = ((ww, wkey, wrec), (pairs(np.flatnonzero(polls), pptr, pseq, pkey), pkey, prec),
                (pairs(np.flatnonzero(writes & ~stored), rptr, rseq, rkey), rkey, rrec),
                (pairs(np.flatnonzero(stored), qptr, qseq, qkey), qkey, qrec))
  else:
    ww = pairs(np.arange(len(rows)), wptr, wseq, wkey)   # every access against other sequences' writes
    searches = ((ww, wkey, wrec), (pairs(np.flatnonzero(writes), rptr, rseq, rkey), rkey, rrec))
  for (a, j, base, t), keyarr, rec in searches:
    ok = t < len(keyarr)
    ok[ok] = keyarr[t[ok]] < base[ok] + big
    y = rec[t[ok]]
    racy = Cf[xrow[y] * S + seq[a[ok]]] < pos[a[ok]]   # and not ordered after it either
    if racy.any(): _report(u, A, races, partners, np.flatnonzero(ok)[racy], a, j, t, keyarr, rec, rows, seq, pos, C, xrow, big)

  # a poll's read is the command processor's, not a kernel's through the near caches: no visibility either way
  return races, _visibility(u, A, ww, wkey, wrec, rows, pos, seq, reads & ~polls, rinst, xrow, Cf, clock_row, big, index, nb_ptr, nb)

def _visibility(u, A, ww, wkey, wrec, rows, pos, seq, reads, rinst, xrow, Cf, clock_row, big, index, nb_ptr, nb) -> tuple:
  """The packets' cache semantics (caches.py, docs/check.md): a compute read R on device D of bytes last written
  (before it, by happens-before) by W that did not write through D's L2 — the host, a copy queue, another device's
  queue — reads stale data when
  * (HDP) W is the host's write to D's memory and no `barrier` on a compute queue of D is ordered between W and R, or
  * (L2) an access A of a compute queue of D to R's bytes ordered before W (it may have brought the old bytes into
    D's L2) is followed by no L2 invalidation on D ordered before R. On gfx1100/gfx1201 every compute `signal`
    invalidates L2, and A is ordered before W only through a signal of A's queue after A, so this never holds there:
    it is searched on gfx942 only, where `barrier` and `timestamp` are the invalidations.
  Columns per finding (one per statement: its first launch, first access, first writer): the read's sequence, op
  index, access index, position; the writer's sequence, op index, access index, position; the kind (0 HDP, 1 L2);
  A's sequence, op index, access index, position (all -1 for HDP)."""
  seqs, N, S = u.seqs, u.launches, len(u.seqs)
  lens = [len(s.ops) for s in seqs]
  a, j, base, t = ww
  compute = np.array([s.queue is not None and s.queue.engine == "compute" for s in seqs])
  devs = [s.device for s in seqs]
  dev_id = {d: n for n, d in enumerate(dict.fromkeys(devs + u.buf_device))}
  sdev, bdev = np.array([dev_id[d] for d in devs]), np.array([dev_id[d] for d in u.buf_device])
  i = seq[a]
  t = t - 1
  # j's last write of an overlapping range ordered before the read (in the same (range, sequence) run of keys), by a
  # writer that does not write through the reading device's L2
  stale = {d.name: STALE_READS[device_arch(d)] for d in u.program.devices}   # NV devices read nothing stale (caches.py)
  ok = reads[a] & compute[i] & ((j == 0) | ~compute[j] | (sdev[j] != sdev[i])) & (t >= 0) & \
       np.array([stale.get(d, True) for d in devs], dtype=bool)[i]
  ok[ok] = wkey[t[ok]] >= base[ok]
  a, j, t, i = a[ok], j[ok], t[ok], i[ok]
  if not len(a): return _NO_VIS
  p, wrow = pos[a], wrec[t]
  q, D = pos[wrow], sdev[i]
  kind, arow = np.full(len(a), -1, dtype=np.int64), np.full(len(a), -1, dtype=np.int64)
  def positions(m, *kinds):   # sequence m's steps of these op kinds, every launch, sorted
    at = seqs[m].where_kind(*kinds).astype(np.int64)
    return (np.arange(N, dtype=np.int64)[:, None] * lens[m] + at[None, :] + 1).reshape(-1)
  def latest(m, steps, c):    # per read c: m's last step of `steps` ordered before it (0: none)
    bound = np.where(i[c] == m, p[c] - 1, Cf[xrow[a[c]] * S + m])
    if not len(steps): return np.zeros(len(c), dtype=np.int64)
    x = np.searchsorted(steps, bound, side="right") - 1
    return np.where(x >= 0, steps[np.maximum(x, 0)], 0)
  on = {d: [m for m in range(S) if compute[m] and sdev[m] == d] for d in np.unique(D).tolist()}
  # HDP: the host's writes to the reading device's memory want a `barrier` (the HDP flush) between them and the read
  hdp = np.flatnonzero((j == 0) & (bdev[A.buf[rows[a]]] == D))
  if len(hdp):
    flushed = np.zeros(len(hdp), dtype=bool)
    for d, ms in on.items():
      for m in ms:
        e = latest(m, positions(m, BARRIER), hdp)
        has = (e > 0) & (D[hdp] == d)
        flushed[has] |= Cf[clock_row(m, e[has]) * S] >= q[hdp[has]]
    kind[hdp[~flushed]] = 0
  # L2 (gfx942): an access A of a compute queue k of D, ordered before W, with no L2 invalidation after it before R
  arch = {dev_id[d.name]: device_arch(d) for d in u.program.devices if d.name in dev_id}
  l2 = [d for d in on if not SIGNAL_INVALIDATES_L2[arch[d]]]
  if l2:
    akey, arec, aptr, aseq = index(A.role[rows] != POLL_READ)
    inv = {m: np.sort(positions(m, BARRIER, NOP)) for d in l2 for m in on[d]}  # `barrier`, `timestamp`
    for d in l2:
      for k in on[d]:
        c = np.flatnonzero((D == d) & (kind < 0))
        ri = rinst[a[c]]
        if nb is None: cc, r2 = c, ri
        else:
          cnt = nb_ptr[ri + 1] - nb_ptr[ri]
          cc, r2 = np.repeat(c, cnt), nb[_ranges(nb_ptr[ri], cnt)]
        kb = (r2 * S + k) * big
        x = np.searchsorted(akey, kb + Cf[xrow[wrow[cc]] * S + k], side="right") - 1
        hit = x >= 0
        hit[hit] = akey[x[hit]] >= kb[hit]
        cc, x = cc[hit], x[hit]
        if not len(cc): continue
        apos = akey[x] % big
        last = np.lexsort((apos, cc))
        last = last[np.r_[cc[last][1:] != cc[last][:-1], True]]   # per read: k's latest such access
        cc, x, apos = cc[last], x[last], apos[last]
        covered = np.zeros(len(cc), dtype=bool)
        for m in on[d]:
          e = latest(m, inv[m], cc)
          has = e > 0
          if m == k: covered |= has & (e > apos)
          else: covered[has] |= Cf[clock_row(m, e[has]) * S + k] >= apos[has]
        kind[cc[~covered]] = 1
        arow[cc[~covered]] = arec[x[~covered]]
  hit = kind >= 0
  a, j, t, kind, arow = a[hit], j[hit], t[hit], kind[hit], arow[hit]
  # one warning per statement: its first launch, first access, first writer, that writer's latest write
  stmt = seq[a] * big + A.idx[rows[a]]
  order = np.lexsort((-wkey[t], j, A.sub[rows[a]], pos[a], stmt))
  first = order[np.r_[True, stmt[order][1:] != stmt[order][:-1]]] if len(order) else order
  ra, ry, rz = rows[a[first]], rows[wrec[t[first]]], arow[first]
  rzr = rows[np.maximum(rz, 0)]
  none = rz < 0
  cols = (A.seq[ra], A.idx[ra], A.sub[ra], pos[a[first]], j[first], A.idx[ry], A.sub[ry], pos[wrec[t[first]]], kind[first],
          np.where(none, -1, A.seq[rzr]), np.where(none, -1, A.idx[rzr]), np.where(none, -1, A.sub[rzr]),
          np.where(none, -1, pos[np.maximum(rz, 0)]))
  return VisColumns(*(x.tolist() for x in cols))

def _ranges(starts, counts):
  """The concatenation of arange(s, s + c) for each (s, c)."""
  counts = np.asarray(counts, dtype=np.int64)
  total = int(counts.sum())
  if not total: return np.zeros(0, dtype=np.int64)
  if counts.max() == 1: return np.asarray(starts, dtype=np.int64)[counts > 0]
  ends = np.cumsum(counts)
  out = np.ones(total, dtype=np.int64)
  nz = counts > 0
  st, en, ct = np.asarray(starts, dtype=np.int64)[nz], ends[nz], counts[nz]
  out[0] = st[0]
  out[(en - ct)[1:]] = st[1:] - (st[:-1] + ct[:-1] - 1)
  return np.cumsum(out)

def _report(u, A, races, partners, hit, a, j, t, keyarr, rec, rows, seq, pos, C, xrow, big):
  """Every racing pair from the (access, sequence) pairs found racy: j's accesses from the first unordered one on,
  while they stay unordered (clocks grow, so the rest are ordered after)."""
  seqs, lens = u.seqs, [len(s.ops) for s in u.seqs]
  def at(r):   # the access of a table row (a poll's: its read of its word)
    op = seqs[A.seq[r]].ops[A.idx[r]]
    return op[6] if op[0] == POLL else op[1][A.sub[r]]
  for n in sorted(hit.tolist(), key=lambda n: (int(pos[a[n]]), int(seq[a[n]]))):
    x, jj = int(a[n]), int(j[n])
    i, p = int(seq[x]), int(pos[x])
    ai = at(int(rows[x]))
    me = (i, (p - 1) % lens[i], ai[0])
    tt, seg, c = int(t[n]), int(keyarr[t[n]]) // big, 0
    while tt < len(keyarr) and int(keyarr[tt]) // big == seg and c < SCAN_CAP and partners.get(me, 0) < RACE_CAP:
      y = int(rec[tt])
      if C[xrow[y], i] >= p: break
      _race(races, partners, lens, jj, int(pos[y]), at(int(rows[y])), i, p, ai)
      tt += 1; c += 1

def _race(races, partners, lens, j, q, aj, i, p, ai):
  kj, ki = (q - 1) // lens[j] + 1, (p - 1) // lens[i] + 1
  a, b = (j, (q - 1) % lens[j]), (i, (p - 1) % lens[i])
  key = (min(a, b), max(a, b), aj[0])
  rank = (max(kj, ki),) + ((kj, ki) if a <= b else (ki, kj))  # the same instance the explorer keeps
  first, second = ((j, q, aj), (i, p, ai)) if (j, q) <= (i, p) else ((i, p, ai), (j, q, aj))
  old = races.get(key)
  if old is None:
    races[key] = (rank, first, second)
    for x in (a, b): partners[x + (aj[0],)] = partners.get(x + (aj[0],), 0) + 1
  elif rank < old[0]: races[key] = (rank, first, second)
