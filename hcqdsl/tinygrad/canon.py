"""A window of a run in canonical terms (docs/sanitize.md, "Templates"): what `hcqdsl sanitize` checks once and then only
compares. Two windows with one key lift to programs that are equal but for names and numbers `check` only compares:
each allocation is named by its first appearance (with its size and its device), each byte offset in it by its rank
among the offsets the window uses there (the ends of every range: an overlap, or a range's end past the allocation's,
is the same in both), each signal by its first appearance (with what the manifest says of it: its device, timeline,
mailbox), each value of a signal by its rank among the values the window compares and writes there (and its initial
value's, with whether it is 0: a device's timeline named `D.timeline`). A submission is its shape (shapes.py: the
packets it was decoded as, every dword but the sites equal) with the facts at its sites in those terms; a dispatch its
kernel (tinygrad's record of it), its kernel-argument block and the pointers in it, and whether the host's write of
the block is a statement (the whole run's rule: RunState); the host's steps are their op with their signal and value,
or their range. What the window's check is to report or forget depends on nothing else but which statements earlier
checks ran (in the key too), so a window with a template's key has the template's outcome, read back in this window's
terms (`Canon`). A window with a step that has no shape (an NV submission) has no key: it is checked."""
from __future__ import annotations
import bisect
from typing import Optional
import attrs
import numpy as np
from ..ir import U32_MAX
from ..target.layout import kernarg_layout

__all__ = ["Canon", "canon"]

@attrs.define
class Canon:
  """One window's canonical terms: its steps' positions, its signals (first appearance -> address) and each one's
  values in order (a value's rank is its index)."""
  order: list                   # position -> the run's step
  pos: dict                     # the run's step -> position
  signals: list                 # canonical signal -> address
  sig_of: dict                  # address -> canonical signal
  values: list                  # canonical signal -> its values, sorted
  def rank(self, c: int, v: int) -> int: return bisect.bisect_left(self.values[c], v)
  def value(self, c: int, r: int) -> int: return self.values[c][r]

def canon(live, order: list, final: bool) -> tuple:
  """(Canon, key) of the window of `live` (a Live) made of the steps `order`; the key is None when a step cannot be
  keyed. Each step's structure, memory ranges and signal values are read once (`_refs`, kept with the step, as arrays);
  a window numbers them in a few array operations, whatever their number. Deciding the key decides each new dispatch's
  kernel-argument write (RunState), as the lift would."""
  recs = [live.rec[g] for g in order]
  refs = [e.get("_refs") or _refs(live, g, e) for g, e in zip(order, recs)]
  keyed = all(r is not None for r in refs)
  rs = [r for r in refs if r is not None]
  # signals: by first appearance (the values each step compares or writes, then the ones only named), with the
  # initial value each starts the window with
  sv = np.concatenate([r[3] for r in rs]) if rs else np.zeros(0, dtype=np.int64)   # (the signals with a value, in order)
  sa = np.concatenate([sv, np.asarray([a for e in recs for a in e.get("named") or ()], dtype=np.int64)])
  uniq, first = np.unique(sa, return_index=True)
  signals = uniq[np.argsort(first, kind="stable")].tolist()
  sig_of = {a: c for c, a in enumerate(signals)}
  inits, init_vals = [], []
  readings = _first_readings(recs)
  for a in signals:
    s = live.cap.signals.get(a)
    v = _initial(live, readings, a)
    init_vals.append(v)
    inits.append((s is not None, bool(s and s.get("timeline")), s.get("device") if s else None, bool(s and s.get("mailbox")),
                  a in live.value, v == 0))
  sig_arr = np.asarray(signals, dtype=np.int64)
  vsig = np.searchsorted(uniq, np.concatenate([sv, sig_arr]))
  vv = np.concatenate([r[4] for r in rs] + [np.asarray(init_vals, dtype=np.int64)])
  cid = np.empty(len(uniq), dtype=np.int64)
  cid[np.searchsorted(uniq, sig_arr)] = np.arange(len(signals))
  vsig = cid[vsig] if len(vsig) else vsig
  vrank, values = _ranks(vsig, vv, len(signals))
  cn = Canon(list(order), {g: i for i, g in enumerate(order)}, signals, sig_of, values)
  if not keyed: return cn, None
  # memory: allocations by first appearance (with their size and device), each offset by its rank there
  base = np.concatenate([r[1] for r in rs])
  ab, afirst, ainv = np.unique(base, return_index=True, return_inverse=True)
  acid = np.empty(len(ab), dtype=np.int64)
  acid[np.argsort(afirst, kind="stable")] = np.arange(len(ab))
  ra = acid[ainv] if len(base) else base
  lohi = np.concatenate([r[2] for r in rs]).reshape(-1, 2) if rs else np.zeros((0, 2), dtype=np.int64)
  desc: dict = {}
  for r in reversed(rs): desc.update(r[5])   # (each allocation's description as its first step has it)
  adesc = [desc[b] for b in ab[np.argsort(afirst, kind="stable")].tolist()]
  ends_c = np.concatenate([ra, ra, np.arange(len(adesc)), np.arange(len(adesc))])
  ends_v = np.concatenate([lohi[:, 0], lohi[:, 1], np.zeros(len(adesc), dtype=np.int64), np.asarray([d[0] if d[0] != "raw" else d[1]
                                                                                                        for d in adesc], dtype=np.int64)])
  orank, _ = _ranks(ends_c, ends_v, len(adesc))
  n = len(ra)
  mem = np.stack([ra, orank[:n], orank[n:2 * n]]) if n else np.zeros((3, 0), dtype=np.int64)
  sids = tuple(r[6] for r in rs)
  old = live.old
  olds = tuple(live.old_key(g) if g in old else () for g in order)
  counts = np.asarray([[len(r[1]), len(r[3])] for r in rs], dtype=np.int64)
  rings = {e["queue"] for e in recs if e["op"] == "submit"} | set(live.run.stubs)
  low: dict = {}   # ring -> the lowest number among its submissions in the window
  for g, e in zip(order, recs):
    if e["op"] == "submit" and (k := live.run.nth.get(g, 1)) < low.get(e["queue"], 1 << 62): low[e["queue"]] = k
  base_n = {q: live.run.stubs[q] if q in live.run.stubs else low[q] for q in rings}
  hcq2 = tuple((q, live.run.nth.get(g, 0) - base_n[q], live.rings.get(q) == 1) for g, e in zip(order, recs) if e["op"] == "submit"
               for q in [e["queue"]]) if live.cap.path_kind == "hcq2" else ()
  key = (final, live.cap.path_kind, sids, olds, counts.tobytes(), mem.tobytes(), vsig.tobytes(), vrank.tobytes(), tuple(inits),
         tuple(adesc), hcq2, tuple(sorted(live.run.stubs)))
  return cn, key

def _ranks(group: np.ndarray, v: np.ndarray, groups: int) -> tuple:
  """Each value's rank among its group's distinct values, and each group's values sorted."""
  if not len(v): return np.zeros(0, dtype=np.int64), [[] for _ in range(groups)]
  o = np.lexsort((v, group))
  g, x = group[o], v[o]
  new = np.ones(len(o), dtype=bool)
  new[1:] = (g[1:] != g[:-1]) | (x[1:] != x[:-1])
  dense = np.cumsum(new) - 1                       # a distinct (group, value)'s number
  start = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
  firsts = dense[start]
  rank = np.empty(len(o), dtype=np.int64)
  rank[o] = dense - np.repeat(firsts, np.diff(np.r_[start, len(o)]))
  uv = x[new].tolist()
  ug = g[new].tolist()
  sorted_vals: list = [[] for _ in range(groups)]
  for gg, vv in zip(ug, uv): sorted_vals[gg].append(vv)
  return rank, sorted_vals

def _first_readings(recs: list) -> dict:
  """Signal address -> its first reading by a submission of the window (None: the host writes it first), one pass."""
  first: dict = {}
  for e in recs:
    if e.get("dropped"): continue
    if e["op"] == "submit":
      for a, v in (e.get("signals") or {}).items(): first.setdefault(a, v)
    elif e["op"] == "signal": first.setdefault(e["addr"], None)
  return first

def _initial(live, first: dict, a: int) -> int:
  """The signal's initial value as the window's lift takes it: its value after the dropped writes, else its first
  reading by a submission of the window (before the host writes it: `first`), else its value when it was registered."""
  if a in live.value: return live.value[a] & U32_MAX
  if (v := first.get(a)) is not None: return v & U32_MAX
  s = live.cap.signals.get(a)
  return (s.get("value", 0) if s else 0) & U32_MAX

def _refs(live, g: int, e: dict) -> Optional[tuple]:
  """One step's (structure, its ranges' allocations, their (start, end) offsets, the signals it names with a value,
  those values, each allocation's description, the structure's number): what its key is made of, read once and kept
  with the step (`_refs`), as arrays. None: a submission with no shape."""
  if e["op"] == "submit" and "shape" not in e: return None
  own = sorted(e.get("uses") or ())
  arefs: list = []
  vrefs: list = []
  def mem(a: int, size: int, out: list) -> None:
    i = bisect.bisect_right(own, (a, 1 << 64, None)) - 1
    if i >= 0 and own[i][0] <= a < own[i][0] + own[i][1]: out.append((own[i][0], own[i][1:], a - own[i][0], a - own[i][0] + size))
    elif (al := live.cap.find(a)) is not None and al[0] <= a: out.append((al[0], (al[1], None), a - al[0], a - al[0] + size))
    else: out.append((-1 - a, ("raw", max(size, 1)), 0, size))   # (an address in no allocation: its own, keyed below 0)
  ranges: Optional[tuple] = _NO_RANGES
  if e.get("dropped"): struct: tuple = ("dropped",)
  elif e["op"] in ("signal", "wait"):
    vrefs.append((e["addr"], e["value"] & U32_MAX))
    struct = (e["op"],)
  elif e["op"] == "write":
    mem(e["addr"], e.get("size", len(e.get("hex") or b"")), arefs)
    struct, ranges = ("write", bool(e.get("staged"))), None
  else: struct, ranges = _submission(live, g, e, mem, arefs, vrefs)
  i64 = np.int64
  if ranges is None: ranges = _ranges(arefs)
  out = (struct, ranges[0], ranges[1], np.asarray([a for a, _ in vrefs], dtype=i64), np.asarray([v for _, v in vrefs], dtype=i64),
         ranges[2], live.struct_id(struct))
  e["_refs"] = out
  return out

_NO_RANGES: tuple = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), {})   # (a host's signal or wait: read, never changed)

def _ranges(arefs: list) -> tuple:
  """(allocations, their (start, end) offsets, each allocation's description) of a step's ranges, as `_refs` keeps them."""
  return (np.asarray([x[0] for x in arefs], dtype=np.int64), np.asarray([y for x in arefs for y in x[2:]], dtype=np.int64),
          {x[0]: x[1] for x in arefs})

def _submission(live, g: int, e: dict, mem, arefs: list, vrefs: list) -> tuple:
  """(A submission's structure (its ring, shape, facts' kinds, kernels, kernel-argument writes), its ranges as `_ranges`
  has them), its values into `vrefs`.
  A submission with its shape's facts (the same object: only values changed), the same kernel-argument blocks (the
  same objects: unchanged) and the same allocations as one of the last few of its shape has its ranges: only its
  values and its blocks' writes are read."""
  blocks_seen = tuple(b for _, b in e.get("mem", ()))
  seen = live.by_shape.get(e["shape"]) or []
  last = next((x for x in seen if x[0] is e["facts"] and len(x[1]) == len(blocks_seen) and all(a is b for a, b in zip(x[1], blocks_seen))
               and x[2] == e.get("uses")), None)
  if last is not None:
    struct, ranges, vaddr, vat, blocks = last[3]
    dw = e["dw"]
    vrefs += [(a, int(dw[at]) & U32_MAX if at >= 0 else -1) for a, at in zip(vaddr, vat)]
    writes = ("w", tuple(live.run.kernarg_write(g, ka, b) for ka, b in blocks.items())) if live.cap.path_kind == "hcq" else None
    return struct[:-1] + ((struct[-1][:-1] + (writes,)) if writes is not None else struct[-1],), ranges
  out = _submission_read(live, g, e, mem, arefs, vrefs)
  sig_facts = [f for _, f in e["facts"] if f.kind == "signal"]
  if len(live.by_shape) > 4096: live.by_shape.pop(next(iter(live.by_shape)))   # (shapes replaced long ago)
  ranges = _ranges(arefs)
  seen = live.by_shape[e["shape"]] = [(e["facts"], blocks_seen, e.get("uses"), (out, ranges, [f.addr for f in sig_facts],
                                                                               [f.value_at for f in sig_facts], live.last_blocks))] + seen
  del seen[VARIANTS:]
  return out, ranges

def _submission_read(live, g: int, e: dict, mem, arefs: list, vrefs: list) -> tuple:
  """_submission's reading of a submission's facts."""
  dw = e["dw"]
  blocks: dict = {}   # kernel-argument address -> its block as the lift reads it (the submission's last dispatch there)
  kinds: list = []
  mems: dict = {}     # address -> the first reading there (what the lift's `snap` takes)
  for a, b in e.get("mem", ()): mems.setdefault(a, b)
  for _, f in e["facts"]:
    if f.kind == "signal":   # (a timestamp names its signal with no value: -1, below every value)
      vrefs.append((f.addr, int(dw[f.value_at]) & U32_MAX if f.value_at >= 0 else -1))
      kinds.append("s" if f.value_at >= 0 else "t")
    elif f.kind in ("use", "copy"):
      mem(f.addr, f.size, arefs)
      kinds.append(("u", f.reads) if f.kind == "use" else "c")
    elif f.kind == "dispatch": kinds.append(_dispatch(live, mems, f, mem, arefs, blocks))
  live.last_blocks = blocks
  if live.cap.path_kind == "hcq":   # the host's writes of the blocks: statements by the whole run's rule (RunState)
    kinds.append(("w", tuple(live.run.kernarg_write(g, ka, b) for ka, b in blocks.items())))
  return ("submit", e["queue"], e["shape"], tuple(kinds))

def _dispatch(live, mems: dict, f, mem, arefs: list, blocks: dict) -> tuple:
  """A dispatch: its kernel (with tinygrad's access modes), its program's memory, its kernel-argument block and the
  block's pointers (ranges); the block as the lift compares it goes into `blocks`. A dispatch whose block is the one
  its last dispatch read (the same bytes object: the capture saw it unchanged) of the same kernel at the same address
  has the same ranges (kept per (program, block address, block), the most recent few thousand)."""
  k = live.cap.kernels.get(f.addr)
  blk = mems.get(f.kargs)
  key = (f.addr, f.kargs, id(blk))   # (the block is kept with its reading: its id is no other's while it is)
  got = live.dispatches.get(key)
  modes = _modes(k)
  if got is not None and got[0] is blk and got[1] is k and got[6] == modes:
    live.dispatches.move_to_end(key)
    arefs += got[3]
    if got[4] is not None: blocks[f.kargs] = got[4]
    return got[5]
  mark = len(arefs)
  mem(f.addr, 1, arefs)
  out: tuple
  block = None
  if k is None: out = ("d", None)
  else:
    sig = k["signature"]
    kid = (live.kernel_id(k), modes)
    bufs, scal = [x for x in sig if x.get("name") is None], [x for x in sig if x.get("name") is not None]
    need = kernarg_layout([8] * len(bufs) + [x.get("bytes") or 4 for x in scal])[1]
    if blk is None or len(blk) < need: out = ("d", kid, "unrecorded")
    else:
      block = blocks[f.kargs] = blk[:need]
      mem(f.kargs, need, arefs)
      for i, x in enumerate(bufs): mem(int.from_bytes(blk[8 * i:8 * i + 8], "little"), x.get("bytes") or 1, arefs)
      out = ("d", kid, len(bufs))
  live.dispatches[key] = (blk, k, 0, arefs[mark:], block, out, modes)
  while len(live.dispatches) > DISPATCHES: live.dispatches.popitem(last=False)
  return out

DISPATCHES = 4096   # dispatches whose ranges are kept (a graph's, an eager loop's)
VARIANTS = 4        # readings kept per shape (an HCQGraph replay's inputs alternate between buffers)

def _modes(k: Optional[dict]) -> tuple: return tuple(x.get("mode") for x in k["signature"]) if k is not None else ()
