"""`hcqdsl diff A.hcq B.hcq`: launch by launch, what differs between two programs — the declarations (devices,
buffers with their per-launch contents, kernels, signals) and, per launch and queue, the commands with every value of
that launch resolved: vars and `D.epoch` to numbers, a rebound buffer to the launch's memory (`x@2` in launch 2, `x@1`
where a command reads launch 1's memory), byte ranges made explicit. Made to compare the program `emit` derives from
tinygrad's schedule with the one `capture` + `lift` recorded from its runtime: a command tinygrad's runtime submits
differently from what its schedule means (docs/findings/stale-jit-copy.md) shows as one changed line, with both
source lines."""
from __future__ import annotations
from difflib import SequenceMatcher
from typing import Optional
import attrs
from ..ir import Program, Slice, Expr, Exec, Copy, Write, Wait, SignalWrite, Epoch, Barrier, Timestamp
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

def _slice(sl: Slice, k: int, rebound: set, sizes: dict) -> str:
  b = sl.buffer.name
  lo, hi = sl.bounds(sizes.get(b, 0))
  at = sl.launch if sl.launch is not None else k if b in rebound else None
  return f"{b}{'' if at is None else f'@{at}'}[{lo}:{hi}]"

def _value(e, env) -> str: return str(e.eval(env)) if type(e) is Expr else str(e)

def _command(st, k: int, env: dict, p: set, sizes: dict, dev: str) -> str:
  t = type(st)
  if t is Exec:
    args = ", ".join(_slice(a, k, p, sizes) if type(a) is Slice else _value(a, env) for a in st.args)
    dims = "".join(f" {w} ({', '.join(_value(x, env) for x in d)})" for w, d in (("grid", st.grid), ("block", st.block)) if d)
    return f"exec {st.kernel.name}({args}){dims}"
  if t is Copy: return f"copy {_slice(st.dst, k, p, sizes)} <- {_slice(st.src, k, p, sizes)}"
  if t is Write: return f"write {_slice(st.dst, k, p, sizes)} = {_value(st.value, env)}"
  if t is Wait: return f"wait {st.signal.name} >= {_value(st.value, env)}"
  if t is SignalWrite: return f"signal {st.signal.name} = {_value(st.value, env)}"
  if t is Epoch: return f"wait {dev}.timeline >= {env[f'{dev}.epoch'] - 1}"
  if t is Barrier: return "barrier"
  if t is Timestamp: return f"timestamp {st.signal.name}"
  return type(st).__name__.lower()

def _pairs(qa: list, qb: list) -> list:
  """Queues of A and B side by side: by name, then the rest by (device, engine) in declaration order."""
  out, rest_b = [], [q for q in qb if q.name not in {x.name for x in qa}]
  names_b = {q.name: q for q in qb}
  for q in qa:
    if q.name in names_b: out.append((q, names_b[q.name])); continue
    m = next((x for x in rest_b if (x.device.name, x.engine) == (q.device.name, q.engine)), None)
    if m is not None: rest_b.remove(m)
    out.append((q, m))
  return out + [(None, q) for q in rest_b]

def diff_programs(a: Program, b: Program, launches: int = 2) -> list[Change]:
  """Every difference between `a` and `b` over `launches` launches: declarations first, then per launch and queue the
  commands that differ (difflib's alignment of the two command lists, each command with the launch's values)."""
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
    for k in range(1, launches + 1):
      ca = [_command(st, k, ua.envs[k - 1], ra, sa, qa.device.name) for st in qa.body]
      cb = [_command(st, k, ub.envs[k - 1], rb, sb, qb.device.name) for st in qb.body]
      if ca == cb: continue
      line = lambda q, n: q.body[n].span.line if q.body[n].span else None
      for op, i1, i2, j1, j2 in SequenceMatcher(None, ca, cb, autojunk=False).get_opcodes():
        if op == "equal": continue
        for n in range(max(i2 - i1, j2 - j1)):
          x, y = i1 + n if i1 + n < i2 else None, j1 + n if j1 + n < j2 else None
          out.append(Change("command", name, None if x is None else ca[x], None if y is None else cb[y], k,
                            None if x is None else line(qa, x), None if y is None else line(qb, y)))
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
