"""AMD's lowering (target/lower.py's QueueLowering): an AMD device's queues as PM4 (compute) or SDMA (copy) command
buffers. Packet layouts live in pm4.py and sdma.py; this module loads code objects (CodeLoader) and lowers the
statements whose packets are AMD's own (timestamp, copy, exec: AMDLowering.STATEMENTS); the memory plan, the patches
and the source map are target/'s. The on-disk format is described in docs/amd.md."""
from __future__ import annotations
import pathlib
from ..ir import Wait, SignalWrite, Exec, Copy, Write, Poll, Barrier, Timestamp, Epoch, Expr, U32_MAX, resolve
from ..target.layout import TIMESTAMP_OFFSET, kernarg_layout, kernargs_region
from ..target.plan import MemoryPlan
from ..target.lower import Lowering, QueueLowering, lowering_error, arg_record, impl_record
from . import pm4, sdma
from .targets import get_target
from . import codeobj

__all__ = ["AMDLowering", "CodeLoader", "SCRATCH_SIZE", "tmpring"]

SCRATCH_SIZE = 1 << 20  # per device, only when a real code object needs private memory

class CodeLoader:
  """The code object of each (kernel, device) an exec names, placed in the plan the first time: the program's `amd
  "file.co"` (relative to the program) or a synthetic one, added to `kernels` (the image's table) in load order."""
  def __init__(self, plan: MemoryPlan, names: dict, arch: dict, base_dir: pathlib.Path, kernels: list):
    self.plan, self.names, self.arch, self.base_dir, self.kernels = plan, names, arch, base_dir, kernels
    self.loaded: dict = {}   # (kernel, device) -> (CodeObject, code address)

  def load(self, kname: str, dev: str, span) -> tuple:
    if (kname, dev) in self.loaded: return self.loaded[kname, dev]
    k, t, elf = self.names[kname], get_target(self.arch[dev]), None
    if k.impl is not None and k.impl.amd_code:
      path = self.base_dir / k.impl.amd_code
      try: co = codeobj.from_elf(t, elf := path.read_bytes())
      except (OSError, ValueError) as e: raise lowering_error("name", f"kernel `{kname}`: cannot load AMD code object {path}: {e}", span or k.span)
    else: co = codeobj.synthetic(t, kname, len(k.params))
    a = self.plan.region(f"{kname}.code@{dev}", "code", dev, len(co.image) + (-len(co.image) % 4), kernel=kname)
    if (a + co.entry_offset) % 256: raise lowering_error("name", f"kernel `{kname}`: entry point is not 256-byte aligned", span)
    self.plan.data.append((a, co.image))
    offs, _ = kernarg_layout(k.params)
    self.kernels.append({"name": kname, "device": dev, "code_addr": a, "kd_addr": a + co.kd_offset,
                         "prog_addr": a + co.entry_offset, "synthetic": co.synthetic, "kernarg_size": co.kernarg_size,
                         "params": [[p.mode, p.name, o] for p, o in zip(k.params, offs)],
                         "impl": impl_record(k.impl),
                         **({"code_object": elf} if elf is not None else {})})   # the ELF, for `lift` to write out
    self.loaded[kname, dev] = (co, a)
    return self.loaded[kname, dev]

class AMDLowering(QueueLowering):
  """An AMD device's queues: PM4 for compute, SDMA for copy (the encoders duck-typed: the base lowers wait, signal,
  barrier, write and poll through them); the code objects and each device's scratch memory shared by its queues."""
  def __init__(self, lowering: Lowering):
    super().__init__(lowering)
    self.code = CodeLoader(self.plan, self.names, lowering.arch, lowering.base_dir, lowering.kernels)
    self.scratch: dict = {}    # device -> scratch address

  def begin_queue(self, q) -> None: self.enc = pm4.encoder(self.t) if q.engine == "compute" else sdma.encoder(self.t)

  def scratch_for(self, dev: str) -> int:
    if dev not in self.scratch: self.scratch[dev] = self.plan.region(f"scratch@{dev}", "scratch", dev, SCRATCH_SIZE)
    return self.scratch[dev]

  def timestamp(self, s, sp): self.enc.timestamp(self.out, self.plan.signal(s.signal) + TIMESTAMP_OFFSET)

  def copy(self, s, sp):
    (da, n), (sa, _) = self.plan.slice(s.dst), self.plan.slice(s.src)
    enc = self.enc
    enc.copy(self.out, da, sa, n)
    for sl, at in ((s.src, enc.COPY_SRC_AT), (s.dst, enc.COPY_DST_AT)):
      for j, off in enumerate(range(0, n, enc.max_copy_size)):  # each COPY_LINEAR piece holds its own addresses
        if (e := self.rebound_addr(sl, off)) is None: break
        self.value(e, self.start + j * enc.COPY_DWORDS + at, self.patches, "lo")
        self.value(e, self.start + j * enc.COPY_DWORDS + at + 1, self.patches, "hi")

  def exec(self, s, sp):
    plan, dev = self.plan, self.dev
    co, ca = self.code.load(s.kernel.name, dev, sp)
    k = self.names[s.kernel.name]
    ka, kasz = self.kernargs(s, k, co)
    gdims, bdims = s.grid or (1, 1, 1), s.block or (1, 1, 1)
    grid, block = tuple(resolve(x, self.env1) & U32_MAX for x in gdims), tuple(resolve(x, self.env1) & U32_MAX for x in bdims)
    if co.dispatch_ptr and any(type(x) is Expr for x in gdims + bdims):
      raise lowering_error("name", f"kernel `{s.kernel.name}`: launch dimensions over vars need a code object without a dispatch packet", sp)
    user = []
    if co.private_segment_sgpr:  # scratch buffer resource, as tinygrad sets it up
      sc = self.scratch_for(dev)
      user += [sc & U32_MAX, (sc >> 32) | 1 << 31, U32_MAX, 0x20c14000]
    if co.dispatch_ptr:
      user += [(ka + kasz) & U32_MAX, (ka + kasz) >> 32]
      plan.data.append((ka + kasz, _dispatch_packet(co, grid, block, ka)))
    user += [ka & U32_MAX, ka >> 32]
    self.enc.exec(self.out, ca + co.entry_offset, co.rsrc1, co.rsrc2, co.rsrc3, tmpring(self.t, co),
                  self.scratch_for(dev) if co.private_segment_size or co.private_segment_sgpr else 0, tuple(user), grid,
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

  STATEMENTS = {Wait: QueueLowering.wait, Epoch: QueueLowering.epoch, SignalWrite: QueueLowering.signal, Barrier: QueueLowering.barrier,
                Write: QueueLowering.write, Poll: QueueLowering.poll, Timestamp: timestamp, Copy: copy, Exec: exec}  # noqa: A003  (as the statement)

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
