"""NV's lowering (target/lower.py's QueueLowering): an NV device's queues. An NV queue's command buffer is a pushbuffer
of methods (pushbuf.py), and an `exec` is also memory: its kernel-argument block holds constant bank 0 (NVProgram's
driver part, then the arguments) and, after it, the QMD that SEND_PCAS_A launches — tinygrad's NVComputeQueue.exec.
As there, a `signal` (or `timestamp`) right after an exec is a release semaphore of its QMD rather than methods, and
an exec following one is launched by the QMD before it (DEPENDENT_QMD0) rather than by methods; values those carry
are patched in memory (the queue's memory patches), as tinygrad's `_apply_var_vals` patches them. docs/nv.md says
what each statement becomes."""
from __future__ import annotations
import struct
from typing import Optional
from ..ir import Wait, SignalWrite, Exec, Copy, Write, Poll, Barrier, Timestamp, Epoch, Expr, U32_MAX, resolve, epoch_wait, nv_kernarg_error
from ..target.layout import kernarg_layout, kernargs_region
from ..target.plan import MemoryPlan
from ..target.lower import Lowering, QueueLowering, lowering_error, arg_record, impl_record
from . import pushbuf, cubin
from .targets import get_target
from .qmd import QMD
from .layout import ADDR_BITS

__all__ = ["NVLowering", "NVCodeLoader", "QMD_ALIGN"]

QMD_ALIGN = 1 << 8   # SEND_PCAS_A and DEPENDENT_QMD0_POINTER hold a QMD's address >> 8 (its kernel-argument block is aligned so)

class NVCodeLoader:
  """The cubin of each (kernel, device) an NV exec names, placed in the plan the first time (with the 4 KiB NVProgram
  leaves after the code against prefetch faults): a synthetic one (a kernel's AMD code object is no NV code). Each
  load raises the device's local memory per thread as NVDevice._ensure_has_local_memory does; the QMD template is
  NVProgram's at that moment. Adds its kernels to `kernels` (the image's table, which every vendor's loader adds to)."""
  def __init__(self, plan: MemoryPlan, names: dict, arch: dict, kernels: list):
    self.plan, self.names, self.arch, self.kernels = plan, names, arch, kernels
    self.loaded: dict = {}   # (kernel, device) -> (NVCode, code address, QMD template bytes)
    self.slm: dict = {}      # device -> local memory per thread

  def load(self, kname: str, dev: str, span) -> tuple:
    if (kname, dev) in self.loaded: return self.loaded[kname, dev]
    k = self.names[kname]
    if k.impl is not None and k.impl.amd_code:
      raise lowering_error("name", f"kernel `{kname}` is an AMD code object (`amd \"{k.impl.amd_code}\"`): device `{dev}` is NV", span or k.span)
    t = get_target(self.arch[dev])
    if (why := nv_kernarg_error(k, self.arch[dev])) is not None: raise lowering_error("bounds", why, span or k.span)
    offs, size = kernarg_layout(k.params)
    code = cubin.load(cubin.synthetic(t, kname, size), kname, synthetic=True)
    a = self.plan.region(f"{kname}.code@{dev}", "code", dev, cubin.round_up(len(code.image), 0x1000) + 0x1000, kernel=kname)
    self.plan.data.append((a, code.image))
    if self.slm.get(dev, 0) < code.lcmem: self.slm[dev] = cubin.round_up(code.lcmem, 32)
    tmpl = bytes(cubin.program_qmd(t, code, a, self.slm[dev]).data)
    base = 4 * len(cubin.cbuf0_prefix(t, code))
    self.kernels.append({"name": kname, "device": dev, "code_addr": a, "kd_addr": a, "prog_addr": a + code.prog_offset,
                         "synthetic": True, "kernarg_size": code.cbuf0_bytes,
                         "params": [[p.mode, p.name, base + o] for p, o in zip(k.params, offs)], "impl": impl_record(k.impl)})
    self.loaded[kname, dev] = (code, a, tmpl)
    return self.loaded[kname, dev]

class NVLowering(QueueLowering):
  """An NV device's queues through STATEMENTS (the pushbuffer methods), with the QMD state NVComputeQueue keeps:
  `active`, the QMD of the last exec while no other method followed it; the cubins shared by the device's queues."""
  active: Optional[tuple[QMD, int]]   # the last exec's QMD and its address while no other method followed it

  def __init__(self, lowering: Lowering):
    super().__init__(lowering)
    self.nvcode = NVCodeLoader(self.plan, self.names, lowering.arch, lowering.kernels)

  def begin_queue(self, q) -> None: self.enc, self.active = pushbuf.encoder(q.engine), None

  def finish_queue(self) -> None:
    for i, (a, b) in enumerate(self.plan.data):   # the QMDs are final: later signals and execs wrote into them
      if type(b) is bytearray: self.plan.data[i] = (a, bytes(b))

  # ---- NV statements

  def semaphore(self, a: int, what: str, sp) -> int:
    """An address a semaphore method names: 40 bits (SEM_ADDR_HI holds 8)."""
    if a >> ADDR_BITS: raise lowering_error("bounds", f"{what} at {a:#x} is out of an NV queue's reach: semaphore methods address {ADDR_BITS} bits "
                                  f"(a signal of another vendor's device)", sp)
    return a

  def nv_wait(self, s, sp):
    self.active = None
    self.semaphore(self.plan.signal(s.signal), f"signal `{s.signal.name}`", sp)
    self.wait(s, sp)

  def nv_epoch(self, s, sp): self.nv_wait(epoch_wait(self.dev), sp)

  def nv_signal(self, s, sp):
    """NVComputeQueue.signal: into a free release semaphore of the active QMD (its enable, address and payload; the
    payload patched in memory), else SEM_EXECUTE methods. NVCopyQueue.signal: SET_SEMAPHORE and LAUNCH_DMA."""
    a = self.semaphore(self.plan.signal(s.signal), f"signal `{s.signal.name}`", sp)
    v = s.value
    if self.active is not None:
      qmd, qa = self.active
      for i in range(2):
        en, af, pf = qmd.release_fields(i)
        if qmd.read(en): continue
        qmd.write(**{en: 1})
        ao, po = qmd.offset(af), qmd.offset(pf)
        struct.pack_into("<I", qmd.data, ao, a & U32_MAX)
        struct.pack_into("<I", qmd.data, ao + 4, (struct.unpack_from("<I", qmd.data, ao + 4)[0] & ~0xF) | (a >> 32))   # tinygrad's mask=0xf
        struct.pack_into("<II", qmd.data, po, self.value(v, qa + po, self.mem_patches), 0)
        return
    self.enc.signal(self.out, a, self.value(v, self.start + self.enc.SIGNAL_VALUE_AT, self.patches))
    self.active = None

  def nv_timestamp(self, s, sp):
    """NVCommandQueue.timestamp: a signal of 0 — the release writes the payload (0, into the signal's value) and the
    GPU timer at +8."""
    self.nv_signal(SignalWrite(s.signal, Expr(None, 0)), sp)

  def nv_barrier(self, s, sp):
    if self.q.engine == "compute": self.enc.barrier(self.out)   # NVCopyQueue has no memory_barrier: nothing
    self.active = None

  def nv_write(self, s, sp):
    """NVComputeQueue's write (the static checks refuse it on an NV copy queue)."""
    self.active = None
    self.semaphore(self.plan.slice(s.dst)[0], f"`write` to `{s.dst.buffer.name}`", sp)
    self.write(s, sp)

  def nv_poll(self, s, sp):
    """NVComputeQueue.poll_bit: ACQ_AND (any bit of the value set) or ACQ_NOR of ~mask (any bit of the mask clear) —
    `(word & mask) == value` only for a one-bit mask and the value 0 or the mask, the polls the static checks let
    through to an NV queue."""
    self.active = None
    self.semaphore(self.plan.slice(s.src)[0], f"`poll` of `{s.src.buffer.name}`", sp)
    self.poll(s, sp)

  def nv_copy(self, s, sp):
    (da, n), (sa, _) = self.plan.slice(s.dst), self.plan.slice(s.src)
    enc = self.enc
    enc.copy(self.out, da, sa, n)
    for sl, at in ((s.src, enc.COPY_SRC_AT), (s.dst, enc.COPY_DST_AT)):
      for j, off in enumerate(range(0, n, enc.max_copy_size)):   # each piece holds its addresses: high dword, then low
        if (e := self.rebound_addr(sl, off)) is None: break
        self.value(e, self.start + j * enc.COPY_DWORDS + at + 1, self.patches, "lo")
        self.value(e, self.start + j * enc.COPY_DWORDS + at, self.patches, "hi")

  def nv_exec(self, s, sp):
    """NVComputeQueue.exec: the kernel arguments after constant bank 0's driver part, the program's QMD at the next
    256 bytes with the grid, the block and constant bank 0's address, launched by SEND_PCAS_A or by the active QMD."""
    code, ca, tmpl = self.nvcode.load(s.kernel.name, self.dev, sp)
    k, t = self.names[s.kernel.name], get_target(self.t)
    prefix = cubin.cbuf0_prefix(t, code)
    qo = code.qmd_offset
    ka = self.plan.region(kernargs_region(self.q.name, self.index), "kernargs", self.dev, qo + t.qmd_size, QMD_ALIGN, kernel=s.kernel.name,
                          args=arg_record(s))
    if (ka + qo) >> ADDR_BITS: raise lowering_error("bounds", f"the QMD at {ka + qo:#x} is out of reach: SEND_PCAS_A addresses {ADDR_BITS} bits", sp)
    mem = bytearray(qo + t.qmd_size)
    struct.pack_into(f"<{len(prefix)}I", mem, 0, *prefix)
    self.pack_args(k, s, mem, 4 * len(prefix), ka)
    mem[qo:] = tmpl
    qmd = QMD.of(t, memoryview(mem)[qo:])
    gdims, bdims = s.grid or (1, 1, 1), s.block or (1, 1, 1)
    block = tuple(resolve(x, self.env1) for x in bdims)
    if block[0] > 0xFFFF or block[1] > 0xFFFF or block[2] > 0xFF:
      raise lowering_error("bounds", f"block {block} does not fit the QMD's CTA_THREAD_DIMENSION0..2 (16, 16 and 8 bits)", sp)
    go, bo = qmd.offset(qmd.grid_field()), qmd.offset("cta_thread_dimension0")
    for j, x in enumerate(gdims):
      struct.pack_into("<I", qmd.data, go + 4 * j, self.value(x, ka + qo + go + 4 * j, self.mem_patches))
    struct.pack_into("<HH", qmd.data, bo, block[0], block[1])
    struct.pack_into("<B", qmd.data, qmd.offset("cta_thread_dimension2"), block[2])
    qmd.set_constant_buf_addr(0, ka)
    if self.active is None: self.enc.launch(self.out, ka + qo)
    else: self.active[0].write(dependent_qmd0_pointer=(ka + qo) >> 8, dependent_qmd0_action=1, dependent_qmd0_prefetch=1, dependent_qmd0_enable=1)
    self.active = (qmd, ka + qo)
    self.plan.data.append((ka, mem))

  STATEMENTS = {Wait: nv_wait, Epoch: nv_epoch, SignalWrite: nv_signal, Barrier: nv_barrier, Timestamp: nv_timestamp, Copy: nv_copy,
                Write: nv_write, Poll: nv_poll, Exec: nv_exec}
