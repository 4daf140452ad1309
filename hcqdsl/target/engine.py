"""What a vendor's emulator engine gives the scheduler (runtime/emulator.py), filled in by amd/engine.py (PM4, SDMA) and
nv/engine.py (NV pushbuffers): per engine kind and arch an `EngineKind` (the decoder, the packet
length rule, the write-pointer unit and `prepare`, which turns one decoded packet into a `Prepared` handler with its
operands and cost). A handler is `handler(engine, operands) -> bool`: True when the packet is done, False when it
blocks (a wait; it leaves a `Waiting` in `engine.wait_info`, which the hang report shows). It reads and writes the engine's memory, register
file and clock; it raises DeviceFault for what the device cannot do."""
from __future__ import annotations
from typing import Any, Callable, Optional
import attrs

__all__ = ["EngineKind", "Prepared", "Length", "fault", "DeviceFault", "Waiting", "COPY_BYTES_PER_US"]

COPY_BYTES_PER_US = 25_000      # SDMA copies and NV's copy engine, in the cost model's emulated µs (docs/run.md): 25 GB/s

class DeviceFault(Exception):
  """An access or packet the device cannot perform; the emulator turns it into a Fault report."""

@attrs.frozen(slots=True)
class Waiting:
  """The wait an engine is blocked at: the polled address (None: a register), the reference value, the bits compared,
  the comparison (`>=`, `==`, ...: each vendor's engine words its own codes, amd.pm4.WAIT_FUNCTIONS, nv.meaning.SEM_COMPARE)
  and the value it last read. An engine busy at no wait shows as `Waiting()`."""
  addr: Optional[int] = None
  ref: Optional[int] = None
  mask: Optional[int] = None
  compare: str = ">="
  value: Optional[int] = None

def fault(e, msg: str) -> bool:
  """The handler of a packet that cannot execute (unknown, malformed, unsupported): the fault is raised when it runs."""
  raise DeviceFault(msg)

@attrs.frozen(slots=True)
class Prepared:
  """A decoded packet ready to execute: its handler, the operands prepare extracted (and resolved) for it, its cost in
  emulated µs (docs/run.md's cost model), and whether it enters an indirect buffer (then only the engine's one-packet step runs
  it: the indirect-buffer stack is the step's)."""
  handler: Callable
  operands: Any
  cost: float = 0.0
  indirect: bool = False

class Length:
  """A decoder's packet-length rule (amd.pm4.packet_length, amd.sdma.Decoder.packet_length, nv.pushbuf.packet_length),
  memoized by header dword; -1 in `memo`: the length is in a later dword (SDMA WRITE_UNTILED)."""
  def __init__(self, rule, header_only): self.rule, self.header_only, self.memo = rule, header_only, {}
  def __call__(self, h: int, get) -> int:
    n = self.memo.get(h)
    if n is None:
      n = self.memo[h] = self.header_only(h)
      if len(self.memo) > 1 << 16: self.memo.clear()  # random rings: do not grow without bound
    return n if n > 0 else self.rule(h, get)

@attrs.frozen
class EngineKind:
  """One kind of engine on one arch, as its vendor's module describes it. `prepare(packet, codec) -> Prepared` may
  raise DeviceFault (an unsupported field value: a fault when the packet runs); `codec.cell(addr)` and `codec.fast`
  let it resolve hot operands to memory cells. `pgm_lo`, `user_data` and `num_thread` are the register offsets of a
  PM4 dispatch's program address, user data and workgroup size, which the dispatch and the RDNA3 executor read (-1: an
  engine without them)."""
  decoder: Any           # .decode_one(dwords, 0) -> amd.packet.Packet
  length: Length
  prepare: Callable
  unit: int              # bytes one step of the ring's write pointer covers (the vendor's meaning.WPTR_BYTES)
  pgm_lo: int = -1
  user_data: int = -1
  num_thread: int = -1
