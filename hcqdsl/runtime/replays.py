"""Replaying `check`'s witnesses (check/witness.py) on the emulator: the race happens, or the hang.

A race's witness orders two accesses against the program's order: the emulator holds the engine of the earlier one
(`then`) before that statement until the later one (`first`) has run to its end, one packet at a time and otherwise
in time order (a traced run, so `--trace` shows it too). The bytes of the raced range are read before and after each
of the two statements; then the same two statements run in the program's order, and the report shows what each read
or left in both orders. A witness order the emulator cannot run (the held engine is the only one left) is reported as
not reproduced. A deadlock's witness runs in time order, then seeds 0..SEEDS-1, until a run hangs at its waits."""
from __future__ import annotations
import json, pathlib
from typing import Optional, Union
import attrs
from ..ir import Program

__all__ = ["Replay", "replay", "load_witness", "validate_witness", "SEEDS"]

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

class _Gate:
  """What the emulator consults (`Emulator.gate`): `admit` filters the actors that may run next, `executed` is told
  every packet (engine) or statement (host) that ran."""
  def __init__(self, first: _Party, then: _Party, buffer: str, lo: int, hi: int):
    self.first, self.then, self.buffer, self.lo, self.hi = first, then, buffer, lo, hi
    self.released, self.infeasible, self.read, self.events = False, False, None, 0

  def bind(self, img, emu) -> None:
    """The run's image and emulator, once built: where the raced range is in each launch."""
    a, _ = img.buffers[self.buffer]
    vals = img.var_values.get(f"{self.buffer}.addr")
    self.addr = lambda k: a if not vals else a - vals[0] + vals[min(k, len(vals)) - 1]
    self.emu = emu

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
    free = [a for a in cands if not (a.name == self.then.queue and self._at(a) == (self.then.launch, self.then.line))]
    if not free:  # the order cannot happen here
      self.released = self.infeasible = True
      return cands
    return free

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
      if actor.name != p.queue or (launch, line) != (p.launch, p.line) or p.state == "done": continue
      if p.state == "pending": p.started = self.events
      if actor.name == "host":   # a host statement is one step
        p.before = p.before or self._bytes(p)
        p.state, p.after, p.ended = "done", self._bytes(p), self.events
      else: p.state = "running"

@attrs.define
class Replay:
  """One witness replayed: `happened` when the witness's order (race) or hang (deadlock) was seen on the emulator."""
  code: str
  happened: bool
  lines: list
  result: object = None   # the RunResult of the witness's run
  def __str__(self): return "\n".join(self.lines)

MAX_WITNESS_FILE = 256 << 20   # bytes read at most (check writes a few KB; a device like /dev/zero never ends)

def load_witness(path) -> dict:
  """A witness file written by `hcqdsl check --witness`; ValueError with the reason when it is not one (its fields are
  checked against the program by `validate_witness`)."""
  try:
    with open(path, "rb") as f: b = f.read(MAX_WITNESS_FILE + 1)
  except OSError as e: raise ValueError(f"{path}: {e.strerror or e}") from None
  if len(b) > MAX_WITNESS_FILE: raise ValueError(f"{path}: not a witness file (more than {MAX_WITNESS_FILE} bytes)")
  try: w = json.loads(b)
  except json.JSONDecodeError as e: raise ValueError(f"{path}:{e.lineno}:{e.colno}: not JSON ({e.msg})") from None
  except ValueError as e: raise ValueError(f"{path}: not JSON ({e})") from None   # (not UTF-8)
  except RecursionError:
    from ..lift.manifest import too_deep
    raise ValueError(f"{path}:{too_deep(b.decode('utf-8', errors='replace'))}: not JSON (nested too deeply)") from None
  if not isinstance(w, dict) or w.get("format") != "hcqdsl-witness" or not isinstance(w.get("witnesses"), list):
    raise ValueError(f"{path}: not a witness file (write one with `hcqdsl check FILE --witness {path}`)")
  return w

_MODES = (None, "reads", "writes", "reads and writes")

def validate_witness(w: dict, prog: Program, path: str = "<witness>") -> None:
  """ValueError `PATH: KEY: expected ..., got ...` for the first field of `w` that is not what `check --witness` writes
  for `prog`: every key present, of its type, in its range (launches 1 .. MAX_LAUNCHES, each party's launch within
  them, a range inside its buffer, a line holding a statement of its queue, names of the program's queues, buffers,
  signals and vars)."""
  from ..ir import MAX_LAUNCHES, U32_MAX, U64_MAX
  from ..check.static import check_launches
  def fail(at: str, want: str, v) -> None:
    got = json.dumps(v) if v is not _MISSING else "nothing (missing)"
    raise ValueError(f"{path}: {at}: expected {want}, got {got[:80] + ' ...' if len(got) > 80 else got}")
  def get(o: dict, at: str, key: str): return o.get(key, _MISSING)
  def obj(v, at: str) -> dict:
    if type(v) is not dict: fail(at, "an object", v)
    return v
  def num(o: dict, at: str, key: str, lo: int, hi: int, null: bool = False):
    v = get(o, at, key)
    if v is None and null: return None
    if type(v) is not int or not lo <= v <= hi: fail(f"{at}.{key}" if at else key, f"an integer in {lo}..{hi}" + (" or null" * null), v)
    return v
  def text(o: dict, at: str, key: str, among=None, null: bool = False):
    v = get(o, at, key)
    if v is None and null: return None
    if type(v) is not str or (among is not None and v not in among):
      fail(f"{at}.{key}" if at else key, ("a string" if among is None else "one of " + ", ".join(f"`{x}`" for x in among if x is not None))
           + (" or null" * null), v)
    return v
  stmts: dict = {}   # queue (or "host") -> lines of its statements
  for q in prog.queues: stmts[q.name] = {s.span.line for s in q.body if s.span is not None}
  stmts["host"] = {s.span.line for s in prog.host.body if s.span is not None} if prog.host is not None else set()
  nlines = (prog.source or "").count("\n") + 1
  text(w, "", "format", ("hcqdsl-witness",))
  num(w, "", "version", 1, 1)
  text(w, "", "file")
  n = num(w, "", "launches", 1, MAX_LAUNCHES)
  vv = obj(get(w, "", "var_values"), "var_values")
  for k, v in vv.items():
    if k not in prog.vars: fail("var_values", f"names of vars of the program ({', '.join(prog.vars) or 'none'})", k)
    num(vv, "var_values", k, 0, U32_MAX)
  if short := check_launches(prog, n, vv): raise ValueError(f"{path}: launches: {n}, but {short[0].message}")
  ws = get(w, "", "witnesses")
  if type(ws) is not list: fail("witnesses", "a list", ws)
  buffers = {b.name: b for b in prog.buffers}
  signals = {s.name for s in prog.signals}
  def party(o, at: str, code: str) -> None:
    o = obj(o, at)
    q = text(o, at, "queue", tuple(stmts))
    num(o, at, "launch", 1, n)
    line = get(o, at, "line")
    if line is not None and (type(line) is not int or line not in stmts[q]):
      fail(f"{at}.line", f"the line of a statement of {q} ({', '.join(map(str, sorted(stmts[q]))) or 'none'}) or null", line)
    if code == "race": text(o, at, "mode", _MODES, null=True)
  for i, x in enumerate(ws):
    at = f"witnesses[{i}]"
    x = obj(x, at)
    code = text(x, at, "code", ("race", "deadlock"))
    a = get(x, at, "at")
    if a is not None:
      a = obj(a, f"{at}.at")
      num(a, f"{at}.at", "line", 1, nlines)
      num(a, f"{at}.at", "column", 1, (1 << 31) - 1)
    text(x, at, "message")
    if code == "race":
      b = text(x, at, "buffer", tuple(buffers))
      rs = []
      for side in ("first", "then"):
        party(get(x, at, side), f"{at}.{side}", code)
        r = get(x[side], "", "range")
        if type(r) is not list or len(r) != 2 or any(type(v) is not int for v in r) or not 0 <= r[0] < r[1] <= buffers[b].size:
          fail(f"{at}.{side}.range", f"[start, end] with 0 <= start < end <= {buffers[b].size} (the size of `{b}`)", r)
        rs.append(r)
      if max(rs[0][0], rs[1][0]) >= min(rs[0][1], rs[1][1]): fail(f"{at}.then.range", f"a range overlapping first's {rs[0]}", rs[1])
    else:
      bl = get(x, at, "blocked")
      if type(bl) is not list or not bl: fail(f"{at}.blocked", "a non-empty list", bl)
      for j, o in enumerate(bl):
        party(o, f"{at}.blocked[{j}]", code)
        text(o, f"{at}.blocked[{j}]", "signal", tuple(sorted(signals)))
        num(o, f"{at}.blocked[{j}]", "needed", 0, U64_MAX if o["queue"] == "host" else U32_MAX)   # (the host's waits: 64 bits)

_MISSING = object()

def _hex(b: Optional[bytes]) -> str:
  if b is None: return "(not seen)"
  return " ".join(f"{x:02x}" for x in b[:SHOW]) + (" ..." if len(b) > SHOW else "")

def _stmt_text(prog: Program, queue: str, line: Optional[int]) -> str:
  from ..lang.format import format_stmt
  blocks = [prog.host] if queue == "host" else [q for q in prog.queues if q.name == queue]
  for b in blocks:
    if b is None: continue
    for st in b.body:
      if st.span is not None and st.span.line == line: return f"`{format_stmt(st)}`"
  return "its implicit submit" if queue == "host" else "?"

def _race(prog: Program, w: dict, kw: dict) -> Replay:
  from .execute import run
  f, t = w["first"], w["then"]
  lo, hi = max(f["range"][0], t["range"][0]), min(f["range"][1], t["range"][1])
  out = {}
  for order in ("witness", "program"):
    a, b = (f, t) if order == "witness" else (t, f)
    pa, pb = (_Party(x["queue"], x["launch"], x["line"], x.get("mode") or "accesses", _stmt_text(prog, x["queue"], x["line"]))
              for x in (a, b))
    gate = _Gate(pa, pb, w["buffer"], lo, hi)
    out[order] = (run(prog, gate=gate, **kw), gate)
    gate.finish()
  res, g = out["witness"]
  def name(p): return f"{p.queue}'s {p.text} (line {p.line}, launch {p.launch})"
  head = f"race at line {w['at']['line'] if w.get('at') else '?'}: {name(g.first)} before {name(g.then)}"
  if g.infeasible or not g.in_order:
    why = ("the emulator cannot run that order (the held queue was the only one left)" if g.infeasible else
           "the run ended before both statements ran" + (f" ({'hang' if res.hang else 'fault'})" if not res.ok else "")
           if g.first.state != "done" or g.then.state != "done" else
           f"{g.then.queue} ran its statement first "
           f"({'the host is not held: it runs its steps in order' if g.then.queue == 'host' else 'it could not be held'})")
    return Replay("race", False, [f"{head}: not reproduced: {why}"], res)
  rng = f"{w['buffer']}[{lo}:{hi}]"
  def did(p: _Party) -> str:
    reads, writes = "read" in p.mode, "write" in p.mode
    saw = f"read {rng} = {_hex(p.before)}" if reads else ""
    left = f"left {rng} = {_hex(p.after)}" if writes else ""
    return " and ".join(x for x in (saw, left) if x)
  lines = [f"{head}: replayed", f"  1. {g.first.queue} line {g.first.line} {did(g.first)}",
           f"  2. {g.then.queue} line {g.then.line} {did(g.then)}"]
  _, p = out["program"]
  if p.first.state == "done" and p.then.state == "done":
    lines.append(f"  in the program's order (line {p.first.line} first): {p.first.queue} line {p.first.line} {did(p.first)}; "
                 f"{p.then.queue} line {p.then.line} {did(p.then)}")
    # what differs: the range's bytes once both ran (the last writer's), and what each reader saw
    seen = {(x.queue, x.line): x.before for x in (p.first, p.then) if "read" in x.mode}
    diff = [f"{rng} ends {_hex(g.then.after)} here and {_hex(p.then.after)} in the program's order"] if g.then.after != p.then.after else []
    diff += [f"{x.queue} line {x.line} reads {_hex(x.before)} here and {_hex(seen[x.queue, x.line])} in the program's order"
             for x in (g.first, g.then) if "read" in x.mode and x.before != seen.get((x.queue, x.line))]
    lines.append("  the race happened: " + "; ".join(diff) if diff else
                 "  the race happened in this order, with the same bytes as the program's order (these kernels write "
                 "nothing that differs: give them an implementation to see data change)")
  return Replay("race", True, lines, res)

def _deadlock(prog: Program, w: dict, kw: dict) -> Replay:
  from .execute import run
  want = {(b["queue"], b["line"]) for b in w["blocked"]}
  for seed in [None, *range(SEEDS)]:
    res = run(prog, seed=seed, trace=kw.pop("trace", False) if seed is None else False, **kw)
    if res.hang is not None and want & {(b.queue, b.line) for b in res.hang.blocked}:
      sched = "in time order" if seed is None else f"with --seed {seed}"
      return Replay("deadlock", True, [f"deadlock at line {w['at']['line'] if w.get('at') else '?'}: replayed {sched}", str(res.hang)], res)
  return Replay("deadlock", False, [f"deadlock at line {w['at']['line'] if w.get('at') else '?'}: not reproduced in time order or seeds "
                                    f"0..{SEEDS - 1} (check explores every interleaving; these are a few)"], res)

def replay(program: Union[Program, str], witness: Union[dict, str, pathlib.Path], filename: str = "<input>",
           **kw) -> list:
  """Each witness of `witness` (a dict from check/witness.py, or its file) replayed on `program`: a list of Replay.
  `kw` go to `run` (kernels, timeout_us, ...); the launches and var values are the witness's."""
  from .execute import as_program
  w = load_witness(witness) if not isinstance(witness, dict) else witness
  prog = as_program(program, filename)
  validate_witness(w, prog, str(witness) if not isinstance(witness, dict) else "<witness>")
  kw = dict(kw, launches=w.get("launches", 2), var_values=w.get("var_values") or None)
  out = []
  for x in w["witnesses"]:
    if x.get("code") == "race": out.append(_race(prog, x, dict(kw)))
    elif x.get("code") == "deadlock": out.append(_deadlock(prog, x, dict(kw)))
  return out
