"""A stand-in for tinygrad's AMDDevice: just what AMDComputeQueue / AMDCopyQueue read while building packets, so tests
and benchmarks can run tinygrad's own packet builders without a GPU.

Deliberately independent of hcqdsl.amd.targets (the module under test): the header modules and register blocks are
picked by the statements of tinygrad's AMDDevice.__init__ (ops_amd.py, "self.ip_off = ..." to "self.max_copy_size =
..."), fed with the IP versions amdgpu's IP discovery reports for one board per target (the numbers a real
AMDDevice reads from sysfs or the AM driver). If targets.py picked another module or version, the byte-exact tests
would see different packets."""
from __future__ import annotations
import importlib, types
from tinygrad.runtime.autogen.am import am
from tinygrad.runtime.support.amd import AMDIP, import_module, import_soc
from tinygrad.runtime.ops_amd import AMDComputeQueue, AMDCopyQueue  # noqa: F401  (re-exported for tests)

# gfx_target_version (KFD's property) and IP discovery versions: MI300X, RX 7900 XTX (Navi31), RX 9070 XT (Navi48)
BOARDS = {
  "gfx942":  (90402,  {am.GC_HWIP: (9, 4, 3),  am.SDMA0_HWIP: (4, 4, 2), am.NBIF_HWIP: (7, 9, 0)}),
  "gfx1100": (110000, {am.GC_HWIP: (11, 0, 0), am.SDMA0_HWIP: (6, 0, 0), am.NBIF_HWIP: (4, 3, 0)}),
  "gfx1201": (120001, {am.GC_HWIP: (12, 0, 1), am.SDMA0_HWIP: (7, 0, 1), am.NBIF_HWIP: (6, 3, 1)}),
}

class StandinDevice:
  def __init__(self, arch: str, scratch_addr: int = 0x7F00_0000_0000, tmpring_size: int = 0x1234):
    trgt, ip_versions = BOARDS[arch]
    # AMDDevice.__init__, statement for statement
    self.target = (trgt // 10000, (trgt // 100) % 100, trgt % 100)
    self.arch = "gfx%d%x%x" % self.target
    self.ip_off = importlib.import_module(f"tinygrad.runtime.autogen.am.{'vega' if self.target[0] == 9 else 'navi'}_offsets")
    self.soc = import_soc(self.target)
    self.pm4 = importlib.import_module(f"tinygrad.runtime.autogen.am.pm4_{'soc15' if self.target[0] == 9 else 'nv'}")
    self.sdma = import_module('sdma', min(ip_versions[am.SDMA0_HWIP], (6, 0, 0)))
    self.gc = AMDIP('gc', ip_versions[am.GC_HWIP],
                    bases={i: tuple(getattr(self.ip_off, f'GC_BASE__INST{i}_SEG{s}', 0) for s in range(6)) for i in range(6)})
    self.nbio = AMDIP('nbio' if self.target[0] < 12 else 'nbif', ip_versions[am.NBIF_HWIP],
                      bases={i: tuple(getattr(self.ip_off, f'NBIO_BASE__INST{i}_SEG{s}', 0) for s in range(9)) for i in range(6)})
    self.max_copy_size = 0x40000000 if ip_versions[am.SDMA0_HWIP][0] >= 5 else 0x400000
    assert self.arch == arch
    self.xccs, self.sqtt_enabled = 1, False
    self.scratch = types.SimpleNamespace(va_addr=scratch_addr, size=0x10000)
    self.tmpring_size = tmpring_size
  def is_am(self): return True  # no KFD interrupt mailbox: signals emit only the program's own packets

def signal(addr): return types.SimpleNamespace(value_addr=addr, timestamp_addr=addr + 8, owner=None, is_timeline=False)
def buf(addr): return types.SimpleNamespace(va_addr=addr)
def program(dev, prog_addr, rsrc1, rsrc2, rsrc3, wave32=True):
  return types.SimpleNamespace(enable_private_segment_sgpr=0, enable_dispatch_ptr=0, dev=dev, prog_addr=prog_addr,
                               rsrc1=rsrc1, rsrc2=rsrc2, rsrc3=rsrc3, wave32=wave32)
def args_state(kernarg_addr): return types.SimpleNamespace(bind_data=[], buf=buf(kernarg_addr))
def compute_queue(dev): return AMDComputeQueue(dev)
def copy_queue(dev): return AMDCopyQueue(dev, max_copy_size=dev.max_copy_size)

# ---- a whole stand-in HCQ device for tinygrad's own submit path (rings, allocator, signals) — no GPU: memory is host
# memory with real addresses, so tinygrad's HCQBuffer / HCQSignal / MMIOInterface / CLikeArgsState work unchanged,
# and the "engine" consumes everything the moment it is written (the read pointer follows the write pointer).
import ctypes
from tinygrad.runtime.support.hcq import HCQBuffer, HCQSignal, MMIOInterface

class Arena:
  """One block of host memory handed out bump-style; `reset()` zeroes it and starts over at the same addresses."""
  def __init__(self, size: int = 1 << 22):
    self.mem = (ctypes.c_uint8 * size)()
    self.base, self.size, self.top = ctypes.addressof(self.mem), size, 0
  def alloc(self, size: int, spec=None, align: int = 256) -> HCQBuffer:
    self.top += -self.top % align
    a, self.top = self.base + self.top, self.top + size
    assert self.top <= self.size, "arena full"
    return HCQBuffer(a, size, view=MMIOInterface(a, size))
  def free(self, buf, size, spec=None): pass  # bump allocation: nothing is reused
  def reset(self):
    ctypes.memset(self.base, 0, self.size)
    self.top = 0

class _ReadPtr:
  def __init__(self, ring): self.ring = ring
  def __getitem__(self, i): return self.ring.put_value

from tinygrad.runtime.ops_amd import AMDQueueDesc

class StandinRing(AMDQueueDesc):
  """tinygrad's AMDQueueDesc over arena memory: what AMDComputeQueue._submit / AMDCopyQueue._submit touch, and
  tinygrad's own signal_doorbell (the write pointer, then the doorbell)."""
  def __init__(self, arena: Arena, dwords: int):  # pylint: disable=super-init-not-called
    self.buf = arena.alloc(4 * dwords)
    self.ring = MMIOInterface(self.buf.va_addr, 4 * dwords, fmt="I")
    self.put_value, self.params = 0, None
    self.read_ptr, self.write_ptr, self.doorbell = _ReadPtr(self), [0], [0]

class StandinHCQDevice(StandinDevice):
  def __init__(self, arch: str, index: int, arena: Arena, ring_dwords: int = 1024):
    super().__init__(arch, scratch_addr=0, tmpring_size=0)
    self.device, self.allocator = f"AMD:{index}", arena
    self.peer_group = "hcqdsl-standin"  # HCQSignal.__del__ returns owned signal memory to this (unused) pool
    self.compute_queue, self._sdma = StandinRing(arena, ring_dwords), StandinRing(arena, ring_dwords)
    self.timeline_signal = HCQSignal(arena.alloc(16), 0, owner=self, is_timeline=True)
    self.timeline_value = 1
    self.iface = types.SimpleNamespace(dev_impl=types.SimpleNamespace(gmc=types.SimpleNamespace(flush_hdp=lambda: None)))
  def sdma_queue(self, idx: int = 0): return self._sdma
  @property
  def sdma_queues(self): return {0: self._sdma}
  def is_usb(self): return False
  def next_timeline(self):
    self.timeline_value += 1
    return self.timeline_value - 1
