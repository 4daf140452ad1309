"""The emulator's NV engine (docs/nv.md, docs/run.md): what an NV queue's methods do. A method group sets methods
(per engine: (subchannel << 16) | method -> value, as a channel's method state) and, when it holds a trigger method,
performs it on that state afterwards: SEM_EXECUTE (a semaphore acquire or release), SEND_SIGNALING_PCAS2_B (launch the
QMD SEND_PCAS_A names: run its kernel, write its release semaphores, launch its dependent QMD) and the copy class's
LAUNCH_DMA (a copy and/or a semaphore release). tinygrad's groups carry at most one trigger, as their last method.
Everything else (NON_STALL_INTERRUPT, INVALIDATE_SHADER_CACHES_NO_WFI, ...) only sets state: memory is coherent."""
from __future__ import annotations
from tinygrad.runtime.autogen import nv_570 as nv
from ..ir import U32_MAX
from ..target.engine import EngineKind, Prepared, Length, DeviceFault, Waiting, COPY_BYTES_PER_US
from . import pushbuf
from .targets import get_target
from .qmd import QMD
from .meaning import qmd_chain, MAX_CHAIN, SEM_COMPARE, WPTR_BYTES

__all__ = ["nv_kind", "prepare", "launch_qmd", "NV_GROUP_COST", "NV_TIMER_MHZ"]

# what an NV method group costs, by the trigger it holds ("state": none, it only sets methods; emulated µs: docs/run.md)
NV_GROUP_COST = {"semaphore": 0.5, "launch": 4.0, "dma": 1.0, "state": 0.05}
NV_TIMER_MHZ = 1000             # the GPU timer an NV release writes at +8 counts nanoseconds (PTIMER)

def _K(subc, m): return (subc << 16) | m
SEM_LO, SEM_HI, PAY_LO, PAY_HI = (_K(0, m) for m in (nv.NVC56F_SEM_ADDR_LO, nv.NVC56F_SEM_ADDR_HI, nv.NVC56F_SEM_PAYLOAD_LO,
                                                     nv.NVC56F_SEM_PAYLOAD_HI))
PCAS_A = _K(1, nv.NVC6C0_SEND_PCAS_A)
IN_HI, IN_LO, OUT_HI, OUT_LO, LEN = (_K(4, m) for m in (nv.NVC6B5_OFFSET_IN_UPPER, nv.NVC6B5_OFFSET_IN_LOWER, nv.NVC6B5_OFFSET_OUT_UPPER,
                                                       nv.NVC6B5_OFFSET_OUT_LOWER, nv.NVC6B5_LINE_LENGTH_IN))
SEMA_A, SEMA_B, SEMA_PAY = (_K(4, m) for m in (nv.NVC6B5_SET_SEMAPHORE_A, nv.NVC6B5_SET_SEMAPHORE_B, nv.NVC6B5_SET_SEMAPHORE_PAYLOAD))
def _bits(v, f): return (v >> f[1]) & ((1 << (f[0] - f[1] + 1)) - 1)
_SEM_OP, _SEM_SIZE, _SEM_TS = nv.NVC56F_SEM_EXECUTE_OPERATION, nv.NVC56F_SEM_EXECUTE_PAYLOAD_SIZE, nv.NVC56F_SEM_EXECUTE_RELEASE_TIMESTAMP
_DMA_XFER, _DMA_SEM, _DMA_MULTI = nv.NVC6B5_LAUNCH_DMA_DATA_TRANSFER_TYPE, nv.NVC6B5_LAUNCH_DMA_SEMAPHORE_TYPE, nv.NVC6B5_LAUNCH_DMA_MULTI_LINE_ENABLE
# SEM_EXECUTE operation code -> the comparison a blocked acquire reports (nv.meaning.SEM_COMPARE)
_COMPARE = {code: SEM_COMPARE[name.upper()] for code, name in pushbuf.SEM_OPS.items() if name.upper() in SEM_COMPARE}

def _timer(e) -> int: return int((e.clock + e.cost) * NV_TIMER_MHZ)

def _release(e, addr: int, value: int, size64: bool, timestamp: bool):
  mem = e.mem
  if size64 or timestamp: mem.w64(addr, value if size64 else value & U32_MAX)   # a four-word release: payload, 0, timer
  else: mem.w32(addr, value & U32_MAX)
  if timestamp: mem.w64(addr + 8, _timer(e))
  e.m.note_write(addr, e.clock + e.cost)

def _semaphore(e, v: int) -> bool:
  """SEM_EXECUTE on the SEM_ADDR / SEM_PAYLOAD state: a release, or an acquire that blocks until it holds."""
  r, mem = e.regs, e.mem
  addr = (r.get(SEM_LO, 0) & ~3) | (r.get(SEM_HI, 0) & 0xFF) << 32
  pay, size64 = r.get(PAY_LO, 0) | r.get(PAY_HI, 0) << 32, bool(_bits(v, _SEM_SIZE))
  op = _bits(v, _SEM_OP)
  if op == nv.NVC56F_SEM_EXECUTE_OPERATION_RELEASE:
    _release(e, addr, pay, size64, bool(_bits(v, _SEM_TS)))
    return True
  if op in (nv.NVC56F_SEM_EXECUTE_OPERATION_ACQ_AND, nv.NVC56F_SEM_EXECUTE_OPERATION_ACQ_NOR):
    cur, p = mem.r32(addr), pay & U32_MAX
    ok = (cur & p) != 0 if op == nv.NVC56F_SEM_EXECUTE_OPERATION_ACQ_AND else (~(cur | p) & U32_MAX) != 0
    acq_and = op == nv.NVC56F_SEM_EXECUTE_OPERATION_ACQ_AND
    return _acquired(e, ok, addr, p if acq_and else 0, p if acq_and else ~p & U32_MAX, _COMPARE[op], cur)
  bits = 64 if size64 else 32
  full = (1 << bits) - 1
  cur, p = (mem.r32(addr) | mem.r32(addr + 4) << 32) if size64 else mem.r32(addr), pay & full
  if op == nv.NVC56F_SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ: ok = ((cur - p) & full) < (1 << (bits - 1))   # circular: cur - p >= 0
  elif op == nv.NVC56F_SEM_EXECUTE_OPERATION_ACQ_STRICT_GEQ: ok = cur >= p
  elif op == nv.NVC56F_SEM_EXECUTE_OPERATION_ACQUIRE: ok = cur == p
  else: raise DeviceFault(f"SEM_EXECUTE operation {op} ({pushbuf.SEM_OPS.get(op, '?')}) is not supported by the emulator")
  return _acquired(e, ok, addr, p & U32_MAX, U32_MAX, _COMPARE[op], cur & U32_MAX)

def _acquired(e, ok: bool, addr: int, ref: int, mask: int, compare: str, cur: int) -> bool:
  if ok:
    e.m.wait_satisfied(e, addr)
    e.wait_info = None
    return True
  e.wait_info = Waiting(addr, ref, mask, compare, cur)
  return False

def _pcas(e, v: int) -> bool:
  """SEND_SIGNALING_PCAS2_B: schedule (with or without prefetch) the QMD at SEND_PCAS_A << 8."""
  if v & 0xF in (nv.NVC6C0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_SCHEDULE, nv.NVC6C0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_PREFETCH_SCHEDULE,
                 nv.NVC6C0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INVALIDATE_COPY_SCHEDULE,
                 nv.NVC6C0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INVALIDATE_PREFETCH_COPY_SCHEDULE):
    launch_qmd(e, e.regs.get(PCAS_A, 0) << 8)
  return True

def launch_qmd(e, qa: int) -> None:
  """Run the QMD at qa and the chain of QMDs it launches: each one's kernel (the program address names it), then its
  release semaphores (payload, 0, the timer at +8), then its dependent QMD."""
  t = get_target(e.ring.arch)
  got = None
  for qa, _, got in qmd_chain(qa, lambda a: QMD.of(t, bytearray(e.mem.view(a, t.qmd_size).tobytes()))):
    k = e.m.kernels.get(got.program)
    if k is None: raise DeviceFault(f"QMD at {qa:#x}: no known kernel at program address {got.program:#x}")
    e.call_kernel(k, got.kernargs, got.grid, got.block, None)
    for r in got.releases: _release(e, r.addr, r.value, r.wide, True)
    if got.dependent is not None and got.dependent_action != 1:
      raise DeviceFault(f"QMD at {qa:#x}: dependent QMD action {got.dependent_action} is not supported")
  if got is not None and got.dependent is not None:
    raise DeviceFault(f"QMD at {got.dependent:#x} launched again by dependent pointers (a cycle), or more than {MAX_CHAIN} QMDs in a chain")

def _dma(e, v: int) -> bool:
  """The copy class's LAUNCH_DMA: a pitch copy of LINE_LENGTH_IN bytes, then a semaphore release if asked."""
  r, mem = e.regs, e.mem
  if _bits(v, _DMA_MULTI): raise DeviceFault("LAUNCH_DMA with MULTI_LINE_ENABLE is not supported by the emulator")
  if _bits(v, _DMA_XFER):
    src = (r.get(IN_HI, 0) & 0x1FFFF) << 32 | r.get(IN_LO, 0)
    dst = (r.get(OUT_HI, 0) & 0x1FFFF) << 32 | r.get(OUT_LO, 0)
    n = r.get(LEN, 0)
    if n:
      s, d = mem.view(src, n), mem.view(dst, n)
      d[:] = s.copy() if src < dst + n and dst < src + n else s
      mem.writes += 1
      e.cost += n / COPY_BYTES_PER_US
  sem = _bits(v, _DMA_SEM)
  if sem:
    if sem == nv.NVC6B5_LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_CONDITIONAL_INTR_SEMAPHORE: raise DeviceFault("LAUNCH_DMA conditional-interrupt semaphore "
                                                                                                        "is not supported")
    addr = (r.get(SEMA_A, 0) & 0x1FFFF) << 32 | r.get(SEMA_B, 0)
    _release(e, addr, r.get(SEMA_PAY, 0), False, sem == nv.NVC6B5_LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_FOUR_WORD_SEMAPHORE)
  return True

TRIGGERS = {_K(0, nv.NVC56F_SEM_EXECUTE): (_semaphore, "semaphore"), _K(1, nv.NVC6C0_SEND_SIGNALING_PCAS2_B): (_pcas, "launch"),
            _K(4, nv.NVC6B5_LAUNCH_DMA): (_dma, "dma")}

def _state(e, a):
  for k, v in a: e.regs[k] = v
  return True

def _trigger(e, a):
  sets, fn, v = a
  for k, x in sets: e.regs[k] = x
  return fn(e, v)

def prepare(p, c) -> Prepared:
  """A decoded method group: its methods set, then its trigger performed, if it holds one."""
  sets = tuple((_K(s, m), v) for s, m, v in pushbuf.methods(p.dwords))
  trig = next(((k, v) for k, v in sets if k in TRIGGERS), None)
  if trig is None: return Prepared(_state, sets, NV_GROUP_COST["state"])
  fn, what = TRIGGERS[trig[0]]
  return Prepared(_trigger, (sets, fn, trig[1]), NV_GROUP_COST[what])

def nv_kind(arch: str) -> EngineKind:
  """An NV queue's engine (compute or copy: the pushbuffer's subchannels say which class a method is for), dword
  write pointers (both engines' alike)."""
  return EngineKind(pushbuf.decoder(arch), Length(pushbuf.packet_length, pushbuf.packet_length), prepare, WPTR_BYTES["compute"])
