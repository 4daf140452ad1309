"""Where the memory plan puts each memory in the 48-bit GPU virtual address space. The limits a program must fit
(device windows, buffer space, alignment) are the language's (hcqdsl/ir.py), checked statically; this is where
`compile` and the runtime place things inside them."""
from ..ir import DEVICE_WINDOW, MAX_DEVICES, MEMORY_WINDOW, BUFFER_ALIGN

__all__ = ["HOST_BASE", "DEVICE_BASE", "MEMORY_WINDOW", "MAX_DEVICES", "BUFFER_ALIGN", "RING_OFFSET", "SIGNAL_SLOT",
           "TIMESTAMP_OFFSET", "kernarg_layout"]

HOST_BASE = 0x10_0000_0000         # system memory
DEVICE_BASE = DEVICE_WINDOW        # device i's memory starts at DEVICE_BASE * (i + 1): addresses need both dwords
RING_OFFSET = DEVICE_BASE // 2     # the runtime's rings sit here inside each device's window
assert MEMORY_WINDOW <= RING_OFFSET // 2   # buffers end well below the rings
# a signal's slot: its value (u64, 32 bits used) at +0, a `timestamp`'s GPU clock (u64) at +TIMESTAMP_OFFSET
SIGNAL_SLOT, TIMESTAMP_OFFSET = 16, 8

def kernarg_layout(params) -> tuple:
  """(byte offset of each argument in the kernel arguments, their size) for Params (a buffer: an 8-byte pointer, a
  scalar: a 4-byte value) or byte sizes, each aligned to its size: tinygrad's layout (its kernels take buffers first,
  then their variables), which compile writes and lift reads back."""
  offs, top = [], 0
  for p in params:
    n = p if type(p) is int else 4 if p.scalar else 8
    top += -top % n
    offs.append(top)
    top += n
  return offs, top
