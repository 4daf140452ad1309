"""Replaying `check`'s witnesses (check/witness.py) on the emulator: the race happens, or the hang.

A race's witness orders two accesses against the program's order: the emulator holds the engine of the earlier one
(`then`) before that statement until the later one (`first`) has run to its end, one packet at a time and otherwise in
time order (a traced run, so `--trace` shows it too). The host is held before the step its statement is, learnt from
the run of the other order, where the host ran it freely (its steps are the same in every run). The bytes of the raced
range are read before and after each of the two statements; then the same two statements run in the program's order,
and the report shows what each read or left in both orders. A witness order the emulator cannot run (the held engine
is the only one left) is reported as not reproduced. A deadlock's witness runs in time order, then seeds 0..SEEDS-1,
until a run hangs at its waits."""
from __future__ import annotations
import pathlib
from typing import Any, Callable, Optional, Union
import attrs
from ..ir import Program
from ..check.witness import Witnesses, Race, Deadlock, Access, Memory, load_witness, read_witness, memories
from ..target.layout import kernargs_region

__all__ = ["Replay", "replay", "is_statement", "SEEDS"]

SEEDS = 20
SHOW = 16   # bytes of a range shown

@attrs.define
class _Party:
  queue: str
  launch: int
  line: Optional[int]
  mode: str
  text: str = ""
  state: str = "pending"          # pending -> running -> done
  started: int = -1               # the order things happened in: the gate's count of events at its start and end
  ended: int = -1
  before: Optional[bytes] = None  # the raced bytes just before it started, and when it was done
  after: Optional[bytes] = None
  @property
  def at(self) -> str:
    """Where it is, for the report: `c0 line 8`, or the host's implicit submit (its `line` is None)."""
    return f"{self.queue} line {self.line}" if self.line is not None else f"{self.queue}'s implicit submit"
  step: Optional[int] = None      # the host's: its step count once the statement ran (the host's steps are the same in every run)

class _Gate:
  """What the emulator consults (`Emulator.gate`): `admit` filters the actors that may run next, `executed` is told
  every packet (engine) or statement (host) that ran."""
  def __init__(self, first: _Party, then: _Party, buffer: str, mem: Memory, lo: int, hi: int, host_step: Optional[int] = None):
    self.first, self.then, self.buffer, self.mem, self.lo, self.hi = first, then, buffer, mem, lo, hi
    self.host_step = host_step   # `then` is the host's: the step it is (learnt from a run where the host ran it freely)
    self.released, self.infeasible, self.read, self.events = False, False, None, 0

  def bind(self, img, emu) -> None:
    """The run's image and emulator, once built: where the raced range is in each launch (an exec's kernel
    arguments: the bytes of its block the host patches at each submit, in place)."""
    self.emu = emu
    if self.mem.queue is not None:
      self.lo, self.hi, a = _patched(img, self.mem)
      self.addr = lambda k: a
      return
    a, _ = img.buffers[self.buffer]
    vals = img.var_values.get(f"{self.buffer}.addr")
    self.addr = lambda k: a if not vals else a - vals[0] + vals[min(k, len(vals)) - 1]

  def _bytes(self, p: _Party) -> bytes:
    try: return self.emu.read(self.addr(p.launch) + self.lo, min(self.hi - self.lo, 4096))
    except Exception: return b""   # (a range the emulator does not map: check's bounds error says so)

  @staticmethod
  def _at(a) -> tuple:
    if a.name == "host": return (None, None)
    launch, st = a.locate()
    return launch, st.line if st else None

  def admit(self, emu, cands: list) -> list:
    for p in (self.first, self.then):   # the bytes just before a statement starts, and once it has finished
      e = next((x for x in emu.engines if x.name == p.queue), None)
      if e is None: continue
      here = self._at(e) if e.busy() else (None, None)
      if p.state == "pending" and here == (p.launch, p.line): p.before = self._bytes(p)
      elif p.state == "running" and here != (p.launch, p.line): p.state, p.after, p.ended = "done", self._bytes(p), self.events
    if self.released or self.first.state == "done" or self.then.state != "pending": return cands
    free = [a for a in cands if not self._held(a)]
    if not free:  # the order cannot happen here
      self.released = self.infeasible = True
      return cands
    return free

  def _held(self, a) -> bool:
    """`a` is about to run the `then` statement (the host: its next step is that one)."""
    if a.name != self.then.queue: return False
    if a.name == "host": return self.host_step is not None and a.steps == self.host_step - 1
    return self._at(a) == (self.then.launch, self.then.line)

  def finish(self) -> None:
    """The run is over: a statement still running then ended with it."""
    for p in (self.first, self.then):
      if p.state == "running": p.state, p.after, p.ended = "done", self._bytes(p), self.events

  @property
  def in_order(self) -> bool:
    """The first statement had ended before the second started."""
    return self.first.state == self.then.state == "done" and self.first.ended <= self.then.started

  def executed(self, actor, launch, line) -> None:
    self.events += 1
    for p in (self.first, self.then):
      if actor.name != p.queue or not is_statement(actor, launch, line, p.launch, p.line) or p.state == "done": continue
      if p.state == "pending": p.started = self.events
      if actor.name == "host":   # a host statement is one step
        p.before = p.before or self._bytes(p)
        p.state, p.after, p.ended, p.step = "done", self._bytes(p), self.events, actor.steps
      else: p.state = "running"

def is_statement(actor, launch, line, want_launch: int, want_line: Optional[int]) -> bool:
  """The step `actor` just executed (in `launch`, at `line`) is the witness party's statement: the same launch and
  line, or, for the host's implicit submit (no line), its rewrite of a `rewritten` buffer before the launch's first
  submit (check puts that write there; the emulator's step carries the line of the submit it precedes)."""
  if launch != want_launch: return False
  if line == want_line: return True
  return want_line is None and actor.name == "host" and bool(actor.m.events) and actor.m.events[-1].text.startswith("rewrite ")

def _patched(img, mem: Memory) -> tuple:
  """(lo, hi, block address): the bytes of an exec's kernel-argument block the host patches (the queue's memory
  patches inside it; none: the whole block)."""
  assert mem.queue is not None and mem.index is not None   # (an exec's kernel arguments, not a buffer)
  r = next(r for r in img.regions if r.name == kernargs_region(mem.queue, mem.index))
  offs = [p.offset - r.addr for p in img.queue(mem.queue).mem_patches if r.addr <= p.offset < r.addr + r.size]
  return (min(offs), max(offs) + 4, r.addr) if offs else (0, r.size, r.addr)

@attrs.define
class Replay:
  """One witness replayed: `happened` when the witness's order (race) or hang (deadlock) was seen on the emulator."""
  code: str
  happened: bool
  lines: list
  result: object = None   # the RunResult of the witness's run
  def __str__(self): return "\n".join(self.lines)

def _hex(b: Optional[bytes]) -> str:
  if b is None: return "(not seen)"
  return " ".join(f"{x:02x}" for x in b[:SHOW]) + (" ..." if len(b) > SHOW else "")

def _stmt_text(prog: Program, queue: str, line: Optional[int]) -> str:
  from ..lang.format import format_stmt
  blocks = prog.hosts if queue == "host" else [q for q in prog.queues if q.name == queue]
  for b in blocks:
    for st in b.body:
      if st.span is not None and st.span.line == line: return f"`{format_stmt(st)}`"
  return "its implicit submit" if queue == "host" else "?"

def _party(prog: Program, x: Access) -> _Party:
  return _Party(x.queue, x.launch, x.line, x.mode or "accesses", _stmt_text(prog, x.queue, x.line))

def _line(w) -> str: return str(w.at["line"]) if w.at else "?"

def _race(prog: Program, w: Race, kw: dict) -> Replay:
  from .execute import run
  f, t = w.first, w.then
  lo, hi = max(f.range[0], t.range[0]), min(f.range[1], t.range[1])
  mem = memories(prog)[w.buffer]
  out, host_step = {}, None
  # the order with the host's statement first runs first: the host runs it freely, and the other order holds the host
  # before that step
  for order in ("program", "witness") if t.queue == "host" else ("witness", "program"):
    a, b = (f, t) if order == "witness" else (t, f)
    pa, pb = (_party(prog, x) for x in (a, b))
    gate = _Gate(pa, pb, w.buffer, mem, lo, hi, host_step)
    out[order] = (run(prog, gate=gate, **kw), gate)
    gate.finish()
    host_step = pa.step
  res, g = out["witness"]
  def name(p): return f"{p.queue}'s {p.text} (line {p.line}, launch {p.launch})" if p.line is not None else f"{p.at} (launch {p.launch})"
  head = f"race at line {_line(w)}: {name(g.first)} before {name(g.then)}"
  if g.infeasible or not g.in_order:
    why = ("the emulator cannot run that order (the held queue was the only one left)" if g.infeasible else
           "the run ended before both statements ran" + (f" ({'hang' if res.hang else 'fault'})" if not res.ok else "")
           if g.first.state != "done" or g.then.state != "done" else
           f"{g.then.queue} ran its statement first "
           f"({'the other order never ran its step, so it could not be held' if g.then.queue == 'host' else 'it could not be held'})")
    return Replay("race", False, [f"{head}: not reproduced: {why}"], res)
  rng = f"{w.buffer}[{g.lo}:{g.hi}]"   # (an exec's kernel arguments: the bytes of its block the host patches)
  def did(p: _Party) -> str:
    reads, writes = "read" in p.mode, "write" in p.mode
    saw = f"read {rng} = {_hex(p.before)}" if reads else ""
    left = f"left {rng} = {_hex(p.after)}" if writes else ""
    return " and ".join(x for x in (saw, left) if x)
  lines = [f"{head}: replayed", f"  1. {g.first.at} {did(g.first)}", f"  2. {g.then.at} {did(g.then)}"]
  _, p = out["program"]
  if p.first.state == "done" and p.then.state == "done":
    lines.append(f"  in the program's order ({p.first.at.split(' ', 1)[1]} first): {p.first.at} {did(p.first)}; {p.then.at} {did(p.then)}")
    # what differs: the range's bytes once both ran (the last writer's), and what each reader saw
    seen = {(x.queue, x.line): x.before for x in (p.first, p.then) if "read" in x.mode}
    diff = [f"{rng} ends {_hex(g.then.after)} here and {_hex(p.then.after)} in the program's order"] if g.then.after != p.then.after else []
    diff += [f"{x.at} reads {_hex(x.before)} here and {_hex(seen[x.queue, x.line])} in the program's order"
             for x in (g.first, g.then) if "read" in x.mode and x.before != seen.get((x.queue, x.line))]
    lines.append("  the race happened: " + "; ".join(diff) if diff else
                 "  the race happened in this order, with the same bytes as the program's order (these kernels write "
                 "nothing that differs: give them an implementation to see data change)")
  return Replay("race", True, lines, res)

def _deadlock(prog: Program, w: Deadlock, kw: dict) -> Replay:
  from .execute import run
  want = {(b.queue, b.line) for b in w.blocked}
  for seed in [None, *range(SEEDS)]:
    res = run(prog, seed=seed, trace=kw.pop("trace", False) if seed is None else False, **kw)
    if res.hang is not None and want & {(b.queue, b.line) for b in res.hang.blocked}:
      sched = "in time order" if seed is None else f"with --seed {seed}"
      return Replay("deadlock", True, [f"deadlock at line {_line(w)}: replayed {sched}", str(res.hang)], res)
  return Replay("deadlock", False, [f"deadlock at line {_line(w)}: not reproduced in time order or seeds "
                                    f"0..{SEEDS - 1} (check explores every interleaving; these are a few)"], res)

_REPLAYS: dict[type, Callable[[Program, Any, dict], Replay]] = {Race: _race, Deadlock: _deadlock}

def replay(program: Union[Program, str], witness: Union[Witnesses, dict, str, pathlib.Path], filename: str = "<input>",
           **kw) -> list:
  """Each witness of `witness` (the JSON check/witness.py writes, its file, or read_witness's record of it) replayed
  on `program`: a list of Replay. `kw` go to `run` (kernels, timeout_us, ...); the launches and var values are the
  witness's."""
  from .execute import as_program
  prog = as_program(program, filename)
  w = witness if isinstance(witness, Witnesses) else \
    read_witness(witness, prog) if isinstance(witness, dict) else read_witness(load_witness(witness), prog, str(witness))
  kw = dict(kw, launches=w.launches, var_values=w.var_values or None)
  return [_REPLAYS[type(x)](prog, x, dict(kw)) for x in w.witnesses]
