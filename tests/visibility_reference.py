"""`visibility` by its definition (docs/check.md, "Cache semantics of the packets"), step by step over every pair and
triple of steps, given each step's happens-before clock: the oracle for hcqdsl/check/hb.py's numpy search.

A compute read R on device D of bytes that W last wrote before it (W: the last write ordered before R of each other
sequence) by a writer not writing through D's L2 (the host, a copy queue, another device's queue) is stale when
* W is the host's and the bytes are D's memory, and no `barrier` of a compute queue of D is ordered between W and R;
* D is a gfx942 and some access A of a compute queue of D to R's bytes, ordered before W, has no L2 invalidation
  (`barrier`, `timestamp` of a compute queue of D) ordered after A and before R."""
from __future__ import annotations
from hcqdsl.check.unroll import ACCESS, BARRIER, NOP, R
from hcqdsl.check.caches import SIGNAL_INVALIDATES_L2
from hcqdsl.ir import DEFAULT_ARCHS

def visibility(u, hist, done) -> dict:
  """{(seq, op index): (seq, pos, access)} at each statement's first stale read (by position, then access)."""
  seqs, S = u.seqs, len(u.seqs)
  lens = [len(s.ops) for s in seqs]
  arch = {d.name: d.arch or DEFAULT_ARCHS["AMD"] for d in u.program.devices}
  compute = [s.queue is not None and s.queue.engine == "compute" for s in seqs]
  def hb(x, y): return x[1] < y[1] if x[0] == y[0] else hist[y[0]][y[1]].__getitem__(x[0]) >= x[1]
  def steps(i):
    for pos in range(1, done[i] + 1):
      k, idx = divmod(pos - 1, lens[i])
      op = seqs[i].ops[idx]
      if op[0] == ACCESS and not (i in u.idle and k + 1 in u.idle[i].get(idx, ())):
        for n, acc in enumerate(op[1]): yield pos, u.pinned.get(i, {}).get((idx, n), k), n, acc   # `x@j`: j's memory
      elif op[0] in (BARRIER, NOP): yield pos, k, -1, op[0]
  every = {i: list(steps(i)) for i in range(S)}
  def overlap(x, kx, y, ky):
    return x[0] == y[0] and x[1] < y[2] and y[1] < x[2] and (kx == ky or not u.rebound[x[0]])
  out: dict = {}
  for i in range(S):
    if not compute[i]: continue
    d = seqs[i].device
    mine = [m for m in range(S) if compute[m] and seqs[m].device == d]
    for p, k, n, acc in every[i]:
      if n < 0 or acc[3] == 1 or (i, (p - 1) % lens[i]) in out: continue
      stale = False
      for j in range(S):
        if j == i or (compute[j] and seqs[j].device == d): continue
        ws = [(q, kq) for q, kq, nq, w in every[j] if nq >= 0 and w[3] != R and q <= hist[i][p][j] and overlap(w, kq, acc, k)]
        if not ws: continue
        W = (j, max(ws)[0])
        if j == 0 and u.buf_device[acc[0]] == d:
          if not any(hb(W, (m, b)) and hb((m, b), (i, p)) for m in mine for b, _, nb, kind in every[m] if nb < 0 and kind == BARRIER):
            stale = True
        if not SIGNAL_INVALIDATES_L2[arch[d]]:
          for m in mine:
            for a, ka, na, x in every[m]:
              if na < 0 or not overlap(x, ka, acc, k) or not hb((m, a), W): continue
              if not any(hb((m, a), (m2, b)) and hb((m2, b), (i, p)) for m2 in mine for b, _, nb, _k in every[m2] if nb < 0):
                stale = True
        if stale: break
      if stale: out[(i, (p - 1) % lens[i])] = (i, p, acc)
  return out
