"""Compile a program, submit its launches to the built-in AMD emulator and check its `expect`s: `run`, and
`run_schedules` over several interleavings."""
from __future__ import annotations
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Optional, Union
import attrs
import numpy as np
from ..ir import Program, DTYPES
from ..diagnostics import HcqError
if TYPE_CHECKING:
  from .reports import Hang, Fault
  from .kernels import KernelFn   # (the emulator loads numpy tables: imported when run runs)

__all__ = ["run", "run_schedules", "compare", "as_program", "RunResult", "QueueStats", "ExpectResult", "Race",
           "BufferMemory", "physical_memory"]

@attrs.define
class QueueStats:
  name: str
  engine: str
  device: str
  packets: int
  by_name: dict
  time_us: float
  patched: list   # dwords the submit interpreter rewrote, per launch

@attrs.define
class ExpectResult:
  line: int
  buffer: str
  ok: bool
  message: str

class BufferMemory(Mapping):
  """buffer name -> final bytes, read from the emulator's memory when asked (a huge, barely touched buffer is never
  copied unless someone looks at it)."""
  def __init__(self, read, buffers: dict[str, tuple[int, int]]): self._read, self._buffers = read, buffers
  def __getitem__(self, name: str) -> bytes:
    a, n = self._buffers[name]
    return self._read(a, n)
  def __iter__(self): return iter(self._buffers)
  def __len__(self) -> int: return len(self._buffers)

@attrs.define
class RunResult:
  file: str
  launches: int
  seed: Optional[int]
  memory: Mapping       # buffer name -> final bytes (BufferMemory)
  signals: dict[str, int]           # signal name -> final 32-bit value
  queues: dict[str, QueueStats]     # by queue name
  time_us: float
  host_steps: int = 0
  hang: Optional[Hang] = None
  fault: Optional[Fault] = None
  expects: list[ExpectResult] = attrs.field(factory=list)
  trace: Optional[dict] = None
  schedule: Optional[str] = None    # the schedule in words, when it is neither a seed's nor the time-ordered one (PCT's)
  @property
  def ok(self) -> bool: return self.hang is None and self.fault is None and all(e.ok for e in self.expects)
  def buffer(self, name: str, dtype: str = "u8") -> np.ndarray:
    return np.frombuffer(self.memory[name], np.dtype(DTYPES[dtype][0]).newbyteorder("<"))
  def to_json(self) -> dict:
    """What `summary` says, as JSON (`hcqdsl run --format json`): per queue its packets and time, the final signals,
    each expect, the fault or the hang's blocked queues (buffer contents are left out: `buffer(name)` reads them)."""
    from .reports import report_json
    return {"file": self.file, "launches": self.launches, "seed": self.seed, "ok": self.ok, "time_us": round(self.time_us, 3),
            "host_steps": self.host_steps,
            "queues": [{"name": q.name, "engine": q.engine, "device": q.device, "packets": q.packets, "time_us": round(q.time_us, 3),
                        "by_name": dict(q.by_name)} for q in self.queues.values()],
            "signals": dict(self.signals), "expects": [attrs.asdict(e) for e in self.expects],
            "fault": None if self.fault is None else report_json(self.fault),
            "hang": None if self.hang is None else {"blocked": [report_json(b) for b in self.hang.blocked]}}

  def summary(self) -> str:
    # the time is this one schedule's: another interleaving (another seed) takes another time
    sched = self.schedule or (f"seed {self.seed}" if self.seed is not None else "the time-ordered schedule")
    out = [f"{self.file}: {self.launches} launch{'es' * (self.launches != 1)}, {self.time_us:.1f} us emulated in {sched}"]
    blocked = {b.queue: b for b in self.hang.blocked} if self.hang is not None else {}
    for q in self.queues.values():
      top = ", ".join(f"{k} {v}" for k, v in sorted(q.by_name.items(), key=lambda kv: -kv[1]))
      b = blocked.get(q.name)
      state = (f"blocked since {q.time_us:.1f} us at line {b.line}: `{b.stmt}` (launch {b.launch})" if b is not None and b.line
               else f"blocked since {q.time_us:.1f} us" if b is not None else f"done at {q.time_us:.1f} us")
      out.append(f"  {q.name} ({q.engine} on {q.device}): {q.packets} packets, {state}  [{top}]")
    out.append("  signals: " + " ".join(f"{k}={v}" for k, v in self.signals.items()))
    for e in self.expects: out.append(f"  expect line {e.line}: {e.message}")
    if self.fault is not None: out.append(str(self.fault))
    if self.hang is not None: out.append(str(self.hang))
    out.append("ok" if self.ok else "FAILED")
    return "\n".join(out)

@attrs.define
class Race:
  """Final memory that differs between schedules: a race witnessed at run time."""
  buffer: str
  offsets: list         # first differing byte offsets
  values: dict          # seed (or a schedule's label) -> bytes at those offsets
  def to_json(self) -> dict:
    return {"buffer": self.buffer, "offsets": list(self.offsets), "values": {str(s): v.hex() for s, v in self.values.items()}}
  def __str__(self):
    vals = "; ".join(f"{s if isinstance(s, str) else f'seed {s}'}: {' '.join(f'{b:02x}' for b in v)}" for s, v in self.values.items())
    return f"race witnessed: `{self.buffer}` differs between schedules at byte{'s' * (len(self.offsets) != 1)} " \
           f"{', '.join(hex(o) for o in self.offsets)} ({vals})"

def as_program(p: Union[Program, str], filename: str) -> Program:
  """A Program as given, or parsed with the static checks (HcqError on an error)."""
  if isinstance(p, Program): return p
  from ..check import parse_with_diagnostics
  from ..diagnostics import has_errors
  prog, diags = parse_with_diagnostics(p, filename)
  if prog is None or has_errors(diags): raise HcqError([d for d in diags if d.severity == "error"], {filename: p})
  return prog

def _value(v):
  return float(v) if isinstance(v, str) else v

def _check_expect(e: dict, data: bytes) -> ExpectResult:
  dt = np.dtype(DTYPES[e["dtype"]][0]).newbyteorder("<")
  want = np.array([_value(v) for v in e["values"]], dtype=dt)
  n = min(len(want), len(data) // dt.itemsize)
  got = np.frombuffer(data[:n * dt.itemsize], dt)
  if n < len(want): return ExpectResult(e["line"], e["buffer"], False, f"`{e['buffer']}` holds {n} elements, expected {len(want)}")
  tol = {k: e[k] for k in ("rtol", "atol") if k in e}   # `~= ... rtol R atol A`, else numpy's defaults
  if e["approx"]: ok = bool(np.allclose(got, want, equal_nan=True, **tol))
  else: ok = got.tobytes() == want.tobytes()
  if ok: return ExpectResult(e["line"], e["buffer"], True, f"`{e['buffer']}` ok")
  bad = np.flatnonzero(~np.isclose(got, want, equal_nan=True, **tol) if e["approx"] else got != want)
  if not len(bad): bad = np.arange(min(n, 1))  # -0.0 vs 0.0 and NaN payloads differ only in bytes
  i = int(bad[0])
  return ExpectResult(e["line"], e["buffer"], False,
                      f"`{e['buffer']}` element {i}: got {got[i]}, expected {want[i]} ({len(bad)} of {n} differ)")

def physical_memory() -> int:
  try: return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
  except (ValueError, OSError, AttributeError): return 16 << 30

def _check_memory(prog: Program, img, limit: int) -> None:
  """The emulator maps the whole memory plan; pages cost memory only once touched, but a plan bigger than the limit
  (default: the machine's RAM) could exhaust it, so it is refused up front."""
  from ..diagnostics import Diagnostic
  total = sum(max(r.size, 1) for r in img.regions)
  if total <= limit: return
  big = max(prog.buffers, key=lambda b: b.size, default=None)
  raise HcqError([Diagnostic("bounds", f"the program's memory plan is {total} bytes ({total / 2**30:.1f} GiB), more than "
                             f"the emulator's limit of {limit} bytes ({limit / 2**30:.1f} GiB); pages are allocated only "
                             f"when touched, so raise the limit with `--max-memory` if the program touches little of it",
                             big.span if big is not None else None)])

def max_map_count() -> int:
  """The kernel's limit on one process's memory mappings (vm.max_map_count; Linux's default elsewhere)."""
  try: return int(open("/proc/sys/vm/max_map_count").read())
  except (OSError, ValueError): return 65530

def _maps_in_use() -> int:
  try:
    with open("/proc/self/maps", "rb") as f: return sum(1 for _ in f)
  except OSError: return 0

def _check_mappings(prog: Program, img, indirect: bool, limit: Optional[int] = None) -> None:
  """Each region of the memory plan, each ring (and in indirect mode each queue's command buffers) is a mapping of its
  own with a guard page at each end (up to 3 of the kernel's mappings): past vm.max_map_count the mapping fails, so a
  program with more is refused up front (100,000 queues need 600,000)."""
  from ..diagnostics import Diagnostic
  from .device import MAPS_PER_REGION
  need = len(img.regions) + len(img.queues) * (2 if indirect else 1)
  limit = max_map_count() if limit is None else limit
  room = max(0, limit - _maps_in_use() - 1024) // MAPS_PER_REGION
  if need <= room: return
  raise HcqError([Diagnostic("bounds", f"the program needs {need:,} memory regions ({len(img.regions):,} in its memory plan, "
                             f"{len(img.queues):,} rings{' and command buffers' if indirect else ''}), more than the {room:,} "
                             f"the emulator can map in this process (vm.max_map_count is {limit:,}; each region takes up to 3)",
                             prog.queues[0].span if prog.queues else None)])

def run(program: Union[Program, str], launches: int = 1, seed: Optional[int] = None, target: str = "gfx1100",
        var_values: Optional[dict] = None, trace: bool = False, filename: str = "<input>",
        ring_size: Optional[int] = None, timeout_us: float = 10_000_000.0, max_steps: int = 50_000_000,
        kernels: str = "auto", indirect: bool = False, max_memory: Optional[int] = None,
        kernel_timeout: Optional[float] = 10.0, gate=None, policy=None) -> RunResult:
  """Compile and run `launches` launches on the emulator. Raises HcqError on a program with syntax/name errors (or one
  that cannot be compiled); a hang or device fault is reported in the result, never raised. `kernels`: "amd" runs the
  machine code of every kernel that has a code object (`amd "k.co"`) on the RDNA3 executor (a device fault on a
  device that is not gfx11) and the C/builtin implementation of the others; "c" runs the C/builtin implementations
  only; "auto" (default) is "amd" for the kernels on gfx11 devices and "c" for the rest. `indirect`: submit each
  launch as an INDIRECT_BUFFER to one of several resident command-buffer copies patched in place (tinygrad's bound
  path, docs/run.md), not the commands on the ring. `gate`: a replay's ordering (runtime/replays.py; `replay` is the
  API), or an observer of the order statements ran in (runtime/schedules.py); `policy`: who runs next, one step at a
  time (runtime/schedules.py's PCT; `explore` is the API)."""
  from ..vendors import compile_program   # each queue by its device's vendor
  from .emulator import Emulator, MemoryMap
  from .reports import Fault
  from .submit import Submitter
  from .kernels import make_kernel, KernelError, Worker
  prog = as_program(program, filename)
  from ..check import unknown_var
  if (why := unknown_var(prog, var_values)) is not None: raise ValueError(f"var_values: {why}")
  from ..check.static import check_launches
  if short := check_launches(prog, launches, var_values or ()): raise HcqError(short, {filename: prog.source or ""})
  img = compile_program(prog, target)
  _check_memory(prog, img, physical_memory() if max_memory is None else max_memory)
  _check_mappings(prog, img, indirect)
  emu = Emulator(MemoryMap.of_image(img), seed=seed, trace=trace or gate is not None, max_steps=max_steps, policy=policy)
  sub = Submitter(img, emu, var_values, ring_size=ring_size, timeout_us=timeout_us, indirect=indirect)
  if gate is not None:
    gate.bind(img, emu)
    emu.gate = gate
  if kernels not in ("auto", "amd", "c"): raise ValueError(f"kernels must be 'auto', 'amd' or 'c', not {kernels!r}")
  kdecl = {k.name: k for k in prog.kernels}
  arch_of = {d["name"]: d["arch"] for d in img.devices}
  # C kernels run in a worker process (a crash or a hang is a fault at the exec) unless kernel_timeout is None
  worker = Worker(kernel_timeout) if kernel_timeout is not None else None
  try:
    try:
      for k in img.kernels:
        arch = arch_of.get(k["device"], target)
        if not k["synthetic"] and (kernels == "amd" or (kernels == "auto" and arch.startswith("gfx11"))):
          from .isa.rdna3 import AmdKernel
          fn: Union[AmdKernel, KernelFn] = AmdKernel(k["name"], arch)
        else: fn = make_kernel(kdecl[k["name"]], worker=worker)
        emu.add_kernel(k["prog_addr"], k["name"], fn, [(m, o) for m, _, o in k["params"]])
    except KernelError as e: emu.fault = Fault("kernels", None, None, None, str(e))
    if emu.fault is None: emu.run(sub.host(launches), locator=sub)
  finally:
    if worker is not None: worker.close()
  def last(name: str, a: int) -> int:  # a rebound buffer's memory in the last launch
    vals = img.var_values.get(f"{name}.addr")
    return a if not vals else a - vals[0] + vals[min(launches, len(vals)) - 1]
  mem = BufferMemory(emu.read, {name: (last(name, a), n) for name, (a, n) in img.buffers.items()})
  sigs = {name: emu.mem.r32(a) for name, a in img.signals.items()}
  queues: dict[str, QueueStats] = {}
  for eng in emu.engines:
    qs = sub.queues[eng.name]
    queues[eng.name] = QueueStats(eng.name, qs.qi.engine, eng.device, eng.packets, dict(eng.by_name), eng.clock, qs.patched)
  if emu.hang is not None: _name_releasers(prog, emu.hang)
  res = RunResult(img.file if isinstance(program, Program) else filename, launches, seed, mem, sigs, queues, emu.time_us,
                  emu.host_actor.steps if emu.host_actor else 0, emu.hang, emu.fault)
  if emu.hang is None and emu.fault is None:
    res.expects = [_check_expect(e, emu.read(last(e["buffer"], e["addr"]), e["size"])) for e in img.expects]
  if trace:
    from .trace import chrome_trace
    res.trace = chrome_trace(emu)
  return res

def _name_releasers(prog: Program, hang) -> None:
  """For each wait in a hang: the program's writes to its signal, and where their sequences stand (blocked at their own
  wait, or finished without bringing the value), or that nothing in the program writes the signal at all."""
  from ..ir import SignalWrite
  at = {b.queue: b.line for b in hang.blocked if b.line}
  seqs = [(q.name, q.body) for q in prog.queues] + ([("host", prog.host.body)] if prog.host else [])
  for b in hang.blocked:
    if b.reason == "wait" and b.func == "==" and b.mask is not None:
      _name_storers(prog, b, seqs, at)
      continue
    if b.reason != "wait" or not b.signal: continue
    writers = [(name, st) for name, body in seqs for st in body if isinstance(st, SignalWrite) and st.signal.name == b.signal]
    if not writers:
      b.release = f"nothing in the program writes `{b.signal}`: no queue can release this wait"
      continue
    b.release = _released_by(writers, at, lambda st: f"signal {b.signal} = {st.value}", f"did not bring it to {b.needed}")

def _released_by(writers: list, at: dict, said, missed: str) -> str:
  """The statements that could release a blocked wait or poll, `said` as written, each with where its queue stands
  (`at`: queue -> the line it is blocked at; `missed`: what a queue that finished did not do)."""
  parts = []
  for name, st in writers[:4]:
    line = st.span.line if st.span else None
    state = (f"{name} is blocked at line {at[name]}" if name in at and (line is None or at[name] < line) else
             f"{name} is blocked at line {at[name]}, after it" if name in at else f"{name} {missed}")
    parts.append(f"{name}'s `{said(st)}` at line {line} ({state})")
  return "could be released by " + "; ".join(parts) + (f"; and {len(writers) - 4} more" if len(writers) > 4 else "")

def _name_storers(prog: Program, b, seqs: list, at: dict) -> None:
  """A blocked `poll`: the `write`s storing into its word, and where their queues stand."""
  from ..ir import Poll, Write
  q = next((q for q in prog.queues if q.name == b.queue), None)
  p = next((st for st in (q.body if q else ()) if isinstance(st, Poll) and st.span and st.span.line == b.line), None)
  if p is None: return
  size = {x.name: x.size for x in prog.buffers}
  lo, hi = p.src.bounds(size.get(p.src.buffer.name, 0))
  writers = [(name, st) for name, body in seqs for st in body if isinstance(st, Write) and st.dst.buffer.name == p.src.buffer.name
             and (lambda r: r[0] < hi and lo < r[1])(st.dst.bounds(size.get(st.dst.buffer.name, 0)))]
  if not writers:
    b.release = f"no `write` in the program stores into `{b.signal or hex(b.addr or 0)}`: nothing can release this poll"
    return
  def said(st):
    a, z = st.dst.bounds(size[st.dst.buffer.name])
    return f"write {st.dst.buffer.name}[{a}:{z}] = {st.value}"
  b.release = _released_by(writers, at, said, "did not store a value that passes it")

def run_schedules(program: Union[Program, str], seeds, **kw) -> tuple[list[RunResult], list[Race]]:
  """Run once per seed; returns (results, races): races lists each buffer whose final bytes differ between the
  schedules that completed."""
  prog = as_program(program, kw.get("filename", "<input>"))
  results = [run(prog, seed=s, **kw) for s in seeds]
  return results, compare(results)

def compare(results: list[RunResult], max_offsets: int = 8, labels: Optional[list] = None) -> list[Race]:
  """Each buffer whose final bytes differ between the results that completed; `labels` name the results (default:
  their seeds)."""
  names = labels if labels is not None else [r.seed for r in results]
  done = [(r, s) for r, s in zip(results, names) if r.hang is None and r.fault is None]
  races: list[Race] = []
  if len(done) < 2: return races
  for name in done[0][0].memory:
    arrs = [np.frombuffer(r.memory[name], np.uint8) for r, _ in done]
    diff = np.zeros(len(arrs[0]), bool)
    for a in arrs[1:]: diff |= a != arrs[0]
    if diff.any():
      offs = np.flatnonzero(diff)[:max_offsets].tolist()
      seen: dict = {}
      for (_, label), a in zip(done, arrs):
        key = bytes(a[offs])
        if key not in seen.values(): seen[label] = key
      races.append(Race(name, offs, seen))
  return races
