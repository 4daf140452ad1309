"""A tinygrad schedule -> `Schedule`: devices, buffers with their initial contents, kernels, one command per lane of
each call, and tinygrad's results as expects.

tinygrad schedules and runs the tensors on its CPU devices ("CPU", "CPU:1", ...), which stand in for AMD:0..N-1 in
order of first use. Kernels, copies and buffers come from `Tensor.linear_with_vars()` -> `compile_linear()`; the
schedule is run once on CPU to get the inputs' contents and tinygrad's results (docs/emit.md)."""
from __future__ import annotations
import time
from dataclasses import dataclass, field
from typing import Any, Optional, Union
from ..lang.lexical import identifier
from ..ir import Buffer, Kernel, Param, Impl, Expect, Exec, Copy, Ref, Expr, Slice
from .env import EmitError, tinygrad
from .data import buffer_bytes, to_data
from .csource import c_source, scalar_type
from .tolerance import reduction_length, tolerance

__all__ = ["Cmd", "Schedule", "schedule", "compile_schedule", "Timer", "MAX_VALUES"]

MAX_VALUES = 256  # largest output emit writes an `expect` for

@dataclass
class Cmd:
  """One lane of one tinygrad call: an exec or copy on `dev`'s `engine` queue."""
  index: int              # call index in the schedule
  lane: int
  dev: str                # hcq device name (g0..)
  engine: str             # compute | copy
  stmt: Any               # Exec | Copy (no comments yet)
  access: list            # (buffer, start, end, writes)
  label: str              # tinygrad's name of the call
  origin: Optional[str] = None  # the user's line that realized it, `FILE:LINE: CODE` (provenance)

@dataclass
class Schedule:
  devices: list           # tinygrad device names, index = AMD index
  buffers: list           # Buffer decls
  kernels: list           # Kernel decls
  calls: list             # (tinygrad call UOp, enqueue devices tuple)
  cmds: list              # Cmd, schedule order
  by_call: dict           # call index -> [Cmd per lane]
  expects: list           # Expect decls
  buf_dev: dict = field(default_factory=dict)   # buffer name -> hcq device name
  asts: dict = field(default_factory=dict)      # kernel name -> tinygrad's device-independent AST (SINK), for --amd-code
  var_lists: dict = field(default_factory=dict)  # symbolic variable -> its value per launch (emit: one launch)
  bases: dict = field(default_factory=dict)      # buffer name -> tinygrad's base Buffer (emit_jit tells calls apart by it)
  read_first: set = field(default_factory=set)   # names of the buffers the schedule reads before it writes them
  host_waits: bool = False   # the host waits for each device's previous launch before it submits (a TinyJit replay)

class Timer:
  """Seconds spent inside tinygrad: the sum over `with timer:` blocks."""
  def __init__(self): self.inside = 0.0
  def __enter__(self): self._t0 = time.perf_counter()
  def __exit__(self, *exc): self.inside += time.perf_counter() - self._t0

def _on_sched_dev(d) -> bool:
  return all(str(x).split(":")[0] in ("CPU", "AMD") for x in (d if isinstance(d, tuple) else (d,)))

def schedule(*tensors, max_values: int = MAX_VALUES, timings: Optional[dict] = None, linear_vars=None,
             snapshot_all: bool = False, origins: Optional[list] = None, ran=None) -> Schedule:
  """Schedule, compile and run `tensors` with tinygrad; collect buffers, kernels and per-lane commands. `timings`, if
  given, gets the seconds spent inside tinygrad ("tinygrad") and in total ("total"). `linear_vars`: (LINEAR, var_vals)
  captured elsewhere (emit_jit) instead of `tensors`' own schedule; `snapshot_all`: initial contents for every buffer
  allocated before the schedule runs, not only those it reads before writing (state a JIT carries between calls);
  `origins`: the user's line of each call of `linear_vars`' LINEAR (jit.capture), written with its command. `ran`: a
  `realizes.Realizes` that recorded the schedules the function ran itself: they are the schedule, with the contents
  it copied before each ran, and nothing is run again (`tensors` are what the function returned: their expects)."""
  t_start, timer = time.perf_counter(), Timer()
  tinygrad()
  from tinygrad import Tensor
  tensors = tuple(t for t in tensors if t is not None)
  if not tensors: raise EmitError("nothing to emit: the function returned no tensors")
  if bad := [t for t in tensors if not isinstance(t, Tensor)]:
    raise EmitError(f"the function must return tensors, got {type(bad[0]).__name__} `{str(bad[0])[:40]}`")
  s = _Scheduler(timer, origins).build(tensors, max_values, linear_vars, snapshot_all, ran)
  if timings is not None: timings.update(tinygrad=timer.inside, total=time.perf_counter() - t_start)
  return s

def compile_schedule(linear, origins=None) -> tuple:
  """tinygrad's compiled calls of a LINEAR: (the calls on the schedule's devices, each kernel call's device-independent
  AST by id(call) — compile_linear swaps the SINK for the CPU PROGRAM; --amd-code needs the SINK —, the uploads from
  host memory, which run before the rest and whose results are initial contents, `origins` (one per call of the
  LINEAR) by id(call))."""
  from tinygrad.uop.ops import Ops
  from tinygrad.engine.realize import compile_linear, get_call_arg_uops
  pre = linear.src
  linear = compile_linear(linear)
  ast_of = {id(c): a.src[0] for a, c in zip(pre, linear.src) if a.src[0].op is Ops.SINK}
  def upload(c): return c.src[0].op is Ops.COPY and not _on_sched_dev(get_call_arg_uops(c)[1].device)
  origin_of = {id(c): o for c, o in zip(linear.src, origins or ()) if o}
  return [c for c in linear.src if not upload(c)], ast_of, [c for c in linear.src if upload(c)], origin_of

class _Scheduler:
  """One schedule's state: tinygrad's calls, the per-lane Buffers of their arguments, devices and buffers in order of
  first use."""
  def __init__(self, timer: Timer, origins: Optional[list] = None):
    self.timer, self.origins = timer, origins
    self.lane_cache: dict = {}   # argument UOp -> its per-lane tinygrad Buffers
    self.devices: list = []      # canonical tinygrad device names, index = AMD index
    self.dev_idx: dict = {}      # device string as tinygrad spells it -> index

  def build(self, tensors, max_values, linear_vars, snapshot_all, ran=None) -> Schedule:
    from tinygrad import Tensor
    from tinygrad.uop.ops import Ops, UOp
    from tinygrad.engine.realize import run_linear
    if ran is not None:   # the function ran its schedules itself (realizes.py): recorded, with the contents before each ran
      calls, ast_of, var_vals = ran.calls, ran.ast_of, ran.merged_vars()
      self.origin_of = {id(c): o for c, o in zip(calls, ran.origins) if o}
    else:
      with self.timer: linear, var_vals = linear_vars if linear_vars is not None else Tensor.linear_with_vars(*tensors)
      calls, ast_of = self.compile(linear)
    self.enq = {c: self.enqueue_devices(c) for c in calls}
    self.name_buffers(calls, tensors)
    if ran is not None: inits = {bid: ran.inits[bid][1] for bid, (_, (_, read_first)) in self.bases.items() if read_first and bid in ran.inits}
    else:   # snapshot inputs (anything read before written: uploads, realized tensors) before the schedule changes them
      inits = {bid: buffer_bytes(base) for bid, (base, (_, read_first)) in self.bases.items()
               if (read_first or snapshot_all) and base.is_allocated()}
      with self.timer: run_linear(UOp(Ops.LINEAR, src=tuple(calls)), var_vals, jit=True)
    buffers, buf_dev = self.buffer_decls(inits)
    kernels, asts, cmds, by_call = self.commands(calls, ast_of)
    names = self.names
    n = max((reduction_length(a) for a in asts.values()), default=1)
    return Schedule(self.devices, buffers, kernels, [(c, self.enq[c]) for c in calls], cmds, by_call,
                    self.expects(max_values, n), buf_dev, asts, {k: [v] for k, v in var_vals.items()},
                    {names[bid]: base for bid, (base, _) in self.bases.items()},
                    {names[bid] for bid, (_, (_, rf)) in self.bases.items() if rf and bid in inits})

  def compile(self, linear):
    """tinygrad's compiled calls and their ASTs (compile_schedule); the uploads from host memory run here: they become
    initial contents."""
    from tinygrad.uop.ops import Ops, UOp
    from tinygrad.engine.realize import run_linear
    with self.timer: calls, ast_of, uploads, self.origin_of = compile_schedule(linear, self.origins)
    if uploads:
      with self.timer: run_linear(UOp(Ops.LINEAR, src=tuple(uploads)), jit=True)  # already compiled above
    return calls, ast_of

  def enqueue_devices(self, c) -> tuple:
    from tinygrad.uop.ops import Ops
    from tinygrad.engine.realize import get_call_arg_uops, get_call_name
    from tinygrad.runtime.support.hcq2 import _get_enqueue_devs
    from tinygrad.helpers import to_tuple
    if c.src[0].op not in (Ops.PROGRAM, Ops.COPY) or (e := _get_enqueue_devs(c)) is None:
      raise EmitError(f"cannot emit a `{c.src[0].op}` call ({get_call_name(c, get_call_arg_uops(c))})")
    return to_tuple(e)

  def lanes(self, u) -> list:
    """The per-lane tinygrad Buffers of an argument. Resolving `UOp.buffer` is tinygrad's time: run_linear resolves
    every call argument the same way (a view's is a graph rewrite, ~2 ms each) and finds it cached after this."""
    from tinygrad.device import MultiBuffer
    if (r := self.lane_cache.get(u)) is None:
      with self.timer: b = u.buffer
      r = self.lane_cache[u] = list(b.bufs) if isinstance(b, MultiBuffer) else [b]
    return r

  def dev_index(self, d: str) -> int:
    from tinygrad.device import canonicalize_device
    if (i := self.dev_idx.get(d)) is None:
      cd = canonicalize_device(d)
      if cd not in self.devices: self.devices.append(cd)
      i = self.dev_idx[d] = self.devices.index(cd)
    return i

  def name_buffers(self, calls, tensors):
    """Devices in order of first use; base buffers in order of first use, named outN (returned), inN (read before
    written) or bufN."""
    from tinygrad.engine.realize import get_call_arg_uops, get_call_outs_ins
    self.args_of: dict = {}   # call -> (argument uops, (outs, ins))
    self.bases: dict = {}     # id(base) -> (base Buffer, [written?, read before written?]), in order of first use
    for c in calls:
      self.args_of[c] = args, (outs, ins) = get_call_arg_uops(c), get_call_outs_ins(c)
      for d in self.enq[c]: self.dev_index(d)
      for i, u in enumerate(args):
        for b in self.lanes(u):
          self.dev_index(b.device)
          st = self.bases.setdefault(id(b.base), (b.base, [False, False]))[1]
          if i in ins and not st[0]: st[1] = True
          if i in outs: st[0] = True
    self.out_ids: dict = {}   # id(base) -> [(tensor index, Buffer)]
    for k, t in enumerate(tensors):
      if not t.uop.has_buffer_identity(): continue  # a constant (a 0-d tensor from a numpy scalar): no memory to expect
      for b in self.lanes(t.uop): self.out_ids.setdefault(id(b.base), []).append((k, b))
    self.names, n = {}, {"in": 0, "out": 0, "buf": 0}
    for bid, (_, (_, read_first)) in self.bases.items():
      kind = "out" if bid in self.out_ids else "in" if read_first else "buf"
      self.names[bid] = f"{kind}{n[kind]}"
      n[kind] += 1

  def buffer_decls(self, inits: dict):
    buffers, buf_dev = [], {}
    for bid, (base, (_, read_first)) in self.bases.items():
      dev = f"g{self.dev_index(base.device)}"
      buf_dev[self.names[bid]] = dev
      init = to_data(inits[bid], base.dtype) if bid in inits and inits[bid].any() else None  # all zero: the default
      buffers.append(Buffer(self.names[bid], Ref(dev), base.nbytes, init,
                            comment=f"# {base.dtype.name} x {base.size}" + (" (input)" if read_first and bid in inits else "")))
    return buffers, buf_dev

  def slice(self, b) -> Slice:
    nm = self.names[id(b.base)]
    return Slice(Ref(nm)) if b.offset == 0 and b.nbytes == b.base.nbytes else Slice(Ref(nm), b.offset, b.offset + b.nbytes, True)

  def commands(self, calls, ast_of):
    """Kernels (one declaration per distinct (name, source)) and one command per lane of each call."""
    from tinygrad.uop.ops import Ops
    from tinygrad.engine.realize import get_call_name
    kernels, kern_by_key, used, asts = [], {}, set(), {}
    cmds, by_call = [], {}
    for ci, c in enumerate(calls):
      args, (outs, ins) = self.args_of[c]
      edevs = self.enq[c]
      label = identifier(get_call_name(c, args), "k") if c.src[0].op is Ops.PROGRAM else "copy"
      kname = None
      if c.src[0].op is Ops.PROGRAM:
        prg = c.src[0]
        key = (label, next(s.arg for s in prg.src if s.op is Ops.SOURCE))
        if key not in kern_by_key:
          kname, i = label, 1
          while kname in used: kname, i = f"{label}_{i}", i + 1
          used.add(kname)
          modes = tuple(Param("inout" if i in outs and i in ins else "out" if i in outs else "in", f"data{i}") for i in range(len(args)))
          modes += tuple(Param(scalar_type(v, label), v.expr) for v in prg.arg.vars if v.expr != "core_id")
          kernels.append(Kernel(kname, modes, Impl(c_source=c_source(prg, kname)), comment=f"# tinygrad {label}"))
          kern_by_key[key] = kname
          if id(c) in ast_of: asts[kname] = ast_of[id(c)]
        kname = kern_by_key[key]
      per_lane = [self.lanes(u) for u in args]
      lane_cmds = []
      stmt: Union[Exec, Copy]
      for j in range(len(edevs)):
        bufs = [lb[j] if len(lb) > 1 else lb[0] for lb in per_lane]
        acc = [(self.names[id(b.base)], b.offset, b.offset + b.nbytes, i in outs) for i, b in enumerate(bufs)]
        lane = f" lane {j}" if len(edevs) > 1 else ""
        if kname is not None:
          vals = tuple(Expr(Ref(v.expr)) for v in c.src[0].arg.vars if v.expr != "core_id")  # scalar parameters
          stmt, eng, lbl = Exec(Ref(kname), tuple(self.slice(b) for b in bufs) + vals), "compute", label + lane
        else:
          stmt, eng, lbl = Copy(self.slice(bufs[0]), self.slice(bufs[1])), "copy", f"copy {bufs[1].device} -> {bufs[0].device}{lane}"
        lane_cmds.append(Cmd(ci, j, f"g{self.dev_index(edevs[j])}", eng, stmt, acc, lbl, self.origin_of.get(id(c))))
      cmds += lane_cmds
      by_call[ci] = lane_cmds
    return kernels, asts, cmds, by_call

  def expects(self, max_values: int, reduction: int) -> list:
    """tinygrad's results; floats with the tolerance two summation orders of `reduction` terms need (tolerance.py)."""
    out = []
    for bid, uses in self.out_ids.items():
      if bid not in self.names: continue
      for k, b in uses:
        d = to_data(buffer_bytes(b.base, b.offset, b.offset + b.nbytes), b.dtype)
        if len(d.values) > max_values: continue
        tol = tolerance(reduction, d.values) if d.dtype[0] == "f" else (None, None)
        out.append(Expect(self.slice(b), d, d.dtype[0] == "f", *tol, comment=f"# tinygrad's result, tensor {k}"))
    return out
