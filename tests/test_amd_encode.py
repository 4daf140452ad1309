"""Our PM4/SDMA dwords must equal what tinygrad's own AMDComputeQueue/AMDCopyQueue build for the same operations
(run on a stand-in device), for every target — including per-launch (symbolic) values and where they are patched."""
import random, struct
import pytest
from tinygrad.runtime.autogen import hsa
from amd_standin import StandinDevice, signal, buf, program, args_state, compute_queue, copy_queue
from amd_replay import replay, symbolic_replay
from hcqdsl.amd import pm4, sdma
from hcqdsl.ir import AMD_ARCHS
from hcqdsl.amd.targets import get_target
from hcqdsl import parse
from hcqdsl.vendors import compile_program
from program_files import PROGRAM
from hcqdsl.ir import U32_MAX

ADDRS = [0x1000, 0x7FFF_FFF0, 0x1_2345_6780, 0x7F00_DEAD_BEE0]
VALUES = [0, 1, 0x7FFF_FFFF, 0xFFFF_FFFF]

@pytest.fixture(params=AMD_ARCHS)
def arch(request): return request.param

def test_compute_ops(arch):
  d, e = StandinDevice(arch), pm4.encoder(arch)
  for a in ADDRS:
    for v in VALUES:
      for op in ("wait", "signal"):
        q, out = compute_queue(d), []
        getattr(q, op)(signal(a), v)
        getattr(e, op)(out, a, v)
        assert out == q._q, (op, hex(a), v)
      for b64 in (False, True):   # HWQueue.write: RELEASE_MEM of 32-bit low or 64-bit data
        q, out = compute_queue(d), []
        q.write(buf(a), v, b64=b64)
        e.write(out, a, v, b64)
        assert out == q._q, ("write", hex(a), v, b64)
      for mask in (0x01000000, 1, U32_MAX):   # HWQueue.poll_bit: WAIT_REG_MEM `==` under the mask
        q, out = compute_queue(d), []
        q.poll_bit(buf(a), v & mask, mask=mask)
        e.poll(out, a, v & mask, mask)
        assert out == q._q, ("poll", hex(a), v, hex(mask))
    q, out = compute_queue(d), []
    q.timestamp(signal(a))
    e.timestamp(out, a + 8)
    assert out == q._q
  q, out = compute_queue(d), []
  q.memory_barrier()
  e.barrier(out)
  assert out == q._q

@pytest.mark.parametrize("wave32", [True, False])
def test_compute_exec(arch, wave32):
  rng = random.Random(arch)
  for _ in range(5):
    d = StandinDevice(arch, scratch_addr=rng.randrange(0, 1 << 47, 256), tmpring_size=rng.randrange(1 << 20))
    prog = rng.randrange(0, 1 << 47, 256)
    rs = [rng.randrange(1 << 32) for _ in range(3)]
    ka = rng.randrange(0, 1 << 47, 16)
    grid, block = tuple(rng.randrange(1, 1 << 16) for _ in range(3)), tuple(rng.randrange(1, 1024) for _ in range(3))
    q, out = compute_queue(d), []
    q.exec(program(d, prog, *rs, wave32=wave32), args_state(ka), grid, block)
    pm4.encoder(arch).exec(out, prog, *rs, d.tmpring_size, d.scratch.va_addr, (ka & 0xFFFFFFFF, ka >> 32), grid, block, wave32)
    assert out == q._q

def test_copy_ops(arch):
  d, e = StandinDevice(arch), sdma.encoder(arch)
  for a in ADDRS:
    for v in VALUES:
      for op in ("wait", "signal"):
        q, out = copy_queue(d), []
        getattr(q, op)(signal(a), v)
        getattr(e, op)(out, a, v)
        assert out == q._q, (op, hex(a), v)
      for b64 in (False, True):   # HWQueue.write: SDMA WRITE of one or two dwords
        q, out = copy_queue(d), []
        q.write(buf(a), v, b64=b64)
        e.write(out, a, v, b64)
        assert out == q._q, ("write", hex(a), v, b64)
    q, out = copy_queue(d), []
    q.timestamp(signal(a))
    e.timestamp(out, a + 8)
    assert out == q._q
  m = d.max_copy_size
  for size in (1, 4, 256, m - 1, m, m + 1, 3 * m + 17):
    q, out = copy_queue(d), []
    q.copy(buf(0x1_0000_0000), buf(0x2_0000_1000), size)
    e.copy(out, 0x1_0000_0000, 0x2_0000_1000, size)
    assert out == q._q, size
  out = []
  e.barrier(out)
  assert out == []

def test_max_copy_size():
  assert get_target("gfx942").max_copy_size == 0x400000
  assert get_target("gfx1100").max_copy_size == get_target("gfx1201").max_copy_size == 0x40000000

# ---- whole programs, symbolic values: replay the compiled program's statements on tinygrad's queues

@pytest.mark.parametrize("archs", [("gfx1100", "gfx1100"), ("gfx942", "gfx1201"), ("gfx1201", "gfx942")])
def test_program_matches_tinygrad(archs):
  p = parse(PROGRAM.format(a0=archs[0], a1=archs[1]), "t.hcq")
  img = compile_program(p)
  for qi in img.queues:
    tq, symname = replay(img, p, qi.name)
    ours = {pt.offset for pt in qi.patches}
    theirs = {off for off, _ in tq.q_sints}
    assert ours <= theirs, qi.name
    # many launch numbers, and across the 2**32 wrap of the 32-bit values (var - 1 at 0, var + 1 at 2**32 - 1, ...)
    rng = random.Random(qi.name)
    compared = 0
    for launch in [0, *range(1, 40), *(rng.randrange(1 << 32) for _ in range(40)), 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1]:
      env = img.env(launch)
      tq._apply_var_vals({symname[v]: x for v, x in env.items()})
      low = [x & 0xFFFFFFFF for x in tq._q]
      assert img.patched(qi, env) == [x if o not in theirs - ours else 0 for o, x in enumerate(low)], (qi.name, launch)
      # dwords tinygrad patches and we do not are the high halves of the 64-bit value fields: 0, or the carry/borrow
      # of `var + n` past 32 bits, which the 32-bit signals never see
      assert all(tq._q[o] == 0 for o in theirs - ours) or launch in (0, 2**32 - 2, 2**32 - 1), (qi.name, launch)
      compared += 1
    assert compared == 84
    # and the template itself is launch 1
    assert qi.dwords == img.patched(qi, img.env(1))

def test_patch_positions_hold_values():
  img = compile_program(parse(PROGRAM.format(a0="gfx1100", a1="gfx942"), "t.hcq"))
  env = img.env(5, kick=100, step=10)
  for qi in img.queues:
    dw = img.patched(qi, env)
    for pt in qi.patches: assert dw[pt.offset] == (env[pt.var] + pt.add) & 0xFFFFFFFF
  c0 = img.queue("c0")
  assert [(p.var, p.add) for p in c0.patches] == [("g0.epoch", -1), ("kick", 1), ("step", 2), ("step", 0), ("kick", 0), ("step", -1), ("g0.epoch", 0)]

def test_epoch_lowering():
  img = compile_program(parse("device g = AMD:0\nqueue q compute on g {\n  epoch\n}\n", "e.hcq"))
  q = img.queue("q")
  out = []
  pm4.encoder("gfx1100").wait(out, img.signals["g.timeline"], 0)
  assert q.dwords == out and [(p.offset, p.var, p.add) for p in q.patches] == [(4, "g.epoch", -1)]
  assert img.patched(q, img.env(3))[4] == 2

def test_device_arch_overrides_target():
  img = compile_program(parse("device g = AMD:0 gfx942\ndevice h = AMD:1\nqueue q compute on g {\n  barrier\n}\n"
                              "queue r compute on h {\n  barrier\n}\n", "e.hcq"), target="gfx1201")
  assert img.queue("q").arch == "gfx942" and img.queue("r").arch == "gfx1201"

def test_speed_sanity():
  """Encoders only build ints: 10k waits take well under a second."""
  import time
  e, out = pm4.encoder("gfx1100"), []
  st = time.perf_counter()
  for i in range(10000): e.wait(out, 0x1000 + 16 * i, i)
  assert time.perf_counter() - st < 1.0 and len(out) == 70000

def test_dispatch_initiator_wave():
  assert hsa is not None
  assert pm4.encoder("gfx942").INITIATOR[True] == pm4.encoder("gfx942").INITIATOR[False]  # gfx9: wave64 only
  assert pm4.encoder("gfx1100").INITIATOR[True] != pm4.encoder("gfx1100").INITIATOR[False]

# ---- symbolic launches (issue 12): kernel-argument scalars, launch dims over vars, rebound buffer addresses

SYMBOLIC = """\
device g0 = AMD:0 {a0}
buffer cache on g0 size 64K
buffer x on g0 size 8M rebound = i32 [1], i32 [2], i32 [3], i32 [4], i32 [5], i32 [6], i32 [7], i32 [8]
buffer y on g0 size 8M
var pos = [0, 1, 1, 7, 3, 3, 0, 65535]
var n
kernel put(inout cache, in x, i32 at, u32 count)
queue c0 compute on g0 {{
  epoch
  exec put(cache[16:], x[64:], pos, n - 1) grid (pos + 1, 2, n) block (32, pos + 3)
  exec put(cache, x, 7, pos + 2) grid (4)
  signal g0.timeline = g0.epoch
}}
queue x0 copy on g0 {{
  epoch
  copy y <- x
  copy y[0:4] <- x[4096:4100]
  signal g0.timeline = g0.epoch
}}
"""

@pytest.mark.parametrize("a0", AMD_ARCHS)
def test_symbolic_launches_match_tinygrad(a0):
  """Over 8 consecutive launches, tinygrad's `_apply_var_vals` on its own queues (symbolic grid/block, scalar and
  pointer kernel arguments, rebound copy addresses) and our patch table give the same command dwords and the same
  kernel-argument bytes; we patch only dwords tinygrad patches."""
  import struct
  p = parse(SYMBOLIC.format(a0=a0), "s.hcq")
  img = compile_program(p)
  data = dict(img.data)
  for qi in img.queues:
    tq, symname, mems = symbolic_replay(img, p, qi.name)
    assert {pt.offset for pt in qi.patches} <= {off for off, _ in tq.q_sints}, qi.name
    ours = {a: bytearray(data[a]) for a in mems}
    for launch in range(1, 9):
      env = img.env(launch)
      tq._apply_var_vals({symname[v]: x for v, x in env.items()})
      assert img.patched(qi, env) == [x & 0xFFFFFFFF for x in tq._q], (qi.name, launch)
      vals = [pt.value(env) for pt in qi.mem_patches]
      for pt, v in zip(qi.mem_patches, vals):
        a = max(k for k in ours if k <= pt.offset)
        struct.pack_into("<I", ours[a], pt.offset - a, v)
      for a, (raw, size) in mems.items(): assert bytes(raw)[:size] == bytes(ours[a][:size]), (qi.name, launch, hex(a))
  c0, x0 = img.queue("c0"), img.queue("x0")
  assert {(pt.var, pt.encoding) for pt in c0.mem_patches} == {("pos", "u32"), ("n", "u32"), ("x.addr", "lo"), ("x.addr", "hi")}
  assert {pt.var for pt in c0.patches} == {"g0.epoch", "pos", "n"}   # dims over vars are command-buffer patches
  assert {(pt.var, pt.encoding) for pt in x0.patches} >= {("x.addr", "lo"), ("x.addr", "hi")}
def test_targets_pick_what_tinygrad_picks(arch):
  # the stand-in follows AMDDevice.__init__ on the board's IP versions, independently of hcqdsl.amd.targets
  d, t = StandinDevice(arch), get_target(arch)
  assert (d.soc, d.pm4, d.sdma, d.max_copy_size) == (t.soc, t.pm4, t.sdma, t.max_copy_size)
  assert (d.gc.regCOMPUTE_PGM_LO.addr, d.nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_REQ.addr if arch != "gfx942" else None) == \
         (t.gc.regCOMPUTE_PGM_LO.addr, t.nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_REQ.addr if arch != "gfx942" else None)

# ---- exec of a kernel with a private segment (scratch SGPRs) and a dispatch pointer, against tinygrad's exec

@pytest.mark.parametrize("priv,dptr", [(True, True), (True, False), (False, True)])
def test_exec_private_segment_and_dispatch_ptr(arch, priv, dptr, monkeypatch):
  import ctypes, attrs, types
  from tinygrad.runtime.support.hcq import MMIOInterface
  import hcqdsl.amd.codeobj as codeobj
  from hcqdsl.amd.compile import tmpring
  orig = codeobj.synthetic
  monkeypatch.setattr(codeobj, "synthetic", lambda t, name, n: attrs.evolve(
    orig(t, name, n), dispatch_ptr=dptr, private_segment_sgpr=priv, private_segment_size=256 if priv else 0,
    group_segment_size=1024, kernarg_size=24))
  img = compile_program(parse(f"device g = AMD:0 {arch}\nbuffer a on g size 4K\nbuffer b on g size 4K\nkernel k(in x, out y)\n"
                              "queue q compute on g {\n  exec k(a[256:512], b) grid (4, 2, 1) block (64, 2, 1)\n}\n", "t.hcq"))
  qi, t = img.queue("q"), get_target(arch)
  co = codeobj.synthetic(t, "k", 2)
  [ka] = [r for r in img.regions if r.kind == "kernargs"]
  [kern] = img.kernels
  scratch = next((r.addr for r in img.regions if r.kind == "scratch"), 0)
  # tinygrad writes the dispatch packet through its address: give it host memory standing for the GPU bytes
  backing = (ctypes.c_uint8 * 64)()
  real = hsa.hsa_kernel_dispatch_packet_t
  class DP(real):
    @classmethod
    def from_address(cls, addr):
      assert addr == ka.addr + 24
      return real.from_buffer(backing)
  monkeypatch.setattr(hsa, "hsa_kernel_dispatch_packet_t", DP)
  view = MMIOInterface(addr=ctypes.addressof(backing), nbytes=64)
  kbuf = types.SimpleNamespace(va_addr=ka.addr, offset=lambda n: types.SimpleNamespace(va_addr=ka.addr + n, cpu_view=lambda: view))
  d = StandinDevice(arch, scratch_addr=scratch, tmpring_size=tmpring(arch, co))
  prg = types.SimpleNamespace(enable_private_segment_sgpr=int(priv), enable_dispatch_ptr=int(dptr), dev=d,
                              prog_addr=kern["prog_addr"], rsrc1=co.rsrc1, rsrc2=co.rsrc2, rsrc3=co.rsrc3, wave32=co.wave32,
                              kernargs_segment_size=24, group_segment_size=1024, private_segment_size=co.private_segment_size)
  tq = compute_queue(d)
  tq.exec(prg, types.SimpleNamespace(bind_data=[], buf=kbuf), (4, 2, 1), (64, 2, 1))
  assert qi.dwords == tq._q
  ours = dict(img.data)
  assert ours[ka.addr][:16] == struct.pack("<QQ", img.buffers["a"][0] + 256, img.buffers["b"][0])
  if dptr: assert ours[ka.addr + 24] == bytes(backing)
  else: assert ka.addr + 24 not in ours
