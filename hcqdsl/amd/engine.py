"""The emulator's PM4 and SDMA engines (docs/run.md): what each packet does, as a table per engine `packet name ->
prepare(fields, codec) -> (handler, operands)`, and the `EngineKind` of each (target/engine.py) that the scheduler
(runtime/emulator.py) asks. prepare extracts the operands once per distinct packet (the scheduler's op cache is
content-addressed); a handler is then a couple of int ops.

Fast variants of the hot handlers (waits, 32-bit signal writes, copies) are chosen at prepare time when the run is not
traced and the address is mapped (so the resolved memoryview cell stays valid: regions never move or go away). Their
operands carry the cell, the emulator's write-time table and the Memory, so they touch no attribute chains and
allocate nothing. Otherwise the generic handlers run, and an unmapped or misaligned address faults at execution."""
from __future__ import annotations
import operator
from typing import Callable
from ..ir import U32_MAX
from ..target.engine import EngineKind, Prepared, Length, fault, DeviceFault, Waiting, COPY_BYTES_PER_US
from . import pm4, sdma
from .pm4 import WAIT_FUNCTIONS, FUNC_GE
from .codeobj import SYNTH_MAGIC, ENTRY_OFFSET
from .meaning import program_address, kernarg_address, WPTR_BYTES

__all__ = ["PM4_OPS", "SDMA_OPS", "FUNCS", "pm4_kind", "sdma_kind", "PACKET_COST", "NOP_DWORD_COST", "AMD_CLOCK_MHZ"]

# what a PM4 or SDMA packet costs, by its decoded name (emulated µs: docs/run.md's cost model)
PACKET_COST = {"NOP": 0.02, "TYPE2_NOP": 0.01, "WAIT_REG_MEM": 0.3, "POLL_REGMEM": 0.3, "RELEASE_MEM": 0.8, "FENCE": 0.5,
               "ACQUIRE_MEM": 0.4, "EVENT_WRITE": 0.2, "SET_SH_REG": 0.05, "SET_UCONFIG_REG": 0.05, "INDIRECT_BUFFER": 0.1,
               "INDIRECT": 0.1, "DISPATCH_DIRECT": 4.0, "COPY_LINEAR": 1.0, "TIMESTAMP_GET_GLOBAL": 0.2, "TRAP": 0.2,
               "WRITE_UNTILED": 0.3, "WRITE_DATA": 0.3, "CONSTANT_FILL": 0.5}
NOP_DWORD_COST = 0.02           # a PM4 NOP also costs each dword it skips past its header
AMD_CLOCK_MHZ = 100             # the GPU clock counter RELEASE_MEM / TIMESTAMP write (AMD's 100 MHz reference)

_COMPARE = {"always": lambda v, r: True, "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
            ">=": operator.ge, ">": operator.gt}
FUNCS = {code: _COMPARE[op] for code, op in WAIT_FUNCTIONS.items()}   # WAIT_REG_MEM / POLL_REGMEM function codes
_GE = WAIT_FUNCTIONS[FUNC_GE]

def _poll(e, addr, v, ref, mask, func) -> bool:
  if FUNCS[func](v & mask, ref):
    if addr is not None: e.m.wait_satisfied(e, addr)
    e.wait_info = None
    return True
  e.wait_info = Waiting(addr, ref, mask, WAIT_FUNCTIONS[func], v)
  return False

def _wait_mem(e, a):
  addr, ref, mask, func = a
  return _poll(e, addr, e.mem.r32(addr), ref, mask, func)

# fast variants of the hot handlers (the module docstring says when they run)

def _wait_ge_cell(e, a):  # WAIT_REG_MEM / POLL_REGMEM, memory, `>=`, full mask
  cell, i, ref, addr, last_write = a
  v = cell[i]
  if v >= ref:
    t = last_write.get(addr)
    if t is not None and t > e.clock: e.clock = t  # the wait ends when the satisfying write landed
    return True
  e.wait_info = Waiting(addr, ref, U32_MAX, _GE, v)
  return False

def _store_cell(e, a):  # RELEASE_MEM 32-bit data, FENCE
  cell, i, v, addr, mem, last_write = a
  cell[i] = v
  mem.writes += 1
  last_write[addr] = e.clock + e.cost  # the write lands at the end of the packet
  return True

def _copy_spans(e, a):  # COPY_LINEAR; its per-byte cost is in the op's cost
  dst, src, mem = a
  dst[:] = src  # a memmove: overlapping ranges copy as if through a buffer
  mem.writes += 1
  return True

def _wait_reg(e, a):
  req, done, ref, mask, func, op = a
  if op == 1: e.regs[req] = e.regs[done] = ref  # write, wait, write (HDP flush): the flush completes at once
  v = e.regs.get(done, 0)
  return _poll(e, None, v, ref, mask, func)

def _release(e, a):
  sel, addr = a[0], a[1]
  if sel == 0: return True
  end = e.clock + e.cost
  if sel == 1: e.mem.w32(addr, a[2])
  elif sel == 2: e.mem.w64(addr, a[2] | a[3] << 32)
  else: e.mem.w64(addr, int(end * AMD_CLOCK_MHZ))  # 3: GPU clock counter
  e.m.note_write(addr, end)
  return True

def _nothing(e, a): return True

def _set_reg(e, a):
  off, vals = a
  for i, v in enumerate(vals): e.regs[off + i] = v
  if off == e.R_UD: e.ud_count = len(vals)
  return True


def _ib(e, a):
  base, size, valid, chain = a
  if valid and size: e.enter_ib(base, size, chain)
  return True

def _write_data(e, a):
  addr, data = a
  for i, v in enumerate(data): e.mem.w32(addr + 4 * i, v)
  e.m.note_write(addr, e.clock + e.cost)
  return True

def _copy(e, a):
  src, dst, n = a
  s, d = e.mem.view(src, n), e.mem.view(dst, n)
  d[:] = s.copy() if src < dst + n and dst < src + n else s  # overlapping: copy as if through a buffer
  e.mem.writes += 1
  e.cost += n / COPY_BYTES_PER_US
  return True

def _fence(e, a):
  addr, v = a
  e.mem.w32(addr, v)
  e.m.note_write(addr, e.clock + e.cost)
  return True

def _timestamp(e, a):
  e.mem.w64(a, int((e.clock + e.cost) * AMD_CLOCK_MHZ))
  return True

def _const_fill(e, a):
  dst, n, v, dw = a
  d = e.mem.view(dst, n)
  if dw: d[:n - n % 4].view("<u4")[:] = v
  else: d[:] = v & 0xFF
  e.mem.writes += 1
  return True

def _prep_wait(addr, ref, mask, func, c):
  cell = c.cell(addr) if func == FUNC_GE and mask == U32_MAX else None
  if cell is not None: return _wait_ge_cell, (*cell, ref, addr, c.m.last_write)
  return _wait_mem, (addr, ref, mask, func)

def _prep_store(addr, v, c):
  cell = c.cell(addr)
  if cell is not None: return _store_cell, (*cell, v & U32_MAX, addr, c.m.mem, c.m.last_write)
  return _fence, (addr, v)

def _prep_copy(f, c):
  src, dst, n = f["src_addr"], f["dst_addr"], f["count"] + 1
  if c.fast:
    try: return _copy_spans, (c.m.mem.span(dst, n), c.m.mem.span(src, n), c.m.mem)
    except DeviceFault: pass
  return _copy, (src, dst, n)

def _prep_wrm(f, c):
  if f["function"] not in FUNCS: raise DeviceFault(f"WAIT_REG_MEM function {f['function']} is reserved")
  if f["mem_space"] == 1: return _prep_wait(f["addr"], f["reference"], f["mask"], f["function"], c)
  return _wait_reg, (f["addr_lo"], f["addr_hi"], f["reference"], f["mask"], f["function"], f["operation"])

def _prep_release(f, c):
  if f["data_sel"] not in (0, 1, 2, 3): raise DeviceFault(f"RELEASE_MEM data_sel {f['data_sel']} is not supported")
  if f.get("dst_sel", 0) not in (0, 1): raise DeviceFault(f"RELEASE_MEM dst_sel {f['dst_sel']} is not supported")
  if f["data_sel"] == 1: return _prep_store(f["addr"], f["data_lo"], c)
  return _release, (f["data_sel"], f["addr"], f["data_lo"], f["data_hi"])

def _prep_poll(f, c):
  if f["func"] not in FUNCS: raise DeviceFault(f"POLL_REGMEM function {f['func']} is reserved")
  if not f["mem_poll"]: raise DeviceFault("POLL_REGMEM of a register is not supported by the emulator")
  return _prep_wait(f["addr"], f["value"], f["mask"], f["func"], c)

def _dispatch(e, a):
  """DISPATCH_DIRECT: the kernel at the program address COMPUTE_PGM_LO/HI hold (else the one the synthetic descriptor's
  marker names), on the kernel arguments the last two COMPUTE_USER_DATA registers point at."""
  regs, mem, m = e.regs, e.mem, e.m
  prog = program_address((regs.get(e.R_PGM_LO, 0), regs.get(e.R_PGM_LO + 1, 0)))
  k = m.kernels.get(prog)
  if k is None:
    try: marker = mem.view(prog - ENTRY_OFFSET + 64, 64).tobytes()
    except DeviceFault: marker = b""
    name = marker[len(SYNTH_MAGIC):].split(b"\0")[0].decode(errors="replace") if marker.startswith(SYNTH_MAGIC) else None
    k = m.kernels_by_name.get(name)
    if k is None: raise DeviceFault(f"DISPATCH_DIRECT: no known kernel at program address {prog:#x}"
                                    + (f" (marker names `{name}`)" if name else ""))
  n = e.ud_count
  if n < 2: raise DeviceFault("DISPATCH_DIRECT: no kernarg pointer in COMPUTE_USER_DATA")
  ka = kernarg_address([regs.get(e.R_UD + i, 0) for i in range(n)])
  nt = e.codec.kind.num_thread
  e.call_kernel(k, ka, tuple(a[:3]), (regs.get(nt, 1), regs.get(nt + 1, 1), regs.get(nt + 2, 1)), a)
  return True

PM4_OPS: dict[str, Callable] = {
  "NOP": lambda f, c: (_nothing, None), "TYPE2_NOP": lambda f, c: (_nothing, None),
  "WAIT_REG_MEM": _prep_wrm, "RELEASE_MEM": _prep_release,
  "ACQUIRE_MEM": lambda f, c: (_nothing, None),     # memory is coherent: cache actions only cost time
  "EVENT_WRITE": lambda f, c: (_nothing, None),     # dispatches complete before the next packet: flushes are free
  "SET_SH_REG": lambda f, c: (_set_reg, (f["reg_offset"], f["values"])),
  "SET_UCONFIG_REG": lambda f, c: (_set_reg, (pm4.UCONFIG_REG_START + f["reg_offset"], f["values"])),
  "DISPATCH_DIRECT": lambda f, c: (_dispatch, (f["dim_x"], f["dim_y"], f["dim_z"], f["dispatch_initiator"])),
  "INDIRECT_BUFFER": lambda f, c: (_ib, (f["ib_base"], f["ib_size"], f["valid"], f["chain"])),
  "WRITE_DATA": lambda f, c: (_write_data, (f["dst_addr_lo"] | f["dst_addr_hi"] << 32, f["data"])),
}
SDMA_OPS: dict[str, Callable] = {
  "NOP": lambda f, c: (_nothing, None), "TRAP": lambda f, c: (_nothing, None),  # the interrupt has no listener
  "COPY_LINEAR": _prep_copy,
  "FENCE": lambda f, c: _prep_store(f["addr"], f["data"], c),
  "POLL_REGMEM": _prep_poll,
  "TIMESTAMP_GET_GLOBAL": lambda f, c: (_timestamp, f["write_addr"]),
  "WRITE_UNTILED": lambda f, c: (_write_data, (f["dst_addr"], (f["data0"],) + tuple(f.get("data", ())[1:]))),
  "INDIRECT": lambda f, c: (_ib, (f["ib_base"], f["ib_size"], 1, 0)),
  "CONSTANT_FILL": lambda f, c: (_const_fill, (f["dst_addr"], f["count"] + 1, f["src_data_31_0"], f["fillsize"] == 2)),
}

assert set(PM4_OPS) | set(SDMA_OPS) <= set(PACKET_COST), "every packet the engines execute has a cost"

def _prepare(table: dict[str, Callable]) -> Callable:
  def prepare(p, c) -> Prepared:
    prep = table.get(p.name)
    if prep is None: return Prepared(fault, f"{p.name} is not supported by the emulator")
    h, a = prep(p.fields, c)
    cost = PACKET_COST[p.name] + (NOP_DWORD_COST * (p.length - 1) if p.name == "NOP" else 0.0)
    if h is _copy_spans: cost += a[0].nbytes / COPY_BYTES_PER_US  # what _copy adds at run time
    return Prepared(h, a, cost, indirect=h is _ib)
  return prepare

def pm4_kind(arch: str) -> EngineKind:
  """A compute queue's engine: PM4 packets, dword write pointers."""
  enc = pm4.encoder(arch)
  return EngineKind(pm4.decoder(arch), Length(pm4.packet_length, pm4.packet_length), _prepare(PM4_OPS), WPTR_BYTES["compute"],
                    enc.R_PGM_LO, enc.R_USER_DATA, enc.START_X[1] + 3)   # COMPUTE_NUM_THREAD_X/Y/Z: the workgroup size

def sdma_kind(arch: str) -> EngineKind:
  """A copy queue's engine: SDMA packets, byte write pointers."""
  dec = sdma.decoder(arch)
  return EngineKind(dec, Length(dec.packet_length, lambda h: dec.header_length(h) or -1), _prepare(SDMA_OPS), WPTR_BYTES["copy"])
