"""amd/meaning.py against tinygrad's own packet builders (AMDComputeQueue / AMDCopyQueue on a stand-in device, as
test_amd_encode.py runs them): for each statement kind, tinygrad's packets decoded and asked give what tinygrad meant —
the kind, the address, the value, the bytes, the mask; a dispatch's program, kernel arguments, grid and workgroup; an
indirect buffer's target, spliced back in."""
import ctypes, types
import pytest
from tinygrad.runtime.support.hcq import MMIOInterface
from amd_standin import StandinDevice, signal, buf, program, args_state, compute_queue, copy_queue
from hcqdsl.ir import AMD_ARCHS, U32_MAX, POLL_SIZE
from hcqdsl.amd.disasm import decoder
from hcqdsl.amd.lift import group_packets
from hcqdsl.amd.meaning import meaning, dispatch, splice, Registers, Meaning

ADDRS = [0x1000, 0x7FFF_FFF0, 0x1_2345_6780, 0x7F00_DEAD_BEE0]
VALUES = [0, 1, 0x7FFF_FFFF, 0xFFFF_FFFF]

@pytest.fixture(params=AMD_ARCHS)
def arch(request): return request.param

def asked(q, engine: str, arch: str) -> list:
  """The meaning of each of tinygrad's packets in queue q (None: a packet no statement names alone)."""
  return [meaning(p) for p in decoder(engine, arch).decode(list(q._q))]

def only(ms: list) -> Meaning:
  got = [m for m in ms if m is not None and m.kind != "acquire"]
  assert len(got) == 1, ms
  return got[0]

def test_compute_statements(arch):
  d = StandinDevice(arch)
  for a in ADDRS:
    for v in VALUES:
      q = compute_queue(d)
      q.wait(signal(a), v)
      m = only(asked(q, "compute", arch))
      assert (m.kind, m.addr, m.value, m.size, m.mask) == ("wait", a, v, 4, U32_MAX)
      q = compute_queue(d)
      q.signal(signal(a), v)
      m = only(asked(q, "compute", arch))
      assert (m.kind, m.addr, m.value, m.size) == ("signal", a, v, 4)
      for b64 in (False, True):
        q = compute_queue(d)
        q.write(buf(a), v, b64=b64)
        m = only(asked(q, "compute", arch))
        assert (m.kind, m.addr, m.value, m.size) == ("write", a, v, 8 if b64 else 4)
      for mask in (0x01000000, 1, U32_MAX):
        q = compute_queue(d)
        q.poll_bit(buf(a), v & mask, mask=mask)
        m = only(asked(q, "compute", arch))
        assert (m.kind, m.addr, m.value, m.size, m.mask) == ("poll", a, v & mask, POLL_SIZE, mask)
    q = compute_queue(d)
    q.timestamp(signal(a))
    m = only(asked(q, "compute", arch))
    assert (m.kind, m.addr) == ("timestamp", a)   # the signal's, whose slot the clock goes to
  q = compute_queue(d)
  q.memory_barrier()
  assert [m.kind for m in asked(q, "compute", arch)] == ["barrier", "acquire"]

@pytest.mark.parametrize("wave32", [True, False])
def test_dispatch(arch, wave32):
  d = StandinDevice(arch, scratch_addr=0x7F00_0000_0000, tmpring_size=0x1234)
  for prog, ka, grid, block in ((0x1_0000_0100, 0x2_0000_0040, (4, 2, 1), (64, 1, 1)), (0x7FFF_FFFF_FF00, 0x10, (1, 1, 1), (1024, 1, 1))):
    q = compute_queue(d)
    q.exec(program(d, prog, 0, 0, 0, wave32=wave32), args_state(ka), grid, block)
    pk = decoder("compute", arch).decode(list(q._q))
    got = dispatch(pk)
    assert got is not None and (got.program, got.kernargs, got.grid, got.block) == (prog, ka, grid, block)
    assert "dispatch" in [m.kind for m in map(meaning, pk) if m is not None]
    regs = Registers()
    assert [x for x in map(regs.see, pk) if x is not None] == [got]   # a stream read packet by packet: the same dispatch
    dw = list(q._q)
    assert dw[got.grid_at:got.grid_at + 3] == list(grid) and dw[got.kernargs_at] | dw[got.kernargs_at + 1] << 32 == ka

def test_copy_statements(arch):
  d = StandinDevice(arch)
  for a in ADDRS:
    for v in VALUES:
      q = copy_queue(d)
      q.wait(signal(a), v)
      m = only(asked(q, "copy", arch))
      assert (m.kind, m.addr, m.value, m.mask) == ("wait", a, v, U32_MAX)
      q = copy_queue(d)
      q.signal(signal(a), v)
      m = only(asked(q, "copy", arch))
      assert (m.kind, m.addr, m.value) == ("signal", a, v)
      for b64 in (False, True):
        q = copy_queue(d)
        q.write(buf(a), v, b64=b64)
        m = only(asked(q, "copy", arch))
        assert (m.kind, m.addr, m.value, m.size) == ("write", a, v, 8 if b64 else 4)
    q = copy_queue(d)
    q.timestamp(signal(a))
    m = only(asked(q, "copy", arch))
    assert (m.kind, m.addr) == ("timestamp", a)
  m = d.max_copy_size
  for size in (1, 256, m, m + 1, 3 * m + 17):   # a copy split in pieces: one statement-sized group, its bytes the copy's
    q = copy_queue(d)
    q.copy(buf(0x1_0000_0000), buf(0x2_0000_1000), size)
    pk = decoder("copy", arch).decode(list(q._q))
    ms = [meaning(p) for p in pk]
    assert {x.kind for x in ms} == {"copy"} and (ms[0].addr, ms[0].src) == (0x1_0000_0000, 0x2_0000_1000)
    assert sum(x.size for x in ms) == size and len(group_packets(pk, "copy")) == 1

def _page(addr: int, dwords: int):
  """A stand-in for the page tinygrad's bind() copies a queue into: GPU address `addr`, host memory behind it."""
  raw = (ctypes.c_uint8 * (4 * dwords))()
  mm = MMIOInterface(ctypes.addressof(raw), 4 * dwords)
  return types.SimpleNamespace(va_addr=addr, size=4 * dwords, cpu_view=lambda: mm), raw

def test_indirect_buffer(arch):
  """AMDComputeQueue.bind: the ring gets an INDIRECT_BUFFER to the queue's page; asked, it names the page and its bytes,
  and splice puts the queue's own packets in its place."""
  d = StandinDevice(arch)
  q = compute_queue(d)
  q.wait(signal(0x1000), 3)
  q.signal(signal(0x2000), 4)
  inner = list(q._q)
  page, raw = _page(0x5_0000_0000, len(inner))
  d.allocator = types.SimpleNamespace(alloc=lambda size, spec: page, free=lambda *a: None)
  q.bind(d)
  m = only([meaning(p) for p in decoder("compute", arch).decode(q.indirect_cmd)])
  assert (m.kind, m.addr, m.size) == ("indirect", 0x5_0000_0000, 4 * len(inner))
  def read(a, n):
    return bytes(raw)[a - page.va_addr:a - page.va_addr + n] if a == page.va_addr else None
  assert [(p.name, p.fields) for p in splice(q.indirect_cmd, "compute", arch, read)] == \
    [(p.name, p.fields) for p in decoder("compute", arch).decode(inner)]
  assert splice(q.indirect_cmd, "compute", arch, lambda a, n: None)[0].note   # unreadable: stays, with a note
