"""Program -> Image, the part every vendor shares: the names, each device's arch (ir.device_arch), the memory plan
(plan.py), launch 1's values with a patch wherever a var is used, each queue's source map, the host steps, the
expects and the image. A queue is lowered by its device's vendor: `Lowering` takes a table vendor -> that vendor's
`QueueLowering` (amd/compile.py: PM4 and SDMA; nv/compile.py: pushbuffers and QMDs), whose STATEMENTS table maps each
statement type to the method that appends its commands. hcqdsl/vendors.py holds the table and `compile_program`."""
from __future__ import annotations
import abc, pathlib, struct
from typing import Any, ClassVar, Optional
from ..ir import (Program, Wait, SignalWrite, HostWrite, Submit, Expr, Ref, Slice, NO_SPAN, TARGETS, U32_MAX, device_arch, vendor_of,
                  epoch_wait)
from ..diagnostics import Diagnostic, HcqError
from ..lang.format import format_stmt
from ..check.static import check_static
from .image import Image, QueueImage, Patch, SourceEntry
from .layout import kernarg_layout
from .plan import MemoryPlan

__all__ = ["Lowering", "QueueLowering", "require_static", "lowering_error", "arg_record", "impl_record"]

def lowering_error(code: str, msg: str, span) -> HcqError: return HcqError([Diagnostic(code, msg, span)])

def require_static(program: Program) -> None:
  """The static checks' errors as an HcqError: every lowering starts here (check/static.py: the language's rules live
  there only, so the lowering assumes a program that passes them)."""
  if errors := [d for d in check_static(program) if d.severity == "error"]: raise HcqError(errors)

def arg_record(s) -> list:
  """An exec's arguments as its kernargs region records them: [buffer, start, end, ranged, launch] per slice, None per value."""
  return [[sl.buffer.name, sl.start, sl.end, sl.ranged, sl.launch] if type(sl) is Slice else None for sl in s.args]

def impl_record(i) -> Optional[dict]:
  if i is None: return None
  return {"builtin": i.builtin, "dtype": i.dtype, "args": list(i.args), "c_source": i.c_source, "amd_code": i.amd_code}

class Lowering:
  """One program's lowering: the memory plan, then each queue through its device's vendor's QueueLowering (made once
  per program and vendor, so a vendor's code loader and per-device state span its queues), then the host steps
  (HOST_STEPS) and expects, with resolved addresses. The program has passed the static checks (require_static): names
  resolve, ranges fit, statements sit on the right engine."""
  def __init__(self, program: Program, target: str, vendors: dict):
    """`target`: the arch of devices that declare none (ir.device_arch); `vendors`: vendor -> its QueueLowering class."""
    if target not in TARGETS: raise ValueError(f"unknown target {target!r} (known: {', '.join(TARGETS)})")
    require_static(program)
    self.program, self.target, self.vendors = program, target, vendors
    self.names = program.lookup()
    self.arch = {d.name: device_arch(d, target) for d in program.devices}
    self.plan = MemoryPlan(program, self.arch)
    file = program.file
    self.base_dir = pathlib.Path(file).parent if file and not file.startswith("<") else pathlib.Path(".")
    self.vars = list(program.vars) + [f"{b}.addr" for b in self.plan.rebound]
    self.env1 = {**{v: 1 for v in self.vars}, **{v: vals[0] for v, vals in self.plan.var_values.items()}}
    self.kernels: list = []     # the image's kernel table: each vendor's code loader appends, in load order
    self.lowerings: dict = {}   # vendor -> its QueueLowering

  def image(self) -> Image:
    p, plan = self.program, self.plan
    queues = [self.queue(q) for q in p.queues]
    host, expects = self.host(), [self.expect(e) for e in p.expects]
    return Image(self.target, p.file, [{"name": d.name, "index": d.index, "arch": self.arch[d.name]} for d in p.devices],
                 self.vars, plan.regions, plan.signals, plan.buffers, self.kernels, queues, plan.data, host,
                 expects, plan.var_values, plan.rewrites)

  def queue(self, q) -> QueueImage:
    vendor = vendor_of(self.arch[q.device.name])
    if vendor not in self.lowerings: self.lowerings[vendor] = self.vendors[vendor](self)
    return self.lowerings[vendor].queue(q)

  # ---- host steps and expects

  def host(self) -> list:
    """Every host block's steps, in program order; a step of a block with a `launches` clause says its launches (a
    host write's `data` lists its block's launches from the first)."""
    out = []
    for h in self.program.hosts:
      for s in h.body:
        if (lower := self.HOST_STEPS.get(type(s))) is None: continue
        out.append(lower(self, s, s.span or NO_SPAN))
        if h.launches is not None: out[-1]["launches"] = tuple(h.launches)
    return out

  def host_submit(self, s, sp) -> dict: return {"op": "submit", "queues": [r.name for r in s.queues], "line": sp.line}

  def host_signal(self, s, sp) -> dict:
    v = s.value
    return {"op": "wait" if type(s) is Wait else "signal", "signal": s.signal.name, "addr": self.plan.signal(s.signal),
            "var": v.var.name if v.var else None, "add": v.offset, "line": sp.line}

  def host_write(self, s, sp) -> dict:
    a, n = self.plan.slice(s.dst)
    return {"op": "write", "buffer": s.dst.buffer.name, "addr": a, "size": n, "dtype": s.launch_inits[0].dtype if s.launch_inits else "u8",
            "data": [d.to_bytes() for d in s.launch_inits], "line": sp.line}

  HOST_STEPS = {Submit: host_submit, Wait: host_signal, SignalWrite: host_signal, HostWrite: host_write}

  def expect(self, e) -> dict:
    a, n = self.plan.slice(e.target)
    vals = e.data.values.tolist() if hasattr(e.data.values, "tolist") else e.data.values   # data from a file: numpy
    return {"buffer": e.target.buffer.name, "addr": a, "size": n, "dtype": e.data.dtype,
            "values": [v if v == v and v not in (float("inf"), float("-inf")) else repr(v) for v in vals],
            "approx": e.approx, "line": (e.span or NO_SPAN).line} | {k: v for k, v in (("rtol", e.rtol), ("atol", e.atol)) if v is not None}

class QueueLowering(abc.ABC):
  """A vendor's lowering of its devices' queues, one instance per program: `queue` runs each statement through the
  subclass's STATEMENTS (statement type -> method appending its commands to `out` and recording the dwords a launch
  patches) and records the source map. The statements every vendor's encoder says the same way (wait, epoch,
  signal, barrier, write, poll: its WAIT_VALUE_AT, ... positions) are here; a vendor adds the rest."""
  STATEMENTS: ClassVar[dict]
  # the queue being lowered: its encoder is duck-typed (pm4.PM4, sdma.SDMA, pushbuf's Compute or Copy), the static
  # checks letting each statement only onto an engine whose encoder has its method
  enc: Any
  out: list[int]            # the command buffer's dwords
  patches: list[Patch]      # its dwords that change per launch
  mem_patches: list[Patch]  # memory dwords (kernel arguments) that change per launch

  def __init__(self, lowering: Lowering):
    self.lowering, self.plan, self.names, self.env1 = lowering, lowering.plan, lowering.names, lowering.env1

  @abc.abstractmethod
  def begin_queue(self, q) -> None:
    """Set `enc` (and whatever per-queue state the vendor keeps) for queue `q`."""

  def finish_queue(self) -> None: pass

  def queue(self, q) -> QueueImage:
    """The queue's statements through STATEMENTS into its command buffer, each statement's dword range and source
    position recorded."""
    self.q, self.dev, self.t = q, q.device.name, self.lowering.arch[q.device.name]
    self.begin_queue(q)
    self.out, self.patches, self.mem_patches = [], [], []
    stmts: list[SourceEntry] = []
    for self.index, s in enumerate(q.body):
      self.start = len(self.out)
      self.STATEMENTS[type(s)](self, s, s.span)
      sp = s.span or NO_SPAN
      stmts.append(SourceEntry(self.start, len(self.out) - self.start, sp.line, sp.column, sp.end_line, sp.end_column, format_stmt(s)))
    self.finish_queue()
    ca = self.plan.region(f"{q.name}.cmdbuf", "cmdbuf", self.dev, 4 * len(self.out), queue=q.name)
    return QueueImage(q.name, q.engine, self.dev, self.t, ca, self.out, self.patches, stmts, self.mem_patches,
                      tuple(q.launches) if q.launches is not None else None)

  # ---- values: launch 1's, with a patch wherever a var is used

  def value(self, e, at: int, patches: list, encoding: str = "u32") -> int:
    """The launch-1 value of `e` (an int or Expr); a patch of dword `at` when it depends on a var."""
    if type(e) is int: return e & U32_MAX
    if e.var is None: return e.offset & U32_MAX
    p = Patch(at, e.var.name, e.offset, encoding)
    patches.append(p)
    return p.value(self.env1)

  def rebound_addr(self, sl: Slice, off: int = 0) -> Optional[Expr]:
    """`B.addr + k` for the byte `off` of a slice of a rebound buffer B (its address changes per launch), else None."""
    if sl.buffer.name not in self.plan.rebound or sl.launch is not None: return None
    return Expr(Ref(f"{sl.buffer.name}.addr"), self.plan.slice(sl)[0] - self.plan.buffers[sl.buffer.name][0] + off)

  def address(self, sl: Slice, at: int, patches: list, step: int = 1) -> int:
    """The address of a slice's first byte; lo/hi patches at `at`, `at + step` (dwords of a command buffer: 1, bytes
    of memory: 4) when its buffer is rebound."""
    if (e := self.rebound_addr(sl)) is not None:
      self.value(e, at, patches, "lo")
      self.value(e, at + step, patches, "hi")
    return self.plan.slice(sl)[0]

  def pack_args(self, k, s, mem: bytearray, at: int, ka: int) -> None:
    """The exec's arguments into `mem` from byte `at` (kernarg_layout's offsets), the block being at address `ka`:
    scalar values and buffer pointers, with memory patches where they change per launch."""
    offs, _ = kernarg_layout(k.params)
    for p, a, o in zip(k.params, s.args, offs):
      if p.scalar: struct.pack_into("<I", mem, at + o, self.value(a, ka + at + o, self.mem_patches))
      else: struct.pack_into("<Q", mem, at + o, self.address(a, ka + at + o, self.mem_patches, 4))

  # ---- the statements every vendor's encoder says the same way

  def wait(self, s, sp):
    self.enc.wait(self.out, self.plan.signal(s.signal), self.value(s.value, self.start + self.enc.WAIT_VALUE_AT, self.patches))

  def epoch(self, s, sp): self.wait(epoch_wait(self.dev), sp)

  def signal(self, s, sp):
    self.enc.signal(self.out, self.plan.signal(s.signal), self.value(s.value, self.start + self.enc.SIGNAL_VALUE_AT, self.patches))

  def barrier(self, s, sp): self.enc.barrier(self.out)

  def write(self, s, sp):
    """A 32- or 64-bit store (the slice's length, 4 or 8 bytes); a value over a var is patched per launch."""
    a = self.address(s.dst, self.start + self.enc.WRITE_ADDR_AT, self.patches)   # a rebound buffer's: patched per launch
    self.enc.write(self.out, a, self.value(s.value, self.start + self.enc.WRITE_VALUE_AT, self.patches), self.plan.slice(s.dst)[1] == 8)

  def poll(self, s, sp):
    """`(word & mask) == value` on one word of a buffer; a value over a var (or a rebound buffer's address) is patched
    per launch."""
    a = self.address(s.src, self.start + self.enc.POLL_ADDR_AT, self.patches)
    self.enc.poll(self.out, a, self.value(s.value, self.start + self.enc.POLL_VALUE_AT, self.patches), s.mask)
