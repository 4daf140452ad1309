"""The RDNA3 executor's engine: a kernel's instructions decoded once into a table of int64 rows, run by a C loop
(rdna3_native.c) that calls each opcode's pseudocode translated to C (pcode_c.py) through a function pointer.

A row holds everything decided at decode time: the operands resolved (VGPR, SGPR, constant; VOP3 abs/neg, opsel
halves, packed-math selection; FLOAT_MODE's denormal flushing per number format), the destination and how it is
written (VGPR, SGPR, a lane mask), the memory access. What is compiled, with the
host compiler (`$CC`, clang, cc, gcc; the C kernels' choice) and cached under the C kernels' cache directory by hash:
the loop itself, and the opcodes in chunks of CHUNK (one library per chunk of an encoding's opcodes, translated and
compiled the first time an instruction of the chunk runs anywhere on the machine). Nothing is compiled per kernel.

The decoded rows are per kernel and program counter; a PC the table has no row for (a branch into code not seen yet)
stops the C loop, which this module decodes and resumes. Faults come back as a code and the PC; the message is built
here exactly as the interpreter builds it (the same DeviceFault texts, from the same Memory.find)."""
from __future__ import annotations
import ctypes, functools, os, pathlib
from typing import Optional
import numpy as np
from ...ir import U32_MAX
from ...target.engine import DeviceFault
from ...host_cc import find_cc, cache_dir, digest, build_so, NoCompilerError, CompileError
from . import pcode_c
from .pcode import Unsupported, corrected
from .gfx11 import (Snap, pcode_table, operand_formats, dual_op, access_width, constant_operand, resolve_pcode, NOPS,
                    is_sgpr, LANES, NULL, VCC, SCC_SRC, VCCZ, EXECZ)

__all__ = ["available", "NativeProgram", "run_dispatch", "run_workgroup", "opcode_function", "translates", "CHUNK"]

CHUNK = 64   # opcodes per compiled library
FLAGS = ["-O1", "-shared", "-fPIC", "-ffp-contract=off", "-fno-strict-aliasing", "-fwrapv"]   # the opcode libraries
LOOP_FLAGS = ["-O2"] + FLAGS[1:]   # the loop (small, hot)

# ---- the row and parameter layouts, shared with the C as #defines
_COLS = ["KIND", "SIZE", "FN", "ARGS", "WRITES", "LANE_BITS", "SRC0", "SRC1", "SRC2", "CVAL0", "CVAL1", "CVAL2", "DST",
         "DST_MODE", "DBITS", "SDST", "FLAGS", "D0_SRC", "VCCIN", "VCCIN_VAL", "SIMM16", "LIT", "SRC0_IDX", "VDST_IDX"]
COL = {n: i for i, n in enumerate(_COLS)}
C_Y = 24   # the VOPD Y half: the same columns from here
_CONST_COLS = ["OPSEL", "OPSEL_HI", "NEG", "NEG_HI"]   # VOP3P's fields as the pseudocode reads them (v_fma_mix, v_dot)
_MEM_COLS = ["M_WIDTH", "M_FLAGS", "M_OFFSET", "M_ADDR", "M_SADDR", "M_SOFF", "M_SOFF_VAL", "M_DATA", "M_DATA1",
             "M_VDST", "M_OFF0", "M_OFF1"]
COL.update({n: C_Y + i for i, n in enumerate(_MEM_COLS)})
COL.update({n: C_Y + len(_MEM_COLS) + i for i, n in enumerate(_CONST_COLS)})
NCOL = 48
_PARAMS = ["PROG", "INDEX", "BASE", "INDEX_LEN", "ENTRY", "GX", "GY", "GZ", "BX", "BY", "BZ", "NWG", "NUSER", "USER",
           "ENABLES", "LDS_SIZE", "LDS", "IEEE", "REGIONS", "NREGIONS", "MAX_INS", "COUNT",
           "STORES", "WG", "INWG", "WI", "TURN", "WAVES", "NWAVES", "FAULT", "FAULT_PC", "FAULT_A", "FAULT_B",
           "FAULT_WAVE", "SCRATCH", "SCRATCH_SIZE"]
PAR = {n: i for i, n in enumerate(_PARAMS)}
KINDS = {n: i for i, n in enumerate(["UNSUPPORTED", "SCALAR", "VECTOR", "VOPD", "NOP", "ENDPGM", "BARRIER", "SMEM",
                                     "GLOBAL", "DS", "WMMA", "SCRATCH"])}
OPK = {"VGPR": 1, "SGPR": 2, "CONST": 3, "SCC": 4, "VCCZ": 5, "EXECZ": 6}
FL = {"FLUSH_D": 1, "VCC_FROM_S2": 2, "WMMA_BF16_IN": 4, "WAVE": 8, "D_HI": 16, "CLAMP_F32": 32, "CLAMP_F16": 64,
      "CLAMP_F64": 128, "MIX": 256}
# operand descriptor bits above the kind/register/width/modifier fields (rdna3_native.c's vread)
SRC_HI16, SRC_PACKED, SRC_LO_FROM_HI, SRC_HI_FROM_HI, SRC_NEG_LO, SRC_NEG_HI = (1 << 31, 1 << 32, 1 << 33, 1 << 34,
                                                                               1 << 35, 1 << 36)
MF = {"SIGNED": 1, "STORE": 2, "TWO": 4, "SVE": 8}
DM = {"SGPR": 0, "VGPR": 1}
FAULTS = {"UNSUPPORTED": 1, "MEM": 2, "LDS": 3, "MAX": 4, "SCRATCH": 5}
WAVE_WORDS = 256 + 256 * LANES
W_SCC, W_PC_LO, W_PC_HI, W_DONE, W_BARRIER, W_ID = 128, 129, 130, 131, 132, 133

def _defines() -> str:
  out = [f"#define C_{n} {i}" for n, i in COL.items()] + [f"#define C_Y {C_Y}", f"#define NCOL {NCOL}"]
  out += [f"#define P_{n} {i}" for n, i in PAR.items()] + [f"#define K_{n} {i}" for n, i in KINDS.items()]
  out += [f"#define OPK_{n} {i}" for n, i in OPK.items()] + [f"#define FL_{n} {i}" for n, i in FL.items()]
  out += [f"#define MF_{n} {i}" for n, i in MF.items()] + [f"#define DM_{n} {i}" for n, i in DM.items()]
  out += [f"#define F_{n} {i}" for n, i in FAULTS.items()] + [f"#define R_{n} {i}" for n, i in pcode_c.REG_INDEX.items()]
  return "\n".join(out) + "\n"

# ---- compiling and caching

def _compile(source: str, tag: str, flags: list = FLAGS) -> ctypes.CDLL:
  try: return ctypes.CDLL(build_so(source, flags, prefix=f"isa-{tag}-", libs=("-lm",)))
  except NoCompilerError as e: raise Unsupported(f"no C compiler for the native executor ({e})") from None
  except CompileError as e: raise Unsupported(f"the native executor's {tag} does not compile: {str(e)[:2000]}") from None

@functools.lru_cache(maxsize=None)
def _runtime():
  text = (pathlib.Path(__file__).parent / "rdna3_native.c").read_text()
  lib = _compile(pcode_c.HEADER + _defines() + text, "loop", LOOP_FLAGS)
  fn = lib.hcq_run
  fn.argtypes, fn.restype = [ctypes.c_void_p], ctypes.c_int
  return lib, fn

def available() -> Optional[str]:
  """None when the native path can run here, else why not (no C compiler, or the loop does not compile)."""
  try: _runtime()
  except Unsupported as e: return str(e)
  return None

def _enum_of(op):
  import importlib
  return getattr(importlib.import_module("tinygrad.runtime.autogen.amd.rdna3.enum"), type(op).__name__)

@functools.lru_cache(maxsize=None)
def _translation(op):
  """op's pseudocode as a pcode_c.CFunction, or the Unsupported saying why not."""
  pc = pcode_table("rdna3").get(op)
  if pc is None: return Unsupported("no pseudocode for this opcode")
  try: return pcode_c.translate(corrected(op.name, pc), f"op_{type(op).__name__}_{op.name}", resolve_pcode)
  except Unsupported as e: return e

def translates(op) -> bool:
  """Whether op's pseudocode translates to C (the native executor's coverage)."""
  return not isinstance(_translation(op), Unsupported)

@functools.lru_cache(maxsize=None)
def _chunk(enum_name: str, index: int):
  """(library, {opcode: CFunction}, {opcode: why not}) for one chunk of an encoding's opcodes. A compiled chunk is
  found by a key over the translator's source and the chunks' pseudocode, with its functions' registers in a JSON file
  beside it, so a cached chunk costs no translation."""
  import json
  from tinygrad.runtime.autogen.amd import rdna3 as arch
  ops = sorted(getattr(arch.enum, enum_name), key=lambda o: o.value)[index * CHUNK:(index + 1) * CHUNK]
  cc = find_cc()
  if cc is None: raise Unsupported("no C compiler for the native executor (tried $CC, clang, cc, gcc)")
  here = pathlib.Path(__file__).parent
  table = pcode_table("rdna3")
  key = digest(cc, " ".join(FLAGS), (here / "pcode_c.py").read_text(), (here / "pcode.py").read_text(),
               *(f"{op.name}:{table.get(op)}" for op in ops))
  meta = pathlib.Path(cache_dir()) / f"isa-{enum_name}-{index}-{key}.json"
  if meta.exists():
    m = json.loads(meta.read_text())
    fns = {op: pcode_c.CFunction(d["name"], "", set(d["reads"]), set(d["writes"]), set(d["lane_bits"]), d["cross_lane"], d["d0_width"])
           for op in ops if (d := m.get(op.name)) and "name" in d}
    why = {op: m[op.name]["why"] for op in ops if op.name in m and "why" in m[op.name]}
    lib = ctypes.CDLL(m["library"]) if fns and os.path.exists(m["library"]) else None
    if lib is not None or not fns: return lib, fns, why
  fns, why = {}, {}
  for op in ops:
    t = _translation(op)
    if isinstance(t, Unsupported): why[op] = str(t)
    else: fns[op] = t
  lib = _compile(pcode_c.HEADER + "\n".join(f.source for f in fns.values()), f"{enum_name}-{index}") if fns else None
  m = {op.name: {"name": f.name, "reads": sorted(f.reads), "writes": sorted(f.writes), "lane_bits": sorted(f.lane_bits),
                 "cross_lane": f.cross_lane, "d0_width": f.d0_width} for op, f in fns.items()}
  m.update({op.name: {"why": w} for op, w in why.items()})
  m["library"] = lib._name if lib is not None else ""
  tmp = meta.with_suffix(f".{os.getpid()}.tmp")
  tmp.write_text(json.dumps(m))
  os.replace(tmp, meta)
  return lib, fns, why

@functools.lru_cache(maxsize=None)
def opcode_function(op):
  """(address of op's compiled pseudocode, CFunction) or Unsupported."""
  values = sorted(o.value for o in _enum_of(op))
  try: lib, fns, why = _chunk(type(op).__name__, values.index(op.value) // CHUNK)
  except Unsupported as e: return e   # no compiler, or the chunk does not compile
  if op not in fns: return Unsupported(why.get(op, "no pseudocode for this opcode"))
  return ctypes.cast(getattr(lib, fns[op].name), ctypes.c_void_p).value, fns[op]

def _bitset(regs) -> int:
  return sum(1 << pcode_c.REG_INDEX[r] for r in regs)

# ---- decoding into rows

def _operand(o: int, bits: int, ins, mods: int = 0, flush: bool = False) -> tuple:
  """(descriptor, constant) of a source operand (see rdna3_native.c's sread/vread)."""
  extra = (bits << 20) | (mods << 28) | (int(flush) << 30)
  if o >= 256: return OPK["VGPR"] | ((o - 256) << 8) | extra, 0
  if is_sgpr(o): return OPK["SGPR"] | (o << 8) | extra, 0
  if o == SCC_SRC: return OPK["SCC"] | extra, 0
  if o == VCCZ: return OPK["VCCZ"] | extra, 0
  if o == EXECZ: return OPK["EXECZ"] | extra, 0
  # packed math (bits 16 from _vop3p_row): float constants as f16 in the low half, integer ones their 32 bits
  v = constant_operand(o, 32 if bits == 16 and 128 <= o <= 208 and ins.cls.startswith("VOP3P") else bits, ins)
  return OPK["CONST"] | extra, v - (1 << 64) if v >= 1 << 63 else v

class _Row:
  def __init__(self): self.c = [0] * NCOL
  def __setitem__(self, k, v): self.c[COL[k] if isinstance(k, str) else k] = int(v)

def _unsupported(msg: str) -> tuple:
  r = _Row()
  r["KIND"] = KINDS["UNSUPPORTED"]
  return r.c, msg

def _fn(row: _Row, op, base: int = 0):
  got = opcode_function(op)
  if isinstance(got, Unsupported): raise DeviceFault(f"unsupported instruction ({got})")
  addr, f = got
  row[COL["FN"] + base] = addr
  row[COL["ARGS"] + base] = _bitset(f.reads)
  row[COL["WRITES"] + base] = _bitset(f.writes)
  row[COL["LANE_BITS"] + base] = _bitset(f.lane_bits)
  return f

def _dest_bits(f, canonical: int) -> int:
  """The destination bits written back: what the pseudocode's writes reach (`D0[31 : 16].f16 = ...` rewrites the
  whole 32-bit register it read, `D0.f16 = ...` only the low half), else the operand table's width."""
  if not f.d0_width: return canonical
  return 16 if f.d0_width <= 16 else 32 if f.d0_width <= 32 else 64

def _scalar_row(ins: Snap, row: _Row, denorm: int = 0xF):
  f = _fn(row, ins.ins.op)
  bits, ft = ins.bits, ins.ftype
  for i, (fld, key) in enumerate((("ssrc0", "s0"), ("ssrc1", "s1"))):
    if fld in ins.fields:
      row[COL["SRC0"] + i], row[COL["CVAL0"] + i] = _operand(getattr(ins, fld).offset, bits[key], ins, 0, flushes(ft.get(key), denorm, True))
  if flushes(ft.get("d"), denorm, False): row["FLAGS"] = FL["FLUSH_D"]
  if "simm16" in ins.fields: row["SIMM16"] = ins.simm16
  if ins.literal is not None: row["LIT"] = ins.literal
  sd = ins.sdst.offset if "sdst" in ins.fields else NULL
  dbits = _dest_bits(f, bits["d"])
  if "D0" in f.reads and sd != NULL: row["D0_SRC"] = _operand(sd, max(dbits, 32), ins)[0]
  if "S0" in f.reads and "ssrc0" not in ins.fields and sd != NULL:   # SOPK: the register operand is the sdst field
    row["SRC0"], row["CVAL0"] = _operand(sd, bits["d"], ins)
  row["DST"], row["DST_MODE"], row["DBITS"], row["SDST"] = sd, DM["SGPR"], dbits, -1
  row["KIND"] = KINDS["SCALAR"]

CLAMPS = {"F32": "CLAMP_F32", "F16": "CLAMP_F16", "F64": "CLAMP_F64"}

def flushes(fmt, denorm: int, inputs: bool) -> bool:
  """Whether FLOAT_MODE's denormal field (`denorm`: FP32 in bits 1:0, FP16/FP64 in bits 3:2) flushes a value of
  number format `fmt` to signed zero: on inputs for modes 0 and 2, on results for modes 0 and 1."""
  mode = denorm & 3 if fmt == "F32" else (denorm >> 2) & 3 if fmt in ("F16", "F64") else 3
  return mode in ((0, 2) if inputs else (0, 1))

def _vector_row(ins: Snap, row: _Row, denorm: int, packed=None):
  """VOP1/VOP2/VOP3/VOPC/VOP3SD rows (and VOP3P's: `packed` gives per source (extra descriptor bits, width), the
  half selection and negation of packed math)."""
  name, fields, ft, bits = ins.name, ins.fields, ins.ftype, ins.bits
  if getattr(ins, "omod", 0) or 0: raise DeviceFault("unsupported instruction (the omod output modifier)")
  f = _fn(row, ins.ins.op)
  flags = FL["FLUSH_D"] if flushes(ft.get("d"), denorm, False) else 0
  if getattr(ins, "clmp", 0) or 0:
    if ft.get("d") not in CLAMPS or "D0" in f.lane_bits: raise DeviceFault("unsupported instruction (clamp of a non-float result)")
    flags |= FL[CLAMPS[ft["d"]]]
  opsel = 0 if packed is not None else getattr(ins, "opsel", 0) or 0   # VOP3: bit i the high half of source i, bit 3 of D
  if opsel & 8:
    if bits["d"] != 16: raise DeviceFault("unsupported instruction (opsel on a 32-bit destination)")
    flags |= FL["D_HI"]
  neg, ab = (getattr(ins, "neg", 0) or 0, getattr(ins, "abs", 0) or 0) if packed is None else (0, 0)
  if f.cross_lane: flags |= FL["WAVE"]
  for i, (fld, key) in enumerate((("src0", "s0"), ("vsrc1" if "vsrc1" in fields else "src1", "s1"), ("src2", "s2"))):
    if fld not in fields or f"S{i}" not in f.reads and not (i == 2 and ("CNDMASK" in name or "_CI_" in name)): continue
    mods = ((neg >> i) & 1) | (((ab >> i) & 1) << 1)
    width = bits[key] if packed is None else packed[i][1]
    d, c = _operand(getattr(ins, fld).offset, width, ins, mods, flushes(ft.get(key), denorm, True) and packed is None)
    if (opsel >> i) & 1:
      if bits[key] != 16: raise DeviceFault("unsupported instruction (opsel on a 32-bit source)")
      d |= SRC_HI16
    if packed is not None: d |= packed[i][0]
    row[COL["SRC0"] + i], row[COL["CVAL0"] + i] = d, c
  if f.cross_lane:   # v_readlane, v_readfirstlane, v_writelane: register numbers, and the wave's own VGPRs
    if "src0" in fields: row["SRC0_IDX"] = ins.src0.offset - 256
    row["VDST_IDX"] = ins.vdst.offset - 256 if ins.vdst.offset >= 256 else ins.vdst.offset
  if "literal" in fields and ins.literal is not None: row["LIT"] = ins.literal
  sdst = -1
  cls = ins.cls
  if cls.startswith("VOP3SD"):
    sdst = ins.sdst.offset
    if "_CI_" in name or "SUBB" in name:
      o = ins.src2.offset
      if o >= 256: raise DeviceFault(f"unsupported source operand {o}")
      row["VCCIN"], row["VCCIN_VAL"] = _operand(o, 32, ins)
  elif cls.startswith("VOP3") and "CNDMASK" in name:
    if row.c[COL["SRC2"]]: flags |= FL["VCC_FROM_S2"]
    else:
      o = ins.src2.offset
      if o >= 256: raise DeviceFault(f"unsupported source operand {o}")
      row["VCCIN"], row["VCCIN_VAL"] = _operand(o, 32, ins)
    sdst = VCC
  if cls.startswith("VOPC"): mode, dst = DM["SGPR"], VCC
  elif "D0" in f.lane_bits or ins.vdst.offset < 256: mode, dst = DM["SGPR"], ins.vdst.offset   # compares; v_readlane
  else: mode, dst = DM["VGPR"], ins.vdst.offset - 256
  dbits = _dest_bits(f, bits["d"])
  if "D0" in f.reads and mode == DM["VGPR"]: row["D0_SRC"] = _operand(dst + 256, dbits, ins)[0]
  row["DST"], row["DST_MODE"], row["DBITS"], row["SDST"], row["FLAGS"] = dst, mode, dbits, sdst, flags
  row["KIND"] = KINDS["VECTOR"]

def _vopd_row(ins: Snap, row: _Row, denorm: int):
  for base, (op, s0, s1, d) in zip((0, C_Y), ((ins.opx, ins.srcx0, ins.vsrcx1, ins.vdstx), (ins.opy, ins.srcy0, ins.vsrcy1, ins.vdsty))):
    vop = dual_op(op.name)
    f = _fn(row, vop, base)
    ft = operand_formats(vop)
    for i, (src, key) in enumerate(((s0, "s0"), (s1, "s1"))):
      row[COL["SRC0"] + base + i], row[COL["CVAL0"] + base + i] = _operand(src.offset, 32, ins, 0, flushes(ft.get(key), denorm, True))
    if "D0" in f.reads: row[COL["D0_SRC"] + base] = _operand(d.offset, 32, ins)[0]
    row[COL["DST"] + base] = d.offset - 256
    row[COL["FLAGS"] + base] = FL["FLUSH_D"] if flushes(ft.get("d"), denorm, False) else 0
  if ins.literal is not None: row["LIT"] = ins.literal
  row["KIND"] = KINDS["VOPD"]

def _memory_row(ins: Snap, row: _Row):
  name = ins.name
  cls = ins.cls
  if cls == "SMEM":
    if not name.startswith("S_LOAD_"): raise DeviceFault("unsupported instruction")
    n, _ = access_width(name)
    off = ins.offset
    if off & (1 << 20): off -= 1 << 21
    so = ins.soffset.offset
    row["M_WIDTH"], row["M_ADDR"], row["M_OFFSET"], row["M_DATA"] = n, ins.sbase.offset, off, ins.sdata.offset
    if so != NULL: row["M_SOFF"], row["M_SOFF_VAL"] = _operand(so, 32, ins)
    row["KIND"] = KINDS["SMEM"]
    return
  if cls in ("GLOBAL", "FLAT"):
    if "ATOMIC" in name or "ADDTID" in name or "LDS" in name.split("_", 2)[-1] or "D16" in name:
      raise DeviceFault("unsupported instruction")
    n, signed = access_width(name)
    if "_LOAD_" not in name and "_STORE_" not in name: raise DeviceFault("unsupported instruction")
    off = ins.offset
    if off & (1 << 12): off -= 1 << 13
    sa = ins.saddr.offset
    row["M_SADDR"] = -1 if sa in (NULL, 125) or cls == "FLAT" else sa
    row["M_ADDR"], row["M_OFFSET"], row["M_WIDTH"] = ins.addr.offset - 256, off, n
    row["M_FLAGS"] = (MF["SIGNED"] if signed else 0) | (MF["STORE"] if "_STORE_" in name else 0)
    row["M_DATA"], row["M_VDST"] = ins.data.offset - 256, ins.vdst.offset - 256
    row["KIND"] = KINDS["GLOBAL"]
    return
  if cls == "SCRATCH":
    if "D16" in name or "LDS" in name.split("_", 2)[-1]: raise DeviceFault("unsupported instruction")
    n, signed = access_width(name)
    if "_LOAD_" not in name and "_STORE_" not in name: raise DeviceFault("unsupported instruction")
    off = ins.offset
    if off & (1 << 12): off -= 1 << 13
    sa = ins.saddr.offset
    row["M_SADDR"] = sa if is_sgpr(sa) and sa != NULL else -1
    row["M_ADDR"], row["M_OFFSET"], row["M_WIDTH"] = ins.addr.offset - 256, off, n
    row["M_FLAGS"] = (MF["SIGNED"] if signed else 0) | (MF["STORE"] if "_STORE_" in name else 0) | (MF["SVE"] if ins.sve else 0)
    row["M_DATA"], row["M_VDST"] = ins.data.offset - 256, ins.vdst.offset - 256
    row["KIND"] = KINDS["SCRATCH"]
    return
  # DS
  if name == "DS_NOP":
    row["KIND"] = KINDS["NOP"]
    return
  two = "2ADDR" in name
  stride = (256 if "STRIDE64" in name else 4) * (2 if name.endswith("B64") and two else 1)
  n, signed = access_width(name.replace("_2ADDR_STRIDE64", "").replace("_2ADDR", ""))
  if not (name.startswith(("DS_LOAD_", "DS_READ")) or name.startswith("DS_STORE_")): raise DeviceFault("unsupported instruction")
  offs = (ins.offset0 * stride, ins.offset1 * stride) if two else (ins.offset0 | (ins.offset1 << 8), 0)
  row["M_WIDTH"], row["M_ADDR"], row["M_OFF0"], row["M_OFF1"] = n, ins.addr.offset - 256, offs[0], offs[1]
  row["M_FLAGS"] = (MF["SIGNED"] if signed else 0) | (MF["STORE"] if name.startswith("DS_STORE_") else 0) | (MF["TWO"] if two else 0)
  row["M_DATA"], row["M_DATA1"], row["M_VDST"] = ins.data0.offset - 256, ins.data1.offset - 256, ins.vdst.offset - 256
  row["KIND"] = KINDS["DS"]

def _vop3p_row(ins: Snap, row: _Row, denorm: int):
  """Packed math: each source's low and high halves as opsel/opsel_hi select them, negated by neg/neg_hi on float
  formats (v_dot*: NEG is the signedness, read by the pseudocode). v_fma_mix* select halves themselves (OPSEL,
  OPSEL_HI); their neg and neg_hi (abs) act on the value each source is taken as, f32 or the selected f16 half (the C
  loop applies them: FL_MIX). Inline float constants are f16 for f16 operands (tinygrad's emulator's reading)."""
  name = ins.name
  opsel, opsel_hi = ins.opsel, (ins.opsel_hi & 3) | ((ins.opsel_hi2 & 1) << 2)
  neg, neg_hi = ins.neg, ins.neg_hi
  fmts = ins.ftype
  if "MIX" in name:
    _vector_row(ins, row, denorm, [(0, 16 if (opsel_hi >> i) & 1 else 32) for i in range(3)])
    row["FLAGS"] = row.c[COL["FLAGS"]] | FL["MIX"]
  else:
    is_float = any(fmts.get(k, "").endswith(("F16", "BF16", "F32")) for k in ("s0", "s1", "s2")) and "IU" not in name
    packed = []
    for i in range(3):
      extra = SRC_PACKED | (SRC_LO_FROM_HI if (opsel >> i) & 1 else 0) | (SRC_HI_FROM_HI if (opsel_hi >> i) & 1 else 0)
      if is_float:
        extra |= (SRC_NEG_LO if (neg >> i) & 1 else 0) | (SRC_NEG_HI if (neg_hi >> i) & 1 else 0)
      packed.append((extra, 16 if is_float else 32))
    _vector_row(ins, row, denorm, packed)
  row["OPSEL"], row["OPSEL_HI"], row["NEG"], row["NEG_HI"] = opsel, opsel_hi, neg, neg_hi

def _wmma_row(ins: Snap, row: _Row):
  name = ins.name
  if ins.neg or ins.neg_hi or ins.opsel or ins.clmp: raise DeviceFault("unsupported instruction (WMMA with neg, opsel or clamp)")
  if min(ins.src0.offset, ins.src1.offset, ins.src2.offset, ins.vdst.offset) < 256:
    raise DeviceFault("unsupported instruction (WMMA operands that are not VGPRs)")
  out = name.split("WMMA_", 1)[1].split("_", 1)[0]
  if out not in ("F32", "F16", "BF16"): raise DeviceFault("unsupported instruction (integer WMMA)")
  row["SRC0"], row["SRC1"], row["SRC2"], row["DST"] = (ins.src0.offset - 256, ins.src1.offset - 256, ins.src2.offset - 256,
                                                        ins.vdst.offset - 256)
  row["DBITS"] = {"F32": 0, "F16": 1, "BF16": 2}[out]
  row["FLAGS"] = FL["WMMA_BF16_IN"] if name.endswith("_BF16") else 0
  row["KIND"] = KINDS["WMMA"]

def build_row(ins: Snap, size: int, denorm: int) -> tuple:
  """(row, unsupported message or None) for a decoded instruction."""
  row = _Row()
  cls = ins.cls.replace("_LIT", "")
  try:
    if cls in ("SOP1", "SOP2", "SOPC", "SOPK"): _scalar_row(ins, row, denorm)
    elif cls == "SOPP":
      name = ins.name
      if name in NOPS: row["KIND"] = KINDS["NOP"]
      elif name == "S_ENDPGM": row["KIND"] = KINDS["ENDPGM"]
      elif name == "S_BARRIER": row["KIND"] = KINDS["BARRIER"]
      elif "BRANCH" in name: _scalar_row(ins, row, denorm)
      else: raise DeviceFault("unsupported instruction")
    elif cls in ("VOP1", "VOP2", "VOP3", "VOP3SD", "VOPC", "VOP3_SDST", "VOP1_SDST"): _vector_row(ins, row, denorm)
    elif cls == "VOP3P":
      if "WMMA" in ins.name: _wmma_row(ins, row)
      else: _vop3p_row(ins, row, denorm)
    elif cls == "VOPD": _vopd_row(ins, row, denorm)
    elif cls in ("SMEM", "GLOBAL", "FLAT", "DS", "SCRATCH"): _memory_row(ins, row)
    else: raise DeviceFault(f"unsupported instruction format {ins.cls}")
  except DeviceFault as e: return _unsupported(str(e))
  row["SIZE"] = size
  return row.c, None

_ROWS: dict = {}   # (instruction bytes, denormal mode) -> (row, unsupported message)

class NativeProgram:
  """A kernel's decoded rows: `index` maps (pc - base) / 4 to a row, -1 where there is none yet. Rows are added by
  `decode_at` (a worklist following branches from the PC), and the arrays rebuilt for the C loop."""
  def __init__(self, kernel, denorm: int):
    self.k, self.denorm = kernel, denorm   # FLOAT_MODE's denormal field (bits 7:4): the rows' flushing
    self.rows: list = []
    self.msgs: list = []          # per row: the unsupported instruction's message, or None
    self.pcs: list = []
    self.at: dict = {}            # pc -> row
    self.prog: Optional[np.ndarray] = None    # the rows for the C loop (NCOL columns), once decode_at ran
    self.index: Optional[np.ndarray] = None   # (pc - base) / 4 -> row
    self.base = self.end = 0

  def decode_at(self, mem, pc: int):
    todo = [pc]
    while todo:
      p = todo.pop()
      while p not in self.at:
        try: ins, size, text = self.k.fetch(mem, p)
        except DeviceFault as e:
          row, msg = _unsupported(str(e))
          size, ins = 4, None
        else:
          key = (ins.raw, self.denorm)   # rows are content-addressed too: a kernel run again decodes nothing
          got = _ROWS.get(key)
          if got is None: got = _ROWS[key] = build_row(ins, size, self.denorm)
          row, msg = got
        self.at[p] = len(self.rows)
        self.rows.append(row)
        self.msgs.append(msg)
        self.pcs.append(p)
        if ins is None or msg is not None: break
        name = ins.name
        if name in ("S_ENDPGM", "S_CODE_END") or name.startswith(("S_SETPC", "S_SWAPPC", "S_RFE")): break
        if "BRANCH" in name and ins.cls == "SOPP":
          tgt = p + 4 + (((ins.simm16 & 0xFFFF) ^ 0x8000) - 0x8000) * 4
          if tgt not in self.at: todo.append(tgt)
          if name == "S_BRANCH": break
        p += size
    self._arrays()

  def _arrays(self):
    self.prog = np.array(self.rows, np.int64).reshape(-1, NCOL)
    self.base = min(self.pcs) & ~3
    self.end = max(self.pcs) + 4
    index = np.full((self.end - self.base) // 4, -1, np.int64)
    for p, i in self.at.items():
      if not p & 3: index[(p - self.base) // 4] = i
    self.index = index

# ---- running

def _regions(mem) -> np.ndarray:
  regs = mem.regions
  t = np.zeros((len(regs), 3), np.uint64)
  for i, r in enumerate(regs): t[i] = (r.base, r.end, r.u8.ctypes.data)
  return t

def _params() -> np.ndarray: return np.zeros(len(_PARAMS), np.int64)

def _run(kernel, launch, P: np.ndarray, prog: NativeProgram, waves: np.ndarray, wg_of, before: int) -> int:
  """Call the C loop until the dispatch (or workgroup) is done; returns the instructions executed."""
  _, run = _runtime()
  mem = launch.mem
  regions = _regions(mem)
  lds = launch.lds if launch.lds_size else np.zeros(1, np.uint8)
  P[PAR["REGIONS"]], P[PAR["NREGIONS"]] = regions.ctypes.data, len(regions)
  P[PAR["LDS"]], P[PAR["LDS_SIZE"]] = lds.ctypes.data, launch.lds_size
  P[PAR["WAVES"]], P[PAR["NWAVES"]] = waves.ctypes.data, len(waves)
  scratch = np.zeros(len(waves) * LANES * launch.scratch_size if launch.scratch_size else 1, np.uint8)
  P[PAR["SCRATCH"]], P[PAR["SCRATCH_SIZE"]] = scratch.ctypes.data, launch.scratch_size
  P[PAR["IEEE"]] = bool(launch.ieee)
  P[PAR["MAX_INS"]] = kernel.max_instructions() - before
  P[PAR["ENTRY"]] = launch.entry
  while True:
    if prog.prog is None: prog.decode_at(mem, launch.entry)
    rows, index = prog.prog, prog.index
    assert rows is not None and index is not None   # (decode_at built them)
    P[PAR["PROG"]], P[PAR["INDEX"]] = rows.ctypes.data, index.ctypes.data
    P[PAR["BASE"]], P[PAR["INDEX_LEN"]] = prog.base, len(index)
    rc = run(P.ctypes.data)
    if P[PAR["STORES"]]:
      mem.writes += 1
      P[PAR["STORES"]] = 0
    if rc == 0: return int(P[PAR["COUNT"]])
    pc = int(P[PAR["FAULT_PC"]]) & ((1 << 64) - 1)
    if rc == 2:
      prog.decode_at(mem, pc)
      continue
    wave = int(P[PAR["FAULT_WAVE"]])
    w_id = int(waves[wave][W_ID])
    where = kernel.where_at(w_id, wg_of(), pc, launch)
    code, a, b = int(P[PAR["FAULT"]]), int(P[PAR["FAULT_A"]]), int(P[PAR["FAULT_B"]])
    if code == FAULTS["UNSUPPORTED"]: msg = prog.msgs[a] or "unsupported instruction"
    elif code == FAULTS["MEM"]:
      try:  # (find raises)
        mem.find(a & ((1 << 64) - 1), b)
        msg = f"access of {b} bytes at {a:#x}"
      except DeviceFault as e: msg = str(e)
    elif code == FAULTS["LDS"]: msg = f"LDS access of {b} bytes at {a:#x} outside the workgroup's {launch.lds_size} bytes"
    elif code == FAULTS["MAX"]: msg = f"more than {kernel.max_instructions()} instructions in one dispatch"
    elif code == FAULTS["SCRATCH"]:
      msg = f"scratch access of {b} bytes at {a & ((1 << 64) - 1):#x} outside the lane's {launch.scratch_size} bytes of private memory"
    else: msg = f"native executor status {code}"
    raise DeviceFault(f"{where}: {msg}")

def run_dispatch(kernel, launch, grid: tuple, block: tuple, user: list, enables: int, nwaves: int) -> int:
  """Every workgroup of a dispatch on the C loop; returns the wave instructions executed."""
  prog = kernel.native_program(launch)
  P = _params()
  P[PAR["GX"]], P[PAR["GY"]], P[PAR["GZ"]] = grid
  P[PAR["BX"]], P[PAR["BY"]], P[PAR["BZ"]] = block
  P[PAR["NWG"]] = grid[0] * grid[1] * grid[2]
  u = np.array(user + [0] * (16 - len(user)), np.uint32)
  P[PAR["USER"]], P[PAR["NUSER"]], P[PAR["ENABLES"]] = u.ctypes.data, len(user), enables
  waves = np.zeros((nwaves, WAVE_WORDS), np.uint32)
  def wg_of():
    g = int(P[PAR["WG"]])
    return (g % grid[0], g // grid[0] % grid[1], g // (grid[0] * grid[1]))
  return _run(kernel, launch, P, prog, waves, wg_of, 0)

def run_workgroup(kernel, launch, waves: list, wg: tuple, before: int) -> int:
  """One workgroup of prepared rdna3.Wave states (the tests' entry point); the states are updated in place."""
  prog = kernel.native_program(launch)
  P = _params()
  P[PAR["INWG"]], P[PAR["NWG"]] = 1, 0
  buf = np.zeros((len(waves), WAVE_WORDS), np.uint32)
  for i, w in enumerate(waves):
    buf[i, :128] = w.s[:128].astype(np.uint32)
    buf[i, W_SCC], buf[i, W_PC_LO], buf[i, W_PC_HI] = w.scc, w.pc & U32_MAX, w.pc >> 32
    buf[i, W_DONE], buf[i, W_ID] = w.done, w.id
    buf[i, 256:] = w.v.astype(np.uint32).reshape(-1)
  try: n = _run(kernel, launch, P, prog, buf, lambda: wg, before)
  finally:
    for i, w in enumerate(waves):
      w.s[:128] = buf[i, :128]
      w.scc, w.pc, w.done = int(buf[i, W_SCC]), int(buf[i, W_PC_LO]) | int(buf[i, W_PC_HI]) << 32, bool(buf[i, W_DONE])
      w.v[:] = buf[i, 256:].reshape(256, LANES)
  return n
