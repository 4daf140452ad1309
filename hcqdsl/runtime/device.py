"""The device interface the submit interpreter drives, and the sparse numpy memory the emulator implements it with.

A device owns one virtual address space. The submit interpreter only ever:
  allocate(addr, size, name, device)   place a region at an address of the image's memory plan (or a ring)
  map(addr, size) -> np.ndarray        a writable CPU view (uint8) of mapped bytes
  write(addr, data) / read(addr, n)    bytes in and out
  create_queue(name, engine, device, arch, ring_size) -> Ring   a hardware queue with its ring and pointers
  doorbell(ring, wptr)                 publish a new write pointer (units: dwords for PM4, bytes for SDMA)
  read_ptr(ring) -> int                how far the engine has read (same units)
and hands the host program (a generator, see submit.py) to `run`, which interleaves it with the device's engines. A
real-hardware device (tinygrad) implements the same calls over its mapped memory and runs the host generator by
spinning on signal memory with a timeout.
"""
from __future__ import annotations
import bisect, mmap, sys
from typing import Optional
import attrs
import numpy as np
from ..ir import U32_MAX
from ..vendors import wptr_bytes
from ..target.engine import DeviceFault

__all__ = ["Device", "Ring", "Memory", "MemRegion"]

@attrs.define(eq=False)
class Ring:
  name: str       # the queue's .hcq name
  engine: str     # compute (PM4) | copy (SDMA)
  device: str
  arch: str
  addr: int       # ring base address
  size: int       # bytes, a power of two
  wptr: int = 0   # what the host has published (absolute, never wrapped), in steps of `unit` bytes
  unit: int = attrs.field(init=False)   # bytes one step of the write pointer covers (the vendor's WPTR_BYTES)
  def __attrs_post_init__(self): self.unit = wptr_bytes(self.arch, self.engine)

class Device:
  """Base class: the calls submit.py makes. See the module docstring."""
  def allocate(self, addr: int, size: int, name: str, device: Optional[str]) -> None: raise NotImplementedError
  def map(self, addr: int, size: int) -> np.ndarray: raise NotImplementedError
  def write(self, addr: int, data) -> None: self.map(addr, len(data))[:] = np.frombuffer(bytes(data), np.uint8)
  def read(self, addr: int, size: int) -> bytes: return self.map(addr, size).tobytes()
  def zero(self, addr: int, size: int) -> None: self.map(addr, size)[:] = 0
  def create_queue(self, name: str, engine: str, device: str, arch: str, ring_size: int, addr: Optional[int] = None) -> Ring:
    raise NotImplementedError
  def doorbell(self, ring: Ring, wptr: int) -> None: raise NotImplementedError
  def read_ptr(self, ring: Ring) -> int: raise NotImplementedError
  def signal_write(self, addr: int, value: int) -> None:
    """A host `signal` statement: the 32-bit value stored in the slot's 64 bits (tinygrad's HCQSignal.value setter)."""
    self.write(addr, (value & U32_MAX).to_bytes(8, "little"))
  def run(self, host): raise NotImplementedError

_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform.startswith("linux") else 0)  # Python < 3.12: no name

MAPPINGS = [0]   # shared mappings made so far: a kernel worker forked before the latest one cannot see it

PAGE = mmap.PAGESIZE

def _mprotect_none():
  """libc's mprotect(addr, len, PROT_NONE), or None where it cannot be had (the guards are then left out)."""
  try:
    import ctypes
    f = ctypes.CDLL(None, use_errno=True).mprotect
    f.argtypes, f.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
    return lambda addr, n: f(addr, n, 0) == 0
  except (OSError, AttributeError): return None
_PROTECT = _mprotect_none() if sys.platform.startswith("linux") else None
MAPS_PER_REGION = 3 if _PROTECT is not None else 1   # the kernel's mappings a region takes: its pages and two guard pages

def _zeros(n: int) -> np.ndarray:
  """n zero bytes in an anonymous *shared* mapping without swap reservation: a huge buffer the program barely touches
  costs the pages it touches (np.zeros would be refused past the kernel's overcommit heuristic), and a forked kernel
  worker (kernels.Worker) writes the same pages the emulator reads. The bytes end at a guard page (PROT_NONE) and a
  guard page sits before their first page, so a C kernel that runs past either end of its buffer faults at once
  (SIGSEGV in the worker, reported with the buffer and the offset) instead of writing whatever lies there."""
  if not hasattr(mmap, "MAP_ANONYMOUS"): return np.zeros(n, np.uint8)
  body = -(-max(n, 1) // PAGE) * PAGE
  guard = PAGE if _PROTECT is not None else 0
  m = mmap.mmap(-1, body + 2 * guard, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS | _NORESERVE)
  MAPPINGS[0] += 1
  whole = np.frombuffer(m, np.uint8)
  if guard and _PROTECT is not None:
    base = whole.ctypes.data
    if not (_PROTECT(base, guard) and _PROTECT(base + guard + body, guard)): guard = 0   # (then no guards, as before)
  start = guard + body - n if guard else 0   # end-aligned: the first byte past the end is on the guard page
  return whole[start:start + n]

class MemRegion:
  """A region of the emulated address space and the host memory that holds it (`u8`; a C kernel sees its address)."""
  __slots__ = ("base", "end", "size", "name", "device", "u8", "u32", "m8", "m32")
  def __init__(self, base: int, size: int, name: str, device: Optional[str]):
    self.base, self.size, self.end, self.name, self.device = base, size, base + size, name, device
    self.u8 = _zeros(size + (-size % 8))  # padded so the u32 view covers every byte
    self.u32 = self.u8.view("<u4")
    # memoryviews of the same bytes for the emulator's per-packet accesses: indexing one reads or writes a Python
    # int and slice assignment is a memmove, several times cheaper than numpy scalar access (the native format
    # "I" is little-endian u32 only on a little-endian host; elsewhere the numpy view does the same job, slower)
    self.m8 = self.u8.data
    self.m32 = self.u8.data.cast("I") if sys.byteorder == "little" else self.u32

class Memory:
  """Sparse address space: non-overlapping regions found by bisection, the last hit cached. Every write bumps
  `writes` (the scheduler retries a blocked wait only after something was written)."""
  def __init__(self):
    self.starts: list = []
    self.regions: list = []
    self.last: Optional[MemRegion] = None
    self.writes = 0

  def add(self, base: int, size: int, name: str, device: Optional[str] = None) -> MemRegion:
    size = max(size, 1)
    i = bisect.bisect_right(self.starts, base)
    if (i and self.regions[i - 1].end > base) or (i < len(self.starts) and self.starts[i] < base + size):
      raise DeviceFault(f"region {name} at {base:#x} overlaps another")
    r = MemRegion(base, size, name, device)
    self.starts.insert(i, base)
    self.regions.insert(i, r)
    return r

  def find(self, addr: int, n: int = 1) -> MemRegion:
    last = self.last
    if last is not None and last.base <= addr and addr + n <= last.end: return last
    i = bisect.bisect_right(self.starts, addr) - 1
    if i < 0 or addr >= (r := self.regions[i]).end:
      raise DeviceFault(f"access to unmapped address {addr:#x}")
    if addr + n > r.end: raise DeviceFault(f"access of {n} bytes at {addr:#x} runs past the end of {r.name}")
    self.last = r
    return r

  def host_region(self, host_addr: int) -> Optional[tuple]:
    """(region, byte offset) of a host address in or next to a region's host memory (within a page of its ends: its
    guard pages), for a fault a C kernel took there; None when it is near no region."""
    best = None   # the nearest region (guard pages of neighbouring mappings can touch)
    for r in self.regions:
      a = r.u8.ctypes.data
      if a - PAGE <= host_addr < a + len(r.u8) + PAGE:
        d = a - host_addr if host_addr < a else max(0, host_addr - (a + r.size) + 1)
        if best is None or d < best[0]: best = (d, r, host_addr - a)
    return best[1:] if best is not None else None

  def view(self, addr: int, n: int) -> np.ndarray:
    r = self.find(addr, n)
    return r.u8[addr - r.base:addr - r.base + n]

  def zero(self, addr: int, n: int) -> None:
    """n bytes at addr set to zero. The whole pages among them are given back to the kernel (MADV_REMOVE on the
    shared mapping: they read as zeros again, in the emulator and in a forked kernel worker alike), so zeroing the
    rest of a 1 GiB `rewritten` buffer costs neither 1 GiB of memory nor a pass over it."""
    r = self.find(addr, n)
    off = addr - r.base
    m: object = r.u8.base
    while isinstance(m, (np.ndarray, memoryview)): m = m.base if isinstance(m, np.ndarray) else m.obj   # _zeros' mmap
    self.writes += 1
    if n >= 2 * PAGE and isinstance(m, mmap.mmap) and hasattr(mmap, "MADV_REMOVE"):
      start = r.u8.ctypes.data - np.frombuffer(m, np.uint8).ctypes.data + off   # the bytes' offset in the mapping
      lo, hi = -(-start // PAGE) * PAGE, (start + n) // PAGE * PAGE
      r.u8[off:off + lo - start] = 0
      r.u8[off + hi - start:off + n] = 0
      m.madvise(mmap.MADV_REMOVE, lo, hi - lo)
    else: r.u8[off:off + n] = 0

  def cell(self, addr: int) -> tuple:
    """(the region's 32-bit memoryview, dword index) of an aligned, mapped dword: a handle that stays valid (regions
    never move or go away). DeviceFault as r32 would raise otherwise."""
    if addr & 3: raise DeviceFault(f"unaligned 32-bit read at {addr:#x}")
    r = self.find(addr, 4)
    return r.m32, (addr - r.base) >> 2

  def span(self, addr: int, n: int) -> memoryview:
    """A memoryview of n mapped bytes (see view)."""
    r = self.find(addr, n)
    return r.m8[addr - r.base:addr - r.base + n]

  def r32(self, addr: int) -> int:
    if addr & 3: raise DeviceFault(f"unaligned 32-bit read at {addr:#x}")
    r = self.find(addr, 4)
    return int(r.u32[(addr - r.base) >> 2])

  def w32(self, addr: int, v: int) -> None:
    if addr & 3: raise DeviceFault(f"unaligned 32-bit write at {addr:#x}")
    r = self.find(addr, 4)
    r.u32[(addr - r.base) >> 2] = v & U32_MAX
    self.writes += 1

  def w64(self, addr: int, v: int) -> None:
    self.w32(addr, v & U32_MAX)
    self.w32(addr + 4, (v >> 32) & U32_MAX)

  def write(self, addr: int, data) -> None:
    b = np.frombuffer(bytes(data), np.uint8) if not isinstance(data, np.ndarray) else data.view(np.uint8).reshape(-1)
    self.view(addr, len(b))[:] = b
    self.writes += 1
