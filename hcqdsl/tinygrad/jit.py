"""`hcqdsl emit SCRIPT.py:FN` where FN() returns `(jit_fn, calls)`: a TinyJit replayed call by call, as one `.hcq`
launch per call (what tinygrad's HCQGraph does with the command buffers it builds once).

Each call runs the JIT's function the way TinyJit captures it (tinygrad's `capturing` hook: every `realize` inside
hands its schedule over instead of running it), then emit's schedule() compiles and runs that schedule on tinygrad's
CPU device with the call's variable values. The calls must run the same kernels and copies on the same buffers; what
differs between calls becomes per-launch data:
  - a bound `Variable` -> `var NAME = [v1, ..., vN]`, and a scalar parameter of each kernel that takes it;
  - an input tensor that is a different buffer at every call (HCQGraph's input replacement) -> a `rebound` buffer with
    each call's contents;
  - a buffer that is the same memory at every call but whose contents changed between calls outside the JIT (the
    host overwrote it) -> a `rewritten` buffer;
  - state the calls carry (a KV cache, an accumulator) -> a plain buffer with its contents before the first call.
The host waits for the previous launch before it submits (tinygrad's HCQGraph waits for its last timeline value
before patching kernel arguments), and the expects hold tinygrad's outputs after the last call. See docs/emit.md."""
from __future__ import annotations
import dataclasses
import attrs
from ..ir import Program, Data, Host, Wait, Submit, Ref, Expr, KEYWORDS
from .env import EmitError, tinygrad
from .data import buffer_bytes, to_data, data_bytes
from .schedule import MAX_VALUES, schedule
from .planners import program

__all__ = ["emit_jit", "capture", "is_jit_spec"]

def is_jit_spec(out) -> bool:
  """Does a script's function result look like `(jit_fn, calls)`?"""
  return isinstance(out, (tuple, list)) and len(out) == 2 and hasattr(out[0], "fxn") and hasattr(out[1], "__iter__")

def _describe(a) -> tuple:
  from tinygrad import Tensor
  from tinygrad.uop.ops import UOp
  if isinstance(a, Tensor): return ("tensor", tuple(a.shape), a.dtype.name, str(a.device))
  if isinstance(a, UOp) and a.is_bound_var: return ("variable", a.unbind()[0].expr)
  return ("value", repr(a))

def _check_call(k: int, args, first) -> list:
  """Call k's argument signature, checked against call 1's (`first`, None for call 1 itself)."""
  from tinygrad.uop.ops import UOp
  if not isinstance(args, (tuple, list)): raise EmitError(f"call {k}: expected a tuple of arguments, got {type(args).__name__}")
  got = [_describe(a) for a in args]
  if first is not None:
    if len(got) != len(first): raise EmitError(f"call {k} passes {len(got)} arguments, call 1 passes {len(first)}: a TinyJit replays one signature")
    for i, (g, f) in enumerate(zip(got, first)):
      if g != f:
        raise EmitError(f"call {k}: argument {i} is a {g[0]} {g[1:]}, call 1's is a {f[0]} {f[1:]}: a TinyJit replays one shape "
                        f"(make the changing size a bound Variable)")
  for i, a in enumerate(args):
    if isinstance(a, UOp) and a.is_bound_var:
      v, val = a.unbind()
      lo, hi = v.vmin, v.vmax
      if not lo <= val <= hi: raise EmitError(f"call {k}: variable `{v.expr}` = {val} is outside its range {lo}..{hi}")
  return got

class _Capture:
  """Stands where a capturing TinyJit stands: tinygrad hands it each realize's schedule instead of running it."""
  def __init__(self): self.linears, self.var_vals = [], {}
  def add_linear(self, linear, var_vals):
    self.linears.append(linear)
    for k, v in var_vals.items():
      if self.var_vals.get(k, v) != v: raise EmitError(f"variable `{k}` is bound to {self.var_vals[k]} and {v} in one call")
      self.var_vals[k] = v

def capture(fn, args, kwargs=None):
  """(LINEAR of every schedule `fn(*args)` realizes, their variable values, what fn returned) — nothing runs."""
  tinygrad()
  from tinygrad.engine.realize import capturing
  from tinygrad.uop.ops import UOp, Ops
  if capturing: raise EmitError("already inside a TinyJit capture")
  c = _Capture()
  capturing.append(c)
  try: ret = fn(*args, **(kwargs or {}))
  finally: capturing.clear()
  if not c.linears: raise EmitError("the JIT function realized nothing: a TinyJit captures only the schedules its function realizes")
  linear = UOp(Ops.LINEAR, src=tuple(s for l in c.linears for s in l.src))
  if not linear.src: raise EmitError("the JIT function's schedules are empty: nothing runs on a device")
  return linear, c.var_vals, ret

def _tensors(ret) -> list:
  from tinygrad import Tensor
  if isinstance(ret, Tensor): return [ret]
  if isinstance(ret, (tuple, list)): return [t for t in ret if isinstance(t, Tensor)]
  if isinstance(ret, dict): return [t for t in ret.values() if isinstance(t, Tensor)]
  return []

def _shape(s) -> tuple:
  """What must be equal in every call: kernels (names, parameters, code), commands, buffer names, sizes and devices."""
  from ..lang.format import format_stmt, format_decl
  return ([format_decl(k) for k in s.kernels], [(c.dev, c.engine, format_stmt(c.stmt)) for c in s.cmds],
          [(b.name, b.size, b.device.name if b.device else None) for b in s.buffers], s.devices)

def _var_name(name: str, taken: set) -> str:
  n = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name) or "v"
  if n[0].isdigit() or n in KEYWORDS or n in taken: n = f"v_{n}"
  return n

def emit_jit(jit_fn, calls, planner: str = "hcqdsl", max_values: int = MAX_VALUES, title: str = "") -> Program:
  """One launch per call of `jit_fn` (a TinyJit or a plain function) with `calls` (argument tuples: tensors and bound
  Variables), in order. Runs the calls on tinygrad's CPU device (so the state they carry advances); `calls` is consumed
  lazily, so a generator may change state between calls (a host overwrite before call k: yield call k's arguments
  after it)."""
  tinygrad()
  fn = getattr(jit_fn, "fxn", jit_fn)
  if not callable(fn): raise EmitError("jit_fn has no function to capture (a TinyJit loaded from a pickle cannot be replayed)")
  scheds, after, first = [], [], None
  for k, args in enumerate(calls, 1):
    sig = _check_call(k, args, first)
    first = first or sig
    try: linear, var_vals, ret = capture(fn, args)
    except EmitError as e: raise EmitError(f"call {k}: {e}") from None
    tensors = _tensors(ret)
    if not tensors: raise EmitError(f"call {k}: the JIT function returned no tensors")
    s = schedule(*tensors, max_values=max_values, linear_vars=(linear, var_vals), snapshot_all=True)
    if not s.cmds: raise EmitError(f"call {k} runs nothing on a device (only uploads from host memory): nothing to replay")
    if scheds and _shape(s) != _shape(scheds[0]):
      raise EmitError(f"call {k} runs different kernels, copies or buffers than call 1: not one JIT graph to replay")
    if scheds and set(s.var_lists) != set(scheds[0].var_lists):
      raise EmitError(f"call {k} binds variables {sorted(s.var_lists)}, call 1 binds {sorted(scheds[0].var_lists)}")
    scheds.append(s)
    # contents after the call, for buffers the next call may find rewritten in place
    after.append({n: buffer_bytes(b) for n, b in s.bases.items() if b.is_allocated()})
  if not scheds: raise EmitError("no calls to replay: FN must return (jit_fn, [args of call 1, args of call 2, ...])")
  s1, sN = scheds[0], scheds[-1]
  first = {b.name: b for b in s1.buffers}
  decls = []
  for b in s1.buffers:
    same = all(s.bases[b.name] is s1.bases[b.name] for s in scheds)
    inits = [next(x for x in s.buffers if x.name == b.name).init for s in scheds]
    read_first = b.name in s1.read_first
    dtype = s1.bases[b.name].dtype
    def data(k) -> Data:  # call k's contents before it ran (zeros when emit dropped all-zero contents)
      import numpy as np
      return inits[k] if inits[k] is not None else to_data(np.zeros(b.size, np.uint8), dtype)
    if not same and read_first:
      decls.append(attrs.evolve(b, init=None, per_launch="rebound", launch_inits=tuple(data(k) for k in range(len(scheds))),
                                comment=(b.comment or "") + " new memory at every call"))
    elif same and any(
        (after[k - 1].get(b.name) is not None and data(k).nbytes and
         data_bytes(data(k)) != bytes(after[k - 1][b.name][:data(k).nbytes])) for k in range(1, len(scheds))):
      decls.append(attrs.evolve(b, init=None, per_launch="rewritten", launch_inits=tuple(data(k) for k in range(len(scheds))),
                                comment=(b.comment or "") + " rewritten by the host between calls"))
    else: decls.append(b)
  taken = {b.name for b in decls} | {k.name for k in s1.kernels}
  names = {v: _var_name(v, taken) for v in s1.var_lists}
  var_lists = {names[v]: [s.var_lists[v][0] for s in scheds] for v in s1.var_lists}
  s = dataclasses.replace(s1, buffers=decls, expects=sN.expects, var_lists=var_lists)
  if any(names[v] != v for v in names): s = _rename_vars(s, names)
  prog = program(s, planner, title or getattr(fn, "__name__", ""))
  return _host_waits(prog)

def _rename_vars(s, names: dict):
  from ..ir import Exec, Param
  def fix_stmt(st):
    if not isinstance(st, Exec): return st
    return attrs.evolve(st, args=tuple(Expr(Ref(names.get(a.var.name, a.var.name))) if isinstance(a, Expr) and a.var else a for a in st.args))
  s = dataclasses.replace(s, kernels=[attrs.evolve(k, params=tuple(Param(p.mode, names.get(p.name, p.name)) if p.scalar else p for p in k.params)) for k in s.kernels])
  for c in s.cmds: c.stmt = fix_stmt(c.stmt)
  return s

def _host_waits(prog: Program) -> Program:
  """Every launch's host first waits for the previous launch on each device (tinygrad's HCQGraph waits for its last
  timeline value before it patches kernel arguments and submits), then submits."""
  host = prog.host
  lead = []  # the host statements before its first submit: a planner's own waits for the previous launch count
  for st in (host.body if host is not None else ()):
    if isinstance(st, Submit): break
    lead.append(st)
  waits = tuple(Wait(Ref(f"{d.name}.timeline"), Expr(Ref(f"{d.name}.epoch"), -1),
                     comment="# the previous launch is done: its kernel arguments may be patched") for d in prog.devices
                if Wait(Ref(f"{d.name}.timeline"), Expr(Ref(f"{d.name}.epoch"), -1)) not in lead)
  if host is None: new = Host(waits + (Submit(()),))
  else: new = attrs.evolve(host, body=waits + tuple(host.body))
  decls = [d for d in prog.decls if not isinstance(d, Host)]
  at = next((i for i, d in enumerate(decls) if type(d).__name__ == "Expect"), len(decls))
  return attrs.evolve(prog, decls=tuple(decls[:at] + [new] + decls[at:]))
