"""The RDNA3 (gfx11, wave32) executor: runs a kernel's real machine code for a DISPATCH_DIRECT on the emulator.

Everything comes from the packets and memory, as on the GPU: the program address (COMPUTE_PGM_LO/HI), PGM_RSRC1 (float
mode, IEEE mode), PGM_RSRC2 (user SGPR count, workgroup-id enables, LDS size, scratch), COMPUTE_TMPRING_SIZE (private
memory), COMPUTE_USER_DATA_*, the workgroup size (COMPUTE_NUM_THREAD_X/Y/Z) and the grid (DISPATCH_DIRECT's
dimensions, in workgroups). Instructions are fetched from emulated memory at the PC and decoded with tinygrad's RDNA3
instruction classes (tinygrad.renderer.amd); their semantics are the shipped pseudocode, translated to C per opcode
(pcode_c.py) and run by a compiled loop over a table of decoded instructions (native.py, rdna3_native.c).

This module is the model around that: decoding and disassembly, the operand tables, the launch read from the
registers, the fault text (kernel, workgroup, wave, PC, instruction), coverage and the executor's statistics."""
from __future__ import annotations
import functools, time
import numpy as np
from ...target.engine import DeviceFault
from .gfx11 import (LANES, VCC, NULL, M0, EXEC, SCC_SRC, VCCZ, EXECZ, NOPS, disasm, pcode_table, resolve_pcode, decode,
                    is_sgpr, constant_operand, Snap, operand_formats, dual_op, MEM_SIZE, access_width)

__all__ = ["AmdKernel", "Launch", "Wave", "Stats", "disasm", "decode", "coverage", "STATS", "Snap", "pcode_table",
           "operand_formats", "dual_op", "access_width", "constant_operand", "is_sgpr", "resolve_pcode", "NOPS", "MEM_SIZE",
           "OBSERVERS", "LANES", "EXEC", "VCC", "NULL", "M0", "SCC_SRC", "VCCZ", "EXECZ", "MAX_INSTRUCTIONS"]

OBSERVERS: list = []   # callables (phase "before"/"after", launch description, memory) around every dispatch
MAX_INSTRUCTIONS = 10_000_000     # per dispatch: a kernel that never ends is a fault (minutes), not an endless run
_DECODED: dict = {}   # 16 bytes at a PC -> decoded instruction (content-addressed: shared by kernels and runs)

class Stats:
  """Wave instructions executed, waves, dispatches and CPU seconds spent in the executor, over the process."""
  def __init__(self): self.instructions, self.waves, self.dispatches, self.seconds = 0, 0, 0, 0.0
STATS = Stats()

class Wave:
  """A wave's registers as tests set and read them (the C loop keeps its own; native.run_workgroup copies them)."""
  __slots__ = ("s", "v", "scc", "pc", "done", "id")
  def __init__(self, pc: int, wid: int):
    self.s = np.zeros(128, np.uint64)
    self.v = np.zeros((256, LANES), np.uint64)
    self.scc, self.pc, self.done, self.id = 0, pc, False, wid

class Launch:
  """One dispatch as its registers describe it: memory, entry point, IEEE mode, denormal handling (PGM_RSRC1's
  FLOAT_MODE: FP32 in bits 5:4, FP16/FP64 in bits 7:6; 0 flushes inputs and results to signed zero, 1 keeps inputs,
  2 keeps results, 3 keeps both), LDS bytes per workgroup and private memory bytes per lane."""
  def __init__(self, kernel: "AmdKernel", mem, entry: int, ieee: bool = True, float_mode: int = 0xF0, lds_size: int = 0,
               scratch_size: int = 0):
    self.k, self.mem, self.entry, self.ieee, self.lds_size, self.scratch_size = kernel, mem, entry, ieee, lds_size, scratch_size
    self.float_mode = float_mode
    self.lds = np.zeros(lds_size, np.uint8)

# ---- the kernel

class AmdKernel:
  """What the emulator runs for a kernel with a gfx11 code object: `machine(engine, dispatch operands)` executes the
  code at COMPUTE_PGM_LO for the dispatch's grid. (`run`, the C-kernel interface, is not used.)"""
  extra_us = 0.0
  def __init__(self, name: str, arch: str = "gfx1100"):
    self.name, self.arch = name, arch
    self.decoded: dict = {}    # pc -> (instruction, size, text)
    self.programs: dict = {}   # FLOAT_MODE's denormal field -> native.NativeProgram
    self.instructions = 0

  def native_program(self, launch):
    from .native import NativeProgram
    key = (launch.float_mode >> 4) & 0xF
    got = self.programs.get(key)
    if got is None: got = self.programs[key] = NativeProgram(self, key)
    return got

  step_limit = None   # instructions per dispatch, when set: below MAX_INSTRUCTIONS (single-stepping in tests)

  def max_instructions(self) -> int: return self.step_limit if self.step_limit is not None else MAX_INSTRUCTIONS

  def run(self, views): raise DeviceFault("an AMD code object kernel runs through its dispatch")

  def fetch(self, mem, pc: int):
    got = self.decoded.get(pc)
    if got is None:
      r = mem.find(pc, 4)
      data = bytes(r.u8[pc - r.base:min(pc - r.base + 16, r.size)])
      got = _DECODED.get(data)
      if got is not None:
        self.decoded[pc] = got
        return got
      try: ins = decode(data.ljust(16, b"\0"))
      except Exception as e: raise DeviceFault(f"undecodable instruction {int.from_bytes(data[:4], 'little'):#010x} ({e})")
      try: text = disasm(ins)
      except Exception: text = repr(ins)
      got = self.decoded[pc] = _DECODED[data] = (Snap(ins), ins.size(), text)
    return got

  def machine(self, engine, a):
    from ...amd.targets import get_target
    from ...amd.meaning import kernel_registers
    regs, mem = engine.regs, engine.mem
    arch = engine.ring.arch
    if get_target(arch).gen != 11: raise DeviceFault(f"kernel `{self.name}`: the machine-code executor runs gfx11 code, not {arch}")
    dx, dy, dz, initiator = a
    kr = kernel_registers(arch, regs.get, initiator)
    if kr.initiator["use_thread_dimensions"]:
      raise DeviceFault(f"kernel `{self.name}`: DISPATCH_DIRECT with use_thread_dimensions is not supported")
    if not kr.initiator["cs_w32_en"]: raise DeviceFault(f"kernel `{self.name}`: wave64 dispatch of a wave32 executor (CS_W32_EN clear)")
    entry, rsrc1, rsrc2, f1, f2, block, user = kr.entry, kr.rsrc1_raw, kr.rsrc2_raw, kr.rsrc1, kr.rsrc2, list(kr.block), list(kr.user)
    nthreads = block[0] * block[1] * block[2]
    if nthreads == 0 or nthreads > 1024: raise DeviceFault(f"kernel `{self.name}`: workgroup of {block} threads (1..1024)")
    # private memory per lane: COMPUTE_TMPRING_SIZE.WAVESIZE (256-byte units per wave, sized for 64 lanes as tinygrad
    # programs it) / 64 lanes
    launch = Launch(self, mem, entry, bool(f1["ieee_mode"]), f1["float_mode"], f2["lds_size"] * 512,
                    kr.tmpring["wavesize"] * 256 // 64 if f2["scratch_en"] else 0)
    nwaves = -(-nthreads // LANES)
    STATS.dispatches += 1
    if OBSERVERS:   # the launch as the packets describe it, for tools that replay dispatches elsewhere
      desc = {"kernel": self.name, "entry": entry, "rsrc1": rsrc1, "rsrc2": rsrc2, "grid": (dx, dy, dz), "block": tuple(block),
              "user": user, "lds_size": launch.lds_size, "scratch_size": launch.scratch_size, "float_mode": f1["float_mode"]}
      for o in OBSERVERS: o("before", desc, mem)
    t0 = time.process_time()
    from .native import run_dispatch, available
    if (why := available()) is not None: raise DeviceFault(f"kernel `{self.name}`: the RDNA3 executor cannot run: {why}")
    enables = sum(1 << i for i, en in enumerate(("tgid_x_en", "tgid_y_en", "tgid_z_en", "tg_size_en", "scratch_en")) if f2[en])
    count = run_dispatch(self, launch, (dx, dy, dz), tuple(block), user, enables, nwaves)
    STATS.waves += nwaves * dx * dy * dz
    self.instructions += count
    STATS.instructions += count
    STATS.seconds += time.process_time() - t0
    for o in OBSERVERS: o("after", desc, mem)
    return count

  def run_workgroup(self, launch, waves: list, wg: tuple, before: int) -> int:
    """One workgroup of prepared Wave states (the tests' entry point), updated in place; the instructions run."""
    from .native import run_workgroup
    return run_workgroup(self, launch, waves, wg, before)

  def where_at(self, wave: int, wg, pc, launch) -> str:
    """The fault's position: kernel, workgroup, wave, PC (absolute and from the entry point), the instruction."""
    got = self.decoded.get(pc)
    text = got[2] if got else "?"
    return f"kernel `{self.name}` workgroup {wg} wave {wave}, pc {pc:#x} (entry+{pc - launch.entry:#x}) `{text}`"

# ---- what is covered

ALU_ENUMS = ("SOP1Op", "SOP2Op", "SOPCOp", "SOPKOp", "VOP1Op", "VOP2Op", "VOP3Op", "VOP3SDOp", "VOPCOp")

def _mem_covered(name: str) -> bool:
  if any(x in name for x in ("ATOMIC", "ADDTID", "D16", "LDS_", "_LDS")): return False
  kind = name.rsplit("_", 1)[1]
  if name.startswith("S_LOAD_"): return kind in MEM_SIZE
  if name.startswith(("GLOBAL_LOAD_", "GLOBAL_STORE_", "FLAT_LOAD_", "FLAT_STORE_", "SCRATCH_LOAD_", "SCRATCH_STORE_")):
    return kind in MEM_SIZE
  if name.startswith(("DS_LOAD_", "DS_STORE_")): return kind in MEM_SIZE and "STOREXCHG" not in name
  return False

@functools.lru_cache(maxsize=None)
def coverage() -> tuple:
  """The RDNA3 opcode names the executor implements: ALU opcodes whose pseudocode translates to C (pcode_c.py), the
  float WMMAs, VOPD pairs, the SOPP flow instructions, and the SMEM/GLOBAL/FLAT/SCRATCH/DS loads and stores of 1 to
  64 bytes."""
  from tinygrad.runtime.autogen.amd.rdna3 import enum
  from .native import translates
  out = set()
  for en in ALU_ENUMS:
    for op in getattr(enum, en):
      if translates(op): out.add(op.name)
  for op in enum.SOPPOp:
    if op.name in NOPS or op.name in ("S_ENDPGM", "S_BARRIER") or ("BRANCH" in op.name and translates(op)): out.add(op.name)
  for op in enum.VOP3POp:   # packed math, and the float WMMAs
    if ("WMMA" in op.name and "IU" not in op.name) or ("WMMA" not in op.name and translates(op)): out.add(op.name)
  for en in ("SMEMOp", "GLOBALOp", "FLATOp", "SCRATCHOp", "DSOp"):
    out.update(op.name for op in getattr(enum, en) if _mem_covered(op.name))
  for op in enum.VOPDOp:
    try:
      if dual_op(op.name).name in out: out.add(op.name)
    except DeviceFault: pass
  return tuple(sorted(out))
