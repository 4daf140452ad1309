"""`hcqdsl emit`: tinygrad schedule -> .hcq Program.

tinygrad schedules and runs the tensors on its CPU devices ("CPU", "CPU:1", ...), which stand in for AMD:0..N-1 in order
of first use. Kernels, copies and buffers come from `Tensor.linear_with_vars()` -> `compile_linear()`; the schedule is
run once on CPU to get the inputs' contents and tinygrad's results. Two planners turn the command list into queues:
`tinygrad` (translates hcq2's own plan: `_finalize_batch`) and `hcqdsl` (minimal waits by vector clocks). See docs/emit.md.
Only this module (and the tinygrad device) imports tinygrad."""
from __future__ import annotations
import importlib.util, inspect, os, pathlib, re, sys, types
from dataclasses import dataclass, field
from typing import Any, Optional
from .host_cc import gcc_compatible, use_for_tinygrad, NoCompilerError
from ..ir import (Program, Device, Buffer, Signal, Var, Kernel, Param, Impl, Data, Queue, Host, Expect, Wait, SignalWrite,
                 Exec, Copy, Barrier, Epoch, Submit, Ref, Expr, Slice)

__all__ = ["emit", "emit_jit", "EmitError", "Schedule", "schedule", "plan", "PLANNERS"]

PLANNERS = ("hcqdsl", "tinygrad")
MAX_VALUES = 256

class EmitError(Exception): pass

# tinygrad dtype name -> .hcq dtype
_DT = {"float": "f32", "half": "f16", "double": "f64", "int": "i32", "uint": "u32", "char": "i8", "uchar": "u8",
       "bool": "u8", "short": "i16", "ushort": "u16", "long": "i64", "ulong": "u64"}

# ---- the schedule, independent of planner

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

def _tg_env() -> Optional[str]:
  """tinygrad's CPU device, compiling with gcc when there is no clang (a fresh machine); the error, if no compiler."""
  os.environ.setdefault("DEV", "CPU")
  try: use_for_tinygrad()
  except NoCompilerError as e: return str(e)
  return None

# on import too: `hcqdsl.emit(Tensor(...))` loads this module before the tensor is made, and tinygrad picks its default
# device (trying each, CPU only with a compiler) the first time a tensor needs one
_tg_env()

def _tg():
  if (err := _tg_env()) is not None: raise EmitError(err)
  import tinygrad
  return tinygrad

def _strip(name: str) -> str:
  from tinygrad.helpers import ansistrip
  return re.sub(r"[^A-Za-z0-9_]", "_", ansistrip(name))

def _c_source(prg, name: str) -> str:
  """tinygrad's CPU C for a PROGRAM, as `void name(T0* p0, T1* p1, ...)` (one pointer per buffer argument): gcc-friendly
  vector typedefs, and a wrapper when tinygrad's signature has more (`core_id` threads)."""
  from tinygrad.uop.ops import Ops
  src = next(s.arg for s in prg.src if s.op is Ops.SOURCE)
  info, fn = prg.arg, prg.arg.function_name
  src = gcc_compatible(src)  # the runtime compiles it with whichever of clang or gcc the machine has
  if list(info.globals) != list(range(len(info.globals))): raise EmitError(f"{fn}: unexpected buffer order {info.globals}")
  extra = [v.expr for v in info.vars]  # symbolic variables are scalar parameters after the buffers, core_id a thread index
  if "core_id" not in extra and fn == name: return src
  if "core_id" not in extra: return re.sub(rf"\b{re.escape(fn)}\(", f"{name}(", src, count=1)
  body = f"{name}_body" if extra else name
  src = re.sub(rf"\b{re.escape(fn)}\(", f"{body}(", src, count=1)
  if not extra: return src
  n, threads = len(info.globals), info.global_size[0]
  vs = [v for v in info.vars if v.expr != "core_id"]
  ps = ", ".join([f"void* p{i}" for i in range(n)] + [f"{_CTYPE[v.dtype.name]} v{i}" for i, v in enumerate(vs)])
  args = ", ".join([f"p{i}" for i in range(n)] + [f"v{vs.index(v)}" if v.expr != "core_id" else "c" for v in info.vars])
  return src + (f"\n/* tinygrad runs {threads} threads, core_id = 0..{threads - 1} */\nvoid {name}({ps}) {{\n"
                f"  for (int c = 0; c < {threads}; c++) {body}({args});\n}}\n")

_CTYPE = {"int": "int", "uint": "unsigned int"}   # tinygrad variable dtypes -> C, and -> .hcq scalar types
_SCALAR = {"int": "i32", "uint": "u32"}

def _np(buf, lo: int = 0, hi: Optional[int] = None):
  """A copy of bytes [lo:hi) of a tinygrad Buffer (zero-copy view first: only the range is copied)."""
  import numpy as np
  return np.frombuffer(buf.as_memoryview(allow_zero_copy=True), dtype=np.uint8)[lo:hi].copy()

def _data(raw, dtype) -> Data:
  import numpy as np
  dt = _DT.get(dtype.name)
  if dt is None: return Data("u8", tuple(raw.tolist()))
  from ..ir import DTYPES
  # tolist: Python floats/ints in one C pass (float32 -> float exactly, as float(x) did)
  return Data(dt, tuple(raw.view(np.dtype(DTYPES[dt][0])).tolist()))

def _is_sched_dev(d) -> bool: return all(str(x).split(":")[0] == "CPU" or str(x).split(":")[0] == "AMD" for x in (d if isinstance(d, tuple) else (d,)))

def schedule(*tensors, max_values: int = MAX_VALUES, timings: Optional[dict] = None, linear_vars=None,
             snapshot_all: bool = False) -> Schedule:
  """Schedule, compile and run `tensors` with tinygrad; collect buffers, kernels and per-lane commands. `timings`, if
  given, gets the seconds spent inside tinygrad ("tinygrad") and in total ("total"). `linear_vars`: (LINEAR, var_vals)
  captured elsewhere (emit_jit) instead of `tensors`' own schedule; `snapshot_all`: initial contents for every buffer
  allocated before the schedule runs, not only those it reads before writing (state a JIT carries between calls)."""
  import time
  t_start = time.perf_counter()
  _tg()
  from tinygrad import Tensor
  from tinygrad.uop.ops import Ops, UOp
  from tinygrad.device import MultiBuffer
  from tinygrad.engine.realize import compile_linear, run_linear, get_call_arg_uops, get_call_outs_ins, get_call_name
  from tinygrad.runtime.support.hcq2 import _get_enqueue_devs
  from tinygrad.helpers import to_tuple
  tensors = [t for t in tensors if t is not None]
  if not tensors: raise EmitError("nothing to emit: the function returned no tensors")
  if bad := [t for t in tensors if not isinstance(t, Tensor)]:
    raise EmitError(f"the function must return tensors, got {type(bad[0]).__name__} `{str(bad[0])[:40]}`")
  t0 = time.perf_counter()
  linear, var_vals = linear_vars if linear_vars is not None else Tensor.linear_with_vars(*tensors)
  pre = linear.src  # compile_linear swaps each call's SINK for the CPU PROGRAM in place; --amd-code needs the SINK
  linear = compile_linear(linear)
  ast_of = {id(c): a.src[0] for a, c in zip(pre, linear.src) if a.src[0].op is Ops.SINK}
  # uploads from host memory (NPY, PYTHON, ...) become initial contents; run them now
  def host_src(c): return c.src[0].op is Ops.COPY and not _is_sched_dev(get_call_arg_uops(c)[1].device)
  uploads = [c for c in linear.src if host_src(c)]
  calls = [c for c in linear.src if not host_src(c)]
  if uploads: run_linear(UOp(Ops.LINEAR, src=tuple(uploads)), jit=True)  # already compiled above
  t_tg = time.perf_counter() - t0
  args_of: dict = {}  # call -> (argument uops, (outs, ins))
  enq = {}  # call -> its enqueue devices (tinygrad's _get_enqueue_devs walks the call: once per call)
  for c in calls:
    if c.src[0].op not in (Ops.PROGRAM, Ops.COPY) or (e := _get_enqueue_devs(c)) is None:
      raise EmitError(f"cannot emit a `{c.src[0].op}` call ({get_call_name(c, get_call_arg_uops(c))})")
    enq[c] = to_tuple(e)

  lane_cache: dict = {}
  def lanes(u):  # per-lane tinygrad Buffers of an argument
    nonlocal t_tg
    if (r := lane_cache.get(u)) is None:
      # tinygrad's time: run_linear resolves every call argument with this same `UOp.buffer` (a view's is a graph rewrite,
      # contiguous_view, ~2 ms each) and caches it; resolved here first, run_linear below finds it cached
      t0 = time.perf_counter()
      b = u.buffer
      t_tg += time.perf_counter() - t0
      r = lane_cache[u] = list(b.bufs) if isinstance(b, MultiBuffer) else [b]
    return r
  from tinygrad.device import canonicalize_device
  devices: list = []
  dev_idx: dict = {}  # device string as tinygrad spells it -> index
  def dev_index(d: str) -> int:
    if (i := dev_idx.get(d)) is None:
      cd = canonicalize_device(d)
      if cd not in devices: devices.append(cd)
      i = dev_idx[d] = devices.index(cd)
    return i
  # devices in order of first use, buffers by base
  bases: dict = {}   # id(base) -> (base Buffer, [written?, read before written?])
  order: dict = {}   # id(base) -> None: bases in order of first use (a dict: O(1) membership)
  for c in calls:
    args_of[c] = args, (outs, ins) = get_call_arg_uops(c), get_call_outs_ins(c)
    for d in enq[c]: dev_index(d)
    for i, u in enumerate(args):
      for b in lanes(u):
        dev_index(b.device)
        st = bases.setdefault(id(b.base), (b.base, [False, False]))[1]
        if id(b.base) not in order: order[id(b.base)] = None
        if i in ins and not st[0]: st[1] = True
        if i in outs: st[0] = True
  out_ids = {}
  for k, t in enumerate(tensors):
    for b in lanes(t.uop):
      out_ids.setdefault(id(b.base), []).append((k, b))
  names, n = {}, {"in": 0, "out": 0, "buf": 0}
  for bid in order:
    base, (written, read_first) = bases[bid]
    kind = "out" if bid in out_ids else "in" if read_first else "buf"
    names[bid] = f"{kind}{n[kind]}"; n[kind] += 1
  # snapshot inputs (anything read before written: uploads, realized tensors) before the schedule changes them
  inits = {bid: _np(bases[bid][0]) for bid in order if (bases[bid][1][1] or snapshot_all) and bases[bid][0].is_allocated()}
  t0 = time.perf_counter()
  run_linear(UOp(Ops.LINEAR, src=tuple(calls)), var_vals, jit=True)
  t_tg += time.perf_counter() - t0
  buffers, buf_dev = [], {}
  for bid in order:
    base = bases[bid][0]
    dev = f"g{dev_index(base.device)}"
    buf_dev[names[bid]] = dev
    init = _data(inits[bid], base.dtype) if bid in inits else None
    if init is not None and not any(init.values): init = None  # all zero: the default contents
    buffers.append(Buffer(names[bid], Ref(dev), base.nbytes, init,
                          comment=f"# {base.dtype.name} x {base.size}" + (" (input)" if bases[bid][1][1] and bid in inits else "")))
  def sl(b) -> Slice:
    nm = names[id(b.base)]
    return Slice(Ref(nm)) if b.offset == 0 and b.nbytes == b.base.nbytes else Slice(Ref(nm), b.offset, b.offset + b.nbytes, True)
  # kernels: one declaration per distinct (name, source)
  kernels, kern_by_key, used, asts = [], {}, set(), {}
  cmds, by_call = [], {}
  for ci, c in enumerate(calls):
    args, (outs, ins) = args_of[c]
    edevs = enq[c]
    label = _strip(get_call_name(c, args)) if c.src[0].op is Ops.PROGRAM else "copy"
    kname = None
    if c.src[0].op is Ops.PROGRAM:
      prg = c.src[0]
      src = next(s.arg for s in prg.src if s.op is Ops.SOURCE)
      key = (label, src)
      if key not in kern_by_key:
        kname, i = label, 1
        while kname in used: kname, i = f"{label}_{i}", i + 1
        used.add(kname)
        modes = tuple(Param("inout" if i in outs and i in ins else "out" if i in outs else "in", f"data{i}") for i in range(len(args)))
        modes += tuple(Param(_scalar(v, label), v.expr) for v in prg.arg.vars if v.expr != "core_id")
        kernels.append(Kernel(kname, modes, Impl(c_source=_c_source(prg, kname)), comment=f"# tinygrad {label}"))
        kern_by_key[key] = kname
        if id(c) in ast_of: asts[kname] = ast_of[id(c)]
      kname = kern_by_key[key]
    per_lane = [lanes(u) for u in args]
    nl = len(edevs)
    lane_cmds = []
    for j in range(nl):
      bufs = [lb[j] if len(lb) > 1 else lb[0] for lb in per_lane]
      acc = [(names[id(b.base)], b.offset, b.offset + b.nbytes, i in outs) for i, b in enumerate(bufs)]
      dev = f"g{dev_index(edevs[j])}"
      if kname is not None:
        vals = tuple(Expr(Ref(v.expr)) for v in c.src[0].arg.vars if v.expr != "core_id")  # scalar parameters
        stmt, eng = Exec(Ref(kname), tuple(sl(b) for b in bufs) + vals), "compute"
      else:
        stmt, eng = Copy(sl(bufs[0]), sl(bufs[1])), "copy"
      lbl = label + (f" lane {j}" if nl > 1 else "")
      if kname is None: lbl = f"copy {bufs[1].device} -> {bufs[0].device}" + (f" lane {j}" if nl > 1 else "")
      lane_cmds.append(Cmd(ci, j, dev, eng, stmt, acc, lbl))
    cmds += lane_cmds
    by_call[ci] = lane_cmds
  expects = []
  for bid, uses in out_ids.items():
    if bid not in names: continue
    for k, b in uses:
      raw = _np(b.base, b.offset, b.offset + b.nbytes)
      d = _data(raw, b.dtype)
      if len(d.values) > max_values: continue
      expects.append(Expect(sl(b), d, approx=d.dtype[0] == "f", comment=f"# tinygrad's result, tensor {k}"))
  if timings is not None: timings.update(tinygrad=t_tg, total=time.perf_counter() - t_start)
  return Schedule(devices, buffers, kernels, [(c, enq[c]) for c in calls], cmds, by_call, expects,
                  buf_dev, asts, {k: [v] for k, v in var_vals.items()}, {names[bid]: bases[bid][0] for bid in order})

def _scalar(v, kernel: str) -> str:
  if v.dtype.name not in _SCALAR: raise EmitError(f"{kernel}: variable `{v.expr}` is {v.dtype.name}; .hcq scalars are {', '.join(_SCALAR)}")
  return _SCALAR[v.dtype.name]

# ---- planners

def _cmd_stmt(c: Cmd):
  import attrs
  return attrs.evolve(c.stmt, comment=f"# {c.label}")

def _epoch(dev: str): return Expr(Ref(f"{dev}.epoch"))

class _Q:
  def __init__(self, name, engine, dev):
    self.name, self.engine, self.dev, self.body = name, engine, dev, []
    self.cmd_pos: list = []  # body index of each command

def plan_hcqdsl(s: Schedule) -> tuple[list, list, Optional[Host]]:
  """Compute and copy queues per device; a signal after each command some other queue must wait for (value D.epoch,
  monotonic over launches, so no resets and no host waits); only waits that happens-before does not already imply
  (vector clocks, greedy cover); `epoch` on first use, a `wait E.timeline` before the first touch of another device E's
  memory; per device a finalizer at the end of its compute queue."""
  qs: dict = {}
  def queue(dev, eng) -> _Q:
    k = (dev, eng)
    if k not in qs: qs[k] = _Q(f"{dev}_{eng}", eng, dev)
    return qs[k]
  vc: dict = {}      # queue name -> {queue name: last command index ordered before its current end}
  snap: dict = {}    # (queue, cmd index) -> vector clock at that command
  sig_after: dict = {}  # (queue name, cmd index) -> signal name
  signals: list = []
  history: dict = {}  # buffer -> [(start, end, writes, queue name, cmd index)]
  last_mem: dict = {}   # (device, queue name) -> last cmd index touching device's memory
  qobj: dict = {}
  qpos: dict = {}    # queue name -> order of first use (tie-break of the greedy cover)
  n_sig: dict = {}   # queue name -> signals placed after its commands so far
  n_waits = 0
  def use(q: _Q):
    qobj[q.name] = q
    qpos.setdefault(q.name, len(qpos))

  def ensure_signal(q: _Q, i: int) -> str:
    k = (q.name, i)
    if k not in sig_after:
      name = f"{q.name}_s{n_sig.get(q.name, 0)}"
      n_sig[q.name] = n_sig.get(q.name, 0) + 1
      sig_after[k] = name
      signals.append(Signal(name, Ref(q.dev), comment=f"# {q.name} is past its command {i}"))
    return sig_after[k]

  def cover(q: _Q, need: dict) -> list:
    """Waits for q so that vc[q][P] >= need[P] for every P: greedy, each step picks the wait implying the most."""
    out, clock = [], vc.setdefault(q.name, {})
    while True:
      unmet = {p: i for p, i in need.items() if clock.get(p, -1) < i}
      if not unmet: return out
      def gain(p): return sum(1 for p2, i2 in unmet.items() if max(snap[(p, unmet[p])].get(p2, -1), unmet[p] if p2 == p else -1) >= i2)
      p = max(unmet, key=lambda p: (gain(p), -qpos[p]))
      i = unmet[p]
      for k, v in snap[(p, i)].items(): clock[k] = max(clock.get(k, -1), v)
      clock[p] = max(clock.get(p, -1), i)
      out.append((p, i))

  def add_waits(q: _Q, waits: list, why: str):
    nonlocal n_waits
    cross = False
    for p, i in waits:
      src = qobj[p]
      q.body.append(Wait(Ref(ensure_signal(src, i)), _epoch(src.dev), comment=f"# {why}: {p} past {_label(src, i)}"))
      n_waits += 1
      cross |= src.dev != q.dev
    return cross

  def _label(q: _Q, i: int) -> str: return q.body[q.cmd_pos[i]].comment[2:] if q.body[q.cmd_pos[i]].comment else str(i)

  for c in s.cmds:
    q = queue(c.dev, c.engine)
    use(q)
    idx = len(q.cmd_pos)
    if idx == 0: q.body.append(Epoch(comment="# the previous launch is done with this device"))
    need: dict = {}
    mems = {s.buf_dev[b] for b, *_ in c.access}  # devices whose memory this command touches
    for b, st, en, w in c.access:
      for (st2, en2, w2, p, i) in history.get(b, ()):
        if p != q.name and st < en2 and st2 < en and (w or w2): need[p] = max(need.get(p, -1), i)
    cross = add_waits(q, cover(q, need), "data")
    clock = vc.setdefault(q.name, {})
    clock[("tl", q.dev)] = 0  # `epoch`: ordered after the previous launch's finalizer of this device
    for m in sorted(mems):
      if ("tl", m) in clock: continue  # already ordered after m's previous launch (itself, or through a wait)
      q.body.append(Wait(Ref(f"{m}.timeline"), Expr(Ref(f"{m}.epoch"), -1),
                         comment=f"# the previous launch is done with {m}'s memory"))
      clock[("tl", m)] = 0; cross = True
    if cross: q.body.append(Barrier(comment="# see memory written on another device"))
    q.cmd_pos.append(len(q.body))
    q.body.append(_cmd_stmt(c))
    clock[q.name] = idx
    snap[(q.name, idx)] = dict(clock)
    for b, st, en, w in c.access:
      history.setdefault(b, []).append((st, en, w, q.name, idx))
      last_mem[(s.buf_dev[b], q.name)] = idx
  # finalizers
  for d in [f"g{i}" for i in range(len(s.devices))]:
    f = queue(d, "compute")
    use(f)
    need = {p: i for (m, p), i in last_mem.items() if m == d and p != f.name}
    for q in list(qs.values()):
      if q.dev == d and q.name != f.name and q.cmd_pos: need[q.name] = max(need.get(q.name, -1), len(q.cmd_pos) - 1)
    add_waits(f, cover(f, need), "finalizer")
    f.body.append(SignalWrite(Ref(f"{d}.timeline"), _epoch(d), comment="# finalizer: this launch is done with the device"))
  queues, after_of = [], {}
  for (qn, i), sig in sig_after.items(): after_of.setdefault(qn, {})[qobj[qn].cmd_pos[i]] = sig
  for q in sorted(qs.values(), key=lambda q: (int(q.dev[1:]), q.engine != "compute")):
    after = after_of.get(q.name, {})
    body = []
    for k, st in enumerate(q.body):
      body.append(st)
      if k in after: body.append(SignalWrite(Ref(after[k]), _epoch(q.dev)))
    queues.append(Queue(q.name, q.engine, Ref(q.dev), tuple(body)))
  return signals, queues, None

def plan_tinygrad(s: Schedule) -> tuple[list, list, Optional[Host]]:
  """Translate tinygrad's own hcq2 plan (`_finalize_batch`) statement by statement."""
  from tinygrad.uop.ops import Ops
  from tinygrad.runtime.support.hcq2 import _finalize_batch, get_submit
  from tinygrad.helpers import to_tuple, dedup
  from tinygrad.device import canonicalize_device
  dmap = {d: f"g{i}" for i, d in enumerate(s.devices)}
  def hd(d) -> str: return dmap[canonicalize_device(d)]
  batch = [(c, devs) for c, devs in s.calls]
  batch_info = [(devs, "COMPUTE:0" if c.src[0].op is Ops.PROGRAM else "COPY:0") for c, devs in batch]
  out = _finalize_batch(batch, False)
  eng = {"COMPUTE:0": "compute", "COPY:0": "copy"}
  qs: dict = {}
  def queue(dev, e):
    if (dev, e) not in qs: qs[(dev, e)] = Queue(f"{dev}_{e}", e, Ref(dev), ())
    return (dev, e)
  bodies: dict = {}
  slot_q: dict = {}   # signal slot -> tinygrad queue name
  sig_decls: dict = {}
  def sig(dev: str, q: str) -> str:
    name = f"{dev}_{eng[q]}_sig"
    if name not in sig_decls: sig_decls[name] = Signal(name, Ref(dev), comment=f"# tinygrad's {q} signal of {dev}")
    return name
  # the per-call lane commands, matched back by the call's sources
  pending: dict = {}
  for ci, (c, _) in enumerate(batch): pending.setdefault(c.src, []).append(ci)
  def lane_of(u, j):
    if u.op is Ops.MSTACK: return u.src[j]
    return u
  host: list = []
  for call in out:
    name = call.arg.name
    body = call.src[0]
    devs = to_tuple(call.arg.aux.device)
    if name == "hcq_fence":
      for d in devs: host.append(Wait(Ref(f"{hd(d)}.timeline"), Expr(Ref(f"{hd(d)}.epoch"), -1),
                                      comment="# tinygrad hcq_fence: this schedule's previous epoch is done"))
      continue
    if name == "hcq_reset":
      params = [u for u in body.toposort() if u.op is Ops.PARAM and u.tag == "signal"]
      qnames = dedup([qn for bdevs, qn in batch_info if set(bdevs) & set(devs)])
      for p, qn in zip(params, qnames):
        slot_q[p.arg.slot] = qn
        for d in to_tuple(p.device): host.append(SignalWrite(Ref(sig(hd(d), qn)), Expr(None, 0), comment="# tinygrad hcq_reset"))
      continue
    sub = get_submit(body)
    sdevs, qn = sub.src[0].arg
    fin = name == "hcq_finalizer"
    for ins in sub.src[0].src:
      ci = pending[ins.src].pop(0) if ins.op is Ops.CALL else None
      for j, d in enumerate(sdevs):
        key = queue(hd(d), eng[qn])
        b = bodies.setdefault(key, [])
        if ins.op is Ops.CALL:
          c = s.by_call[ci][j]
          b.append(_cmd_stmt(c)); continue
        if ins.arg == "barrier": b.append(Barrier(comment="# tinygrad: first use of this queue in the batch")); continue
        p, val = lane_of(ins.src[0], j), ins.src[1]
        if ins.arg == "wait":
          if p.tag == "timeline_signal": b.append(Epoch(comment="# tinygrad: wait timeline >= timeline_value - 1")); continue
          if p.tag == "sentinel_signal": continue  # tinygrad's always-satisfied placeholder for a lane without deps
          assert p.tag == "signal" and val.op is Ops.CONST, (p.tag, val)
          b.append(Wait(Ref(sig(hd(p.device), slot_q.get(p.arg.slot) or _slot_queue(p.arg.slot, out))), Expr(None, int(val.arg)),
                        comment="# tinygrad finalizer dependency" if fin else None))
        elif ins.arg == "store":
          if p.tag == "timeline_signal":
            b.append(SignalWrite(Ref(f"{hd(d)}.timeline"), _epoch(hd(d)), comment="# tinygrad hcq_finalizer"))
          else:
            slot_q[p.arg.slot] = qn
            b.append(SignalWrite(Ref(sig(hd(d), qn)), Expr(None, int(val.arg))))
        else: raise EmitError(f"unknown tinygrad queue instruction {ins.arg}")
  host.append(Submit((), comment="# tinygrad's queue submits, then the finalizers (on each device's compute queue)"))
  queues = [Queue(q.name, q.engine, q.device, tuple(bodies.get(k, ()))) for k, q in sorted(qs.items(), key=lambda kv: (int(kv[0][0][1:]), kv[0][1] != "compute"))]
  return list(sig_decls.values()), queues, Host(tuple(host))

_SLOTS: dict = {}
def _slot_queue(slot: int, out) -> str:
  """The tinygrad queue name of a signal slot seen only in a wait: find the store to it."""
  from tinygrad.uop.ops import Ops
  from tinygrad.runtime.support.hcq2 import get_submit
  for call in out:
    if call.arg.name in ("hcq_fence", "hcq_reset"): continue
    sub = get_submit(call.src[0])
    for ins in sub.src[0].src:
      if ins.op is Ops.INS and ins.arg == "store":
        ps = ins.src[0].src if ins.src[0].op is Ops.MSTACK else (ins.src[0],)
        if any(p.op is Ops.PARAM and p.arg.slot == slot for p in ps): return sub.src[0].arg[1]
  raise EmitError(f"tinygrad signal slot {slot} is never written")

def plan(s: Schedule, planner: str = "hcqdsl") -> tuple[list, list, Optional[Host]]:
  if planner == "hcqdsl": return plan_hcqdsl(s)
  if planner == "tinygrad": return plan_tinygrad(s)
  raise EmitError(f"unknown planner {planner!r} (one of {', '.join(PLANNERS)})")

def program(s: Schedule, planner: str = "hcqdsl", title: str = "") -> Program:
  signals, queues, host = plan(s, planner)
  devs = [Device(f"g{i}", "AMD", i, comment=f"# tinygrad {d}") for i, d in enumerate(s.devices)]
  head = (f"# emitted by `hcqdsl emit` from a tinygrad schedule{': ' + title if title else ''} (planner {planner})",
          f"# {len([c for c in s.cmds if c.engine == 'compute'])} execs, {len([c for c in s.cmds if c.engine == 'copy'])} copies "
          f"on {len(devs)} device{'s' * (len(devs) != 1)}")
  import attrs
  if devs: devs[0] = attrs.evolve(devs[0], comments=head)
  vars_ = [Var(n, tuple(v), comment="# tinygrad Variable, one value per launch") for n, v in s.var_lists.items()]
  decls = devs + s.buffers + vars_ + signals + s.kernels + queues + ([host] if host else []) + s.expects
  return Program(tuple(decls), file="<emit>")

# ---- API

def emit(*tensors, planner: str = "hcqdsl", max_values: int = MAX_VALUES, title: str = "") -> Program:
  """The .hcq Program that realizes `tensors` the way tinygrad schedules them (runs them once on tinygrad's CPU)."""
  if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)): tensors = tuple(tensors[0])
  return program(schedule(*tensors, max_values=max_values), planner, title)

def emit_jit(fn, *args, planner: str = "hcqdsl", max_values: int = MAX_VALUES, **kwargs) -> Program:
  """`emit_jit(jit_fn, calls)`, calls a list of argument tuples: one launch per call (hcqdsl.emit_jit, docs/emit.md).
  `emit_jit(fn, *args)`: emit what `fn(*args)` returns (a tensor or a tuple of them), one launch."""
  if len(args) == 1 and not kwargs and isinstance(args[0], list) and args[0] and all(isinstance(c, tuple) for c in args[0]):
    from .jit import emit_jit as replay
    return replay(fn, args[0], planner=planner, max_values=max_values)
  _tg()
  fn = getattr(fn, "fxn", fn)
  out = fn(*args, **kwargs)
  return emit(*(out if isinstance(out, (tuple, list)) else (out,)), planner=planner, max_values=max_values,
              title=getattr(fn, "__name__", ""))

def load_function(spec: str, default: str = "main"):
  path, _, fname = spec.partition(":")
  p = pathlib.Path(path)
  if not p.is_file(): raise EmitError(f"{path}: no such file")
  _tg()
  mspec = importlib.util.spec_from_file_location(f"_hcq_emit_{p.stem}", p)
  mod = importlib.util.module_from_spec(mspec)
  sys.path.insert(0, str(p.parent.resolve()))
  try: mspec.loader.exec_module(mod)
  except Exception as e: raise script_error(e, spec, "importing the script failed") from None
  finally: sys.path.pop(0)
  fname = fname or default
  fn = getattr(mod, fname, None)
  if not callable(fn): raise EmitError(f"{path}: no function `{fname}`")
  return fn

def script_error(e: BaseException, spec: str, what: str = "the script failed") -> EmitError:
  """One line for an exception out of the user's script (or tinygrad under it): the script's innermost line, then the
  exception, instead of tinygrad's traceback."""
  import traceback
  path = pathlib.Path(spec.partition(":")[0]).resolve()
  frames = [f for f in traceback.extract_tb(e.__traceback__) if pathlib.Path(f.filename).resolve() == path]
  where = f"{spec.partition(':')[0]}:{frames[-1].lineno}: " if frames else ""
  msg = str(e).strip().splitlines()
  return EmitError(f"{where}{what}: {type(e).__name__}" + (f": {msg[-1]}" if msg else ""))

def call_script(fn, devices: Optional[int] = None):
  kw = {}
  if devices is not None and "devices" in inspect.signature(fn).parameters: kw["devices"] = devices
  out = fn(**kw)
  return out if isinstance(out, (tuple, list)) else (out,)

AMD_ARCH = "gfx1100"

def amd_renderer(arch: str = AMD_ARCH):
  """tinygrad's AMD LLVM renderer for `arch`, built the way `DEV=AMD:AMDLLVM:gfx1100` builds it (0.14 renderers take a
  Target); its compiler loads libLLVM (Debian: libllvm19)."""
  from tinygrad.helpers import Target
  from tinygrad.renderer.llvmir import AMDLLVMRenderer
  return AMDLLVMRenderer(Target(device="AMD", renderer="AMDLLVM", arch=arch))

LLVM_HINT = "tinygrad's AMD LLVM backend needs libLLVM 19 (Debian: apt-get install libllvm19)"

def amd_code_unavailable(arch: str = AMD_ARCH) -> Optional[str]:
  """None when `--amd-code` works on this machine, else why (a one-element kernel compiled for `arch` as the probe:
  with only an older libLLVM, tinygrad loads it and fails at the first compile)."""
  if arch not in _amd_probe:
    try:
      from tinygrad import Tensor
      amd_code(schedule(Tensor([1.0, 2.0]).contiguous() + 1), arch)
      _amd_probe[arch] = None
    except Exception as e: _amd_probe[arch] = f"{e}".splitlines()[0]
  return _amd_probe[arch]
_amd_probe: dict = {}

def amd_code(s: Schedule, arch: str = AMD_ARCH) -> dict:
  """kernel name -> (ELF code object bytes, global_size, local_size): each kernel's AST lowered and compiled for `arch`
  by tinygrad (its own AMD optimizations, so the launch dims are AMD's, not the CPU's)."""
  from tinygrad.uop.ops import Ops
  from tinygrad.codegen import to_program
  try: ren = amd_renderer(arch)
  except Exception as e: raise EmitError(f"--amd-code: {LLVM_HINT}: {type(e).__name__}: {e}")
  out = {}
  for k in s.kernels:
    if (ast := s.asts.get(k.name)) is None: raise EmitError(f"--amd-code: no tinygrad AST for kernel {k.name}")
    try: prg = to_program(ast, ren)
    except Exception as e:
      raise EmitError(f"--amd-code: compiling {k.name} for {arch} failed ({LLVM_HINT}): {type(e).__name__}: {e}")
    info = prg.arg
    # hcqdsl passes one pointer per parameter, in order: the code object must take exactly that
    if list(info.globals) != list(range(len(k.params))) or info.vars:
      raise EmitError(f"--amd-code: {k.name}: unexpected {arch} signature (buffers {info.globals}, vars {[v.expr for v in info.vars]})")
    lib = next(x.arg for x in prg.src if x.op is Ops.BINARY)
    out[k.name] = (lib, tuple(info.global_size), tuple(info.local_size))
  return out

def attach_amd_code(prog: Program, s: Schedule, outdir: pathlib.Path, arch: str = AMD_ARCH) -> Program:
  """Write each kernel's gfx1100 code object to OUTDIR/NAME.co, reference it (`amd "NAME.co"`), and give every exec of
  it tinygrad's AMD launch dims (grid = workgroups, block = workgroup size; the C kernels ignore them)."""
  import attrs
  code = amd_code(s, arch)
  for name, (lib, _, _) in code.items(): (outdir / f"{name}.co").write_bytes(lib)
  def dims(st):
    if not isinstance(st, Exec) or st.kernel.name not in code: return st
    _, g, l = code[st.kernel.name]
    return attrs.evolve(st, grid=g, block=l)
  decls = []
  for d in prog.decls:
    if isinstance(d, Kernel) and d.name in code: d = attrs.evolve(d, impl=attrs.evolve(d.impl, amd_code=f"{d.name}.co"))
    elif isinstance(d, Queue): d = attrs.evolve(d, body=tuple(dims(st) for st in d.body))
    decls.append(d)
  return attrs.evolve(prog, decls=tuple(decls))

class _CallableModule(types.ModuleType):
  """`hcqdsl.emit(*tensors)` is the API the issue names, and `hcqdsl.emit` is also this module: calling the module
  calls `emit`, so neither spelling shadows the other."""
  def __call__(self, *tensors, **kw): return emit(*tensors, **kw)

sys.modules[__name__].__class__ = _CallableModule
