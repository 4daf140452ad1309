"""The passes: one small class per diagnostic code, each with a `code` and one method, `run(u, found)`, turning the
`Findings` of the happens-before pass (hb.Trace) or of the explorer (explore.Exploration) into Diagnostics. `PASSES`
lists them once, in the order the pipeline runs them. Findings are deduplicated by statement: each distinct problem is
reported once, at the first launch where it shows."""
from __future__ import annotations
from typing import ClassVar, Mapping, Optional, Sequence, TYPE_CHECKING
import attrs
import numpy as np
from ..ir import Epoch, Expr, Ref, Span, Wait, Queue, Buffer, Timestamp, U32_MAX, U64_MAX, epoch_wait, device_arch, in_launches
from ..diagnostics import Diagnostic, LazyDiagnostic, Related, Edit, host_block
from .unroll import Unrolled, WAIT, WRITE, ACCESS, NOP, BARRIER, SUBMIT, POLL, R, W, RW, polled_word
from .findings import Stuck, RacePair, SignalRace, NonMonotonic, WaitStats
if TYPE_CHECKING: from .accesses import VisColumns

__all__ = ["Findings", "Pass", "PASSES", "IncompleteAnalysis", "OverflowAnalysis", "DeadlockAnalysis", "RaceAnalysis",
           "SignalRaceAnalysis", "NonMonotonicAnalysis",
           "RedundantWaitAnalysis", "UnusedSignalAnalysis", "VisibilityAnalysis", "StaleInputAnalysis", "deadlock_diags",
           "word_name"]

_RW = {R: "reads", W: "writes", RW: "reads and writes"}
_SYNC = (WAIT, WRITE)
assert WAIT < WRITE < min(ACCESS, NOP, BARRIER, SUBMIT)  # `kind <= WRITE` picks the waits and writes

@attrs.frozen
class Findings:
  """What the passes report on, from one source: the happens-before pass inside the exact fragment (`hb.Trace`), the
  explorer outside it, or, when exploring exceeded its budget, the one execution the pass made. A source that decides
  nothing of a kind leaves it empty (the explorer: no `redundant-wait` or `visibility`, which need the fragment)."""
  deadlocks: Sequence[Stuck] = ()   # the stuck states: the pass's one, or the explorer's
  # (statement, statement, buffer) -> its racing accesses
  races: Mapping[tuple, RacePair] = attrs.field(factory=dict)
  signal_races: Sequence[SignalRace] = ()
  nonmono: Sequence[NonMonotonic] = ()
  # (seq, op index) -> the wait statements with a redundant instance
  wstats: Mapping[tuple[int, int], WaitStats] = attrs.field(factory=dict)
  # the visibility findings, one per statement (accesses.VisColumns)
  vis: Optional["VisColumns"] = None
  # why the verdict came from exploring (the program is outside the exact fragment): a note every dynamic pass's
  # diagnostics carry; `incomplete`: the exploration ran out of states, so they come from one execution
  note: Optional[str] = None
  incomplete: bool = False

class Pass:
  """One diagnostic code: `run` reports it on an unrolled program and what was found about it."""
  code: ClassVar[str]
  # its findings come from the execution or the exploration (they carry the note of a verdict the exploration gave);
  # the others read the program alone
  dynamic: ClassVar[bool] = False
  def run(self, u: Unrolled, found: Findings) -> list[Diagnostic]: raise NotImplementedError

def _who(u: Unrolled, i: int) -> str: return "the host" if i == 0 else u.seqs[i].name
def _sig(u: Unrolled, s: int) -> str: return u.signals[s].name
def _launch(u: Unrolled, i: int, pos: int) -> int: return u.where(i, pos)[0]
def _op(u: Unrolled, i: int, pos: int): return u.seqs[i].ops[u.where(i, pos)[1]]
def _key(u: Unrolled, i: int, pos: int): return (i, u.where(i, pos)[1])
def _expr_of(op, shift: int = 0) -> Expr:
  return Expr(None if op[2] is None else Ref(op[2]), op[3] - (shift if op[2] is not None else 0))
def _expr(op, shift: int = 0) -> str: return str(_expr_of(op, shift))

def _at(u: Unrolled, i: int, pos: int) -> tuple:
  """Where an edit before sequence i's step `pos` goes: (block name, 0-based index in its body, words). The host's
  implicit submit (and its kernel-argument writes, shown at the queue they patch) happens before its first
  statement: the edit goes at the start of the host block, not at the queue's line."""
  st = u.stmt(i, pos)
  hosts = u.program.hosts
  if i == 0 and (st is None or isinstance(st, (Queue, Buffer))):
    k = _launch(u, i, pos)   # (the host block that runs first in that launch)
    n, host = next(((n, h) for n, h in enumerate(hosts) if in_launches(h.launches, k)), (0, None))
    if host is None: return "host", 0, "in a new `host { ... }` block (the program has none; its submit is implicit)"
    if not host.body:
      return host_block(n), 0, f"inside its block{f' (line {host.span.line})' if host.span else ''}, before its implicit submit"
    return host_block(n), 0, f"at the start of its block, before line {host.body[0].span.line} (its submit is implicit)"
  if i == 0:
    n, host = next((n, h) for n, h in enumerate(hosts) if any(x is st for x in h.body))   # (st is one of its statements)
    block, body = host_block(n), host.body
  else: block, body = u.seqs[i].name, u.seqs[i].queue.body
  idx = next((n for n, x in enumerate(body) if x is st), 0)
  return block, idx, f"before {u.line(i, pos)}"

def _new_span(u: Unrolled, i: int, pos: int) -> Optional[Span]:
  """A zero-width span where an inserted statement goes (its diagnostics, if any, are told apart by it)."""
  sp = u.span(i, pos)
  return Span(sp.file, sp.line, sp.column, sp.line, sp.column) if sp is not None else None

def _sortkey(u: Unrolled, i: int, pos: int):
  sp = u.span(i, pos)
  return (_launch(u, i, pos), sp.line if sp else 0, sp.column if sp else 0, i)

class OverflowAnalysis(Pass):
  """`var + n` / `var - n` evaluating outside 0..2**32-1 in a checked launch (literals are the static check's)."""
  code = "overflow"
  def run(self, u: Unrolled, found: Findings) -> list[Diagnostic]:
    # every `var + n` of every launch at once; the statements are walked only when one of them overflows
    cols = u.sync_columns()
    polls = {(op[2], op[3]) for s in u.seqs for op in s.ops if op[0] == POLL and op[2] is not None} if u.polls else ()
    if all(0 <= env[v] + n <= U32_MAX for v, n in polls for env in u.envs):   # (a poll's value is 32-bit too)
      if cols is not None:
        E, per = cols
        if all(((x := E[:, var[var > 0]] + off[var > 0]) >= 0).all() and (x <= U32_MAX).all() for _, _, _, var, off in per):
          return []
      else:
        sums = {(op[2], op[3]) for s in u.seqs for op in s.ops if op[0] <= WRITE and op[2] is not None}
        if all(0 <= env[v] + n <= U32_MAX for v, n in sums for env in u.envs): return []
    out = []
    for s in u.seqs:
      for idx, op in enumerate(s.ops):
        if (op[0] not in _SYNC and op[0] != POLL) or op[2] is None: continue
        top = U64_MAX if s.index == 0 and op[0] == WAIT else U32_MAX   # the host's waits compare 64 bits
        for k in range(1, u.launches + 1):
          if s.partial and s.absent(idx, k): continue   # (not there in launch k: a `launches` clause)
          raw = u.raw(op, k)
          if not 0 <= raw <= top:
            st = s.stmts[idx]
            what = ("epoch" if isinstance(st, Epoch) else f"poll {u.cell_name(op[1])}" if op[0] == POLL else
                    f"{'wait' if op[0] == WAIT else 'signal'} {u.signals[op[1]].name}")
            out.append(Diagnostic("overflow", f"{_expr(op)} = {raw} in launch {k} ({op[2]} = {u.envs[k - 1][op[2]]}) "
                                  f"is outside the {'64-bit range of a host wait' if top == U64_MAX else '32-bit signal range'} "
                                  f"0..{top} ({what} in {_who(u, s.index)})",
                                  st.span if st is not None else None, extra={"launch": k, "value": raw}))
            break
    return out

def deadlock_diags(u: Unrolled, done, values) -> list[tuple]:
  """(statement key, launch, Diagnostic) for every blocked wait of a state where nothing can run."""
  return [x[:3] for x in _deadlocks(u, done, values)]

def _text(u: Unrolled, i: int, pos: int) -> str:
  from ..lang.format import format_stmt
  st = u.stmt(i, pos)
  return "the implicit submit" if st is None else f"`{format_stmt(st)}` (line {st.span.line})" if st.span else f"`{format_stmt(st)}`"

def _fix(u: Unrolled, cyc: list, state: dict, edges: dict, values) -> tuple:
  """One edit that breaks the cycle: a wait of a hop asking for the value the signal already has (written with its
  var, e.g. the previous launch's `kick - 1`), else a signal (or submit) moved above the wait that blocks its writer.
  Returns (the fix note or None, the first kind as an Edit or None)."""
  out, edit = [], None
  for h in cyc:
    st = state[h]
    if st[0] != "wait": continue
    _, s, need, pos = st
    op = _op(u, h, pos)
    if op[2] is not None and values[s] < need:
      new = Expr(Ref(op[2]), op[3] - (need - values[s]))
      out.append(f"{_who(u, h)}'s {_text(u, h, pos)} waiting for `{_sig(u, s)} >= {new}` instead (what {_sig(u, s)} "
                 f"already holds{', the previous launch' + chr(39) + 's value' if need - values[s] == 1 else ''})")
      block, idx, _ = _at(u, h, pos)
      edit = Edit(block, idx, (Wait(Ref(_sig(u, s)), new, span=u.span(h, pos)),), out[-1], replace=True)
      break
  for n, h in enumerate(cyc):
    nx = cyc[(n + 1) % len(cyc)]
    w = next((p for j, p in edges[h] if j == nx), None)
    hs = state[nx]
    if w is None or hs[0] != "wait" or _launch(u, nx, w) != _launch(u, nx, hs[3]) or u.stmt(nx, w) is None: continue
    out.append(f"{_who(u, nx)}'s {_text(u, nx, w)} moved above its {_text(u, nx, hs[3])}")
    break
  return ("fix: either edit breaks the cycle: " + "; or ".join(out) if len(out) > 1 else
          f"fix: the cycle breaks with {out[0]}" if out else None), edit

def _cell_id(u: Unrolled, x: int) -> int:
  """The cell whose word value slot x (counted after the signals) holds."""
  return max(c for c in range(len(u.cells)) if u.cell_slot[c] <= x - len(u.signals))

def word_name(u: Unrolled, x: int) -> str:
  """The polled word in value slot x as the program names it (`cq[60:64]`; a rebound buffer's launch memory `x@2[0:4]`)."""
  c = _cell_id(u, x)
  b, lo = u.cells[c]
  if not u.rebound[b]: return u.cell_name(c)
  return polled_word(u.buffers[b].name, lo, x - len(u.signals) - u.cell_slot[c] + 1)

def _components(succ: dict) -> dict:
  """Each node's strongly connected component (a frozenset of nodes) of the graph `succ` (node -> successors):
  Tarjan's algorithm, iterative (a stuck state has one node per blocked sequence)."""
  index, low, on, stack, comp, n = {}, {}, set(), [], {}, 0
  for root in succ:
    if root in index: continue
    work = [(root, iter(succ[root]))]
    index[root] = low[root] = n
    n += 1
    stack.append(root)
    on.add(root)
    while work:
      v, it = work[-1]
      w = next(it, None)
      if w is not None:
        if w not in index:
          index[w] = low[w] = n
          n += 1
          stack.append(w)
          on.add(w)
          work.append((w, iter(succ[w])))
        elif w in on: low[v] = min(low[v], index[w])
        continue
      work.pop()
      if work: low[work[-1][0]] = min(low[work[-1][0]], low[v])
      if low[v] == index[v]:
        members = []
        while True:
          w = stack.pop()
          on.discard(w)
          members.append(w)
          if w == v: break
        c = frozenset(members)
        for w in members: comp[w] = c
  return comp

@attrs.define
class _Stuck:
  """A state where nothing can run, as a wait-for graph: each blocked sequence, and the steps of the others it waits
  for (a write or store that would let it go on; a gate waits for the host's submit)."""
  u: Unrolled
  done: Sequence[int]      # steps each sequence ran
  values: Sequence[int]    # each signal's value, then each polled word's
  # blocked seq -> ("wait", signal, value needed, pos) | ("poll", value slot, (value, mask), pos) | ("gate", launch, host pos)
  state: dict[int, tuple]
  edges: dict[int, list[tuple[int, int]]]   # blocked seq -> [(other seq, position of the step it waits for)]
  comp: dict[int, frozenset[int]]   # each blocked sequence's strongly connected component (_components)
  written: set[int]        # the signals some statement writes
  stored: set[int]         # the polled words (cells) some statement stores into
  cycles: dict[int, Optional[list[int]]] = attrs.field(factory=dict)   # the shortest cycle through it (memo)

  @classmethod
  def of(cls, u: Unrolled, done, values) -> _Stuck:
    lens = [len(s.ops) for s in u.seqs]
    state: dict[int, tuple] = {}
    for i in range(len(u.seqs)):
      if done[i] >= u.total(i): continue
      k, idx = divmod(done[i], lens[i])
      g = u.gate_pos(i, k + 1) if i and idx == 0 else 0
      if done[0] < g: state[i] = ("gate", k + 1, g)
      else:
        op = u.seqs[i].ops[idx]
        if op[0] == POLL:   # the slots after the signals are the polled words
          state[i] = ("poll", len(u.signals) + u.slot(op[1], op[5], k + 1), (u.value(op, k + 1), op[4]), done[i] + 1)
        else: state[i] = ("wait", op[1], u.value(op, k + 1, i == 0), done[i] + 1)
    future = _future(u, state, done, values)
    edges: dict[int, list[tuple[int, int]]] = {}
    for i, st in state.items():
      if st[0] == "gate":
        edges[i] = [(0, st[2])]
        continue
      edges[i] = []
      ok = (lambda v, need=st[2]: v & need[1] == need[0]) if st[0] == "poll" else (lambda v, need=st[2]: v >= need)
      for j in state:
        w = next((p for p, v in future.get((j, st[1]), ()) if ok(v)), None)
        if w is not None: edges[i].append((j, w))
    # a cause is named by its strongly connected component of the wait-for graph, not by the shortest cycle through
    # the wait it was reached from: the host waiting on itself and on a queue it has not submitted is one cause
    # whichever blocked wait leads to it (shortest cycles differ by start: {host} from the host, {q1, host} from q1)
    return cls(u, done, values, state, edges, _components({i: [j for j, _ in edges.get(i, ()) if j in state] for i in state}),
               {op[1] for s in u.seqs for op in s.ops if op[0] == WRITE},
               {c for s in u.seqs for op in s.ops if op[0] == ACCESS and len(op) > 2 for c, *_ in op[2]})

  def cycle(self, i: int) -> Optional[list[int]]:
    """The shortest path i -> ... -> i over the wait-for edges (BFS), as the list of sequences from i."""
    if i in self.cycles: return self.cycles[i]
    prev, frontier, last = {}, [i], None
    while frontier and last is None:
      nxt = []
      for a in frontier:
        for b, _ in self.edges.get(a, ()):
          if b == i:
            last = a
            break
          if b not in prev and b in self.state:
            prev[b] = a
            nxt.append(b)
        if last is not None: break
      frontier = nxt
    path = None
    if last is not None:
      path = [last]
      while path[-1] != i: path.append(prev[path[-1]])
      path = path[::-1]
    self.cycles[i] = path
    return path

  def key(self, h: int) -> tuple[int, int]:
    st = self.state[h]
    return _key(self.u, h, st[3] if st[0] != "gate" else self.done[h] + 1)

  def group(self, i: int) -> tuple[frozenset, int]:
    """The cause i's wait ends in: its own cycle, its own missing write, or (following the wait-for edges) another's;
    and the sequence where it was found."""
    seen, frontier = {i}, [i]
    while frontier:
      a = frontier.pop(0)
      if self.cycle(a): return frozenset(self.key(h) for h in self.comp[a]), a
      if self.state[a][0] != "gate" and not self.edges[a]: return frozenset([_key(self.u, a, self.state[a][3])]), a
      for b, _ in self.edges.get(a, ()):
        if b not in seen and b in self.state:
          seen.add(b)
          frontier.append(b)
    return frozenset([_key(self.u, i, self.state[i][3])]), i

  def cond(self, st: tuple) -> str:
    """What a blocked wait or poll waits for."""
    return f"{word_name(self.u, st[1])} & {st[2][1]:#x} == {st[2][0]:#x}" if st[0] == "poll" else f"{_sig(self.u, st[1])} >= {st[2]}"

  def writers(self, i: int, what: str) -> str:
    """The sequences that would write what blocked sequence i waits for, each blocked itself."""
    u = self.u
    return "; " + ", ".join(f"{_who(u, j)} would write {what} at {u.line(j, w)} (launch {_launch(u, j, w)}) but is "
                            f"{'itself ' if j != i else ''}blocked{' before it' if j == i else ''}" for j, w in self.edges[i])

def _future(u: Unrolled, state: dict[int, tuple], done, values) -> dict[tuple[int, int], list[tuple[int, int]]]:
  """(seq, signal or polled slot) -> [(pos, value)]: the writes (stores) the blocked sequences have not run yet, of
  what some blocked sequence waits for."""
  lens = [len(s.ops) for s in u.seqs]
  wanted = {st[1] for st in state.values() if st[0] == "wait"}
  polled = {st[1] for st in state.values() if st[0] == "poll"}
  future: dict[tuple[int, int], list[tuple[int, int]]] = {}
  for j in state:
    ops = u.seqs[j].ops
    for p in range(done[j], u.total(j)):
      op = ops[p % lens[j]]
      if u.seqs[j].partial and u.seqs[j].absent(p % lens[j], p // lens[j] + 1): continue
      if op[0] == WRITE and op[1] in wanted: future.setdefault((j, op[1]), []).append((p + 1, u.value(op, p // lens[j] + 1)))
      elif polled and op[0] == ACCESS and len(op) > 2:
        for c, pin, keep, bits in op[2]:
          x = len(u.signals) + u.slot(c, pin, p // lens[j] + 1)
          if x in polled: future.setdefault((j, x), []).append((p + 1, values[x] & keep | bits[p // lens[j]]))
  return future

def _deadlocks(u: Unrolled, done, values) -> list[tuple]:
  """(statement key, launch, Diagnostic, group, root) per blocked wait: `group` names the cycle (or the wait with no
  writer left) that is the cause, `root` whether this wait is that cause's report (else it only waits on it)."""
  g = _Stuck.of(u, done, values)
  report = {"wait": _wait_deadlock, "poll": _poll_deadlock}
  return [d for i, st in g.state.items() if st[0] != "gate" and (d := report[st[0]](g, i)) is not None]

def _poll_deadlock(g: _Stuck, i: int) -> Optional[tuple]:
  u, (_, s, need, pos) = g.u, g.state[i]
  op, k = _op(u, i, pos), _launch(u, i, pos)
  if op[2] is None and op[3] & ~op[4]: return None   # a literal outside the mask: the static check's `deadlock`
  name = word_name(u, s)
  msg = f"{_who(u, i)} polls forever for {g.cond(g.state[i])} (launch {k}); {name} is stuck at {g.values[s]:#x}"
  if _cell_id(u, s) not in g.stored: msg += f", and no `write` stores into {name}"
  elif not g.edges[i]: msg += ", and no store left in the checked launches makes it so"
  else: msg += g.writers(i, name)
  grp, cause = g.group(i)
  return (_key(u, i, pos), k, Diagnostic("deadlock", msg, u.span(i, pos), extra={"launch": k, "queue": _who(u, i),
          "signal": name, "needed": need[0], "mask": need[1], "value": g.values[s]}), grp, cause == i)

def _wait_deadlock(g: _Stuck, i: int) -> tuple:
  u, (_, s, need, pos) = g.u, g.state[i]
  k, sig = _launch(u, i, pos), _sig(u, s)
  msg = f"{_who(u, i)} waits forever for {sig} >= {need} (launch {k}); {sig} is stuck at {g.values[s]}"
  written = s in g.written
  if not written: msg += f", and nothing writes {sig}"
  elif not g.edges[i]: msg += f", and no write left in the checked launches brings it to {need}"
  else: msg += g.writers(i, sig)
  related, notes = [], []
  if not written and sig.endswith(".timeline"):
    d = sig[:-len(".timeline")]
    notes.append(f"`epoch` waits for the previous launch's `signal {d}.timeline = {d}.epoch`: end the launch with "
                 f"a finalizer that waits for the device's work and writes it")
  grp, cause = g.group(i)
  cyc, edit = g.cycles.get(i), None
  if cyc:
    names = [_who(u, h) for h in cyc]
    notes.append("cycle of waits: " + " -> ".join(names + names[:1]))
    related += _hops(g, cyc)
    fix, edit = _fix(u, cyc, g.state, g.edges, g.values)
    if fix: notes.append(fix)
  return (_key(u, i, pos), k, Diagnostic("deadlock", msg, u.span(i, pos), related=tuple(related), notes=tuple(notes),
          extra={"launch": k, "queue": _who(u, i), "signal": sig, "needed": need, "value": g.values[s]}, fix=edit),
          grp, cause == i or bool(cyc))

def _hops(g: _Stuck, cyc: list[int]) -> list[Related]:
  """A cycle's hops: each sequence, what it waits for, and where the next one writes it (or submits it)."""
  u, out = g.u, []
  for n, h in enumerate(cyc):
    nx = cyc[(n + 1) % len(cyc)]
    hs = g.state[h]
    if hs[0] == "gate":
      when = (f"runs its submit at {u.line(0, hs[2])}" if u.stmt(0, hs[2]) is not None else
              f"starts launch {hs[1]} (queues no `submit` names are submitted before its first statement)")
      out.append(Related(f"{_who(u, h)} is not submitted for launch {hs[1]} until the host {when}", u.span(h, g.done[h] + 1)))
    else:
      w = next(p for j, p in g.edges[h] if j == nx)
      out.append(Related(f"{_who(u, h)} {'polls' if hs[0] == 'poll' else 'waits'} for {g.cond(hs)} (launch {_launch(u, h, hs[3])}), "
                         f"which {_who(u, nx)} writes only at {u.line(nx, w)}", u.span(h, hs[3])))
  return out

def _waits_for(x: dict) -> str:
  """The condition of a deadlock's blocked wait (or poll: its extra has the mask) from its extra fields."""
  return f"{x['signal']} & {x['mask']:#x} == {x['needed']:#x}" if "mask" in x else f"{x['signal']} >= {x['needed']}"

class DeadlockAnalysis(Pass):
  code = "deadlock"
  dynamic = True
  def run(self, u: Unrolled, found: Findings) -> list[Diagnostic]:
    """Over the stuck states (done, values): the one the happens-before pass ends in, or the explorer's."""
    best: dict = {}
    for stuck in found.deadlocks:
      for key, k, d, grp, root in _deadlocks(u, stuck.done, stuck.values):
        if key not in best or k < best[key][0]: best[key] = (k, d, grp, root)
    # one report per cause: a cycle once (at its first member in source order), a wait no write can satisfy once;
    # the waits that are blocked only because of it (the host waiting for a queue of the cycle) go under it
    roots: dict = {}
    for key in sorted(best, key=lambda x: _order(u, best[x][1])):
      k, d, grp, root = best[key]
      if root and grp not in roots: roots[grp] = d
    for key in sorted(best, key=lambda x: _order(u, best[x][1])):
      k, d, grp, root = best[key]
      if roots.get(grp) is d: continue
      # a cause whose own members are reported elsewhere (or are queues not submitted): its first wait reports it
      if grp not in roots:
        roots[grp] = d
        continue
      r = roots[grp]
      if any(x.span == d.span for x in r.related): continue  # a member of the cycle: already a hop of its report
      roots[grp] = attrs.evolve(r, related=r.related + (Related(f"{d.extra['queue']} also waits forever for "
                                f"{_waits_for(d.extra)} (launch {d.extra['launch']}), behind this deadlock", d.span),))
    return list(roots.values())

def _order(u: Unrolled, d: Diagnostic):
  return (d.extra["launch"], d.span.file, d.span.line, d.span.column) if d.span else (d.extra["launch"], "", 0, 0)

def _rng(u: Unrolled, a) -> str:
  # (a kernel-argument block is named by the exec it serves; its byte range says nothing to the reader)
  return "" if u.buffers[a[0]].name.startswith("the kernel arguments") else f"[{a[1]}:{a[2]}]"

def _stmt_line(u: Unrolled, i: int, p: int) -> Optional[int]:
  """The line of the statement at sequence i's step p; None for the host's implicit submit (and what it patches)."""
  st = u.stmt(i, p)
  return None if st is None or isinstance(st, (Queue, Buffer)) or st.span is None else st.span.line

def _where(u: Unrolled, i: int, p: int) -> str:
  """`at line N`, or for the host's implicit submit of a queue `when it submits QUEUE (implicitly)`."""
  st = u.stmt(i, p)
  if i == 0 and isinstance(st, Queue): return f"when it submits {st.name} (implicitly, before its first statement)"
  return f"at {u.line(i, p)}"

class RaceAnalysis(Pass):
  code = "race"
  dynamic = True
  LIMIT = 1000   # racing pairs listed (then one line counting the rest)
  def _next_write(self, u: Unrolled, j: int, q: int) -> Optional[int]:
    """Position of sequence j's first signal write after position q (per-sequence table: racy programs are big)."""
    if j not in self.nxt:
      ops = u.seqs[j].ops
      nxt: list[Optional[int]] = [None] * len(ops)
      after: Optional[int] = None
      for idx in range(len(ops) - 1, -1, -1):
        nxt[idx] = after
        if ops[idx][0] == WRITE and type(u.seqs[j].stmts[idx]) is not Timestamp: after = idx   # an NV timestamp's 0 orders nothing
      self.nxt[j] = (nxt, after)  # after: the first write of a launch
    nxt, first = self.nxt[j]
    L = len(u.seqs[j].ops)
    k, idx = divmod(q - 1, L)
    if u.seqs[j].partial:   # (writes absent from a launch do not count: a `launches` clause)
      ops, stmts = u.seqs[j].ops, u.seqs[j].stmts
      return next((p + 1 for p in range(q, u.total(j)) if ops[p % L][0] == WRITE and type(stmts[p % L]) is not Timestamp
                   and not u.seqs[j].absent(p % L, p // L + 1)), None)
    if (n := nxt[idx]) is not None: return k * L + n + 1
    return (k + 1) * L + first + 1 if first is not None and k + 1 < u.launches else None

  def run(self, u: Unrolled, found: Findings) -> list[Diagnostic]:
    self.nxt: dict = {}
    out, limit = [], self.LIMIT
    races = sorted(found.races.values(), key=lambda r: (r.rank, r.first.seq, r.first.pos, r.then.seq, r.then.pos))
    for r in races[:limit]:
      first, second = sorted((r.first, r.then), key=lambda a: _sortkey(u, a.seq, a.pos))
      (j, q, aj), (i, p, ai) = (first.seq, first.pos, first.access), (second.seq, second.pos, second.access)
      b = u.buffers[ai[0]].name
      kj, ki = _launch(u, j, q), _launch(u, i, p)
      msg = (f"{_who(u, i)} {_RW[ai[3]]} {b}{_rng(u, ai)} {_where(u, i, p)} (launch {ki}) and {_who(u, j)} {_RW[aj[3]]} "
             f"{b}{_rng(u, aj)} {_where(u, j, q)} (launch {kj}) with no happens-before order between them")
      # the missing order: a signal sequence j already writes after its access, and a wait on it before the other
      ops, L = u.seqs[j].ops, len(u.seqs[j].ops)
      w = self._next_write(u, j, q)
      block, idx, where = _at(u, i, p)
      edit = None
      if w is not None:
        op = ops[(w - 1) % L]
        e = _expr_of(op, ki - _launch(u, j, w))
        hint = (f"add `wait {_sig(u, op[1])} >= {e}` in {_who(u, i)} {where}"
                f" ({_who(u, j)} signals it at {u.line(j, w)}, after its access)")
        edit = Edit(block, idx, (Wait(Ref(_sig(u, op[1])), e, span=_new_span(u, i, p)),), hint)
      else:
        hint = (f"{_who(u, j)} writes no signal after {u.line(j, q)}: add one there, and a wait on it in {_who(u, i)} "
                f"{where}")
      span = u.host_span if i == 0 and isinstance(u.stmt(i, p), Queue) and u.host_span is not None else u.span(i, p)
      out.append(Diagnostic("race", msg, span,
                            related=(Related(f"{_who(u, j)} {_RW[aj[3]]} {b}{_rng(u, aj)} here (launch {kj})", u.span(j, q)),),
                            notes=(hint,), fix=edit,
                            extra={"launch": ki, "queue": _who(u, i), "buffer": b, "range": [ai[1], ai[2]],
                                   "line": _stmt_line(u, i, p), "mode": _RW[ai[3]],
                                   "other": {"launch": kj, "queue": _who(u, j), "range": [aj[1], aj[2]],
                                             "line": _stmt_line(u, j, q), "mode": _RW[aj[3]]}}))
    if len(races) > limit:  # a racy program of thousands of statements: the first ones say what is wrong
      out.append(Diagnostic("race", f"{len(races) - limit} more racing pairs of statements are not listed", None,
                            extra={"more": len(races) - limit}))
    return out

def _host_reset(u: Unrolled, w: tuple, users, sig: str) -> Optional[Edit]:
  """The fix for the host lowering (resetting) a signal the previous launch may still use: before the reset, wait for
  that launch to finish on every device whose queues use the signal, by the device timeline (when the program
  writes it: `signal D.timeline = D.epoch` ends a launch, tinygrad's HCQGraph waits for it the same way)."""
  if w[0] != 0: return None
  written = {u.signals[op[1]].name for s in u.seqs[1:] for op in s.ops if op[0] == WRITE}
  devs = sorted({u.seqs[j].device for j in users if j} & {n[:-len(".timeline")] for n in written if n.endswith(".timeline")})
  if not devs: return None
  block, idx, where = _at(u, 0, w[1])
  waits = tuple(epoch_wait(d, span=_new_span(u, 0, w[1])) for d in devs)
  text = (f"add {' and '.join(f'`wait {x.signal} >= {x.value}`' for x in waits)} to the host {where}: it resets "
          f"{sig} while the previous launch may still use it, and must wait for that launch first")
  return Edit(block, idx, waits, text)

class SignalRaceAnalysis(Pass):
  code = "signal-race"
  dynamic = True
  def run(self, u: Unrolled, found: Findings) -> list[Diagnostic]:
    """Over `found.signal_races`: unordered writes to one signal from two sequences."""
    out, seen = [], set()
    for r in found.signal_races:
      a, b = sorted((r.first, r.second), key=lambda x: _sortkey(u, *x))
      key = (_key(u, *a), _key(u, *b))
      if key in seen: continue
      seen.add(key)
      s = _sig(u, _op(u, *b)[1])
      host, other = (b, a) if b[0] == 0 else (a, b)
      fix = _host_reset(u, host, [other[0]], s) if _launch(u, *host) > _launch(u, *other) else None
      out.append(Diagnostic("signal-race", f"{_who(u, b[0])} writes {s} at {u.line(*b)} (launch {_launch(u, *b)}) and "
                            f"{_who(u, a[0])} writes it at {u.line(*a)} (launch {_launch(u, *a)}) with no order between them",
                            u.span(*b), related=(Related(f"{_who(u, a[0])} writes {s} here (launch {_launch(u, *a)})", u.span(*a)),),
                            extra={"launch": _launch(u, *b), "queue": _who(u, b[0]), "signal": s}, fix=fix))
    return out

class NonMonotonicAnalysis(Pass):
  """One report per lowering write statement (its first launch), naming the unordered uses of the signal."""
  code = "non-monotonic"
  dynamic = True
  def run(self, u: Unrolled, found: Findings) -> list[Diagnostic]:
    """Over `found.nonmono`: a lowering write and the other use of its signal."""
    by: dict = {}
    for r in sorted(found.nonmono, key=lambda x: (_launch(u, *x.write), _sortkey(u, *x.other))):
      w, o, cur, new = r.write, r.other, r.current, r.new
      by.setdefault(_key(u, *w), []).append((w, o, cur, new))
    out = []
    for uses in by.values():
      w, o, cur, new = uses[0]
      s = _sig(u, _op(u, *w)[1])
      def use(o): return "wait on" if _op(u, *o)[0] == WAIT else "write"
      frm = f" from {cur} to {new}" if cur is not None else ""
      related, seen = [], set()
      for _, o2, _, _ in uses:
        if _key(u, *o2) in seen: continue
        seen.add(_key(u, *o2))
        related.append(Related(f"{_who(u, o2[0])} may {use(o2)} {s} here (launch {_launch(u, *o2)})", u.span(*o2)))
      fix = _host_reset(u, w, [o2[0] for _, o2, _, _ in uses], s)
      out.append(Diagnostic("non-monotonic", f"{_who(u, w[0])} lowers {s}{frm} at {u.line(*w)} (launch {_launch(u, *w)}) "
                            f"while {_who(u, o[0])} may {use(o)} it at {u.line(*o)} (launch {_launch(u, *o)}): the lowering "
                            f"write is not ordered against every other use of {s}", u.span(*w), related=tuple(related),
                            notes=((f"fix: {fix.text}",) if fix else ()) + _NV_TIMESTAMP * (type(u.stmt(*w)) is Timestamp),
                            extra={"launch": _launch(u, *w), "queue": _who(u, w[0]), "signal": s}, fix=fix))
    return out

_NV_TIMESTAMP = ("on NV a `timestamp` is a semaphore release of 0 into the signal's value, the GPU timer at +8 (tinygrad's "
                 "NVCommandQueue.timestamp is signal(s, 0)): time into a signal nothing waits on",)

class _RedundantWait(LazyDiagnostic):
  __slots__ = ()
  code, severity = "redundant-wait", "warning"

class _Visibility(LazyDiagnostic):
  __slots__ = ()
  code, severity = "visibility", "warning"

def _previous_launch(st) -> bool:
  """Is `st` `wait D.timeline >= D.epoch - 1` (the previous launch is done with device D)?"""
  return st.signal.name.endswith(".timeline") and st == epoch_wait(st.signal.name[:-len(".timeline")])

class RedundantWaitAnalysis(Pass):
  """A wait whose satisfying write is already ordered before it (or that the initial value satisfies) in every checked
  launch. `epoch` is exempt: it also orders the queue after work outside the program (tinygrad waits its timeline
  for the same reason even when the host already did). In a one-launch check so is a wait for the previous launch on
  another device (`wait D.timeline >= D.epoch - 1`): it holds trivially in launch 1 and orders the launches after it."""
  code = "redundant-wait"
  def run(self, u: Unrolled, found: Findings) -> list[Diagnostic]:
    stmts = [s.stmts for s in u.seqs]
    waits = [(i, st) for (i, idx), w in found.wstats.items() if w.run == w.redundant and w.run
             and (st := stmts[i][idx]) is not None and type(st) is not Epoch and not (u.launches == 1 and _previous_launch(st))]
    who = [_who(u, i) for i in range(len(u.seqs))]
    def build(x):  # the text of the few shown: a program can draw tens of thousands
      i, st = x
      return (f"this wait never orders anything: in every checked launch {st.signal.name} >= {st.value} already holds "
              f"by happens-before when {who[i]} gets here", (), {"queue": who[i]})
    return _RedundantWait.many([st.span for _, st in waits], build, waits)

class VisibilityAnalysis(Pass):
  """A compute read that the packets let see stale data (docs/check.md, "Cache semantics of the packets"): the host's
  write to the reading device's memory with no `barrier` (the HDP flush) between them, or, on gfx942, an earlier access
  of the device's compute queues to the bytes with no L2 invalidation (`barrier`, `timestamp`) between it and the read
  of what another device, a copy queue or the host wrote since."""
  code = "visibility"
  def run(self, u: Unrolled, found: Findings) -> list[Diagnostic]:
    """Over `found.vis`: the happens-before pass's findings as columns (`accesses.VisColumns`)."""
    if found.vis is None or not len(found.vis): return []
    # a program can draw a warning for every other read: each one's span is looked up here (the report sorts by it),
    # its text only when it is shown, from per-sequence and per-buffer text built once
    who = [_who(u, i) for i in range(len(u.seqs))]
    dev = [s.device for s in u.seqs]
    arch = {d.name: device_arch(d) for d in u.program.devices}
    stmts = [s.stmts for s in u.seqs]
    ops = [s.ops for s in u.seqs]
    bufs = [f"{b.name}" for b in u.buffers]
    where = [f" (on {b.device.name if b.device else 'host'})" for b in u.buffers]
    host = u.host_span
    def at(i, pos):
      k, idx = u.where(i, pos)
      sp = st.span if (st := stmts[i][idx]) is not None else host
      return sp, f"line {sp.line}" if sp is not None and sp.line > 0 else "the implicit submit", k
    def build(x):
      i, idx, m, p, j, jdx, jm, q, kind, k, kdx, km, kp = x
      a, aj = ops[i][idx][1][m], ops[j][jdx][1][jm]
      (_, li, ki), (spj, lj, kj) = at(i, p), at(j, q)
      b, d = bufs[a[0]], dev[i]
      rng, wrng = f"{b}{_rng(u, a)}", f"{b}{_rng(u, aj)}"   # (a kernel-argument block: no byte range)
      related = [Related(f"{who[j]} writes {wrng} here (launch {kj})", spj)]
      if kind == 0:
        msg = (f"{who[i]} on {d} reads {rng}{where[a[0]]} at {li} (launch {ki}), written by the host at {lj} (launch "
               f"{kj}), with no `barrier` on {d} between them: the host's writes reach {d}'s memory through the HDP, "
               f"which only `barrier` flushes")
      else:
        ak = ops[k][kdx][1][km]
        spk, lk, kk = at(k, kp)
        by = f"{who[j]} on {dev[j]}" if j else "the host"
        msg = (f"{who[i]} on {d} ({arch[d]}) reads {rng}{where[a[0]]} at {li} (launch {ki}), written by {by} at {lj} "
               f"(launch {kj}), but {d}'s L2 may still hold the bytes {who[k]} accessed at {lk} (launch {kk}): no L2 "
               f"invalidation on {d} follows that access before this read (on {arch[d]} a `signal` writes L2 back "
               f"without invalidating it; a `barrier` after the wait invalidates it)")
        related.append(Related(f"{who[k]} {_RW[ak[3]]} {b}[{ak[1]}:{ak[2]}] here (launch {kk}), leaving it in {d}'s L2", spk))
      return (msg, tuple(related), {"launch": ki, "queue": who[i], "buffer": b, "cause": ("hdp", "l2")[kind]})
    v = found.vis
    spans = [st.span if (st := stmts[i][x]) is not None else host for i, x in zip(v.seq, v.op)]
    return _Visibility.many(spans, build, v.rows())

class UnusedSignalAnalysis(Pass):
  """A signal written but waited on by nobody. `D.timeline` is exempt: it is the device's completion signal, waited on
  outside the program (tinygrad's synchronize and the next launch's host wait)."""
  code = "unused-signal"
  def run(self, u: Unrolled, found: Findings) -> list[Diagnostic]:
    # usually every signal is waited on somewhere early (a queue's first waits, a finalizer): stop looking then
    exempt = {n for n, sig in enumerate(u.signals) if sig.name.endswith(".timeline")}
    waited: set = set()
    cols = u.sync_columns()
    for n, s in enumerate(u.seqs):
      if cols is not None:
        _, kind, sig, _, _ = cols[1][n]
        waited.update(np.unique(sig[kind == WAIT]).tolist())
      else: waited.update([op[1] for op in s.ops if op[0] == WAIT])
      if len(waited | exempt) == len(u.signals): return []
    first: dict = {}
    for s in u.seqs:
      for idx, op in enumerate(s.ops):
        # an NV `timestamp` writes its signal too (0), for a reader of the timer outside the program: no finding
        if op[0] == WRITE and op[1] not in waited and op[1] not in first and type(s.stmts[idx]) is not Timestamp: first[op[1]] = (s.index, idx)
    out = []
    for sid, (i, idx) in first.items():
      name = u.signals[sid].name
      if name.endswith(".timeline"): continue
      st = u.seqs[i].stmts[idx]
      out.append(Diagnostic("unused-signal", f"{name} is written but no queue or host statement waits on it", st.span,
                            severity="warning", related=(Related(f"{name} is declared here", u.signals[sid].span),)))
    return out

class StaleInputAnalysis(Pass):
  """A command that, in launch k, reads `x@j` with j < k: launch j's memory of a rebound buffer, i.e. an input of an
  earlier launch (tinygrad's HCQGraph replaces each input's address at every call; a command it missed keeps reading
  the memory of the call it was captured at). One report per access of a statement, at its first such launch."""
  code = "stale-input"
  def run(self, u: Unrolled, found: Findings) -> list[Diagnostic]:
    out = []
    for i, pins in u.pinned.items():
      seq = u.seqs[i]
      for (idx, n), j in sorted(pins.items()):
        op = seq.ops[idx]
        acc = op[6] if op[0] == POLL else op[1][n]   # a poll's read of its word
        # its first launch after launch j + 1 (a statement absent from a launch does not run there)
        k = next((k for k in range(j + 2, u.launches + 1) if not seq.absent(idx, k)), None)
        if acc[3] == W or k is None: continue   # written, or never run in a later launch
        st, b = seq.stmts[idx], u.buffers[acc[0]]
        sl = f"{b.name}@{j + 1}[{acc[1]}:{acc[2]}]"
        out.append(Diagnostic("stale-input", f"{seq.name} reads {sl} at line {st.span.line if st.span else 0} in launch {k}: "
                              f"`{b.name}` is rebound, so launch {k}'s input is new memory ({b.name}@{k}), and this reads "
                              f"launch {j + 1}'s (an input replacement missed)", st.span,
                              related=(Related(f"`{b.name}` is declared rebound here: launch {j + 1} and launch {k} each have "
                                               f"memory of their own", b.span),),
                              notes=(f"read `{b.name}` (the launch's own input) instead of `{b.name}@{j + 1}`, if launch {k} "
                                     f"means its own input",),
                              extra={"launch": k, "queue": seq.name, "buffer": b.name, "input_launch": j + 1}))
    return out

class IncompleteAnalysis(Pass):
  """The note that exploring a program outside the exact fragment ran out of states (`--max-states`): the dynamic
  passes' diagnostics then come from one execution, and problems may be missing."""
  code = "incomplete"
  def run(self, u: Unrolled, found: Findings) -> list[Diagnostic]:
    if not found.incomplete: return []
    assert found.note is not None   # (an incomplete exploration says why)
    return [Diagnostic("incomplete", found.note, u.host_span or (u.program.queues[0].span if u.program.queues else None),
                       severity="note")]

# every pass, once, in the order they run (diagnostics at one place keep this order: the report's sort is stable)
PASSES: tuple[Pass, ...] = (OverflowAnalysis(), DeadlockAnalysis(), RaceAnalysis(), SignalRaceAnalysis(), NonMonotonicAnalysis(),
                            IncompleteAnalysis(), RedundantWaitAnalysis(), VisibilityAnalysis(), UnusedSignalAnalysis(),
                            StaleInputAnalysis())
