"""A stand-in for tinygrad's AMDDevice: just what AMDComputeQueue / AMDCopyQueue read while building packets, so tests
and benchmarks can run tinygrad's own packet builders without a GPU. Register blocks and header modules are picked the
same way AMDDevice.__init__ picks them (via hcqdsl.amd.targets, which mirrors it)."""
from __future__ import annotations
import types
from tinygrad.runtime.ops_amd import AMDComputeQueue, AMDCopyQueue  # noqa: F401  (re-exported for tests)
from hcqdsl.amd.targets import get_target

class StandinDevice:
  def __init__(self, arch: str, scratch_addr: int = 0x7F00_0000_0000, tmpring_size: int = 0x1234):
    t = get_target(arch)
    self.target, self.arch = t.gfx, arch
    self.soc, self.pm4, self.sdma, self.gc, self.nbio = t.soc, t.pm4, t.sdma, t.gc, t.nbio
    self.xccs, self.sqtt_enabled, self.max_copy_size = 1, False, t.max_copy_size
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
