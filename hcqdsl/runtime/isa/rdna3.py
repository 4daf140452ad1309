"""The RDNA3 (gfx11, wave32) executor: runs a kernel's real machine code for a DISPATCH_DIRECT on the emulator.

Everything comes from the packets and memory, as on the GPU: the program address (COMPUTE_PGM_LO/HI), PGM_RSRC1 (float
mode, IEEE mode), PGM_RSRC2 (user SGPR count, workgroup-id enables, LDS size), COMPUTE_USER_DATA_*, the workgroup size
(COMPUTE_NUM_THREAD_X/Y/Z) and the grid (DISPATCH_DIRECT's dimensions, in workgroups). Instructions are fetched from
emulated memory at the PC and decoded with tinygrad's RDNA3 instruction classes (tinygrad.renderer.amd); ALU semantics
are the shipped pseudocode translated once per opcode by `pcode.translate`, run over the 32 lanes of a wave with
numpy. Memory instructions (SMEM, GLOBAL/FLAT, DS) and the program-flow SOPP instructions the pseudocode leaves to
prose (s_endpgm, s_barrier, waits) are implemented here from their names.

The waves of a workgroup run in turn, each until it ends or reaches s_barrier; a barrier releases when every live wave
of the workgroup is waiting at one. An unsupported instruction, an access outside mapped memory or LDS, or a bad
launch is a DeviceFault naming the kernel, the workgroup and wave, the PC and the instruction (the engine adds the
queue, ring offset and .hcq line)."""
from __future__ import annotations
import functools, os, time
import numpy as np
from ...ir import U32_MAX
from ..device import DeviceFault
from . import pcode
from .pcode import translate, Unsupported, U64

__all__ = ["AmdKernel", "Stats", "disasm", "decode", "coverage", "STATS", "Snap", "pcode_table", "translated",
           "operand_formats", "dual_op", "access_width", "constant_operand", "resolve_pcode", "NOPS", "MEM_SIZE", "OBSERVERS"]

LANES = 32

VCC, NULL, M0, EXEC, SCC_SRC, VCCZ, EXECZ, LIT = 106, 124, 125, 126, 253, 251, 252, 255
FLOAT_CONST = {240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0, 248: 0.15915494309189535}
NOPS = {"S_NOP", "S_WAITCNT", "S_WAITCNT_DEPCTR", "S_CLAUSE", "S_DELAY_ALU", "S_SENDMSG", "S_WAIT_IDLE", "S_ICACHE_INV",
        "S_WAITCNT_VSCNT", "S_WAITCNT_VMCNT", "S_WAITCNT_LGKMCNT", "S_WAITCNT_EXPCNT", "S_SET_INST_PREFETCH_DISTANCE",
        "S_SLEEP", "S_TTRACEDATA", "S_DCACHE_INV", "S_SENDMSGHALT", "S_CODE_END"}
pcode.OP_RESOLVER[0] = lambda name: _resolve(name)
EXECUTORS = ("auto", "native", "numpy")
OBSERVERS: list = []   # callables (phase "before"/"after", launch description, memory) around every dispatch
RENAMED = {"S_FF1_I32_B32": "S_CTZ_I32_B32", "S_FF1_I32_B64": "S_CTZ_I32_B64"}   # opcodes the pseudocode calls by old names
MAX_INSTRUCTIONS = 10_000_000     # per dispatch: a kernel that never ends is a fault (minutes), not an endless run
LANE_IDS = np.arange(LANES, dtype=U64)
_DECODED: dict = {}   # 16 bytes at a PC -> decoded instruction (content-addressed: shared by kernels and runs)

class Stats:
  """Wave instructions executed, waves, dispatches and CPU seconds spent in the executor, over the process."""
  def __init__(self): self.instructions, self.waves, self.dispatches, self.seconds = 0, 0, 0, 0.0
STATS = Stats()

# ---- decoding

def disasm(ins) -> str:
  """An instruction as `name operand, ...` (tinygrad's field values, literal last)."""
  from tinygrad.renderer.amd.dsl import FixedBitField
  if hasattr(ins, "opx"): name = f"{ins.opx.name.lower()} :: {ins.opy.name.lower()}"
  else: name = ins.op.name.lower()
  parts = []
  skip = {"data", "data0", "data1"} if "_LOAD" in name.upper() else {"vdst"} if "_STORE" in name.upper() else set()
  used = set(ins.operands) if hasattr(ins, "op") and ins.operands else None   # the ISA's operand list, if known
  lit = getattr(ins, "literal", None)
  for n, f in ins._fields:
    if n in ("op", "opx", "opy", "encoding", "literal") or n in skip or isinstance(f, FixedBitField): continue
    v = getattr(ins, n)
    if hasattr(v, "fmt"):
      if used is not None and n.startswith(("src", "vsrc", "ssrc")) and n not in used: continue  # an unused source
      parts.append(f"{lit:#x}" if v.offset == LIT and lit is not None else v.fmt())
    elif v: parts.append(f"{n}={v}")
  return f"{name} {', '.join(parts)}".rstrip()

@functools.lru_cache(maxsize=None)
def pcode_table(arch: str):
  import importlib
  return importlib.import_module(f"tinygrad.runtime.autogen.amd.{arch}.str_pcode").PCODE

@functools.lru_cache(maxsize=None)
def translated(arch: str, op):
  """The translated pseudocode of `op` (cached for the process), or the Unsupported explaining why not."""
  pc = pcode_table(arch).get(op)
  if pc is None: return Unsupported("no pseudocode for this opcode")
  try: return translate(pc)
  except Unsupported as e: return e

@functools.lru_cache(maxsize=None)
def _resolve(name: str):
  """An opcode called by name from another's pseudocode (`v_max_i32(a, b)`): (Translated, D0's number format)."""
  from tinygrad.runtime.autogen.amd.rdna3 import enum
  up = name.upper()
  for en in ("VOP3Op", "VOP2Op", "VOP1Op", "SOP2Op", "SOP1Op"):
    e = getattr(enum, en)
    for cand in (up, up + "_E64", up + "_E32"):
      if cand in e.__members__:
        t = translated("rdna3", e[cand])
        if isinstance(t, Unsupported): return None
        return t, operand_formats(e[cand]).get("d", "B32")
  return None

@functools.lru_cache(maxsize=None)
def resolve_pcode(name: str):
  """An opcode called by name from another's pseudocode, for the C translator: (pseudocode, D0's number format)."""
  from tinygrad.runtime.autogen.amd.rdna3 import enum
  up = RENAMED.get(name.upper(), name.upper())
  for en in ("VOP3Op", "VOP2Op", "VOP1Op", "SOP2Op", "SOP1Op"):
    e = getattr(enum, en)
    for cand in (up, up + "_E64", up + "_E32"):
      if cand in e.__members__ and e[cand] in pcode_table("rdna3"): return pcode_table("rdna3")[e[cand]], operand_formats(e[cand]).get("d", "B32")
  return None

def decode(data: bytes):
  from tinygrad.renderer.amd import decode_inst
  return decode_inst(data, "rdna3")

# ---- waves

class Wave:
  __slots__ = ("s", "v", "scc", "pc", "done", "at_barrier", "id", "jumped", "scratch")
  def __init__(self, pc: int, wid: int):
    self.s = np.zeros(128, U64)
    self.v = np.zeros((256, LANES), U64)
    self.scc, self.pc, self.done, self.at_barrier, self.id, self.jumped = 0, pc, False, False, wid, False
    self.scratch = None   # [lane, byte] private memory, made on first use

class Launch:
  """One dispatch: the kernel, the machine and the per-workgroup state instructions touch."""
  def __init__(self, kernel: "AmdKernel", mem, entry: int, ieee: bool = True, float_mode: int = 0xF0, lds_size: int = 0,
               scratch_size: int = 0):
    self.k, self.mem, self.entry, self.ieee, self.lds_size = kernel, mem, entry, np.bool_(ieee), lds_size
    self.scratch_size = scratch_size   # private memory bytes per lane
    den = (float_mode >> 4) & 3   # FP32 denormals: 0 flush in and out, 1 keep inputs, 2 keep outputs, 3 keep both
    self.flush_in, self.flush_out = den in (0, 2), den in (0, 1)
    self.lds = np.zeros(lds_size, np.uint8)
    self.cur_f32 = False

# operand access

def is_sgpr(o: int) -> bool: return o < 124 or o in (M0, EXEC, EXEC + 1)

def constant_operand(o: int, bits: int, ins) -> int:
  """The raw bits of a scalar operand that is not a register: NULL, inline constants (f16 encodings for 16-bit
  operands, f64 for 64-bit ones), the literal. DeviceFault for one that is neither."""
  if o == NULL: return 0
  if 128 <= o <= 192: return o - 128
  if 193 <= o <= 208: return (-(o - 192)) & ((1 << bits) - 1 if bits <= 64 else (1 << 64) - 1)
  if o in FLOAT_CONST:
    f = FLOAT_CONST[o]
    if bits == 64: return int(np.float64(f).view(U64))
    if bits == 16: return int(np.float16(f).view(np.uint16))   # 16-bit operands take the constant as an f16
    return int(np.float32(f).view(np.uint32))
  if o == LIT:
    lit = getattr(ins, "literal", None)
    if lit is None: raise DeviceFault("literal operand without a literal")
    return lit << 32 if bits == 64 and "F64" in _name(ins) else lit
  raise DeviceFault(f"unsupported source operand {o}")

def _sreg(w: Wave, o: int, bits: int, ins, launch) -> int:
  """A scalar operand's raw bits (inline constants and specials resolved)."""
  if is_sgpr(o):
    v = int(w.s[o])
    if bits > 32: v |= int(w.s[o + 1]) << 32
    return v
  if o == SCC_SRC: return w.scc
  if o == VCCZ: return int((int(w.s[VCC]) | (int(w.s[VCC + 1]) << 32)) == 0)
  if o == EXECZ: return int(int(w.s[EXEC]) == 0)
  return constant_operand(o, bits, ins)

def _vsrc(w: Wave, reg, bits: int, ins, launch) -> np.ndarray:
  o = reg.offset
  if o >= 256:
    r = o - 256
    if bits > 32: return w.v[r] | (w.v[r + 1] << U64(32))
    return w.v[r].copy()
  return np.full(LANES, _sreg(w, o, bits, ins, launch), U64)

def _name(ins) -> str: return ins.name

class Snap:
  """An instruction's fields read once (tinygrad's field descriptors are too slow to read per execution)."""
  def __init__(self, ins):
    for n, _ in ins._fields: setattr(self, n, getattr(ins, n))
    self.fields = {n for n, _ in ins._fields}
    self.cls = type(ins).__name__
    self.bits = ins.canonical_op_bits if hasattr(ins, "op") else {}
    self.literal = getattr(ins, "literal", None)
    self.ftype = operand_formats(ins.op) if hasattr(ins, "op") else {}
    self.name = ins.op.name if hasattr(ins, "op") else "VOPD"
    self.pc = None   # the translated pseudocode, looked up on first execution
    self.ins = ins

@functools.lru_cache(maxsize=None)
def operand_formats(op) -> dict:
  """canonical operand (s0 s1 s2 d) -> its number format ('F32', 'I32', 'B32', ...) from the ISA's operand table."""
  from tinygrad.renderer.amd.dsl import OPERANDS, _canonical_name
  return {cn: fmt.name.replace("FMT_NUM_", "") for n, (fmt, *_) in OPERANDS.get(op, {}).items() if (cn := _canonical_name(n))}

def _mods(x: np.ndarray, i: int, ins, bits: int, is_float: bool) -> np.ndarray:
  """VOP3 abs/neg input modifiers (float operands: the sign bit)."""
  neg, ab = getattr(ins, "neg", 0) or 0, getattr(ins, "abs", 0) or 0
  if not is_float or not ((neg | ab) >> i) & 1: return x
  sign = U64(1 << (bits - 1)) if bits in (32, 64) else U64(1 << 15)
  if (ab >> i) & 1: x = x & ~sign
  if (neg >> i) & 1: x = x ^ sign
  return x

def _flush(x: np.ndarray) -> np.ndarray:
  """Flush f32 denormals (raw bits) to signed zero: the FLOAT_MODE that does not keep them."""
  den = ((x & U64(0x7F800000)) == 0) & ((x & U64(0x7FFFFF)) != 0)
  return np.where(den, x & U64(0x80000000), x) if den.any() else x

def _mask_bits(out: np.ndarray, old: int, exec_mask: int) -> int:
  """Per-lane copies of a wave mask (each lane set its own bit) -> one mask. Inactive lanes' bits are 0, as the
  hardware writes compare results and carry-outs (tinygrad's emulator, verified on hardware; LLVM relies on it: it
  drops an `s_and_b32 vcc, exec, vcc` after a v_cmp)."""
  if len(out) == LANES: bits = int(np.packbits(((out >> LANE_IDS) & U64(1)).astype(bool), bitorder="little").view("<u4")[0])
  else: bits = int(out[0])
  return bits & exec_mask

# ---- instruction handlers: h(w, ins, launch) -> None (pc advanced by the caller unless the handler set it)

def _run_pcode(w, ins, launch, t, srcs: dict, vector: bool, dst_kind: str, dst_reg, dst_bits: int, sdst=None):
  """Run translated pseudocode `t` with sources `srcs` (raw bits) and write back what it assigned."""
  exec_mask = int(w.s[EXEC])
  n = LANES if vector else 1
  if "VCC_IN" in srcs: srcs["VCC"] = srcs.pop("VCC_IN")
  args = {}
  for k in t.args:
    v = srcs.get(k)
    if v is None:
      if k == "laneId": v = LANE_IDS if vector else ZERO1
      elif k == "IEEE": v = launch.ieee
      else: v = np.full(n, _special(w, k), U64)
    args[k] = v
  out = t.fn(**args)   # (floating-point warnings are off during a dispatch: NaN and infinity are results)
  for reg, val in out.items():
    if type(val) is not np.ndarray or val.shape != (n,) or val.dtype != U64: val = np.broadcast_to(np.asarray(val, U64), (n,))
    if reg == "D0":
      if reg in t.lane_bits: _write_mask(w, dst_reg, _mask_bits(val, _read_mask(w, dst_reg), exec_mask))
      elif dst_kind == "v": _write_v(w, dst_reg, val, dst_bits, exec_mask, launch)
      else: _write_s(w, dst_reg, int(val[0]), dst_bits)
    elif reg == "D1": _write_mask(w, sdst, _mask_bits(val, _read_mask(w, sdst), exec_mask) if vector else int(val[0]))
    elif reg == "SCC": w.scc = int(val[0]) & 1
    elif reg == "VCC":
      target = VCC if sdst is None else sdst
      _write_mask(w, target, _mask_bits(val, _read_mask(w, target), exec_mask) if vector else int(val[0]))
    elif reg == "EXEC":
      new = _mask_bits(val, exec_mask, exec_mask) if vector and "EXEC" in t.lane_bits else int(val[0])
      w.s[EXEC] = U64(new & U32_MAX)
    elif reg == "PC": w.pc, w.jumped = int(val[0]), True

ZERO1 = np.zeros(1, U64)
def _special(w, k: str) -> int:
  if k == "SCC": return w.scc
  if k == "VCC": return int(w.s[VCC]) | (int(w.s[VCC + 1]) << 32)
  if k == "EXEC": return int(w.s[EXEC])
  if k == "PC": return w.pc
  if k == "M0": return int(w.s[M0])
  return 0   # a destination the instruction only writes

def _read_mask(w, o) -> int: return 0 if o == NULL else int(w.s[o])
def _write_mask(w, o, v: int):
  if o != NULL: w.s[o] = U64(v & U32_MAX)

def _write_s(w, o: int, v: int, bits: int):
  if o == NULL: return
  w.s[o] = U64(v & U32_MAX)
  if bits > 32: w.s[o + 1] = U64((v >> 32) & U32_MAX)

_ACTIVE: dict = {}
def _active(exec_mask: int) -> np.ndarray:
  """The lanes EXEC enables, as a bool vector (cached: a kernel uses a handful of masks)."""
  a = _ACTIVE.get(exec_mask)
  if a is None:
    a = _ACTIVE[exec_mask] = ((np.uint64(exec_mask) >> LANE_IDS) & U64(1)).astype(bool)
    a.flags.writeable = False
  return a

def _write_v(w, reg, val: np.ndarray, bits: int, exec_mask: int, launch):
  r = reg.offset - 256
  if launch.flush_out and bits == 32 and launch.cur_f32: val = _flush(val)
  if exec_mask == U32_MAX and bits == 32:
    w.v[r] = val & U64(U32_MAX)
    return
  act = _active(exec_mask)
  if bits > 32:
    np.copyto(w.v[r], val & U64(U32_MAX), where=act); np.copyto(w.v[r + 1], val >> U64(32), where=act)
  elif bits == 16: np.copyto(w.v[r], (w.v[r] & U64(0xFFFF0000)) | (val & U64(0xFFFF)), where=act)
  else: np.copyto(w.v[r], val & U64(U32_MAX), where=act)

def _pcode_for(ins):
  ins.pc = _pcode_of(None, ins.op)
  return ins.pc

def _pcode_of(launch, op):
  t = translated("rdna3", op)
  if isinstance(t, Unsupported): raise DeviceFault(f"unsupported instruction ({t})")
  return t

def _scalar(w, ins, launch):
  t = ins.pc or _pcode_for(ins)
  bits = ins.bits
  srcs = {}
  for f, key in (("ssrc0", "s0"), ("ssrc1", "s1")):
    if hasattr(ins, f) and f in ins.fields: srcs["S" + key[1]] = np.array([_sreg(w, getattr(ins, f).offset, bits[key], ins, launch)], U64)
  if "simm16" in ins.fields: srcs["SIMM16"] = np.array([ins.simm16], U64)
  if ins.literal is not None: srcs["SIMM32"] = np.array([ins.literal], U64)
  sd = ins.sdst.offset if "sdst" in ins.fields else NULL
  if "D0" in t.reads and sd != NULL: srcs["D0"] = np.array([_sreg(w, sd, bits["d"], ins, launch)], U64)
  if "S0" in t.reads and "S0" not in srcs and sd != NULL:   # SOPK: the register operand is the sdst field
    srcs["S0"] = np.array([_sreg(w, sd, bits["d"], ins, launch)], U64)
  _run_pcode(w, ins, launch, t, srcs, False, "s", sd, bits["d"])

def _vector(w, ins, launch):
  name = ins.name
  t = ins.pc or _pcode_for(ins)
  bits = ins.bits
  fields = ins.fields
  ft = ins.ftype
  launch.cur_f32 = ft.get("d") == "F32"
  srcs = {}
  for i, (f, key) in enumerate((("src0", "s0"), ("vsrc1" if "vsrc1" in fields else "src1", "s1"), ("src2", "s2"))):
    if f not in fields or f"S{i}" not in t.reads and not (i == 2 and ("CNDMASK" in name or "_CI_" in name)): continue
    # abs/neg act on the sign bit whatever the operand's format: LLVM negates floats through v_cndmask_b32's B32 operands
    x = _mods(_vsrc(w, getattr(ins, f), bits[key], ins, launch), i, ins, bits[key], True)
    if launch.flush_in and ft.get(key) == "F32": x = _flush(x)
    srcs[f"S{i}"] = x
  if "literal" in fields: srcs["SIMM32"] = np.full(LANES, ins.literal, U64)
  omod, clmp = getattr(ins, "omod", 0) or 0, getattr(ins, "clmp", 0) or 0
  if omod or clmp: raise DeviceFault("output modifiers (omod/clamp) are not supported")
  if getattr(ins, "opsel", 0): raise DeviceFault("opsel (16-bit halves) is not supported")
  cls = ins.cls
  sdst = None
  if cls.startswith("VOP3SD"):
    sdst = ins.sdst.offset
    if "_CI_" in name or "SUBB" in name: srcs["VCC_IN"] = np.full(LANES, _sreg(w, ins.src2.offset, 32, ins, launch), U64)
  elif cls.startswith("VOP3") and "CNDMASK" in name:
    srcs["VCC_IN"] = srcs.pop("S2") if "S2" in srcs else np.full(LANES, _sreg(w, ins.src2.offset, 32, ins, launch), U64)
    sdst = VCC
  if cls.startswith("VOPC"): dst_kind, dst = "s", VCC
  elif "D0" in t.lane_bits: dst_kind, dst = "s", ins.vdst.offset  # VOP3 compare: an SGPR destination
  else: dst_kind, dst = "v", ins.vdst
  if "D0" in t.reads and dst_kind == "v": srcs["D0"] = _vsrc(w, dst, bits["d"], ins, launch)
  _run_pcode(w, ins, launch, t, srcs, True, dst_kind, dst, bits["d"], sdst)

@functools.lru_cache(maxsize=None)
def dual_op(name: str):
  from tinygrad.runtime.autogen.amd.rdna3.enum import VOP1Op, VOP2Op
  base = name.replace("V_DUAL_", "V_")
  for enum in (VOP2Op, VOP1Op):
    if f"{base}_E32" in enum.__members__: return enum[f"{base}_E32"]
  raise DeviceFault(f"no VOP1/VOP2 counterpart for {name}")

def _vopd(w, ins, launch):
  exec_mask = int(w.s[EXEC])
  writes = []
  for op, s0, s1, d in ((ins.opx, ins.srcx0, ins.vsrcx1, ins.vdstx), (ins.opy, ins.srcy0, ins.vsrcy1, ins.vdsty)):
    vop = dual_op(op.name)
    t = _pcode_of(launch, vop)
    ft = operand_formats(vop)
    launch.cur_f32 = ft.get("d") == "F32"
    srcs = {"S0": _vsrc(w, s0, 32, ins, launch), "S1": _vsrc(w, s1, 32, ins, launch)}
    if launch.flush_in: srcs = {k: _flush(v) if ft.get(k.lower()) == "F32" else v for k, v in srcs.items()}
    if "D0" in t.reads: srcs["D0"] = _vsrc(w, d, 32, ins, launch)
    if getattr(ins, "literal", None) is not None: srcs["SIMM32"] = np.full(LANES, ins.literal, U64)
    env = {"laneId": LANE_IDS, "IEEE": launch.ieee, **srcs}
    args = {k: env[k] if k in env else np.full(LANES, _special(w, k), U64) for k in t.args}
    writes.append((d, t.fn(**args)["D0"], launch.cur_f32))
  for d, val, f32 in writes:   # both halves read their sources before either writes
    launch.cur_f32 = f32
    _write_v(w, d, np.broadcast_to(np.asarray(val, U64), (LANES,)), 32, exec_mask, launch)

def _sopp(w, ins, launch):
  name = ins.name
  if name in NOPS: return
  if name == "S_ENDPGM": w.done = True; return
  if name == "S_BARRIER": w.at_barrier = True; return
  if "BRANCH" in name:
    t = ins.pc or _pcode_for(ins)
    vcc = int(w.s[VCC])
    srcs = {"SIMM16": np.array([ins.simm16], U64), "VCCZ": np.array([int(vcc == 0)], U64),
            "EXECZ": np.array([int(int(w.s[EXEC]) == 0)], U64)}
    _run_pcode(w, ins, launch, t, srcs, False, "s", NULL, 32)
    return
  raise DeviceFault("unsupported instruction")

# memory

MEM_SIZE = {"U8": 1, "I8": 1, "U16": 2, "I16": 2, "B8": 1, "B16": 2, "B32": 4, "B64": 8, "B96": 12, "B128": 16,
            "B256": 32, "B512": 64}

def access_width(name: str) -> tuple:
  kind = name.rsplit("_", 1)[1]
  if kind not in MEM_SIZE: raise DeviceFault("unsupported memory access width")
  return MEM_SIZE[kind], kind.startswith("I")

def _gather(mem, addrs: np.ndarray, n: int) -> np.ndarray:
  """n bytes at each address (uint8 [lanes, n]); DeviceFault on any byte outside mapped memory."""
  if not len(addrs): return np.zeros((0, n), np.uint8)
  lo, hi = int(addrs.min()), int(addrs.max())
  r = mem.find(lo, 1)
  if hi + n <= r.end:
    idx = (addrs - U64(r.base)).astype(np.int64)[:, None] + np.arange(n)
    return r.u8[idx]
  return np.stack([mem.view(int(a), n) for a in addrs])

def _scatter(mem, addrs: np.ndarray, data: np.ndarray):
  n = data.shape[1]
  if not len(addrs): return
  lo, hi = int(addrs.min()), int(addrs.max())
  r = mem.find(lo, 1)
  if hi + n <= r.end:
    idx = (addrs - U64(r.base)).astype(np.int64)[:, None] + np.arange(n)
    r.u8[idx] = data
  else:
    for a, d in zip(addrs, data): mem.view(int(a), n)[:] = d
  mem.writes += 1

def _to_dwords(b: np.ndarray, n: int, signed: bool) -> np.ndarray:
  """[lanes, n bytes] -> [lanes, dwords] as uint64 (sub-dword loads zero- or sign-extended)."""
  if n >= 4: return b.view("<u4").astype(U64)
  v = b.view("<u1" if n == 1 else "<u2").astype(np.int64)
  if signed: v = np.where(v >= 1 << (8 * n - 1), v - (1 << 8 * n), v)
  return (v & U32_MAX).astype(U64)

def _smem(w, ins, launch):
  name = ins.name
  if not name.startswith("S_LOAD_"): raise DeviceFault("unsupported instruction")
  n, _ = access_width(name)
  base = int(w.s[ins.sbase.offset]) | (int(w.s[ins.sbase.offset + 1]) << 32)
  off = ins.offset
  if off & (1 << 20): off -= 1 << 21
  so = ins.soffset.offset
  addr = (base + off + (_sreg(w, so, 32, ins, launch) if so != NULL else 0)) & ~3
  data = launch.mem.view(addr, n).view("<u4")
  d = ins.sdata.offset
  w.s[d:d + n // 4] = data.astype(U64)

def _global(w, ins, launch):
  name = ins.name
  exec_mask = int(w.s[EXEC])
  act = _active(exec_mask)
  off = ins.offset
  if off & (1 << 12): off -= 1 << 13
  sa = ins.saddr.offset
  a = ins.addr.offset - 256
  if sa in (NULL, 125) or ins.cls == "FLAT":
    addrs = w.v[a] | (w.v[a + 1] << U64(32))
  else:
    addrs = (int(w.s[sa]) | (int(w.s[sa + 1]) << 32)) + w.v[a]
  addrs = (addrs.astype(U64) + U64(off & ((1 << 64) - 1))) if off >= 0 else addrs.astype(U64) - U64(-off)
  addrs = addrs[act]
  if "ATOMIC" in name or "ADDTID" in name or "LDS" in name.split("_", 2)[-1] or "D16" in name:
    raise DeviceFault("unsupported instruction")
  n, signed = access_width(name)
  if "_LOAD_" in name:
    vals = _to_dwords(_gather(launch.mem, addrs, n), n, signed)
    d = ins.vdst.offset - 256
    for k in range(vals.shape[1]): w.v[d + k][act] = vals[:, k]
  elif "_STORE_" in name:
    dsrc = ins.data.offset - 256
    nd = max(1, n // 4)
    words = np.stack([w.v[dsrc + k][act] for k in range(nd)], 1).astype("<u4")
    _scatter(launch.mem, addrs, words.view(np.uint8)[:, :n])
  else: raise DeviceFault("unsupported instruction")

def scratch_addresses(w, ins, launch, n: int) -> np.ndarray:
  """Each active lane's offset into its private memory: (SVE ? VGPR addr : 0) + (saddr ? SGPR : 0) + the signed
  offset; DeviceFault for the first lane whose n bytes fall outside the lane's private memory."""
  off = ins.offset
  if off & (1 << 12): off -= 1 << 13
  act = _active(int(w.s[EXEC]))
  a = np.zeros(LANES, np.int64) + off
  if ins.sve: a += w.v[ins.addr.offset - 256].astype(np.int64)
  sa = ins.saddr.offset
  if is_sgpr(sa) and sa != NULL: a += int(w.s[sa])
  a = a[act]
  size = launch.scratch_size
  bad = (a < 0) | (a + n > size)
  if bad.any():
    raise DeviceFault(f"scratch access of {n} bytes at {int(a[bad][0]) & ((1 << 64) - 1):#x} outside the lane's {size} bytes of private memory")
  return a

def _scratch(w, ins, launch):
  name = ins.name
  if "D16" in name or "LDS" in name.split("_", 2)[-1]: raise DeviceFault("unsupported instruction")
  n, signed = access_width(name)
  a = scratch_addresses(w, ins, launch, n)
  if w.scratch is None: w.scratch = np.zeros((LANES, max(launch.scratch_size, 1)), np.uint8)
  act = _active(int(w.s[EXEC]))
  lanes = np.nonzero(act)[0]
  idx = a[:, None] + np.arange(n)
  if "_LOAD_" in name:
    vals = _to_dwords(w.scratch[lanes[:, None], idx], n, signed)
    d = ins.vdst.offset - 256
    for k in range(vals.shape[1]): w.v[d + k][act] = vals[:, k]
  elif "_STORE_" in name:
    dsrc = ins.data.offset - 256
    words = np.stack([w.v[dsrc + k][act] for k in range(max(1, n // 4))], 1).astype("<u4")
    w.scratch[lanes[:, None], idx] = words.view(np.uint8)[:, :n]
  else: raise DeviceFault("unsupported instruction")

def _ds(w, ins, launch):
  name = ins.name
  lds = launch.lds
  exec_mask = int(w.s[EXEC])
  act = _active(exec_mask)
  base = w.v[ins.addr.offset - 256][act].astype(np.int64)
  two = "2ADDR" in name
  stride = (256 if "STRIDE64" in name else 4) * (2 if name.endswith("B64") and two else 1)
  if two: offs = [ins.offset0 * stride, ins.offset1 * stride]
  else: offs = [ins.offset0 | (ins.offset1 << 8)]
  if name in ("DS_NOP",): return
  n, signed = access_width(name.replace("_2ADDR_STRIDE64", "").replace("_2ADDR", ""))
  def span(o):
    a = base + o
    if len(a) and (int(a.min()) < 0 or int(a.max()) + n > len(lds)):
      bad = int(a[(a < 0) | (a + n > len(lds))][0])
      raise DeviceFault(f"LDS access of {n} bytes at {bad:#x} outside the workgroup's {len(lds)} bytes")
    return a[:, None] + np.arange(n)
  if name.startswith("DS_LOAD_") or name.startswith("DS_READ"):
    d = ins.vdst.offset - 256
    k0 = 0
    for o in offs:
      vals = _to_dwords(lds[span(o)], n, signed)
      for k in range(vals.shape[1]): w.v[d + k0 + k][act] = vals[:, k]
      k0 += vals.shape[1]
  elif name.startswith("DS_STORE_"):
    nd = max(1, n // 4)
    for o, src in zip(offs, (ins.data0, ins.data1)):
      s = src.offset - 256
      words = np.stack([w.v[s + k][act] for k in range(nd)], 1).astype("<u4")
      lds[span(o)] = words.view(np.uint8)[:, :n]
  else: raise DeviceFault("unsupported instruction")

def _wmma(w, ins, launch):
  """V_WMMA_{F32,F16,BF16}_16X16X16_{F16,BF16}: D = A @ B^T + C for 16x16 tiles held across the wave (the pseudocode
  is prose). Lane l < 16 holds row l of A (and column l of B) as 16 halves in 8 VGPRs, k = 2 * vgpr + half; the
  accumulator's element (row, col) sits in VGPR row // 2 of lane 16 * (row % 2) + col (F16/BF16 results in the low
  half). Products and sums in float32."""
  name = ins.name
  if ins.neg or ins.neg_hi or ins.opsel or ins.clmp: raise DeviceFault("WMMA with neg/opsel/clamp is not supported")
  bf16_in = name.endswith("_BF16")
  out = name.split("WMMA_", 1)[1].split("_", 1)[0]
  if out not in ("F32", "F16", "BF16"): raise DeviceFault("integer WMMA is not supported")
  def halves(reg):   # [16 lanes, 16 k] as float32
    r = reg.offset - 256
    raw = w.v[r:r + 8, :16].astype(np.uint32)            # [vgpr, lane]
    h = np.stack([raw & 0xFFFF, raw >> 16], 1).reshape(16, 16).T   # [lane, k = 2*vgpr + half]
    if bf16_in: return (h.astype(np.uint32) << 16).view(np.float32)
    return h.astype(np.uint16).view(np.float16).astype(np.float32)
  a, b = halves(ins.src0), halves(ins.src1)
  c_reg = ins.src2.offset - 256
  acc = w.v[c_reg:c_reg + 8].astype(np.uint32)            # [vgpr, lane]
  if out == "F32": c = acc.view(np.float32)
  elif out == "F16": c = (acc & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float32)
  else: c = ((acc & 0xFFFF) << 16).view(np.float32)
  rows = 2 * np.arange(8)[:, None] + np.arange(LANES)[None, :] // 16     # [vgpr, lane] -> row
  cols = np.broadcast_to(np.arange(LANES)[None, :] % 16, rows.shape)
  d = (a @ b.T)[rows, cols].astype(np.float32) + c
  if out == "F32": bits = d.astype(np.float32).view(np.uint32)
  elif out == "F16": bits = d.astype(np.float16).view(np.uint16).astype(np.uint32)
  else: bits = d.astype(np.float32).view(np.uint32) >> 16   # truncated to bf16
  act = _active(int(w.s[EXEC]))
  d_reg = ins.vdst.offset - 256
  for i in range(8): np.copyto(w.v[d_reg + i], bits[i].astype(U64), where=act)

def _vop3p(w, ins, launch):
  if "WMMA" in ins.name: return _wmma(w, ins, launch)
  # packed math: the pseudocode sees each source's halves as selected by opsel/opsel_hi; only the default selection
  # (low halves low, high halves high) without negation is implemented
  if ins.neg or ins.neg_hi or ins.opsel or ins.clmp or ins.opsel_hi != 3 or ins.opsel_hi2 != 1:
    raise DeviceFault("VOP3P with neg/opsel/clamp is not supported")
  return _vector(w, ins, launch)

HANDLERS = {"SOP1": _scalar, "SOP2": _scalar, "SOPC": _scalar, "SOPK": _scalar, "SOPP": _sopp, "SMEM": _smem,
            "VOP1": _vector, "VOP2": _vector, "VOP3": _vector, "VOP3SD": _vector, "VOPC": _vector,
            "VOP3_SDST": _vector, "VOP1_SDST": _vector, "VOPD": _vopd, "GLOBAL": _global, "FLAT": _global, "DS": _ds, "VOP3P": _vop3p,
            "SCRATCH": _scratch}

def _handler(ins):
  cls = type(ins).__name__
  base = cls.replace("_LIT", "")
  h = HANDLERS.get(base)
  if h is None: raise DeviceFault(f"unsupported instruction format {cls}")
  return h

# ---- the kernel

class AmdKernel:
  """What the emulator runs for a kernel with a gfx11 code object: `machine(engine, dispatch operands)` executes the
  code at COMPUTE_PGM_LO for the dispatch's grid. (`run`, the C-kernel interface, is not used.)"""
  extra_us = 0.0
  def __init__(self, name: str, arch: str = "gfx1100", executor: str = "auto"):
    if executor not in EXECUTORS: raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")
    self.name, self.arch, self.executor = name, arch, executor
    self.decoded: dict = {}    # pc -> (instruction, handler, size, text)
    self.programs: dict = {}   # FP32 input flushing -> native.NativeProgram
    self.instructions = 0

  def native(self) -> bool:
    """Whether dispatches run on the compiled loop (native.py): `executor` "native", or "auto" (the default, also
    from $HCQDSL_EXECUTOR) when a C compiler is there."""
    ex = self.executor if self.executor != "auto" else os.environ.get("HCQDSL_EXECUTOR", "auto")
    if ex == "numpy": return False
    from . import native
    why = native.available()
    if why is not None and ex == "native": raise DeviceFault(f"kernel `{self.name}`: {why}")
    return why is None

  def native_program(self, launch):
    from .native import NativeProgram
    got = self.programs.get(launch.flush_in)
    if got is None: got = self.programs[launch.flush_in] = NativeProgram(self, launch.flush_in)
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
      try: h = _handler(ins)
      except DeviceFault as e: h = lambda w, i, l, msg=str(e): (_ for _ in ()).throw(DeviceFault(msg))
      got = self.decoded[pc] = _DECODED[data] = (Snap(ins), h, ins.size(), text)
    return got

  def machine(self, engine, a):
    from ...amd.targets import get_target
    regs, mem = engine.regs, engine.mem
    arch = engine.ring.arch
    t = get_target(arch)
    if t.gen != 11: raise DeviceFault(f"kernel `{self.name}`: the machine-code executor runs gfx11 code, not {arch}")
    gc = t.gc
    from tinygrad.runtime.autogen.am import pm4_nv
    sh = lambda reg: reg.addr[0] - pm4_nv.PACKET3_SET_SH_REG_START
    dx, dy, dz, initiator = a
    if initiator & (1 << 5): raise DeviceFault(f"kernel `{self.name}`: DISPATCH_DIRECT with use_thread_dimensions is not supported")
    if not initiator & (1 << 15): raise DeviceFault(f"kernel `{self.name}`: wave64 dispatch of a wave32 executor (CS_W32_EN clear)")
    entry = ((regs.get(engine.R_PGM_LO + 1, 0) << 32) | regs.get(engine.R_PGM_LO, 0)) << 8
    rsrc1, rsrc2 = regs.get(sh(gc.regCOMPUTE_PGM_RSRC1), 0), regs.get(sh(gc.regCOMPUTE_PGM_RSRC2), 0)
    block = [regs.get(sh(getattr(gc, f"regCOMPUTE_NUM_THREAD_{c}")), 1) & 0xFFFF for c in "XYZ"]
    nthreads = block[0] * block[1] * block[2]
    if nthreads == 0 or nthreads > 1024: raise DeviceFault(f"kernel `{self.name}`: workgroup of {block} threads (1..1024)")
    f1, f2 = gc.regCOMPUTE_PGM_RSRC1.decode(rsrc1), gc.regCOMPUTE_PGM_RSRC2.decode(rsrc2)
    nuser = f2["user_sgpr"]
    user = [regs.get(engine.R_UD + i, 0) for i in range(nuser)]
    # private memory per lane: COMPUTE_TMPRING_SIZE.WAVESIZE (256-byte units per wave, sized for 64 lanes as tinygrad
    # programs it) / 64 lanes
    tmpring = gc.regCOMPUTE_TMPRING_SIZE.decode(regs.get(sh(gc.regCOMPUTE_TMPRING_SIZE), 0))
    launch = Launch(self, mem, entry, bool(f1["ieee_mode"]), f1["float_mode"], f2["lds_size"] * 512,
                    tmpring["wavesize"] * 256 // 64 if f2["scratch_en"] else 0)
    nwaves = -(-nthreads // LANES)
    tid = np.arange(nwaves * LANES)
    tx, ty, tz = tid % block[0], tid // block[0] % block[1], tid // (block[0] * block[1])
    packed = (tx | ty << 10 | tz << 20).astype(U64)
    STATS.dispatches += 1
    if OBSERVERS:   # the launch as the packets describe it, for tools that replay dispatches elsewhere
      desc = {"kernel": self.name, "entry": entry, "rsrc1": rsrc1, "rsrc2": rsrc2, "grid": (dx, dy, dz), "block": tuple(block),
              "user": user, "lds_size": launch.lds_size, "scratch_size": launch.scratch_size, "float_mode": f1["float_mode"]}
      for o in OBSERVERS: o("before", desc, mem)
    t0 = time.process_time()
    count = 0
    if self.native():
      from .native import run_dispatch
      enables = sum(1 << i for i, en in enumerate(("tgid_x_en", "tgid_y_en", "tgid_z_en", "tg_size_en", "scratch_en")) if f2[en])
      with np.errstate(all="ignore"): count = run_dispatch(self, launch, (dx, dy, dz), tuple(block), user, enables, nwaves)
      STATS.waves += nwaves * dx * dy * dz
      dz = 0   # (the interpreter's loop below runs no workgroup)
    for gz in range(dz):
      for gy in range(dy):
        for gx in range(dx):
          launch.lds = np.zeros(launch.lds_size, np.uint8)
          waves = []
          for wi in range(nwaves):
            w = Wave(entry, wi)
            w.s[:nuser] = np.array(user, U64)
            k = nuser
            for en, g in (("tgid_x_en", gx), ("tgid_y_en", gy), ("tgid_z_en", gz)):
              if f2[en]: w.s[k] = U64(g); k += 1
            if f2["tg_size_en"]: w.s[k] = U64(nwaves); k += 1
            if f2["scratch_en"]: w.s[k] = U64(0); k += 1
            w.v[0] = packed[wi * LANES:(wi + 1) * LANES]
            live = min(LANES, nthreads - wi * LANES)
            w.s[EXEC] = U64((1 << live) - 1)
            waves.append(w)
          count += self.run_workgroup(launch, waves, (gx, gy, gz), count)
          STATS.waves += nwaves
    self.instructions += count
    STATS.instructions += count
    STATS.seconds += time.process_time() - t0
    for o in OBSERVERS: o("after", desc, mem)
    return count

  def run_workgroup(self, launch, waves: list, wg: tuple, before: int) -> int:
    if self.native():
      from .native import run_workgroup
      return run_workgroup(self, launch, waves, wg, before)
    with np.errstate(all="ignore"): return self._run_workgroup(launch, waves, wg, before)  # NaN, inf: results

  def _run_workgroup(self, launch, waves: list, wg: tuple, before: int) -> int:
    mem, fetch = launch.mem, self.fetch
    count = 0
    while True:
      live = [w for w in waves if not w.done]
      if not live: return count
      for w in live:
        w.at_barrier = False
        while not w.done and not w.at_barrier:
          pc = w.pc
          try:
            ins, h, size, text = fetch(mem, pc)
            h(w, ins, launch)
          except DeviceFault as e:
            raise DeviceFault(self.where(w, wg, pc, launch) + f": {e}") from None
          except Exception as e:  # a bug of ours is a fault report too, never a traceback out of the device
            raise DeviceFault(self.where(w, wg, pc, launch) + f": internal executor error {e!r}") from None
          if w.jumped: w.jumped = False   # a branch (even to itself) set the PC
          else: w.pc = pc + size
          count += 1
          if before + count > self.max_instructions():
            raise DeviceFault(self.where(w, wg, pc, launch) + f": more than {self.max_instructions()} instructions in one dispatch")

  def where(self, w, wg, pc, launch) -> str: return self.where_at(w.id, wg, pc, launch)

  def where_at(self, wave: int, wg, pc, launch) -> str:
    got = self.decoded.get(pc)
    text = got[3] if got else "?"
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
def coverage(executor: str = "native") -> tuple:
  """The RDNA3 opcode names an executor implements ("native": the compiled path, "numpy": the interpreter): ALU
  opcodes whose pseudocode its translator takes (VOP3P: numpy with the default half selection only), the float
  WMMAs, VOPD pairs, the SOPP flow instructions, and the SMEM/GLOBAL/FLAT/SCRATCH/DS loads and stores of 1 to 64
  bytes."""
  from tinygrad.runtime.autogen.amd.rdna3 import enum
  if executor == "native":
    from .native import translates
  else: translates = lambda op: not isinstance(translated("rdna3", op), Unsupported)   # noqa: E731
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
