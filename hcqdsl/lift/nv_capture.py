"""A capture of tinygrad's NV runtime (hcqdsl/tinygrad/capture_nv.py) as the program it ran, by the capture lift every
vendor shares (lift/captured.py's CaptureLift: launches folded — TinyJit replays as `launch + c`, rebound inputs, so a
replay reading an earlier call's input is `stale-input` as on AMD — or, `whole`, the run as it happened). What this
module fills in is what NV's methods and QMDs mean, asked of nv/meaning.py: each submission a queue (named as its
GPFIFO's: `comp_gpu0`, `comp_gpu0_2`, ...), its methods lifted by hcqdsl.nv.lift with the QMDs and constant banks as
they were when it was submitted (an exec, its release semaphores, the QMD it launches). A dispatch's kernel-argument
block is constant bank 0 up to its QMD's end (NVComputeQueue.exec lays the QMD out after the bank): the host writes it
whole — the arguments and the QMD — before the submission, so it is a `write` of the host block (classic HCQ) that the
exec reads; a QMD's release payloads and grid that change per launch are vars. Kernel arguments are constant bank 0's
after the driver part (Target.args_offset): 8-byte pointers, then the scalars (8 bytes each on tinygrad's mock NV GPU,
whose capture says so in the signature's `bytes`). Kernels are declared without code (the mock NV GPU runs none)."""
from __future__ import annotations
from typing import Optional
from ..ir import Impl, Kernel, NV_ARCHS, POLL_SIZE, U32_MAX
from ..target.image import QueueImage, Region, Patch
from ..target.layout import kernarg_layout
from ..nv import pushbuf, lift as nv_lift
from ..nv.qmd import QMD
from ..nv.meaning import meaning, qmd_chain, launch, copy_length, SIGNALS
from ..nv.targets import get_target
from .image import attach_comments
from .schema import MQueue
from .captured import CaptureLift, Submission, Dispatch, Launched, CopyUse
from .segments import lift_default

__all__ = ["is_nv_capture", "NVCaptureLift", "lift_nv_capture"]

# a QMD's constant bank 0 lies before it in one allocation (NVComputeQueue.exec); farther apart is no block of ours
_MAX_BLOCK = 1 << 20

def is_nv_capture(m) -> bool:
  """A manifest with host steps whose queues are NV's."""
  return bool(m.host) and any(q.target in NV_ARCHS for q in m.queues)

class NVCaptureLift(CaptureLift):
  """A capture of tinygrad's NV runtime: pushbuffer methods and QMDs, as nv/meaning.py states them."""
  vendor = "NV"

  def decode(self, q: MQueue, dwords: list) -> list: return pushbuf.decoder(q.target).decode(dwords)

  def __init__(self, *a, **kw):
    super().__init__(*a, **kw)
    self.decoded: dict = {}     # lifted queue -> its packets in each launch
    self.target_of: dict = {}   # lifted queue -> its ring's arch

  def per_launch(self, s: Submission) -> list:
    """Each launch's packets of the submission (launch 1's are `s.packets`; the launches' shapes are equal)."""
    if s.name not in self.decoded: self.decoded[s.name] = [s.packets] + [self.decode(s.ring, d) for d in s.per[1:]]
    return self.decoded[s.name]

  def meanings(self, s: Submission, j: int) -> list:
    """The meaning of packet j of the submission in each launch."""
    return [meaning(pk[j]) if j < len(pk) else None for pk in self.per_launch(s)]

  def qmd_launches(self, qa: int, q: MQueue, step: int) -> list:
    """[(QMD address, Launch)] of the QMD chain from `qa` as the capture read it at `step` (its submission)."""
    t = get_target(q.target)
    def read(a: int) -> Optional[QMD]:
      b = self.snap(a, t.qmd_size, step, step + 1)
      return None if b is None else QMD.of(t, bytearray(b))
    return [(a, got) for a, _, got in qmd_chain(qa, read)]

  def step_shape(self, q: MQueue, packets: list, step: int) -> tuple:
    """The methods, each dispatch with the programs its QMD chain runs and each copy with its length."""
    out = []
    for p in packets:
      m = meaning(p)
      extra: object = None
      if m is not None and m.kind == "dispatch":
        extra = tuple(got.program for _, got in self.qmd_launches(m.addr, q, step))
        self.launching.add(step)
      elif m is not None and m.kind == "length": extra = m.value
      out.append((p.name, extra))
    return tuple(out)

  def copies(self, s: Submission) -> list:
    """Each copy piece (OFFSET_IN..OFFSET_OUT) with the length its LINE_LENGTH_IN gives."""
    out, pk = [], s.packets
    for j, p in enumerate(pk):
      if (m := meaning(p)) is None or m.kind != "copy": continue
      ms = self.meanings(s, j)
      out.append(CopyUse(p.offset, tuple((x or m).src for x in ms), tuple((x or m).addr for x in ms), copy_length(pk, j)))
    return out

  def packet_uses(self, s: Submission) -> None:
    self.target_of[s.name] = s.ring.target
    copies = {c.offset: c for c in self.copies(s)}
    t = get_target(s.ring.target)
    for j, p in enumerate(s.packets):
      if (m := meaning(p)) is None: continue
      if m.kind == "copy" and (c := copies.get(p.offset)) is not None:
        self.use(c.src, max(c.size, 1), s.step, p.offset, True)
        self.use(c.dst, max(c.size, 1), s.step, p.offset, False)
      elif m.kind in ("write", "poll"):   # a semaphore release without a timestamp, an ACQ_AND/NOR: a buffer's word
        self.use(tuple((x or m).addr for x in self.meanings(s, j)), m.size if m.kind == "write" else POLL_SIZE, s.step, p.offset, m.kind == "poll")
      elif m.kind == "dispatch":   # each QMD of the chain, in each launch (the chains are as long: the shapes are equal)
        chains = [self.qmd_launches((x or m).addr, s.ring, s.step + k * self.P) for k, x in enumerate(self.meanings(s, j))]
        for per in zip(*chains):
          (qa, got), kas = per[0], tuple(g.kernargs for _, g in per)
          if not 0 < qa - got.kernargs <= _MAX_BLOCK: continue
          self.found.append(Launched(s, got.program, kas, p.offset, t.args_offset, qa - got.kernargs + t.qmd_size, tuple(a for a, _ in per)))

  def kernel_arguments(self) -> None:
    super().kernel_arguments()
    self.dispatches_of: dict = {}   # lifted queue -> its dispatches (whose QMDs release signals)
    for d in self.dispatches.values(): self.dispatches_of.setdefault(d.queue, []).append(d)

  def signal_uses(self, s: Submission) -> list:
    """The semaphores the methods wait on and release, then those the QMDs release (timestamps are signals on NV: the
    same bytes, NVCommandQueue.timestamp)."""
    out = [(m.addr, False) for p in s.packets if (m := meaning(p)) is not None and m.kind in SIGNALS]
    return out + [(r.addr, False) for d in self.dispatches_of.get(s.name, ()) for r in self.qmd_of(d, 0).releases]

  def qmd_of(self, d: Dispatch, k: int):
    """The Launch of dispatch d's QMD as launch k's block holds it."""
    t = get_target(self.target_of[d.queue])
    at = d.qmds[k] - d.kargs[k]
    return launch(QMD.of(t, bytearray(d.blocks[k][at:at + t.qmd_size])))

  def kernel_impl(self, k: dict, name: str, code_buf: Optional[str]) -> Optional[Impl]: return None

  def param_offsets(self, kd: Kernel, d: Dispatch) -> list:
    """Offsets in constant bank 0: the driver part, then tinygrad's signature laid out (8-byte pointers, the scalars at
    their sizes); the block itself (classic HCQ's `kernargs` parameter) at 0."""
    offs = kernarg_layout([8] * len(d.pointers) + [x.get("bytes") or 4 for x in d.scalars])[0]
    return [d.arg_base + o for o in offs] + [0] * (len(kd.params) - len(offs))

  def arg_region(self, ka: int, d: Dispatch, args: list) -> tuple:
    b = d.blocks[0]
    return Region(f"kernargs_{ka:x}", "kernargs", None, ka, len(b), {"kernel": self.kname_of[d.prog], "args": args}), b

  def launch_patches(self, d: Dispatch) -> list:
    """A QMD's release payloads and grid that change per launch (HCQGraph's updates): vars at their bytes in the QMD."""
    got = [self.qmd_of(d, k) for k in range(len(d.blocks))]
    out: list = []
    qa = d.qmds[0]
    for i, r in enumerate(got[0].releases):
      vals = [g.releases[i].value & U32_MAX if i < len(g.releases) else r.value for g in got]
      if (fit := self.vars.fit(vals, "v")): out.append(Patch(qa + r.value_at, fit[0], fit[1]))
    for j in range(3):
      if len({g.grid[j] for g in got}) > 1 and (fit := self.vars.fit([g.grid[j] for g in got], "v")):
        out.append(Patch(qa + got[0].grid_at + 4 * j, fit[0], fit[1]))
    return out

  def dword_patches(self, s: Submission) -> list:
    """Semaphore payloads that change per launch as vars; copy and semaphore addresses that do as a rebound buffer's."""
    out: list = []
    for j, p in enumerate(s.packets):
      if (m := meaning(p)) is None: continue
      ms = [x or m for x in self.meanings(s, j)]
      if m.kind in ("wait", "signal", "write") and m.value_at and (fit := self.vars.fit([x.value for x in ms], "v")):
        out.append(Patch(m.value_at, fit[0], fit[1]))
      if m.kind == "copy" and len({x.src for x in ms}) > 1: out.append(Patch(m.src_at, None, 0, "lo"))
      if m.kind in ("copy", "write", "poll") and len({x.addr for x in ms}) > 1: out.append(Patch(m.addr_at, None, 0, "lo"))
    return out

  def expects(self, at: Optional[int] = None) -> list:
    """None: the contents after the run are no reference on NV — tinygrad's mock NV GPU runs no kernel (their outputs
    stay zeros) and NV's host copies into its staging memory are not recorded (a copy from it lifts with the bytes
    first read there)."""
    return []

  def lift_queue(self, s: Submission, qi: QueueImage) -> list: return attach_comments(nv_lift.lift_queue(self.img, qi))

  def trace_extra(self) -> dict:
    """What tools/nv_gpu_check.py compares compile(lifted) with: the captured addresses' names, each lifted queue's
    methods and kernel-argument blocks as submitted (launch 1), and each program's pointer count."""
    blocks: dict = {}
    for d in self.dispatches.values(): blocks.setdefault(d.queue, []).append((d.kargs[0], d.blocks[0]))
    return dict(signals=dict(self.signals), buffers=dict(self.img.buffers),
                submitted={s.name: (s.ring.target, s.per[0], blocks.get(s.name, [])) for s in self.subs},
                pointers={d.prog: len(d.pointers) for d in self.dispatches.values()})

def lift_nv_capture(m, code_dir=None, program_dir=None, trace: Optional[dict] = None, whole: bool = False, folded_only: bool = False,
                    run=None):
  """The program an NV capture ran (module docstring; the default lift, `folded_only` and `whole` as lift/captured.py's
  lift_capture). `trace` gets what sanitize and tools/nv_gpu_check.py read (the steps of each queue and host statement,
  the names of captured addresses, the submitted methods); `run`: a window of a longer run (lift/captured.py's
  RunState)."""
  if whole or folded_only or run is not None: return NVCaptureLift(m, code_dir, program_dir, trace, whole, run=run).program()
  return lift_default(NVCaptureLift, m, code_dir, program_dir, trace)
