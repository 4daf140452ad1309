"""The lift of a capture (manifest version 2, `hcqdsl capture`): the program tinygrad ran — its repeating launches
folded, or (`whole`) the run as it happened."""
from __future__ import annotations
import bisect, pathlib
from typing import Optional
import attrs
import numpy as np
from ..ir import (Program, Device, Buffer, Signal, Var, Kernel, Param, Impl, Host, Expect, Wait, SignalWrite, Submit, HostWrite,
                  Ref, Expr, Slice, Data, KEYWORDS, KERNARGS, U32_MAX, POLL_SIZE)
from ..amd.image import Image, QueueImage, Patch, Region
from ..amd.disasm import decoder
from .image import lift_statements, queue_decl, lifted_program, trimmed_data
from .schema import Manifest, LAUNCH_VAR
from .packets import group_packets, signal_addrs, written_range, polled_range, hexname, epochs, ident

__all__ = ["lift_capture", "LIFT_RTOL", "LIFT_ATOL"]

# the tolerance of a lifted float32 expect: hcqdsl's RDNA3 executor and tinygrad's emulator round transcendentals (exp2,
# log2, rcp, sqrt) differently by an ulp or two, and chains of kernels (an optimizer step) grow that; values near zero
# differ in absolute terms — Adam's first steps divide a gradient by its own square root, so an update near zero moves
# by up to the learning rate (convnet.py's weights after three steps: 2e-4 apart)
LIFT_RTOL, LIFT_ATOL = 1e-3, 1e-3

def _launch_steps(ev: list, whole: bool = False) -> list:
  """The indices of the host steps that are steps of a launch: all but a signal's creation (`init`) at an address no
  earlier step used (a recycled signal's creation writes memory a submission, wait or write used: it stays a step),
  and, folding launches (not `whole`), the host's writes of classic HCQ's staged chunks (`staged`: they alternate
  between the allocator's staging buffers, so no launch repeats the last; the copy reading one is `rebound` there)."""
  used, keep = set(), []
  for i, e in enumerate(ev):
    if e.get("staged") and not whole: continue
    if e["op"] == "submit": used.update(e.get("signals", ()))
    elif e.get("init") and e["addr"] not in used: continue
    else: used.add(e["addr"])
    keep.append(i)
  return keep

def _period(shapes: list) -> Optional[tuple]:
  """(start, P, K): the K >= 2 back-to-back repetitions of a P-step block covering the most steps (on a tie the
  fewest steps per block, then the latest start), each containing a submission; None when nothing repeats."""
  n, best = len(shapes), None
  for P in range(1, n // 2 + 1):
    run = 0  # run[i]: how many consecutive j >= i have shapes[j] == shapes[j + P], computed right to left
    runs = [0] * (n + 1)
    for i in range(n - P - 1, -1, -1):
      runs[i] = runs[i + 1] + 1 if shapes[i] == shapes[i + P] else 0
    for i in range(n - 2 * P + 1):
      K = 1 + runs[i] // P
      if K < 2 or not any(s[0] == "submit" for s in shapes[i:i + P]): continue
      key = (K * P, -P, i)  # on a tie the latest phase: its last launch is the one the program ended with
      if best is None or key > best[0]: best = (key, (i, P, K))
    del run
  return best[1] if best else None

# where in a packet a per-launch value sits: packet name -> {dword index: role}
_ROLES = {"WAIT_REG_MEM": {4: "value", 2: "addr", 3: "addr"}, "RELEASE_MEM": {5: "value", 3: "addr", 4: "addr"},
          "POLL_REGMEM": {3: "value", 1: "addr", 2: "addr"}, "FENCE": {3: "value", 1: "addr", 2: "addr"},
          "COPY_LINEAR": {3: "src", 4: "src", 5: "dst", 6: "dst"}, "DISPATCH_DIRECT": {1: "dim", 2: "dim", 3: "dim"},
          "WRITE_UNTILED": {4: "value", 1: "addr", 2: "addr"}}

class _Vars:
  """Per-launch values as the program says them: `launch + c` when they step by one, else a listed var."""
  def __init__(self, used: set, notes: list): self.lists, self.used, self.notes, self.uses_launch = {}, used, notes, False
  def fit(self, vals: list, hint: str) -> Optional[tuple]:
    """(var, add) for values that change between launches; None when they do not."""
    vals = [v & U32_MAX for v in vals]
    if len(set(vals)) == 1: return None
    c = vals[0] - 1
    if all((v - (k + 1 + c)) & U32_MAX == 0 for k, v in enumerate(vals)):
      self.uses_launch = True
      return (LAUNCH_VAR, c if c <= U32_MAX // 2 else c - (1 << 32))
    key = tuple(vals)
    if key not in self.lists:
      name, i = hint, 2
      while name in self.used or name in KEYWORDS: name, i = f"{hint}_{i}", i + 1
      self.used.add(name); self.lists[key] = name
    return (self.lists[key], 0)

def _graph_inputs(m: Manifest, ev: list, start: int, P: int, K: int) -> dict:
  """{per-launch addresses: size} of every graph input whose memory changes between launches: launch k's address is
  what HCQGraph was handed at its call in launch k (the capture's `graph_calls`, tinygrad's input_uops; a
  MultiBuffer's per device). A call belongs to the launch of its first submission."""
  per: dict = {}   # (graph, input, device) -> [(addr, size) per launch]
  subs = [i for i, e in enumerate(ev) if e["op"] == "submit"]
  for step, g, ins in m.graph_calls:
    at = next((i for i in subs if i >= step), None)
    if at is None or not start <= at < start + K * P: continue
    k = (at - start) // P
    for i, row in enumerate(ins):
      for d, x in enumerate(row or ()):
        if x is None: continue
        slot = per.setdefault((g, i, d), [None] * K)
        slot[k] = x if slot[k] is None else (None, 0)   # called twice in one launch: not one input per launch
  out: dict = {}
  for xs in per.values():
    if any(x is None or x[0] is None for x in xs) or len({a for a, _ in xs}) < 2: continue
    t = tuple(a for a, _ in xs)
    out[t] = max(out.get(t, 0), *(n for _, n in xs))
  return out

def lift_capture(m: Manifest, code_dir=None, program_dir=None, trace: Optional[dict] = None, whole: bool = False) -> Program:
  """A capture of tinygrad's AMD runtime (manifest version 2) as the program it ran: the repeating part of the host's
  steps (TinyJit calls, HCQGraph launches) as N launches — what came before it (warm-up, compilation) is its initial
  state: signal values and buffer contents as they were when the first repeated step ran —, per-launch values as
  `launch + c` or listed vars, kernel-argument pointers and copy addresses that change per launch as `rebound`
  buffers, a ring submitted several times per launch as one queue per submission, kernels by tinygrad's names with
  their code objects, expects from the contents after the last launch. `whole`: the run as it happened — every step of
  the capture in one launch, nothing taken for initial state or left out (what `sanitize` checks)."""
  notes: list = []
  # a fresh signal's creation (tinygrad writes its first value in HCQSignal.__init__: HCQGraph makes its signals
  # while the captured call runs) is its initial value, no step of a launch: so the captured call is launch 1
  keep = _launch_steps(m.host, whole)
  n_all, orig = len(m.host), (lambda i: keep[i] if i < len(keep) else len(m.host))
  if len(keep) < len(m.host):
    new = lambda st: bisect.bisect_left(keep, st)
    m = attrs.evolve(m, host=[m.host[i] for i in keep], steps=[(a, b, new(st)) for a, b, st in m.steps],
                     graph_calls=[(new(st), g, ins) for st, g, ins in m.graph_calls])
  ev = m.host
  qmap = {q.name: q for q in m.queues}
  def what(e) -> tuple:
    """A submission's packets, by name, with the program each dispatch runs and each copy's length."""
    q = qmap[e["queue"]]
    out, regs = [], {}
    for p in decoder(q.engine, q.target).decode(q.dwords[e["start"]:e["start"] + e["length"]]):
      if p.name == "SET_SH_REG" and not p.raw: regs[p.fields["reg"]] = p.fields["values"]
      extra = tuple(regs.get("regCOMPUTE_PGM_LO", ())) if p.name == "DISPATCH_DIRECT" else p.fields.get("count") if p.name == "COPY_LINEAR" else None
      out.append((p.name, extra))
    return tuple(out)
  shape = lambda e: ("submit", e["queue"], what(e)) if e["op"] == "submit" else ("write", e["addr"], e["size"]) if e["op"] == "write" \
    else (e["op"], e["addr"], bool(e.get("init")))
  found = None if whole else _period([shape(e) for e in ev])
  start, P, K = found if found else (0, len(ev), 1)
  if whole: notes.append("the run as it happened: every step of the capture in one launch")
  elif found is None: notes.append("the host's steps do not repeat: lifted as one launch of every step")
  left_out: list = []   # what the lifted program does not check, in words (sanitize and `lift` say so on their summary)
  if start:
    notes.append(f"steps 1..{orig(start)} (warm-up, compilation, first calls) are the initial state: signals and "
                 f"buffers start as they were at step {orig(start) + 1}")
    left_out.append(f"steps 1..{orig(start)} (the initial state)")
  if start + K * P < len(ev):
    notes.append(f"steps {orig(start + K * P) + 1}..{n_all} after the last repeated launch are not lifted")
    left_out.append(f"steps {orig(start + K * P) + 1}..{n_all} (after the last repeated launch)")
  end = start + K * P
  mem_at = sorted(m.steps, key=lambda x: x[2])
  def snap(addr: int, n: int, lo: int, hi: int = 1 << 62) -> Optional[bytes]:
    """The bytes [addr, addr + n) as read first at a step in [lo, hi)."""
    for a, b, st in mem_at:
      if lo <= st < hi and a <= addr and addr + n <= a + len(b): return b[addr - a:addr - a + n]
    return None
  used = {d["name"] for d in m.devices} | {LAUNCH_VAR} | set(qmap)
  vars_ = _Vars(used, notes)
  # ---- one lifted queue per submission of a launch (a ring submitted twice is two queues, in ring order)
  # ---- one lifted queue per submission; a ring's submissions in one launch are chained through a signal of the
  # ring's own (its FIFO: each packet runs after the previous one finished, tinygrad ends a dispatch with a
  # CS_PARTIAL_FLUSH), so host steps between them keep their place and the ring's order is kept
  subs, count = [], {}
  for i in range(start, start + P):
    e = ev[i]
    if e["op"] != "submit": continue
    count[e["queue"]] = count.get(e["queue"], 0) + 1
    name = e["queue"] if count[e["queue"]] == 1 else f"{e['queue']}_{count[e['queue']]}"
    used.add(name)
    q = qmap[e["queue"]]
    per = [q.dwords[ev[i + k * P]["start"]:ev[i + k * P]["start"] + e["length"]] for k in range(K)]
    subs.append({"name": name, "ring": q, "step": i, "per": per, "segs": [(0, e["length"], i, e["start"])], "nth": count[e["queue"]]})
  # classic HCQ orders a ring's submissions itself (each waits for the timeline value the previous one signals);
  # hcq2's finalizer is a submission of its own that signals the timeline for the batch before it: the ring's order
  chained = {r for r, c in count.items() if c > 1} if m.path == "hcq2" else set()
  if chained:
    notes.append("a ring submitted several times in one launch is one queue per submission (`comp_gpu0_2`, ...), "
                 "ordered as the ring runs them by a signal of the ring's own (`fifo_comp_gpu0`), which no packet writes")
  elif any(c > 1 for c in count.values()):
    notes.append("a ring submitted several times in one launch is one queue per submission (`comp_gpu0_2`, ...): "
                 "tinygrad orders them by the device's timeline")
  seg_of = lambda sub, o: next((g for g in sub["segs"] if g[0] <= o < g[1]), sub["segs"][-1])
  mbox = m.mailboxes
  # ---- addresses: buffers (allocations), rebound groups (an address that changes per launch)
  allocs = sorted((b["addr"], b["size"], b.get("device")) for b in m.buffers)
  alloc_starts = [lo for lo, _, _ in allocs]
  def alloc_of(a: int):
    i = bisect.bisect_right(alloc_starts, a) - 1
    while i >= 0:   # the allocation with the highest start at or below `a` that holds it (allocations do not nest)
      lo, size, dev = allocs[i]
      if lo <= a < lo + size: return lo, size, dev
      if i == 0 or allocs[i - 1][0] + allocs[i - 1][1] <= lo: return None
      i -= 1
    return None
  readings = _Readings(m.steps, alloc_of)
  static: dict = {}     # allocation addr -> {"size", "device", "step"}
  rebound: dict = {}    # tuple of per-launch addresses -> {"size", "device", "step"}
  inputs = _graph_inputs(m, ev, start, P, K)
  at_input: dict = {}   # per-launch addresses -> (input's address tuple, offset, launch j of `x@j` or None)
  def as_input(addrs: tuple, size: int) -> Optional[tuple]:
    """(input, offset, None) for addresses at one offset into each launch's memory of a graph input; (input, offset,
    j) for one address inside exactly one launch j's input — a command that kept it (`x@j`)."""
    for t, n in inputs.items():
      if len(set(addrs)) > 1:
        off = addrs[0] - t[0]
        if 0 <= off and off + size <= n and all(a - b == off for a, b in zip(addrs, t)): return t, off, None
      else:
        hits = [j for j, b in enumerate(t) if b <= addrs[0] < b + n]
        if len(hits) == 1 and addrs[0] + size <= t[hits[0]] + n: return t, addrs[0] - t[hits[0]], hits[0] + 1
    return None
  def use(addrs: tuple, size: int, step: int):
    """`step`: the launch-1 step that first uses it (its contents are read as of then)."""
    if (hit := at_input.get(addrs) or as_input(addrs, size)) is not None:
      at_input[addrs] = hit
      al = alloc_of(hit[0][0])
      r = rebound.setdefault(hit[0], {"size": inputs[hit[0]], "device": al[2] if al else None, "step": step})
      r["size"] = max(r["size"], inputs[hit[0]])
      return
    if len(set(addrs)) == 1:
      al = alloc_of(addrs[0])
      if al is None: static.setdefault(addrs[0], {"size": max(size, 1), "device": None, "step": step}); return
      static.setdefault(al[0], {"size": al[1], "device": al[2], "step": step})
    else:
      al = alloc_of(addrs[0])
      r = rebound.setdefault(addrs, {"size": size, "device": al[2] if al else None, "step": step})
      r["size"] = max(r["size"], size)
  dispatches = []   # (sub, packet offset, prog, [kernarg addr per launch])
  accesses = []     # (step, packet offset, per-launch addresses, reads): what launch 1's commands touch, in order
  for s in subs:
    pk = decoder(s["ring"].engine, s["ring"].target).decode(s["per"][0])
    s["packets"] = pk
    regs_at: dict = {}
    for p in pk:
      if p.raw: continue
      if p.name == "COPY_LINEAR":
        size = p.fields["count"] + 1
        for lo in (3, 5):
          use(t := tuple(d[p.offset + lo] | (d[p.offset + lo + 1] << 32) for d in s["per"]), size, seg_of(s, p.offset)[2])
          accesses.append((seg_of(s, p.offset)[2], p.offset, t, lo == 3))
      elif (w := written_range(p)) is not None:   # a `write`: its bytes are a buffer's; an address changing per launch, rebound
        lo = 3 if p.name == "RELEASE_MEM" else 1
        use(t := tuple(d[p.offset + lo] | (d[p.offset + lo + 1] << 32) for d in s["per"]), w[1], seg_of(s, p.offset)[2])
        accesses.append((seg_of(s, p.offset)[2], p.offset, t, False))
      elif polled_range(p) is not None:   # a `poll`: its word is a buffer's
        use(t := tuple(d[p.offset + 2] | (d[p.offset + 3] << 32) for d in s["per"]), POLL_SIZE, seg_of(s, p.offset)[2])
        accesses.append((seg_of(s, p.offset)[2], p.offset, t, True))
      elif p.name == "SET_SH_REG": regs_at[p.fields["reg"]] = p
      elif p.name == "DISPATCH_DIRECT":
        pgm, user = regs_at.get("regCOMPUTE_PGM_LO"), regs_at.get("regCOMPUTE_USER_DATA_0")
        if pgm is None or user is None or len(user.fields["values"]) < 2: continue
        uo = user.offset + 2 + len(user.fields["values"]) - 2
        prog = ((pgm.fields["values"][1] << 32) | pgm.fields["values"][0]) << 8
        kas = [d[uo] | (d[uo + 1] << 32) for d in s["per"]]
        dispatches.append((s, prog, kas, seg_of(s, p.offset)[2], p.offset))
  # the run as it happened (`whole`) on classic HCQ: each exec also reads its kernel-argument block, which the host
  # writes before the submission (HCQProgram.fill_kernargs; HCQGraph's update of an input's address or a var): so a
  # rewrite while an earlier exec may still read the block is a race, and one with no `barrier` before the exec a
  # `visibility` error (the HDP), as on the GPU
  kargs_read = m.path == "hcq"
  kgroups: set = set()   # per-launch kernel-argument addresses that differ per launch: a fresh block each (eager dispatches)
  kinfo: dict = {}   # (kernarg addr in launch 1, lifted queue) -> (kernel info, per-launch pointer tuples, per-launch scalar values, ...)
  for s, prog, kas, step, at in dispatches:
    k = m.kernels.get(prog, {})
    sig = k.get("signature") or []
    bufs = [x for x in sig if x.get("name") is None]
    scal = [x for x in sig if x.get("name") is not None]
    need = 8 * len(bufs)  # tinygrad's layout (TinyELF.iter_sig): 8-byte pointers, then each scalar at its alignment
    for x in scal: need += -need % (x.get("bytes") or 4) + (x.get("bytes") or 4)
    blocks = [snap(ka, need, step + j * P, step + j * P + 1) for j, ka in enumerate(kas)]
    if any(b is None for b in blocks):
      notes.append(f"the kernel arguments of a dispatch of {k.get('name') or hex(prog)} were not recorded: lifted without arguments")
      left_out.append(f"the arguments of a dispatch of {k.get('tinygrad_name') or k.get('name') or hex(prog)} (not recorded)")
      continue
    ptrs = [tuple(int.from_bytes(blocks[j][8 * i:8 * i + 8], "little") for j in range(K)) for i in range(len(bufs))]
    for i, t in enumerate(ptrs):
      use(t, bufs[i].get("bytes") or 1, step)
      accesses.append((step, at, t, bufs[i].get("mode") != "out"))
    vals, off = [], 8 * len(bufs)
    for x in scal:
      sz = x.get("bytes") or 4
      off += -off % sz
      vals.append([int.from_bytes(blocks[j][off:off + 4], "little") for j in range(K)])
      off += sz
    if kargs_read:   # the block itself: one allocation's bytes (HCQGraph's, patched per launch), or new memory per launch
      use(tuple(kas), need, step)
      accesses.append((step, at, tuple(kas), True))
      if len(set(kas)) > 1: kgroups.add(tuple(kas))
    kinfo[kas[0], s["name"]] = (prog, ptrs, vals, scal, [x.get("bytes") for x in bufs], blocks, step, tuple(kas))
  # ---- the host's writes between launches: memory in host RAM whose first access in a launch is a read, holding other
  # bytes launch by launch, was refilled on the CPU (hcq2 copies every input through one staging buffer that tinygrad's
  # CPU device rewrites, ordered by that device's own waits, which the capture does not record): a buffer with each
  # launch's bytes as that first read found them, one memory per launch (`rebound`: the CPU's refill is not checked)
  first: dict = {}
  for step, at, t, reads in sorted(accesses, key=lambda x: x[:2]):
    if len(set(t)) == 1 and (al := alloc_of(t[0])) is not None: first.setdefault(al[0], (step, reads))
  host_written = {al[0] for e in ev[start:start + P] if e["op"] == "write" and (al := alloc_of(e["addr"])) is not None}
  rewritten: dict = {}
  kblocks = {al[0] for *_, kas_ in kinfo.values() if len(set(kas_)) == 1 and (al := alloc_of(kas_[0])) is not None}
  for key, (step, reads) in first.items():
    # (a kernel-argument block's per-launch bytes are the host's `write`s: kargs_read)
    if not reads or key not in static or static[key]["device"] is not None or K < 2 or key in host_written or key in kblocks: continue
    per = [readings.assemble(key, static[key]["size"], step + k * P) for k in range(K)]
    if None not in per and len(set(per)) > 1: rewritten[key] = per
    # refilled again between two reads of one launch (two inputs staged through one region): one memory per launch
    # cannot say it; the first read's bytes are kept, and `run` then differs from tinygrad
    later = {readings.assemble(key, static[key]["size"], st) for st, _, t, r in accesses
             if r and st > step and len(set(t)) == 1 and (al := alloc_of(t[0])) is not None and al[0] == key}
    if key in rewritten and later - {per[0]}:
      notes.append(f"the host-memory buffer at {key:#x} is refilled between two reads of one launch (inputs staged "
                   "through one region): lifted with each launch's first read's bytes, so later reads see those")
  if rewritten: notes.append("buffers in host memory refilled on the CPU between launches (read first in each launch, with "
                             "other bytes each time: tinygrad's staging buffer) are `rebound`, holding what each launch read; "
                             "the CPU device's refill and its waits are not recorded, so their order is not checked")
  # ---- names
  def fresh(base: str) -> str:
    name, i = base, 2
    while name in used or name in KEYWORDS: name, i = f"{base}_{i}", i + 1
    used.add(name); return name
  bufname: dict = {}
  kalloc = {al[0] for (ka, _) in kinfo if (al := alloc_of(ka)) is not None} if kargs_read else set()
  for a in sorted(static): bufname[("s", a)] = fresh(hexname("kargs" if a in kalloc else "b", a))   # kargs_: kernel arguments
  for t in rebound: bufname[("r", t)] = fresh(f"{'kargs' if t in kgroups else 'in'}_{t[0]:x}")
  def buf_for(addrs: tuple):
    """(name, offset, launch of `x@j` or None) of the buffer the per-launch addresses point into."""
    if (hit := at_input.get(addrs)) is not None: return bufname[("r", hit[0])], hit[1], hit[2]
    if len(set(addrs)) > 1: return bufname[("r", addrs)], 0, None
    al = alloc_of(addrs[0])
    lo = al[0] if al else addrs[0]
    return bufname[("s", lo)], addrs[0] - lo, None
  # signals: what the packets and host steps name, without the mailboxes
  sig_addrs = []
  for s in subs:
    for p in s["packets"]: sig_addrs += [a for a in signal_addrs(p) if a not in mbox]
  sig_addrs += [e["addr"] for e in ev[start:start + P] if e["op"] in ("signal", "wait")]
  signals: dict = {}
  def sig_value(a: int) -> int:
    """The signal's value when step `start` ran: the first submission's reading at or after it (if the host does not
    write it first), else the host's last write or reading before it."""
    for e in ev[start:]:
      if e["op"] == "submit" and a in e.get("signals", {}): return e["signals"][a]
      if e["op"] == "signal" and e["addr"] == a: break
    last = m.signals.get(a, {}).get("value", 0)
    for e in ev[:start]:
      if e["op"] == "signal" and e["addr"] == a: last = e["value"]
      elif e["op"] == "submit" and a in e.get("signals", {}): last = e["signals"][a]
    return last
  # a signal only a timestamp names is the slot before the clock's memory (`timestamp s` writes s's timestamp slot, 8 bytes
  # on): named after the memory the clock goes to (hcq2's profile buffers, tinygrad's HCQSignal.timestamp_addr)
  stamped = {a for s in subs for p in s["packets"] if not p.raw and ((p.name == "RELEASE_MEM" and p.fields.get("data_sel") == 3)
                                                                    or p.name == "TIMESTAMP_GET_GLOBAL") for a in signal_addrs(p)}
  synced = {a for s in subs for p in s["packets"] if not (p.name == "RELEASE_MEM" and p.fields.get("data_sel") == 3)
            and p.name != "TIMESTAMP_GET_GLOBAL" for a in signal_addrs(p)} | {e["addr"] for e in ev if e["op"] in ("signal", "wait")}
  for a in dict.fromkeys(sig_addrs):
    info = m.signals.get(a, {})
    if a in stamped and a not in synced and not info.get("timeline"): signals[a] = fresh(hexname("ts", a + 8)); continue
    if info.get("timeline") and info.get("device") and sig_value(a) == 0 and f"{info['device']}.timeline" not in signals.values():
      signals[a] = f"{info['device']}.timeline"  # starts at 0, as the language's D.timeline does: its waits read as `epoch`
    else: signals[a] = fresh(f"tl_{info['device']}" if info.get("timeline") and info.get("device") else hexname("s", a))
  # ---- kernels: one declaration per (tinygrad name, code), with its code object
  # a kernel whose code a lifted copy uploads (tinygrad's AMDProgram copies its ELF into VRAM) reads that buffer at
  # each exec (`amd "k.co" code B`): check orders every exec after the upload
  uploaded = {al[0] for s in subs for p in s["packets"] if p.name == "COPY_LINEAR" and not p.raw
              and len({d[p.offset + 5] | d[p.offset + 6] << 32 for d in s["per"]}) == 1 and (al := alloc_of(p.fields["dst_addr"])) is not None}
  kdecl, kname_of = {}, {}
  for (ka, _), (prog, ptrs, vals, scal, nbytes, *_) in kinfo.items():
    if prog in kname_of: continue
    k = m.kernels.get(prog, {})
    base = ident(k.get("tinygrad_name") or k.get("name")) if (k.get("tinygrad_name") or k.get("name")) else hexname("k", prog)
    al = alloc_of(prog)
    code_buf = bufname.get(("s", al[0])) if al is not None and al[0] in uploaded else None
    key = (base, k.get("code") or prog, code_buf)
    if key not in kdecl:
      bmodes = [x.get("mode") if x.get("mode") in ("in", "out", "inout") else "inout" for x in k.get("signature") or [] if x.get("name") is None]
      modes = [Param(bmodes[i] if i < len(bmodes) else "inout", f"a{i}") for i in range(len(ptrs))] + [Param("u32" if "uint" in (x.get("dtype") or "") else "i32", ident(x["name"]))
                                                                   for x in scal] + [Param("in", KERNARGS)] * kargs_read
      impl, kn = None, fresh(base)
      if k.get("code") and code_dir is not None:
        cpath = pathlib.Path(code_dir) / f"{kn}.co"
        cpath.write_bytes(k["code"])
        rel = str(cpath.resolve()) if program_dir is None else _relpath(cpath, program_dir)
        impl = Impl(None, None, (), None, rel, code_buf)
      elif code_buf is not None: impl = Impl(amd_code=f"{kn}.co", code=code_buf)   # (no code written: a check only)
      kdecl[key] = Kernel(kn, tuple(modes), impl)
    kname_of[prog] = kdecl[key].name
  # ---- the pseudo image the statement lifter reads names from, with per-launch patches
  ibufs = {}
  for (kind, key), nm in bufname.items():
    if kind == "s": ibufs[nm] = (key, static[key]["size"])
    else: ibufs[nm] = (key[0], rebound[key]["size"])
  ibufs_size = lambda nm: ibufs[nm][1]
  regions, mem_patches, regions_of = [], {}, {}   # regions_of: each lifted queue's (a kernarg address is reused by launches)
  for (ka, sname), (prog, ptrs, vals, scal, nbytes, blk, _, kas_) in kinfo.items():
    args = []
    for t, nb in zip(ptrs, nbytes):
      nm, off, pin = buf_for(t)
      size = ibufs_size(nm)
      hi = off + nb if nb and off + nb < size else None  # tinygrad's byte range of the argument (a view of a bigger allocation)
      args.append([nm, off or None, hi, bool(off) or hi is not None, pin])
    args += [None] * len(vals)
    if kargs_read:
      nm, off, _ = buf_for(kas_)
      args.append([nm, off, off + len(blk[0]), True, None])
    regions.append(Region(f"kernargs_{ka:x}", "kernargs", None, ka, 8 * len(ptrs), {"kernel": kname_of[prog], "args": args}))
    regions_of.setdefault(sname, []).append(regions[-1])
  kparams = {}
  for kd in kdecl.values():
    off, ps = 0, []
    for p in kd.params:
      sz = 4 if p.scalar else 8
      off += -off % sz
      ps.append([p.mode, p.name, off]); off += sz
    kparams[kd.name] = ps
  ikernels = [{"name": kname_of[prog], "prog_addr": prog, "params": kparams[kname_of[prog]]} for prog in dict.fromkeys(p for p, *_ in kinfo.values())]
  for (ka, sname), (prog, ptrs, vals, scal, nbytes, *_) in kinfo.items():
    ps = kparams[kname_of[prog]]
    for i, v in enumerate(vals):
      off = ps[len(ptrs) + i][2]
      fit = vars_.fit(v, ident(scal[i]["name"]))
      raw = v[0] & U32_MAX
      mem_patches.setdefault(sname, []).append(Patch(ka + off, fit[0] if fit else None, fit[1] if fit else raw))
  img = Image(m.queues[0].target, m.file, m.devices, [], regions, {n: a for a, n in signals.items()}, ibufs, ikernels,
              [], [(r.addr, b"\0" * r.size) for r in regions], [], [])
  # each rebound buffer's memory per launch: a copy address the host patches is one (`x`); a fixed one that kept a
  # graph input's memory of one launch is `x@j`
  img.var_values.update({f"{nm}.addr": list(key) for (kind, key), nm in bufname.items() if kind == "r"})
  # ---- declarations
  decls: list = [Device(d["name"], "AMD", d["index"], d["arch"]) for d in m.devices]
  def data_of(b: Optional[bytes], size: int) -> Optional[Data]: return trimmed_data(b, size) if b else None
  for (kind, key), nm in bufname.items():
    if kind == "s" and key in rewritten:
      decls.append(Buffer(nm, None, static[key]["size"], None, "rebound",
                          tuple(data_of(b, static[key]["size"]) or Data("u8", (0,)) for b in rewritten[key])))
    elif kind == "s":
      st = static[key]
      init = data_of(readings.assemble(key, st["size"], st["step"]), st["size"])
      decls.append(Buffer(nm, Ref(st["device"]) if st["device"] else None, st["size"], init))
    else:
      r = rebound[key]
      inits = tuple(data_of(readings.assemble(a, r["size"], r["step"] + k * P), r["size"]) or Data("u8", (0,)) for k, a in enumerate(key))
      decls.append(Buffer(nm, Ref(r["device"]) if r["device"] else None, r["size"], None, "rebound", inits))
  for a, n in signals.items():
    info = m.signals.get(a, {})
    v = sig_value(a)
    if n.endswith(".timeline"): continue
    if v > U32_MAX: notes.append(f"signal {n} holds {v} (more than 32 bits): its low 32 bits are lifted")
    decls.append(Signal(n, Ref(info["device"]) if info.get("device") else None, v & U32_MAX))
  fifo_names = {r: fresh(f"fifo_{r}") for r in sorted(chained)}
  decls += [Signal(n, Ref(qmap[r].device)) for r, n in fifo_names.items()]
  # queue statements: the template's dwords with per-launch patches
  queues = []
  for s in subs:
    patches = []
    for p in s["packets"]:
      roles = _ROLES.get(p.name, {})
      for idx, role in roles.items():
        o = p.offset + idx
        if o >= len(s["per"][0]): continue
        if role in ("src", "dst") and idx in (3, 5):  # an address that changes per launch: patched (`x`, not `x@1`)
          if len({d[o] | (d[o + 1] << 32) for d in s["per"]}) > 1: patches.append(Patch(o, None, 0, "lo"))
          continue
        if role not in ("value", "dim"): continue
        fit = vars_.fit([d[o] for d in s["per"]], "v")
        if fit: patches.append(Patch(o, fit[0], fit[1]))
    qi = QueueImage(s["name"], s["ring"].engine, s["ring"].device, s["ring"].target, 0, s["per"][0], patches, [],
                    mem_patches.get(s["name"], []))
    img.regions = regions_of.get(s["name"], [])
    groups = []
    for g in group_packets(s["packets"], s["ring"].engine):
      at = f"@{seg_of(s, g[0].offset)[3] + g[0].offset - seg_of(s, g[0].offset)[0]}" if g else None
      if g and g[0].name in ("RELEASE_MEM", "FENCE") and not g[0].raw and g[0].fields.get("addr") in mbox:
        groups.append((f"# {at}: KFD interrupt: {g[0].name} to the event mailbox (wakes the host's sleep; orders nothing)", None))
      elif g and g[0].name == "TRAP" and not g[0].raw: groups.append((f"# {at}: KFD interrupt: SDMA TRAP", None))
      else: groups.append((g, at))
    items = [epochs(x, s["ring"].device) for x in lift_statements(img, qi, groups)]
    if s["ring"].name in chained:  # segment n of S in launch k: waits for (k-1)*S + n-1, signals (k-1)*S + n
      S, n, fifo = count[s["ring"].name], s["nth"], fifo_names[s["ring"].name]
      def fx(vals):
        f = vars_.fit(vals, "fifo")
        return Expr(Ref(f[0]), f[1]) if f else Expr(None, vals[0])
      items = [Wait(Ref(fifo), fx([k * S + n - 1 for k in range(K)]), comment="# the ring's order: after its previous submission")] + \
        [x for x in items if not isinstance(x, str)] + [SignalWrite(Ref(fifo), fx([k * S + n for k in range(K)]), comment="# the ring's order")] + \
        [x for x in items if isinstance(x, str)]
    queues.append(queue_decl(s["name"], s["ring"].engine, s["ring"].device, items))
  # the host's writes of the kernel arguments (`kargs_read`), before the submission that dispatches them: a block in new
  # memory each launch is written in every launch (its own memory); one the launches share, when its bytes differ
  # between launches (HCQGraph's update of an input's address or a var) or, in one launch, since the last dispatch
  # that read it (the run as it happened: every eager fill, a graph's first fill)
  kwrites: dict = {}   # lifted queue -> [(slice, per-launch data)]
  last_kargs: dict = {}
  for (ka, sname), (prog, ptrs, vals, scal, nbytes, blk, step, kas_) in sorted(kinfo.items(), key=lambda x: x[1][6]) if kargs_read else ():
    if kas_ not in kgroups and (len(set(blk)) == 1 if K > 1 else last_kargs.get(ka) == blk[0]): continue
    last_kargs[ka] = blk[0]
    nm, off, _ = buf_for(kas_)
    kwrites.setdefault(sname, []).append((Slice(Ref(nm), off, off + len(blk[0]), True), tuple(_bytes_data(b) for b in blk)))
  host, host_steps = [], []   # host_steps[i]: the capture steps host statement i stands for (a submit: each queue's)
  for i in range(start, start + P):
    e = ev[i]
    if e["op"] == "submit":
      nm = next((x["name"] for x in subs if x["step"] == i), None)
      if nm is None: continue  # a later submission of a ring already submitted in this launch
      for kb, kd in kwrites.get(nm, ()):   # the host fills the kernel arguments, then submits
        host.append(HostWrite(kb, kd)); host_steps.append([i])
      if host and isinstance(host[-1], Submit): host[-1] = Submit(host[-1].queues + (Ref(nm),)); host_steps[-1].append(i)
      else: host.append(Submit((Ref(nm),))); host_steps.append([i])
      continue
    if e["op"] == "write":   # the host's refill of host memory: each launch's bytes, at this point of the host block
      al = alloc_of(e["addr"])
      nm = bufname.get(("s", al[0])) if al is not None else None
      if nm is None: continue   # memory no lifted command uses
      off = e["addr"] - al[0]
      n = min(e["size"], static[al[0]]["size"] - off)
      # (bytes not recorded — sanitize's capture — are written as zeros: the range is what a check needs)
      host.append(HostWrite(Slice(Ref(nm), off, off + n, True), tuple(_bytes_data(ev[i + k * P]["data"][:n]) if ev[i + k * P]["data"]
                                                                       else Data("u8", (0,)) for k in range(K))))
      host_steps.append([i])
      continue
    fit = vars_.fit([ev[i + k * P]["value"] for k in range(K)], "h")
    ex = Expr(Ref(fit[0]), fit[1]) if fit else Expr(None, e["value"] & U32_MAX)
    host.append(epochs((Wait if e["op"] == "wait" else SignalWrite)(Ref(signals[e["addr"]]), ex), None)); host_steps.append([i])
  decls += [Var(n, tuple(v)) for v, n in vars_.lists.items()]
  if vars_.uses_launch: decls.append(Var(LAUNCH_VAR))
  decls += list(kdecl.values())
  decls += queues
  if host: decls.append(Host(tuple(host)))
  # expects: each buffer a launch writes, as it was after the last launch
  written = {buf_for(t)[0] for _, (prog, ptrs, *_) in kinfo.items() for t in ptrs}
  written |= {bufname.get(("s", alloc_of(a)[0] if alloc_of(a) else a)) for s in subs for p in s["packets"]
              if p.name == "COPY_LINEAR" and not p.raw and len({d[p.offset + 5] for d in s["per"]}) == 1
              for a in [p.fields["dst_addr"]]}
  # tinygrad's dtype of each buffer's memory as its last writer left it: a kernel's argument (its signature), or a copy's
  # source (tinygrad reuses memory, a staging buffer for everything: the last write decides)
  events = []   # (step, offset, kind, what)
  for (ka, sname), (prog, ptrs, _, _, _, _, step, _) in kinfo.items():
    bsig = [x for x in m.kernels.get(prog, {}).get("signature") or [] if x.get("name") is None]
    events.append((step, 0, "exec", [(buf_for(t)[0], x.get("dtype"), x.get("mode")) for t, x in zip(ptrs, bsig)]))
  for sub in subs:
    for p in sub["packets"]:
      if p.name == "COPY_LINEAR" and not p.raw:
        ends = [buf_for(tuple(d[p.offset + lo] | (d[p.offset + lo + 1] << 32) for d in sub["per"]))[0] for lo in (3, 5)]
        events.append((seg_of(sub, p.offset)[2], p.offset, "copy", ends))
  dtypes: dict = {}
  for _, _, kind, ends in sorted(events, key=lambda e: e[:2]):
    if kind == "copy": dtypes[ends[1]] = dtypes.get(ends[0])
    else:
      for nm, dt, mode in ends:
        if mode in ("out", "inout") or nm not in dtypes: dtypes[nm] = dt
  for (kind, key), nm in bufname.items():
    if kind != "s" or nm not in written or static[key]["size"] > (1 << 20): continue
    after = readings.assemble(key, static[key]["size"], end, m.final, after=True)
    if after is None: continue
    d = trimmed_data(after, static[key]["size"]) or Data("u8", (0,))
    sl = Slice(Ref(nm), 0, len(after) if d.nbytes == len(after) else d.nbytes, True) if d.nbytes != static[key]["size"] else Slice(Ref(nm))
    if dtypes.get(nm) == "float" and d.nbytes % 4 == 0:   # float32 memory: compared within a tolerance, as floats
      decls.append(Expect(sl, Data("f32", tuple(float(x) for x in np.frombuffer(after[:d.nbytes], "<f4"))), True, LIFT_RTOL, LIFT_ATOL))
    else: decls.append(Expect(sl, d))
  if trace is not None:  # for sanitize: which capture step each lifted queue came from
    trace.update(start=orig(start), period=P, launches=K, steps=[orig(i) for i in range(start, start + P)], left_out=left_out,
                 queues={x["name"]: [(a, b, orig(i), c) for a, b, i, c in x["segs"]] for x in subs},
                 host=[[orig(i) for i in st] for st in host_steps])
  # the launch steps in no statement: the initial state, the steps after the last launch (a signal's creation is its
  # initial value and a folded lift's staged writes are its rebound buffers: both are in the program)
  unlifted = start + len(ev) - end
  header = [f"# hcq: launches={K}"] + [f"# hcq: unlifted={unlifted}"] * bool(unlifted) + [f"# lifted from {m.file} by hcqdsl lift ({K} captured launch{'es' * (K != 1)} of "
            f"tinygrad's AMD runtime, steps {orig(start) + 1}..{orig(end - 1) + 1} of {n_all})"] + [f"# note: {x}" for x in dict.fromkeys(notes)]
  return lifted_program(decls, m.file, header)

class _Readings:
  """A capture's memory readings (addr, bytes, step), indexed by the allocation they fall in, so assembling one
  allocation reads only its own readings (a capture of a long run holds thousands)."""
  def __init__(self, steps: list, alloc_of):
    self.alloc_of, self.all = alloc_of, sorted(steps, key=lambda x: x[2])
    self.by_alloc: dict = {}
    for x in self.all:
      al = alloc_of(x[0])
      self.by_alloc.setdefault(al[0] if al is not None else None, []).append(x)
  def assemble(self, addr: int, size: int, t: int, final: Optional[list] = None, after: bool = False) -> Optional[bytes]:
    al = self.alloc_of(addr)
    steps = self.all if al is None or al[0] + al[1] < addr + size else self.by_alloc.get(al[0], []) + self.by_alloc.get(None, [])
    return _assemble(steps, addr, size, t, final, after)

def _assemble(steps: list, addr: int, size: int, t: int, final: Optional[list] = None, after: bool = False) -> Optional[bytes]:
  """The allocation [addr, addr + size) when step `t` ran, each byte from the last reading at or before `t` (a capture
  reads a buffer before each step that uses it and records it only when it changed). `after`: its contents once the
  steps before `t` had run — the first reading at or after `t`, else the final contents, else the last one before
  (`size` bytes). Otherwise without its trailing zeros, so an allocation of 256 MiB that was read at its start costs
  what was read. None when nothing covers it."""
  ordered = sorted(steps, key=lambda x: x[2])
  chosen = ([(a, b) for a, b, st in ordered if st >= t] + [(a, b.ljust(size, b"\0")) for a, b in final or () if a == addr]
            if after else []) + [(a, b) for a, b, st in reversed(ordered) if st <= t - after]
  chosen = [(a, b) for a, b in chosen if a < addr + size and addr < a + len(b)]
  if not chosen: return None
  hi = size if after else max(min(a + len(b), addr + size) for a, b in chosen) - addr
  out, missing = bytearray(hi), [(0, hi)]   # the byte ranges no reading has given yet
  for a, b in chosen:
    lo, up = max(a, addr) - addr, min(a + len(b), addr + hi) - addr
    if lo >= up: continue
    left = []
    for m0, m1 in missing:
      s0, s1 = max(m0, lo), min(m1, up)
      if s0 >= s1: left.append((m0, m1)); continue
      out[s0:s1] = b[s0 + addr - a:s1 + addr - a]
      left += [r for r in ((m0, s0), (s1, m1)) if r[0] < r[1]]
    missing = left
    if not missing: break
  return bytes(out) if after else bytes(out).rstrip(b"\0")

def _bytes_data(b: bytes) -> Data:
  """Bytes as the widest integer data that holds them exactly (u32 for tinygrad's float and int inputs)."""
  dt = "u32" if len(b) % 4 == 0 else "u8"
  return Data(dt, tuple(int(x) for x in np.frombuffer(b, "<u4" if dt == "u32" else "u1")))
def _relpath(p: pathlib.Path, base) -> str:
  import os
  return os.path.relpath(p.resolve(), pathlib.Path(base).resolve())

