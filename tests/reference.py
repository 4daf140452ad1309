"""The reference semantics of the language spec, literally, as the test oracle for `check`: every interleaving of every
step of the unrolled program, full states (steps executed per sequence, signal values) deduplicated, no reduction.

Deliberately independent of hcqdsl.check (its own unrolling from the IR, its own verdicts): only the parser and the
IR are shared. Verdicts are keyed by source lines, so generated programs put one statement per line.
"""
from __future__ import annotations
import re
from hcqdsl.ir import Program, Wait, SignalWrite, Exec, Copy, Write, Poll, Epoch, Submit, Slice, Ref

MASK = (1 << 32) - 1

class TooBig(Exception):
  """More states than the caller allowed: the test generated a program outside the oracle's domain (a test bug)."""

def _steps(program: Program, launches: int):
  """Per sequence (host first), per launch, its steps: (kind, signal, value, accesses, line, submitted queues)."""
  sigs = {s.name: s for s in program.signals}
  bufs = {b.name: b for b in program.buffers}
  modes = {k.name: [p.mode for p in k.params] for k in program.kernels}
  codes = {k.name: k.impl.code for k in program.kernels if k.impl is not None and k.impl.code}
  queues = program.queues
  def rng(sl, mode):
    b = bufs[sl.buffer.name]
    return (b.name, 0 if sl.start is None else sl.start, b.size if sl.end is None else sl.end, mode)
  def step(st, q, k):
    env = {v: k for v in program.vars}
    line = st.span.line if st is not None and st.span is not None else None
    if isinstance(st, (Wait, SignalWrite)):
      v = st.value.offset + (env[st.value.var.name] if st.value.var is not None else 0)
      return ("wait" if isinstance(st, Wait) else "write", st.signal.name, v, (), line, ())
    if isinstance(st, Epoch):
      return ("wait", f"{q.device.name}.timeline", k - 1, (), line, ())
    if isinstance(st, Exec):
      code = [rng(Slice(Ref(c)), "in") for c in [codes.get(st.kernel.name)] if c in bufs]   # the buffer its code was uploaded to
      return ("access", None, None, tuple(rng(a, m) for a, m in zip(st.args, modes[st.kernel.name])) + tuple(code), line, ())
    if isinstance(st, Copy):
      return ("access", None, None, (rng(st.src, "in"), rng(st.dst, "out")), line, ())
    if isinstance(st, Write):   # a store: its bytes land in the polled words it covers (the 7th field)
      r = rng(st.dst, "store")
      v = st.value.offset + (env[st.value.var.name] if st.value.var is not None else 0)
      return ("access", None, None, (r,), line, (), (r[0], r[1], (v & MASK).to_bytes(r[2] - r[1], "little")))
    if isinstance(st, Poll):    # blocks until (word & mask) == value; reads the word
      r = rng(st.src, "poll")
      v = st.value.offset + (env[st.value.var.name] if st.value.var is not None else 0)
      return ("poll", (r[0], r[1]), (v, st.mask), (r,), line, ())
    return ("nop", None, None, (), line, ())
  # `launches` clauses: a block takes part in the launches of its range only; the host blocks run in program order
  def runs(block, k): return block.launches is None or (block.launches[0] <= k and (block.launches[1] is None or k <= block.launches[1]))
  hsteps = []
  for k in range(1, launches + 1):
    host = [st for h in program.hosts if runs(h, k) for st in h.body]
    here = [q for q in queues if runs(q, k)]
    named = set()
    subs = []   # per host statement: the queues its submit hands over (a queue: its first submit, or a bare one)
    for st in host:
      if isinstance(st, Submit):
        qs = [q.name for q in here if q.name not in named and (not st.queues or q.name in {r.name for r in st.queues})]
        named |= set(qs)
        subs.append(tuple(qs))
      else: subs.append(None)
    implicit = tuple(q.name for q in here if q.name not in named)
    launch = ([("submit", None, None, (), None, implicit)] if implicit else [])
    launch += [("submit", None, None, (), st.span.line, subs[n]) if isinstance(st, Submit) else step(st, None, k)
               for n, st in enumerate(host)]
    hsteps.append(launch)
  seqs = [("host", hsteps)] + [(q.name, [[step(st, q, k) for st in q.body] if runs(q, k) else [] for k in range(1, launches + 1)])
                               for q in queues]
  # the polled words' initial values: their buffer's data, zero past it
  words = {}
  for q in queues:
    for st in q.body:
      if isinstance(st, Poll):
        b = bufs[st.src.buffer.name]
        raw = bytearray(b.size)
        if b.init is not None:
          import numpy as np
          d = np.asarray(b.init.values, dtype={"u8": "u1", "u32": "u4", "i32": "i4", "f32": "f4"}.get(b.init.dtype, "u1")).tobytes()
          raw[:len(d)] = d[:b.size]
        lo = 0 if st.src.start is None else st.src.start
        words[(b.name, lo)] = int.from_bytes(raw[lo:lo + 4], "little")
  return seqs, {s: sigs[s].init for s in sigs}, words

_READS = ("in", "poll")
def _conflict(a, b) -> bool:
  # a poll's read of its word and a `write` storing into it are the synchronization, not a race
  return (a[0] == b[0] and a[1] < b[2] and b[1] < a[2] and (a[3] not in _READS or b[3] not in _READS)
          and {a[3], b[3]} != {"poll", "store"})

def verdicts(program: Program, launches: int, max_states: int = 200_000) -> dict:
  """{"deadlock": {wait line: first launch}, "race": {(frozenset of the two lines, buffer): first launch (the larger
  of the two)}, "signal-race": {frozenset of lines: first launch}, "non-monotonic": {write line: {lines of the other
  uses}}, "overflow": {line: first launch}}; `states`: how many were explored. Every instance, for checking what a
  report says about launches: "deadlock@" {wait line: launches it is blocked at in some stuck state}, "race@" and
  "signal-race@" {key: {frozenset of the two (line, launch)}}, "non-monotonic@" {write line: (first launch of the
  lowering write, {(line, launch) of the other uses})}."""
  seqs, init, words = _steps(program, launches)
  names = [n for n, _ in seqs]
  flat = []    # per sequence: [(launch, step)]
  for _, per in seqs: flat.append([(k + 1, s) for k, steps in enumerate(per) for s in steps])
  # the host (sequence 0) compares a signal's 64-bit memory, whose high half nothing sets: its waits for 2**32 or
  # more never pass; the queues' packets see 32 bits
  def host_wait(i, s): return i == 0 and s[0] == "wait"
  overflow = {}
  for i, f in enumerate(flat):
    for k, s in f:
      if s[0] in ("wait", "write", "poll") and not 0 <= (s[2][0] if s[0] == "poll" else s[2]) <= ((1 << 64) - 1 if host_wait(i, s) else MASK):
        overflow[s[4]] = min(k, overflow.get(s[4], k))
  flat = [[(k, (s[0], s[1], (s[2][0] & MASK, s[2][1]) if s[0] == "poll" else
                s[2] if s[2] is None or (host_wait(i, s) and s[2] > MASK) else s[2] & MASK) + s[3:])
           for k, s in f] for i, f in enumerate(flat)]
  # the host position (steps done) after which queue q's launch k may start
  gate = {}
  for p, (k, s) in enumerate(flat[0]):
    if s[0] == "submit":
      for q in s[5]: gate[(q, k)] = p + 1
  sig_names = sorted(init)
  word_keys = sorted(words)
  start = (tuple(0 for _ in flat), tuple(init[s] & MASK for s in sig_names) + tuple(words[w] for w in word_keys))
  sidx = {s: n for n, s in enumerate(sig_names)}
  sidx.update({w: len(sig_names) + n for n, w in enumerate(word_keys)})   # a polled word's slot after the signals
  def stored(vals, st):   # the values after a step's stores into polled words
    if len(st) < 7: return vals
    b, lo, data = st[6]
    nv = list(vals)
    for (wb, wlo), x in zip(word_keys, range(len(sig_names), len(nv))):
      if wb != b: continue
      w = bytearray(nv[x].to_bytes(4, "little"))
      for n in range(4):
        if lo <= wlo + n < lo + len(data): w[n] = data[wlo + n - lo]
      nv[x] = int.from_bytes(w, "little")
    return tuple(nv)
  def holds(vals, s):
    if s[0] == "wait": return vals[sidx[s[1]]] >= s[2]
    if s[0] == "poll": return vals[sidx[s[1]]] & s[2][1] == s[2][0]
    return True
  out = {"deadlock": {}, "race": {}, "signal-race": {}, "non-monotonic": {}, "overflow": overflow,
         "deadlock@": {}, "race@": {}, "signal-race@": {}, "non-monotonic@": {}}
  def least(d, key, k):
    if key not in d or k < d[key]: d[key] = k
  seen, stack = {start}, [start]
  while stack:
    done, vals = stack.pop()
    about = []   # (seq, launch, step) about to run: not finished and (a queue) its launch submitted
    for i, f in enumerate(flat):
      if done[i] == len(f): continue
      k, s = f[done[i]]
      if i and done[0] < gate[(names[i], k)]: continue
      about.append((i, k, s))
    for n, (i, ki, a) in enumerate(about):
      for j, kj, b in about[n + 1:]:
        pair = frozenset(((a[4], ki), (b[4], kj)))
        for x in a[3]:
          for y in b[3]:
            if _conflict(x, y):
              least(out["race"], (frozenset((a[4], b[4])), x[0]), max(ki, kj))
              out["race@"].setdefault((frozenset((a[4], b[4])), x[0]), set()).add(pair)
        if a[0] == b[0] == "write" and a[1] == b[1]:
          least(out["signal-race"], frozenset((a[4], b[4])), max(ki, kj))
          out["signal-race@"].setdefault(frozenset((a[4], b[4])), set()).add(pair)
      if a[0] == "write" and a[2] < vals[sidx[a[1]]]:
        for j, kj, b in about:
          if j != i and b[0] in ("wait", "write") and b[1] == a[1]:
            out["non-monotonic"].setdefault(a[4], set()).add(b[4])
            first, uses = out["non-monotonic@"].get(a[4], (ki, set()))
            out["non-monotonic@"][a[4]] = (min(first, ki), uses | {(b[4], kj)})
    can = [(i, k, s) for i, k, s in about if holds(vals, s)]
    if not can:
      if any(done[i] < len(f) for i, f in enumerate(flat)):
        for i, k, s in about:   # all of them are waits that do not hold
          least(out["deadlock"], s[4], k)
          out["deadlock@"].setdefault(s[4], set()).add(k)
      continue
    for i, k, s in can:
      nd = done[:i] + (done[i] + 1,) + done[i + 1:]
      nv = vals
      if s[0] == "write": nv = vals[:sidx[s[1]]] + (s[2],) + vals[sidx[s[1]] + 1:]
      nv = stored(nv, s)
      nxt = (nd, nv)
      if nxt not in seen:
        if len(seen) >= max_states: raise TooBig(f"more than {max_states} states")
        seen.add(nxt)
        stack.append(nxt)
  out["states"] = len(seen)
  return out

_STATED = re.compile(r" (?:also )?waits (?:for|forever for) \S+ (?:>=|& \S+ ==) \S+ \(launch (\d+)\)")

def from_diagnostics(diags) -> dict:
  """The same shape from `check`'s diagnostics (plus "incomplete": how many such notes). `deadlock` reports one cause
  each, the other blocked waits as related locations: those map to None (their launch is the cause's state's). The
  "@" entries are what each report states: "deadlock@" {line: launches stated for it (the report's, its related
  waits')}, "race@" / "signal-race@" {key: frozenset of the two (line, launch)}, "non-monotonic@" {write line: (its
  launch, {(line, launch) of each use named})}."""
  out = {"deadlock": {}, "race": {}, "signal-race": {}, "non-monotonic": {}, "overflow": {}, "incomplete": 0,
         "deadlock@": {}, "race@": {}, "signal-race@": {}, "non-monotonic@": {}}
  def launch_of(msg): return int(re.search(r"\(launch (\d+)\)", msg).group(1))
  for d in diags:
    if d.code == "deadlock":   # one report per cause; the other blocked waits are its related locations
      out["deadlock"][d.span.line] = d.extra["launch"]
      out["deadlock@"].setdefault(d.span.line, set()).add(d.extra["launch"])
      for r in d.related:
        if m := _STATED.search(r.message):
          out["deadlock"].setdefault(r.span.line, None)
          out["deadlock@"].setdefault(r.span.line, set()).add(int(m.group(1)))
    elif d.code == "race":
      key = (frozenset((d.span.line, d.extra["other"]["line"])), d.extra["buffer"])
      out["race"][key] = max(d.extra["launch"], d.extra["other"]["launch"])
      out["race@"][key] = frozenset(((d.span.line, d.extra["launch"]), (d.extra["other"]["line"], d.extra["other"]["launch"])))
    elif d.code == "signal-race":
      key = frozenset((d.span.line, d.related[0].span.line))
      other = launch_of(d.related[0].message)
      out["signal-race"][key] = max(d.extra["launch"], other)
      out["signal-race@"][key] = frozenset(((d.span.line, d.extra["launch"]), (d.related[0].span.line, other)))
    elif d.code == "non-monotonic":
      out["non-monotonic"][d.span.line] = {r.span.line for r in d.related}
      out["non-monotonic@"][d.span.line] = (d.extra["launch"], {(r.span.line, launch_of(r.message)) for r in d.related})
    elif d.code == "overflow": out["overflow"][d.span.line] = d.extra.get("launch", 1)   # a literal's: every launch
    elif d.code == "incomplete": out["incomplete"] += 1
  return out
