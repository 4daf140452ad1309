"""tinygrad's own AMD queues on the stand-in device (tests/amd_standin.py) as capture tests drive them: a named program,
an HCQGraph-shaped two-device schedule."""
from __future__ import annotations
import ctypes
from tinygrad.uop.ops import UOp
from tinygrad.runtime.support.hcq import HCQSignal, CLikeArgsState
from hcqdsl.amd.targets import get_target
from amd_standin import Arena, StandinHCQDevice, AMDComputeQueue, AMDCopyQueue, program

def named_program(dev, addr: int, name: str):
  """tinygrad's AMDProgram for code at addr on dev, named, with no arguments."""
  t = get_target(dev.arch)
  rsrc1 = t.gc.regCOMPUTE_PGM_RSRC1.encode(priv=1) if t.gen == 11 else 0
  p = program(dev, addr, rsrc1, t.gc.regCOMPUTE_PGM_RSRC2.encode(user_sgpr=2), 0, wave32=t.gen != 9)
  p.name, p.signature = name, ()
  return p

def hcqgraph(arena: Arena, launches: int = 3, archs=("gfx1100", "gfx942"), drop_wait: bool = False, bind: bool = True):
  """HCQGraph's protocol (tinygrad/runtime/graph/hcq.py): every queue first waits for its device's previous launch
  (timeline >= var) and for the host's kick (kick >= kickoff var); per-queue signals order the work (produce on gpu0
  -> copy to gpu1 -> consume on gpu1, and gpu0 waits for the copy before x is reused); each device's compute queue ends
  with the timeline write (the finalizer); the host waits for the previous launch, submits, zeroes the per-queue
  signals, then writes the kick. Returns the devices. `drop_wait`: the copy no longer waits for the producer."""
  d0, d1 = (StandinHCQDevice(a, i, arena) for i, a in enumerate(archs))
  x, y = arena.alloc(0x10000), arena.alloc(0x10000)
  kick = HCQSignal(arena.alloc(16), 0)
  produced, copied = HCQSignal(arena.alloc(16), 0), HCQSignal(arena.alloc(16), 0)
  kickoff = UOp.variable("kickoff_var", 0, 0xFFFFFFFF)
  tlv = {d: UOp.variable(f"timeline_var_{i}", 0, 0xFFFFFFFF) for i, d in enumerate((d0, d1))}
  p0, p1 = named_program(d0, 0x7000_0000_0100, "produce"), named_program(d1, 0x7100_0000_0100, "consume")
  a0 = CLikeArgsState(arena.alloc(64), p0, (x,))
  a1 = CLikeArgsState(arena.alloc(64), p1, (y,))
  comp0 = AMDComputeQueue(d0).wait(d0.timeline_signal, tlv[d0]).wait(kick, kickoff).exec(p0, a0, (4, 1, 1), (64, 1, 1)) \
    .signal(produced, 1).wait(copied, 1).signal(d0.timeline_signal, tlv[d0] + 1)
  copy1 = AMDCopyQueue(d1, max_copy_size=d1.max_copy_size).wait(d1.timeline_signal, tlv[d1]).wait(kick, kickoff)
  if not drop_wait: copy1.wait(produced, 1)
  copy1.copy(y, x, 0x10000).signal(copied, 1)
  comp1 = AMDComputeQueue(d1).wait(d1.timeline_signal, tlv[d1]).wait(kick, kickoff).wait(copied, 1).memory_barrier() \
    .exec(p1, a1, (4, 1, 1), (64, 1, 1)).signal(d1.timeline_signal, tlv[d1] + 1)
  if bind:
    comp0.bind(d0)
    comp1.bind(d1)
  last = {d0: 0, d1: 0}
  for k in range(1, launches + 1):
    for d in (d0, d1):  # the "GPU" finished the previous launch: its timeline write lands in memory, not via the host
      ctypes.c_uint64.from_address(d.timeline_signal.value_addr).value = last[d]
      d.timeline_signal.wait(last[d])
    vals = {"kickoff_var": k, **{v.expr: d.timeline_value - 1 for d, v in tlv.items()}}
    comp0.submit(d0, vals)
    copy1.submit(d1, vals)
    comp1.submit(d1, vals)
    for d in (d0, d1): last[d] = d.next_timeline()
    produced.value = 0
    copied.value = 0
    kick.value = k
  return d0, d1
