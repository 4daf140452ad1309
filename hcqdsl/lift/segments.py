"""The default lift of a capture (docs/lift.md, "The default lift: every step"): the repeated launches folded and the
rest whole, in one program. The steps before the first repeated launch (compilation, uploads, a TinyJit's warm-up
calls) are launch 1's queues and host block, lifted as `--whole` lifts them; the K repeated launches (HCQGraph's)
are launches 2..K+1, lifted as `--folded-only` lifts them; the steps after the last repeated launch (the `.numpy()`)
are the last launch, whole again. Each block says its launches (`launches 1`, `launches 2..K+1`: docs/language.md).

Each part is a capture lift of its own (lift/captured.py's CaptureLift, NV's in lift/nv_capture.py) over its steps,
sharing one `Naming`: an address keeps one name in every part (a signal, an allocation), a kernel one declaration, a
ring's submissions are numbered on (the repeated launches' queues keep the names `--folded-only` gives them), and on
hcq2 a ring's order signal counts on from part to part. Declarations merge by name, the earliest part's first (its
initial contents are the run's). A listed var or rebound buffer of the repeated launches lists every launch of the
program: launch 1 repeats launch 2's entry and the last launch the one before it (no statement of those launches
reads it)."""
from __future__ import annotations
from typing import Optional
import attrs
from ..ir import Program, Buffer, Signal, Var, Host, HostWrite, Device, Exec, Copy, Write, Poll, Slice, Ref
from .image import lifted_program
from .schema import Manifest, LAUNCH_VAR
from .steps import Naming, bytes_data

__all__ = ["lift_default", "AFTER_EVERY_STEP"]

AFTER_EVERY_STEP = 1 << 62   # expects: the contents after the capture's last step (its final readings)

def lift_default(cls, m: Manifest, code_dir=None, program_dir=None, trace: Optional[dict] = None) -> Program:
  """The program of a capture: `cls` (a CaptureLift) over its repeated launches, and over the steps before and after
  them as launches of their own; without such steps, exactly the folded lift."""
  naming = Naming({d["name"] for d in m.devices} | {LAUNCH_VAR} | {q.name for q in m.queues})
  body = cls(m, code_dir, program_dir, trace, naming=naming)
  body.merged = True
  body.prepare()   # (first: the repeated launches' queues keep their names)
  pre, post = body.start > 0, body.end < len(body.ev)   # steps before the first repeated launch, after the last one
  if not pre and not post: return body.program_rest()
  parts = _parts(cls, m, code_dir, program_dir, naming, body, pre, post)
  N, base, K = parts[-1][1][1], int(pre), body.K
  lifted = {}   # id(part) -> (declarations, queues, host block)
  for part, _ in parts: lifted[id(part)] = part.lift_parts()   # (named in program order: the warm-up's names first)
  decls = _declarations([lifted[id(p)][0] for p, _ in parts], N, base, K)
  decls += [Var(n, _listed(tuple(v), N, base, K)) for v, n in body.vars.lists.items()] + [Var(LAUNCH_VAR)] * body.vars.uses_launch
  decls += list(naming.kernels.values())
  firsts = _first_writes(parts[0][0], body) if pre else []
  for part, launches in parts:
    _, queues, host = lifted[id(part)]
    if firsts and launches == (1, 1): host = host + [w for w, _ in firsts]
    decls += _blocks(part, body, queues, host, launches, N)
  decls += _expects(parts, body)
  if trace is not None:
    trace.update(launches=N, left_out=[x for part, _ in parts for x in part.left_out], **_instances(parts, body, [st for _, st in firsts]))
  return lifted_program(decls, m.file, _header(m, parts, body, N, any(type(d) is Buffer and d.per_launch for d in decls)))

def _parts(cls, m: Manifest, code_dir, program_dir, naming: Naming, body, pre: bool, post: bool) -> list:
  """[(part, its launches)]: the steps before the repeated launches (launch 1), the repeated launches, the steps after
  them (the last launch), each prepared; hcq2's rings chained over all of them."""
  keep, K, base = body.keep, body.K, int(pre)
  body.base = body.vars.base = base
  N = base + K + int(post)
  parts = []
  if pre:   # (steps the folded lift drops just before the first launch, its staged chunks, are that launch's)
    parts.append((cls(m, code_dir, program_dir, None, whole=True, steps=(0, keep[body.start - 1] + 1), naming=naming), (1, 1)))
  parts.append((body, (base + 1, base + K)))
  if post:
    parts.append((cls(m, code_dir, program_dir, None, whole=True, steps=(keep[body.end - 1] + 1, body.n_all), naming=naming,
                      base=base + K), (N, N)))
  for part, _ in parts:
    if part is not body: part.prepare()
  _chain(parts, m)
  return parts

def _blocks(part, body, queues: list, host: list, launches: tuple, N: int) -> list:
  """A part's queues and host block with its launches' clause, under a comment saying what they are."""
  clause = launches if launches != (1, N) else None
  if part is body and body.base: queues = [attrs.evolve(q, body=tuple(_shifted(st, body.base) for st in q.body)) for q in queues]
  blocks = [attrs.evolve(q, launches=clause) for q in queues] + ([Host(tuple(host), clause)] if host else [])
  if blocks: blocks[0] = attrs.evolve(blocks[0], comments=(_part_comment(part, body, launches),) + blocks[0].comments)
  return blocks

def _expects(parts: list, body) -> list:
  """Each part's expects (the contents after the capture's last step), once per buffer — but for memory the repeated
  launches hold a rebound buffer's launch memory in (tinygrad reuses an earlier call's input for a later one): a buffer
  of its own here, so its bytes at the end are the other buffer's."""
  out: dict = {}
  per_launch = _per_launch_memory(body)
  for part, _ in parts:
    addr = {nm: a for a, nm in part.static_names.items()}
    for e in part.expects(AFTER_EVERY_STEP):
      a = addr.get(e.target.buffer.name)
      if a is not None and any(lo < a + part.static[a].size and a < hi for lo, hi in per_launch): continue
      out.setdefault(e.target.buffer.name, e)
  return list(out.values())

def _header(m: Manifest, parts: list, body, N: int, listed: bool) -> list:
  """`# hcq: launches=N`, which steps each launch is, the parts' notes and what the lists' extra entries are."""
  keep, K, pre, post = body.keep, body.K, parts[0][0] is not body, parts[-1][0] is not body
  base, orig = int(pre), body.orig
  notes = list(dict.fromkeys(x for part, _ in parts for x in part.notes))
  if body.vars.lists or listed:
    extra = (["launch 1's entry repeats launch 2's"] if pre else []) + ([f"launch {N}'s repeats launch {N - 1}'s"] if post else [])
    notes.append(f"a listed var or rebound buffer of the repeated launches lists all {N} launches: {' and '.join(extra)} "
                 "(no statement of those launches reads it)")
  what = [f"launch 1: steps 1..{keep[body.start - 1] + 1} as they happened"] if pre else []
  what.append(f"launches {base + 1}..{base + K}: steps {orig(body.start) + 1}..{orig(body.end - 1) + 1}, {K} repeated launches folded")
  if post: what.append(f"launch {N}: steps {keep[body.end - 1] + 2}..{body.n_all} as they happened")
  return [f"# hcq: launches={N}", f"# lifted from {m.file} by hcqdsl lift (every step of tinygrad's {body.vendor} runtime: "
          f"{'; '.join(what)})"] + [f"# note: {x}" for x in notes]

def _instances(parts: list, body, firsts: list) -> dict:
  """Which capture steps the program's statements stand for, per launch: `instances` {queue: {launch: [its submission's
  step, the submission's first dword in the ring's stream]}} (a statement's `# @N` is its dword in launch 1's
  submission: N - start is its place in every launch's), `host_instances` [per host block: [per statement: {launch: [steps]}]]."""
  queues: dict = {}
  host: list = []
  for part, (first, last) in parts:
    P = part.P if part is body else 0
    for s in part.subs:
      queues[s.name] = {k: [part.orig(s.step + (k - first) * P), part.ev[s.step + (k - first) * P]["start"]] for k in range(first, last + 1)}
    steps = [{k: [part.orig(i + (k - first) * P) for i in st] for k in range(first, last + 1)} for st in part.host_steps]
    if part is not body and first == 1: steps += [{1: [step]} for step in firsts]   # (the first writes `_first_writes` adds)
    if steps: host.append(steps)
  return {"instances": queues, "host_instances": host}

def _first_writes(pre, body) -> list:
  """(HostWrite, the capture step it stands for): the host's writes, at the end of launch 1, of the kernel-argument
  blocks the repeated launches read with the same bytes every launch (HCQGraph's, built in the captured call: the
  folded lift takes them for initial memory) that no dispatch of launch 1 read with those bytes last — as `--whole`
  writes a graph's first (classic HCQ: `kargs_read`), so a missing HDP flush before the first launch shows."""
  if not body.kargs_read: return []
  last: dict = {}
  for (ka, _), d in sorted(pre.dispatches.items(), key=lambda x: x[1].step): last[ka] = d.blocks[0]
  out, done = [], set()
  for (ka, _), d in sorted(body.dispatches.items(), key=lambda x: x[1].step):
    if d.kargs in body.kgroups or len(set(d.blocks)) > 1 or ka in done or last.get(ka) == d.blocks[0]: continue
    done.add(ka)
    nm, off, _ = body.buf_for(d.kargs)
    out.append((HostWrite(Slice(Ref(nm), off, off + len(d.blocks[0]), True), (bytes_data(d.blocks[0]),),
                          comment="# the repeated launches' kernel arguments, written before their first launch"), body.orig(d.step)))
  return out

def _per_launch_memory(body) -> list:
  """The address ranges the repeated launches use as per-launch memory: each launch's memory of a rebound buffer, the
  host-memory buffers refilled between launches."""
  out = [(a, a + r.size) for t, r in body.rebound.items() for a in t]
  return out + [(a, a + body.static[a].size) for a in body.rewritten]

def _chain(parts: list, m: Manifest) -> None:
  """hcq2's rings submitted more than once over the program are chained in every part (lift/captured.py's `chain`: a
  signal of the ring's own keeps its order), the parts' order-signal values counting on."""
  if m.path != "hcq2": return
  total: dict = {}
  for part, (first, last) in parts:
    for r, c in part.count.items(): total[r] = total.get(r, 0) + c * (last - first + 1)
  chained = {r for r, c in total.items() if c > 1}
  for part, _ in parts:
    new = {r for r in part.count if r in chained}
    if new and not part.chained:
      part.notes.append("a ring submitted several times is one queue per submission (`comp_gpu0_2`, ...), ordered as the ring "
                        "runs them by a signal of the ring's own (`fifo_comp_gpu0`), which no packet writes")
    part.chained = new
  so_far: dict = {}
  for part, (first, last) in parts:
    part.fifo_start = dict(so_far)   # the order signal's value when the part starts
    for r in part.chained: so_far[r] = so_far.get(r, 0) + part.count[r] * (last - first + 1)

def _declarations(per_part: list, N: int, base: int, K: int) -> list:
  """The parts' devices, buffers and signals merged by name: the earliest part's (the run's initial contents), a buffer
  as big as the biggest part's, the repeated launches' rebound buffers listing every launch."""
  out: dict = {}
  for decls in per_part:
    for d in decls:
      key = (type(d), d.name)
      if key not in out:
        out[key] = _padded(d, N, base, K) if type(d) is Buffer and d.per_launch else d
      elif type(d) is Buffer and d.size > out[key].size: out[key] = attrs.evolve(out[key], size=d.size)
  order = (Device, Buffer, Signal)
  return sorted(out.values(), key=lambda d: order.index(type(d)))

def _listed(vals: tuple, N: int, base: int, K: int) -> tuple:
  """The repeated launches' K entries as the program's N launches: the first repeated before, the last after."""
  return (vals[0],) * base + vals + (vals[-1],) * (N - base - K)

def _padded(b: Buffer, N: int, base: int, K: int) -> Buffer:
  return attrs.evolve(b, launch_inits=_listed(b.launch_inits, N, base, K)) if len(b.launch_inits) == K else b

def _shifted(st, base: int):
  """A statement of the repeated launches with its `x@j` (launch j of them) as the program's launch base + j."""
  def sl(x):
    return attrs.evolve(x, launch=x.launch + base) if type(x) is Slice and x.launch is not None else x
  t = type(st)
  if t is Exec: return attrs.evolve(st, args=tuple(map(sl, st.args)))
  if t is Copy: return attrs.evolve(st, dst=sl(st.dst), src=sl(st.src))
  if t is Write: return attrs.evolve(st, dst=sl(st.dst))
  if t is Poll: return attrs.evolve(st, src=sl(st.src))
  return st

def _part_comment(part, body, launches: tuple) -> str:
  first, last = launches
  if part is body: return f"# launches {first}..{last}: the {last - first + 1} repeated launches (TinyJit replays), folded"
  what = "before the repeated launches (compilation, uploads, the first calls)" if first == 1 else "after the repeated launches (the read-back)"
  return f"# launch {first}: the steps {what}, as they happened"
