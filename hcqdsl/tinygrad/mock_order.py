"""An order forced on tinygrad's mock AMD GPU (test/mockgpu): one queue is held before one command until a command of
another queue has run to its end — the witness of a race, made to happen in what tinygrad really submits. This is the
mechanism tests/upstream/ uses to make a device lag, made a feature (`hcqdsl sanitize --confirm`, docs/sanitize.md).

The mock runs every queue as far as it can each time a doorbell is rung (or a signal written). Here the held queue and
the awaited one are stepped one packet at a time instead, counting the dwords each has executed the way a capture
counts them (a queue's stream: its ring's dwords since it was created, each indirect buffer's packets in place of the
packet that calls it), so a command is found by the offset the sanitizer's lift gave it (`# @N`). The held queue runs
freely up to the held command and stops there; every other queue runs as the mock runs it. When the awaited command has
run to its end the hold is released. When the host waits for a signal nothing can set while the queue is held, the
order cannot happen with what tinygrad submitted (the host waits for the held queue first): the hold is released and
`infeasible` says why. A legal schedule: a GPU may be that slow (busy with earlier work).

Both of tinygrad's AMD paths: classic HCQ (host waits in `HCQSignal.wait`) and hcq2 (`HCQ2Compiled._wait_signal`).
Needs the mock GPU (`DEV=MOCKKFD+AMD`, tinygrad's test/mockgpu importable); the mock NV GPU runs no kernels, so an order
forced there changes no number (the caller says so instead)."""
from __future__ import annotations
import gc
from typing import Any, Optional
import attrs

__all__ = ["Place", "Hold", "mock_driver"]

@attrs.frozen
class Place:
  """A command in what tinygrad submitted: its device's queue (`engine` compute or copy, `index` the copy queue's) and
  its dwords [start, end) in that queue's stream (the capture's: indirect buffers spliced in); `header`: its first
  dword, to recognise it in another run of the same program."""
  device: str
  engine: str
  index: int
  start: int
  end: int
  header: int
  def __str__(self) -> str:
    return f"{self.device}'s {'compute' if self.engine == 'compute' else f'copy {self.index}'} queue at dword {self.start}"

def mock_driver():
  """tinygrad's mock AMD driver of this process, or None (no mock GPU)."""
  import sys
  mg = sys.modules.get("test.mockgpu.mockgpu")
  if mg is None: return None
  from test.mockgpu.amd.amddriver import AMDDriver
  return next((d for d in mg.drivers if isinstance(d, AMDDriver)), None)

def _ring_addr(dev, engine: str, index: int) -> Optional[int]:
  """The ring address of a tinygrad device's queue (classic HCQ's AMDQueueDesc, or hcq2's queue of Buffers)."""
  q = dev.__dict__.get("compute_queue") if engine == "compute" else (getattr(dev, "sdma_queues", None) or {}).get(index)
  ring = getattr(q, "ring", None)
  if ring is None: return None
  if hasattr(ring, "addr"): return int(ring.addr)
  try: return int(ring.ensure_allocated()._buf.va_addr)
  except Exception: return None

def _executor_addr(q) -> int:
  from tinygrad.helpers import mv_address
  return int(q.base) if hasattr(q, "base") else mv_address(getattr(q.queue, "mv", q.queue))   # (the mock's TrackedMemoryView)

class _Tracked:
  """A mock queue stepped one packet at a time: `pos`, the dwords of its stream it has executed."""
  def __init__(self, place: Place):
    self.place, self.pos, self.sdma = place, 0, place.engine == "copy"
    self.q: Any = None   # the mock's executor of this queue, once the device is open
    self.wrong: Optional[str] = None   # the re-run's command at the place is not the sanitized run's

  def resolve(self, drv) -> None:
    if self.q is not None: return
    from tinygrad.device import Device
    if self.place.device not in Device._opened_devices: return
    addr = _ring_addr(Device[self.place.device], self.place.engine, self.place.index)
    if addr is None: return
    for gpu in drv.gpus.values():
      for q in gpu.queues:
        if _executor_addr(q) == addr:
          self.q = q
          if q.rptr[0] != 0: self.wrong = f"{self.place.device}'s queue had run before it could be followed"

  def header(self) -> Optional[tuple]:
    """(first dword, is an indirect buffer) of the next packet at the innermost level, or None (nothing to run)."""
    q = self.q
    while not self.sdma and q.ib_executor is not None and q.ib_executor.executing: q = q.ib_executor
    if q.rptr[0] >= q.wptr[0]: return None
    if self.sdma: return int(q.queue[(q.rptr[0] // 4) % (q.size // 4)]), False
    from ..amd.meaning import pm4_header
    h = int(q.queue[q.rptr[0] % (q.size // 4)])
    return h, pm4_header(h)[1]

  def step(self, stop_at: Optional[int]) -> bool:
    """Run one packet (an indirect buffer entered counts no dword); not the packet at `stop_at`. True on progress."""
    q = self.q
    if q is None: return False
    if self.sdma:
      if q.rptr[0] >= q.wptr[0] or (stop_at is not None and self.pos >= stop_at): return False
      wptr = q.wptr[0]
      if stop_at is not None: q.wptr[0] = min(wptr, 4 * stop_at)
      try: ran = q.execute()
      finally: q.wptr[0] = wptr
      self.pos = q.rptr[0] // 4
      return ran > 0
    h = self.header()
    if h is None:
      if q.ib_executor is not None and not q.ib_executor.executing:   # (an indirect buffer that ended)
        self._drop_finished(q)
        return True
      return False
    if stop_at is not None and self.pos >= stop_at and not h[1]: return False
    n = _pm4_step(q)
    if n < 0: return False
    self.pos += n
    return True

  @staticmethod
  def _drop_finished(q) -> None:
    while q.ib_executor is not None:
      if not q.ib_executor.executing:
        q.ib_executor = None
        return
      q = q.ib_executor

def _pm4_step(q) -> int:
  """One PM4 packet of mock executor q (descending into its indirect buffer): the dwords it counts in the stream (0 for
  entering an indirect buffer), -1 when it made no progress (a wait that does not pass)."""
  if q.ib_executor is not None:
    n = _pm4_step(q.ib_executor)
    if not q.ib_executor.executing: q.ib_executor = None
    return n if n >= 0 else (0 if q.ib_executor is None else -1)
  if q.rptr[0] >= q.wptr[0]: return -1
  from ..amd.meaning import pm4_header
  n, indirect = pm4_header(int(q.queue[q.rptr[0] % (q.size // 4)]))
  if indirect:
    q._next_dword()
    q._exec_indirect_buffer(n)
    return 0
  wptr, q.wptr[0] = q.wptr[0], q.rptr[0] + n + 2   # one packet (a wait that does not pass makes no progress)
  try: return n + 2 if q.execute() > 0 else -1
  finally: q.wptr[0] = wptr

@attrs.define
class Order:
  """One forced order: `held`'s command starts only once `until`'s has run to its end. After the run: `ran` (it did),
  `reached` (the held queue stood at its command, waiting), `infeasible` (why it could not: the hold was released)."""
  held: Place
  until: Place
  ran: bool = False
  reached: bool = False
  released: bool = False
  infeasible: Optional[str] = None
  def to_json(self) -> dict: return {"ran": self.ran, "reached": self.reached, "infeasible": self.infeasible}

class Hold:
  """Force `orders` on the mock GPU (`install()`; `restore()` lets every queue catch up): each queue with a command
  named in an order is stepped one packet at a time and stops before a held command until its awaited command has
  run. `wrong`: the run's commands at those places are not the ones named (a different run)."""
  def __init__(self, orders: list):
    self.orders = [o if isinstance(o, Order) else Order(*o) for o in orders]
    self.tracked: dict = {}
    for o in self.orders:
      for p in (o.held, o.until): self.tracked.setdefault((p.device, p.engine, p.index), _Tracked(p))
    self.drv: Any = None
    self.running = False   # (re-entrancy: a packet's writes ring the mock's callbacks, which run run_all again)
    self._saved: list = []

  def queue(self, p: Place) -> _Tracked: return self.tracked[(p.device, p.engine, p.index)]

  @property
  def wrong(self) -> Optional[str]:
    return next((t.wrong for t in self.tracked.values() if t.wrong), None)

  def install(self) -> "Hold":
    self.drv = drv = mock_driver()
    if drv is None: raise RuntimeError("tinygrad's mock AMD GPU is not in use (DEV=MOCKKFD+AMD)")
    drv._emulate_execute = self.run_all
    from tinygrad.runtime.support.hcq import HCQSignal
    orig = HCQSignal.__dict__["wait"]
    def wait(sig, value, timeout=None):
      if not self.running: self.host_waits(lambda: sig.value < value)
      return orig(sig, value, timeout)
    self._saved.append((HCQSignal, "wait", orig))
    setattr(HCQSignal, "wait", wait)
    try: from tinygrad.runtime.support.hcq2 import HCQ2Compiled
    except ImportError: return self
    orig2 = HCQ2Compiled.__dict__["_wait_signal"]
    def wait2(dev, sig, value, timeout=None):
      if not self.running: self.host_waits(lambda: sig[0] < value)   # (the mock's kernel emulator waits on the CPU device too)
      return orig2(dev, sig, value, timeout)
    self._saved.append((HCQ2Compiled, "_wait_signal", orig2))
    setattr(HCQ2Compiled, "_wait_signal", wait2)
    return self

  def restore(self) -> None:
    for cls, name, orig in reversed(self._saved): setattr(cls, name, orig)
    self._saved.clear()
    for o in self.orders: o.released = True
    if self.drv is not None:
      self.run_all()
      if "_emulate_execute" in self.drv.__dict__: del self.drv._emulate_execute

  def host_waits(self, pending) -> None:
    """The host is about to wait: run what can run; if it still must wait while queues are held at their commands,
    those orders cannot happen (the host waits for a held queue before the awaited command is submitted): release."""
    self.run_all()
    while pending():
      stuck = [o for o in self.orders if not o.released and o.reached]
      if not stuck: return
      for o in stuck:
        o.released = True
        o.infeasible = (f"the host waited for a signal that needs {o.held.device}'s queue past the held command before "
                        f"{o.until} had run")
      self.run_all()

  def run_all(self) -> None:
    drv = self.drv
    if self.running: return
    self.running, gc_was = True, gc.isenabled()
    gc.disable()   # a Buffer freed inside a packet would synchronize a device from inside the mock GPU
    try:
      for t in self.tracked.values(): t.resolve(drv)
      mine = {id(t.q) for t in self.tracked.values() if t.q is not None}
      progress = True
      while progress:
        progress = False
        for gpu in drv.gpus.values():
          for q in gpu.queues:
            if id(q) not in mine and q.executing: progress |= q.execute() > 0
        for t in self.tracked.values(): progress |= self._run(t)
    finally:
      self.running = False
      if gc_was: gc.enable()

  def _stop(self, t: _Tracked) -> Optional[int]:
    """Where queue t must stop: the first of its held commands whose awaited command has not run."""
    at = [o.held.start for o in self.orders if not o.released and self.queue(o.held) is t]
    return min(at) if at else None

  def _run(self, t: _Tracked) -> bool:
    progress = False
    while t.q is not None:
      for o in self.orders:   # the places named here: the run's command there is the sanitized run's
        for p in (o.held, o.until):
          if self.queue(p) is t and t.pos == p.start and (hd := t.header()) is not None and not hd[1] and hd[0] != p.header:
            t.wrong = t.wrong or f"the command at {p} is not the sanitized run's"
      if not t.step(self._stop(t)): break
      progress = True
      for o in self.orders:
        if not o.released and self.queue(o.until) is t and t.pos >= o.until.end: o.released, o.ran = True, True
    for o in self.orders:
      if not o.released and self.queue(o.held) is t and t.q is not None and t.pos >= o.held.start:
        if t.pos > o.held.start: t.wrong = t.wrong or f"{o.held} is inside a packet of the re-run"
        o.reached = True
    return progress
