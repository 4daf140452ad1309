"""Where the memory plan puts an NV device's memory: below 2**40, since the semaphore methods (SEM_ADDR_HI: 8 bits), the
QMD pointers (SEND_PCAS_A, DEPENDENT_QMD0_POINTER: address >> 8 in 32 bits) and the GPFIFO entries address 40 bits.
The window sizes are the language's (hcqdsl/ir.py), checked statically."""
from ..ir import NV_WINDOW_BASE, NV_DEVICE_WINDOW, NV_MEMORY_WINDOW

__all__ = ["ADDR_BITS", "window", "NV_RING_OFFSET", "NV_MEMORY_WINDOW"]

ADDR_BITS = 40
NV_RING_OFFSET = 7 * NV_DEVICE_WINDOW // 8   # the runtime's rings inside an NV device's window (above its buffers and the rest)

def window(i: int) -> int:
  """Where device number i (declaration order, counting every device) has its memory when it is an NV device."""
  return NV_WINDOW_BASE + i * NV_DEVICE_WINDOW
