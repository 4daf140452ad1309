"""Schedule -> queues -> Program. Two planners turn a schedule's command list into queues: `tinygrad` (translates
hcq2's own plan: `_finalize_batch`) and `hcqdsl` (minimal waits by vector clocks). See docs/emit.md."""
from __future__ import annotations
from typing import Optional
import attrs
from ..ir import Program, Device, Signal, Var, Queue, Host, Wait, SignalWrite, Barrier, Epoch, Submit, Ref, Expr, epoch_wait, epoch_of, finalizer
from .env import EmitError
from .schedule import Cmd, Schedule

__all__ = ["PLANNERS", "plan", "plan_hcqdsl", "plan_tinygrad", "program"]

PLANNERS = ("hcqdsl", "tinygrad")

def _cmd_stmt(c: Cmd):
  """The command with its trailing comment: tinygrad's name of the call, and where the user's code realized it."""
  return attrs.evolve(c.stmt, comment=f"# {c.label}" + (f" from {c.origin}" if c.origin else ""))
def _epoch(dev: str): return Expr(Ref(epoch_of(dev)))

class _Q:
  def __init__(self, name, engine, dev):
    self.name, self.engine, self.dev, self.body = name, engine, dev, []
    self.cmd_pos: list = []  # body index of each command

def plan_hcqdsl(s: Schedule) -> tuple[list, list, Optional[Host]]:
  """Compute and copy queues per device; a signal after each command some other queue must wait for (value D.epoch,
  monotonic over launches, so no resets and no host waits); only waits that happens-before does not already imply
  (vector clocks, greedy cover); `epoch` on first use, a `wait E.timeline` before the first touch of another device E's
  memory unless the clock implies it (`s.host_waits`: the host waited for every device's previous launch before it
  submitted); a `barrier` opening each compute queue when the host writes per-launch data (kernel arguments of vars,
  rebound or rewritten contents), which reaches the device through the HDP; per device a finalizer at the end of its
  compute queue."""
  p = _VectorPlan(s)
  for c in s.cmds: p.command(c)
  for i in range(len(s.devices)): p.finalizer(f"g{i}")
  return p.signals, p.queues(), None

class _VectorPlan:
  """plan_hcqdsl's state: the queues, each one's vector clock, and the signals placed after commands."""
  def __init__(self, s: Schedule):
    self.s = s
    self.host_writes = bool(s.var_lists) or any(b.per_launch for b in s.buffers)   # per-launch kernel arguments or contents
    self.qs: dict = {}       # (device, engine) -> _Q
    self.vc: dict = {}       # queue name -> {queue name: last command index ordered before its current end}
    self.snap: dict = {}     # (queue, cmd index) -> vector clock at that command
    self.sig_after: dict = {}  # (queue name, cmd index) -> signal name
    self.signals: list = []
    self.history: dict = {}  # buffer -> [(start, end, writes, queue name, cmd index)]
    self.last_mem: dict = {}   # (device, queue name) -> last cmd index touching device's memory
    self.qobj: dict = {}
    self.qpos: dict = {}     # queue name -> order of first use (tie-break of the greedy cover)
    self.n_sig: dict = {}    # queue name -> signals placed after its commands so far

  def queue(self, dev, eng) -> _Q:
    """The (device, engine) queue, made on first use."""
    if (dev, eng) not in self.qs: self.qs[dev, eng] = _Q(f"{dev}_{eng}", eng, dev)
    q = self.qs[dev, eng]
    self.qobj[q.name] = q
    self.qpos.setdefault(q.name, len(self.qpos))
    return q

  def ensure_signal(self, q: _Q, i: int) -> str:
    k = (q.name, i)
    if k not in self.sig_after:
      name = f"{q.name}_s{self.n_sig.get(q.name, 0)}"
      self.n_sig[q.name] = self.n_sig.get(q.name, 0) + 1
      self.sig_after[k] = name
      self.signals.append(Signal(name, Ref(q.dev), comment=f"# {q.name} is past its command {i}"))
    return self.sig_after[k]

  def cover(self, q: _Q, need: dict) -> list:
    """Waits for q so that vc[q][P] >= need[P] for every P: greedy, each step picks the wait implying the most."""
    out: list[tuple[str, int]] = []
    clock, snap = self.vc.setdefault(q.name, {}), self.snap
    while True:
      unmet = {p: i for p, i in need.items() if clock.get(p, -1) < i}
      if not unmet: return out
      def gain(p): return sum(1 for p2, i2 in unmet.items() if max(snap[(p, unmet[p])].get(p2, -1), unmet[p] if p2 == p else -1) >= i2)
      p = max(unmet, key=lambda p: (gain(p), -self.qpos[p]))
      i = unmet[p]
      for k, v in snap[(p, i)].items(): clock[k] = max(clock.get(k, -1), v)
      clock[p] = max(clock.get(p, -1), i)
      out.append((p, i))

  def add_waits(self, q: _Q, waits: list, why: str) -> bool:
    """q waits for each (queue, command index) of `waits`; whether one is on another device."""
    cross = False
    for p, i in waits:
      src = self.qobj[p]
      q.body.append(Wait(Ref(self.ensure_signal(src, i)), _epoch(src.dev), comment=f"# {why}: {p} past {_label(src, i)}"))
      cross |= src.dev != q.dev
    return cross

  def command(self, c: Cmd) -> None:
    """c on its queue, after the waits for the conflicting accesses of other queues and the devices' previous launch."""
    s, q = self.s, self.queue(c.dev, c.engine)
    idx = len(q.cmd_pos)
    if idx == 0:
      q.body.append(Epoch(comment="# the previous launch is done with this device"))
      if self.host_writes and q.engine == "compute":  # the host's writes reach the device through the HDP: flush it
        q.body.append(Barrier(comment="# see what the host patched (kernel arguments, inputs), as HCQGraph's memory_barrier"))
    need: dict = {}
    mems = {s.buf_dev[b] for b, *_ in c.access}  # devices whose memory this command touches
    for b, st, en, w in c.access:
      for (st2, en2, w2, p, i) in self.history.get(b, ()):
        if p != q.name and st < en2 and st2 < en and (w or w2): need[p] = max(need.get(p, -1), i)
    cross = self.add_waits(q, self.cover(q, need), "data")
    clock = self.vc.setdefault(q.name, {})
    clock[("tl", q.dev)] = 0  # `epoch`: ordered after the previous launch's finalizer of this device
    if s.host_waits:  # the host waited for every device's previous launch before it submitted this queue
      for d in range(len(s.devices)): clock[("tl", f"g{d}")] = 0
    for m in sorted(mems):
      if ("tl", m) in clock: continue  # already ordered after m's previous launch (itself, or through a wait)
      q.body.append(epoch_wait(m, comment=f"# the previous launch is done with {m}'s memory"))
      clock[("tl", m)] = 0
      cross = True
    if cross: q.body.append(Barrier(comment="# see memory written on another device"))
    q.cmd_pos.append(len(q.body))
    q.body.append(_cmd_stmt(c))
    clock[q.name] = idx
    self.snap[(q.name, idx)] = dict(clock)
    for b, st, en, w in c.access:
      self.history.setdefault(b, []).append((st, en, w, q.name, idx))
      self.last_mem[(s.buf_dev[b], q.name)] = idx

  def finalizer(self, d: str) -> None:
    """Device d's compute queue waits for every queue's last command on d's memory, then ends the launch."""
    f = self.queue(d, "compute")
    need = {p: i for (m, p), i in self.last_mem.items() if m == d and p != f.name}
    for q in list(self.qs.values()):
      if q.dev == d and q.name != f.name and q.cmd_pos: need[q.name] = max(need.get(q.name, -1), len(q.cmd_pos) - 1)
    self.add_waits(f, self.cover(f, need), "finalizer")
    f.body.append(finalizer(d, comment="# finalizer: this launch is done with the device"))

  def queues(self) -> list:
    """The Queues, by device then compute first, with each placed signal after its command."""
    out: list[Queue] = []
    after_of: dict[str, dict[int, str]] = {}
    for (qn, i), sig in self.sig_after.items(): after_of.setdefault(qn, {})[self.qobj[qn].cmd_pos[i]] = sig
    for q in sorted(self.qs.values(), key=lambda q: (int(q.dev[1:]), q.engine != "compute")):
      after = after_of.get(q.name, {})
      body = []
      for k, st in enumerate(q.body):
        body.append(st)
        if k in after: body.append(SignalWrite(Ref(after[k]), _epoch(q.dev)))
      out.append(Queue(q.name, q.engine, Ref(q.dev), tuple(body)))
    return out

def _label(q: _Q, i: int) -> str:  # the command's name, not its provenance (that belongs to the command)
  c = q.body[q.cmd_pos[i]].comment
  return c[2:].split(" from ")[0] if c else str(i)

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
  for k, (c, _) in enumerate(batch): pending.setdefault(c.src, []).append(k)
  def lane_of(u, j):
    if u.op is Ops.MSTACK: return u.src[j]
    return u
  host: list = []
  for call in out:
    name = call.arg.name
    body = call.src[0]
    devs = to_tuple(call.arg.aux.device)
    if name == "hcq_fence":
      for d in devs: host.append(epoch_wait(hd(d), comment="# tinygrad hcq_fence: this schedule's previous epoch is done"))
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
          b.append(_cmd_stmt(c))
          continue
        if ins.arg == "barrier":
          b.append(Barrier(comment="# tinygrad: first use of this queue in the batch"))
          continue
        p, val = lane_of(ins.src[0], j), ins.src[1]
        if ins.arg == "wait":
          if p.tag == "timeline_signal":
            b.append(Epoch(comment="# tinygrad: wait timeline >= timeline_value - 1"))
            continue
          if p.tag == "sentinel_signal": continue  # tinygrad's always-satisfied placeholder for a lane without deps
          assert p.tag == "signal" and val.op is Ops.CONST, (p.tag, val)
          b.append(Wait(Ref(sig(hd(p.device), slot_q.get(p.arg.slot) or _slot_queue(p.arg.slot, out))), Expr(None, int(val.arg)),
                        comment="# tinygrad finalizer dependency" if fin else None))
        elif ins.arg == "store":
          if p.tag == "timeline_signal":
            b.append(finalizer(hd(d), comment="# tinygrad hcq_finalizer"))
          else:
            slot_q[p.arg.slot] = qn
            b.append(SignalWrite(Ref(sig(hd(d), qn)), Expr(None, int(val.arg))))
        else: raise EmitError(f"unknown tinygrad queue instruction {ins.arg}")
  host.append(Submit((), comment="# tinygrad's queue submits, then the finalizers (on each device's compute queue)"))
  order = sorted(qs.items(), key=lambda kv: (int(kv[0][0][1:]), kv[0][1] != "compute"))
  queues = [Queue(q.name, q.engine, q.device, tuple(bodies.get(k, ()))) for k, q in order]
  return list(sig_decls.values()), queues, Host(tuple(host))

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
  """(signals, queues, host) for `s` by the named planner."""
  if (fn := _PLANNERS.get(planner)) is None: raise EmitError(f"unknown planner {planner!r} (one of {', '.join(PLANNERS)})")
  return fn(s)

_PLANNERS = {"hcqdsl": plan_hcqdsl, "tinygrad": plan_tinygrad}
assert tuple(_PLANNERS) == PLANNERS

def program(s: Schedule, planner: str = "hcqdsl", title: str = "", launches: int = 1) -> Program:
  """The whole program: devices, the schedule's buffers and kernels, the planner's signals, queues and host, expects.
  The header says how many launches it holds (`# hcq: launches=N`, what check, run and graph default to)."""
  signals, queues, host = plan(s, planner)
  devs = [Device(f"g{i}", "AMD", i, comment=f"# tinygrad {d}") for i, d in enumerate(s.devices)]
  head = (f"# hcq: launches={launches}", f"# emitted by `hcqdsl emit` from a tinygrad schedule{': ' + title if title else ''} (planner {planner})",
          f"# {len([c for c in s.cmds if c.engine == 'compute'])} execs, {len([c for c in s.cmds if c.engine == 'copy'])} copies "
          f"on {len(devs)} device{'s' * (len(devs) != 1)}")
  if devs: devs[0] = attrs.evolve(devs[0], comments=head)
  vars_ = [Var(n, tuple(v), comment="# tinygrad Variable, one value per launch") for n, v in s.var_lists.items()]
  decls = devs + s.buffers + vars_ + signals + s.kernels + queues + ([host] if host else []) + s.expects
  return Program(tuple(decls), file="<emit>")

