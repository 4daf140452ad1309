"""The lift of a capture (manifest version 2, `hcqdsl capture`): the program tinygrad ran — its repeating launches
folded, or (`whole`) the run as it happened."""
from __future__ import annotations
import bisect, collections, functools, hashlib, os, pathlib
from typing import Optional
import attrs
import numpy as np
from ..lang.lexical import identifier
from ..ir import (Program, Device, Buffer, Signal, Var, Kernel, Param, Impl, Host, Expect, Wait, SignalWrite, Submit, HostWrite,
                  Ref, Expr, Slice, Data, KEYWORDS, KERNARGS, U32_MAX, timeline_of, vendor_of)
from ..target.image import Image, QueueImage, Patch, Region
from ..amd.disasm import decoder
from ..target.layout import TIMESTAMP_OFFSET, kernarg_layout
from .image import lift_statements, queue_decl, lifted_program, trimmed_data
from .schema import Manifest, MQueue, LAUNCH_VAR, ManifestError
from ..files import write_atomic
from .steps import launch_steps, period, Vars, Naming, graph_inputs, Readings, bytes_data
from .segments import lift_default
from ..amd.meaning import signal_addrs, meaning, field_at, per_launch, Registers
from .packets import hexname, epochs
from ..amd.lift import group_packets

__all__ = ["lift_capture", "CaptureLift", "AMDCaptureLift", "Submission", "Memory", "Access", "Launched", "CopyUse", "Dispatch",
           "LIFT_RTOL", "LIFT_ATOL", "RunState"]

# the tolerance of a lifted float32 expect: hcqdsl's RDNA3 executor and tinygrad's emulator round transcendentals (exp2,
# log2, rcp, sqrt) differently by an ulp or two, and chains of kernels (an optimizer step) grow that; values near zero
# differ in absolute terms — Adam's first steps divide a gradient by its own square root, so an update near zero moves
# by up to the learning rate (convnet.py's weights after three steps: 2e-4 apart)
LIFT_RTOL, LIFT_ATOL = 1e-3, 1e-3

@attrs.define(eq=False)
class Submission:
  """One submission of launch 1: one lifted queue (a ring submitted twice in a launch is two)."""
  name: str        # the lifted queue: the ring's name, `NAME_2`, `NAME_3` for its later submissions in a launch
  ring: MQueue     # the manifest's queue it was submitted to
  step: int        # the host step (launch 1's) that submitted it
  start: int       # where its dwords start in the ring's stream
  length: int      # its dwords
  nth: int         # 1 for the ring's first submission in a launch, 2 for the next, ...
  per: list        # its dwords in each launch
  packets: list = attrs.field(factory=list)   # launch 1's dwords, decoded

@attrs.define
class Memory:
  """Memory a launch's commands use: an allocation (static) or a group of per-launch addresses (rebound)."""
  size: int                # bytes
  device: Optional[str]    # the manifest's device; None: host memory
  step: int                # the launch-1 step that first uses it (its contents are read as of then)

@attrs.define
class Access:
  """A command's use of memory, in launch 1."""
  step: int        # the host step of its submission
  offset: int      # its packet's dword offset in the submission (orders a submission's accesses)
  addrs: tuple     # the address in each launch
  reads: bool      # a read (else a write)

@attrs.define
class Launched:
  """A dispatch a submission of launch 1 makes, as the vendor's packets say it (`found`): its kernel-argument block's
  address in each launch, where the arguments start in the block and the block's bytes (the host writes it whole)."""
  sub: Submission   # the submission
  prog: int         # the program's address
  kargs: tuple      # the block's address in each launch
  offset: int       # the dispatch's packet offset in the submission (orders its accesses)
  arg_base: int = 0  # the arguments' byte offset in the block (NV: constant bank 0's driver part)
  block: int = 0     # the block's bytes, if more than the arguments' (NV: up to the QMD's end)
  qmds: tuple = ()   # NV: the QMD's address in each launch (in the block)

@attrs.define
class CopyUse:
  """A copy of launch 1's submission: its source and destination address in each launch and its bytes."""
  offset: int     # its packet's dword offset in the submission
  src: tuple      # the source address in each launch
  dst: tuple      # the destination address in each launch
  size: int       # bytes

@attrs.define
class Dispatch:
  """A dispatch of launch 1 whose kernel arguments were recorded."""
  queue: str       # the lifted queue
  prog: int        # the program's address (COMPUTE_PGM_LO/HI << 8)
  kargs: tuple     # the kernel-argument block's address in each launch
  step: int        # the host step of its submission
  pointers: list   # per buffer argument: its address in each launch
  values: list     # per scalar argument: its value in each launch
  scalars: list    # the scalars' signature entries (name, dtype, bytes)
  sizes: list      # per buffer argument: tinygrad's bytes of it (None: unknown)
  blocks: list     # the block's bytes in each launch
  arg_base: int = 0  # the arguments' byte offset in the block
  qmds: tuple = ()   # NV: the QMD's address in each launch

@functools.lru_cache(maxsize=4096)
def _digest(block: bytes) -> bytes:
  """A kernel-argument block's digest (a replay's blocks are the same objects again: their hash is kept with them)."""
  return hashlib.blake2b(block, digest_size=16).digest()

@attrs.define
class RunState:
  """What the whole-run lift of a window of a longer run (sanitize's windows, docs/sanitize.md, "Memory") takes from
  the run around it, so that each step lifts as in the lift of the whole run: the run's step of each of the window's
  steps; whether the host's write of each dispatch's kernel arguments is a statement (the whole run's rule: when the
  block differs from the last one written there, in the run's order — decided once per dispatch, the first time it is
  lifted, from the writes decided before it); on hcq2, each submission's count on its ring: every ring's submissions
  are chained by the ring's own signal, numbered as in the whole run (a ring submitted once in the whole run is not
  chained there: the caller leaves out what that adds), and a ring whose last submission before the window was dropped
  but for its ring-order write has that write as a queue of its own (`stubs`, `fifo_R_stub`: signal fifo_R = N)."""
  steps: list                                            # the window's step -> the run's step
  decided: collections.OrderedDict = attrs.field(factory=collections.OrderedDict)   # (run step, kernel-argument address) -> the write is a statement
  written: dict = attrs.field(factory=dict)              # kernel-argument address -> its last write: run step (8 bytes) + digest (16)
  several: dict = attrs.field(factory=dict)              # the addresses with more than one write kept -> [(run step, digest)], in order
  nth: collections.OrderedDict = attrs.field(factory=collections.OrderedDict)       # a submission's run step -> its count on its ring (1-based)
  chained: set = attrs.field(factory=set)                # rings submitted more than once so far
  stubs: dict = attrs.field(factory=dict)                # ring -> the count its dropped last submission signals

  def kernarg_write(self, step: int, ka: int, block: bytes) -> bool:
    """Is the host's write of `block` at `ka` before the submission at run step `step` a statement? (The last write
    at each address is kept as long as the run, one per address of tinygrad's kernel-argument ring: as one bytes
    object of its step and the block's 16-byte digest, ~120 bytes with its dict entry; an address with several
    writes still needed, in a list.)"""
    got = self.decided.get((step, ka))
    if got is not None: return got
    digest = _digest(block)
    hist = self.several.get(ka)
    if hist is None:
      w = self.written.get(ka)
      emit = w is None or int.from_bytes(w[:8], "little") >= step or w[8:] != digest
      if emit:
        if w is None: self.written[ka] = step.to_bytes(8, "little") + digest
        else:
          self.several[ka] = sorted([(int.from_bytes(w[:8], "little"), w[8:]), (step, digest)], key=lambda x: x[0])
          del self.written[ka]
    else:
      last = next((b for st, b in reversed(hist) if st < step), None)
      emit = last != digest
      if emit:
        hist.append((step, digest))
        hist.sort(key=lambda x: x[0])
    self.decided[step, ka] = emit
    return emit

  def forget(self, before: int) -> None:
    """Drop what no step from `before` on needs: decisions of earlier steps, and all but the last write at each
    address before it. (Decisions and counts come in the order of their steps, nearly: the oldest are dropped from
    the front until one is needed.)"""
    d: collections.OrderedDict
    for d in (self.decided, self.nth):
      while d:
        k = next(iter(d))
        if (k[0] if isinstance(k, tuple) else k) >= before: break
        d.popitem(last=False)
    for ka, hist in list(self.several.items()):
      if hist[1][0] < before:
        i = next((n for n, (st, _) in enumerate(hist) if st >= before), len(hist))
        del hist[:i - 1]
      if len(hist) < 2:
        del self.several[ka]
        self.written[ka] = hist[0][0].to_bytes(8, "little") + hist[0][1]

class CaptureLift:
  """The lift of one capture, phase by phase (`program()` runs them in order; each reads what the earlier ones set).
  The phases are the vendors'; what a vendor's packets mean — how a stream decodes, what a submission's packets use
  and dispatch, which signals they name, which dwords change per launch, how a queue lifts — each vendor's lift fills
  in (AMDCaptureLift here, NVCaptureLift in lift/nv_capture.py), asking its packet-meaning table."""
  vendor = ""   # the runtime's vendor (the header's words)
  merged = False   # the repeated launches of the default lift, which lifts the steps around them as parts of their own
  def __init__(self, m: Manifest, code_dir=None, program_dir=None, trace: Optional[dict] = None, whole: bool = False,
               steps: Optional[tuple] = None, naming: Optional[Naming] = None, base: int = 0, run: Optional[RunState] = None):
    """`steps` (a, b): lift the capture's host steps a..b-1 only (a part of the default lift, lift/segments.py), with
    `naming` shared by the parts and `base` program launches before this part's first. `run`: the capture is a window
    of a longer run (sanitize's), lifted whole as the whole run's lift lifts those steps (RunState)."""
    self.m, self.code_dir, self.program_dir, self.trace, self.whole, self.run = m, code_dir, program_dir, trace, whole or run is not None, run
    self.notes: list = []      # `# note:` lines of the header
    self.left_out: list = []   # what the lifted program does not check, in words (sanitize and `lift` say so on their summary)
    self.qmap = {q.name: q for q in m.queues}
    self.part, self.base = steps, base
    self.naming = naming if naming is not None else Naming({d["name"] for d in m.devices} | {LAUNCH_VAR} | set(self.qmap))
    self.used = self.naming.used   # names taken in the program
    self.vars = Vars(self.used, base)
    self.fifo_start: dict = {}   # ring -> its order signal's value when this part starts (the default lift's later parts)
    self.kargs_read = m.path == "hcq"   # classic HCQ: each exec also reads its kernel-argument block, which the host writes

  # ---- what a vendor fills in
  def decode(self, q: MQueue, dwords: list) -> list: raise NotImplementedError
  def step_shape(self, q: MQueue, packets: list, step: int) -> tuple:
    """A submission's packets as launches compare them (with the program each dispatch runs)."""
    raise NotImplementedError
  def packet_uses(self, s: Submission) -> None:
    """The memory a submission's packets use (`use`) and the dispatches they make (`found`)."""
    raise NotImplementedError
  def copies(self, s: Submission) -> list:
    """The submission's copies (CopyUse)."""
    raise NotImplementedError
  def signal_uses(self, s: Submission) -> list:
    """(address, is a timestamp's) of each signal the submission's packets name."""
    raise NotImplementedError
  def kernel_impl(self, k: dict, name: str, code_buf: Optional[str]) -> Optional[Impl]: raise NotImplementedError
  def param_offsets(self, kd: Kernel, d: Dispatch) -> list:
    """Each parameter's byte offset in the kernel-argument block (as the statement lifter reads the block)."""
    raise NotImplementedError
  def arg_region(self, ka: int, d: Dispatch, args: list) -> tuple:
    """(Region, its bytes in launch 1) of a dispatch's kernel-argument block."""
    raise NotImplementedError
  def launch_patches(self, d: Dispatch) -> list:
    """Patches of the block's per-launch values other than the scalars (NV: a QMD's release payloads, its grid)."""
    raise NotImplementedError
  def dword_patches(self, s: Submission) -> list:
    """Patches of the submission's dwords that change per launch (values as vars, addresses as a rebound buffer's)."""
    raise NotImplementedError
  def lift_queue(self, s: Submission, qi: QueueImage) -> list: raise NotImplementedError
  def trace_extra(self) -> dict: return {}

  def program(self) -> Program:
    self.prepare()
    return self.program_rest()

  def program_rest(self) -> Program:
    """The program, once `prepare` ran."""
    decls, queues, host = self.lift_parts()
    decls += [Var(n, tuple(v)) for v, n in self.vars.lists.items()] + [Var(LAUNCH_VAR)] * self.vars.uses_launch
    decls += list(self.kdecl.values()) + queues + ([Host(tuple(host))] if host else []) + self.expects()
    return lifted_program(decls, self.m.file, self.header())

  def prepare(self) -> None:
    """The phases up to the submissions (the default lift decides which rings are chained over every part then)."""
    self.launches()
    self.submissions()

  def lift_parts(self) -> tuple:
    """The other phases: (declarations: devices, buffers, signals; queues; the host block's statements)."""
    self.memory()
    self.kernel_arguments()
    self.host_refills()
    self.names()
    self.kernels()
    self.pseudo_image()
    return self.declarations(), self.queues(), self.host_block()   # (in this order: vars are named as met)

  # ---- phases
  def launches(self) -> None:
    """The host's steps cut into launches: `start`, `P` steps per launch, `K` launches (`end` = start + K * P)."""
    m, host = self.m, self.m.host or []
    # a fresh signal's creation (tinygrad writes its first value in HCQSignal.__init__: HCQGraph makes its signals
    # while the captured call runs) is its initial value, no step of a launch: so the captured call is launch 1
    keep = launch_steps(host, self.whole)
    if self.part is not None: keep = [i for i in keep if self.part[0] <= i < self.part[1]]   # (a part of the default lift)
    self.n_all, self.keep = len(host), keep
    if len(keep) < len(host):
      def new(st):
        return bisect.bisect_left(keep, st)
      host = [host[i] for i in keep]
      m = self.m = attrs.evolve(m, host=host, steps=[(a, b, new(st)) for a, b, st in m.steps],
                                graph_calls=[(new(st), g, ins) for st, g, ins in m.graph_calls])
    self.ev: list = host   # the host's steps of launches
    ev = host
    self.mem_at = sorted(m.steps, key=lambda x: x[2])
    self.launching: set = set()   # the steps whose submission dispatches (step_shape adds them)
    found = None if self.whole else period([self.shape(e, i) for i, e in enumerate(ev)], self.launching)
    self.start, self.P, self.K = start, P, K = found or (0, len(ev), 1)
    self.end = start + K * P
    if self.whole and self.part is None: self.notes.append("the run as it happened: every step of the capture in one launch")
    elif found is None and not self.whole: self.notes.append("the host's steps do not repeat: lifted as one launch of every step")
    # (the default lift lifts the steps before and after the repeated launches too, as parts of their own: lift/segments.py)
    if start and not self.merged:
      self.notes.append(f"steps 1..{self.orig(start)} (warm-up, compilation, first calls) are the initial state: signals and "
                        f"buffers start as they were at step {self.orig(start) + 1}")
      self.left_out.append(f"steps 1..{self.orig(start)} (the initial state)")
    if self.end < len(ev) and not self.merged:
      self.notes.append(f"steps {self.orig(self.end) + 1}..{self.n_all} after the last repeated launch are not lifted")
      self.left_out.append(f"steps {self.orig(self.end) + 1}..{self.n_all} (after the last repeated launch)")
    allocs = sorted((b["addr"], b["size"], b.get("device")) for b in m.buffers)
    self.allocs, self.alloc_starts = allocs, [lo for lo, _, _ in allocs]
    self.readings = Readings(m.steps, self.alloc_of)
    self.inputs = graph_inputs(m, ev, start, P, K)

  def submissions(self) -> None:
    """One lifted queue per submission of launch 1; a ring submitted several times per launch on hcq2 is `chained`."""
    self.subs: list = []
    self.count: dict = {}   # ring -> its submissions per launch
    ev, P, K = self.ev, self.P, self.K
    for i in range(self.start, self.start + P):
      e = ev[i]
      if e["op"] != "submit": continue
      n = self.count[e["queue"]] = self.count.get(e["queue"], 0) + 1
      at = self.naming.rings.get(e["queue"], 0) + n   # (numbered on from an earlier part's submissions of the ring)
      name = e["queue"] if at == 1 else f"{e['queue']}_{at}"
      self.used.add(name)
      q = self.qmap[e["queue"]]
      per = [q.dwords[ev[i + k * P]["start"]:ev[i + k * P]["start"] + e["length"]] for k in range(K)]
      nth = self.run.nth.get(self.run_step(i), n) if self.run is not None else n   # (a window of a run: the run's count)
      self.subs.append(Submission(name, q, i, e["start"], e["length"], nth, per, self.decode(q, per[0])))
    # classic HCQ orders a ring's submissions itself (each waits for the timeline value the previous one signals);
    # hcq2's finalizer is a submission of its own that signals the timeline for the batch before it: the ring's order
    # (its FIFO: each packet runs after the previous one finished) is kept by a signal of the ring's own
    for r, c in self.count.items(): self.naming.rings[r] = self.naming.rings.get(r, 0) + c
    self.chained = {r for r, c in self.count.items() if c > 1} if self.m.path == "hcq2" else set()
    if self.run is not None and self.m.path == "hcq2": self.chained = set(self.count) | set(self.run.stubs)
    if self.chained:
      self.notes.append("a ring submitted several times in one launch is one queue per submission (`comp_gpu0_2`, ...), "
                        "ordered as the ring runs them by a signal of the ring's own (`fifo_comp_gpu0`), which no packet writes")
    elif any(c > 1 for c in self.count.values()):
      self.notes.append("a ring submitted several times in one launch is one queue per submission (`comp_gpu0_2`, ...): "
                        "tinygrad orders them by the device's timeline")

  def memory(self) -> None:
    """The memory launch 1's packets use (copies, writes, polls) as `static` allocations and `rebound` groups (an address
    that changes per launch), in order (`accesses`); the dispatches (`found`), whose arguments come next."""
    self.static: dict = {}     # allocation addr -> Memory
    self.rebound: dict = {}    # per-launch addresses -> Memory
    self.at_input: dict = {}   # per-launch addresses -> (input's address tuple, offset, launch j of `x@j` or None)
    self.accesses: list = []   # of Access
    self.found: list = []      # of Launched
    for s in self.subs: self.packet_uses(s)

  def kernel_arguments(self) -> None:
    """Each dispatch's kernel arguments, per launch: pointers (memory it uses) and scalar values (`dispatches`). On classic
    HCQ the block is memory the exec reads too: the host writes it before the submission (HCQProgram.fill_kernargs;
    HCQGraph's update of an input's address or a var), so a rewrite while an earlier exec may still read it is a race,
    and one with no `barrier` before the exec a `visibility` error (the HDP), as on the GPU."""
    self.kgroups: set = set()   # per-launch kernel-argument addresses that differ per launch: a fresh block each (eager dispatches)
    self.dispatches: dict = {}  # (kernarg addr in launch 1, lifted queue) -> Dispatch
    for f in self.found:
      s, prog, kas, at, base = f.sub, f.prog, f.kargs, f.offset, f.arg_base
      k = self.m.kernels.get(prog, {})
      sig = k.get("signature") or []
      bufs, scal = [x for x in sig if x.get("name") is None], [x for x in sig if x.get("name") is not None]
      offs, need = kernarg_layout([8] * len(bufs) + [x.get("bytes") or 4 for x in scal])   # tinygrad's (TinyELF.iter_sig)
      need = max(base + need, f.block)
      blocks: list = [self.snap(ka, need, s.step + j * self.P, s.step + j * self.P + 1) for j, ka in enumerate(kas)]
      if any(b is None for b in blocks):
        self.notes.append(f"the kernel arguments of a dispatch of {k.get('name') or hex(prog)} were not recorded: lifted without arguments")
        self.left_out.append(f"the arguments of a dispatch of {k.get('tinygrad_name') or k.get('name') or hex(prog)} (not recorded)")
        continue
      ptrs = [tuple(int.from_bytes(b[base + 8 * i:base + 8 * i + 8], "little") for b in blocks) for i in range(len(bufs))]
      for t, x in zip(ptrs, bufs): self.use(t, x.get("bytes") or 1, s.step, at, x.get("mode") != "out")
      vals = [[int.from_bytes(b[base + off:base + off + 4], "little") for b in blocks] for off in offs[len(bufs):]]
      if self.kargs_read:   # the block itself: one allocation's bytes (HCQGraph's, patched per launch), or new memory per launch
        self.use(tuple(kas), need, s.step, at, True)
        if len(set(kas)) > 1: self.kgroups.add(tuple(kas))
      # (an argument's bytes: what its kernel touches from the pointer on when the capture knows it — a view's kernel reads
      # part of its buffer, `extent` —, else tinygrad's size of it)
      sizes = [x.get("extent") or x.get("bytes") for x in bufs]
      self.dispatches[kas[0], s.name] = Dispatch(s.name, prog, tuple(kas), s.step, ptrs, vals, scal, sizes, blocks, base, f.qmds)

  def host_refills(self) -> None:
    """The host's writes between launches (`rewritten`): memory in host RAM whose first access in a launch is a read,
    holding other bytes launch by launch, was refilled on the CPU (hcq2 copies every input through one staging buffer
    that tinygrad's CPU device rewrites, ordered by that device's own waits, which the capture does not record): a buffer
    with each launch's bytes as that first read found them, one memory per launch (`rebound`: the refill is not checked)."""
    first: dict = {}
    for a in sorted(self.accesses, key=lambda a: (a.step, a.offset)):
      if len(set(a.addrs)) == 1 and (al := self.alloc_of(a.addrs[0])) is not None: first.setdefault(al[0], (a.step, a.reads))
    host_written = {al[0] for e in self.ev[self.start:self.start + self.P] if e["op"] == "write" and (al := self.alloc_of(e["addr"])) is not None}
    # (a kernel-argument block's per-launch bytes are the host's `write`s: kargs_read)
    kblocks = {al[0] for d in self.dispatches.values() if len(set(d.kargs)) == 1 and (al := self.alloc_of(d.kargs[0])) is not None}
    # (memory a command of the launch writes changes per launch by that command: a copy into host memory that a kernel
    # on another device reads, submitted after the kernel and waited for by it — tinygrad's NV cross-device copy)
    gpu_written = {al[0] for a in self.accesses if not a.reads and len(set(a.addrs)) == 1 and (al := self.alloc_of(a.addrs[0])) is not None}
    self.rewritten: dict = {}   # allocation addr -> its bytes in each launch
    for key, (step, reads) in first.items():
      st = self.static.get(key)
      if not reads or st is None or st.device is not None or self.K < 2 or key in host_written or key in kblocks or key in gpu_written: continue
      per = [self.readings.assemble(key, st.size, step + k * self.P) for k in range(self.K)]
      if None not in per and len(set(per)) > 1: self.rewritten[key] = per
      # refilled again between two reads of one launch (two inputs staged through one region): one memory per launch
      # cannot say it; the first read's bytes are kept, and `run` then differs from tinygrad
      later = {self.readings.assemble(key, st.size, a.step) for a in self.accesses
               if a.reads and a.step > step and len(set(a.addrs)) == 1 and (al := self.alloc_of(a.addrs[0])) is not None and al[0] == key}
      if key in self.rewritten and later - {per[0]}:
        self.notes.append(f"the host-memory buffer at {key:#x} is refilled between two reads of one launch (inputs staged "
                          "through one region): lifted with each launch's first read's bytes, so later reads see those")
    if self.rewritten:
      self.notes.append("buffers in host memory refilled on the CPU between launches (read first in each launch, with "
                        "other bytes each time: tinygrad's staging buffer) are `rebound`, holding what each launch read; "
                        "the CPU device's refill and its waits are not recorded, so their order is not checked")

  def names(self) -> None:
    """Names of the buffers (`static_names`, `rebound_names`) and of the signals the packets and host steps name,
    without the KFD mailboxes (`signals`: addr -> name)."""
    kalloc = {al[0] for (ka, _) in self.dispatches if (al := self.alloc_of(ka)) is not None} if self.kargs_read else set()
    shared = self.naming.buffers   # (an allocation an earlier part named keeps its name)
    # (kargs_: kernel arguments)
    self.static_names = {a: shared.get(a) or self.fresh(hexname("kargs" if a in kalloc else "b", a)) for a in sorted(self.static)}
    for a in self.rewritten:   # refilled per launch (`rebound` here): other memory than an earlier part's plain buffer of it
      if a in shared: self.static_names[a] = self.fresh(hexname("in", a))
    for a, nm in self.static_names.items(): shared.setdefault(a, nm)
    self.rebound_names = {t: self.fresh(f"{'kargs' if t in self.kgroups else 'in'}_{t[0]:x}") for t in self.rebound}
    mbox, ev = self.m.mailboxes, self.ev
    uses = [(s, self.signal_uses(s)) for s in self.subs]
    sig_addrs = [a for _, u in uses for a, _ in u if a not in mbox]
    sig_addrs += [e["addr"] for e in ev[self.start:self.start + self.P] if e["op"] in ("signal", "wait")]
    # a signal only a timestamp names is the slot before the clock's memory (`timestamp s` writes s's timestamp slot,
    # TIMESTAMP_OFFSET on): named after the memory the clock goes to (hcq2's profile buffers, HCQSignal.timestamp_addr)
    stamped = {a for _, u in uses for a, st in u if st}
    synced = {a for _, u in uses for a, st in u if not st} | {e["addr"] for e in ev if e["op"] in ("signal", "wait")}
    self.signals: dict = {}
    named = self.naming.signals   # (a signal an earlier part named keeps its name)
    for a in dict.fromkeys(sig_addrs):
      if a in named:
        self.signals[a] = named[a]
        continue
      info = self.m.signals.get(a, {})
      tl = info.get("timeline") and info.get("device")
      if a in stamped and a not in synced and not info.get("timeline"): self.signals[a] = self.fresh(hexname("ts", a + TIMESTAMP_OFFSET))
      elif tl and self.sig_value(a) == 0 and self.base == 0 and timeline_of(info["device"]) not in named.values():
        self.signals[a] = timeline_of(info["device"])  # starts at 0, as the language's D.timeline does: its waits read as `epoch`
      else: self.signals[a] = self.fresh(f"tl_{info['device']}" if tl else hexname("s", a))
      named[a] = self.signals[a]

  def kernels(self) -> None:
    """One declaration per (tinygrad name, code, code buffer), with its code object written (`kdecl`; `kname_of`: prog ->
    its name). A kernel whose code a lifted copy uploads (tinygrad's AMDProgram copies its ELF into VRAM) reads that
    buffer at each exec (`amd "k.co" code B`): check orders every exec after the upload."""
    uploaded = {al[0] for s in self.subs for c in self.copies(s) if len(set(c.dst)) == 1 and (al := self.alloc_of(c.dst[0])) is not None}
    self.kdecl: dict = self.naming.kernels   # (name, code, code buffer) -> Kernel (an earlier part's declarations too)
    self.kname_of: dict = {}   # prog -> its kernel's name
    for d in self.dispatches.values():
      if d.prog in self.kname_of: continue
      k = self.m.kernels.get(d.prog, {})
      base = identifier(k.get("tinygrad_name") or k.get("name")) if (k.get("tinygrad_name") or k.get("name")) else hexname("k", d.prog)
      al = self.alloc_of(d.prog)
      code_buf = self.static_names.get(al[0]) if al is not None and al[0] in uploaded else None
      key = (base, k.get("code") or d.prog, code_buf)
      if key not in self.kdecl: self.kdecl[key] = self.kernel(k, base, code_buf, d)
      self.kname_of[d.prog] = self.kdecl[key].name

  def kernel(self, k: dict, base: str, code_buf: Optional[str], d: Dispatch) -> Kernel:
    """The declaration of kernel `k` (the manifest's), its code object written into code_dir."""
    bmodes = [x.get("mode") if x.get("mode") in ("in", "out", "inout") else "inout" for x in k.get("signature") or [] if x.get("name") is None]
    params = [Param(bmodes[i] if i < len(bmodes) else "inout", f"a{i}") for i in range(len(d.pointers))]
    params += [Param("u32" if "uint" in (x.get("dtype") or "") else "i32", identifier(x["name"])) for x in d.scalars]
    params += [Param("in", KERNARGS)] * self.kargs_read
    kn = self.fresh(base)
    return Kernel(kn, tuple(params), self.kernel_impl(k, kn, code_buf))

  def pseudo_image(self) -> None:
    """The image the statement lifter reads names from (`img`): buffers, signals, kernels, each dispatch's
    kernel-argument region (`regions_of` each lifted queue's: a kernarg address is reused by launches) and the
    per-launch values of its scalars (`mem_patches`)."""
    ibufs = {nm: (a, self.static[a].size) for a, nm in self.static_names.items()}
    ibufs.update({nm: (t[0], self.rebound[t].size) for t, nm in self.rebound_names.items()})
    regions: list = []
    self.blocks_of: dict = {}      # lifted queue -> (address, bytes) of its regions in launch 1 (a graph reuses an address)
    self.regions_of: dict = {}     # lifted queue -> its dispatches' kernel-argument regions
    self.mem_patches: dict = {}    # lifted queue -> Patch of each scalar argument that changes per launch
    for (ka, sname), d in self.dispatches.items():
      args: list = []
      for t, nb in zip(d.pointers, d.sizes):
        nm, off, pin = self.buf_for(t)
        hi = off + nb if nb and off + nb < ibufs[nm][1] else None  # tinygrad's byte range of the argument (a view of a bigger allocation)
        args.append([nm, off or None, hi, bool(off) or hi is not None, pin])
      args += [None] * len(d.values)
      if self.kargs_read:
        nm, off, _ = self.buf_for(d.kargs)
        args.append([nm, off, off + len(d.blocks[0]), True, None])
      region, data = self.arg_region(ka, d, args)
      regions.append(region)
      self.blocks_of.setdefault(sname, []).append((region.addr, data))
      self.regions_of.setdefault(sname, []).append(region)
    kparams: dict = {}
    for d in self.dispatches.values():
      kd = next(x for x in self.kdecl.values() if x.name == self.kname_of[d.prog])
      kparams.setdefault(kd.name, [[p.mode, p.name, o] for p, o in zip(kd.params, self.param_offsets(kd, d))])
    ikernels = [{"name": self.kname_of[prog], "prog_addr": prog, "params": kparams[self.kname_of[prog]]}
                for prog in dict.fromkeys(d.prog for d in self.dispatches.values())]
    for (ka, sname), d in self.dispatches.items():
      ps = kparams[self.kname_of[d.prog]]
      for i, v in enumerate(d.values):
        fit = self.vars.fit(v, identifier(d.scalars[i]["name"]))
        var, add = fit or (None, v[0] & U32_MAX)
        self.mem_patches.setdefault(sname, []).append(Patch(ka + ps[len(d.pointers) + i][2], var, add))
      self.mem_patches.setdefault(sname, []).extend(self.launch_patches(d))
    self.img = Image(self.m.queues[0].target, self.m.file, self.m.devices, [], regions, {n: a for a, n in self.signals.items()}, ibufs,
                     ikernels, [], [], [], [])
    # each rebound buffer's memory per launch: a copy address the host patches is one (`x`); a fixed one that kept a
    # graph input's memory of one launch is `x@j`
    self.img.var_values.update({f"{nm}.addr": list(t) for t, nm in self.rebound_names.items()})

  def declarations(self) -> list:
    """Devices, buffers with their contents when launch 1 first used them, signals with their values at `start`."""
    decls: list = [Device(d["name"], vendor_of(d["arch"]), d["index"], d["arch"]) for d in self.m.devices]
    def init(b, size):
      return trimmed_data(b, size) if b else None   # (memory never read: no initial value)
    def data_of(b, size):
      return init(b, size) or Data("u8", (0,))
    def dev(d):
      return Ref(d) if d else None
    for a, nm in self.static_names.items():
      st = self.static[a]
      if a in self.rewritten: decls.append(Buffer(nm, None, st.size, None, "rebound", tuple(data_of(b, st.size) for b in self.rewritten[a])))
      else: decls.append(Buffer(nm, dev(st.device), st.size, init(self.readings.assemble(a, st.size, st.step), st.size)))
    for t, nm in self.rebound_names.items():
      r = self.rebound[t]
      inits = tuple(data_of(self.readings.assemble(a, r.size, r.step + k * self.P), r.size) for k, a in enumerate(t))
      decls.append(Buffer(nm, dev(r.device), r.size, None, "rebound", inits))
    for a, n in self.signals.items():
      v = self.sig_value(a)
      if n.endswith(".timeline"): continue
      if v > U32_MAX: self.notes.append(f"signal {n} holds {v} (more than 32 bits): its low 32 bits are lifted")
      decls.append(Signal(n, dev(self.m.signals.get(a, {}).get("device")), v & U32_MAX))
    self.fifo_names = {r: self.naming.fifo.get(r) or self.fresh(f"fifo_{r}") for r in sorted(self.chained)}
    self.naming.fifo.update(self.fifo_names)
    # (a window of a run: the ring's submissions before the window's first have signalled their counts, the last one's
    # write a queue of its own when it stayed)
    stubs = self.run.stubs if self.run is not None else {}
    base = {r: stubs[r] - 1 if r in stubs else min(s.nth for s in self.subs if s.ring.name == r) - 1
            for r in self.chained} if self.run is not None else {}
    return decls + [Signal(n, Ref(self.qmap[r].device), base.get(r, 0)) for r, n in self.fifo_names.items()]

  def queues(self) -> list:
    """Each submission's statements: launch 1's dwords, with PER_LAUNCH's dwords that change per launch patched (values
    as vars, addresses as a rebound buffer's `x`)."""
    out = []
    for s in self.subs:
      patches = self.dword_patches(s)
      qi = QueueImage(s.name, s.ring.engine, s.ring.device, s.ring.target, 0, s.per[0], patches, [], self.mem_patches.get(s.name, []))
      self.img.regions, self.img.data = self.regions_of.get(s.name, []), self.blocks_of.get(s.name, [])
      items = [epochs(x, s.ring.device) for x in self.lift_queue(s, qi)]
      if s.ring.name in self.chained: items = self.chain(s, items)
      out.append(queue_decl(s.name, s.ring.engine, s.ring.device, items))
    self.stub_queues = {}   # (a window of a run) ring -> the queue of its last dropped submission's ring-order write
    for r, n in sorted(self.run.stubs.items() if self.run is not None else ()):
      q, nm = self.qmap.get(r), self.fresh(f"fifo_{r}_stub")
      if q is None or r not in self.fifo_names: continue
      self.stub_queues[r] = nm
      out.insert(0, queue_decl(nm, q.engine, q.device, [SignalWrite(Ref(self.fifo_names[r]), Expr(None, n),
                                                                          comment="# the ring's order: its last submission before")]))
    return out

  def chain(self, s: Submission, items: list) -> list:
    """Submission n of a ring submitted S times per launch, in launch k: waits for (k-1)*S + n-1 on the ring's own
    signal, signals (k-1)*S + n."""
    S, n, fifo = self.count[s.ring.name] if self.run is None else 0, s.nth, self.fifo_names[s.ring.name]
    n += self.fifo_start.get(s.ring.name, 0)   # (after an earlier part's submissions of the ring)
    def fx(vals):
      f = self.vars.fit(vals, "fifo")
      return Expr(Ref(f[0]), f[1]) if f else Expr(None, vals[0])
    K = self.K
    return [Wait(Ref(fifo), fx([k * S + n - 1 for k in range(K)]), comment="# the ring's order: after its previous submission")] + \
      [x for x in items if not isinstance(x, str)] + [SignalWrite(Ref(fifo), fx([k * S + n for k in range(K)]), comment="# the ring's order")] + \
      [x for x in items if isinstance(x, str)]

  def kernarg_writes(self) -> dict:
    """lifted queue -> [(slice, per-launch data)]: the host's writes of the kernel arguments (`kargs_read`), before the
    submission that dispatches them. A block in new memory each launch is written in every launch (its own memory);
    one the launches share, when its bytes differ between launches (HCQGraph's update of an input's address or a var)
    or, in one launch, since the last dispatch that read it (the run as it happened: every eager fill, a graph's first)."""
    out: dict = {}
    last: dict = {}
    for (ka, sname), d in sorted(self.dispatches.items(), key=lambda x: x[1].step) if self.kargs_read else ():
      if self.run is not None:   # a window of a run: the run's decision
        if not self.run.kernarg_write(self.run_step(d.step), ka, d.blocks[0]): continue
      elif d.kargs not in self.kgroups and (len(set(d.blocks)) == 1 if self.K > 1 else last.get(ka) == d.blocks[0]): continue
      last[ka] = d.blocks[0]
      nm, off, _ = self.buf_for(d.kargs)
      out.setdefault(sname, []).append((Slice(Ref(nm), off, off + len(d.blocks[0]), True), tuple(bytes_data(b) for b in d.blocks)))
    return out

  def host_block(self) -> list:
    """The host's statements of a launch (`host_steps[i]`: the capture steps statement i stands for; a submit: each queue's)."""
    kwrites, ev, P, K = self.kernarg_writes(), self.ev, self.P, self.K
    host: list = []
    self.host_steps: list = []
    def add(stmt, i):
      host.append(stmt)
      self.host_steps.append([i] if i is not None else [])
    if getattr(self, "stub_queues", None): add(Submit(tuple(Ref(n) for n in self.stub_queues.values())), None)
    for i in range(self.start, self.start + P):
      e = ev[i]
      if e["op"] == "submit":
        nm = next((x.name for x in self.subs if x.step == i), None)
        if nm is None: continue  # a later submission of a ring already submitted in this launch
        for kb, kd in kwrites.get(nm, ()): add(HostWrite(kb, kd), i)   # the host fills the kernel arguments, then submits
        if host and isinstance(host[-1], Submit):
          host[-1] = Submit(host[-1].queues + (Ref(nm),))
          self.host_steps[-1].append(i)
        else: add(Submit((Ref(nm),)), i)
      elif e["op"] == "write":   # the host's refill of host memory: each launch's bytes, at this point of the host block
        al = self.alloc_of(e["addr"])
        if al is None or (nm := self.static_names.get(al[0])) is None: continue   # memory no lifted command uses
        off = e["addr"] - al[0]
        n = min(e["size"], self.static[al[0]].size - off)
        # (bytes not recorded — sanitize's capture — are written as zeros: the range is what a check needs)
        add(HostWrite(Slice(Ref(nm), off, off + n, True), tuple(bytes_data(ev[i + k * P]["data"][:n]) if ev[i + k * P]["data"]
                                                               else Data("u8", (0,)) for k in range(K))), i)
      else:
        fit = self.vars.fit([ev[i + k * P]["value"] for k in range(K)], "h")
        ex = Expr(Ref(fit[0]), fit[1]) if fit else Expr(None, e["value"] & U32_MAX)
        add(epochs((Wait if e["op"] == "wait" else SignalWrite)(Ref(self.signals[e["addr"]]), ex), None), i)
    return host

  def expects(self, at: Optional[int] = None) -> list:
    """Each buffer a launch writes, as it was after the last launch (`at`: after that step, the default lift's parts:
    after the capture's last); float32 memory (its last writer's dtype) within a tolerance."""
    written = {self.buf_for(t)[0] for d in self.dispatches.values() for t in d.pointers}
    written |= {self.static_names.get(al[0] if (al := self.alloc_of(a)) else a) for s in self.subs for c in self.copies(s)
                if len(set(c.dst)) == 1 for a in [c.dst[0]]}
    dtypes, out = self.dtypes(), []
    for key, nm in self.static_names.items():
      size = self.static[key].size
      if nm not in written or size > (1 << 20): continue
      after = self.readings.assemble(key, size, self.end if at is None else at, self.m.final, after=True)
      if after is None: continue
      d = trimmed_data(after, size) or Data("u8", (0,))
      sl = Slice(Ref(nm), 0, len(after) if d.nbytes == len(after) else d.nbytes, True) if d.nbytes != size else Slice(Ref(nm))
      if dtypes.get(nm) == "float" and d.nbytes % 4 == 0:   # float32 memory: compared within a tolerance, as floats
        out.append(Expect(sl, Data("f32", tuple(float(x) for x in np.frombuffer(after[:d.nbytes], "<f4"))), True, LIFT_RTOL, LIFT_ATOL))
      else: out.append(Expect(sl, d))
    return out

  def dtypes(self) -> dict:
    """tinygrad's dtype of each buffer's memory as its last writer left it: a kernel's argument (its signature), or a
    copy's source (tinygrad reuses memory, a staging buffer for everything: the last write decides)."""
    events = []   # (step, offset, kind, what)
    for d in self.dispatches.values():
      bsig = [x for x in self.m.kernels.get(d.prog, {}).get("signature") or [] if x.get("name") is None]
      events.append((d.step, 0, "exec", [(self.buf_for(t)[0], x.get("dtype"), x.get("mode")) for t, x in zip(d.pointers, bsig)]))
    for s in self.subs:
      for c in self.copies(s): events.append((s.step, c.offset, "copy", [self.buf_for(c.src)[0], self.buf_for(c.dst)[0]]))
    dtypes: dict = {}
    for _, _, kind, ends in sorted(events, key=lambda e: e[:2]):
      if kind == "copy": dtypes[ends[1]] = dtypes.get(ends[0])
      else:
        for nm, dt, mode in ends:
          if mode in ("out", "inout") or nm not in dtypes: dtypes[nm] = dt
    return dtypes

  def header(self) -> list:
    """The program's first lines; the trace (for sanitize: which capture step each lifted queue and host statement is)."""
    orig, start, end, K = self.orig, self.start, self.end, self.K
    if self.trace is not None:
      self.trace.update(start=orig(start), period=self.P, launches=K, steps=[orig(i) for i in range(start, start + self.P)],
                        left_out=self.left_out, queues={s.name: [(0, s.length, orig(s.step), s.start)] for s in self.subs},
                        host=[[orig(i) for i in st] for st in self.host_steps],
                        **{"signals": dict(self.signals), "programs": {n: p for p, n in reversed(self.kname_of.items())},
                           "stubs": {n: r for r, n in getattr(self, "stub_queues", {}).items()}, **self.trace_extra()})
    # the launch steps in no statement: the initial state, the steps after the last launch (a signal's creation is its
    # initial value and a folded lift's staged writes are its rebound buffers: both are in the program)
    unlifted = start + len(self.ev) - end
    return [f"# hcq: launches={K}"] + [f"# hcq: unlifted={unlifted}"] * bool(unlifted) + \
      [f"# lifted from {self.m.file} by hcqdsl lift ({K} captured launch{'es' * (K != 1)} of tinygrad's {self.vendor} runtime, "
       f"steps {orig(start) + 1}..{orig(end - 1) + 1} of {self.n_all})"] + [f"# note: {x}" for x in dict.fromkeys(self.notes)]

  # ---- what the phases share
  def run_step(self, i: int) -> int:
    """The run's step of launch step `i` (a window of a run: RunState.steps)."""
    o = self.orig(i)
    return self.run.steps[o] if self.run is not None else o

  def orig(self, i: int) -> int:
    """The capture's step number of launch step `i` (steps that are no launch's were dropped)."""
    return self.keep[i] if i < len(self.keep) else self.n_all

  def shape(self, e: dict, step: int) -> tuple:
    """A host step compared between launches: a submission by its ring and packets (with the program each dispatch runs
    and each copy's length), a host write by its range, a signal write or wait by its signal."""
    if e["op"] == "write": return ("write", e["addr"], e["size"])
    if e["op"] != "submit": return (e["op"], e["addr"], bool(e.get("init")))
    q = self.qmap[e["queue"]]
    return ("submit", e["queue"], self.step_shape(q, self.decode(q, q.dwords[e["start"]:e["start"] + e["length"]]), step))

  def snap(self, addr: int, n: int, lo: int, hi: int = 1 << 62) -> Optional[bytes]:
    """The bytes [addr, addr + n) as read first at a step in [lo, hi)."""
    for a, b, st in self.mem_at:
      if lo <= st < hi and a <= addr and addr + n <= a + len(b): return b[addr - a:addr - a + n]
    return None

  def alloc_of(self, a: int) -> Optional[tuple]:
    """(start, size, device) of the allocation holding address `a`: the one with the highest start at or below `a` that
    holds it (allocations do not nest)."""
    i = bisect.bisect_right(self.alloc_starts, a) - 1
    while i >= 0:
      lo, size, dev = self.allocs[i]
      if lo <= a < lo + size: return lo, size, dev
      if i == 0 or self.allocs[i - 1][0] + self.allocs[i - 1][1] <= lo: return None
      i -= 1
    return None

  def as_input(self, addrs: tuple, size: int) -> Optional[tuple]:
    """(input, offset, None) for addresses at one offset into each launch's memory of a graph input; (input, offset,
    j) for one address inside exactly one launch j's input — a command that kept it (`x@j`)."""
    for t, n in self.inputs.items():
      if len(set(addrs)) > 1:
        off = addrs[0] - t[0]
        if 0 <= off and off + size <= n and all(a - b == off for a, b in zip(addrs, t)): return t, off, None
      else:
        hits = [j for j, b in enumerate(t) if b <= addrs[0] < b + n]
        if len(hits) == 1 and addrs[0] + size <= t[hits[0]] + n: return t, addrs[0] - t[hits[0]], hits[0] + 1
    return None

  def use(self, addrs: tuple, size: int, step: int, offset: int, reads: bool) -> None:
    """Launch 1's command at (`step`, `offset`) uses `size` bytes at `addrs` (per launch): an access of a graph input's
    memory, of an allocation, or of a rebound group (an address that changes per launch)."""
    self.accesses.append(Access(step, offset, addrs, reads))
    if (hit := self.at_input.get(addrs) or self.as_input(addrs, size)) is not None:
      self.at_input[addrs] = hit
      al, n = self.alloc_of(hit[0][0]), self.inputs[hit[0]]
      r = self.rebound.setdefault(hit[0], Memory(n, al[2] if al else None, step))
      r.size = max(r.size, n)
      return
    al = self.alloc_of(addrs[0])
    if len(set(addrs)) > 1:
      r = self.rebound.setdefault(addrs, Memory(size, al[2] if al else None, step))
      r.size = max(r.size, size)
    elif al is None: self.static.setdefault(addrs[0], Memory(max(size, 1), None, step))
    else: self.static.setdefault(al[0], Memory(al[1], al[2], step))

  def buf_for(self, addrs: tuple) -> tuple:
    """(name, offset, launch of `x@j` or None) of the buffer the per-launch addresses point into."""
    if (hit := self.at_input.get(addrs)) is not None: return self.rebound_names[hit[0]], hit[1], hit[2]
    if len(set(addrs)) > 1: return self.rebound_names[addrs], 0, None
    al = self.alloc_of(addrs[0])
    lo = al[0] if al else addrs[0]
    return self.static_names[lo], addrs[0] - lo, None

  def sig_value(self, a: int) -> int:
    """The signal's value when step `start` ran: the first submission's reading at or after it (if the host does not
    write it first), else the host's last write or reading before it."""
    for e in self.ev[self.start:]:
      if e["op"] == "submit" and a in e.get("signals", {}): return e["signals"][a]
      if e["op"] == "signal" and e["addr"] == a: break
    last = self.m.signals.get(a, {}).get("value", 0)
    for e in self.ev[:self.start]:
      if e["op"] == "signal" and e["addr"] == a: last = e["value"]
      elif e["op"] == "submit" and a in e.get("signals", {}): last = e["signals"][a]
    return last

  def fresh(self, base: str) -> str:
    """`base`, or `base_2`, `base_3`, ...: the first that is no name yet (nor a keyword)."""
    name, i = base, 2
    while name in self.used or name in KEYWORDS: name, i = f"{base}_{i}", i + 1
    self.used.add(name)
    return name

class AMDCaptureLift(CaptureLift):
  """A capture of tinygrad's AMD runtime (classic HCQ, hcq2): PM4 and SDMA packets, as amd/meaning.py states them."""
  vendor = "AMD"

  def decode(self, q: MQueue, dwords: list) -> list: return decoder(q.engine, q.target).decode(dwords)

  def addrs(self, s: Submission, p, field: Optional[str]) -> tuple:
    """The 64-bit address whose low dword is packet `p`'s `field`, in each launch (amd/meaning.py names it for every
    copy, write and poll)."""
    if field is None: raise ValueError(f"{p.name} names no address field")
    o = p.offset + field_at(s.ring.engine, s.ring.target, p.name, field)
    return tuple(d[o] | (d[o + 1] << 32) for d in s.per)

  def step_shape(self, q: MQueue, packets: list, step: int) -> tuple:
    out, regs = [], Registers()
    for p in packets:
      d, m = regs.see(p), meaning(p)
      if d is not None: self.launching.add(step)
      out.append((p.name, d.program if d is not None else m.size if m is not None and m.kind == "copy" else None))
    return tuple(out)

  def packet_uses(self, s: Submission) -> None:
    regs = Registers()
    for p in s.packets:
      if p.raw: continue
      if (m := meaning(p)) is not None and m.kind == "copy":
        for field, reads in ((m.src_field, True), (m.addr_field, False)): self.use(self.addrs(s, p, field), m.size, s.step, p.offset, reads)
      elif m is not None and m.kind in ("write", "poll"):   # a `write`'s bytes, a `poll`'s word: a buffer's
        self.use(self.addrs(s, p, m.addr_field), m.size, s.step, p.offset, m.kind == "poll")
      elif (d := regs.see(p)) is not None:
        uo = d.kernargs_at
        self.found.append(Launched(s, d.program, tuple(x[uo] | (x[uo + 1] << 32) for x in s.per), p.offset))

  def copies(self, s: Submission) -> list:
    return [CopyUse(p.offset, self.addrs(s, p, m.src_field), self.addrs(s, p, m.addr_field), m.size) for p in s.packets
            if (m := meaning(p)) is not None and m.kind == "copy" and m.addr is not None]

  def signal_uses(self, s: Submission) -> list:
    # a signal only a timestamp names is the slot before the clock's memory (signal_addrs says so)
    return [(a, m is not None and m.kind == "timestamp") for p in s.packets for m in [meaning(p)] for a in signal_addrs(p)]

  def kernel_impl(self, k: dict, name: str, code_buf: Optional[str]) -> Optional[Impl]:
    """The kernel's code object, written into code_dir (`amd "k.co"`), reading its code buffer when a copy uploads it."""
    if k.get("code") and self.code_dir is not None:
      cpath = pathlib.Path(self.code_dir) / f"{name}.co"
      try: write_atomic(cpath, k["code"])
      except OSError as e: raise ManifestError(f"{cpath}: {e.strerror or e}") from None
      rel = str(cpath.resolve()) if self.program_dir is None else _relpath(cpath, self.program_dir)
      return Impl(None, None, (), None, rel, code_buf)
    return Impl(amd_code=f"{name}.co", code=code_buf) if code_buf is not None else None   # (no code written: a check only)

  def param_offsets(self, kd: Kernel, d: Dispatch) -> list: return kernarg_layout(kd.params)[0]

  def arg_region(self, ka: int, d: Dispatch, args: list) -> tuple:
    size = 8 * len(d.pointers)
    return Region(f"kernargs_{ka:x}", "kernargs", None, ka, size, {"kernel": self.kname_of[d.prog], "args": args}), b"\0" * size

  def launch_patches(self, d: Dispatch) -> list: return []   # (a dispatch's grid is in its packet: dword_patches)

  def dword_patches(self, s: Submission) -> list:
    patches = []
    for p in s.packets:
      for idx, role in per_launch(s.ring.engine, s.ring.target, p.name):
        o = p.offset + idx
        if o >= len(s.per[0]): continue
        if role == "address":   # an address that changes per launch: patched (`x`, not `x@1`)
          if len({d[o] | (d[o + 1] << 32) for d in s.per}) > 1: patches.append(Patch(o, None, 0, "lo"))
        elif (fit := self.vars.fit([d[o] for d in s.per], "v")): patches.append(Patch(o, fit[0], fit[1]))
    return patches

  def lift_queue(self, s: Submission, qi: QueueImage) -> list: return lift_statements(self.img, qi, self.groups(s))

  def groups(self, s: Submission) -> list:
    """(packets, `@ring offset`) per statement; the KFD's interrupt packets as comments (they order nothing)."""
    out: list = []
    for g in group_packets(s.packets, s.ring.engine):
      at = f"@{s.start + g[0].offset}" if g else None
      m = meaning(g[0]) if g else None
      if m is not None and m.kind in ("signal", "release") and m.addr in self.m.mailboxes:
        out.append((f"# {at}: KFD interrupt: {g[0].name} to the event mailbox (wakes the host's sleep; orders nothing)", None))
      elif m is not None and m.kind == "interrupt": out.append((f"# {at}: KFD interrupt: SDMA {g[0].name}", None))
      else: out.append((g, at))
    return out


def lift_capture(m: Manifest, code_dir=None, program_dir=None, trace: Optional[dict] = None, whole: bool = False,
                 folded_only: bool = False, run: Optional[RunState] = None) -> Program:
  """A capture of tinygrad's AMD runtime (manifest version 2) as the program it ran: every step, the repeating part of
  the host's steps (TinyJit calls, HCQGraph launches) folded into launches, the steps before it as launch 1 and those
  after it as the last launch (lift/segments.py) — per-launch values as `launch + c` or listed vars, kernel-argument
  pointers and copy addresses that change per launch as `rebound` buffers, a ring submitted several times per launch
  as one queue per submission, kernels by tinygrad's names with their code objects, expects from the contents after
  the last step. `folded_only`: the repeated launches alone, what came before them their initial state (signal values
  and buffer contents as they were when the first repeated step ran), the steps after them left out. `whole`: the run
  as it happened — every step of the capture in one launch (what `sanitize` checks). `run`: the capture is a window
  of a longer run, lifted whole as the whole run's lift lifts those steps (RunState)."""
  if whole or folded_only or run is not None: return AMDCaptureLift(m, code_dir, program_dir, trace, whole, run=run).program()
  return lift_default(AMDCaptureLift, m, code_dir, program_dir, trace)

def _relpath(p: pathlib.Path, base) -> str:
  return os.path.relpath(p.resolve(), pathlib.Path(base).resolve())

