"""Program -> Image: a memory plan, one command buffer per queue (the launch template, filled in for launch 1) and a
patch table of every dword that changes between launches. Packet layouts live in pm4.py and sdma.py; this module lays
out memory (MemoryPlan), loads code objects (CodeLoader) and walks statements (Lowering: one method per statement
kind). The on-disk format is described in docs/amd.md."""
from __future__ import annotations
import pathlib, struct
from typing import Any, Optional
import numpy as np
from ..ir import (Program, Wait, SignalWrite, Exec, Copy, Write, HostWrite, Poll, Barrier, Timestamp, Epoch, Submit, Expr, Ref, Slice, DTYPES,
                 ARCHS, NO_SPAN, U32_MAX, resolve, epoch_wait)
from ..diagnostics import Diagnostic, HcqError
from ..lang.format import format_stmt
from ..check.static import check_static
from . import pm4, sdma
from .targets import get_target
from . import codeobj
from .layout import HOST_BASE, DEVICE_BASE, BUFFER_ALIGN, SIGNAL_SLOT, TIMESTAMP_OFFSET, kernarg_layout
from ..target.image import Image, QueueImage, Patch, Region
from ..target.layout import kernargs_region

__all__ = ["compile_program", "require_static", "Lowering", "MemoryPlan", "CodeLoader", "SCRATCH_SIZE", "tmpring", "impl_record", "arg_record"]

ALIGN = {"signals": 0x1000, "buffer": BUFFER_ALIGN, "code": 0x1000, "kernargs": 64, "scratch": 0x1000, "cmdbuf": 0x1000}
SCRATCH_SIZE = 1 << 20  # per device, only when a real code object needs private memory

def _err(code: str, msg: str, span) -> HcqError: return HcqError([Diagnostic(code, msg, span)])

def compile_program(program: Program, target: str = "gfx1100") -> Image:
  """Lower `program` for AMD. Each device uses its declared arch, else `target`. Raises HcqError with the static
  checks' errors (check/static.py: the language's rules live there only, so the lowering assumes a program that
  passes them), or with what only lowering finds (a code object that does not load, an entry point off 256 bytes)."""
  return Lowering(program, target).image()

def require_static(program: Program) -> None:
  """The static checks' errors as an HcqError: every lowering starts here."""
  if errors := [d for d in check_static(program) if d.severity == "error"]: raise HcqError(errors)

def _contents(d) -> bytes: return np.array(d.values, dtype=np.dtype(DTYPES[d.dtype][0]).newbyteorder("<")).tobytes()

class MemoryPlan:
  """Where everything lives: one bump allocator per memory (host, then each device's window), regions in allocation
  order with their initial contents. Signals (one SIGNAL_SLOT each, one region per memory) and buffers (a rebound
  buffer: one region per listed launch, its `B.addr` var listing their addresses) are placed first, in declaration
  order; code, kernel arguments, scratch and command buffers as the statements need them."""
  def __init__(self, program: Program, bases: Optional[dict] = None):
    """`bases`: memory (None: the host, else a device) -> where its memory starts (default: docs/amd.md's plan)."""
    self.tops = bases or {None: HOST_BASE, **{d.name: DEVICE_BASE * (i + 1) for i, d in enumerate(program.devices)}}
    self.regions: list[Region] = []
    self.data: list = []       # (address, bytes)
    self.signals: dict = {}    # name -> address
    self.buffers: dict = {}    # name -> (address, size); a rebound buffer's: launch 1's
    self.rebound: dict = {}    # rebound buffer -> its per-launch addresses
    self.rewrites: list = []   # (launch, address, bytes)
    self.var_values = {n: list(v) for n, v in program.var_lists.items() if v}  # empty lists: a static error
    self.scratch: dict = {}    # device -> scratch address
    self._signals(program.signals)
    self._buffers(program.buffers)

  def region(self, name: str, kind: str, dev: Optional[str], size: int, align: Optional[int] = None, **meta) -> int:
    """A new region of `size` bytes in `dev`'s memory, aligned to `align` (default: its kind's ALIGN)."""
    a = self.tops[dev] + -self.tops[dev] % (align or ALIGN[kind])
    self.tops[dev] = a + max(size, 1)
    self.regions.append(Region(name, kind, dev, a, size, meta))
    return a

  def _signals(self, signals):
    by_mem: dict = {}
    for s in signals: by_mem.setdefault(s.device.name if s.device else None, []).append(s)
    for mem, sigs in by_mem.items():
      base = self.region(f"signals@{mem or 'host'}", "signals", mem, SIGNAL_SLOT * len(sigs), names=[s.name for s in sigs])
      for i, s in enumerate(sigs):
        self.signals[s.name] = base + SIGNAL_SLOT * i
        if s.init: self.data.append((self.signals[s.name], struct.pack("<Q", s.init & U32_MAX)))

  def _buffers(self, buffers):
    for b in buffers:
      dev = b.device.name if b.device else None
      if b.per_launch == "rebound" and b.launch_inits:
        addrs = [self.region(f"{b.name}@{k + 1}", "buffer", dev, b.size, launch=k + 1) for k in range(len(b.launch_inits))]
        self.data += [(a, _contents(d)) for a, d in zip(addrs, b.launch_inits)]
        self.buffers[b.name] = (addrs[0], b.size)
        self.rebound[b.name] = self.var_values[f"{b.name}.addr"] = addrs
        continue
      self.buffers[b.name] = (a := self.region(b.name, "buffer", dev, b.size), b.size)
      if b.per_launch == "rewritten" and b.launch_inits:
        # the listed bytes only: the host zero-fills the rest of the buffer (an image stays small for a big buffer)
        self.rewrites += [(k + 1, a, _contents(d)) for k, d in enumerate(b.launch_inits)]
        self.data.append((a, self.rewrites[-len(b.launch_inits)][2]))
      elif b.init is not None: self.data.append((a, _contents(b.init)))

  def signal(self, ref: Ref) -> int: return self.signals[ref.name]

  def slice(self, sl: Slice) -> tuple:
    """(address, size) of a slice's bytes; launch 1's memory for a rebound buffer (launch k's for `x@k`: the region x
    has in launch k, a fixed address)."""
    a, size = self.buffers[sl.buffer.name]
    if sl.launch is not None: a = self.rebound[sl.buffer.name][sl.launch - 1]
    lo, hi = sl.bounds(size)
    return a + lo, hi - lo

  def scratch_for(self, dev: str) -> int:
    if dev not in self.scratch: self.scratch[dev] = self.region(f"scratch@{dev}", "scratch", dev, SCRATCH_SIZE)
    return self.scratch[dev]

class CodeLoader:
  """The code object of each (kernel, device) an exec names, placed in the plan the first time: the program's `amd
  "file.co"` (relative to the program) or a synthetic one. `kernels` lists them for the image, in load order."""
  def __init__(self, plan: MemoryPlan, names: dict, arch: dict, base_dir: pathlib.Path):
    self.plan, self.names, self.arch, self.base_dir = plan, names, arch, base_dir
    self.kernels: list = []
    self.loaded: dict = {}   # (kernel, device) -> (CodeObject, code address)

  def load(self, kname: str, dev: str, span) -> tuple:
    if (kname, dev) in self.loaded: return self.loaded[kname, dev]
    k, t, elf = self.names[kname], get_target(self.arch[dev]), None
    if k.impl is not None and k.impl.amd_code:
      path = self.base_dir / k.impl.amd_code
      try: co = codeobj.from_elf(t, elf := path.read_bytes())
      except (OSError, ValueError) as e: raise _err("name", f"kernel `{kname}`: cannot load AMD code object {path}: {e}", span or k.span)
    else: co = codeobj.synthetic(t, kname, len(k.params))
    a = self.plan.region(f"{kname}.code@{dev}", "code", dev, len(co.image) + (-len(co.image) % 4), kernel=kname)
    if (a + co.entry_offset) % 256: raise _err("name", f"kernel `{kname}`: entry point is not 256-byte aligned", span)
    self.plan.data.append((a, co.image))
    offs, _ = kernarg_layout(k.params)
    self.kernels.append({"name": kname, "device": dev, "code_addr": a, "kd_addr": a + co.kd_offset,
                         "prog_addr": a + co.entry_offset, "synthetic": co.synthetic, "kernarg_size": co.kernarg_size,
                         "params": [[p.mode, p.name, o] for p, o in zip(k.params, offs)],
                         "impl": impl_record(k.impl),
                         **({"code_object": elf} if elf is not None else {})})   # the ELF, for `lift` to write out
    self.loaded[kname, dev] = (co, a)
    return self.loaded[kname, dev]

def arg_record(s) -> list:
  """An exec's arguments as its kernargs region records them: [buffer, start, end, ranged, launch] per slice, None per value."""
  return [[sl.buffer.name, sl.start, sl.end, sl.ranged, sl.launch] if type(sl) is Slice else None for sl in s.args]

def impl_record(i) -> Optional[dict]:
  if i is None: return None
  return {"builtin": i.builtin, "dtype": i.dtype, "args": list(i.args), "c_source": i.c_source, "amd_code": i.amd_code}

class Lowering:
  """One program's lowering for AMD: the memory plan, then each queue's statements through STATEMENTS (statement type
  -> method appending its packets to the queue's command buffer and recording the dwords a launch patches), then the
  host steps (HOST_STEPS) and expects, with resolved addresses. The program has passed the static checks
  (require_static): names resolve, ranges fit, statements sit on the right engine."""
  targets: tuple[str, ...] = ARCHS   # the archs this lowering takes
  # the queue being lowered: its encoder is duck-typed (pm4.PM4 for compute, sdma.SDMA for copy; nv/compile.py's
  # lowering puts pushbuf's Compute or Copy here), the static checks letting each statement only onto an engine whose
  # encoder has its method
  enc: Any
  out: list[int]            # the command buffer's dwords
  patches: list[Patch]      # its dwords that change per launch
  mem_patches: list[Patch]  # memory dwords (kernel arguments) that change per launch

  def __init__(self, program: Program, target: str = "gfx1100"):
    if target not in self.targets: raise ValueError(f"unknown target {target!r} (known: {', '.join(self.targets)})")
    require_static(program)
    self.program, self.target = program, target
    self.names = program.lookup()
    self.arch = {d.name: self.device_arch(d) for d in program.devices}
    self.plan = MemoryPlan(program, self.bases())
    file = program.file
    self.code = CodeLoader(self.plan, self.names, self.arch,
                           pathlib.Path(file).parent if file and not file.startswith("<") else pathlib.Path("."))
    self.vars = list(program.vars) + [f"{b}.addr" for b in self.plan.rebound]
    self.env1 = {**{v: 1 for v in self.vars}, **{v: vals[0] for v, vals in self.plan.var_values.items()}}

  def device_arch(self, d) -> str: return d.arch or self.target
  def bases(self) -> Optional[dict]: return None   # MemoryPlan's default: docs/amd.md's windows

  def image(self) -> Image:
    p, plan = self.program, self.plan
    queues = [self.queue(q) for q in p.queues]
    host, expects = self.host(), [self.expect(e) for e in p.expects]
    return Image(self.target, p.file, [{"name": d.name, "index": d.index, "arch": self.arch[d.name]} for d in p.devices],
                 self.vars, plan.regions, plan.signals, plan.buffers, self.code.kernels, queues, plan.data, host,
                 expects, plan.var_values, plan.rewrites)

  # ---- values: launch 1's, with a patch wherever a var is used

  def value(self, e, at: int, patches: list, encoding: str = "u32") -> int:
    """The launch-1 value of `e` (an int or Expr); a patch of dword `at` when it depends on a var."""
    if type(e) is int: return e & U32_MAX
    if e.var is None: return e.offset & U32_MAX
    p = Patch(at, e.var.name, e.offset, encoding)
    patches.append(p)
    return p.value(self.env1)

  def address(self, sl: Slice, at: int, patches: list, step: int = 1) -> int:
    """The address of a slice's first byte; lo/hi patches at `at`, `at + step` (dwords of a command buffer: 1, bytes
    of memory: 4) when its buffer is rebound."""
    a, _ = self.plan.slice(sl)
    if sl.buffer.name in self.plan.rebound and sl.launch is None:
      e = Expr(Ref(f"{sl.buffer.name}.addr"), a - self.plan.buffers[sl.buffer.name][0])
      self.value(e, at, patches, "lo")
      self.value(e, at + step, patches, "hi")
    return a

  def pack_args(self, k, s, mem: bytearray, at: int, ka: int) -> None:
    """The exec's arguments into `mem` from byte `at` (kernarg_layout's offsets), the block being at address `ka`:
    scalar values and buffer pointers, with memory patches where they change per launch."""
    offs, _ = kernarg_layout(k.params)
    for p, a, o in zip(k.params, s.args, offs):
      if p.scalar: struct.pack_into("<I", mem, at + o, self.value(a, ka + at + o, self.mem_patches))
      else: struct.pack_into("<Q", mem, at + o, self.address(a, ka + at + o, self.mem_patches, 4))

  # ---- queues

  def queue(self, q) -> QueueImage:
    self.q, self.dev, self.t = q, q.device.name, self.arch[q.device.name]
    self.enc = pm4.encoder(self.t) if q.engine == "compute" else sdma.encoder(self.t)
    return self.lower_queue(self.STATEMENTS)

  def lower_queue(self, table: dict) -> QueueImage:
    """The queue's statements through `table` (statement type -> method) into its command buffer, each statement's
    dword range and source position recorded."""
    q = self.q
    self.out, self.patches, self.mem_patches = [], [], []
    stmts: list[tuple] = []
    for self.index, s in enumerate(q.body):
      self.start = len(self.out)
      table[type(s)](self, s, s.span)
      sp = s.span or NO_SPAN
      stmts.append((self.start, len(self.out) - self.start, sp.line, sp.column, sp.end_line, sp.end_column, format_stmt(s)))
    self.finish_queue()
    ca = self.plan.region(f"{q.name}.cmdbuf", "cmdbuf", self.dev, 4 * len(self.out), queue=q.name)
    return QueueImage(q.name, q.engine, self.dev, self.t, ca, self.out, self.patches, stmts, self.mem_patches)

  def finish_queue(self) -> None: pass

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
    """WAIT_REG_MEM `==` under the mask on one word of a buffer; a value over a var (or a rebound buffer's address) is
    patched per launch."""
    a = self.address(s.src, self.start + self.enc.POLL_ADDR_AT, self.patches)
    self.enc.poll(self.out, a, self.value(s.value, self.start + self.enc.POLL_VALUE_AT, self.patches), s.mask)

  def timestamp(self, s, sp): self.enc.timestamp(self.out, self.plan.signal(s.signal) + TIMESTAMP_OFFSET)

  def copy(self, s, sp):
    (da, n), (sa, _) = self.plan.slice(s.dst), self.plan.slice(s.src)
    enc = self.enc
    enc.copy(self.out, da, sa, n)
    for sl, at in ((s.src, enc.COPY_SRC_AT), (s.dst, enc.COPY_DST_AT)):
      if sl.buffer.name not in self.plan.rebound or sl.launch is not None: continue
      lo = sl.bounds(self.plan.buffers[sl.buffer.name][1])[0]
      for j, off in enumerate(range(0, n, enc.max_copy_size)):  # each COPY_LINEAR piece holds its own addresses
        self.address(Slice(sl.buffer, lo + off, None, True), self.start + j * enc.COPY_DWORDS + at, self.patches)

  def exec(self, s, sp):
    plan, dev = self.plan, self.dev
    co, ca = self.code.load(s.kernel.name, dev, sp)
    k = self.names[s.kernel.name]
    ka, kasz = self.kernargs(s, k, co)
    gdims, bdims = s.grid or (1, 1, 1), s.block or (1, 1, 1)
    grid, block = tuple(resolve(x, self.env1) & U32_MAX for x in gdims), tuple(resolve(x, self.env1) & U32_MAX for x in bdims)
    if co.dispatch_ptr and any(type(x) is Expr for x in gdims + bdims):
      raise _err("name", f"kernel `{s.kernel.name}`: launch dimensions over vars need a code object without a dispatch packet", sp)
    user = []
    if co.private_segment_sgpr:  # scratch buffer resource, as tinygrad sets it up
      sc = plan.scratch_for(dev)
      user += [sc & U32_MAX, (sc >> 32) | 1 << 31, U32_MAX, 0x20c14000]
    if co.dispatch_ptr:
      user += [(ka + kasz) & U32_MAX, (ka + kasz) >> 32]
      plan.data.append((ka + kasz, _dispatch_packet(co, grid, block, ka)))
    user += [ka & U32_MAX, ka >> 32]
    self.enc.exec(self.out, ca + co.entry_offset, co.rsrc1, co.rsrc2, co.rsrc3, tmpring(self.t, co),
                  plan.scratch_for(dev) if co.private_segment_size or co.private_segment_sgpr else 0, tuple(user), grid,
                  block, co.wave32)
    for dims, back in ((bdims, self.enc.EXEC_BLOCK_FROM_END), (gdims, self.enc.EXEC_GRID_FROM_END)):
      for j, x in enumerate(dims): self.value(x, len(self.out) - back + j, self.patches)

  def kernargs(self, s, k, co) -> tuple:
    """The exec's kernel-argument region (address, size without the dispatch packet): the arguments (pack_args)."""
    kasz = max(kernarg_layout(k.params)[1], co.kernarg_size)
    ka = self.plan.region(kernargs_region(self.q.name, self.index), "kernargs", self.dev, kasz + (64 if co.dispatch_ptr else 0),
                          kernel=k.name, args=arg_record(s))
    kargs = bytearray(kasz)
    self.pack_args(k, s, kargs, 0, ka)
    self.plan.data.append((ka, bytes(kargs)))
    return ka, kasz

  STATEMENTS = {Wait: wait, Epoch: epoch, SignalWrite: signal, Barrier: barrier, Timestamp: timestamp, Copy: copy, Write: write, Poll: poll,
                Exec: exec}  # noqa: A003  (one method per statement kind, named as the statement)

  # ---- host steps and expects

  def host(self) -> list:
    out = []
    for s in (self.program.host.body if self.program.host is not None else ()):
      if (lower := self.HOST_STEPS.get(type(s))) is not None: out.append(lower(self, s, s.span or NO_SPAN))
    return out

  def host_submit(self, s, sp) -> dict: return {"op": "submit", "queues": [r.name for r in s.queues], "line": sp.line}

  def host_signal(self, s, sp) -> dict:
    v = s.value
    return {"op": "wait" if type(s) is Wait else "signal", "signal": s.signal.name, "addr": self.plan.signal(s.signal),
            "var": v.var.name if v.var else None, "add": v.offset, "line": sp.line}

  def host_write(self, s, sp) -> dict:
    a, n = self.plan.slice(s.dst)
    return {"op": "write", "buffer": s.dst.buffer.name, "addr": a, "size": n, "dtype": s.launch_inits[0].dtype if s.launch_inits else "u8",
            "data": [_contents(d) for d in s.launch_inits], "line": sp.line}

  HOST_STEPS = {Submit: host_submit, Wait: host_signal, SignalWrite: host_signal, HostWrite: host_write}

  def expect(self, e) -> dict:
    a, n = self.plan.slice(e.target)
    vals = e.data.values.tolist() if hasattr(e.data.values, "tolist") else e.data.values   # data from a file: numpy
    return {"buffer": e.target.buffer.name, "addr": a, "size": n, "dtype": e.data.dtype,
            "values": [v if v == v and v not in (float("inf"), float("-inf")) else repr(v) for v in vals],
            "approx": e.approx, "line": (e.span or NO_SPAN).line} | {k: v for k, v in (("rtol", e.rtol), ("atol", e.atol)) if v is not None}

def tmpring(t: str, co) -> int:
  """COMPUTE_TMPRING_SIZE: 0 without private memory; else WAVESIZE (per-wave bytes / 256, gfx9: / 1024) and as many
  waves as fit SCRATCH_SIZE."""
  if not co.private_segment_size: return 0
  from tinygrad.runtime.autogen import hsa
  gen = get_target(t).gen
  align = 1024 if gen == 9 else 256
  wavesize = -(-64 * (co.private_segment_size + 3 & ~3) // align)
  ty = getattr(hsa, f'union_COMPUTE_TMPRING_SIZE{"_GFX" + str(gen) if gen != 9 else ""}_bitfields')
  return int.from_bytes(ty(WAVES=min(SCRATCH_SIZE // (wavesize * align), 0x3FF), WAVESIZE=wavesize), "little")

def _dispatch_packet(co, grid, block, kernarg_addr) -> bytes:
  from tinygrad.runtime.autogen import hsa
  dp = hsa.hsa_kernel_dispatch_packet_t()
  dp.workgroup_size_x, dp.workgroup_size_y, dp.workgroup_size_z = block
  dp.grid_size_x, dp.grid_size_y, dp.grid_size_z = (g * b for g, b in zip(grid, block))
  dp.group_segment_size, dp.private_segment_size = co.group_segment_size, co.private_segment_size
  dp.kernarg_address = kernarg_addr
  return bytes(dp)
