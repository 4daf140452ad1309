"""Happens-before over an unrolled program: one execution of its synchronization (here), then every access at once
(accesses.py).

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

Clocks (clocks.py): `C_i(p)[j]` = the last position of sequence j known to happen before sequence i's step p. A wait
joins the clock of the write that satisfies it (the first write reaching the value since the last lowering write); a
queue's first step of a launch joins the host's clock at the submit. Neither execution computes clocks as it goes:
each join is a row of `ClockRows` (the two rows it joins, the entry it raises), each check a clock must pass is
(row, column, bound), and the rows are built afterwards in numpy, level by level.
"""
from __future__ import annotations
import functools
from array import array
from bisect import bisect_left
from heapq import heappush, heappop
from operator import itemgetter
from typing import Optional, Sequence
import attrs
import numpy as np
from ..ir import U32_MAX
from .unroll import Unrolled, WAIT, WRITE, ACCESS, SUBMIT, POLL, INT64_SAFE
from .clocks import ClockRows, Clocks, ClockLimit, MAX_CLOCK_BYTES
from .accesses import accesses, VisColumns
from .findings import RacePair

__all__ = ["Trace", "Execution", "happens_before", "execute_direct", "execute_loop", "ClockLimit", "MAX_CLOCK_BYTES",
           "VisColumns"]

I64 = np.int64
NEVER = 1 << 62   # a position no sequence reaches

@attrs.define
class Execution:
  """The one execution of the synchronization. Positions are 1-based; a step is (seq, pos)."""
  done: list[int]                 # steps each sequence ran
  values: list[int]               # the final value of each signal, then (the loop) of each polled word's slot
  blocked: dict[int, str]         # each sequence left blocked: at a "wait", a "poll", or a "gate" (not submitted yet)
  polled: Sequence[int]           # the sequences blocked at a poll (its read is about to run: an access)
  violations: list[tuple]         # (code, step, step, signal or slot): why the program is outside the exact fragment
  wstats: dict[tuple[int, int], tuple[int, int]]   # see _wait_stats
  vc: list[list[int]]             # each sequence's clock where it stopped
  clock: np.ndarray               # every clock row (ClockRows.build)
  held: np.ndarray                # per row: `sequence * big + position` from which it holds

@attrs.define(slots=False)   # (slots=False: `vis` is a cached property)
class Trace:
  """What the happens-before pass found: the execution's outcome, the races and the `visibility` findings."""
  done: list[int]
  values: list[int]
  blocked: dict[int, str]
  violations: list[tuple]
  wstats: dict[tuple[int, int], tuple[int, int]]   # (seq, op index) -> (instances run, redundant) of the waits with a redundant one
  vc: list[list[int]]
  races: dict[tuple, RacePair]    # (statement, statement, buffer) -> its racing accesses
  vis_found: VisColumns
  ops: list[list[tuple]]          # each sequence's ops (what `vis` names the accesses by)
  clocks: Optional[Clocks] = None   # the execution's clocks (check/frontier.py reads what is ordered before what)

  @property
  def exact(self) -> bool: return not self.violations

  @functools.cached_property
  def vis(self) -> dict[tuple[int, int], tuple]:
    """{(seq, op index): (seq, pos, access, writer seq, its pos, its access, kind, A's seq, its pos, its access)}: one
    visibility finding per statement, from `vis_found` (kind 0: the host's write with no HDP flush after it; 1: a
    stale L2 line A's access may have left; A None for kind 0)."""
    ops = self.ops
    def acc(i, x, n): return ops[i][x][1][n] if i >= 0 else None
    return {(i, x): (i, pp, acc(i, x, n), j, qq, acc(j, y, o), kd, k if k >= 0 else None, kq if k >= 0 else None, acc(k, z, r))
            for i, x, n, pp, j, y, o, qq, kd, k, z, r, kq in self.vis_found.rows()}

def happens_before(u: Unrolled) -> Trace:
  x = execute_direct(u) or execute_loop(u)
  clocks = Clocks.of(x.clock, x.held, _big(u))
  races, vis = accesses(u, x.done, x.polled, clocks)
  return Trace(x.done, x.values, x.blocked, x.violations, x.wstats, x.vc, races, vis, [s.ops for s in u.seqs], clocks)

def _big(u: Unrolled) -> int:
  """Above every position: (sequence, position) and (column, value) pack into one int as `a * big + b`."""
  return max(len(s.ops) for s in u.seqs) * u.launches + 2

# ---- the direct execution

@attrs.frozen
class _Sync:
  """Every wait (or every write) instance as columns, sequence by sequence, launch by launch, position by position."""
  seq: np.ndarray
  pos: np.ndarray
  sig: np.ndarray
  val: np.ndarray   # the value it waits for (writes), with each launch's vars
  key: np.ndarray   # its place in the guessed order among its signal's: (launch * S + sequence) * big + position

@attrs.frozen
class _Guess:
  """Every signal's writes in the guessed order, each signal's initial value first (a write of sequence -1)."""
  seq: np.ndarray
  pos: np.ndarray
  sig: np.ndarray
  val: np.ndarray
  init: np.ndarray        # the initial value's entry
  lowering: np.ndarray    # a write below the value before it
  seg: np.ndarray         # its segment: an initial value or a lowering write, and the writes after it up to the next
  seg_start: np.ndarray   # each segment's first entry

@attrs.frozen
class _Waits:
  """Every wait instance, the segment it falls in and the write satisfying it."""
  seq: np.ndarray
  pos: np.ndarray
  sig: np.ndarray
  seg: np.ndarray      # the segment of the write just before it in the guessed order
  writer: np.ndarray   # the satisfying write's sequence (-1: the initial value; itself when none: blocked for ever)
  wpos: np.ndarray     # and its position (NEVER when none)
  joins: np.ndarray    # it joins another sequence's clock, or waits on its own later write: an event

@attrs.frozen
class _Events:
  """Each sequence's events in position order (a wait joining another sequence's write, a queue's launch start), as
  flat columns, sequence by sequence."""
  seq: np.ndarray
  pos: np.ndarray        # where it is
  need: np.ndarray       # the sequence it needs (the writer; the host for a launch start) ...
  need_pos: np.ndarray   # ... and the position that one must have reached (NEVER: waiting on itself, for ever)
  held: np.ndarray       # the position from which its row holds: a launch start's own, a wait's next
  src: np.ndarray        # 1 + the event of `need` whose row holds at need_pos (0: none, row 0)
  first: np.ndarray      # each sequence's first event, 1-based (S + 1 entries: the last is one past the end)

def execute_direct(u: Unrolled) -> Optional[Execution]:
  """The execution without running the writes, for the programs where a guess of each signal's write order holds:
  launch by launch, sequence by sequence (the host first), position by position. The guess fixes the segments between
  lowering writes, which segment each wait falls in (the writes before it in the same order), and so the write that
  satisfies it (the first in its segment reaching its value: a binary search). What is left to run is the order: each
  sequence's joins as events, a sequence running until an event whose write (or submit) its writer has not reached.
  Then every check `execute_loop` makes is made on the clocks, plus that the guess was the execution's order; if one
  fails, None (the loop decides)."""
  if any(s.gate < 0 for s in u.seqs[1:]) or u.polls: return None   # (polls: the loop)
  S, big, lens = len(u.seqs), _big(u), [len(s.ops) for s in u.seqs]
  KS = u.launches * S * big   # the guessed order's keys within one signal
  if (inst := _instances(u, big, KS)) is None: return None
  # (each step's inputs are dropped as soon as they are used: a big program's time is largely its page faults, and
  # freed arrays are memory the next ones reuse)
  waits, writes = inst
  del inst
  g, key = _guess(u, writes, KS)
  del writes
  w = _satisfy(g, key, waits, KS)
  del waits, key
  ev = _events(u, w, big)
  ran_ev, done, levels = _run(ev, lens, u.launches)
  rows, starts, cur = _rows(ev, ran_ev, levels, big)
  del levels
  C = rows.build(S)
  ran = _guess_held(g, w, Clocks.of(C, rows.held, big), np.asarray(done, dtype=I64))
  if ran is None: return None
  vc = [C[cur[i]].tolist() for i in range(S)]
  if (blocked := _blocked(g, ran, w, ev, ran_ev, vc)) is None: return None
  # final values: each signal's last write run
  values = list(u.sig_init)
  fin = np.flatnonzero(ran & ~g.init & np.r_[~ran[1:] | g.init[1:], True])
  for s, val in zip(g.sig[fin].tolist(), g.val[fin].tolist()): values[s] = val
  return Execution(done, values, blocked, (), [], _wait_stats(u, done, starts, C, rows), vc, C, rows.held)

def _instances(u: Unrolled, big: int, KS: int) -> Optional[tuple[_Sync, _Sync]]:
  """(every wait instance, every write instance); None when a value or a key does not fit int64 arithmetic."""
  cols, N, S = u.sync_columns(), u.launches, len(u.seqs)
  if cols is None or len(u.signals) * KS >= INT64_SAFE: return None
  E, cols = cols
  inst: dict[int, list[tuple]] = {WAIT: [], WRITE: []}
  for i, (at, kind, sig, var, off) in enumerate(cols):
    s = u.seqs[i]
    L = len(s.ops)
    for kd in (WAIT, WRITE):
      m = kind == kd
      if not m.any(): continue
      a0, sg0, vr0, of0 = at[m], sig[m], var[m], off[m]
      for k in range(N):
        a, sg, vr, of = a0, sg0, vr0, of0
        if s.partial:   # (a `launches` clause: the ops absent from launch k + 1 are not instances)
          if k + 1 in s.off: continue
          if s.op_off:
            keep = np.fromiter((k + 1 not in s.op_off.get(x, ()) for x in a0.tolist()), dtype=bool, count=len(a0))
            a, sg, vr, of = a0[keep], sg0[keep], vr0[keep], of0[keep]
        pos = a + (k * L + 1)
        v = E[k][vr] + of
        # the host's waits compare 64 bits (a value past 32 bits never passes), the packets 32
        v = np.where(v > U32_MAX, v, v & U32_MAX) if i == 0 and kd == WAIT else v & U32_MAX
        inst[kd].append((np.full(len(a), i, dtype=I64), pos, sg, v, (k * S + i) * big + pos))
  def cat(xs): return _Sync(*(np.concatenate(c) for c in zip(*xs))) if xs else _Sync(*(np.zeros(0, dtype=I64) for _ in range(5)))
  return cat(inst[WAIT]), cat(inst[WRITE])

def _guess(u: Unrolled, w: _Sync, KS: int) -> tuple[_Guess, np.ndarray]:
  """The writes, and each signal's initial value, in the guessed order, split into segments at lowering writes; and
  their keys in that order (sig * KS + `_Sync.key`: sorted)."""
  nsig = len(u.signals)
  ws = np.concatenate([w.sig, np.arange(nsig, dtype=I64)])
  wq, wp = np.concatenate([w.seq, np.full(nsig, -1, dtype=I64)]), np.concatenate([w.pos, np.zeros(nsig, dtype=I64)])
  wv = np.concatenate([w.val, np.asarray(u.sig_init, dtype=I64)])
  full = ws * KS + np.concatenate([w.key, np.zeros(nsig, dtype=I64)])
  order = np.argsort(full, kind="stable")
  wq, wp, ws, wv, full = wq[order], wp[order], ws[order], wv[order], full[order]
  init = wq < 0
  lowering = np.r_[False, wv[1:] < wv[:-1]] & ~init
  return _Guess(wq, wp, ws, wv, init, lowering, np.cumsum(init | lowering) - 1, np.flatnonzero(init | lowering)), full

def _satisfy(g: _Guess, key: np.ndarray, a: _Sync, KS: int) -> _Waits:
  """Each wait's segment (that of the write just before it in the guessed order: `key`, the writes' keys), and the
  write satisfying it: the first of its segment reaching its value (values never fall within a segment)."""
  ag = g.seg[np.searchsorted(key, a.sig * KS + a.key, side="right") - 1]
  segkey = (g.seg << 32) | g.val
  t = np.searchsorted(segkey, (ag << 32) | a.val, side="left")
  ok = t < len(segkey)
  ok[ok] = g.seg[t[ok]] == ag[ok]
  t = np.where(ok, t, 0)
  j = np.where(ok, g.seq[t], a.seq)      # no write reaches its value: blocked for ever (on itself)
  q = np.where(ok, g.pos[t], NEVER)
  # the initial value, or its own earlier write: no join, no wait
  return _Waits(a.seq, a.pos, a.sig, ag, j, q, (j >= 0) & ((j != a.seq) | (q > a.pos)))

def _events(u: Unrolled, w: _Waits, big: int) -> _Events:
  """Each sequence's events: its waits that join, and (queues) each launch's start, which needs the host's submit."""
  seqs, N, S = u.seqs, u.launches, len(u.seqs)
  ev = []
  m = np.flatnonzero(w.joins)                    # grouped by sequence (the instances were made sequence by sequence)
  cut = np.searchsorted(w.seq[m], np.arange(S + 1)).tolist()
  for i in range(S):
    mi = m[cut[i]:cut[i + 1]]
    P, J, Q = w.pos[mi], w.writer[mi], w.wpos[mi]
    if i:
      ks = np.arange(N, dtype=I64)
      if seqs[i].partial: ks = np.asarray([k for k in range(N) if k + 1 not in seqs[i].off], dtype=I64)   # (its launches only)
      st = ks * len(seqs[i].ops) + 1
      gate = np.asarray([u.gate_pos(i, k + 1) for k in ks.tolist()], dtype=I64) if seqs[i].gates is not None else \
        ks * len(seqs[0].ops) + seqs[i].gate + 1
      P, J, Q = np.concatenate([st, P]), np.concatenate([np.zeros(len(ks), dtype=I64), J]), np.concatenate([gate, Q])
      H = np.concatenate([st, w.pos[mi] + 1])
      o = np.argsort(2 * P + (H > P), kind="stable")
      P, J, Q, H = P[o], J[o], Q[o], H[o]
    else: H = P + 1
    ev.append((P, J, Q, H))
  cnt = np.asarray([len(x[0]) for x in ev], dtype=I64)
  P, J, Q, H = (np.concatenate([x[f] for x in ev]) for f in range(4))
  sq = np.repeat(np.arange(S, dtype=I64), cnt)
  y = np.searchsorted(sq * big + H, J * big + Q, side="right") - 1   # J's last event holding by Q
  G = np.where((y >= 0) & (sq[np.maximum(y, 0)] == J), y + 1, 0)
  return _Events(sq, P, J, np.where(J == sq, NEVER, Q), H, G, np.r_[0, np.cumsum(cnt)] + 1)

def _run(ev: _Events, lens: list[int], N: int) -> tuple[list[int], list[int], list[int]]:
  """Runs the order: a sequence goes on until an event whose needed position its sequence has not reached. Only each
  join's level is computed (one more than its inputs'), in one flat list (index 0: row 0's level, 0; event f at
  f + 1). Returns (events run, steps done: per sequence; the levels)."""
  S = len(lens)
  Pl, Jl, Ql, Gl = (np.r_[0, c].tolist() for c in (ev.pos, ev.need, ev.need_pos, ev.src))
  L = [0] * (len(ev.pos) + 1)
  at_ev, ends, xs = ev.first[:-1].tolist(), ev.first[1:].tolist(), [0] * S
  done = [0] * S
  waiters: list[list[tuple[int, int]]] = [[] for _ in range(S)]   # heaps of (position needed, sequence)
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
  return [k - f for k, f in zip(at_ev, ev.first[:-1].tolist())], done, L

def _rows(ev: _Events, ran_ev: list[int], levels: list[int], big: int) -> tuple[ClockRows, list[int], list[int]]:
  """The clock rows of the events run (row 0: all zeros), numbered in level order (`ClockRows.build` takes them as they
  are); the rows joining a launch start; each sequence's last row."""
  S, sq = len(ran_ev), ev.seq
  run = np.arange(len(ev.pos)) - (ev.first - 1)[sq] < np.asarray(ran_ev, dtype=I64)[sq]
  newid = np.cumsum(run)                                      # row id of each event run
  cnt = np.asarray(ran_ev, dtype=I64)
  first = np.r_[0, np.cumsum(cnt)] + 1
  lv = np.r_[0, np.asarray(levels[1:], dtype=I64)[run]]
  y = np.where(ev.src > 0, ev.src - 1, 0)
  sr = np.r_[0, np.where(ev.src > 0, newid[y] * run[y], 0)[run]]
  P, J, Q, H, sq = ev.pos[run], ev.need[run], ev.need_pos[run], ev.held[run], sq[run]
  pv = np.r_[0, np.arange(len(P), dtype=I64)]                # the previous row of its sequence, or row 0
  pv[first[:-1][cnt > 0]] = 0
  rows = ClockRows(pv, sr, np.r_[0, J], np.r_[0, Q], lv, np.r_[0, sq * big + H])
  order = np.argsort(lv, kind="stable")
  new = np.empty(len(order), dtype=I64)
  new[order] = np.arange(len(order))
  cur = [int(new[first[i] + cnt[i] - 1]) if cnt[i] else 0 for i in range(S)]
  return rows.renumbered(new, order), new[np.flatnonzero(H == P) + 1].tolist(), cur

def _guess_held(g: _Guess, w: _Waits, clocks: Clocks, done: np.ndarray) -> Optional[np.ndarray]:
  """Which writes ran, if the execution's order was the guessed one and inside the fragment: the writes run are a
  prefix of each signal's guessed order, consecutive ones by two sequences are ordered (else signal-race), each wait
  run is ordered after its segment's lowering write (else non-monotonic) and before the next one's. Else None."""
  S, wq, wp = clocks.S, g.seq, g.pos
  ran = g.init | (wp <= done[np.maximum(wq, 0)])
  if (~ran[:-1] & ran[1:] & ~g.init[1:]).any(): return None
  c = np.flatnonzero(ran[1:] & ~g.init[1:] & (wq[:-1] >= 0) & (wq[1:] != wq[:-1])) + 1
  if len(c) and (clocks.entry(wq[c], wp[c], wq[c - 1]) < wp[c - 1]).any(): return None
  aran = w.pos <= done[w.seq]
  r0 = g.seg_start[w.seg]
  c = np.flatnonzero(aran & ~g.init[r0] & (wq[r0] != w.seq))
  if len(c) and (clocks.entry(w.seq[c], w.pos[c], wq[r0[c]]) < wp[r0[c]]).any(): return None
  low = np.flatnonzero(g.lowering & ran)
  if not len(low): return ran
  # per lowering write and other sequence: that sequence's last wait run in the segment before it must be ordered
  # before the lowering write
  if len(low) * S > 1 << 22: return None
  x, nseg = np.flatnonzero(aran), g.seg[-1] + 1
  gk = (w.sig[x] * S + w.seq[x]) * nseg + w.seg[x]
  o = np.lexsort((w.pos[x], gk))
  gk, x = gk[o], x[o]
  lw = np.repeat(low, S)
  js = np.tile(np.arange(S, dtype=I64), len(low))
  want = (g.sig[lw] * S + js) * nseg + g.seg[lw]
  y = np.searchsorted(gk, want, side="left") - 1
  hit = (y >= 0) & (js != wq[lw])
  hit[hit] = gk[y[hit]] // nseg == want[hit] // nseg
  lw, js, y = lw[hit], js[hit], x[y[hit]]
  return None if len(lw) and (clocks.entry(wq[lw], wp[lw], js) < w.pos[y]).any() else ran

def _blocked(g: _Guess, ran: np.ndarray, w: _Waits, ev: _Events, ran_ev: list[int], vc: list[list[int]]) -> Optional[dict[int, str]]:
  """Where each sequence left blocked stopped ("gate" or "wait"); None when a wait left blocked is not in the last
  segment its signal reached, or not ordered after that segment's lowering write (the guess, or the fragment, failed)."""
  blocked: dict[int, str] = {}
  for i, e in enumerate(ran_ev):
    f = int(ev.first[i]) - 1 + e
    if f >= int(ev.first[i + 1]) - 1: continue
    if ev.held[f] == ev.pos[f]:
      blocked[i] = "gate"
      continue
    blocked[i] = "wait"
    lo, hi = np.searchsorted(w.seq, [i, i + 1])   # its waits, by position
    x = lo + int(np.searchsorted(w.pos[lo:hi], ev.pos[f]))
    s = w.sig[x]
    lo, hi = np.searchsorted(g.sig, [s, s + 1])
    last = lo + np.flatnonzero((g.init | g.lowering)[lo:hi] & ran[lo:hi])[-1]
    if last != g.seg_start[w.seg[x]]: return None
    if not g.init[last] and g.seq[last] != i and vc[i][g.seq[last]] < g.pos[last]: return None
  return blocked

# ---- the general execution

def execute_loop(u: Unrolled) -> Execution:
  """Runs the synchronization. Clocks are not computed as it goes: each join is recorded as a row (the sequence's
  previous row, the row it joins, the column it raises and to what) and each check on a clock as (row, column, bound);
  `ClockRows.build` then builds every row at once, level by level, and the checks are settled on them."""
  x = _Loop(u)
  x.run()
  return x.finish()

class _Loop:
  """The state of `execute_loop`: per signal, per polled word and per sequence, and the clock rows recorded so far."""
  # (slots: every op reads a few of these, and a slot is faster to get at than an entry of the instance's dict)
  __slots__ = ("u", "N", "S", "envs", "lens", "big", "sync", "syncs", "nsig", "value", "hv", "hw", "lw_s", "lw_p", "last_reset",
               "last_wait", "waiters", "sub", "gate_blocked", "launch", "at", "cur", "started", "ready", "checks", "prev",
               "src", "raise_", "held", "lvl", "starts", "cv", "stores", "pollers", "polls_run", "poll_joins")
  def __init__(self, u: Unrolled):
    seqs, N, S = u.seqs, u.launches, len(u.seqs)
    self.u, self.N, self.S, self.envs = u, N, S, u.envs
    self.lens = [len(s.ops) for s in seqs]
    self.big = _big(u)
    self.sync = [s.sync(u.polls) for s in seqs]   # per sequence: (op indices, ops) it stops at
    # ... per launch, for a sequence with ops absent from some launches (`launches` clauses); else None
    self.syncs = [[s.sync(u.polls, k + 1) for k in range(N)] if s.partial else None for s in seqs]
    self.nsig = nsig = len(u.signals)
    # per signal: its value; the values since the last lowering write (non-decreasing) and their writes (sequence,
    # -1: the initial value; position; clock row); its latest write (sequence, position); its latest lowering write;
    # each sequence's latest wait on it; the sequences waiting for a value (a heap of (value, sequence))
    self.value = list(u.sig_init)
    self.hv = [[v] for v in self.value]
    self.hw: list[list[tuple[int, int, int]]] = [[(-1, 0, 0)] for _ in self.value]
    self.lw_s, self.lw_p = [-1] * nsig, [0] * nsig
    self.last_reset: list[Optional[tuple[int, int]]] = [None] * nsig
    self.last_wait: list[dict[int, int]] = [{} for _ in range(nsig)]
    self.waiters: list[list[tuple[int, int]]] = [[] for _ in range(nsig)]
    # per sequence: each launch's submit (host position, host row); blocked at a launch not submitted; where it
    # stands (launch, index into its sync ops, current row); launches whose start row it has
    self.sub: list[list[Optional[tuple[int, int]]]] = [[None] * N for _ in range(S)]
    self.gate_blocked = [False] * S
    self.launch, self.at, self.cur, self.started = [0] * S, [0] * S, [0] * S, [0] * S
    self.ready = list(range(S - 1, -1, -1))
    # (row, column, bound, violation): a violation unless clock[row][column] >= bound
    self.checks: list[tuple[int, int, int, tuple]] = []
    # the clock rows (row 0 all zeros), ClockRows' columns with (column, value) packed as column * big + value
    self.prev, self.src, self.raise_, self.held, self.lvl = (array("q", [0]) for _ in range(5))
    self.starts: list[int] = []        # the rows joining the submit at a launch start (the others: a wait's)
    # polled words, per value slot: the stores in execution order, (sequence (-1: the initial value), position, its
    # clock row, the word after it); the polls blocked on the slot; the polls run, for the checks made at the end
    self.cv = list(u.cell_init)
    self.stores: list[list[tuple[int, int, int, int]]] = [[(-1, 0, 0, w)] for w in self.cv]
    self.pollers: list[list[tuple[int, int, int]]] = [[] for _ in self.cv]
    self.polls_run: list[tuple] = []   # (slot, store index the poll saw, sequence, position, mask, value)
    self.poll_joins: list[int] = []    # the rows joining a store (not a wait's: the redundant-wait statistics)

  def run(self) -> None:
    """Every sequence runs until it blocks; a write (store, submit) wakes the sequences it lets go on. Waits and writes,
    nearly every sync op, run here (this loop is the hot path of the programs it takes: no call per op), the others
    through the table `step`."""
    step = {ACCESS: self._store, SUBMIT: self._submit, POLL: self._poll}   # (an ACCESS among the sync ops stores into polled words)
    sync, lens, N, sub, ready, envs, big = self.sync, self.lens, self.N, self.sub, self.ready, self.envs, self.big
    value, hv, hw, last_reset, last_wait, checks = self.value, self.hv, self.hw, self.last_reset, self.last_wait, self.checks
    lw_s, lw_p, waiters, prev, src, raise_, held, lvl = (self.lw_s, self.lw_p, self.waiters, self.prev, self.src, self.raise_,
                                                         self.held, self.lvl)
    while ready:
      i = ready.pop()
      k = self.launch[i]
      if k >= N: continue
      (sidx, so), L, v, c = sync[i], lens[i], self.cur[i], self.at[i]
      hsub = s0[0] if i and (s0 := sub[i][k]) is not None else 0   # the host position this launch's submit joined
      n, ib, per, off = len(so), i * big, self.syncs[i], self.u.seqs[i].off
      while k < N:   # one launch of this sequence per round, from sync op c until it blocks
        if per is not None:   # (what is absent from this launch is not among its sync ops)
          sidx, so = per[k]
          n = len(so)
        if c == 0 and i and self.started[i] <= k and k + 1 not in off:   # (a queue blocked at its first op has its start row already)
          if (st := self._start(i, k, v)) is None: break
          v, hsub = st
        base, envk = k * L + 1, envs[k]
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
            pos = base + sidx[c]
            # the latest lowering write must already be ordered before this wait (by the clock before the wait joins
            # anything): else the wait could also run, or sit blocked, while it lowers the signal. The submit orders
            # the host up to hsub
            r = last_reset[s]
            if r is not None and r[0] != i and (r[0] or r[1] > hsub): checks.append((v, r[0], r[1], ("non-monotonic", r, (i, pos), s)))
            wj, wp, hr = hw[s][bisect_left(hv[s], need)]
            if wj >= 0 and wj != i:   # a join (`_join`, inline)
              prev.append(v)
              src.append(hr)
              raise_.append(wj * big + wp)
              held.append(ib + pos + 1)
              x, y = lvl[v], lvl[hr]
              lvl.append((x if x > y else y) + 1)
              v = len(lvl) - 1
            last_wait[s][i] = pos
          elif kind == WRITE:
            _, s, var, val = op
            val = (val if var is None else envk[var] + val) & U32_MAX
            pos, j, jp = base + sidx[c], lw_s[s], lw_p[s]
            # writes of a signal are totally ordered; a lowering one after every other use of the signal
            if j >= 0 and j != i and (j or jp > hsub): checks.append((v, j, jp, ("signal-race", (j, jp), (i, pos), s)))
            if val < value[s]:
              for j, wp in last_wait[s].items():
                if j != i: checks.append((v, j, wp, ("non-monotonic", (i, pos), (j, wp), s)))
              hv[s], hw[s] = [val], [(i, pos, v)]
              last_reset[s] = (i, pos)
            else:
              hv[s].append(val)
              hw[s].append((i, pos, v))
            value[s], lw_s[s], lw_p[s] = val, i, pos
            wq = waiters[s]
            while wq and wq[0][0] <= val: ready.append(heappop(wq)[1])
          elif (r := step[kind](i, op, k, base + sidx[c], v, hsub)) < 0: break
          else: v = r
        else:
          k += 1
          c = 0
          continue
        break
      self.launch[i], self.at[i], self.cur[i] = k, c, v

  def _join(self, v: int, src: int, raised: int, held: int) -> int:
    """A new row: row v joined with row src, column and value `raised` (packed), holding from `held` (packed)."""
    self.prev.append(v)
    self.src.append(src)
    self.raise_.append(raised)
    self.held.append(held)
    x, y = self.lvl[v], self.lvl[src]
    self.lvl.append((x if x > y else y) + 1)
    return len(self.lvl) - 1

  def _start(self, i: int, k: int, v: int) -> Optional[tuple[int, int]]:
    """Queue i starts launch k: it joins the host's row at the submit. (its new row, the submit's position); None
    while the host has not submitted it."""
    if (s := self.sub[i][k]) is None:
      self.gate_blocked[i] = True
      return None
    hsub, hr = s
    v = self._join(v, hr, hsub, i * self.big + k * self.lens[i] + 1)
    self.starts.append(v)
    self.started[i] = k + 1
    return v, hsub

  # each step of the other sync ops: sequence i's op at position pos of launch k (0-based), its current row v and the
  # host position its launch's submit joined; returns its row after the op, or -1 when it blocks there

  def _poll(self, i: int, op: tuple, k: int, pos: int, v: int, hsub: int) -> int:
    _, cell, var, val, mask, pin, _a = op
    need = (val if var is None else self.envs[k][var] + val) & U32_MAX
    x = self.u.slot(cell, pin, k + 1)
    if self.cv[x] & mask != need:
      self.pollers[x].append((i, mask, need))
      return -1
    # the store that satisfied it: the first of the run of stores, ending at the current one, that all leave the word
    # satisfying the poll (the checks at the end make that run the poll's window in every execution)
    h = self.stores[x]
    e = f = len(h) - 1
    while f and h[f - 1][3] & mask == need: f -= 1
    self.polls_run.append((x, e, i, pos, mask, need))
    if f >= 2 and h[f - 1][0] != i:   # the store just before the run must be ordered before the poll already
      self.checks.append((v, h[f - 1][0], h[f - 1][1], ("poll", (i, pos), h[f - 1][:2], self.nsig + x)))
    wj, wp, hr, _w = h[f]
    if wj >= 0 and wj != i:
      v = self._join(v, hr, wj * self.big + wp, i * self.big + pos + 1)
      self.poll_joins.append(v)
    return v

  def _store(self, i: int, op: tuple, k: int, pos: int, v: int, hsub: int) -> int:
    """A store into polled words (a `write`, the host's rewrite): no signal, but polls see it."""
    for cell, pin, keep, bits in op[2]:
      x = self.u.slot(cell, pin, k + 1)
      h = self.stores[x]
      j, q = h[-1][0], h[-1][1]
      # stores into one word are totally ordered, or which value a poll sees depends on the interleaving
      if j >= 0 and j != i: self.checks.append((v, j, q, ("store-order", (j, q), (i, pos), self.nsig + x)))
      w = self.cv[x] = self.cv[x] & keep | bits[k]
      h.append((i, pos, v, w))
      if self.pollers[x]:
        woken = [p for p in self.pollers[x] if w & p[1] == p[2]]
        if woken:
          self.pollers[x] = [p for p in self.pollers[x] if w & p[1] != p[2]]
          self.ready.extend(p[0] for p in woken)
    return v

  def _submit(self, i: int, op: tuple, k: int, pos: int, v: int, hsub: int) -> int:
    seqs = self.u.seqs
    for q in op[1]:
      if seqs[q].gates is not None and self.u.gate_pos(q, k + 1) != pos: continue   # (another submit hands it over in launch k)
      self.sub[q][k] = (pos, v)
      if self.gate_blocked[q]:
        self.gate_blocked[q] = False
        self.ready.append(q)
    return v

  def finish(self) -> Execution:
    """The outcome: where each sequence stopped, the checks the end adds, the clock rows, and the violations."""
    S, N, lens, big = self.S, self.N, self.lens, self.big
    def stops(i: int) -> list:
      per = self.syncs[i]
      return self.sync[i][0] if per is None else per[self.launch[i]][0]
    done = [lens[i] * N if self.launch[i] >= N else
            self.launch[i] * lens[i] + (stops(i)[self.at[i]] if self.at[i] or not self.gate_blocked[i] else 0)
            for i in range(S)]
    blocked = self._blocked(done)
    self._poll_checks()
    rz = np.frombuffer(self.raise_, dtype=I64)
    prev, src, level, held = (np.frombuffer(x, dtype=I64) for x in (self.prev, self.src, self.lvl, self.held))
    rows = ClockRows(prev, src, rz // big, rz % big, level, held)
    C = rows.build(S)
    violations = []
    if self.checks:
      row, col, bound = (np.fromiter(map(itemgetter(f), self.checks), dtype=I64, count=len(self.checks)) for f in range(3))
      violations = [self.checks[n][3] for n in np.flatnonzero(C[row, col] < bound).tolist()]
    return Execution(done, self.value + self.cv, blocked, [i for i, b in blocked.items() if b == "poll"], violations,
                     _wait_stats(self.u, done, self.starts + self.poll_joins, C, rows), [C[c].tolist() for c in self.cur],
                     C, rows.held)

  def _blocked(self, done: list[int]) -> dict[int, str]:
    """Where each sequence left blocked stopped; and the checks that another execution does not run it first: a
    blocked wait must be ordered after the latest lowering write of its signal; a blocked poll, after the store that
    ended the last value satisfying it."""
    u, blocked = self.u, {}
    for i in range(self.S):
      if self.launch[i] >= self.N: continue
      if self.gate_blocked[i]:
        blocked[i] = "gate"
        continue
      op = u.seqs[i].ops[done[i] % self.lens[i]]
      if op[0] == POLL:
        blocked[i] = "poll"
        k = self.launch[i] + 1
        x, need, mask = u.slot(op[1], op[5], k), u.value(op, k), op[4]
        h = self.stores[x]
        t = next((t for t in range(len(h) - 1, -1, -1) if h[t][3] & mask == need), None)
        if t is not None and h[t + 1][0] != i:
          self.checks.append((self.cur[i], h[t + 1][0], h[t + 1][1], ("poll", (i, done[i] + 1), h[t + 1][:2], self.nsig + x)))
        continue
      blocked[i] = "wait"
      s = op[1]
      r = self.last_reset[s]
      if r is not None and r[0] != i: self.checks.append((self.cur[i], r[0], r[1], ("non-monotonic", r, (i, done[i] + 1), s)))
    return blocked

  def _poll_checks(self) -> None:
    """A poll that ran: the first store after it that leaves the word not satisfying it must be ordered after it (else
    another execution undoes the value before the poll looks)."""
    for x, e, i, pos, mask, need in self.polls_run:
      h = self.stores[x]
      g = next((g for g in range(e + 1, len(h)) if h[g][3] & mask != need), None)
      if g is not None and h[g][0] != i: self.checks.append((h[g][2], i, pos, ("poll", (i, pos), h[g][:2], self.nsig + x)))

def _present_runs(s, w: np.ndarray, runs: np.ndarray) -> np.ndarray:
  """Of the first `runs` launches of each wait op `w` of sequence s, those it is present in (a `launches` clause)."""
  if not s.partial: return runs
  return np.asarray([sum(not s.absent(x, k) for k in range(1, r + 1)) for x, r in zip(w.tolist(), runs.tolist())], dtype=I64)

def _wait_stats(u: Unrolled, done: list[int], not_waits: list[int], C: np.ndarray, rows: ClockRows) -> dict[tuple[int, int], tuple[int, int]]:
  """{(sequence, op index): (instances run, instances redundant)} for the wait statements with a redundant instance:
  one whose satisfying write was already ordered before it (or the initial value, or its own sequence's write)."""
  lens, big = [len(s.ops) for s in u.seqs], _big(u)
  M = max(lens) + 1
  waits = [s.where_kind(WAIT) for s in u.seqs]
  keys = np.concatenate([w + n * M for n, w in enumerate(waits)])   # every wait statement, sorted
  # instances run: the launches whose instance lies at or before where its sequence stopped
  runs = np.concatenate([_present_runs(s, w, ((d - w - 1) // max(L, 1) + 1).clip(0, u.launches))
                         for s, w, d, L in zip(u.seqs, waits, done, lens)])
  is_wait = np.ones(len(rows.prev), dtype=bool)
  is_wait[0] = False
  is_wait[not_waits] = False   # a launch start's join, a poll's
  joins = np.flatnonzero(is_wait)
  joins = joins[C.reshape(-1)[rows.prev[joins] * C.shape[1] + rows.col[joins]] < rows.val[joins]]   # the joins that order something new
  sq = rows.held[joins] // big
  idx = (rows.held[joins] % big - 2) % np.asarray(lens, dtype=I64)[sq]
  red = runs - np.bincount(np.searchsorted(keys, sq * M + idx), minlength=len(runs))
  hit = np.flatnonzero(red > 0)
  return {(i, x): (n, r) for i, x, n, r in zip((keys[hit] // M).tolist(), (keys[hit] % M).tolist(), runs[hit].tolist(),
                                                red[hit].tolist())}
