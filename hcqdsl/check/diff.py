"""`hcqdsl diff A.hcq B.hcq`: launch by launch, what differs between two programs — the declarations (devices,
buffers with their per-launch contents, kernels, signals) and, per launch and queue, the commands with every value of
that launch resolved: vars and `D.epoch` to numbers, a rebound buffer to the launch's memory (`x@2` in launch 2, `x@1`
where a command reads launch 1's memory), byte ranges made explicit. Made to compare the program `emit` derives from
tinygrad's schedule with the one `capture` + `lift` recorded from its runtime: a command tinygrad's runtime submits
differently from what its schedule means (docs/findings/stale-jit-copy.md) shows as one changed line, with both
source lines.

With `match` (`--match`), names need not agree — a capture's lift names buffers by address: devices are paired by
their `AMD:N` index, and A's and B's buffers by where the data commands (execs and copies) use them, aligned per
device and engine as difflib aligns lines (same kernel and arity, copies of the same size); then only those commands
are compared, B's written with A's names and without launch dimensions (the renderer's: a kernel emitted for
tinygrad's CPU device has none). Synchronization differs between emit's planners and HCQGraph by design and
is check's business; copies from or to host memory (a capture's input uploads and read-backs) are emit's initial
contents and expects, and are left out."""
from __future__ import annotations
from difflib import SequenceMatcher
from typing import Callable, Optional
import attrs
from ..ir import (Program, Slice, Expr, Exec, Copy, Write, Poll, U32_MAX, Wait, SignalWrite, Epoch, Barrier, Timestamp, KERNARGS, epoch_wait,
                  in_launches)
from .unroll import unroll

__all__ = ["Change", "diff_programs", "render_changes"]

@attrs.frozen
class Change:
  """One difference. `launch` None: a declaration; `a`/`b`: the text on each side (None: absent there), with the
  source line of each."""
  what: str                      # "device" | "buffer" | "kernel" | "signal" | "var" | "queue" | "command"
  name: str                      # the declaration's or queue's name
  a: Optional[str]
  b: Optional[str]
  launch: Optional[int] = None
  a_line: Optional[int] = None
  b_line: Optional[int] = None

def _decls(p: Program) -> dict:
  """(kind, name) -> canonical text of each declaration but queues (per-launch buffer contents included)."""
  from ..lang.format import format_decl
  out = {}
  for d in p.decls:
    kind = type(d).__name__.lower()
    if kind in ("queue", "host", "expect"): continue
    out[(kind, d.name)] = (format_decl(d), d.span.line if d.span else None)
  return out

@attrs.frozen
class _Launch:
  """How one program's commands read in one launch, every value of the launch resolved."""
  k: int                  # the launch (1-based)
  env: dict[str, int]     # its var and `D.epoch` values
  rebound: set[str]       # the rebound buffers: a slice of one names the launch's memory (`x@k`)
  sizes: dict[str, int]   # each buffer's size (a slice without bounds is all of it)
  names: dict[str, str] = attrs.field(factory=dict)   # buffer names shown instead (`--match`: B's written as A's)

  def slice(self, sl: Slice) -> str:
    b = sl.buffer.name
    lo, hi = sl.bounds(self.sizes.get(b, 0))
    at = sl.launch if sl.launch is not None else self.k if b in self.rebound else None
    return f"{self.names.get(b, b)}{'' if at is None else f'@{at}'}[{lo}:{hi}]"

  def value(self, e) -> str: return str(e.eval(self.env)) if type(e) is Expr else str(e)

# each statement type's command text (an exec's: _command), given the launch and the queue's device
_COMMANDS: dict[type, Callable[..., str]] = {
  Copy: lambda st, at, dev: f"copy {at.slice(st.dst)} <- {at.slice(st.src)}",
  Write: lambda st, at, dev: f"write {at.slice(st.dst)} = {at.value(st.value)}",
  Poll: lambda st, at, dev: f"poll {at.slice(st.src)}{'' if st.mask == U32_MAX else f' & {st.mask}'} == {at.value(st.value)}",
  Wait: lambda st, at, dev: f"wait {st.signal.name} >= {at.value(st.value)}",
  SignalWrite: lambda st, at, dev: f"signal {st.signal.name} = {at.value(st.value)}",
  Epoch: lambda st, at, dev: _command(epoch_wait(dev), at, dev),
  Barrier: lambda st, at, dev: "barrier",
  Timestamp: lambda st, at, dev: f"timestamp {st.signal.name}",
}

def _command(st, at: _Launch, dev: str, dims: bool = True) -> str:
  """A statement as the command it is in launch `at` on a queue of device `dev` (`dims`: an exec's launch dimensions)."""
  if type(st) is Exec:
    args = ", ".join(at.slice(a) if type(a) is Slice else at.value(a) for a in st.args)
    shown = "".join(f" {w} ({', '.join(at.value(x) for x in d)})" for w, d in (("grid", st.grid), ("block", st.block)) if d and dims)
    return f"exec {st.kernel.name}({args}){shown}"
  f = _COMMANDS.get(type(st))
  return f(st, at, dev) if f is not None else type(st).__name__.lower()

def _pairs(qa: list, qb: list) -> list:
  """Queues of A and B side by side: by name, then the rest by (device, engine) in declaration order."""
  out, rest_b = [], [q for q in qb if q.name not in {x.name for x in qa}]
  names_b = {q.name: q for q in qb}
  for q in qa:
    if q.name in names_b:
      out.append((q, names_b[q.name]))
      continue
    m = next((x for x in rest_b if (x.device.name, x.engine) == (q.device.name, q.engine)), None)
    if m is not None: rest_b.remove(m)
    out.append((q, m))
  return out + [(None, q) for q in rest_b]

def _data_commands(p: Program, clauses: Optional[dict] = None) -> dict:
  """(device index, engine) -> the execs and copies of that device's queues of that engine, in declaration order;
  copies with a side in host memory left out (`clauses` gets, per key, each one's queue's `launches` clause)."""
  index = {d.name: d.index for d in p.devices}
  host = {b.name for b in p.buffers if b.device is None}
  # a lifted capture's exec also names its kernel-argument block (its last argument, `in kernargs`): memory of the
  # runtime's, no data of the kernel's — left out, so it matches the program tinygrad's schedule emits
  explicit = {k.name for k in p.kernels if k.params and k.params[-1].name == KERNARGS and k.params[-1].mode == "in"}
  out: dict = {}
  for q in p.queues:
    for st in q.body:
      if type(st) is Exec and st.kernel.name in explicit: st = attrs.evolve(st, args=st.args[:-1])
      if type(st) is Exec or (type(st) is Copy and st.src.buffer.name not in host and st.dst.buffer.name not in host):
        out.setdefault((index[q.device.name], q.engine), []).append(st)
        if clauses is not None: clauses.setdefault((index[q.device.name], q.engine), []).append(q.launches)
  return out

def _in(sts: list, clauses: list, k: int) -> list:
  """The data commands that run in launch k (a queue outside its launches runs nothing)."""
  return [st for st, c in zip(sts, clauses) if in_launches(c, k)]

def _shape(st, sizes: dict) -> tuple:
  if type(st) is Exec: return ("exec", st.kernel.name, len(st.args))
  lo, hi = st.src.bounds(sizes.get(st.src.buffer.name, 0))
  return ("copy", hi - lo)

def _matched(a: Program, b: Program, launches: int) -> list[Change]:
  """diff_programs with `match`: the data commands per device and engine, B's buffers renamed to the A buffers the
  aligned commands use them as."""
  out: list[Change] = []
  ia, ib = {d.index: d for d in a.devices}, {d.index: d for d in b.devices}
  for i in sorted(set(ia) | set(ib)):
    if i not in ia or i not in ib:
      out.append(Change("device", (ia.get(i) or ib[i]).name, i in ia and f"device {ia[i].name} = AMD:{i}" or None,
                        i in ib and f"device {ib[i].name} = AMD:{i}" or None))
  sa, sb = {x.name: x.size for x in a.buffers}, {x.name: x.size for x in b.buffers}
  la: dict = {}
  lb: dict = {}
  ca, cb = _data_commands(a, la), _data_commands(b, lb)
  names: dict = {}   # B's buffer -> A's
  taken: set = set()
  for key in ca.keys() & cb.keys():
    x, y = ca[key], cb[key]
    for op, i1, i2, j1, j2 in SequenceMatcher(None, [_shape(s, sa) for s in x], [_shape(s, sb) for s in y], autojunk=False).get_opcodes():
      if op != "equal": continue
      for s1, s2 in zip(x[i1:i2], y[j1:j2]):
        pairs = zip(s1.args, s2.args) if type(s1) is Exec else ((s1.dst, s2.dst), (s1.src, s2.src))
        for u, v in pairs:
          if type(u) is Slice and type(v) is Slice and v.buffer.name not in names and u.buffer.name not in taken:
            names[v.buffer.name] = u.buffer.name
            taken.add(u.buffer.name)
  kinds_a, kinds_b = ({x.name: x.per_launch for x in p.buffers} for p in (a, b))
  for nb, na in names.items():
    if kinds_a[na] != kinds_b[nb]:
      out.append(Change("buffer", na, f"buffer {na} {kinds_a[na] or 'plain'}", f"buffer {nb} {kinds_b[nb] or 'plain'}",
                        None, _line(a, na), _line(b, nb)))
  ua, ub = unroll(a, launches), unroll(b, launches)
  ra, rb = ({x.name for x in p.buffers if x.per_launch == "rebound"} for p in (a, b))
  sb_named = {names.get(n, n): v for n, v in sb.items()}
  for key in sorted(ca.keys() | cb.keys()):
    x, y = ca.get(key, []), cb.get(key, [])
    dev = (ia.get(key[0]) or ib[key[0]]).name
    for k in range(1, launches + 1):
      at_a, at_b = _Launch(k, ua.envs[k - 1], ra, sa), _Launch(k, ub.envs[k - 1], rb, {**sb, **sb_named}, names)
      xk, yk = _in(x, la.get(key, []), k), _in(y, lb.get(key, []), k)
      tx = [_command(st, at_a, dev, dims=False) for st in xk]
      ty = [_command(st, at_b, dev, dims=False) for st in yk]
      out += _aligned(tx, ty, xk, yk, f"{dev} {key[1]}", k)
  return out

def _line(p: Program, name: str) -> Optional[int]:
  d = next((x for x in p.decls if getattr(x, "name", None) == name), None)
  return d.span.line if d is not None and d.span else None

def _aligned(ca: list, cb: list, sa: list, sb: list, name: str, k: int) -> list[Change]:
  """The changes between two command lists (rendered `ca`/`cb` of statements `sa`/`sb`), as difflib aligns them."""
  out: list[Change] = []
  if ca == cb: return out
  def line(sts, n): return sts[n].span.line if sts[n].span else None
  for op, i1, i2, j1, j2 in SequenceMatcher(None, ca, cb, autojunk=False).get_opcodes():
    if op == "equal": continue
    for n in range(max(i2 - i1, j2 - j1)):
      x, y = i1 + n if i1 + n < i2 else None, j1 + n if j1 + n < j2 else None
      out.append(Change("command", name, None if x is None else ca[x], None if y is None else cb[y], k,
                        None if x is None else line(sa, x), None if y is None else line(sb, y)))
  return out

def diff_programs(a: Program, b: Program, launches: int = 2, match: bool = False) -> list[Change]:
  """Every difference between `a` and `b` over `launches` launches: declarations first, then per launch and queue the
  commands that differ (difflib's alignment of the two command lists, each command with the launch's values).
  `match`: pair devices, buffers and queues by their use instead of their names (see the module's doc)."""
  if match: return _matched(a, b, launches)
  out: list[Change] = []
  da, db = _decls(a), _decls(b)
  for key in list(da) + [k for k in db if k not in da]:
    x, y = da.get(key), db.get(key)
    if x is None or y is None or x[0] != y[0]:
      out.append(Change(key[0], key[1], x and x[0], y and y[0], None, x and x[1], y and y[1]))
  ua, ub = unroll(a, launches), unroll(b, launches)
  sa, sb = {x.name: x.size for x in a.buffers}, {x.name: x.size for x in b.buffers}
  ra, rb = ({x.name for x in p.buffers if x.per_launch == "rebound"} for p in (a, b))
  for qa, qb in _pairs(a.queues, b.queues):
    if qa is None or qb is None:
      q = qa or qb
      out.append(Change("queue", q.name, qa and f"queue {qa.name} {qa.engine} on {qa.device.name}",
                        qb and f"queue {qb.name} {qb.engine} on {qb.device.name}", None,
                        qa and qa.span and qa.span.line, qb and qb.span and qb.span.line))
      continue
    name = qa.name if qa.name == qb.name else f"{qa.name}/{qb.name}"
    for k in range(1, launches + 1):   # (a queue outside its launches runs nothing in them)
      ba, bb = (list(q.body) if in_launches(q.launches, k) else [] for q in (qa, qb))
      ca = [_command(st, _Launch(k, ua.envs[k - 1], ra, sa), qa.device.name) for st in ba]
      cb = [_command(st, _Launch(k, ub.envs[k - 1], rb, sb), qb.device.name) for st in bb]
      out += _aligned(ca, cb, ba, bb, name, k)
  return out

def render_changes(changes: list[Change], file_a: str, file_b: str) -> str:
  """Text: one block per change, `-` for A and `+` for B with each side's file:line, then a count."""
  if not changes: return f"no differences between {file_a} and {file_b}\n"
  lines = [f"--- {file_a}", f"+++ {file_b}"]
  for c in changes:
    where = f"launch {c.launch}, queue {c.name}" if c.launch is not None else f"{c.what} {c.name}"
    lines.append(f"@@ {where}")
    if c.a is not None: lines.append(f"- {c.a}" + (f"    ({file_a}:{c.a_line})" if c.a_line else ""))
    if c.b is not None: lines.append(f"+ {c.b}" + (f"    ({file_b}:{c.b_line})" if c.b_line else ""))
  launches = {c.launch for c in changes if c.launch is not None}
  decls = sum(c.launch is None for c in changes)
  lines.append(f"{len(changes)} difference{'s' * (len(changes) != 1)}: {decls} in declarations, "
               f"{len(changes) - decls} in commands over {len(launches)} launch{'es' * (len(launches) != 1)}")
  return "\n".join(lines) + "\n"
