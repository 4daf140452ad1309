"""The memory plan of an image, for both vendors: where every signal, buffer, code object, kernel-argument block and
command buffer lives. Each memory (the host's, each device's window: layout.py's WINDOWS by the device's vendor) is
one bump allocator; the vendors' lowerings (amd/compile.py, nv/compile.py) ask it for the regions their statements
need."""
from __future__ import annotations
import struct
from typing import Optional
from ..ir import Program, Ref, Slice, BUFFER_ALIGN, U32_MAX, vendor_of
from .image import Region
from .layout import HOST_BASE, WINDOWS, SIGNAL_SLOT

__all__ = ["MemoryPlan", "ALIGN"]

ALIGN = {"signals": 0x1000, "buffer": BUFFER_ALIGN, "code": 0x1000, "kernargs": 64, "scratch": 0x1000, "cmdbuf": 0x1000}

class MemoryPlan:
  """Where everything lives: one bump allocator per memory (host, then each device's window), regions in allocation
  order with their initial contents. Signals (one SIGNAL_SLOT each, one region per memory) and buffers (a rebound
  buffer: one region per listed launch, its `B.addr` var listing their addresses) are placed first, in declaration
  order; code, kernel arguments, scratch and command buffers as the statements need them."""
  def __init__(self, program: Program, arch: dict):
    """`arch`: device -> its arch, whose vendor says where the device's window is (layout.py's WINDOWS)."""
    windows: dict[Optional[str], int] = {d.name: WINDOWS[vendor_of(arch[d.name])].window(i) for i, d in enumerate(program.devices)}
    self.tops: dict[Optional[str], int] = {None: HOST_BASE, **windows}
    self.regions: list[Region] = []
    self.data: list = []       # (address, bytes)
    self.signals: dict = {}    # name -> address
    self.buffers: dict = {}    # name -> (address, size); a rebound buffer's: launch 1's
    self.rebound: dict = {}    # rebound buffer -> its per-launch addresses
    self.rewrites: list = []   # (launch, address, bytes)
    self.var_values = {n: list(v) for n, v in program.var_lists.items() if v}  # empty lists: a static error
    self._signals(program.signals)
    self._buffers(program.buffers)

  def region(self, name: str, kind: str, dev: Optional[str], size: int, align: Optional[int] = None, **meta) -> int:
    """A new region of `size` bytes in `dev`'s memory, aligned to `align` (default: its kind's ALIGN)."""
    a = self.tops[dev] + -self.tops[dev] % (align or ALIGN[kind])
    self.tops[dev] = a + max(size, 1)
    self.regions.append(Region(name, kind, dev, a, size, meta))
    return a

  def _signals(self, signals):
    by_mem: dict = {}
    for s in signals: by_mem.setdefault(s.device.name if s.device else None, []).append(s)
    for mem, sigs in by_mem.items():
      base = self.region(f"signals@{mem or 'host'}", "signals", mem, SIGNAL_SLOT * len(sigs), names=[s.name for s in sigs])
      for i, s in enumerate(sigs):
        self.signals[s.name] = base + SIGNAL_SLOT * i
        if s.init: self.data.append((self.signals[s.name], struct.pack("<Q", s.init & U32_MAX)))

  def _buffers(self, buffers):
    for b in buffers:
      dev = b.device.name if b.device else None
      if b.per_launch == "rebound" and b.launch_inits:
        addrs = [self.region(f"{b.name}@{k + 1}", "buffer", dev, b.size, launch=k + 1) for k in range(len(b.launch_inits))]
        self.data += [(a, d.to_bytes()) for a, d in zip(addrs, b.launch_inits)]
        self.buffers[b.name] = (addrs[0], b.size)
        self.rebound[b.name] = self.var_values[f"{b.name}.addr"] = addrs
        continue
      self.buffers[b.name] = (a := self.region(b.name, "buffer", dev, b.size), b.size)
      if b.per_launch == "rewritten" and b.launch_inits:
        # the listed bytes only: the host zero-fills the rest of the buffer (an image stays small for a big buffer)
        self.rewrites += [(k + 1, a, d.to_bytes()) for k, d in enumerate(b.launch_inits)]
        self.data.append((a, self.rewrites[-len(b.launch_inits)][2]))
      elif b.init is not None: self.data.append((a, b.init.to_bytes()))

  def signal(self, ref: Ref) -> int: return self.signals[ref.name]

  def slice(self, sl: Slice) -> tuple:
    """(address, size) of a slice's bytes; launch 1's memory for a rebound buffer (launch k's for `x@k`: the region x
    has in launch k, a fixed address)."""
    a, size = self.buffers[sl.buffer.name]
    if sl.launch is not None: a = self.rebound[sl.buffer.name][sl.launch - 1]
    lo, hi = sl.bounds(size)
    return a + lo, hi - lo
