"""Differential testing of the RDNA3 executor against tinygrad's own RDNA3 emulator (the peer's
test/mockgpu/amd/emu.py): one instruction at a time, on generated register states.

Cases: every opcode tinygrad ships pseudocode for (tinygrad.runtime.autogen.amd.rdna3.str_pcode.PCODE) and the VOPD
pairs, each in several encodings (every operand kind its fields take: VGPR, SGPR, VCC/EXEC/M0/SCC, inline integer and
float constants, literals; VOP3 neg/abs on float operands; sizes from the ISA's operand table) on register states drawn
from edge values (NaN quiet and signaling, infinities, denormals, -0, INT_MIN, shift amounts of 31..65, f16 and f64
edges), with random VCC (carry chains) and random or partial EXEC. States come from `random.Random(seed)` (stable
across Python and numpy versions), so a case is (instruction bytes, seed, float mode).

Running a case executes exactly one instruction (a step limit of one) and takes the whole wave state after it: SGPRs
s0..s127, SCC, the PC relative to the instruction, VGPRs v0..v255 on 32 lanes. Two states agree when they are equal
after NaNs in the instruction's destination are made canonical (IEEE leaves a NaN result's sign and payload open, and
the hosts differ: x86's default NaN is negative); the transcendental opcodes in TOLERANT may differ by ULPS units in
the last place (the hardware approximates them; tinygrad's emulator uses its own polynomials, this executor libm in
double).

  python tests/rdna3_diff.py --campaign [--per-op N]     run the campaign against the peer (needs it, and clang)
  python tests/rdna3_diff.py --record                      rewrite tests/rdna3_cases.json.gz from a campaign
The tinygrad side runs in a worker process (`--tinygrad-worker`, with the peer on PYTHONPATH)."""
from __future__ import annotations
import gzip, hashlib, json, os, pathlib, random, struct, subprocess, sys
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
CASES = pathlib.Path(__file__).resolve().parent / "rdna3_cases.json.gz"
ULPS = 2
# opcodes whose result may differ in the last bits: the hardware's transcendental approximations
TOLERANT = ("V_EXP_F32", "V_LOG_F32", "V_RCP_F32", "V_RCP_IFLAG_F32", "V_RSQ_F32", "V_SQRT_F32", "V_SIN_F32",
            "V_COS_F32", "V_EXP_F16", "V_LOG_F16", "V_RCP_F16", "V_RSQ_F16", "V_SQRT_F16", "V_SIN_F16", "V_COS_F16",
            "V_RCP_F64", "V_RSQ_F64", "V_SQRT_F64")
MEMORY = ("DSOp", "FLATOp", "GLOBALOp", "SCRATCHOp", "SMEMOp", "MUBUFOp", "MTBUFOp", "MIMGOp", "LDSDIROp")

def peer() -> pathlib.Path | None:
  """tinygrad's repository (for its mock GPU): $TINYGRAD_REPO, else ../shared/peers/tinygrad from the repository."""
  for p in (os.environ.get("TINYGRAD_REPO"), ROOT.parent / "shared" / "peers" / "tinygrad"):
    if p and (pathlib.Path(p) / "test" / "mockgpu" / "amd" / "emu.py").exists(): return pathlib.Path(p)
  return None

PEER_MISSING = ("tinygrad's emulator is not there: set TINYGRAD_REPO to a tinygrad checkout (its test/mockgpu/amd/emu.py "
                "compiles with clang and needs libllvm: apt-get install clang libllvm19)")

# ---- register states

F32_EDGES = [0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x3F000000, 0x40000000, 0x7F800000, 0xFF800000,
             0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF812345, 0x7FC12345, 0x00000001, 0x007FFFFF, 0x80000001,
             0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800001, 0x4B000000, 0x4B7FFFFF, 0x3EFFFFFF, 0x3F7FFFFF,
             0x00400000, 0x80400000, 0x4F000000, 0xCF000000, 0x4F800000, 0x5F000000, 0x3E22F983, 0x40490FDB]
INT_EDGES = [0, 1, 2, 3, 0xFFFFFFFF, 0xFFFFFFFE, 0x80000000, 0x7FFFFFFF, 0x80000001, 31, 32, 33, 63, 64, 65, 127, 128,
             0xFF, 0x100, 0xFFFF, 0x10000, 0x8000, 0x7FFF, 0xFFFF8000, 16, 15, 7, 24, 0x00FFFFFF, 0x01000000]
F16_EDGES = [0x0000, 0x8000, 0x3C00, 0xBC00, 0x3800, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7D00, 0x7C01, 0x0001, 0x03FF,
             0x8001, 0x0400, 0x7BFF, 0xFBFF, 0x3C01, 0x5640, 0x4248]
F64_EDGES = [0x0000000000000000, 0x8000000000000000, 0x3FF0000000000000, 0xBFF0000000000000, 0x7FF0000000000000,
             0xFFF0000000000000, 0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FF4000000012345,
             0x0000000000000001, 0x000FFFFFFFFFFFFF, 0x8000000000000001, 0x0010000000000000, 0x7FEFFFFFFFFFFFFF,
             0x3FF0000000000001, 0x4330000000000000, 0x43E0000000000000, 0xC3E0000000000000, 0x41DFFFFFFFC00000,
             0x400921FB54442D18, 0x3FE0000000000000, 0x8000000000000000 | 0x3FF8000000000000, 0x380FFFFFE0000000]

def _f32(r: random.Random) -> int:
  e = r.choice([r.randrange(100, 160), r.randrange(0, 255), 127])
  return (r.getrandbits(1) << 31) | (e << 23) | r.getrandbits(23)

def _word(r: random.Random) -> int:
  k = r.random()
  if k < 0.25: return r.choice(F32_EDGES)
  if k < 0.45: return r.choice(INT_EDGES)
  if k < 0.6: return r.choice(F16_EDGES) | (r.choice(F16_EDGES) << 16)
  if k < 0.75: return _f32(r)
  if k < 0.85: return r.randrange(0, 70)
  return r.getrandbits(32)

def _pair(r: random.Random) -> tuple:
  k = r.random()
  if k < 0.35:
    x = r.choice(F64_EDGES) if r.random() < 0.6 else ((r.getrandbits(1) << 63) | (r.randrange(900, 1150) << 52) | r.getrandbits(52))
    return x & 0xFFFFFFFF, x >> 32
  if k < 0.45:
    x = r.choice([0, 1, 2**63, 2**63 - 1, 2**64 - 1, 2**32, 2**32 - 1, 0x100000000, 0xFFFFFFFF00000000])
    return x & 0xFFFFFFFF, x >> 32
  return _word(r), _word(r)

def state(seed: int) -> dict:
  """The register state of case `seed`: s (128 SGPRs), v (256 x 32 VGPRs), scc. Registers s0..s31 and v0..v31 hold
  edge values (pairs drawn together, so f64 and 64-bit integers are edges too), VCC random, EXEC full, partial, one lane
  or (rarely) empty, M0 small; everything else 0."""
  r = random.Random(seed)
  s = [0] * 128
  for i in range(0, 32, 2): s[i], s[i + 1] = _pair(r)
  s[106], s[107] = r.getrandbits(32), r.choice([0, r.getrandbits(32)])
  s[125] = r.choice([0, 1, 4, r.randrange(0, 256), r.getrandbits(32)])
  k = r.random()
  s[126] = 0xFFFFFFFF if k < 0.35 else (1 << r.randrange(32)) if k < 0.45 else 0 if k < 0.48 else r.getrandbits(32)
  v = np.zeros((256, 32), np.uint64)
  for reg in range(0, 32, 2):
    for lane in range(32):
      v[reg, lane], v[reg + 1, lane] = _pair(r)
  return {"s": s, "v": v, "scc": r.getrandbits(1)}

# ---- cases

def _enum():
  from tinygrad.runtime.autogen.amd.rdna3 import enum
  return enum

def _ins():
  from tinygrad.runtime.autogen.amd.rdna3 import ins
  return ins

FLOAT_FMTS = ("F16", "F32", "F64", "PK2_F16", "BF16", "PK2_BF16")

def _fmt(f) -> str: return f.name.replace("FMT_NUM_", "")

def _operand_values(r: random.Random, field: str, fmt, bits: int, optype, dst_reg: dict):
  """A value of the DSL for one operand field (register ranges sized by `bits`)."""
  ins = _ins()
  from tinygrad.renderer.amd.dsl import v, s, VCC, EXEC, M0, SCC, NULL
  n = max(1, bits // 32)
  ot = optype.name
  is_dst = field in ("vdst", "sdst", "vdstx", "vdsty")
  if is_dst:
    if ot == "OPR_EXEC": return EXEC
    if ot == "OPR_VGPR": return v[dst_reg["v"]:dst_reg["v"] + n - 1] if n > 1 else v[dst_reg["v"]]
    choice = r.random()
    if ot in ("OPR_SREG", "OPR_SDST") and choice < 0.3: return VCC
    return s[dst_reg["s"]:dst_reg["s"] + n - 1] if n > 1 else s[dst_reg["s"]]
  base = 2 * r.randrange(0, 7)
  if ot == "OPR_VGPR": return v[base:base + n - 1] if n > 1 else v[base]
  if ot == "OPR_SREG": return r.choice([VCC, s[base:base + n - 1] if n > 1 else s[base]])
  k = r.random()
  if ot in ("OPR_SRC", "OPR_SRC_VGPR_OR_INLINE") and k < 0.4: return v[base:base + n - 1] if n > 1 else v[base]
  if k < 0.6: return s[base:base + n - 1] if n > 1 else s[base]
  if k < 0.68: return r.choice([VCC, EXEC] if n > 1 else [VCC, EXEC, M0, SCC, ins.VCCZ, ins.EXECZ, NULL])
  if k < 0.8: return r.choice([0, 1, 2, 7, 31, 32, 63, 64, -1, -2, -16])
  if k < 0.9: return r.choice([0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 4.0, -4.0])
  return r.choice([0x3FC00000, 0x12345678, 0x80000000, 0x7FC00000, 0xFFFFFF00, 0x00010000, 0x3C00BC00, 0x000003FF])

def _build(cls, op, fields: dict):
  """The instruction, register ranges resized to what the DSL expects for this opcode (wave32 masks are one SGPR)."""
  from tinygrad.renderer.amd.dsl import Reg
  import re as _re
  for _ in range(8):
    try: return cls(op, **fields)
    except TypeError as e:
      m = _re.match(r"(\w+) expects (\d+) register", str(e))
      if not m: raise
      name, want = m.group(1), int(m.group(2))
      val = fields[name]
      if not isinstance(val, Reg): raise
      fields[name] = type(val)(val.offset, want) if hasattr(type(val), "__call__") else val
      try: fields[name] = val.__class__(val.offset, want)
      except Exception: fields[name] = _resize(val, want)
  return cls(op, **fields)

def _resize(reg, n: int):
  from tinygrad.renderer.amd.dsl import v, s
  o = reg.offset
  if o >= 256: return v[o - 256:o - 256 + n - 1] if n > 1 else v[o - 256]
  return s[o:o + n - 1] if n > 1 else s[o]

ENC = {"SOP1Op": "SOP1", "SOP2Op": "SOP2", "SOPCOp": "SOPC", "SOPKOp": "SOPK", "SOPPOp": "SOPP", "VOP1Op": "VOP1",
       "VOP2Op": "VOP2", "VOPCOp": "VOPC", "VOP3Op": "VOP3", "VOP3SDOp": "VOP3SD", "VOP3POp": "VOP3P", "VINTERPOp": "VINTERP"}

def encodings(op, r: random.Random, n: int) -> list:
  """Up to n distinct encodings of an ALU opcode (bytes), operands of every kind its fields allow."""
  from tinygrad.renderer.amd.dsl import OPERANDS
  ins = _ins()
  en = type(op).__name__
  cls_name = ENC[en]
  ops = dict(OPERANDS.get(op, {}))
  if en == "VOP3Op" and ops.get("vdst", (None, 0, None))[2] is not None and ops["vdst"][2].name in ("OPR_SREG", "OPR_SDST"):
    cls_name = "VOP3_SDST"
  if en == "VOP1Op" and ops.get("vdst", (None, 0, None))[2] is not None and ops["vdst"][2].name in ("OPR_SREG", "OPR_SDST"):
    cls_name = "VOP1_SDST"
  if en == "VOP3Op" and ops.get("vdst", (None, 0, None))[2] is not None and ops["vdst"][2].name == "OPR_EXEC":
    cls_name = "VOP3_SDST"   # v_cmpx_*_e64: the destination is EXEC
  lit = op.name.startswith(("V_FMAAK", "V_FMAMK")) or op.name == "S_SETREG_IMM32_B32"   # a literal K operand
  if lit: cls_name += "_LIT"
  cls = getattr(ins, cls_name)
  names = {n for n, _ in cls._fields} if hasattr(cls, "_fields") else set()
  for f in list(ops):   # the VOP3 forms of VOP1/VOP2 opcodes call their sources vsrc0/vsrc1: the src0/src1 fields
    if f not in names and f.startswith("vsrc") and f.replace("vsrc", "src") in names: ops[f.replace("vsrc", "src")] = ops.pop(f)
  if cls_name.startswith("VOP3") and "vdst" not in ops and "vdst" in names:   # v_cmpx_*_e64: only EXEC (and vdst) written
    ops["vdst"] = None
  out, tries = [], 0
  while len(out) < n and tries < 12 * n:
    tries += 1
    dst = {"v": 16 + 2 * r.randrange(0, 7), "s": 16 + 2 * r.randrange(0, 6)}
    if r.random() < 0.15: dst = {"v": 2 * r.randrange(0, 7), "s": 2 * r.randrange(0, 7)}   # a destination that is a source
    fields = {}
    if lit: fields["literal"] = r.choice([0x3FC00000, 0xC0490FDB, 0x7F800000, 0x00000001, 0x3C003C00])
    if cls_name == "SOPP":
      fields["simm16"] = r.choice([0, 1, 3, 0xFFFE, 0xFFF0, 0x10]) if "BRANCH" in op.name else r.getrandbits(16) & 0xF
    elif cls_name == "SOPK":
      for f, (fmt, bits, ot) in ops.items():
        fields[f] = r.getrandbits(16) if f == "simm16" else _operand_values(r, f, fmt, bits, ot, dst)
      if "simm16" not in fields: fields["simm16"] = r.getrandbits(16)
      if "sdst" not in fields and "SDST" not in ops:
        fields.setdefault("sdst", _operand_values(r, "sdst", None, 32, type(list(ops.values())[0][2]).OPR_SDST, dst) if ops else None)
    else:
      for f, spec in ops.items():
        if spec is None:
          from tinygrad.renderer.amd.dsl import NULL
          fields[f] = NULL
          continue
        fmt, bits, ot = spec
        if f in ("simm16", "simm32"):
          fields[f] = r.getrandbits(16 if f == "simm16" else 32)
          continue
        if "WMMA" in op.name: ot = type(ot).OPR_VGPR   # (WMMA takes VGPR matrices only)
        fields[f] = _operand_values(r, f, fmt, bits, ot, dst)
      if cls_name in ("VOP3", "VOP3_SDST", "VOP3SD") and any(f is not None and _fmt(f[0]) in FLOAT_FMTS
                                                             for k, f in ops.items() if k.startswith("src")):
        nsrc = sum(1 for k in ops if k.startswith("src"))
        if cls_name != "VOP3SD" and r.random() < 0.5: fields["abs"] = r.getrandbits(nsrc)
        if r.random() < 0.5: fields["neg"] = r.getrandbits(nsrc)
    try: i = _build(cls, op, {k: val for k, val in fields.items() if val is not None})
    except Exception: continue
    b = i.to_bytes()
    if b not in out: out.append(b)
  return out

def vopd_encodings(r: random.Random) -> list:
  from tinygrad.renderer.amd.dsl import v, s
  ins, enum = _ins(), _enum()
  out = []
  ops = list(enum.VOPDOp)
  for opx in ops:
    for _ in range(2):
      opy = r.choice(ops)
      srcx = r.choice([v[r.randrange(0, 16)], s[r.randrange(0, 16)], 1.0, 7, 0x3FC00000])
      try: i = ins.VOPD(opx, opy, v[16 + 2 * r.randrange(0, 6)], v[17 + 2 * r.randrange(0, 6)], srcx, v[r.randrange(0, 16)],
                        v[r.randrange(0, 16)], v[r.randrange(0, 16)])
      except Exception: continue
      out.append(i.to_bytes())
  return out

def memory_encoding(op):
  """One encoding of a memory opcode (the executor's support of memory is tested elsewhere; here every opcode is at
  least run once, to be executed or faulted as unsupported by name)."""
  from tinygrad.renderer.amd.dsl import v, s, NULL
  ins = _ins()
  cls = getattr(ins, type(op).__name__[:-2])
  for kw in ({}, {"vdst": v[16], "addr": v[0], "data": v[2], "saddr": NULL}, {"sdata": s[16], "sbase": s[0], "soffset": NULL},
             {"vdst": v[16], "addr": v[0], "data0": v[2], "data1": v[4]}):
    try: return cls(op, **kw).to_bytes()
    except Exception: continue
  return None

def campaign_cases(per_op: int = 6, seed: int = 0) -> list:
  """[(opcode name, instruction bytes hex, state seed, float mode)] over every opcode with pseudocode, and VOPD."""
  from tinygrad.runtime.autogen.amd.rdna3.str_pcode import PCODE
  r = random.Random(seed)
  out = []
  for op in sorted(PCODE, key=lambda o: (type(o).__name__, o.value)):
    en = type(op).__name__
    if en in MEMORY:
      b = memory_encoding(op)
      if b is not None: out.append((op.name, b.hex(), r.getrandbits(31), 0xF0))
      continue
    if en not in ENC: continue
    for b in encodings(op, r, per_op):
      for k in range(2):
        out.append((op.name, b.hex(), r.getrandbits(31), 0x00 if k and r.random() < 0.25 else 0xF0))
  for b in vopd_encodings(r): out.append(("VOPD", b.hex(), r.getrandbits(31), 0xF0))
  return out

# ---- running on this executor

CODE_ADDR = 0x10000

def run_ours(code: bytes, seed: int, float_mode: int):
  """(s, v, scc, pc offset) after one instruction on hcqdsl's executor, or the fault's message."""
  from hcqdsl.runtime.device import Memory
  from hcqdsl.target.engine import DeviceFault
  from hcqdsl.runtime.isa.rdna3 import AmdKernel, Launch, Wave
  st = state(seed)
  mem = Memory()
  mem.add(CODE_ADDR, 64, "code")
  mem.write(CODE_ADDR, code.ljust(64, b"\0"))
  k = AmdKernel("case")
  k.step_limit = 0   # the fault after the first instruction: the state after exactly one
  launch = Launch(k, mem, CODE_ADDR, True, float_mode, 0)
  w = Wave(CODE_ADDR, 0)
  w.s[:] = np.array(st["s"], np.uint64)
  w.v[:] = st["v"]
  w.scc = st["scc"]
  try: k.run_workgroup(launch, [w], (0, 0, 0), 0)
  except DeviceFault as e:
    if "more than 0 instructions in one dispatch" not in str(e): return str(e).split("`: ", 1)[-1]
  return np.array(w.s, np.uint64), np.array(w.v, np.uint64), int(w.scc), int(w.pc) - CODE_ADDR

# ---- comparing

def _canon(d: np.ndarray, fmt: str, regs: list) -> None:
  """NaNs made canonical in place in the destination registers `regs` (rows of d, 32-bit words per lane)."""
  for r in regs:
    if r >= len(d): continue
    x = d[r]
    if fmt in ("F32",):
      nan = ((x & 0x7F800000) == 0x7F800000) & ((x & 0x7FFFFF) != 0)
      x[nan] = 0x7FC00000
    elif fmt in ("BF16",):   # (WMMA's bf16 results sit in the low halves)
      h = x & 0xFFFF
      nan = ((h & 0x7F80) == 0x7F80) & ((h & 0x7F) != 0)
      x[nan] = (x[nan] & ~np.uint64(0xFFFF)) | np.uint64(0x7FC0)
    elif fmt in ("F16", "PK2_F16"):
      for sh in (0, 16):
        h = (x >> sh) & 0xFFFF
        nan = ((h & 0x7C00) == 0x7C00) & ((h & 0x3FF) != 0)
        x[nan] = (x[nan] & ~np.uint64(0xFFFF << sh)) | np.uint64(0x7E00 << sh)

def _canon64(lo: np.ndarray, hi: np.ndarray) -> None:
  nan = ((hi & 0x7FF00000) == 0x7FF00000) & (((hi & 0xFFFFF) != 0) | (lo != 0))
  hi[nan], lo[nan] = 0x7FF80000, 0

def _dests(code: bytes):
  """(name, d number format, VGPR destination rows, SGPR destination rows) of an instruction."""
  from hcqdsl.runtime.isa.rdna3 import decode, operand_formats
  i = decode(code.ljust(16, b"\0"))
  if not hasattr(i, "op"):
    return "VOPD", "F32", [i.vdstx.offset - 256, i.vdsty.offset - 256], []
  fmts = operand_formats(i.op)
  fmt = fmts.get("d", "B32").replace("FMT_WMMA_DC_", "")
  bits = i.canonical_op_bits.get("d", 32) if "WMMA" not in i.op.name else 256   # a WMMA's D: 8 VGPRs
  vd, sd = [], []
  for f in ("vdst", "sdst"):
    if f in {n for n, _ in i._fields}:
      o = getattr(i, f).offset
      if o >= 256: vd += [o - 256 + k for k in range(max(1, bits // 32))]
      else: sd.append(o)
  return i.op.name, fmt, vd, sd

def normalized(code: bytes, res):
  """The state with destination NaNs canonical (see the module docstring)."""
  if isinstance(res, str): return res
  s, v, scc, pc = res
  s, v = s.copy().astype(np.uint64), v.copy().astype(np.uint64)
  name, fmt, vd, sd = _dests(code)
  if fmt == "F64" and len(vd) == 2: _canon64(v[vd[0]], v[vd[1]])
  else: _canon(v, fmt, vd)
  return s, v, scc, pc

def digest(code: bytes, res) -> str:
  """A short hash of the normalized state (or 'fault: ...')."""
  res = normalized(code, res)
  if isinstance(res, str): return "fault"
  s, v, scc, pc = res
  h = hashlib.sha256()
  h.update(s.astype("<u4").tobytes())
  h.update(v.astype("<u4").tobytes())
  h.update(struct.pack("<qQ", scc, pc & 0xFFFFFFFFFFFFFFFF))
  return h.hexdigest()[:16]

def _ulp_diff(a: np.ndarray, b: np.ndarray, fmt: str) -> np.ndarray:
  if fmt == "F16":
    def key(x):
      x = (x & 0xFFFF).astype(np.int64)
      return np.where(x & 0x8000, -(x & 0x7FFF), x)
  else:
    def key(x):
      x = (x & 0xFFFFFFFF).astype(np.int64)
      return np.where(x & 0x80000000, -(x & 0x7FFFFFFF), x)
  return np.abs(key(a) - key(b))

def agree(code: bytes, a, b) -> tuple:
  """(True, '') when states a and b agree, else (False, what differs)."""
  a, b = normalized(code, a), normalized(code, b)
  if isinstance(a, str) or isinstance(b, str):
    return (a == b, "" if a == b else f"{a!r} / {b!r}") if isinstance(a, str) and isinstance(b, str) else \
           (False, f"{a if isinstance(a, str) else 'ran'} / {b if isinstance(b, str) else 'ran'}")
  name, fmt, vd, sd = _dests(code)
  sa, va, cca, pca = a
  sb, vb, ccb, pcb = b
  what = []
  if pca != pcb: what.append(f"pc {pca:#x} / {pcb:#x}")
  if cca != ccb: what.append(f"scc {cca} / {ccb}")
  for i in np.nonzero(sa[:128] != sb[:128])[0][:4]: what.append(f"s{i} {int(sa[i]):#x} / {int(sb[i]):#x}")
  dv = va != vb
  if dv.any():
    rows = sorted(set(np.nonzero(dv)[0]))
    tolerant = name.replace("_E32", "").replace("_E64", "") in TOLERANT and fmt in ("F32", "F16") and set(rows) <= set(vd)
    for rr in rows:
      if tolerant and (_ulp_diff(va[rr], vb[rr], fmt) <= ULPS).all(): continue
      lanes = np.nonzero(dv[rr])[0]
      what.append(f"v{rr} lanes {list(lanes[:4])}: {[hex(int(x)) for x in va[rr][lanes[:3]]]} / {[hex(int(x)) for x in vb[rr][lanes[:3]]]}")
  return (not what, "; ".join(what))

# ---- tinygrad's emulator, in a worker process

def tinygrad_worker():
  """Reads JSON lines [code hex, seed, float mode] on stdin, writes the state after the instruction (hex of s, v, scc,
  pc offset) or {"error": ...} for each, using tinygrad's test/mockgpu/amd/emu.py."""
  import ctypes, contextlib
  os.environ.setdefault("DEV", "CPU")
  from test.mockgpu.amd import emu
  from tinygrad.renderer.amd import decode_inst
  from tinygrad.device import Buffer
  from tinygrad.dtype import dtypes
  lds = Buffer("CPU", 16384, dtypes.uint32).ensure_allocated()
  scratch = Buffer("CPU", 1 << 16, dtypes.uint8).ensure_allocated()
  for line in sys.stdin:
    code_hex, seed, float_mode = json.loads(line)
    code = bytes.fromhex(code_hex)
    try:
      st = state(seed)
      buf = ctypes.create_string_buffer(code.ljust(64, b"\0"), 64)
      pc = ctypes.addressof(buf)
      ws = emu.WaveState(32)
      sg = ws._sgpr_mv
      for i, x in enumerate(st["s"]): sg[i] = x
      sg[253] = st["scc"]
      np.frombuffer((ctypes.c_uint32 * (256 * 32)).from_address(ws.vgpr_buf._buf.va_addr), np.uint32)[:] = \
        st["v"].astype(np.uint32).reshape(-1)
      ws.pc = pc
      inst = decode_inst(code.ljust(16, b"\0"), "rdna3")
      prg, runtime = emu._get_runner(bytes(code.ljust(16, b"\0")[:inst.size() + 4]), "rdna3")
      bufs = [ctypes.c_uint64(ws.sgpr_buf._buf.va_addr), ctypes.c_uint64(ws.vgpr_buf._buf.va_addr), ctypes.c_uint64(0),
              ctypes.c_uint64(lds._buf.va_addr), ctypes.c_uint64(scratch._buf.va_addr), ctypes.c_uint64(ws.vgpr_buf._buf.va_addr)]
      ctx = emu._MXCSRContext() if float_mode == 0 else contextlib.nullcontext()
      with ctx: runtime.fxn(*[bufs[g] for g in prg.arg.globals])
      s = np.array([sg[i] for i in range(128)], np.uint32)
      v = np.frombuffer((ctypes.c_uint32 * (256 * 32)).from_address(ws.vgpr_buf._buf.va_addr), np.uint32).copy()
      npc = ws.pc
      out = {"s": s.tobytes().hex(), "v": v.tobytes().hex(), "scc": int(sg[253]) & 1,
             "pc": -1 if npc == emu.ENDPGM_PC else npc - pc}
    except Exception as e:
      out = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()

def run_tinygrad(cases: list) -> list:
  """tinygrad's emulator's states for [(code bytes, seed, float mode)] (None: the peer is not there). A case that
  kills the worker (a crash in tinygrad's emulator) is 'tinygrad: crashed' and the worker is started again."""
  p = peer()
  if p is None: return None
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(p), str(ROOT)]), DEV="CPU")
  def start():
    return subprocess.Popen([sys.executable, str(pathlib.Path(__file__).resolve()), "--tinygrad-worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=str(p))
  proc, out = start(), []
  for code, seed, fm in cases:
    try:
      proc.stdin.write(json.dumps([code.hex(), seed, fm]) + "\n")
      proc.stdin.flush()
      line = proc.stdout.readline()
    except BrokenPipeError: line = ""
    if not line:
      out.append("tinygrad: crashed")
      proc.kill()
      proc = start()
      continue
    d = json.loads(line)
    if "error" in d:
      out.append("tinygrad: " + d["error"])
      continue
    s = np.frombuffer(bytes.fromhex(d["s"]), np.uint32).astype(np.uint64)
    v = np.frombuffer(bytes.fromhex(d["v"]), np.uint32).astype(np.uint64).reshape(256, 32)
    out.append((s, v, d["scc"], d["pc"]))
  proc.stdin.close()
  proc.wait()
  return out

def _is_memory(code: bytes) -> bool:
  from hcqdsl.runtime.isa.rdna3 import decode
  try: i = decode(code.ljust(16, b"\0"))
  except Exception: return True
  return type(i).__name__.replace("_LIT", "") in ("DS", "FLAT", "GLOBAL", "SCRATCH", "SMEM", "MUBUF", "MTBUF", "MIMG", "LDSDIR")

# ---- the campaign

def _tinygrad_cache() -> pathlib.Path:
  from hcqdsl.host_cc import cache_dir
  return pathlib.Path(cache_dir()) / "rdna3-tinygrad-states.pkl"

def campaign(per_op: int = 6, cache: bool = True) -> dict:
  """Run every case on tinygrad's emulator and on this executor. Returns {"cases": [...], "results": [...],
  "tinygrad": [...]}. tinygrad's states are kept in a cache file (by case) when `cache`, so a rerun only asks tinygrad
  about new cases."""
  import pickle
  cases = campaign_cases(per_op)
  alu = [i for i, (n, c, _, _) in enumerate(cases) if not _is_memory(bytes.fromhex(c))]
  known = {}
  if cache and _tinygrad_cache().exists():
    with open(_tinygrad_cache(), "rb") as f: known = pickle.load(f)
  todo = [i for i in alu if (cases[i][1], cases[i][2], cases[i][3]) not in known]
  got = run_tinygrad([(bytes.fromhex(cases[i][1]), cases[i][2], cases[i][3]) for i in todo]) if todo else []
  if got is None: raise RuntimeError(PEER_MISSING)
  for i, r in zip(todo, got): known[(cases[i][1], cases[i][2], cases[i][3])] = r
  if cache and todo:
    with open(_tinygrad_cache(), "wb") as f: pickle.dump(known, f)
  got = [known[(cases[i][1], cases[i][2], cases[i][3])] for i in alu]
  tg = ["tinygrad: not run (a memory instruction: its addresses are host addresses there)"] * len(cases)
  for i, r in zip(alu, got): tg[i] = r
  return {"cases": cases, "results": [run_ours(bytes.fromhex(c), seed, fm) for _, c, seed, fm in cases], "tinygrad": tg}

def summarize(c: dict) -> dict:
  """Per opcode: cases, agree, unsupported (this executor faults naming it unsupported), tg_unsupported (tinygrad's
  emulator cannot run it), differ (with FLOAT_MODE 0xF0, tinygrad's kernels' mode) and differ_flush (FLOAT_MODE 0:
  tinygrad's emulator models denormal flushing with x86 DAZ/FTZ, which does not touch selected operands, f16
  conversions or compares the way the GPU's flush does), each difference as (bytes, seed, mode, what)."""
  per: dict = {}
  for (name, code, seed, fm), ours, tg in zip(c["cases"], c["results"], c["tinygrad"]):
    b = bytes.fromhex(code)
    e = per.setdefault(name, {"agree": 0, "differ": [], "differ_flush": [], "unsupported": 0, "tg_unsupported": 0, "cases": 0})
    e["cases"] += 1
    if isinstance(ours, str) and "unsupported" in ours:
      e["unsupported"] += 1
      continue
    if isinstance(tg, str):
      e["tg_unsupported"] += 1
      continue
    ok, what = agree(b, ours, tg)
    if ok: e["agree"] += 1
    else: e["differ" if fm == 0xF0 else "differ_flush"].append((code, seed, fm, what))
  return per

def record(path: pathlib.Path = CASES, per_op: int = 3):
  """Write the recorded cases: per case the opcode, bytes, seed, float mode and tinygrad's outcome (the digest of its
  normalized state, or its full destination rows for the TOLERANT opcodes, or 'tinygrad: ...' when it cannot run it)."""
  c = campaign(per_op)
  rows = []
  for (name, code, seed, fm), tg, ours in zip(c["cases"], c["tinygrad"], c["results"]):
    b = bytes.fromhex(code)
    if isinstance(tg, str): exp = tg
    elif name.replace("_E32", "").replace("_E64", "") in TOLERANT:
      s, v, scc, pc = normalized(b, tg)
      _, _, vd, _ = _dests(b)
      exp = {"digest_except": vd, "rows": {str(r): [int(x) for x in v[r]] for r in vd},
             "rest": _digest_without(b, tg, vd)}
    else: exp = digest(b, tg)
    rows.append([name, code, seed, fm, exp])
  with gzip.open(path, "wt") as f: json.dump({"cases": rows}, f, separators=(",", ":"))
  return rows

def _digest_without(code: bytes, res, rows: list) -> str:
  s, v, scc, pc = normalized(code, res)
  v = v.copy()
  v[rows] = 0
  h = hashlib.sha256()
  h.update(s.astype("<u4").tobytes())
  h.update(v.astype("<u4").tobytes())
  h.update(struct.pack("<qQ", scc, pc & 0xFFFFFFFFFFFFFFFF))
  return h.hexdigest()[:16]

def check_recorded(code: bytes, fm_res, exp) -> bool:
  """Does this executor's state agree with a recorded tinygrad outcome?"""
  if isinstance(exp, str) and exp.startswith("tinygrad:"): return False
  if isinstance(exp, dict):
    if isinstance(fm_res, str): return False
    name, fmt, vd, sd = _dests(code)
    s, v, scc, pc = normalized(code, fm_res)
    for r, vals in exp["rows"].items():
      if (_ulp_diff(v[int(r)], np.array(vals, np.uint64), fmt) > ULPS).any(): return False
    return _digest_without(code, fm_res, exp["digest_except"]) == exp["rest"]
  return digest(code, fm_res) == exp

def load_recorded(path: pathlib.Path = CASES) -> list:
  with gzip.open(path, "rt") as f: return json.load(f)["cases"]

if __name__ == "__main__":
  import argparse
  ap = argparse.ArgumentParser()
  ap.add_argument("--tinygrad-worker", action="store_true")
  ap.add_argument("--campaign", action="store_true")
  ap.add_argument("--record", action="store_true")
  ap.add_argument("--per-op", type=int, default=6)
  a = ap.parse_args()
  if a.tinygrad_worker:
    tinygrad_worker()
    sys.exit(0)
  sys.path.insert(0, str(ROOT))
  if a.record:
    print(len(record(per_op=a.per_op)), "cases recorded in", CASES)
    sys.exit(0)
  if a.campaign:
    c = campaign(a.per_op)
    per = summarize(c)
    agree_ops = sum(1 for e in per.values() if e["agree"] and not e["differ"] and not e["unsupported"])
    unsup = sum(1 for e in per.values() if e["unsupported"] == e["cases"])
    differ = {n: e for n, e in per.items() if e["differ"]}
    print(f"{len(c['cases'])} cases over {len(per)} opcodes: {agree_ops} agree, {unsup} unsupported, {len(differ)} differ")
    for n, e in sorted(differ.items()): print(f"  {n}: {len(e['differ'])}/{e['cases']} differ, e.g. {e['differ'][0][3][:200]}")
