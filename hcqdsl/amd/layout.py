"""Where the memory plan puts each memory in the 48-bit GPU virtual address space (shared by `compile`, which lays
the plan out, and the static checks, which reject programs that cannot fit it)."""
__all__ = ["HOST_BASE", "DEVICE_BASE", "MEMORY_WINDOW", "MAX_DEVICES", "BUFFER_ALIGN", "RING_OFFSET", "SIGNAL_SLOT", "TIMESTAMP_OFFSET"]

HOST_BASE = 0x10_0000_0000         # system memory
DEVICE_BASE = 0x1000_0000_0000     # device i's memory starts at DEVICE_BASE * (i + 1): addresses need both dwords
MAX_DEVICES = (1 << 48) // DEVICE_BASE - 1   # the last device's window must end inside 48 bits
RING_OFFSET = DEVICE_BASE // 2     # the runtime's rings sit here inside each device's window
# the buffers of one memory must fit below the rings with room left for signals, code, kernargs, scratch and
# command buffers: 4 TiB
MEMORY_WINDOW = RING_OFFSET // 2
BUFFER_ALIGN = 0x1000
# a signal's slot: its value (u64, 32 bits used) at +0, a `timestamp`'s GPU clock (u64) at +TIMESTAMP_OFFSET
SIGNAL_SLOT, TIMESTAMP_OFFSET = 16, 8
