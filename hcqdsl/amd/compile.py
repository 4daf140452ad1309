"""Program -> Image: a memory plan, one command buffer per queue (the launch template, filled in for launch 1) and a
patch table of every dword that changes between launches. Packet layouts live in hcqdsl/amd; this module only lays
out memory and walks statements. The on-disk format is described in docs/amd.md."""
from __future__ import annotations
import pathlib, struct
from typing import Optional
import attrs
from ..ir import (Program, Wait, SignalWrite, Exec, Copy, Barrier, Timestamp, Epoch, Submit, Expr, Ref, Slice, DTYPES,
                 ARCHS, NO_SPAN, resolve)
from ..diagnostics import Diagnostic, HcqError

__all__ = ["compile_program", "kernarg_layout"]

from .layout import HOST_BASE, DEVICE_BASE, BUFFER_ALIGN
from .image import Image, QueueImage, Patch, Region, SIGNAL_SLOT, M32

ALIGN = {"signals": 0x1000, "buffer": BUFFER_ALIGN, "code": 0x1000, "kernargs": 64, "scratch": 0x1000, "cmdbuf": 0x1000}

# ---------------------------------------------------------------- compiler

class _Alloc:
  def __init__(self, base: int): self.base, self.top = base, base
  def take(self, size: int, align: int) -> int:
    self.top += -self.top % align
    a, self.top = self.top, self.top + max(size, 1)
    return a

def _err(code: str, msg: str, span) -> HcqError: return HcqError([Diagnostic(code, msg, span)])

def _stmt_text(s) -> str:
  try:
    from ..lang.format import format_stmt  # type: ignore
    return format_stmt(s)
  except Exception: return type(s).__name__.lower()

def compile_program(program: Program, target: str = "gfx1100") -> Image:
  """Lower `program` for AMD. Each device uses its declared arch, else `target`. Raises HcqError (code `name` or
  `bounds`) on a program that cannot be lowered; run `check` first for the full set of diagnostics."""
  from . import pm4, sdma
  from .targets import get_target
  from .codeobj import synthetic, from_elf
  if target not in ARCHS: raise ValueError(f"unknown target {target!r} (known: {', '.join(ARCHS)})")
  names = program.lookup()
  devices = program.devices
  arch = {d.name: d.arch or target for d in devices}
  allocs = {None: _Alloc(HOST_BASE), **{d.name: _Alloc(DEVICE_BASE * (i + 1)) for i, d in enumerate(devices)}}
  regions: list[Region] = []
  data: list = []
  def region(name, kind, dev, size, **meta) -> int:
    if dev not in allocs: raise _err("name", f"unknown device `{dev}`", None)
    a = allocs[dev].take(size, ALIGN[kind])
    regions.append(Region(name, kind, dev, a, size, meta))
    return a
  def dev_of(ref) -> Optional[str]: return None if ref is None else ref.name

  # signals: one 16-byte slot each, packed into one region per memory
  signals: dict[str, int] = {}
  by_mem: dict = {}
  for s in program.signals: by_mem.setdefault(dev_of(s.device), []).append(s)
  for mem, sigs in by_mem.items():
    base = region(f"signals@{mem or 'host'}", "signals", mem, SIGNAL_SLOT * len(sigs), names=[s.name for s in sigs])
    for i, s in enumerate(sigs):
      signals[s.name] = base + SIGNAL_SLOT * i
      if s.init: data.append((signals[s.name], struct.pack("<Q", s.init & M32)))
  import numpy as np
  def contents(d) -> bytes: return np.array(d.values, dtype=np.dtype(DTYPES[d.dtype][0]).newbyteorder("<")).tobytes()
  buffers: dict[str, tuple] = {}
  var_values: dict = {n: list(v) for n, v in program.var_lists.items() if v}  # empty lists: a static error
  rebound: dict = {}   # rebound buffer -> its `B.addr` var (launch k's memory is a region of its own)
  rewrites: list = []
  for b in program.buffers:
    if b.per_launch == "rebound" and b.launch_inits:
      addrs = [region(f"{b.name}@{k + 1}", "buffer", dev_of(b.device), b.size, launch=k + 1) for k in range(len(b.launch_inits))]
      for a, d in zip(addrs, b.launch_inits): data.append((a, contents(d)))
      buffers[b.name] = (addrs[0], b.size)
      rebound[b.name] = var_values[f"{b.name}.addr"] = addrs
      continue
    buffers[b.name] = (a := region(b.name, "buffer", dev_of(b.device), b.size), b.size)
    if b.per_launch == "rewritten" and b.launch_inits:
      for k, d in enumerate(b.launch_inits): rewrites.append((k + 1, a, contents(d).ljust(b.size, b"\0")))
      data.append((a, rewrites[-len(b.launch_inits)][2]))
    elif b.init is not None: data.append((a, contents(b.init)))

  def sig_addr(ref: Ref, span=None) -> int:
    if ref.name not in signals: raise _err("name", f"`{ref.name}` is not a signal", span)
    return signals[ref.name]
  def slice_range(sl: Slice, span=None) -> tuple:
    if sl.buffer.name not in buffers: raise _err("name", f"`{sl.buffer.name}` is not a buffer", span)
    a, size = buffers[sl.buffer.name]
    if sl.launch is not None:   # `x@k`: the region x has in launch k, a fixed address
      if sl.buffer.name not in rebound or not 1 <= sl.launch <= len(rebound[sl.buffer.name]):
        raise _err("name", f"`{sl.buffer.name}@{sl.launch}`: no such launch of a rebound buffer", span)
      a = rebound[sl.buffer.name][sl.launch - 1]
    lo, hi = sl.bounds(size)
    if not 0 <= lo <= hi <= size: raise _err("bounds", f"byte range [{lo}:{hi}) outside `{sl.buffer.name}` ({size} bytes)", span)
    return a + lo, hi - lo
  all_vars = list(program.vars) + [f"{b}.addr" for b in rebound]
  env1 = {**{v: 1 for v in all_vars}, **{v: vals[0] for v, vals in var_values.items()}}
  def value(e, at: int, q: str, patches: list, span=None, encoding="u32") -> int:
    """The launch-1 value of `e` (an int or Expr); a patch of dword `at` when it depends on a var."""
    if type(e) is int: return e & M32
    if e.var is None: return e.offset & M32
    if e.var.name not in env1: raise _err("name", f"`{e.var.name}` is not a var", span)
    p = Patch(q, at, e.var.name, e.offset, encoding)
    patches.append(p)
    return p.value(env1)
  def address(sl: Slice, at: int, q: str, patches: list, span=None, step=1) -> int:
    """The address of a slice's first byte; lo/hi patches at `at`, `at + step` (dwords of a command buffer: 1, bytes
    of memory: 4) when its buffer is rebound."""
    a, _ = slice_range(sl, span)
    if sl.buffer.name in rebound and sl.launch is None:
      e = Expr(Ref(f"{sl.buffer.name}.addr"), a - buffers[sl.buffer.name][0])
      value(e, at, q, patches, span, "lo"); value(e, at + step, q, patches, span, "hi")
    return a

  kernels: list = []
  code: dict = {}  # (kernel, device) -> (CodeObject, code address)
  base_dir = pathlib.Path(program.file).parent if program.file and not program.file.startswith("<") else pathlib.Path(".")
  def code_for(kname: str, dev: str, span):
    if (kname, dev) in code: return code[kname, dev]
    k = names.get(kname)
    if k is None or type(k).__name__ != "Kernel": raise _err("name", f"`{kname}` is not a kernel", span)
    t = get_target(arch[dev])
    if k.impl is not None and k.impl.amd_code:
      path = base_dir / k.impl.amd_code
      try: co = from_elf(t, path.read_bytes())
      except (OSError, ValueError) as e: raise _err("name", f"kernel `{kname}`: cannot load AMD code object {path}: {e}", span or k.span)
    else: co = synthetic(t, kname, len(k.params))
    a = region(f"{kname}.code@{dev}", "code", dev, len(co.image) + (-len(co.image) % 4), kernel=kname)
    if (a + co.entry_offset) % 256: raise _err("name", f"kernel `{kname}`: entry point is not 256-byte aligned", span)
    data.append((a, co.image))
    offs, _ = kernarg_layout(k.params)
    kernels.append({"name": kname, "device": dev, "code_addr": a, "kd_addr": a + co.kd_offset,
                    "prog_addr": a + co.entry_offset, "synthetic": co.synthetic, "kernarg_size": co.kernarg_size,
                    "params": [[p.mode, p.name, o] for p, o in zip(k.params, offs)],
                    "impl": attrs.asdict(k.impl, filter=lambda a, _: a.name != "span") if k.impl is not None else None})
    code[kname, dev] = (co, a)
    return code[kname, dev]
  scratch: dict = {}
  def scratch_for(dev: str) -> int:
    if dev not in scratch: scratch[dev] = region(f"scratch@{dev}", "scratch", dev, SCRATCH_SIZE)
    return scratch[dev]

  queues: list[QueueImage] = []
  for q in program.queues:
    dev = q.device.name
    if dev not in arch: raise _err("name", f"queue `{q.name}`: unknown device `{dev}`", q.span)
    t = arch[dev]
    enc = pm4.encoder(t) if q.engine == "compute" else sdma.encoder(t)
    out: list = []
    patches: list = []
    mem_patches: list = []
    stmts: list = []
    for n, s in enumerate(q.body):
      start = len(out)
      sp = s.span
      if isinstance(s, Epoch): s_eff = Wait(Ref(f"{dev}.timeline"), Expr(Ref(f"{dev}.epoch"), -1))
      else: s_eff = s
      if isinstance(s_eff, Wait):
        a = sig_addr(s_eff.signal, sp)
        enc.wait(out, a, value(s_eff.value, start + enc.WAIT_VALUE_AT, q.name, patches, sp))
      elif isinstance(s_eff, SignalWrite):
        a = sig_addr(s_eff.signal, sp)
        enc.signal(out, a, value(s_eff.value, start + enc.SIGNAL_VALUE_AT, q.name, patches, sp))
      elif isinstance(s, Barrier): enc.barrier(out)
      elif isinstance(s, Timestamp): enc.timestamp(out, sig_addr(s.signal, sp) + 8)
      elif isinstance(s, Copy):
        if q.engine != "copy": raise _err("name", "`copy` on a compute queue", s.span)
        (da, dn), (sa, sn) = slice_range(s.dst, sp), slice_range(s.src, sp)
        if dn != sn: raise _err("bounds", f"copy of {sn} bytes into {dn} bytes", s.span)
        enc.copy(out, da, sa, dn)
        for sl, at in ((s.src, enc.COPY_SRC_AT), (s.dst, enc.COPY_DST_AT)):
          if sl.buffer.name not in rebound or sl.launch is not None: continue
          for j, off in enumerate(range(0, dn, enc.max_copy_size)):  # each COPY_LINEAR piece holds its own addresses
            address(Slice(sl.buffer, (sl.bounds(buffers[sl.buffer.name][1])[0]) + off, None, True), start + j * enc.COPY_DWORDS + at, q.name, patches, sp)
      elif isinstance(s, Exec):
        if q.engine != "compute": raise _err("name", "`exec` on a copy queue", s.span)
        co, ca = code_for(s.kernel.name, dev, sp)
        k = names[s.kernel.name]
        if len(s.args) != len(k.params): raise _err("name", f"`{k.name}` takes {len(k.params)} arguments, got {len(s.args)}", s.span)
        offs, size = kernarg_layout(k.params)
        kasz = max(size, co.kernarg_size)
        ka = region(f"{q.name}.kernargs.{n}", "kernargs", dev, kasz + (64 if co.dispatch_ptr else 0), kernel=k.name,
                    args=[[sl.buffer.name, sl.start, sl.end, sl.ranged] if type(sl) is Slice else None for sl in s.args])
        kargs = bytearray(kasz)
        for p, a, o in zip(k.params, s.args, offs):
          if p.scalar:
            if type(a) is not Expr: raise _err("name", f"parameter `{p.name}` of `{k.name}` takes a value", sp)
            struct.pack_into("<I", kargs, o, value(a, ka + o, q.name, mem_patches, sp))
          else:
            if type(a) is not Slice: raise _err("name", f"parameter `{p.name}` of `{k.name}` takes a buffer", sp)
            struct.pack_into("<Q", kargs, o, address(a, ka + o, q.name, mem_patches, sp, 4))
        data.append((ka, bytes(kargs)))
        gdims, bdims = s.grid or (1, 1, 1), s.block or (1, 1, 1)
        grid, block = tuple(resolve(x, env1) & M32 for x in gdims), tuple(resolve(x, env1) & M32 for x in bdims)
        if co.dispatch_ptr and any(type(x) is Expr for x in gdims + bdims):
          raise _err("name", f"kernel `{k.name}`: launch dimensions over vars need a code object without a dispatch packet", sp)
        user = []
        if co.private_segment_sgpr:  # scratch buffer resource, as tinygrad sets it up
          sc = scratch_for(dev)
          user += [sc & M32, (sc >> 32) | 1 << 31, M32, 0x20c14000]
        if co.dispatch_ptr: user += [(ka + kasz) & M32, (ka + kasz) >> 32]; data.append((ka + kasz, _dispatch_packet(co, grid, block, ka)))
        user += [ka & M32, ka >> 32]
        enc.exec(out, ca + co.entry_offset, co.rsrc1, co.rsrc2, co.rsrc3, _tmpring(t, co),
                 scratch_for(dev) if co.private_segment_size or co.private_segment_sgpr else 0, tuple(user), grid, block, co.wave32)
        for dims, back in ((bdims, enc.EXEC_BLOCK_FROM_END), (gdims, enc.EXEC_GRID_FROM_END)):
          for j, x in enumerate(dims): value(x, len(out) - back + j, q.name, patches, sp)
      else: raise _err("syntax", f"`{type(s).__name__}` is not a queue statement", getattr(s, "span", None))
      sp = s.span or NO_SPAN
      stmts.append((start, len(out) - start, sp.line, sp.column, sp.end_line, sp.end_column, _stmt_text(s)))
    ca = region(f"{q.name}.cmdbuf", "cmdbuf", dev, 4 * len(out), queue=q.name)
    queues.append(QueueImage(q.name, q.engine, dev, t, ca, out, patches, stmts, mem_patches))

  host = []
  if (h := program.host) is not None:
    for s in h.body:
      sp = s.span or NO_SPAN
      if isinstance(s, Submit): host.append({"op": "submit", "queues": [r.name for r in s.queues], "line": sp.line})
      elif isinstance(s, (Wait, SignalWrite)):
        v = s.value
        host.append({"op": "wait" if isinstance(s, Wait) else "signal", "signal": s.signal.name, "addr": sig_addr(s.signal, sp),
                     "var": v.var.name if v.var else None, "add": v.offset, "line": sp.line})
  expects = []
  for e in program.expects:
    a, n = slice_range(e.target, e.span)
    expects.append({"buffer": e.target.buffer.name, "addr": a, "size": n, "dtype": e.data.dtype,
                    "values": [v if v == v and v not in (float("inf"), float("-inf")) else repr(v) for v in e.data.values],
                    "approx": e.approx, "line": (e.span or NO_SPAN).line})
  return Image(target, program.file, [{"name": d.name, "index": d.index, "arch": arch[d.name]} for d in devices],
               all_vars, regions, signals, buffers, kernels, queues, data, host, expects, var_values, rewrites)

def kernarg_layout(params) -> tuple:
  """(byte offset of each parameter in the kernel arguments, their size): buffers are 8-byte pointers, scalars 4-byte
  values, each aligned to its size (tinygrad's layout: its kernels take buffers first, then their variables)."""
  offs, top = [], 0
  for p in params:
    n = 4 if p.scalar else 8
    top += -top % n
    offs.append(top); top += n
  return offs, top

SCRATCH_SIZE = 1 << 20  # per device, only when a real code object needs private memory

def _tmpring(t: str, co) -> int:
  """COMPUTE_TMPRING_SIZE: 0 without private memory; else WAVESIZE (per-wave bytes / 256, gfx9: / 1024) and as many
  waves as fit SCRATCH_SIZE."""
  if not co.private_segment_size: return 0
  from tinygrad.runtime.autogen import hsa
  from .targets import get_target
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
