"""What a run that did not finish reports: a device fault (a packet or access the device cannot perform, a crashed
kernel) and a hang (no queue and not the host can progress: each blocked one, what it waits for: the `Waiting`,
target/engine.py's, its vendor's engine left). Built by runtime/emulator.py, read by
runtime/execute.py (`RunResult.fault`, `.hang`) and printed by the CLI."""
from __future__ import annotations
from typing import Optional
import attrs
from ..amd.packet import Packet

__all__ = ["Fault", "Blocked", "Hang", "report_json"]

def report_json(x) -> dict:
  """A Fault or Blocked as JSON (`run --format json`): its fields, the packet by its name and dwords."""
  out = attrs.asdict(x, recurse=False)
  p = out.pop("packet")
  out["packet"] = None if p is None else {"name": p.name, "dwords": list(p.dwords[:16]), "note": p.note or None}
  if out.get("ib") is not None: out["ib"] = list(out["ib"])
  return out

@attrs.define
class Fault:
  queue: str
  device: Optional[str]
  ring_offset: Optional[int]   # bytes into the ring (None: the host)
  packet: Optional[Packet]
  message: str
  launch: Optional[int] = None
  line: Optional[int] = None
  stmt: Optional[str] = None
  ib: Optional[tuple] = None   # (IB address, dword offset) when the packet came from an indirect buffer
  def __str__(self):
    where = f"ring offset {self.ring_offset:#x}" if self.ring_offset is not None else "host"
    if self.ib: where += f", IB {self.ib[0]:#x}+{4 * self.ib[1]:#x}"
    s = f"fault on queue {self.queue} ({where}): {self.message}"
    if self.packet is not None:
      s += f"\n    packet {self.packet.name} [{' '.join(f'{d:08x}' for d in self.packet.dwords[:16])}" \
           f"{' ...' if len(self.packet.dwords) > 16 else ''}]" + (f" ({self.packet.note})" if self.packet.note else "")
    if self.line: s += f"\n    from line {self.line}: `{self.stmt}` (launch {self.launch})"
    return s

@attrs.define
class Blocked:
  """One blocked queue (or the host) in a hang."""
  queue: str
  device: Optional[str]
  ring_offset: Optional[int]
  packet: Optional[Packet]
  signal: Optional[str]      # .hcq name of the polled address (None: not a signal)
  addr: Optional[int]
  func: str
  needed: Optional[int]
  now: Optional[int]
  launch: Optional[int] = None
  line: Optional[int] = None
  stmt: Optional[str] = None
  reason: str = "wait"       # wait | ring-full | timeout
  release: Optional[str] = None  # which statement's write could release the wait, or that none can
  mask: Optional[int] = None     # the bits compared (a `poll`'s mask; all 32 for a wait)
  def __str__(self):
    where = f"ring offset {self.ring_offset:#x} {self.packet.name if self.packet else ''}".rstrip() if self.ring_offset is not None else "host"
    if self.reason == "ring-full": what = f"ring full: needs {self.needed} free bytes, has {self.now}"
    elif self.func == "==" and self.mask is not None:   # a `poll` (tinygrad's poll_bit)
      what = f"polls {self.signal or hex(self.addr or 0)} & {self.mask:#x} == {self.needed:#x}, value now {self.now:#x}"
    else: what = f"waits {self.signal or hex(self.addr or 0)} {self.func} {self.needed}, value now {self.now}"
    s = f"{self.queue}{f' ({self.device})' if self.device else ''} [{where}]: {what}"
    if self.reason == "timeout": s += " (timed out)"
    if self.line: s += f"\n      at line {self.line}: `{self.stmt}` (launch {self.launch})"
    if self.release: s += f"\n      {self.release}"
    return s

@attrs.define
class Hang:
  blocked: list
  def __str__(self): return "hang: no queue can progress\n" + "\n".join(f"  {b}" for b in self.blocked)
  @property
  def lines(self) -> set: return {b.line for b in self.blocked if b.line}
