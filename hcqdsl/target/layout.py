"""Where memories live, for both vendors: the facts of the memory plan every image shares, and each vendor's device
windows and ring bases (WINDOWS), which the memory plan (plan.py) and the runtime's rings (runtime/submit.py) ask.
The limits a program must fit (window sizes, buffer space, alignment) are the language's (hcqdsl/ir.py), checked
statically; this is where `compile` and the runtime place things inside them."""
import attrs
from ..ir import DEVICE_WINDOW, MEMORY_WINDOW, NV_WINDOW_BASE, NV_DEVICE_WINDOW, kernarg_layout   # (the layout: ir.py, which the checker asks too)

__all__ = ["SIGNAL_SLOT", "TIMESTAMP_OFFSET", "HOST_BASE", "Windows", "WINDOWS", "kernarg_layout", "kernargs_region"]

# a signal's slot: its value (u64, 32 bits used) at +0, a `timestamp`'s GPU clock (u64) at +TIMESTAMP_OFFSET
SIGNAL_SLOT, TIMESTAMP_OFFSET = 16, 8

HOST_BASE = 0x10_0000_0000   # system memory, for every vendor (with an NV device its buffers end below NV_WINDOW_BASE)

@attrs.frozen
class Windows:
  """A vendor's device memory: device number i (declaration order, counting every device of the program) has the
  window `base + i * stride`, and the runtime's rings sit at `ring_offset` inside it."""
  base: int
  stride: int
  ring_offset: int
  def window(self, i: int) -> int: return self.base + i * self.stride
  def ring_base(self, i: int) -> int: return self.window(i) + self.ring_offset

WINDOWS = {
  # AMD (docs/amd.md): window i + 1 of DEVICE_WINDOW (window 0 holds system memory), so addresses need both dwords;
  # the rings in the window's upper half, well above the buffers
  "AMD": Windows(DEVICE_WINDOW, DEVICE_WINDOW, DEVICE_WINDOW // 2),
  # NV (docs/nv.md): below 2**40 (nv/layout.py's ADDR_BITS); the rings above a window's buffers and the rest
  "NV": Windows(NV_WINDOW_BASE, NV_DEVICE_WINDOW, 7 * NV_DEVICE_WINDOW // 8),
}
assert MEMORY_WINDOW <= WINDOWS["AMD"].ring_offset // 2   # buffers end well below the rings

def kernargs_region(queue: str, index: int) -> str:
  """The name of the kernel-argument region of the exec at `index` of `queue`'s body (compile names it, a replay
  finds the block a race on an exec's kernel arguments is about by it)."""
  return f"{queue}.kernargs.{index}"
