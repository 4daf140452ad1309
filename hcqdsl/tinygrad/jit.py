"""`hcqdsl emit SCRIPT.py:FN` where FN() returns `(jit_fn, calls)`: a TinyJit over its calls, with TinyJit's semantics
(what tinygrad's HCQGraph does with the command buffers it builds once).

Call 1 runs eagerly, as plain tinygrad: what it leaves in memory (state it creates lazily — a KV cache, optimizer
buffers —, uploads, realized results) is the program's initial memory. Call 2 is captured (tinygrad's `capturing`
hook: every `realize` inside, and the realize of the returned tensors, hands its schedule over instead of running it)
and is the graph; every call from 2 on is one launch, captured the same way and compiled and run by emit's schedule()
on tinygrad's CPU device with the call's variable values. Calls 3.. must run call 2's kernels and copies on the same
buffers (else the error names the first difference and its likely cause); what differs between calls becomes
per-launch data:
  - a bound `Variable` -> `var NAME = [v2, ..., vN]`, and a scalar parameter of each kernel that takes it;
  - an input tensor that is a different buffer at every call (HCQGraph's input replacement) -> a `rebound` buffer with
    each call's contents;
  - a buffer that is the same memory at every call but whose contents changed between calls outside the JIT (the
    host overwrote it) -> a `rewritten` buffer;
  - state the calls carry (a KV cache, an accumulator) -> a plain buffer with its contents before call 2.
The host waits for the previous launch before it submits (tinygrad's HCQGraph waits for its last timeline value
before patching kernel arguments), and the expects hold tinygrad's outputs after the last call. See docs/emit.md."""
from __future__ import annotations
import dataclasses, types
from typing import Optional
import attrs
from ..ir import Program, Data, Host, Submit, Ref, Expr, KEYWORDS, epoch_wait
from .env import EmitError, tinygrad
from .data import buffer_bytes, to_data
from .schedule import MAX_VALUES, schedule
from .planners import program

__all__ = ["emit_jit", "replay", "capture", "user_line", "is_jit_spec", "difference", "returned_tensors"]

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

def user_line() -> str | None:
  """`FILE:LINE: CODE` of the innermost frame on the stack outside tinygrad, hcqdsl and the standard library: the
  user's line that is realizing (tinygrad 0.14's own kernel metadata names only Tensor methods)."""
  import linecache, os, sys, sysconfig
  import tinygrad
  skip = (os.path.dirname(tinygrad.__file__), os.path.dirname(os.path.dirname(__file__)), sysconfig.get_paths()["stdlib"])
  f: Optional[types.FrameType] = sys._getframe(1)
  while f is not None and (f.f_code.co_filename.startswith(skip) or f.f_code.co_filename.startswith("<")): f = f.f_back
  if f is None: return None
  code = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
  return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}" + (f": {code}" if code else "")

class _Capture:
  """Stands where a capturing TinyJit stands: tinygrad hands it each realize's schedule instead of running it; each
  call of the schedule remembers the user's line that realized it (provenance)."""
  def __init__(self): self.linears, self.var_vals, self.origins = [], {}, []
  def add_linear(self, linear, var_vals):
    self.linears.append(linear)
    self.origins += [user_line()] * len(linear.src)
    for k, v in var_vals.items():
      if self.var_vals.get(k, v) != v: raise EmitError(f"variable `{k}` is bound to {self.var_vals[k]} and {v} in one call")
      self.var_vals[k] = v

def _realize_inputs(args):
  """TinyJit realizes a call's unrealized input tensors before the call (outside its capture)."""
  from tinygrad import Tensor
  if todo := [a for a in args if isinstance(a, Tensor) and not a.uop.is_realized]: Tensor.realize(*todo)

def _realize_result(ret):
  """TinyJit realizes every tensor the function returns (tinygrad.nn.state.get_parameters of the result)."""
  from tinygrad import Tensor
  from tinygrad.nn.state import get_parameters
  if params := get_parameters(ret): Tensor.realize(*params)

def capture(fn, args, kwargs=None):
  """(LINEAR of every schedule `fn(*args)` realizes, the returned tensors included, their variable values, what fn
  returned) — nothing runs, as in TinyJit's capturing call."""
  tinygrad()
  from tinygrad.engine.realize import capturing
  from tinygrad.uop.ops import UOp, Ops
  if capturing: raise EmitError("already inside a TinyJit capture")
  c = _Capture()
  capturing.append(c)
  try:
    ret = fn(*args, **(kwargs or {}))
    _realize_result(ret)
  finally: capturing.clear()
  if not c.linears: raise EmitError("the JIT function realized nothing: a TinyJit captures only the schedules its function realizes")
  linear = UOp(Ops.LINEAR, src=tuple(s for l in c.linears for s in l.src))
  if not linear.src: raise EmitError("the JIT function's schedules are empty: nothing runs on a device")
  return linear, c.var_vals, ret, c.origins

def returned_tensors(ret) -> list:
  """The tensors in what a function returned (a tensor, a tuple, list or dict of them, or objects holding them)."""
  from tinygrad.nn.state import get_parameters
  return get_parameters(ret)

_CAUSE_CODE = ("a Python value that changes between calls (not a Tensor or a bound Variable) is baked into the kernel: "
               "pass it as a Variable (`Variable(name, lo, hi).bind(v)`) or a tensor")
_CAUSE_COUNT = ("the function realizes something in some calls only (state created after call 1, a Python branch on the "
                "call): TinyJit would replay call 2's graph and skip it")
_CAUSE_SHAPE = "a shape changed between calls: make the changing size a bound Variable"

def difference(s, ref) -> str:
  """Why Schedule `s` is not the graph `ref` (call 2's, the one TinyJit captures): the first kernel, command or buffer
  that differs and the likely cause; '' when they are one graph."""
  from ..lang.format import format_stmt, format_decl
  if s.devices != ref.devices: return f"it uses devices {s.devices}, the captured graph {ref.devices}"
  cs, cr = s.cmds, ref.cmds
  ks, kr = {k.name: k for k in s.kernels}, {k.name: k for k in ref.kernels}
  def code(kernels, c):  # the kernel a command runs, without its name
    return format_decl(attrs.evolve(kernels[c.stmt.kernel.name], name="k")) if hasattr(c.stmt, "kernel") else None
  if len(cs) != len(cr):
    i = next((i for i, (a, b) in enumerate(zip(cs, cr)) if (a.label, code(ks, a)) != (b.label, code(kr, b))), min(len(cs), len(cr)))
    extra = (cs if len(cs) > len(cr) else cr)[i]
    return (f"it runs {len(cs)} commands, the captured graph {len(cr)} (the first {'extra' if len(cs) > len(cr) else 'missing'} "
            f"one: `{format_stmt(extra.stmt)}`, {extra.label}): {_CAUSE_COUNT}")
  for i, (a, b) in enumerate(zip(cs, cr)):
    if a.label == b.label and code(ks, a) != code(kr, b):
      return f"command {i + 1} ({a.label}) runs other code than in the captured graph: {_CAUSE_CODE}"
    ta, tb = format_stmt(a.stmt), format_stmt(b.stmt)
    if (a.dev, a.engine, ta) != (b.dev, b.engine, tb):
      return f"command {i + 1} is `{ta}` on {a.dev} ({a.label}), the captured graph's is `{tb}` on {b.dev} ({b.label}): {_CAUSE_COUNT}"
  bs, br = {b.name: b for b in s.buffers}, {b.name: b for b in ref.buffers}
  for name, b in bs.items():
    if name not in br: return f"it uses a buffer `{name}` the captured graph has not: {_CAUSE_COUNT}"
    if (b.size, b.device) != (br[name].size, br[name].device):
      return f"buffer `{name}` is {b.size} bytes on {b.device.name}, {br[name].size} on {br[name].device.name} in the captured graph: {_CAUSE_SHAPE}"
  return ""

def _digest(raw) -> bytes:
  """A buffer's bytes (uint8 numpy), as a digest: two calls' contents compare without keeping both."""
  import hashlib
  return hashlib.blake2b(raw.data, digest_size=16).digest()

class _Contents:
  """Each call's buffer contents before it ran, {name: (Data or None for zeros, digest)}, sharing one Data between
  calls whose bytes are equal: a model's weights are kept once, not once per call."""
  def __init__(self): self.known: dict = {}   # name -> (Data or None, digest) last seen
  def take(self, s) -> dict:
    import numpy as np
    out = {}
    for b in s.buffers:
      raw = np.ascontiguousarray(b.init.values).view(np.uint8).reshape(-1) if b.init is not None else np.zeros(b.size, np.uint8)
      d = _digest(raw)
      prev = self.known.get(b.name)
      out[b.name] = self.known[b.name] = prev if prev is not None and prev[1] == d else (b.init, d)
    return out

def _var_name(name: str, taken: set) -> str:
  n = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name) or "v"
  if n[0].isdigit() or n in KEYWORDS or n in taken: n = f"v_{n}"
  return n

def emit_jit(jit_fn, calls, planner: str = "hcqdsl", max_values: int = MAX_VALUES, title: str = "") -> Program:
  """The program of `jit_fn` over `calls` (see `replay`)."""
  return replay(jit_fn, calls, planner, max_values, title)[0]

def replay(jit_fn, calls, planner: str = "hcqdsl", max_values: int = MAX_VALUES, title: str = ""):
  """(program, its Schedule) of `jit_fn` (a TinyJit or a plain function) over `calls` (argument tuples: tensors and bound
  Variables), with TinyJit's semantics: call 1 runs eagerly (its effects — state it creates, uploads, initialized
  optimizer buffers — are the program's initial memory), call 2 is captured (the graph), and every call from 2 on is
  one launch. The calls run on tinygrad's CPU device, so the state they carry advances; `calls` is consumed lazily, so
  a generator may change state between calls (a host overwrite before call k: yield call k's arguments after it)."""
  tinygrad()
  fn = getattr(jit_fn, "fxn", jit_fn)
  if not callable(fn): raise EmitError("jit_fn has no function to capture (a TinyJit loaded from a pickle cannot be replayed)")
  scheds: list = []
  inits: list = []
  after: list[dict] = []
  first = None   # call 1's argument signature, each later call's is checked against
  contents = _Contents()
  for k, args in enumerate(calls, 1):
    sig = _check_call(k, args, first)
    first = first or sig
    _realize_inputs(args)
    if k == 1:  # TinyJit's first call: the function runs as plain tinygrad, the results realized
      _realize_result(fn(*args))
      continue
    try: linear, var_vals, ret, origins = capture(fn, args)
    except EmitError as e: raise EmitError(f"call {k}: {e}") from None
    tensors = returned_tensors(ret)
    if not tensors: raise EmitError(f"call {k}: the JIT function returned no tensors")
    s = schedule(*tensors, max_values=max_values, linear_vars=(linear, var_vals), snapshot_all=True, origins=origins)
    if not s.cmds: raise EmitError(f"call {k} runs nothing on a device (only uploads from host memory): nothing to replay")
    if scheds and (why := difference(s, scheds[0])):
      raise EmitError(f"call {k} is not the graph TinyJit captured at call 2: {why}")
    if scheds and set(s.var_lists) != set(scheds[0].var_lists):
      raise EmitError(f"call {k} binds variables {sorted(s.var_lists)}, call 2 binds {sorted(scheds[0].var_lists)}")
    inits.append(contents.take(s))
    if scheds: s.buffers = [attrs.evolve(b, init=None) for b in s.buffers]   # kept in `inits`, once per distinct contents
    scheds.append(s)
    # what the call left: a digest per buffer, for the next call to tell a host rewrite from its own state
    after.append({n: _digest(buffer_bytes(b)) for n, b in s.bases.items() if b.is_allocated()})
  if first is None: raise EmitError("no calls to replay: FN must return (jit_fn, [args of call 1, args of call 2, ...])")
  if not scheds: raise EmitError("one call: TinyJit runs call 1 eagerly and captures its graph at call 2, so a replay needs "
                                 "at least 2 calls (the launches are calls 2..N)")
  s1, sN = scheds[0], scheds[-1]
  decls = []
  for b in s1.buffers:
    same = all(s.bases[b.name] is s1.bases[b.name] for s in scheds)
    read_first = b.name in s1.read_first
    dtype = s1.bases[b.name].dtype
    def data(k) -> Data:  # the contents before launch k+1 (call k+2) ran (zeros when emit dropped all-zero contents)
      import numpy as np
      return inits[k][b.name][0] if inits[k][b.name][0] is not None else to_data(np.zeros(b.size, np.uint8), dtype)
    if not same and read_first:
      decls.append(attrs.evolve(b, init=None, per_launch="rebound", launch_inits=tuple(data(k) for k in range(len(scheds))),
                                comment=(b.comment or "") + " new memory at every call"))
    elif same and any(after[k - 1].get(b.name) not in (None, inits[k][b.name][1]) for k in range(1, len(scheds))):
      decls.append(attrs.evolve(b, init=None, per_launch="rewritten", launch_inits=tuple(data(k) for k in range(len(scheds))),
                                comment=(b.comment or "") + " rewritten by the host between calls"))
    else: decls.append(b)
  taken = {b.name for b in decls} | {k.name for k in s1.kernels}
  names = {v: _var_name(v, taken) for v in s1.var_lists}
  var_lists = {names[v]: [s.var_lists[v][0] for s in scheds] for v in s1.var_lists}
  s = dataclasses.replace(s1, buffers=decls, expects=sN.expects, var_lists=var_lists, host_waits=True)
  if any(names[v] != v for v in names): s = _rename_vars(s, names)
  prog = program(s, planner, title or getattr(fn, "__name__", ""), launches=len(scheds))
  return _host_waits(prog), s

def _rename_vars(s, names: dict):
  from ..ir import Exec, Param
  def fix_stmt(st):
    if not isinstance(st, Exec): return st
    return attrs.evolve(st, args=tuple(Expr(Ref(names.get(a.var.name, a.var.name))) if isinstance(a, Expr) and a.var else a for a in st.args))
  def fix_param(p): return Param(p.mode, names.get(p.name, p.name)) if p.scalar else p
  s = dataclasses.replace(s, kernels=[attrs.evolve(k, params=tuple(map(fix_param, k.params))) for k in s.kernels])
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
  waits = tuple(epoch_wait(d.name, comment="# the previous launch is done: its kernel arguments may be patched") for d in prog.devices
                if epoch_wait(d.name) not in lead)
  if host is None: new = Host(waits + (Submit(()),))
  else: new = attrs.evolve(host, body=waits + tuple(host.body))
  decls = [d for d in prog.decls if not isinstance(d, Host)]
  at = next((i for i, d in enumerate(decls) if type(d).__name__ == "Expect"), len(decls))
  return attrs.evolve(prog, decls=tuple(decls[:at] + [new] + decls[at:]))
