"""Where the memory plan puts each memory in the 48-bit GPU virtual address space. The limits a program must fit
(device windows, buffer space, alignment) are the language's (hcqdsl/ir.py), checked statically; this is where
`compile` and the runtime place things inside them."""
from ..ir import DEVICE_WINDOW, MAX_DEVICES, MEMORY_WINDOW, BUFFER_ALIGN
from ..target.layout import SIGNAL_SLOT, TIMESTAMP_OFFSET, kernarg_layout

__all__ = ["HOST_BASE", "DEVICE_BASE", "MEMORY_WINDOW", "MAX_DEVICES", "BUFFER_ALIGN", "RING_OFFSET", "SIGNAL_SLOT",
           "TIMESTAMP_OFFSET", "kernarg_layout"]

HOST_BASE = 0x10_0000_0000         # system memory
DEVICE_BASE = DEVICE_WINDOW        # device i's memory starts at DEVICE_BASE * (i + 1): addresses need both dwords
RING_OFFSET = DEVICE_BASE // 2     # the runtime's rings sit here inside each device's window
assert MEMORY_WINDOW <= RING_OFFSET // 2   # buffers end well below the rings
