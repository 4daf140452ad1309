"""The accesses of one execution, all at once in numpy: races and `visibility`, from the access table
(`unroll.AccessTable`) and the execution's clocks (hb.py).

Access X of sequence i at position p and a conflicting access Y of j at q (one of them writes, their byte ranges
overlap, another sequence) race iff neither is ordered before the other: q > C_i(p)[j] and p > C_j(q)[i]. Clocks only
grow along a sequence, so among j's accesses of one range the first with q > C_i(p)[j] is the one to test: one
`searchsorted` per (access, other sequence touching an overlapping range), no execution order needed. Only a racy
program goes back to Python, to enumerate its racing pairs (capped per statement). `visibility` starts from the same
search: each read's last write ordered before it (docs/check.md, "Cache semantics of the packets").
"""
from __future__ import annotations
from typing import Optional, Sequence
import attrs
import numpy as np
from .unroll import Unrolled, AccessTable, BARRIER, NOP, POLL, R, W, POLL_READ, STORE
from ..ir import device_arch
from .caches import SIGNAL_INVALIDATES_L2, STALE_READS
from .clocks import Clocks
from .findings import Party, RacePair

__all__ = ["VisColumns", "accesses", "SCAN_CAP", "RACE_CAP"]

SCAN_CAP = 4096   # unordered accesses looked at per access and sequence (only a racy program gets near it)
RACE_CAP = 16     # racing statements reported per statement and buffer

@attrs.frozen
class VisColumns:
  """The `visibility` findings, one per statement (its first launch, first access, first writer), as columns of ints:
  the read (sequence, op index, index of the access in the op, position), the write it may not see (the same four),
  the kind (0: the host's write with no HDP flush after it; 1: a stale L2 line an earlier access left), and for kind 1
  that access (the same four; -1 for kind 0)."""
  seq: list[int]
  op: list[int]
  sub: list[int]
  pos: list[int]
  wseq: list[int]
  wop: list[int]
  wsub: list[int]
  wpos: list[int]
  kind: list[int]
  aseq: list[int]
  aop: list[int]
  asub: list[int]
  apos: list[int]
  def __len__(self) -> int: return len(self.seq)
  def rows(self) -> list[tuple[int, ...]]: return list(zip(*attrs.astuple(self, recurse=False)))

NO_VIS = VisColumns(*([],) * 13)

@attrs.frozen
class Instances:
  """Every executed access instance (a poll left blocked is about to run: its read takes part too), as columns."""
  table: AccessTable
  rows: np.ndarray     # its access table row
  seq: np.ndarray      # its sequence
  pos: np.ndarray      # its position
  mode: np.ndarray     # R, W or RW
  rinst: np.ndarray    # its range instance: the range id, plus nrange * launch for a rebound buffer's (other memory)
  xrow: np.ndarray     # the clock row holding at it
  clocks: Clocks
  nb_ptr: Optional[np.ndarray]   # CSR: range instance -> the range instances it overlaps (None: only itself)
  nb: Optional[np.ndarray]
  ninst: int           # memory instances: a launch's, or the one `x@k` names
  def entry(self, rows: np.ndarray, col) -> np.ndarray:
    """C(instance)[col] for the instances `rows` (indices into these columns)."""
    return self.clocks.C.reshape(-1)[self.xrow[rows] * self.clocks.S + col]
  def overlapping(self, tags: np.ndarray, inst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per instance of `inst` and range instance overlapping its range (its own included): the instance's tag (of
    `tags`), and that range instance."""
    ri = self.rinst[inst]
    ptr, nb = self.nb_ptr, self.nb
    if ptr is None or nb is None: return tags, ri   # every buffer's ranges disjoint: a range overlaps only itself
    cnt = ptr[ri + 1] - ptr[ri]
    return np.repeat(tags, cnt), nb[_ranges(ptr[ri], cnt)]

@attrs.frozen
class Index:
  """Some instances keyed by (range instance, sequence, position), sorted, with a CSR from range instance to the
  sequences accessing it."""
  key: np.ndarray   # (rinst * S + seq) * big + pos, sorted
  rec: np.ndarray   # the instance of each key
  ptr: np.ndarray   # range instance -> its run of `seqs`
  seqs: np.ndarray  # the sequences accessing each range instance

@attrs.frozen
class Pairs:
  """Each (access, range r2 overlapping it, other sequence j accessing r2), against an Index."""
  access: np.ndarray   # the access (an instance)
  other: np.ndarray    # the other sequence j
  base: np.ndarray     # (r2 * S + j) * big: where j's accesses of r2 start in the index's keys
  first: np.ndarray    # the index (into the index's keys) of j's first access of r2 not ordered before the access
                       # (may be past j's accesses of r2)

def accesses(u: Unrolled, done: Sequence[int], polled: Sequence[int], clocks: Clocks) -> tuple[dict, VisColumns]:
  """(races, visibility findings) from every access an execution ran (`done`: steps per sequence; `polled`: the
  sequences blocked at a poll, whose read is about to run), given its clocks."""
  if not len(u.access_table().seq): return {}, NO_VIS
  acc = _instances(u, done, polled, clocks)
  if acc is None: return {}, NO_VIS
  writes, reads = acc.mode != R, acc.mode != W
  widx, ridx = _index(acc, writes), _index(acc, reads)
  # a poll's read and a store into its word are the synchronization, never a race: polls are searched among the
  # writes that are not stores, stores among the reads that are not polls
  role = acc.table.role[acc.rows]
  polls, stored = role == POLL_READ, role == STORE
  searches: tuple[tuple[Pairs, Index], ...]
  if polls.any():
    ww = _pairs(acc, np.flatnonzero(~polls), widx)   # every other access against other sequences' writes
    pidx, qidx = _index(acc, writes & ~stored), _index(acc, reads & ~polls)
    searches = ((ww, widx), (_pairs(acc, np.flatnonzero(polls), pidx), pidx),
                (_pairs(acc, np.flatnonzero(writes & ~stored), ridx), ridx), (_pairs(acc, np.flatnonzero(stored), qidx), qidx))
  else:
    ww = _pairs(acc, np.arange(len(acc.rows)), widx)   # every access against other sequences' writes
    searches = ((ww, widx), (_pairs(acc, np.flatnonzero(writes), ridx), ridx))
  found = _Races(u, acc)
  for pr, idx in searches:
    ok = pr.first < len(idx.key)
    ok[ok] = idx.key[pr.first[ok]] < pr.base[ok] + acc.clocks.big
    racy = acc.entry(idx.rec[pr.first[ok]], acc.seq[pr.access[ok]]) < acc.pos[pr.access[ok]]   # and not ordered after it either
    if racy.any(): found.report(np.flatnonzero(ok)[racy], pr, idx)
  # a poll's read is the command processor's, not a kernel's through the near caches: no visibility either way
  return found.races, _visibility(u, acc, ww, widx, reads & ~polls)

def _instances(u: Unrolled, done: Sequence[int], polled: Sequence[int], clocks: Clocks) -> Optional[Instances]:
  """Every executed access instance: its table row, sequence, position, range instance (a rebound buffer's ranges are
  other memory in each launch), and the clock row holding at it. None when nothing ran."""
  A, N = u.access_table(), u.launches
  ran = np.asarray(done, dtype=np.int64)
  ran[list(polled)] += 1   # a poll left blocked is about to run: its read takes part
  ran = ran[A.seq]
  pinned = bool(u.pinned)
  ninst = max(N, int(A.pin.max(initial=-1)) + 1)
  per: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]] = ([], [], [])   # rows, positions, range instances per launch
  for k in range(N):
    p = A.idx + (1 + k * A.len)
    keep = p <= ran
    if k in A.idle: keep &= ~A.idle[k]
    r = np.flatnonzero(keep)
    per[0].append(r)
    per[1].append(p[r])
    per[2].append(A.rid[r] + (A.nrange * np.where(A.pin[r] >= 0, A.pin[r], k)) * A.rebound[r] if k or pinned else A.rid[r])
  rows, pos, rinst = (np.concatenate(x) for x in per)
  if not len(rows): return None
  seq = A.seq[rows]
  nb_ptr, nb = A.neighbours(ninst)
  return Instances(A, rows, seq, pos, A.mode[rows], rinst, clocks.row(seq, pos), clocks, nb_ptr, nb, ninst)

def _index(acc: Instances, sel: np.ndarray) -> Index:
  """The instances `sel` (a mask) by (range instance, sequence, position)."""
  S, big = acc.clocks.S, acc.clocks.big
  r = np.flatnonzero(sel)
  key = (acc.rinst[r] * S + acc.seq[r]) * big + acc.pos[r]
  order = np.argsort(key, kind="stable")
  key = key[order]
  g = key // big
  first = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if len(g) else g
  ptr = np.searchsorted(g[first] // S, np.arange(acc.table.nrange * acc.ninst + 1))
  return Index(key, r[order], ptr, g[first] % S)

def _pairs(acc: Instances, sel: np.ndarray, idx: Index) -> Pairs:
  """Each (access of `sel`, range r2 overlapping it, other sequence j accessing r2 in `idx`), and j's first access of
  r2 not ordered before the access."""
  S, big = acc.clocks.S, acc.clocks.big
  a, r2 = acc.overlapping(sel, sel)
  cnt = idx.ptr[r2 + 1] - idx.ptr[r2]
  j = idx.seqs[_ranges(idx.ptr[r2], cnt)]
  if cnt.max(initial=0) > 1: a, r2 = np.repeat(a, cnt), np.repeat(r2, cnt)
  else:
    keep = cnt > 0
    a, r2 = a[keep], r2[keep]
  other = j != acc.seq[a]
  a, r2, j = a[other], r2[other], j[other]
  base = (r2 * S + j) * big
  return Pairs(a, j, base, np.searchsorted(idx.key, base + acc.entry(a, j), side="right"))

class _Races:
  """The racing pairs found so far: (statement, statement, buffer) -> (launch rank, first access, second access), and
  how many partners each (statement, buffer) has (capped at RACE_CAP)."""
  def __init__(self, u: Unrolled, acc: Instances):
    self.u, self.acc, self.lens = u, acc, [len(s.ops) for s in u.seqs]
    self.races: dict[tuple, RacePair] = {}
    self.partners: dict[tuple, int] = {}

  def _access(self, r: int) -> tuple:
    """The access of a table row (a poll's: its read of its word)."""
    A = self.acc.table
    op = self.u.seqs[A.seq[r]].ops[A.idx[r]]
    return op[6] if op[0] == POLL else op[1][A.sub[r]]

  def report(self, hit: np.ndarray, pr: Pairs, idx: Index) -> None:
    """Every racing pair from the pairs `hit` found racy: j's accesses from the first unordered one on, while they stay
    unordered (clocks grow, so the rest are ordered after)."""
    acc, big = self.acc, self.acc.clocks.big
    seq, pos, C = acc.seq, acc.pos, acc.clocks.C
    for n in sorted(hit.tolist(), key=lambda n: (int(pos[pr.access[n]]), int(seq[pr.access[n]]))):
      x, jj = int(pr.access[n]), int(pr.other[n])
      i, p = int(seq[x]), int(pos[x])
      ai = self._access(int(acc.rows[x]))
      me = (i, (p - 1) % self.lens[i], ai[0])
      tt, seg, c = int(pr.first[n]), int(idx.key[pr.first[n]]) // big, 0
      while tt < len(idx.key) and int(idx.key[tt]) // big == seg and c < SCAN_CAP and self.partners.get(me, 0) < RACE_CAP:
        y = int(idx.rec[tt])
        if C[acc.xrow[y], i] >= p: break
        self._add((jj, int(pos[y]), self._access(int(acc.rows[y]))), (i, p, ai))
        tt += 1
        c += 1

  def _add(self, x: tuple, y: tuple) -> None:
    """One racing pair of accesses (seq, pos, access), kept at its statements' smallest launches."""
    (j, q, aj), (i, p, _), lens = x, y, self.lens
    kj, ki = (q - 1) // lens[j] + 1, (p - 1) // lens[i] + 1
    a, b = (j, (q - 1) % lens[j]), (i, (p - 1) % lens[i])
    key = (min(a, b), max(a, b), aj[0])
    rank = (max(kj, ki),) + ((kj, ki) if a <= b else (ki, kj))  # the same instance the explorer keeps
    first, second = (x, y) if (j, q) <= (i, p) else (y, x)
    old = self.races.get(key)
    if old is None or rank < old.rank: self.races[key] = RacePair(rank, Party(*first), Party(*second))
    if old is None:
      for z in (a, b): self.partners[z + (aj[0],)] = self.partners.get(z + (aj[0],), 0) + 1

def _ranges(starts, counts) -> np.ndarray:
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

# ---- visibility

@attrs.frozen
class _Reads:
  """The compute reads that may see stale data, with the write they are ordered after (one row per candidate)."""
  read: np.ndarray     # the read (an instance)
  writer: np.ndarray   # the writer's sequence
  key: np.ndarray      # the write's index in the writes' Index
  reader: np.ndarray   # the reader's sequence
  pos: np.ndarray      # the read's position
  write: np.ndarray    # the write (an instance)
  wpos: np.ndarray     # the write's position
  dev: np.ndarray      # the reader's device (an id)

@attrs.frozen
class _Devices:
  """The program's devices as small ints, and what each sequence is."""
  compute: np.ndarray   # per sequence: a compute queue
  sdev: np.ndarray      # per sequence: its device's id
  bdev: np.ndarray      # per buffer: its device's id (the host's memory: None's id)
  arch: dict[int, str]  # device id -> its target
  on: dict[int, list[int]] = attrs.field(factory=dict)   # device id -> its compute queues (the reading devices only)

def _visibility(u: Unrolled, acc: Instances, ww: Pairs, widx: Index, reads: np.ndarray) -> VisColumns:
  """The packets' cache semantics (caches.py, docs/check.md): a compute read R on device D of bytes last written
  (before it, by happens-before) by W that did not write through D's L2 — the host, a copy queue, another device's
  queue — reads stale data when
  * (HDP) W is the host's write to D's memory and no `barrier` on a compute queue of D is ordered between W and R, or
  * (L2) an access A of a compute queue of D to R's bytes ordered before W (it may have brought the old bytes into
    D's L2) is followed by no L2 invalidation on D ordered before R. On gfx1100/gfx1201 every compute `signal`
    invalidates L2, and A is ordered before W only through a signal of A's queue after A, so this never holds there:
    it is searched on gfx942 only, where `barrier` and `timestamp` are the invalidations."""
  devs = _devices(u)
  c = _candidates(u, acc, ww, widx, reads, devs)
  if c is None: return NO_VIS
  kind, arow = np.full(len(c.read), -1, dtype=np.int64), np.full(len(c.read), -1, dtype=np.int64)
  _hdp(u, acc, c, devs, kind)
  _stale_l2(u, acc, c, devs, (kind, arow))
  return _per_statement(acc, c, widx, kind, arow)

def _devices(u: Unrolled) -> _Devices:
  devs = [s.device for s in u.seqs]
  dev_id = {d: n for n, d in enumerate(dict.fromkeys(devs + u.buf_device))}
  compute = np.array([s.queue is not None and s.queue.engine == "compute" for s in u.seqs])
  sdev = np.array([dev_id[d] for d in devs])
  return _Devices(compute, sdev, np.array([dev_id[d] for d in u.buf_device]),
                  {dev_id[d.name]: device_arch(d) for d in u.program.devices if d.name in dev_id})

def _candidates(u: Unrolled, acc: Instances, ww: Pairs, widx: Index, reads: np.ndarray, devs: _Devices) -> Optional[_Reads]:
  """Per compute read and writer j: j's last write of an overlapping range ordered before the read (the write before
  the first unordered one, in the same (range, sequence) run of keys), when j does not write through the reading
  device's L2. None when there is none."""
  a, j, t = ww.access, ww.other, ww.first - 1
  i = acc.seq[a]
  compute, sdev = devs.compute, devs.sdev
  stale = {d.name: STALE_READS[device_arch(d)] for d in u.program.devices}   # NV devices read nothing stale (caches.py)
  ok = reads[a] & compute[i] & ((j == 0) | ~compute[j] | (sdev[j] != sdev[i])) & (t >= 0) & \
       np.array([stale.get(s.device, True) for s in u.seqs], dtype=bool)[i]
  ok[ok] = widx.key[t[ok]] >= ww.base[ok]
  a, j, t, i = a[ok], j[ok], t[ok], i[ok]
  if not len(a): return None
  wrow = widx.rec[t]
  D = sdev[i]
  devs.on.update({d: [m for m in range(len(u.seqs)) if compute[m] and sdev[m] == d] for d in np.unique(D).tolist()})
  return _Reads(a, j, t, i, acc.pos[a], wrow, acc.pos[wrow], D)

def _positions(u: Unrolled, m: int, *kinds: int) -> np.ndarray:
  """Sequence m's steps of these op kinds, every launch, sorted."""
  at, L = u.seqs[m].where_kind(*kinds).astype(np.int64), len(u.seqs[m].ops)
  return (np.arange(u.launches, dtype=np.int64)[:, None] * L + at[None, :] + 1).reshape(-1)

def _latest(acc: Instances, c: _Reads, m: int, steps: np.ndarray, sel: np.ndarray) -> np.ndarray:
  """Per read of `sel`: sequence m's last step of `steps` ordered before it (0: none)."""
  bound = np.where(c.reader[sel] == m, c.pos[sel] - 1, acc.entry(c.read[sel], m))
  if not len(steps): return np.zeros(len(sel), dtype=np.int64)
  x = np.searchsorted(steps, bound, side="right") - 1
  return np.where(x >= 0, steps[np.maximum(x, 0)], 0)

def _hdp(u: Unrolled, acc: Instances, c: _Reads, devs: _Devices, kind: np.ndarray) -> None:
  """The host's writes to the reading device's memory want a `barrier` (the HDP flush) of one of its compute queues
  between them and the read: kind 0 where none is."""
  hdp = np.flatnonzero((c.writer == 0) & (devs.bdev[acc.table.buf[acc.rows[c.read]]] == c.dev))
  if not len(hdp): return
  flushed = np.zeros(len(hdp), dtype=bool)
  for d, ms in devs.on.items():
    for m in ms:
      e = _latest(acc, c, m, _positions(u, m, BARRIER), hdp)
      has = (e > 0) & (c.dev[hdp] == d)
      flushed[has] |= acc.clocks.entry(m, e[has], 0) >= c.wpos[hdp[has]]
  kind[hdp[~flushed]] = 0

def _stale_l2(u: Unrolled, acc: Instances, c: _Reads, devs: _Devices, out: tuple[np.ndarray, np.ndarray]) -> None:
  """On each reading device d whose `signal` leaves L2 as it is (gfx942), per compute queue k of d: k's latest access
  A of an overlapping range ordered before the write, with no L2 invalidation (`barrier`, `timestamp`) of d's compute
  queues ordered after A and before the read: kind 1, and A (`out`: the kind and A's instance per read)."""
  l2 = [d for d in devs.on if not SIGNAL_INVALIDATES_L2[devs.arch[d]]]
  if not l2: return
  kind, arow = out
  S, big = acc.clocks.S, acc.clocks.big
  aidx = _index(acc, acc.table.role[acc.rows] != POLL_READ)
  inv = {m: np.sort(_positions(u, m, BARRIER, NOP)) for d in l2 for m in devs.on[d]}
  for d, k in ((d, k) for d in l2 for k in devs.on[d]):
    sel = np.flatnonzero((c.dev == d) & (kind < 0))
    cc, r2 = acc.overlapping(sel, c.read[sel])   # cc: indices into c
    kb = (r2 * S + k) * big
    x = np.searchsorted(aidx.key, kb + acc.entry(c.write[cc], k), side="right") - 1
    hit = x >= 0
    hit[hit] = aidx.key[x[hit]] >= kb[hit]
    cc, x = cc[hit], x[hit]
    if not len(cc): continue
    apos = aidx.key[x] % big
    last = np.lexsort((apos, cc))
    last = last[np.r_[cc[last][1:] != cc[last][:-1], True]]   # per read: k's latest such access
    cc, x, apos = cc[last], x[last], apos[last]
    covered = np.zeros(len(cc), dtype=bool)
    for m in devs.on[d]:
      e = _latest(acc, c, m, inv[m], cc)
      has = e > 0
      if m == k: covered |= has & (e > apos)
      else: covered[has] |= acc.clocks.entry(m, e[has], k) >= apos[has]
    kind[cc[~covered]] = 1
    arow[cc[~covered]] = aidx.rec[x[~covered]]

def _per_statement(acc: Instances, c: _Reads, widx: Index, kind: np.ndarray, arow: np.ndarray) -> VisColumns:
  """One warning per statement: its first launch, first access, first writer, that writer's latest write."""
  A, rows, pos, big = acc.table, acc.rows, acc.pos, acc.clocks.big
  hit = kind >= 0
  a, j, t, kind, arow = c.read[hit], c.writer[hit], c.key[hit], kind[hit], arow[hit]
  stmt = acc.seq[a] * big + A.idx[rows[a]]
  order = np.lexsort((-widx.key[t], j, A.sub[rows[a]], pos[a], stmt))
  first = order[np.r_[True, stmt[order][1:] != stmt[order][:-1]]] if len(order) else order
  ra, ry, rz = rows[a[first]], rows[widx.rec[t[first]]], arow[first]
  rzr = rows[np.maximum(rz, 0)]
  none = rz < 0
  cols = (A.seq[ra], A.idx[ra], A.sub[ra], pos[a[first]], j[first], A.idx[ry], A.sub[ry], pos[widx.rec[t[first]]], kind[first],
          np.where(none, -1, A.seq[rzr]), np.where(none, -1, A.idx[rzr]), np.where(none, -1, A.sub[rzr]),
          np.where(none, -1, pos[np.maximum(rz, 0)]))
  return VisColumns(*(x.tolist() for x in cols))
