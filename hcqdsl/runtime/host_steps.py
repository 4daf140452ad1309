"""The host-step protocol between the submitter's host program (runtime/submit.py: `Submitter.host`, a generator) and
the device that runs it (runtime/emulator.py; a real-hardware device would spin on memory): after each statement the
host performs, it yields a `HostStep` (what it did and what that cost); when it must wait it yields a `Block`, and
the device resumes it once `ready` holds."""
from __future__ import annotations
from typing import Optional
import attrs
from .device import Device, Ring, Memory

__all__ = ["HostStep", "Block", "HostWait", "RingSpace", "CopyFree"]

@attrs.frozen(slots=True)
class HostStep:
  """A statement the host just performed: its cost (emulated µs, runtime/cost.py), its text, its .hcq line (None: a
  submit no statement names) and launch."""
  cost: float
  what: str
  line: Optional[int]
  launch: int

class Block:
  """A condition the host waits for: the device resumes the host program once `ready` holds on its memory."""
  def ready(self, mem: Memory) -> bool: raise NotImplementedError

@attrs.define(eq=False)
class HostWait(Block):
  addr: int
  value: int
  signal: str
  line: int
  launch: int
  stmt: str
  timeout_us: float = 10_000_000.0
  def ready(self, mem): return mem.r32(self.addr) | mem.r32(self.addr + 4) << 32 >= self.value  # 64 bits, as tinygrad's host

@attrs.define(eq=False)
class RingSpace(Block):
  ring: Ring
  need: int          # bytes
  emu: Device
  def free(self) -> int: return self.ring.size - (self.ring.wptr - self.emu.read_ptr(self.ring)) * self.ring.unit
  def ready(self, mem): return self.free() >= self.need

@attrs.define(eq=False)
class CopyFree(Block):
  """The host waits for a queue's fence to reach `value`: the engine has read all of a command-buffer copy's packets
  (the fence follows its INDIRECT_BUFFER on the ring), so the copy may be patched for a new launch."""
  ring: Ring
  addr: int
  value: int
  def ready(self, mem): return mem.r32(self.addr) >= self.value
