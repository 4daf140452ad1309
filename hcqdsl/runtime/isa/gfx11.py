"""The gfx11 (RDNA3) instruction set as the executor reads it: decoding (tinygrad's instruction classes), disassembly,
the operand tables (number formats, widths), inline constants, the shipped pseudocode and the opcodes it calls by
name. Shared by the engine (native.py) and the model around it (rdna3.py)."""
from __future__ import annotations
import functools
from typing import TYPE_CHECKING, Any
import numpy as np
from ...target.engine import DeviceFault
from .pcode import corrected

__all__ = ["LANES", "VCC", "NULL", "M0", "EXEC", "SCC_SRC", "VCCZ", "EXECZ", "LIT", "FLOAT_CONST", "NOPS", "RENAMED",
           "disasm", "pcode_table", "resolve_pcode", "decode", "is_sgpr", "constant_operand", "Snap", "operand_formats",
           "dual_op", "MEM_SIZE", "access_width"]

LANES = 32

VCC, NULL, M0, EXEC, SCC_SRC, VCCZ, EXECZ, LIT = 106, 124, 125, 126, 253, 251, 252, 255
FLOAT_CONST = {240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0, 248: 0.15915494309189535}
NOPS = {"S_NOP", "S_WAITCNT", "S_WAITCNT_DEPCTR", "S_CLAUSE", "S_DELAY_ALU", "S_SENDMSG", "S_WAIT_IDLE", "S_ICACHE_INV",
        "S_WAITCNT_VSCNT", "S_WAITCNT_VMCNT", "S_WAITCNT_LGKMCNT", "S_WAITCNT_EXPCNT", "S_SET_INST_PREFETCH_DISTANCE",
        "S_SLEEP", "S_TTRACEDATA", "S_DCACHE_INV", "S_SENDMSGHALT", "S_CODE_END"}
RENAMED = {"S_FF1_I32_B32": "S_CTZ_I32_B32", "S_FF1_I32_B64": "S_CTZ_I32_B64"}   # opcodes the pseudocode calls by old names

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
def resolve_pcode(name: str):
  """An opcode called by name from another's pseudocode, for the C translator: (pseudocode, D0's number format)."""
  from tinygrad.runtime.autogen.amd.rdna3 import enum
  up = RENAMED.get(name.upper(), name.upper())
  for en in ("VOP3Op", "VOP2Op", "VOP1Op", "SOP2Op", "SOP1Op"):
    e = getattr(enum, en)
    for cand in (up, up + "_E64", up + "_E32"):
      if cand in e.__members__ and e[cand] in pcode_table("rdna3"):
        return corrected(cand, pcode_table("rdna3")[e[cand]]), operand_formats(e[cand]).get("d", "B32")
  return None

def decode(data: bytes):
  from tinygrad.renderer.amd import decode_inst
  return decode_inst(data, "rdna3")

# ---- operands

def is_sgpr(o: int) -> bool: return o < 124 or o in (M0, EXEC, EXEC + 1)

def constant_operand(o: int, bits: int, ins) -> int:
  """The raw bits of a scalar operand that is not a register: NULL, inline constants (f16 encodings for 16-bit
  operands, f64 for 64-bit ones), the literal. DeviceFault for one that is neither."""
  if o == NULL: return 0
  if 128 <= o <= 192: return o - 128
  if 193 <= o <= 208: return (-(o - 192)) & ((1 << bits) - 1 if bits <= 64 else (1 << 64) - 1)
  if o in FLOAT_CONST:
    f = FLOAT_CONST[o]
    if bits == 64: return int(np.float64(f).view(np.uint64))
    if bits == 16: return int(np.float16(f).view(np.uint16))   # 16-bit operands take the constant as an f16
    return int(np.float32(f).view(np.uint32))
  if o == LIT:
    lit = getattr(ins, "literal", None)
    if lit is None: raise DeviceFault("literal operand without a literal")
    return lit << 32 if bits == 64 and "F64" in _name(ins) else lit
  raise DeviceFault(f"unsupported source operand {o}")

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
    self.raw = ins.to_bytes()   # its encoding (the native rows are cached by it)
    self.ins = ins
  if TYPE_CHECKING:   # the instruction's own fields (`simm16`, `vdst`, `src0`, ...), set by name above
    def __getattr__(self, name: str) -> Any: ...

@functools.lru_cache(maxsize=None)
def operand_formats(op) -> dict:
  """canonical operand (s0 s1 s2 d) -> its number format ('F32', 'I32', 'B32', ...) from the ISA's operand table."""
  from tinygrad.renderer.amd.dsl import OPERANDS, _canonical_name
  return {cn: fmt.name.replace("FMT_NUM_", "") for n, (fmt, *_) in OPERANDS.get(op, {}).items() if (cn := _canonical_name(n))}

@functools.lru_cache(maxsize=None)
def dual_op(name: str):
  from tinygrad.runtime.autogen.amd.rdna3.enum import VOP1Op, VOP2Op
  base = name.replace("V_DUAL_", "V_")
  for enum in (VOP2Op, VOP1Op):
    if f"{base}_E32" in enum.__members__: return enum[f"{base}_E32"]
  raise DeviceFault(f"no VOP1/VOP2 counterpart for {name}")

MEM_SIZE = {"U8": 1, "I8": 1, "U16": 2, "I16": 2, "B8": 1, "B16": 2, "B32": 4, "B64": 8, "B96": 12, "B128": 16,
            "B256": 32, "B512": 64}

def access_width(name: str) -> tuple:
  kind = name.rsplit("_", 1)[1]
  if kind not in MEM_SIZE: raise DeviceFault("unsupported memory access width")
  return MEM_SIZE[kind], kind.startswith("I")
