"""What of a run checked so far can be forgotten: the frontier of one execution of a one-launch program that is the
prefix of a longer run (`hcqdsl sanitize` checks a run as it grows, docs/sanitize.md, "Memory").

The program's sequences are the host and one queue per submission; the run goes on with more host steps and more
submissions, each submitted by the host after its steps so far. An event e (a step of a sequence) can be dropped when
nothing still to come can be unordered with it: e happens before the host's last step (so before every later host step
and every later submission, which starts after the host's submit) and before the current position of every sequence
that is blocked (a queue waiting for something still to come runs its remaining steps after that position). The set
dropped is closed downwards (an event before a dropped one is dropped) and taken whole sequence by whole sequence — a
queue when all its steps can go, the host up to a prefix — so what stays is a set of whole queues and a suffix of the
host, which the next check re-reads with the signals' values after the dropped writes as their initial values.

A write the run may still read stale is kept too: the host's write into a device's memory until a `barrier` of a
compute queue of that device is ordered after it and dropped itself (the HDP flush every later read is then ordered
after), and on a device whose `signal` leaves L2 as it is (gfx942) every write not through that device's L2 until an
L2 invalidation of the device (`barrier`, `timestamp`) is (caches.py: what the `visibility` analysis reads)."""
from __future__ import annotations
from typing import Optional
import attrs
import numpy as np
from ..ir import device_arch
from .unroll import Unrolled, WRITE, ACCESS, BARRIER, NOP, R
from .caches import SIGNAL_INVALIDATES_L2, STALE_READS
from .clocks import Clocks

__all__ = ["Frontier", "frontier"]

@attrs.frozen
class Frontier:
  """What a check of a run's prefix leaves to the next check."""
  dropped: frozenset      # the queue sequences dropped (indices into the unrolled program's sequences)
  stubbed: frozenset      # the queue sequences dropped but for their tail (`tails`)
  host: int               # the host's steps dropped: its positions 1..host
  values: dict            # signal id -> its value after the dropped writes (the next check's initial value)
  done: list              # steps each sequence ran (the rest waits for what is still to come)

def frontier(u: Unrolled, done: list, clocks: Clocks, tails: Optional[dict] = None) -> Frontier:
  """The frontier of the execution that ran `done` steps of each sequence of `u` (one launch) with these clocks.
  `tails`: sequence -> how many of its last steps may stay behind when the rest can go (hcq2's ring order: a
  submission's last write, which only the ring's next submission waits for, is kept as a step of its own)."""
  tails = tails or {}
  assert u.launches == 1, "a run's prefix is one launch"
  S, lens = len(u.seqs), [len(s.ops) for s in u.seqs]
  def row(i: int, pos: int) -> np.ndarray:   # what sequence i knows before its step `pos` (after its step pos - 1)
    return clocks.C[int(clocks.row(np.asarray([i]), np.asarray([pos]))[0])].astype(np.int64)
  after = [row(i, done[i] + 1) for i in range(S)]                 # each sequence where it stands
  for i in range(S): after[i][i] = done[i]                         # (a row holds what others' steps it knows; its own, in order)
  blocked = [i for i in range(S) if done[i] < lens[i]]
  watch = [after[i] for i in blocked if i] + [after[0]]           # the host and every blocked queue
  least = np.minimum.reduce(watch) if watch else np.zeros(S, dtype=np.int64)   # ordered before all of them
  need = [lens[i] - tails.get(i, 0) for i in range(S)]   # the steps that must be ordered before what is to come
  cand = {i for i in range(1, S) if done[i] == lens[i] and least[i] >= need[i]}
  host = int(min(done[0], least[0]))
  unsettled = _unsettled(u, done, clocks, least)
  cand -= {i for i, _ in unsettled if i}
  host = min([host] + [q - 1 for i, q in unsettled if i == 0])
  ends = {i: after[i] if need[i] == lens[i] else row(i, need[i] + 1) for i in cand}
  while True:   # closed downwards: a dropped queue's past is dropped, and so is the host's prefix's
    keep = [i for i in cand if ends[i][0] > host or any(ends[i][j] > 0 and j not in cand for j in range(1, S) if j != i)]
    cand -= set(keep)
    out = np.asarray([j not in cand for j in range(S)])
    out[0] = False
    h = host
    while h > 0 and bool((row(0, h + 1)[out] > 0).any()): h -= 1
    if not keep and h == host: break
    host = h
  full = {i for i in cand if least[i] >= lens[i]}
  return Frontier(frozenset(full), frozenset(cand - full), host, _values(u, cand, host, clocks, need), list(done))

def _unsettled(u: Unrolled, done: list, clocks: Clocks, least: np.ndarray) -> list:
  """(sequence, position) of each write a later read may see stale (module docstring): the host's writes into a device's
  memory with no dropped `barrier` of that device after them, and on L2-keeping devices every write not through the
  device's L2 with no dropped L2 invalidation after it."""
  devs = {d.name: d for d in u.program.devices}
  stale = {n for n, d in devs.items() if STALE_READS[device_arch(d)]}
  keeps_l2 = {n for n in stale if not SIGNAL_INVALIDATES_L2[device_arch(devs[n])]}
  compute = [i for i, s in enumerate(u.seqs) if i and s.queue is not None and s.queue.engine == "compute"]
  # per device: the flushes (barrier) and invalidations (barrier, timestamp) that are themselves ordered before
  # everything still to come, as (sequence, position)
  def settling(dev: str, kinds: tuple) -> list:
    out = []
    for m in compute:
      if u.seqs[m].device != dev: continue
      for idx in u.seqs[m].where_kind(*kinds).tolist():
        if idx + 1 <= done[m] and least[m] >= idx + 1: out.append((m, idx + 1))
    return out
  flush = {d: settling(d, (BARRIER,)) for d in stale}
  inval = {d: settling(d, (BARRIER, NOP)) for d in keeps_l2}
  def ordered(j: int, q: int, marks: list) -> bool:
    return any((m == j and e > q) or clocks.entry(np.asarray([m]), np.asarray([e]), j)[0] >= q for m, e in marks)
  out = []
  for j, s in enumerate(u.seqs):
    for idx, op in enumerate(s.ops):
      if op[0] != ACCESS or idx + 1 > done[j]: continue
      for a in op[1]:
        if a[3] == R: continue
        need = []
        bdev = u.buf_device[a[0]]
        if j == 0 and bdev in stale: need.append(flush[bdev])
        need += [inval[d] for d in keeps_l2 if not (j and s.device == d and s.queue is not None and s.queue.engine == "compute")]
        if any(not ordered(j, idx + 1, marks) for marks in need):
          out.append((j, idx + 1))
          break
  return out

def _values(u: Unrolled, dropped: set, host: int, clocks: Clocks, need: list) -> dict:
  """Each signal's value after the dropped writes: the last of them by happens-before (the writes of a signal are
  totally ordered in the exact fragment), else its initial value."""
  writes: dict = {}
  for j, s in enumerate(u.seqs):
    if j and j not in dropped: continue
    for idx in s.where_kind(WRITE).tolist():
      if (j == 0 and idx + 1 > host) or idx + 1 > need[j]: break
      op = s.ops[idx]
      writes.setdefault(op[1], []).append((j, idx + 1, u.value(op, 1)))
  out = {}
  for sig, ws in writes.items():
    last: Optional[tuple] = None
    for w in ws:   # the write every other one is ordered before
      if last is None or _before(clocks, last, w): last = w
    out[sig] = last[2] if last is not None else u.sig_init[sig]
  return out

def _before(clocks: Clocks, a: tuple, b: tuple) -> bool:
  """Is write a ordered before write b?"""
  if a[0] == b[0]: return a[1] < b[1]
  return int(clocks.entry(np.asarray([b[0]]), np.asarray([b[1]]), a[0])[0]) >= a[1]
