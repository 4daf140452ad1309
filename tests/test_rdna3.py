"""The RDNA3 executor: the example workloads' real gfx1100 code objects (committed under tests/amd_code/, produced by
`hcqdsl emit --amd-code`) against tinygrad's numbers and the C kernels; single instructions on edge values against
the pseudocode's meaning; faults."""
import os, pathlib, shutil, subprocess, sys
from fractions import Fraction
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from tinygrad.runtime.autogen.amd.rdna3.ins import (SOP1, SOP2, SOPC, SOPP, VOP1, VOP2, VOP3, VOP3SD, VOPC, VOPD, DS,
                                                    GLOBAL, SMEM)
from tinygrad.runtime.autogen.amd.rdna3.enum import (SOP1Op, SOP2Op, SOPCOp, SOPPOp, VOP1Op, VOP2Op, VOP3Op, VOP3SDOp,
                                                     VOPCOp, VOPDOp, DSOp, GLOBALOp, SMEMOp)
from tinygrad.renderer.amd.dsl import v, s, VCC, NULL
from hcqdsl.runtime import run
from hcqdsl.runtime.device import Memory
from hcqdsl.target.engine import DeviceFault
from hcqdsl.runtime.isa.rdna3 import AmdKernel, Launch, Wave, STATS, EXEC, coverage

ROOT = pathlib.Path(__file__).parent.parent
CODE = pathlib.Path(__file__).parent / "amd_code"
EXAMPLES = ["allreduce", "conv", "copy_chain", "matmul_sum", "mlp_train", "shard_matmul", "stress", "stress2", "stress3", "half"]
CORPUS = ["dtypes", "math", "reduce", "rand", "tc"]   # checked against tinygrad's emulator in test_rdna3_corpus.py
SCRIPTS = {n: f"examples/tinygrad/{n}.py" for n in EXAMPLES} | \
          {n: f"tests/amd_code/{n}/{n}.py" for n in ("stress", "stress2", "stress3", "half", *CORPUS)}

# ---- the example workloads

@pytest.mark.parametrize("name", EXAMPLES)
def test_example_machine_code(name):
  """`run --kernels amd` executes every kernel's machine code, passes the program's expects (tinygrad's numbers) and
  leaves the same buffers as `--kernels c` (to float rounding: the C kernels contract differently)."""
  f = CODE / name / f"{name}.hcq"
  src = f.read_text()
  i0 = STATS.instructions
  amd = run(src, filename=str(f), kernels="amd")
  ran = STATS.instructions - i0
  assert amd.ok, amd.summary()
  assert ran > 0 and amd.expects and all(e.ok for e in amd.expects)
  c = run(src, filename=str(f), kernels="c")
  assert c.ok, c.summary()
  assert STATS.instructions - i0 == ran   # the C run executes no machine code
  compared = 0
  for b, data in amd.memory.items():
    x, y = np.frombuffer(data, np.uint8), np.frombuffer(c.memory[b], np.uint8)
    if len(x) % 4:
      assert (x == y).all(), b
      compared += 1
      continue
    fx, fy = x.view("<f4"), y.view("<f4")
    assert np.allclose(fx, fy, rtol=1e-5, atol=1e-6, equal_nan=True), b
    compared += 1
  assert compared == len(amd.memory) > 0

def test_cli_kernels_flag(capsys):
  from hcqdsl.cli import main
  f = CODE / "matmul_sum" / "matmul_sum.hcq"
  assert main(["run", str(f), "--kernels", "amd"]) == 0
  assert main(["run", str(f), "--kernels", "c"]) == 0
  assert "ok" in capsys.readouterr().out

def test_every_example_opcode_is_covered():
  """Each opcode in the committed code objects is one the executor implements (and the list the docs give)."""
  from hcqdsl.amd.codeobj import from_elf
  from hcqdsl.amd.targets import get_target
  from hcqdsl.runtime.isa.rdna3 import decode
  cov, used = set(coverage()), set()
  for co_file in CODE.glob("*/*.co"):
    co = from_elf(get_target("gfx1100"), co_file.read_bytes())
    pc, img = co.entry_offset, co.image
    while True:
      ins = decode(img[pc:pc + 16].ljust(16, b"\0"))
      names = [ins.opx.name, ins.opy.name] if hasattr(ins, "opx") else [ins.op.name]
      used.update(names)
      pc += ins.size()
      if names[0] == "S_ENDPGM": break
  assert len(used) > 40 and used <= cov, sorted(used - cov)

# ---- single instructions

CODE_ADDR, DATA_ADDR = 0x10000, 0x20000

def execute(insts, sgpr=None, vgpr=None, lanes=32, float_mode=0xF0, ieee=True, lds=0, data=b"", waves=1):
  """Run `insts` + s_endpgm as `waves` waves of one workgroup; returns (waves, memory)."""
  mem = Memory()
  code = b"".join(i.to_bytes() for i in insts) + SOPP(SOPPOp.S_ENDPGM).to_bytes()
  mem.add(CODE_ADDR, len(code) + 16, "code")
  mem.write(CODE_ADDR, code)
  if data:
    mem.add(DATA_ADDR, len(data), "data")
    mem.write(DATA_ADDR, data)
  k = AmdKernel("t")
  launch = Launch(k, mem, CODE_ADDR, ieee, float_mode, lds)
  ws = []
  for i in range(waves):
    w = Wave(CODE_ADDR, i)
    for r, x in (sgpr or {}).items(): w.s[r] = np.uint64(x)
    for r, x in (vgpr or {}).items(): w.v[r] = np.asarray(x, np.uint64)
    w.s[EXEC] = np.uint64((1 << lanes) - 1)
    ws.append(w)
  k.run_workgroup(launch, ws, (0, 0, 0), 0)
  return ws, mem

def f2b(x) -> int: return int(np.float32(x).view(np.uint32))
def b2f(x) -> float: return float(np.uint32(int(x) & 0xFFFFFFFF).view(np.float32))
def lanes(*xs): return np.resize(np.array(xs, np.uint64), 32)

NAN, QNAN_PAYLOAD, SNAN = 0x7FC00000, 0x7FC00123, 0x7F800001
DENORM = 0x00000005

def vop2(op, a, b, **kw):
  (w,), _ = execute([VOP2(op, v[0], v[1], v[2])], vgpr={1: lanes(*a), 2: lanes(*b)}, **kw)
  return [int(x) for x in w.v[0][:len(a)]]

def test_f32_nan_and_signed_zero():
  assert vop2(VOP2Op.V_ADD_F32_E32, [NAN, f2b(1)], [f2b(1), f2b(np.inf)]) == [NAN, f2b(np.inf)]
  # v_max_f32 in IEEE mode: a quiet NaN loses to a number, a signaling NaN wins quieted; +0 > -0
  got = vop2(VOP2Op.V_MAX_F32_E32, [QNAN_PAYLOAD, f2b(2), SNAN, f2b(-0.0)], [f2b(1), QNAN_PAYLOAD, f2b(3), f2b(0.0)])
  assert got == [f2b(1), f2b(2), SNAN | 0x400000, f2b(0.0)]
  got = vop2(VOP2Op.V_MIN_F32_E32, [f2b(0.0), SNAN], [f2b(-0.0), f2b(3)], ieee=False)
  assert got == [f2b(-0.0), f2b(3)]   # non-IEEE mode: any NaN loses
  assert vop2(VOP2Op.V_MUL_F32_E32, [f2b(np.inf)], [f2b(0)])[0] & 0x7FC00000 == NAN

def test_f32_denormals_follow_the_float_mode():
  """FLOAT_MODE's FP32 denormal field (PGM_RSRC1): 3 keeps denormals (what tinygrad's kernels use), 0 flushes inputs
  and results to signed zero."""
  assert vop2(VOP2Op.V_MUL_F32_E32, [DENORM], [f2b(1.0)], float_mode=0xF0) == [DENORM]
  assert vop2(VOP2Op.V_MUL_F32_E32, [DENORM | 0x80000000], [f2b(1.0)], float_mode=0x00) == [0x80000000]
  assert vop2(VOP2Op.V_ADD_F32_E32, [f2b(1.5e-38)], [f2b(-1.2e-38)], float_mode=0xF0)[0] != 0
  assert vop2(VOP2Op.V_ADD_F32_E32, [f2b(1.5e-38)], [f2b(-1.2e-38)], float_mode=0x00) == [0]
  # integer results are never flushed, whatever the mode
  (w,), _ = execute([VOP1(VOP1Op.V_CVT_I32_F32_E32, v[0], v[1])], vgpr={1: lanes(f2b(5.7), f2b(-3.2), f2b(3e9), NAN)},
                    float_mode=0x00)
  assert [int(x) for x in w.v[0][:4]] == [5, (-3) & 0xFFFFFFFF, 0x7FFFFFFF, 0]

def _round_f32(q: Fraction) -> int:
  """q rounded to the nearest f32 (ties to even), as bits."""
  f = np.float32(float(q))
  cands = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
  best = min(cands, key=lambda c: (abs(Fraction(float(c)) - q), int(np.float32(c).view(np.uint32)) & 1))
  return f2b(best)

f32s = st.floats(-2.0**49, 2.0**49, width=32).map(f2b)   # products stay finite; denormals and -0.0 included
nonzero = f32s.filter(lambda b: b & 0x7FFFFFFF)

@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(nonzero, nonzero, f32s), min_size=32, max_size=32))
def test_fma_rounds_once(triples):
  """v_fma_f32 is fused: a*b+c rounded once (checked against exact rational arithmetic), not twice."""
  a, b, c = (np.array(x, np.uint64) for x in zip(*triples))
  (w,), _ = execute([VOP3(VOP3Op.V_FMA_F32, v[0], v[1], v[2], v[3])], vgpr={1: a, 2: b, 3: c})
  compared = 0
  for i in range(32):
    q = Fraction(b2f(a[i])) * Fraction(b2f(b[i])) + Fraction(b2f(c[i]))
    if q == 0 or abs(q) >= Fraction(float(np.finfo(np.float32).max)): continue
    assert int(w.v[0][i]) == _round_f32(q), (hex(int(a[i])), hex(int(b[i])), hex(int(c[i])))
    compared += 1
  assert compared >= 16

def test_fma_double_rounding_case():
  # a*b+c lands just above a tie of the f32 grid: one rounding goes up, rounding through f64 first would tie to even
  a, b, c = f2b(1 + 2**-23), f2b(1 - 2**-24), f2b(2**-48)
  q = Fraction(b2f(a)) * Fraction(b2f(b)) + Fraction(b2f(c))
  (w,), _ = execute([VOP3(VOP3Op.V_FMA_F32, v[0], v[1], v[2], v[3])], vgpr={1: lanes(a), 2: lanes(b), 3: lanes(c)})
  assert int(w.v[0][0]) == _round_f32(q)

def test_integer_overflow_and_carries():
  (w,), _ = execute([SOP2(SOP2Op.S_ADD_U32, s[2], s[0], s[1]), SOP2(SOP2Op.S_ADDC_U32, s[3], s[4], s[4])],
                    sgpr={0: 0xFFFFFFFF, 1: 2, 4: 0})
  assert (int(w.s[2]), int(w.s[3]), w.scc) == (1, 1, 0)   # carry into s_addc_u32
  (w,), _ = execute([SOP2(SOP2Op.S_ADD_I32, s[2], s[0], s[1])], sgpr={0: 0x7FFFFFFF, 1: 1})
  assert (int(w.s[2]), w.scc) == (0x80000000, 1)          # signed overflow sets SCC
  (w,), _ = execute([SOP2(SOP2Op.S_MUL_I32, s[2], s[0], s[1])], sgpr={0: 0xFFFFFFFF, 1: 0x7FFFFFFF})
  assert int(w.s[2]) == 0x80000001
  (w,), _ = execute([VOP3SD(VOP3SDOp.V_ADD_CO_U32, v[0], VCC, v[1], v[2]),
                     VOP2(VOP2Op.V_ADD_CO_CI_U32_E32, v[3], v[4], v[4])],
                    vgpr={1: lanes(0xFFFFFFFF, 5), 2: lanes(1, 6), 4: lanes(0, 0)}, lanes=2)
  # lane 0 carried out of v_add_co_u32 into VCC, and v_add_co_ci_u32 added that carry (its own carry-out is 0)
  assert [int(x) for x in w.v[0][:2]] == [0, 11] and [int(x) for x in w.v[3][:2]] == [1, 0] and int(w.s[106]) == 0
  (w,), _ = execute([VOP3SD(VOP3SDOp.V_ADD_CO_U32, v[0], s[8], v[1], v[2])], vgpr={1: lanes(0xFFFFFFFF, 5, 0xFFFFFFFF),
                    2: lanes(1, 6, 1)}, sgpr={8: 0xF0}, lanes=2)
  assert int(w.s[8]) == 0x1   # one carry bit per active lane; inactive lanes' bits are 0 (the hardware's rule)
  (w,), _ = execute([VOP3SD(VOP3SDOp.V_MAD_U64_U32, v[0:1], s[10], v[2], v[3], v[4:5])],
                    vgpr={2: lanes(0xFFFFFFFF), 3: lanes(0xFFFFFFFF), 4: lanes(0xFFFFFFFF), 5: lanes(0xFFFFFFFF)}, lanes=1)
  full = 0xFFFFFFFF * 0xFFFFFFFF + 0xFFFFFFFFFFFFFFFF
  assert int(w.v[0][0]) | int(w.v[1][0]) << 32 == full & (2**64 - 1) and int(w.s[10]) & 1 == full >> 64

def test_shifts_of_32_and_more():
  # 32-bit vector shifts use the low 5 bits of the amount, 64-bit ones the low 6
  assert vop2(VOP2Op.V_LSHLREV_B32_E32, [33, 32, 31], [1, 1, 1]) == [2, 1, 0x80000000]
  assert vop2(VOP2Op.V_ASHRREV_I32_E32, [31, 63], [0x80000000, 0x80000000]) == [0xFFFFFFFF, 0xFFFFFFFF]
  (w,), _ = execute([SOP2(SOP2Op.S_LSHL_B64, s[2:3], s[0:1], s[4]), SOP2(SOP2Op.S_LSHL_B64, s[6:7], s[0:1], s[5])],
                    sgpr={0: 3, 1: 0, 4: 63, 5: 64})
  assert int(w.s[2]) | int(w.s[3]) << 32 == (3 << 63) & (2**64 - 1) and (int(w.s[6]), int(w.s[7])) == (3, 0)
  (w,), _ = execute([VOP3(VOP3Op.V_LSHLREV_B64, v[0:1], v[2], v[4:5])], vgpr={2: lanes(40), 4: lanes(0xFF), 5: lanes(0)})
  assert int(w.v[0][0]) | int(w.v[1][0]) << 32 == 0xFF << 40

def test_exec_mask_branches_and_compares():
  # inactive lanes keep their values; v_cmp writes one VCC bit per active lane; v_cmpx narrows EXEC
  prog = [VOPC(VOPCOp.V_CMP_LT_F32_E32, v[1], v[2]), VOP2(VOP2Op.V_CNDMASK_B32_E32, v[0], v[3], v[4]),
          VOPC(VOPCOp.V_CMPX_EQ_U32_E32, 7, v[5]), VOP1(VOP1Op.V_MOV_B32_E32, v[6], 42)]
  (w,), _ = execute(prog, vgpr={1: lanes(f2b(1), f2b(3), f2b(1), f2b(9)), 2: lanes(f2b(2)), 3: lanes(10), 4: lanes(20),
                                5: lanes(7, 7, 8, 7), 0: lanes(99), 6: lanes(5)}, lanes=3)
  assert int(w.s[106]) == 0b101 and [int(x) for x in w.v[0][:4]] == [20, 10, 20, 99]
  assert int(w.s[EXEC]) == 0b011 and [int(x) for x in w.v[6][:4]] == [42, 42, 5, 5]
  # s_cbranch_scc1 over an instruction, a loop with s_cmp / s_cbranch
  loop = [SOP2(SOP2Op.S_ADD_U32, s[0], s[0], 1), SOPC(SOPCOp.S_CMP_LT_U32, s[0], 10), SOPP(SOPPOp.S_CBRANCH_SCC1, simm16=0xFFFD)]
  (w,), _ = execute(loop, sgpr={0: 0})
  assert int(w.s[0]) == 10

def test_vopd_reads_both_sources_first():
  (w,), _ = execute([VOPD(VOPDOp.V_DUAL_MOV_B32, VOPDOp.V_DUAL_MOV_B32, v[0], v[1], v[1], v[0])],
                    vgpr={0: lanes(1), 1: lanes(2)})
  assert (int(w.v[0][0]), int(w.v[1][0])) == (2, 1)

def test_memory_lds_and_barrier():
  """Wave 0 stores to LDS, both waves meet at s_barrier, wave 1 loads what wave 0 stored; scalar and global memory."""
  prog = [SOP1(SOP1Op.S_MOV_B32, s[2], s[5]),   # s5: the wave's id, set below
          SOPC(SOPCOp.S_CMP_EQ_U32, s[2], 0), SOPP(SOPPOp.S_CBRANCH_SCC0, simm16=2),
          DS(DSOp.DS_STORE_B32, addr=v[0], data0=v[1]),
          SOPP(SOPPOp.S_BARRIER),
          DS(DSOp.DS_LOAD_B32, vdst=v[2], addr=v[0])]
  data = np.arange(32, dtype="<u4").tobytes()
  ws, _ = execute(prog, vgpr={0: np.arange(32, dtype=np.uint64) * 4, 1: np.arange(32, dtype=np.uint64) + 100},
                  lds=128, waves=2)
  ws2, _ = execute(prog, vgpr={0: np.arange(32, dtype=np.uint64) * 4, 1: np.arange(32, dtype=np.uint64) + 100},
                   sgpr={5: 1}, lds=128)
  assert [int(x) for x in ws[1].v[2][:3]] == [100, 101, 102]   # wave 1 sees wave 0's stores after the barrier
  assert int(ws2[0].v[2][0]) == 0                               # a lone wave 1 stores nothing
  prog = [SMEM(SMEMOp.S_LOAD_B64, s[2:3], s[0:1], NULL, 8),
          GLOBAL(GLOBALOp.GLOBAL_LOAD_B32, vdst=v[1], addr=v[0], saddr=s[0:1]),
          GLOBAL(GLOBALOp.GLOBAL_STORE_B32, addr=v[0], data=v[1], saddr=s[0:1], offset=64)]
  (w,), mem = execute(prog, sgpr={0: DATA_ADDR, 1: 0}, vgpr={0: np.arange(32, dtype=np.uint64) * 4 % 64}, data=data,
                      lanes=16)
  assert (int(w.s[2]), int(w.s[3])) == (2, 3)
  assert list(np.frombuffer(mem.view(DATA_ADDR + 64, 64).tobytes(), "<u4")) == list(range(16))

def test_executor_faults():
  with pytest.raises(DeviceFault, match=r"kernel `t` workgroup \(0, 0, 0\) wave 0, pc 0x10004 \(entry\+0x4\) "
                                         r"`global_load_b32 v1, v0, s\[0:1\].*`: access to unmapped address 0x99990000"):
    execute([VOP1(VOP1Op.V_MOV_B32_E32, v[0], 0), GLOBAL(GLOBALOp.GLOBAL_LOAD_B32, vdst=v[1], addr=v[0], saddr=s[0:1])],
            sgpr={0: 0x99990000})
  with pytest.raises(DeviceFault, match=r"pc 0x10000 .*`ds_store_b32 .*`: LDS access of 4 bytes at 0x80 outside the "
                                         r"workgroup's 128 bytes"):
    execute([DS(DSOp.DS_STORE_B32, addr=v[0], data0=v[1])], vgpr={0: np.arange(32, dtype=np.uint64) * 8}, lds=128)
  with pytest.raises(DeviceFault, match=r"`global_atomic_add_u32 .*`: unsupported instruction"):
    execute([GLOBAL(GLOBALOp.GLOBAL_ATOMIC_ADD_U32, addr=v[0], data=v[1], saddr=s[0:1])], sgpr={0: DATA_ADDR},
            data=bytes(256))

def _patched(tmp_path, name: str, kernel: str, old: bytes, new: bytes) -> pathlib.Path:
  d = tmp_path / name
  shutil.copytree(CODE / name, d)
  co = (d / f"{kernel}.co").read_bytes()
  assert co.count(old) == 1
  (d / f"{kernel}.co").write_bytes(co.replace(old, new))
  return d / f"{name}.hcq"

def test_fault_names_kernel_pc_instruction_and_line(tmp_path):
  """An unsupported instruction in a real code object: a device fault with the kernel, PC, instruction, .hcq line."""
  store = GLOBAL(GLOBALOp.GLOBAL_STORE_B128, addr=v[0], data=v[1:4], saddr=s[0:1]).to_bytes()
  atomic = GLOBAL(GLOBALOp.GLOBAL_ATOMIC_ADD_U32, addr=v[0], data=v[1], saddr=s[0:1]).to_bytes()
  f = _patched(tmp_path, "mlp_train", "E_32_4", store, atomic)
  r = run(f.read_text(), filename=str(f))
  assert r.fault is not None and not r.ok
  text = str(r.fault)
  line = next(i + 1 for i, l in enumerate(f.read_text().splitlines()) if l.strip().startswith("exec E_32_4("))
  assert "kernel `E_32_4` workgroup (0, 0, 0) wave 0, pc 0x" in text and "`global_atomic_add_u32 " in text
  assert "unsupported instruction" in text and f"from line {line}: `exec E_32_4(" in text
  assert run(f.read_text(), filename=str(f), kernels="c").ok   # the C kernel is untouched by the patch

def test_bad_launch_is_a_fault(tmp_path):
  f = CODE / "matmul_sum" / "matmul_sum.hcq"
  src = f.read_text().replace("block (8, 1, 1)", "block (2048, 1, 1)", 1)
  assert src != f.read_text()
  g = tmp_path / "matmul_sum"
  shutil.copytree(CODE / "matmul_sum", g)
  (g / "matmul_sum.hcq").write_text(src)
  r = run(src, filename=str(g / "matmul_sum.hcq"))
  assert r.fault is not None and "workgroup of [2048, 1, 1] threads (1..1024)" in str(r.fault)

# ---- the committed code objects stay reproducible

def _llvm_missing():
  from hcqdsl.tinygrad.amdcode import amd_renderer
  try: amd_renderer()
  except Exception as e: return f"tinygrad's AMDLLVM compiler cannot load libLLVM (Debian: apt-get install libllvm19): {e}"
  return None

@pytest.mark.slow
@pytest.mark.parametrize("name", EXAMPLES + CORPUS)
def test_regenerated_code_objects(name, tmp_path):
  """Where libLLVM is installed (CI): `emit --amd-code` again, and the fresh code objects pass like the committed ones
  (their bytes are compared too: a difference means the committed ones need regenerating)."""
  if (why := _llvm_missing()) is not None: pytest.skip(why)
  out = tmp_path / f"{name}.hcq"
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "emit", SCRIPTS[name], "-o", str(out), "--amd-code"],
                     capture_output=True, text=True, cwd=ROOT, env={**os.environ, "DEV": "CPU"})
  assert r.returncode == 0, r.stderr
  res = run(out.read_text(), filename=str(out), kernels="amd")
  assert res.fault is None and not res.hang, res.summary()
  assert res.ok or name in CORPUS, res.summary()   # (the corpus's expects: see test_rdna3_corpus.CPU_SEMANTICS)
  fresh = {p.name: p.read_bytes() for p in tmp_path.glob("*.co")}
  assert fresh == {p.name: p.read_bytes() for p in (CODE / name).glob("*.co")}, \
    f"code objects changed: regenerate tests/amd_code/{name} with `hcqdsl emit {SCRIPTS[name]} -o tests/amd_code/{name}/{name}.hcq --amd-code`"

def test_kernels_choice_by_device_arch():
  """Default: machine code on gfx11 devices, C elsewhere; `--kernels amd` on a gfx942 device is a fault, not C."""
  f = CODE / "matmul_sum" / "matmul_sum.hcq"
  src = f.read_text()
  i0 = STATS.instructions
  assert run(src, filename=str(f), target="gfx942").ok and STATS.instructions == i0
  r = run(src, filename=str(f), target="gfx942", kernels="amd")
  assert r.fault is not None and "the machine-code executor runs gfx11 code, not gfx942" in str(r.fault)
  with pytest.raises(ValueError, match="kernels must be .auto., .amd. or .c., not .x."): run(src, filename=str(f), kernels="x")

def test_every_covered_alu_opcode_runs_on_random_bits():
  """Every ALU opcode counted as covered runs on the compiled loop (its chunk of translated pseudocode compiles) on
  random register bits (NaNs, denormals, huge shifts) without a fault, and changes only registers it may write."""
  import random
  from tinygrad.runtime.autogen.amd.rdna3 import enum
  from hcqdsl.runtime.isa.native import opcode_function
  from hcqdsl.runtime.isa.rdna3 import ALU_ENUMS
  cov, n = set(coverage()), 0
  r = random.Random(0)
  for en in ALU_ENUMS:
    for op in getattr(enum, en):
      if op.name not in cov: continue
      got = opcode_function(op)
      assert not isinstance(got, Exception), (op.name, got)
      n += 1
  assert n > 850
  # and a sample of them end to end, one instruction each on random state
  sample = [op for en in ("VOP2Op", "VOP1Op", "SOP2Op") for op in getattr(enum, en) if op.name in cov][::3]
  for op in sample:
    ins = {"VOP2Op": lambda: VOP2(op, v[16], v[1], v[2]), "VOP1Op": lambda: VOP1(op, v[16], v[1]),
           "SOP2Op": lambda: SOP2(op, s[16], s[1], s[2])}[type(op).__name__]
    try: i = ins()
    except Exception: continue
    (w,), _ = execute([i], sgpr={k: r.getrandbits(32) for k in range(16)},
                      vgpr={k: np.array([r.getrandbits(32) for _ in range(32)], np.uint64) for k in range(8)})
    assert not np.any(w.v[8:16] != 0) and not np.any(w.v[18:] != 0), op.name   # only v16 (and v17 for 64 bits)

def test_loops_modifiers_and_nested_opcodes():
  """Pseudocode `for`/`break` (v_clz_i32_u32), VOP3 neg on a B32 select (how LLVM negates through v_cndmask_b32),
  an opcode calling another by name (v_max3_i32), 65-bit signed v_mad_i64_i32."""
  (w,), _ = execute([VOP1(VOP1Op.V_CLZ_I32_U32_E32, v[0], v[1])], vgpr={1: lanes(1, 0x80000000, 0, 0x00F00000)})
  assert [int(x) for x in w.v[0][:4]] == [31, 0, 0xFFFFFFFF, 8]
  (w,), _ = execute([VOP3(VOP3Op.V_CNDMASK_B32_E64, v[0], v[1], v[1], s[0], neg=2)], vgpr={1: lanes(f2b(1.5))},
                    sgpr={0: 0b10}, lanes=2)
  assert [b2f(x) for x in w.v[0][:2]] == [1.5, -1.5]
  (w,), _ = execute([VOP3(VOP3Op.V_MAX3_I32, v[0], v[1], v[2], v[3])], vgpr={1: lanes(-5 & 0xFFFFFFFF, 7), 2: lanes(3, -9 & 0xFFFFFFFF),
                    3: lanes(-1 & 0xFFFFFFFF, 2)}, lanes=2)
  assert [int(x) for x in w.v[0][:2]] == [3, 7]
  (w,), _ = execute([VOP3SD(VOP3SDOp.V_MAD_I64_I32, v[0:1], s[10], v[2], v[3], v[4:5])],
                    vgpr={2: lanes(-3 & 0xFFFFFFFF), 3: lanes(1_000_000_000), 4: lanes(5), 5: lanes(0)}, lanes=1)
  assert int(w.v[0][0]) | int(w.v[1][0]) << 32 == (-3 * 1_000_000_000 + 5) & (2**64 - 1)

def test_endless_kernel_is_a_fault(monkeypatch):
  import hcqdsl.runtime.isa.rdna3 as r
  monkeypatch.setattr(r, "MAX_INSTRUCTIONS", 1000)
  with pytest.raises(DeviceFault, match=r"pc 0x10000 \(entry\+0x0\) `s_branch simm16=65535`: more than 1000 instructions in one dispatch"):
    execute([SOPP(SOPPOp.S_BRANCH, simm16=0xFFFF)])

def test_no_compiler_is_a_fault(monkeypatch, tmp_path):
  """The executor compiles its loop with the host compiler: without one, a dispatch is a fault that says so."""
  from hcqdsl.runtime.isa import native
  monkeypatch.setenv("PATH", str(tmp_path))
  monkeypatch.delenv("CC", raising=False)
  monkeypatch.setenv("HCQDSL_CACHE", str(tmp_path / "cache"))
  native._runtime.cache_clear()
  try:
    f = CODE / "matmul_sum" / "matmul_sum.hcq"
    r = run(f.read_text(), filename=str(f), kernels="amd")
  finally: native._runtime.cache_clear()
  assert r.fault is not None and "the RDNA3 executor cannot run: no C compiler" in str(r.fault), r.summary()
