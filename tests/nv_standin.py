"""A stand-in for tinygrad's NVDevice: just what NVComputeQueue / NVCopyQueue / NVProgram / NVArgsState read while
building pushbuffers, QMDs and kernel arguments, so tests can run tinygrad's own builders without a GPU.

Deliberately independent of hcqdsl.nv.targets (the module under test): the arch string, the SASS version and the
local-memory bookkeeping are the statements of tinygrad's NVDevice.__init__ / _ensure_has_local_memory, fed with the SM
version and compute class a real board reports. Memory is host memory: each allocation is given the GPU address the
compiled image chose (`at`), with a host view behind it, so tinygrad writes QMDs and kernel arguments where we can read
them back."""
from __future__ import annotations
import ctypes, itertools, types
from tinygrad.runtime.autogen import nv_570 as nv_gpu
from tinygrad.runtime.support.hcq import HCQBuffer, MMIOInterface
from tinygrad.runtime.ops_nv import NVComputeQueue, NVCopyQueue, NVProgram, NVArgsState  # noqa: F401  (re-exported for tests)
from tinygrad.helpers import round_up

# SM version (NV2080_CTRL_GR_INFO_SM_VERSION) and compute class of one board per arch: RTX 3090, RTX 4090, H100, RTX 5090.
# tinygrad 0.14's class lists omit Hopper (tinygrad issue #16314): sm_90 binds HOPPER_COMPUTE_A, as that issue's fix does.
BOARDS = {"sm_86": (0x806, nv_gpu.AMPERE_COMPUTE_B), "sm_89": (0x809, nv_gpu.ADA_COMPUTE_A), "sm_90": (0x900, nv_gpu.HOPPER_COMPUTE_A),
          "sm_120": (0xa04, nv_gpu.BLACKWELL_COMPUTE_B)}

class Memory:
  """Host memory standing for GPU memory: `view(addr, size)` is a writable view of the bytes at GPU address addr."""
  def __init__(self): self.blocks: dict = {}   # GPU address -> ctypes buffer
  def buffer(self, addr: int, size: int) -> HCQBuffer:
    raw = self.blocks.get(addr)
    if raw is None or len(raw) < size: raw = self.blocks[addr] = (ctypes.c_uint8 * size)()
    return HCQBuffer(addr, size, view=MMIOInterface(ctypes.addressof(raw), size))
  def read(self, addr: int, size: int) -> bytes: return bytes(self.blocks[addr])[:size]

class StandinAllocator:
  def __init__(self, dev): self.dev, self.copied = dev, {}
  def alloc(self, size, spec=None): return self.dev.memory.buffer(self.dev.next_alloc, size)
  def _copyin(self, dest, src): self.copied[dest.va_addr] = bytes(src)
  def free(self, buf, size, spec=None): pass

class StandinDevice:
  def __init__(self, arch: str, memory: Memory | None = None):
    self.sm_version, compute_class = BOARDS[arch]
    self.iface = types.SimpleNamespace(compute_class=compute_class)   # not MOCKIface: the real cubin path
    # NVDevice.__init__, the statements that derive from the SM version
    self.arch: str = "sm_120" if self.sm_version==0xa04 else f"sm_{(self.sm_version>>8)&0xff}{(val>>4) if (val:=self.sm_version&0xff) > 0xf else val}"
    self.sass_version = ((self.sm_version & 0xf00) >> 4) | (self.sm_version & 0xf)
    assert self.arch == arch
    # NVDevice._setup_gpfifos
    self.slm_per_thread, self.shader_local_mem = 0, None
    self.shared_mem_window, self.local_mem_window = 0x729400000000, 0x729300000000
    self.renderer, self.pma_enabled, self.device = object(), False, f"NV:{arch}"
    self.prof_prg_counter = itertools.count()
    self.memory = memory or Memory()
    self.allocator, self.next_alloc = StandinAllocator(self), 0
  def _ensure_has_local_memory(self, required):
    # NVDevice._ensure_has_local_memory up to the reallocation (no memory is reserved here)
    if self.slm_per_thread >= required: return
    self.slm_per_thread = round_up(required, 32)
  def synchronize(self): pass

def program(dev: StandinDevice, lib: bytes, name: str, code_addr: int, signature=()) -> NVProgram:
  """tinygrad's own NVProgram of the cubin `lib`, its code placed at `code_addr`."""
  from tinygrad.device import TinyELF
  dev.next_alloc = code_addr
  return NVProgram(dev, TinyELF(lib, name, None, signature))

def signal(addr): return types.SimpleNamespace(value_addr=addr, timestamp_addr=addr + 8)
def buf(addr): return types.SimpleNamespace(va_addr=addr)
def compute_queue(): return NVComputeQueue()
def copy_queue(): return NVCopyQueue()
