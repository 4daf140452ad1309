"""Schedules that find what `check` reports (`hcqdsl run FILE --schedules K`, `explore`).

A uniformly random interleaving rarely delays one queue for long, and a race often needs exactly that (the copy that
should have waited runs only after another queue's five kernels). So the K schedules are:

1. the time-ordered one (the emulator's default; its length, k steps, sizes the PCT schedules);
2. one per race and deadlock `check` reports over the run's launches, steered by its witness (runtime/replays.py: the
   access that comes later in the program is run to its end before the earlier one starts);
3. the rest by PCT, probabilistic concurrency testing (Burckhardt, Kothari, Musuvathi, Nagarakatte, ASPLOS 2010): each
   actor (the host, each queue's engine) gets a random priority d..d+n-1, the highest-priority ready actor runs one step
   (a packet, a host statement), and at d-1 steps drawn from 1..k the actor that ran is demoted below every other
   (priority 1, 2, ...). A bug of depth d (d ordering constraints among the steps must hold) is hit with probability at
   least 1/(n k^(d-1)) per schedule. The depth cycles 1, 2, ..., D over the PCT schedules, so each depth gets its share.

A schedule fails when an `expect` fails, it hangs or faults, or one of check's races happened in it: its two accesses
ran in the order the witness names (observed on every schedule, not only the steered ones). Final memory that differs
between schedules is a race seen at run time, as before (`compare`)."""
from __future__ import annotations
import math, random
from typing import Optional, Union
import attrs
from ..ir import Program
from .execute import run, compare, as_program, RunResult
from .replays import is_statement

__all__ = ["PCT", "explore", "run_pct", "Exploration", "Schedule", "DEPTH"]

DEPTH = 3   # PCT depths cycled over the schedules: 1..DEPTH

class PCT:
  """One PCT schedule: the policy the emulator asks (`pick` among the ready actors, `ran` after each step that made
  progress). `actors`: how many there are (the host is index 0, the engines 1..n-1); `steps`: k, the length of a run
  in steps (the time-ordered run's packets and host steps)."""
  def __init__(self, seed: int, depth: int, actors: int, steps: int):
    if depth < 1: raise ValueError(f"PCT depth must be at least 1, not {depth}")
    rng = random.Random(seed)
    prios = list(range(depth, depth + actors))
    rng.shuffle(prios)
    self.seed, self.depth, self.actors, self.steps = seed, depth, actors, steps
    self.priority = dict(enumerate(prios))
    points = rng.sample(range(1, steps + 1), min(depth - 1, steps))
    self.changes = {k: i for i, k in enumerate(sorted(points), start=1)}   # step -> the priority the actor that ran it drops to
    self.count = 0

  def pick(self, cands: list):
    return max(cands, key=lambda a: self.priority.get(a.index, 0))

  def ran(self, actor) -> None:
    self.count += 1
    if (p := self.changes.get(self.count)) is not None: self.priority[actor.index] = p

  def hit_bound(self) -> float:
    """The paper's lower bound on hitting a given bug of this schedule's depth: 1 / (n k^(d-1))."""
    return 1.0 / (self.actors * max(self.steps, 1) ** (self.depth - 1))

class _Observer:
  """Watches the statements of check's races in a run (the emulator's gate protocol, without holding anything): the
  trace-event counts at which each (queue, launch, line) first and last ran."""
  def __init__(self, parties: set):
    self.parties, self.events = parties, 0
    self.first: dict = {}
    self.last: dict = {}
  def bind(self, img, emu) -> None: pass
  def admit(self, emu, cands: list) -> list: return cands
  def executed(self, actor, launch, line) -> None:
    self.events += 1
    keys = [(actor.name, launch, line)]
    if actor.name == "host" and line is not None and is_statement(actor, launch, line, launch, None): keys.append(("host", launch, None))
    for key in keys:
      if key in self.parties:
        self.first.setdefault(key, self.events)
        self.last[key] = self.events
  def before(self, a: tuple, b: tuple) -> bool:
    """Statement a ran to its end before statement b started."""
    return a in self.last and b in self.first and self.last[a] < self.first[b]

@attrs.define
class Schedule:
  """One schedule run: which (`kind`: time-ordered, witness, pct), in words (`label`), its result, and what of check's
  races and deadlocks happened in it."""
  index: int
  kind: str
  label: str
  result: RunResult
  happened: list = attrs.field(factory=list)   # sentences: a race of check's seen happening (its two accesses reversed)
  seed: Optional[int] = None
  depth: Optional[int] = None
  @property
  def failed(self) -> bool: return not self.result.ok or bool(self.happened)
  def reasons(self) -> list:
    r = self.result
    out = list(self.happened)
    out += [f"expect line {e.line}: {e.message}" for e in r.expects if not e.ok]
    if r.hang is not None: out.append("hang: " + str(r.hang).splitlines()[0])
    if r.fault is not None: out.append("fault: " + str(r.fault).splitlines()[0])
    return out

@attrs.define
class Exploration:
  """What `explore` ran: every schedule, the final memory differing between them, and PCT's parameters (n actors, k
  steps, depths 1..depth)."""
  file: str
  schedules: list
  differences: list     # execute.Race: a buffer whose final bytes differ between schedules
  actors: int
  steps: int
  depth: int
  races: int            # check's races and deadlocks with a witness (0: not steered)
  @property
  def failed(self) -> list: return [s for s in self.schedules if s.failed]
  @property
  def ok(self) -> bool: return not self.failed and not self.differences
  def miss_bound(self, d: int) -> Optional[float]:
    """An upper bound on the probability that every PCT schedule of depth d missed a given bug of depth d."""
    m = sum(1 for s in self.schedules if s.kind == "pct" and s.depth == d)
    if not m: return None
    p = 1.0 / (self.actors * max(self.steps, 1) ** (d - 1))
    return math.exp(m * math.log1p(-p)) if p < 1 else 0.0
  def lines(self, show: int = 3) -> list:
    kinds = {k: sum(s.kind == k for s in self.schedules) for k in ("time-ordered", "witness", "pct")}
    parts = ["the time-ordered one"] if kinds["time-ordered"] else []
    if kinds["witness"]: parts.append(f"{kinds['witness']} steered by check's witnesses")
    if kinds["pct"]: parts.append(f"{kinds['pct']} PCT")
    bad = self.failed
    out = []
    for s in bad[:show]:
      out.append(f"schedule {s.index} ({s.label}) failed:")
      out += [f"  {x}" for x in s.reasons()]
    if len(bad) > show: out.append(f"... and {len(bad) - show} more failed schedules")
    out += [str(d) for d in self.differences]
    bounds = []
    for d in range(1, self.depth + 1):
      m = sum(1 for s in self.schedules if s.kind == "pct" and s.depth == d)
      if m and (b := self.miss_bound(d)) is not None:
        bounds.append(f"depth {d}: each of {m} schedules hits it with probability >= 1/{self.actors * self.steps ** (d - 1):,}" +
                      (f", all miss it with probability <= {_pct(b)}" if b < 0.995 else ""))
    if bounds: out.append(f"PCT over {self.actors} actors and {self.steps} steps, a given bug of " + "; ".join(bounds))
    out.append(f"{self.file}: {len(self.schedules)} schedules ({', '.join(parts)}), {len(self.schedules) - len(bad)} ok, "
               f"{len(bad)} failed")
    return out
  def to_json(self) -> dict:
    """`run --schedules --format json`: as one run's report (`file`, `ok`, `runs`: each schedule's result, `races`: the
    final memory differing between them), with each schedule's kind, label, PCT seed and depth, and why it failed."""
    return {"file": self.file, "ok": self.ok, "runs": [s.result.to_json() for s in self.schedules],
            "races": [d.to_json() for d in self.differences],
            "schedules": [{"index": s.index, "kind": s.kind, "label": s.label, "seed": s.seed, "depth": s.depth,
                           "failed": s.failed, "reasons": s.reasons()} for s in self.schedules],
            "pct": {"actors": self.actors, "steps": self.steps, "depth": self.depth,
                    "miss_bound": {str(d): self.miss_bound(d) for d in range(1, self.depth + 1)}},
            "steered_by": self.races}

def _pct(p: float) -> str:
  return f"{100 * p:.1f}%" if p >= 0.001 else f"{p:.1e}"

def _party_key(x) -> tuple:
  return (x.queue, x.launch, x.line)

def _said(prog: Program, x) -> str:
  from ..lang.format import format_stmt
  blocks = [prog.host] if x.queue == "host" else [q for q in prog.queues if q.name == x.queue]
  for b in blocks:
    for st in (b.body if b is not None else ()):
      if st.span is not None and st.span.line == x.line: return f"{x.queue}'s `{format_stmt(st)}` (line {x.line}, launch {x.launch})"
  return f"{x.queue} (launch {x.launch})"

def explore(program: Union[Program, str], schedules: int, depth: int = DEPTH, steer: bool = True, observe: bool = True,
            launches: int = 1, var_values: Optional[dict] = None, filename: str = "<input>", **kw) -> Exploration:
  """Run `schedules` schedules of `program` (see the module's docstring): the time-ordered one, one per witness of
  check's races and deadlocks (`steer`), then PCT with depths cycling 1..`depth`; `observe`: a schedule in which one
  of check's races happened fails. Neither: check is not run. `kw` go to `run`."""
  from ..check import check
  from ..check.witness import witnesses, read_witness, Race as WitnessRace
  from .replays import replay
  if schedules < 1: raise ValueError("schedules must be at least 1")
  if depth < 1: raise ValueError("depth must be at least 1")
  prog = as_program(program, filename)
  kw = dict(kw, launches=launches, var_values=var_values, filename=filename)
  base = run(prog, **kw)
  steps = sum(q.packets for q in base.queues.values()) + base.host_steps
  actors = len(prog.queues) + 1
  out = [Schedule(1, "time-ordered", "the time-ordered schedule", base)]
  w = witnesses(prog, check(prog, launches, var_values), launches, var_values) if steer or observe else None
  found = read_witness(w, prog).witnesses if w is not None else []
  races = [x for x in found if isinstance(x, WitnessRace)]
  def seen(res_observer: _Observer) -> list:
    return [f"check's race at line {x.at['line'] if x.at else '?'} happened: {_said(prog, x.first)} ran before {_said(prog, x.then)}"
            for x in races if res_observer.before(_party_key(x.first), _party_key(x.then))]
  parties = {_party_key(p) for x in races for p in (x.first, x.then)} if observe else set()
  if steer and w is not None and found and len(out) < schedules:
    w = dict(w, witnesses=w["witnesses"][:schedules - len(out)])
    for x, r in zip(found, replay(prog, w, **{k: v for k, v in kw.items() if k not in ("launches", "var_values")})):
      what = f"check's witness of the {x.code} at line {x.at['line'] if x.at else '?'}"
      head = r.lines[0].split(": ", 1)[-1] if r.lines else ""
      out.append(Schedule(len(out) + 1, "witness", what, r.result, [f"{x.code} {head}"] + r.lines[1:] if r.happened else []))
  j = 0
  while len(out) < schedules:
    d = 1 + j % depth
    pol = PCT(j, d, actors, steps)
    obs = _Observer(parties) if parties else None
    res = run(prog, gate=obs, policy=pol, **kw)
    res.schedule = f"PCT seed {j}, depth {d}"
    out.append(Schedule(len(out) + 1, "pct", f"PCT seed {j}, depth {d}: `--pct {j} --depth {d}` runs it alone", res,
                        seen(obs) if obs is not None else [], j, d))
    j += 1
  diffs = compare([s.result for s in out], labels=[f"schedule {s.index}" for s in out])
  return Exploration(base.file, out, diffs, actors, steps, depth, len(found))

def run_pct(program: Union[Program, str], seed: int, depth: int = DEPTH, launches: int = 1, filename: str = "<input>", **kw) -> RunResult:
  """One PCT schedule alone (`hcqdsl run FILE --pct SEED --depth D`): the one `explore` numbers `seed` with that depth."""
  prog = as_program(program, filename)
  kw = dict(kw, launches=launches, filename=filename)
  base = run(prog, **{k: v for k, v in kw.items() if k != "trace"})
  steps = sum(q.packets for q in base.queues.values()) + base.host_steps
  res = run(prog, policy=PCT(seed, depth, len(prog.queues) + 1, steps), **kw)
  res.schedule = f"PCT seed {seed}, depth {depth}"
  return res
