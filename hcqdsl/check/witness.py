"""Witnesses: for each race and deadlock `check` reports, the interleaving that exhibits it, as JSON that
`hcqdsl run FILE --replay W.json` (hcqdsl.runtime.replays) executes on the emulator.

A race's witness is an order the program does not forbid: the access that comes later in the program (later launch,
then later line) runs to its end before the earlier one starts; everything else runs in the emulator's time order.
A deadlock's witness names the waits that block forever (`blocked`); any schedule that reaches them hangs.

The file format is one declaration, WITNESS (hcqdsl/schema.py's types): `witnesses` writes through it and
`read_witness` reads through it, both against the program (its queues, buffers, signals, vars, the lines of its
statements), so what check writes always reads back; a bad file is refused naming its first bad field. A race's
`buffer` is a buffer of the program or check's pseudo-buffer of an exec's kernel arguments (`memories`).
docs/check.md lists the declaration (`describe()`)."""
from __future__ import annotations
import json
from typing import NoReturn, Optional
import attrs
from ..ir import Program, Exec, Poll, MAX_LAUNCHES, U32_MAX, U64_MAX
from ..diagnostics import Diagnostic
from .. import schema
from ..schema import Pass, Invalid, MISSING, convert, got_json, too_deep, Int, Str, Opt, List, Map, Obj, Rec, Variant, Keep
from .static import check_launches
from .unroll import KERNARGS_BYTES, kernargs_buffer, polled_word

__all__ = ["witnesses", "read_witness", "load_witness", "memories", "describe", "FORMAT", "VERSION", "WITNESS", "MAX_WITNESS_FILE",
           "Witnesses", "Race", "Deadlock", "Access", "Blocked", "Memory"]

FORMAT, VERSION = "hcqdsl-witness", 1
MAX_WITNESS_FILE = 256 << 20   # bytes read at most (check writes a few KB; a device like /dev/zero never ends)

@attrs.define
class Access:
  """One of a race's two accesses: the statement at `line` of `queue` (null: the host's implicit submit) in `launch`,
  what it does (`mode`) to bytes `range` ([start, end]) of the race's buffer."""
  queue: str
  launch: int
  line: Optional[int]
  mode: Optional[str]
  range: list  # noqa: A003

@attrs.define
class Blocked:
  """A wait of a deadlock: `queue`'s at `line` in `launch` waits for `signal` >= `needed` forever."""
  queue: str
  launch: int
  line: Optional[int]
  signal: str
  needed: int

@attrs.define
class Race:
  code: str        # "race"
  at: Optional[dict]   # {"line", "column"} of the diagnostic
  message: str
  buffer: str      # a buffer of the program, or an exec's kernel arguments (`memories`)
  first: Access    # runs to its end before `then` starts
  then: Access

@attrs.define
class Deadlock:
  code: str        # "deadlock"
  at: Optional[dict]
  message: str
  blocked: list    # of Blocked

@attrs.define
class Witnesses:
  """A witness file: the launches and var values check ran with, a Race or Deadlock per diagnostic."""
  format: str  # noqa: A003
  version: int
  file: str
  launches: int
  var_values: dict
  witnesses: list

@attrs.frozen
class Memory:
  """What a race's `buffer` names: a buffer of the program (`queue` None), or the kernel arguments of the exec at
  `index` of `queue`'s body, which the host patches at each submit."""
  size: int
  queue: Optional[str] = None
  index: Optional[int] = None

def memories(program: Program) -> dict:
  """name -> Memory of everything a race's witness may be about: the program's buffers and the kernel arguments of
  each exec (check/unroll.py names the pseudo-buffer)."""
  out = {b.name: Memory(b.size) for b in program.buffers}
  for q in program.queues:
    for i, st in enumerate(q.body):
      if type(st) is Exec:
        out[kernargs_buffer(st.kernel.name, q.name, st.span.line if st.span is not None else 0)] = Memory(KERNARGS_BYTES, q.name, i)
  return out

# ---------------------------------------------------------------- the declaration

class _Pass(Pass):
  """One pass over a witness file against its program: names are the program's (queues with the host, buffers and
  kernel arguments, signals, vars), and each queue's statement lines. Errors read `PATH: KEY: expected ..., got ...`."""
  NOUN, OR_NULL, TOP = "witness", True, ""
  def __init__(self, reading: bool, program: Optional[Program], path: str):
    super().__init__(reading)
    self.program, self.path = program, path
    self.lines: dict = {}   # queue (or "host") -> the lines of its statements
    self.nlines = 1
    if program is None: return
    for q in program.queues: self.lines[q.name] = {s.span.line for s in q.body if s.span is not None}
    self.lines["host"] = {s.span.line for h in program.hosts for s in h.body if s.span is not None}
    self.nlines = (program.source or "").count("\n") + 1
    self.names = {"queues": dict.fromkeys(self.lines), "buffers": memories(program), "signals": sorted(s.name for s in program.signals),
                  "vars": list(program.vars)}
  def among(self, names) -> str: return ", ".join(f"`{x}`" for x in names if x is not None)
  def missing(self, t, at: str, key: str) -> NoReturn:
    t.conv(MISSING, self, f"{at}.{key}" if at else key)
    raise AssertionError(key)   # (no type takes MISSING)
  def error(self, e: Invalid) -> ValueError:
    what = "" if self.reading else "cannot write witness: "
    if e.at is None: return ValueError(f"{self.path}: {what}{e.what}")
    return ValueError(f"{self.path}: {what}{e.at}: expected {e.what}, got {got_json(e.got)}")

class _Line:
  """A party's line: one holding a statement of its queue (kept by the party), or null."""
  fast = None
  def conv(self, v, c: _Pass, at: str):
    if v is None: return None
    q = c.kept["queue"]
    if type(v) is not int or v not in c.lines[q]:
      c.fail(at, f"the line of a statement of {q} ({', '.join(map(str, sorted(c.lines[q]))) or 'none'})", v)
    return v
  def doc(self) -> str: return "the line of a statement of the queue, or null (the host's implicit submit)"

def _polled(program: Program, launches: int) -> list:
  """The words the program's polls poll, as check names them (a rebound buffer's: in each launch's memory)."""
  bufs, out = {b.name: b for b in program.buffers}, {}
  for q in program.queues:
    for st in q.body:
      if type(st) is not Poll or (b := bufs.get(st.src.buffer.name)) is None: continue
      lo = 0 if st.src.start is None else st.src.start
      ks = range(1, max(launches, len(b.launch_inits)) + 1) if b.per_launch == "rebound" else (None,)
      out.update(dict.fromkeys(polled_word(b.name, lo, k) for k in ks))
  return list(out)

class _Waited:
  """What a blocked wait waits on: a signal of the program, or the word a blocked `poll` polls."""
  fast = None
  def conv(self, v, c: _Pass, at: str):
    if type(v) is str and v in c.names["signals"]: return v
    words = _polled(c.program, c.kept["launches"]) if c.program is not None else []
    if type(v) is not str or v not in words:
      c.fail(at, f"one of {c.among(c.names['signals'])}" + (f" or a polled word ({c.among(words[:8])})" if words else ""), v)
    return v
  def doc(self) -> str: return "a name of signals, or a polled word (`buf[60:64]`)"

class _Range:
  """[start, end] inside the race's buffer (kept by the race)."""
  fast = None
  def conv(self, v, c: _Pass, at: str):
    b = c.kept["buffer"]
    n = c.names["buffers"][b].size
    if type(v) is not list or len(v) != 2 or any(type(x) is not int for x in v) or not 0 <= v[0] < v[1] <= n:
      c.fail(at, f"[start, end] with 0 <= start < end <= {n} (the size of `{b}`)", v)
    return list(v)
  def doc(self) -> str: return "[start, end] inside the buffer"

def _field(x, key: str):
  return x[key] if type(x) is dict else getattr(x, key)

def _overlap(race, c: _Pass, at: str) -> None:
  a, b = _field(_field(race, "first"), "range"), _field(_field(race, "then"), "range")
  if max(a[0], b[0]) >= min(a[1], b[1]): c.fail(f"{at}.then.range", f"a range overlapping first's {a}", b)

def _launches_cover(vv: dict, c: _Pass, at: str) -> None:
  """The var lists and per-launch host writes the witness does not give cover its launches (check_launches)."""
  if c.program is not None and (short := check_launches(c.program, c.kept["launches"], vv)):
    c.bad(f"launches: {c.kept['launches']}, but {short[0].message}")

MODES = ("reads", "writes", "reads and writes")
_KERNARGS_DOC = "a name of buffers, or an exec's kernel arguments as check names them (the kernel arguments of `exec k` (c0 line 8))"
_LAUNCH = Int(1, lambda c: c.kept["launches"], "int 1..launches")
_AT = Opt(Obj({"line": Int(1, lambda c: c.nlines, "a line of the program"), "column": Int(1, (1 << 31) - 1)}, open=True))
_QUEUE = Keep("queue", Str(ref="queues", doc="a name of queues, or host"))
_ACCESS = Rec(Access, None, True, queue=_QUEUE, launch=_LAUNCH, line=_Line(), mode=Opt(Str(MODES)), range=_Range())
_BLOCKED = Rec(Blocked, None, True, queue=_QUEUE, launch=_LAUNCH, line=_Line(), signal=_Waited(),
               needed=Int(0, lambda c: U64_MAX if c.kept["queue"] == "host" else U32_MAX, "int 0..2**32-1 (the host's waits: 0..2**64-1)"))
# in the order it is converted: the launches before what lies in them, a race's buffer before its ranges, a party's
# queue before its line; keys no shape declares are ignored
WITNESS = Rec(Witnesses,
  format=Str((FORMAT,)), version=Int(VERSION, VERSION), file=Str(), launches=Keep("launches", Int(1, MAX_LAUNCHES)),
  var_values=Keep("var_values", Map(Str(ref="vars"), Int(0, U32_MAX)), _launches_cover),
  witnesses=List(Variant("code", {
    "race": Rec(Race, _overlap, True, code=Str(("race",)), at=_AT, message=Str(), buffer=Keep("buffer", Str(ref="buffers", doc=_KERNARGS_DOC)),
                first=_ACCESS, then=_ACCESS),
    "deadlock": Rec(Deadlock, None, True, code=Str(("deadlock",)), at=_AT, message=Str(), blocked=List(_BLOCKED, nonempty=True))})),
  open=True)

def describe() -> str:
  """WITNESS as text (docs/check.md holds it; a test keeps the two equal)."""
  return schema.describe(WITNESS)

# ---------------------------------------------------------------- writing

def _who(q: str) -> str: return "host" if q == "the host" else q

def _one(d: Diagnostic):
  at = {"line": d.span.line, "column": d.span.column} if d.span else None
  x = d.extra
  if d.code == "race" and "other" in x:
    o = x["other"]
    return Race("race", at, d.message, x["buffer"], Access(_who(x["queue"]), x["launch"], x.get("line"), x.get("mode"), x["range"]),
                Access(_who(o["queue"]), o["launch"], o.get("line"), o.get("mode"), o["range"]))
  if d.code == "deadlock" and "queue" in x:
    return Deadlock("deadlock", at, d.message,
                    [Blocked(_who(x["queue"]), x["launch"], d.span.line if d.span else None, x["signal"], x["needed"])])
  return None

def witnesses(program: Optional[Program], diags, launches: int, var_values: Optional[dict] = None, file: Optional[str] = None) -> dict:
  """The witness file (JSON) for `diags`, check's diagnostics of `program` over `launches` launches, written through
  WITNESS (a witness it would refuse is a bug here: ValueError). `program` None (it did not parse): no witnesses, of
  `file`."""
  w = Witnesses(FORMAT, VERSION, (program.file if program is not None else file) or "<input>", launches, dict(var_values or {}),
                [x for d in diags if (x := _one(d)) is not None] if program is not None else [])
  return convert(WITNESS, w, _Pass(False, program, "<witness>"))

# ---------------------------------------------------------------- reading

def read_witness(w, program: Program, path: str = "<witness>") -> Witnesses:
  """The witness file `w` (its JSON) read through WITNESS against `program`: ValueError `PATH: KEY: expected ...,
  got ...` for the first field that is not what `check --witness` writes for it."""
  return convert(WITNESS, w, _Pass(True, program, path))

def load_witness(path):
  """The JSON of a witness file written by `hcqdsl check --witness`; ValueError with the reason when it is not one
  (its fields are read against the program by `read_witness`)."""
  try:
    with open(path, "rb") as f: b = f.read(MAX_WITNESS_FILE + 1)
  except OSError as e: raise ValueError(f"{path}: {e.strerror or e}") from None
  if len(b) > MAX_WITNESS_FILE: raise ValueError(f"{path}: not a witness file (more than {MAX_WITNESS_FILE} bytes)")
  try: w = json.loads(b)
  except json.JSONDecodeError as e: raise ValueError(f"{path}:{e.lineno}:{e.colno}: not JSON ({e.msg})") from None
  except ValueError as e: raise ValueError(f"{path}: not JSON ({e})") from None   # (not UTF-8)
  except RecursionError: raise ValueError(f"{path}:{too_deep(b.decode('utf-8', errors='replace'))}: not JSON (nested too deeply)") from None
  if not isinstance(w, dict) or w.get("format") != FORMAT or not isinstance(w.get("witnesses"), list):
    raise ValueError(f"{path}: not a witness file (write one with `hcqdsl check FILE --witness {path}`)")
  return w
