"""nv/meaning.py against tinygrad's own builders (NVComputeQueue / NVCopyQueue / NVProgram / NVArgsState on a stand-in
device, as test_nv_encode.py runs them): for each statement kind, tinygrad's method groups decoded and asked give what
tinygrad meant — the kind, the address, the value, the bytes, a poll's mask, an acquire's comparison; a launch's QMD
chain walked gives each exec's program, kernel arguments, grid, workgroup and release semaphores."""
import pytest
from nv_standin import StandinDevice, program, signal, buf, compute_queue, copy_queue, NVArgsState
from hcqdsl.ir import NV_ARCHS, U32_MAX, POLL_SIZE
from hcqdsl.nv import pushbuf, cubin
from hcqdsl.nv.qmd import QMD
from hcqdsl.nv.targets import get_target
from hcqdsl.nv.meaning import meaning, qmd_chain, Meaning

ADDRS = [0x1000, 0x7FFF_FFF0, 0x80_2345_6780, 0xFF_FFFF_FFF0]
VALUES = [0, 1, 0x7FFF_FFFF, 0xFFFF_FFFF]

def asked(q) -> list: return [meaning(p) for p in pushbuf.decode(list(q._q))]

def only(ms: list) -> Meaning:
  got = [m for m in ms if m is not None]
  assert len(got) == 1, ms
  return got[0]

def test_compute_statements():
  for a in ADDRS:
    for v in VALUES:
      q = compute_queue()
      q.wait(signal(a), v)
      m = only(asked(q))
      assert (m.kind, m.addr, m.value, m.compare) == ("wait", a, v, ">=")
      assert q._q[m.addr_at] == a & U32_MAX and q._q[m.value_at] == v   # where a launch's patches go
      q = compute_queue()
      q.signal(signal(a), v)
      m = only(asked(q))
      assert (m.kind, m.addr, m.value) == ("signal", a, v)
      for b64 in (False, True):
        q = compute_queue()
        q.write(buf(a), v, b64=b64)
        m = only(asked(q))
        assert (m.kind, m.addr, m.value, m.size) == ("write", a, v, 8 if b64 else 4)
    for mask in (1, 0x01000000, 0x80000000):   # poll_bit: (word & mask) == value, as ACQ_AND or ACQ_NOR
      for v in (0, mask):
        q = compute_queue()
        q.poll_bit(buf(a), v, mask=mask)
        m = only(asked(q))
        assert (m.kind, m.addr, m.mask, m.value, m.size, m.compare) == ("poll", a, mask, v, POLL_SIZE, "==")
    q = compute_queue()
    q.timestamp(signal(a))
    m = only(asked(q))
    assert (m.kind, m.addr, m.value) == ("signal", a, 0)   # NVCommandQueue.timestamp is a signal of 0
  q = compute_queue()
  q.memory_barrier()
  assert only(asked(q)).kind == "barrier"

def test_copy_statements():
  for a in ADDRS:
    for v in VALUES:
      q = copy_queue()
      q.signal(signal(a), v)
      m = only(asked(q))
      assert (m.kind, m.addr, m.value) == ("signal", a, v)
  for size in (1, 256, 1 << 31, (1 << 31) + 1, 3 * (1 << 31) + 17):
    q = copy_queue()
    q.copy(buf(0x1_0000_0000), buf(0x2_0000_1000), size)
    ms = [m for m in asked(q) if m is not None]
    pieces = [m for m in ms if m.kind == "copy"]
    assert (pieces[0].addr, pieces[0].src) == (0x1_0000_0000, 0x2_0000_1000)
    assert sum(m.value for m in ms if m.kind == "length") == size

@pytest.mark.parametrize("arch", NV_ARCHS)
def test_launch_chain(arch):
  """Two execs with a signal between: SEND_PCAS_A names the first QMD; its chain gives both launches, the signal as the
  first QMD's release and the second as its dependent."""
  t, dev = get_target(arch), StandinDevice(arch)
  prg = program(dev, cubin.synthetic(t, "k", 8), "k", 0x80_0004_0000)
  kas = (0x80_0010_0000, 0x80_0020_0000)
  sts = [NVArgsState(dev.memory.buffer(ka, prg.kernargs_alloc_size), prg, (buf(0x80_2000_0000),), ()) for ka in kas]
  q = compute_queue()
  q.exec(prg, sts[0], (3, 2, 1), (32, 1, 1))
  q.signal(signal(0x80_3000_0000), 7)
  q.exec(prg, sts[1], (1, 1, 1), (64, 2, 1))
  qa = only(asked(q))
  assert qa.kind == "dispatch"
  def read(a: int):
    base = max(b for b in dev.memory.blocks if b <= a)
    return QMD.of(t, bytearray(bytes(dev.memory.blocks[base])[a - base:a - base + t.qmd_size]))
  chain = [got for _, _, got in qmd_chain(qa.addr, read)]
  assert [(x.program, x.kernargs, x.grid, x.block) for x in chain] == [(0x80_0004_0000, kas[0], (3, 2, 1), (32, 1, 1)),
                                                                         (0x80_0004_0000, kas[1], (1, 1, 1), (64, 2, 1))]
  assert [(r.addr, r.value) for r in chain[0].releases] == [(0x80_3000_0000, 7)] and chain[1].releases == ()
  assert chain[0].dependent is not None and chain[1].dependent is None
  # memory where every pointer reads as the first QMD: its dependent's address repeats, so the walk ends there (the
  # last launch still naming a dependent: what the emulator reports as a cycle)
  loop = list(qmd_chain(qa.addr, lambda a: read(qa.addr)))
  assert [a for a, _, _ in loop] == [qa.addr, chain[0].dependent] and loop[-1][2].dependent == chain[0].dependent
