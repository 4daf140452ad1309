"""The run `hcqdsl sanitize` checks, as it grows, in memory bounded by its live part (docs/sanitize.md, "Memory").

The capture hands over each host step as it is made (a bounded Capture keeps nothing). A check lifts the live part —
the host's steps not yet dropped and the submissions not yet dropped, with the new steps — as `lift --whole` lifts
those steps of the whole run (lift/captured.py's RunState: the run's kernel-argument writes, hcq2's ring order),
with each signal's value after the dropped writes as its initial value, and checks it (`check`, one launch). What the
check reports is what `check` of the whole run reports about these steps: a problem is reported once, by the first
check in which every statement it involves has run (a statement run by an earlier check is old; a problem among old
statements only was that check's to report), deadlocks by the last check. Then check/frontier.py says what the run
can forget: the queues and the host's steps that happen before everything still to come; what stays is the next
check's live part. `unused-signal` is decided over the whole run (a signal no statement of the run waits on), from
what each check saw."""
from __future__ import annotations
import collections, re
from typing import Callable, Optional
import attrs
from ..lang.lexical import identifier
from ..lift.manifest import lift_manifest, Manifest, MQueue, RunState
from ..lang.format import format_program
from ..check import parse, check
from ..check.frontier import frontier
from ..check.unroll import WAIT, WRITE
from ..ir import Program, Submit, HostWrite, Wait, Timestamp, KERNARGS, U32_MAX
from .findings import Command, Finding
from .capture import source, VERIFY
from .canon import Canon, canon

__all__ = ["Live", "Occurrence", "Window", "coordinates", "manifest_of"]

@attrs.define
class Occurrence:
  """One problem one check found: as reported (its commands' texts from that check's program), the statements it
  involves as (run step, key), the reported one first, and the tinygrad call of the reported one."""
  finding: Finding
  events: tuple
  call: int

_AT = re.compile(r"#\s*@(\d+)")

def coordinates(prog: Program, text: str, info: dict, steps: list) -> dict:
  """Each statement's line in a lifted capture -> (run step, key): a queue's statement by its submission's step and its
  packet's dword offset in the submission (`("q", offset)`, the ring's order `("chain", "wait"|"signal")` on hcq2), a host
  statement by its first step and its place among that step's statements (`("h", n)`). The same statement has the same
  coordinates in the lift of the whole run and in a window's (`steps`: the lift's step -> the run's step). A statement
  whose line names no packet offset (NV's) is keyed by its place among its queue's statements (`("n", i)`)."""
  lines = text.splitlines()
  out: dict = {}
  for q in prog.queues:
    seg = (info.get("queues") or {}).get(q.name)
    if not seg: continue
    _, _, w, start = seg[0]
    n = 0
    for st in q.body:
      if st.span is None: continue
      ln = lines[st.span.line - 1]
      m = _AT.search(ln)
      if "the ring's order" in ln: key: tuple = ("chain", "wait" if isinstance(st, Wait) else "signal")
      else:   # by its packet's offset in the submission (AMD's statements say it), else by its place in the queue (NV)
        key, n = ("q", int(m.group(1)) - start) if m else ("n", n), n + 1
      out[st.span.line] = (steps[w], key)
  nth: dict = {}
  for k, st in enumerate(prog.host.body if prog.host is not None else ()):
    ws = (info.get("host") or [])[k] if k < len(info.get("host") or []) else []
    if st.span is None or not ws: continue
    g = steps[ws[0]]
    n = nth[g] = nth.get(g, -1) + 1
    out[st.span.line] = (g, ("h", n))
  return out

def manifest_of(cap, records: list, kernels: dict, values: Optional[dict] = None, rings: Optional[set] = None, raw: bool = False) -> tuple:
  """Records of a run's steps (a bounded Capture's, each with its own dwords and memory readings) as a manifest of
  their own, steps numbered from 0; and the run's step of each of its steps. `values`: signals' values to start from
  (their readings by the records are left out); `rings`: rings to list though no record submits to them; `raw`: the
  records as recorded (a signal's creation marked, for the lift's own rule), else without the creations the whole
  run's lift leaves out (`dropped`)."""
  values = values or {}
  rq: dict = {r: [] for r in rings or ()}
  host: list = []
  steps: list = []
  mem: list = []
  bufs: dict = {}
  sigs: dict = {}
  for e in records:
    if e.get("dropped") and not raw: continue
    w = len(host)
    if e["op"] == "submit":
      dw = rq.setdefault(e["queue"], [])
      rd = e.get("signals") or {}
      host.append({"op": "submit", "queue": e["queue"], "start": len(dw), "length": len(e["dw"]),
                   "signals": {a: v for a, v in rd.items() if a not in values}})
      dw.extend(e["dw"].tolist() if hasattr(e["dw"], "tolist") else e["dw"])
      sigs.update(dict.fromkeys(e.get("named") or rd))
    elif e["op"] == "write":
      data = e.get("hex") or b""
      host.append({"op": "write", "addr": e["addr"], "data": data, "size": e.get("size", len(data)),
                   **({"staged": True} if e.get("staged") else {})})
      if data: mem.append((e["addr"], data, w + 1))
    else:
      host.append({"op": e["op"], "addr": e["addr"], "value": e["value"], **({"init": True} if raw and e.get("init") else {})})
      sigs[e["addr"]] = None
    steps.append(e["i"])
    mem += [(a, b, w) for a, b in e.get("mem", ())]
    for a, n, d in e.get("uses", ()): bufs[a] = (n, d)
  for d in cap.devices.values():   # the device's timeline signal (now; it may not have existed when first written)
    try: tl = int(d["_dev"].timeline_signal.value_addr)
    except (AttributeError, TypeError, ValueError): continue
    if tl in cap.signals: cap.signals[tl].update(timeline=True, device=d["name"])
  signals = {}
  for a, s in cap.signals.items():
    if a not in sigs and not s.get("mailbox"): continue
    signals[a] = {"value": values.get(a, s.get("value", 0)) & U32_MAX, "name": None, "device": s.get("device"),
                  "timeline": bool(s.get("timeline")), "mailbox": bool(s.get("mailbox"))}
  ring_of = {r.name: r for r in cap.rings.values()}
  queues = [MQueue(n, ring_of[n].device, ring_of[n].target, ring_of[n].engine, dw, None, None, None, None) for n, dw in rq.items()]
  devices = [{"name": d["name"], "index": d["index"], "arch": d["arch"]} for d in sorted(cap.devices.values(), key=lambda d: d["index"])]
  buffers = [{"addr": a, "size": n, "name": None, "device": d} for a, (n, d) in sorted(bufs.items())]
  m = Manifest("<sanitize>", devices, queues, signals, buffers, [], kernels, host, 2, mem, [],
               {a for a, s in signals.items() if s["mailbox"]}, cap.path_kind or "hcq", [])
  return m, steps

class Window:
  """One check's lifted program and what maps it back to the run: the text, the parsed program, the lift's trace,
  each statement's coordinates, and the records of the steps."""
  def __init__(self, live: "Live", prog: Program, text: str, info: dict, steps: list, final: bool):
    self.live, self.prog, self.text, self.info, self.steps, self.final = live, prog, text, info, steps, final
    self.lines = text.splitlines()
    self.coord = coordinates(prog, text, info, steps)
    self.names = {n: live.whole_name[a] for a, n in (info.get("signals") or {}).items() if live.whole_name.get(a, n) != n}
    self.kernels = {k.name: k for k in prog.kernels}
    self.host_at = {st.span.line: (i, st) for i, st in enumerate(prog.host.body) if st.span is not None} if prog.host is not None else {}
    self.queue_of = {}   # line -> its queue
    for q in prog.queues:
      if q.span is not None:
        for ln in range(q.span.line, q.span.end_line + 1): self.queue_of[ln] = q

  def stmt(self, line: int) -> str:
    return self.lines[line - 1].split("#")[0].strip() if 0 < line <= len(self.lines) else ""

  def command(self, span, queue_hint: Optional[str] = None, note: str = "") -> Optional[Command]:
    """The command at a lifted statement, in tinygrad's terms (kernel names and argument shapes, the device, the user's
    stack of the step that submitted it)."""
    if span is None: return None
    live, rec = self.live, self.live.rec
    q, stmt = self.queue_of.get(span.line), self.stmt(span.line)
    at = self.coord.get(span.line)
    def stack_of(g) -> list: return [[f, ln, n, source(f, ln)] for f, ln, n in rec[g].get("stack", ())] if g in rec else []
    if q is None:
      if not stmt: return None
      _, st = self.host_at.get(span.line, (None, None))
      g = at[0] if at else None
      if isinstance(st, Submit) and queue_hint is not None:   # the submission of the queue the finding is about
        seg = (self.info.get("queues") or {}).get(queue_hint)
        if seg: g = self.steps[seg[0][2]]
      if isinstance(st, HostWrite) and st.dst.buffer.name.startswith("kargs_"):   # (lift --whole's kernel-argument blocks)
        stmt = f"write {stmt[6:].split(' = ')[0]}"
        what = (f"the host's `{stmt}`: its write of the kernel arguments of a dispatch (tinygrad's fill_kernargs, or HCQGraph's update "
                "of an input's address or a var)")
      elif isinstance(st, HostWrite):   # the host's refill of host memory: its bytes per launch are no reading matter
        stmt = f"write {stmt[6:].split(' = ')[0]}"
        start, end = st.dst.start, st.dst.end
        n = end - start if end is not None and start is not None else st.launch_inits[0].nbytes if st.launch_inits else 0
        what = f"the host's `{stmt}` (its copy of {n} bytes into host memory)"
      elif isinstance(st, Wait): what = f"the host's `{stmt}` (tinygrad waiting for the GPU: a synchronize, `.numpy()`, `.item()`)"
      else: what = f"the host's `{stmt}`"
      return Command(stmt, "host", "CPU", what + (f" ({note})" if note else ""), stack_of(g), g)
    g = at[0] if at else self.steps[(self.info.get("queues") or {}).get(q.name, [(0, 0, 0, 0)])[0][2]]
    what = stmt
    if stmt.startswith("exec "):
      kname = stmt[5:].split("(")[0]
      k, sk = self.kernels.get(kname), live.kernels().get((self.info.get("programs") or {}).get(kname, -1))
      params = []
      for i, p in enumerate(k.params if k else ()):
        if p.name == KERNARGS and i >= len((sk or {}).get("signature") or []): continue   # lift --whole's kernel-argument block
        s = (sk or {}).get("signature") or []
        s = s[i] if i < len(s) else {}
        shape = "x".join(str(x) for x in s.get("shape", [])) or "?"
        params.append(f"{p.mode} {s.get('dtype') or ''}[{shape}]" if not p.scalar else f"{s.get('name') or p.name}: {p.mode}")
      what = f"kernel {(sk or {}).get('tinygrad_name') or kname}({', '.join(params)})"
    elif stmt.startswith("copy "): what = f"copy ({stmt[5:]})"
    return Command(stmt, q.name, live.device_name(q.device.name), what + (f" ({note})" if note else ""), stack_of(g), g,
                   *self.ring_offset(g, at))

  def ring_offset(self, g: Optional[int], at) -> tuple:
    """(ring, offset in its stream) of a queue's statement, when the capture keeps the rings' streams (`--confirm`, `--keep`):
    its submission's ring and start plus the packet's offset in the submission; else (None, None)."""
    e = self.live.rec.get(g) if g is not None else None
    if not self.live.cap.retain or e is None or e.get("op") != "submit" or not at or at[1][0] != "q": return None, None
    return e["queue"], e["start"] + at[1][1]

  def finding(self, d) -> tuple:
    """(Finding, its statements' coordinates) of one diagnostic."""
    hdp = d.code == "visibility" and (d.extra or {}).get("cause") == "hdp"
    qname = (d.extra or {}).get("queue")
    rel = (d.related or ())[:1]
    first = self.command(d.span, note="reads what the host wrote, with no memory barrier (HDP flush) after it" if hdp else "")
    other = [self.command(r.span, qname, r.message.replace(" here", "") if hdp else "") for r in rel]
    cmds = [c for c in [first] + other if c is not None]
    sev = "error" if d.severity == "error" or hdp else "warning"
    events = tuple(self.coord[s.line] for s in [d.span] + [r.span for r in d.related or ()] if s is not None and s.line in self.coord)
    for c in cmds: c.text, c.what = self.renamed(c.text), self.renamed(c.what)
    return Finding(d.code, self.renamed(d.message), cmds, severity=sev), events

  def renamed(self, text: str) -> str:
    """`text` with the signals named as the lift of the whole run names them (a device's timeline is `D.timeline`
    there, but a signal `tl_D` in a check that begins with it past 0)."""
    for name, whole in self.names.items(): text = re.sub(rf"\b{re.escape(name)}\b", whole, text)
    return text

@attrs.define
class _SignalUse:
  """A signal over the whole run, for `unused-signal`: waited on somewhere, its first write by the host and by a queue."""
  waited: bool = False
  exempt: bool = False                     # named `D.timeline` by the lift of the whole run (waited on outside the program)
  host: Optional[tuple] = None             # (Finding, its statement's coordinates) of the host's first write
  queue: Optional[tuple] = None            # ... of the first queue's

class Live:
  """The live part of a run being recorded by a bounded Capture (`cap`): `add` takes each step, `check` checks the
  live part and forgets what it can; what it found is returned as Occurrences."""
  def __init__(self, cap):
    self.cap = cap
    self.rec: dict = {}        # run step -> its record (the capture's step), for the live part
    self.front: list = []      # run steps of submissions whose host step is dropped and whose queue is not (submitted first)
    self.host: list = []       # run steps of the host's steps not dropped (the new ones included), in order
    self.new = 0               # steps added since the last check
    self.new_kinds: dict = {}  # and their submissions by kind (the meter's: graph, eager)
    self.old: dict = {}        # run step -> keys of its statements an earlier check ran
    self.value: dict = {}      # signal address -> its value after the dropped writes
    self.run = RunState([])
    self.rings: dict = {}      # ring -> its submissions so far
    self.used: set = set()     # addresses an earlier step used (a signal's creation at another is its initial value)
    self.uses: dict = {}       # signal address -> _SignalUse
    self.whole_name: dict = {} # signal address -> its name in the lift of the whole run (its first check's)
    # hcq2: a ring's first submission waits on the ring's own signal for 0 (a `redundant-wait`) only when the ring is
    # submitted again (the whole run's lift chains the rings submitted more than once): held until then
    self.first_wait: dict = {}   # ring -> the Occurrence held
    self.released: list = []     # held Occurrences whose ring was submitted again
    self.checks = 0
    self.templates_hit = 0       # checks a template answered
    # the last checks: ("template" | "checked" | "verified" (HCQDSL_SANITIZE_VERIFY: a template hit checked too), the
    # tinygrad calls of its new steps (first, last), the steps it covered)
    self.log: collections.deque = collections.deque(maxlen=4096)
    self.live_max = 0            # the most steps live at once
    self.incomplete: dict = {}   # what a check could not check, in words -> how many times
    self.last_window: Optional[Window] = None
    self._kernels: dict = {}   # prog address -> the manifest's kernel entry (made once)
    self._kid: dict = {}       # id(kernel record) -> its number
    self._sid: dict = {}       # a step's structure -> its number
    self._serial = 0
    self.by_shape: dict = {}   # shape number -> what canon.py read of the last few submissions of that shape, the latest first
    self.dispatches: collections.OrderedDict = collections.OrderedDict()   # (program, kernel arguments, id of the block) -> canon.py's reading
    self.last_blocks: dict = {}
    self.templates: collections.OrderedDict = collections.OrderedDict()   # key (canon.py) -> Outcome
    self.known: Callable[[Finding], bool] = lambda f: True   # is this bug reported already (the sanitizer's Findings)?

  # ---- the steps, as they come
  def add(self, cap, e: dict) -> None:
    """A step of the run (the capture's `on_step`). The whole run's lift drops a signal's creation at an address no
    earlier step used (its initial value): decided here, once."""
    i = e["i"]
    if e["op"] == "submit":
      self.used.update(e.get("signals", ()))
      n = self.rings[e["queue"]] = self.rings.get(e["queue"], 0) + 1
      self.run.nth[i] = n
      if n > 1: self.run.chained.add(e["queue"])
      if n == 2 and (o := self.first_wait.pop(e["queue"], None)) is not None: self.released.append(o)
    elif e["op"] == "signal" and e.get("init") and e["addr"] not in self.used: e["dropped"] = True
    else: self.used.add(e["addr"])
    self.rec[i] = e
    self.host.append(i)
    self.new += 1
    if "kind" in e: self.new_kinds[e["kind"]] = self.new_kinds.get(e["kind"], 0) + 1
    if len(self.rec) > self.live_max: self.live_max = len(self.rec)

  def live_steps(self) -> int: return len(self.rec)

  # ---- naming
  def device_name(self, name: str) -> str:
    return next((d.get("tinygrad", name) for d in self.cap.devices.values() if d["name"] == name), name)

  # ---- a check
  def manifest(self, order: list) -> tuple:
    """The live part as a manifest (its steps numbered from 0), and the run's step of each of its steps."""
    return manifest_of(self.cap, [self.rec[g] for g in order], self.kernels(), self.value, set(self.run.stubs))

  def kernels(self) -> dict:
    """The programs by entry point, as a manifest has them."""
    for a, k in self.cap.kernels.items():
      ent = self._kernels.get(a)
      if ent is None or ent["_sig"] is not k["signature"] or len(ent["signature"] or ()) != len(k["signature"]):
        sig = [{"name": s.get("name"), "dtype": s.get("dtype"), "bytes": s.get("bytes"), **({"mode": s["mode"]} if "mode" in s else {}),
                **({"shape": s["shape"]} if "shape" in s else {}), **({"extent": s["extent"]} if "extent" in s else {})}
               for s in k["signature"]]
        ent = self._kernels[a] = {"name": identifier(k["name"], "k"), "params": None, "signature": sig, "code": None,
                                  "tinygrad_name": k["name"], "_sig": k["signature"]}
      elif any(s.get("mode") != x.get("mode") or s.get("extent") != x.get("extent") for s, x in zip(k["signature"], ent["signature"])):
        for s, x in zip(k["signature"], ent["signature"]):   # (modes and extents learned later)
          for key in ("mode", "extent"):
            if key in s: x[key] = s[key]
    return self._kernels

  def kernel_id(self, k: dict) -> int:
    """A number per kernel record of the capture (a window's key names a kernel by it)."""
    return self._kid.setdefault(id(k), len(self._kid))

  def old_key(self, g: int) -> tuple:
    """The keys of step g's statements an earlier check ran, sorted (made once per change)."""
    o = self.old.get(g)
    if not o: return ()
    if type(o) is not tuple: o = self.old[g] = tuple(sorted(o))
    return o

  def struct_id(self, struct: tuple) -> tuple:
    """A number per step structure (canon.py), so a window's key holds numbers, not the structures again."""
    i = self._sid.get(struct)
    if i is None:
      if len(self._sid) >= 1 << 16:   # (a run whose steps keep changing: the numbers start again, and so do the templates)
        self._sid.clear()
        self.templates.clear()
        self._serial += 1
      i = self._sid[struct] = (self._serial, len(self._sid))
    return i

  def check(self, final: bool = False) -> list:
    """Check the live part (`final`: the run is over — the waits still blocked are deadlocks, a signal nothing waited on
    is unused); returns what it found that no earlier check reported, and forgets what it can. A live part whose key
    (canon.py) is a template's is not lifted: the template's outcome is read back in its terms."""
    order = self.front + self.host
    new, self.new = self.new, 0
    if not order: return self.unused() if final else []
    cn, key = canon(self, order, final)
    t = self.templates.get(key) if key is not None else None
    calls = (min(self.rec[g].get("call", 0) for g in order[-new:]), max(self.rec[g].get("call", 0) for g in order[-new:])) if new else (0, 0)
    if t is not None and not VERIFY and (found := self.reusable(t, cn)) is not None:
      self.templates.move_to_end(key)
      self.templates_hit += 1
      self.log.append(("template", calls, len(order)))
      return self.commit(t, cn, final, own=False, found=found)
    self.log.append(("verified" if t is not None else "checked", calls, len(order)))
    out = self.outcome(order, cn, final)
    if out is None:
      self.checks += 1
      return self.unused() if final else []
    if VERIFY and t is not None: _same(t, out, cn)
    if key is not None and out.reusable:
      self.templates[key] = out
      while len(self.templates) > TEMPLATES: self.templates.popitem(last=False)
    return self.commit(out, cn, final)

  def reusable(self, t: "Outcome", cn: Canon) -> Optional[list]:
    """A template's reports read back in this window, when they count only bugs already reported (else None: a new one
    is checked, so its report quotes its own program)."""
    found = [self.rebuilt(f, cn) for f, _ in t.reports]
    return found if all(self.known(f) for f in found) else None

  def outcome(self, order: list, cn: Canon, final: bool) -> Optional["Outcome"]:
    """Lift and check the live part; what to report, hold, note and forget, in the window's canonical terms."""
    m, steps = self.manifest(order)
    if not m.host or not m.queues: return None
    self.run.steps = steps
    info: dict = {}
    prog = lift_manifest(m, None, None, info, whole=True, run=self.run)
    text = format_program(prog)
    prog = parse(text, "<sanitize>")
    box: dict = {}
    diags = check(prog, 1, keep=box)
    win = self.last_window = Window(self, prog, text, info, steps, final)
    out = Outcome([], [], [], list(info.get("left_out") or []), None)
    if (n := sum(": cannot lift (" in ln for ln in win.lines)):
      out.incomplete.append(f"{n} packet group{'s' * (n != 1)} the lift could not read (kept as `cannot lift` comments)")
    u, t = box.get("unrolled"), box.get("trace")
    ran = self.ran(win, u, t.done if t is not None else None)
    self.reported(win, diags, ran, final, out, cn)
    self.signal_uses(win, u, info, out, cn)
    if t is not None and t.clocks is not None and not final: out.forget = self.frontier(win, u, t, info, ran, cn, out)
    return out

  def ran(self, win: Window, u, done) -> set:
    """The coordinates of the statements this check's execution ran."""
    out: set = set()
    if u is None: return out
    for j, s in enumerate(u.seqs):
      n = len(s.ops) if done is None else done[j]
      for st in s.stmts[:n]:
        if st is not None and st.span is not None and (c := win.coord.get(st.span.line)) is not None: out.add(c)
    return out

  def reported(self, win: Window, diags: list, ran: set, final: bool, out: "Outcome", cn: Canon) -> None:
    """The diagnostics this check is the first to see: every statement involved ran here (a deadlock's wait: at the
    end), and one of them had not run in an earlier check."""
    old = self.old
    for d in diags:
      if d.code == "unused-signal" or (d.code == "deadlock" and not final): continue
      f, events = win.finding(d)
      if d.code != "deadlock" and not all(ev in ran for ev in events): continue
      if events and all(ev[1] in old.get(ev[0], ()) for ev in events): continue
      f, at = _positioned(f, cn), tuple((cn.pos[g], k) for g, k in events)
      g = events[0][0] if events else None
      if d.code == "redundant-wait" and events[0][1] == ("chain", "wait") and self.run.nth.get(g) == 1 and \
         self.rings.get(self.rec[g]["queue"], 0) == 1:
        out.holds.append((cn.pos[g], f, at))   # (its ring submitted once so far: the whole run's lift may not chain it)
        continue
      out.reports.append((f, at))

  def signal_uses(self, win: Window, u, info: dict, out: "Outcome", cn: Canon) -> None:
    """What this check saw of each signal's waits and of its first new writes (for `unused-signal` over the run)."""
    if u is None: return
    addr = {n: a for a, n in (info.get("signals") or {}).items()}
    seen: dict = {}   # canonical signal -> [its name here, waited, host's first write, a queue's first write]
    for sig in u.signals:
      if (a := addr.get(sig.name)) is not None and a in cn.sig_of: seen[cn.sig_of[a]] = [sig.name.replace(f"{a:x}", "{}"), False, None, None]
    for j, s in enumerate(u.seqs):
      for idx, op in enumerate(s.ops):
        if op[0] not in (WAIT, WRITE): continue
        a = addr.get(u.signals[op[1]].name)
        if a is None or (c := cn.sig_of.get(a)) is None: continue
        if op[0] == WAIT: seen[c][1] = True
        elif (st := s.stmts[idx]) is not None and type(st) is not Timestamp and st.span is not None:
          co = win.coord.get(st.span.line)
          slot = 2 if j == 0 else 3
          if co is None or co[1] in self.old.get(co[0], ()) or seen[c][slot] is not None: continue
          cmd = win.command(st.span)
          f = Finding("unused-signal", f"{u.signals[op[1]].name} is written but no queue or host statement waits on it",
                      [cmd] if cmd else [], severity="warning")
          seen[c][slot] = (_positioned(f, cn), (cn.pos[co[0]], co[1]))
    out.uses = [(c, *x) for c, x in seen.items()]

  def frontier(self, win: Window, u, t, info: dict, ran: set, cn: Canon, out: "Outcome") -> tuple:
    """What check/frontier.py says nothing still to come can be unordered with — whole queues and a prefix of the
    host's steps —, with the signals' values after the dropped writes, in the window's positions and ranks."""
    qstep = {name: win.steps[seg[0][2]] for name, seg in (info.get("queues") or {}).items()}
    hcq2 = self.cap.path_kind == "hcq2"   # (its submissions end with the ring's order: a write only the ring's next one waits for)
    fr = frontier(u, t.done, t.clocks, {j: 1 for j, s in enumerate(u.seqs) if hcq2 and s.name in qstep})
    stubs = info.get("stubs") or {}
    gone_stubs = tuple(stubs[u.seqs[j].name] for j in fr.dropped if u.seqs[j].name in stubs)
    dropped = tuple(cn.pos[qstep[u.seqs[j].name]] for j in fr.dropped if u.seqs[j].name in qstep)
    stubbed = tuple(cn.pos[qstep[u.seqs[j].name]] for j in fr.stubbed if u.seqs[j].name in qstep)
    host_stmt = {id(st): k for k, st in enumerate(win.prog.host.body)} if win.prog.host is not None else {}
    hops = u.seqs[0].stmts
    cut: Optional[int] = None   # the position of the first host step kept (None: every one goes)
    if fr.host < len(hops):
      st = hops[fr.host]
      k = host_stmt.get(id(st)) if st is not None else None
      ws = (info.get("host") or [])[k] if k is not None else None
      cut = cn.pos[win.steps[ws[0]]] if ws else len(self.front)
    addr = {n: a for a, n in (info.get("signals") or {}).items()}
    values = {}
    for sid, sig in enumerate(u.signals):
      if (a := addr.get(sig.name)) is None or (c := cn.sig_of.get(a)) is None: continue
      v = fr.values.get(sid, u.sig_init[sid])
      r = cn.rank(c, v)
      if r >= len(cn.values[c]) or cn.values[c][r] != v: out.reusable = False   # (a value the key did not see: no template)
      values[c] = (r, v)
    by_pos: dict = {}   # (what ran, per step: a later window's forget visits each step once, not each statement)
    for g, k in ran:
      if (p := cn.pos.get(g)) is not None: by_pos.setdefault(p, []).append(k)
    return (dropped, stubbed, cut, tuple((p, frozenset(ks)) for p, ks in sorted(by_pos.items())), values, gone_stubs)

  # ---- committing an outcome (the check's own, or a template's read back)
  def rebuilt(self, f: Finding, cn: Canon) -> Finding:
    """A Finding of an outcome in this window: its commands at this window's steps (their stacks)."""
    cmds = []
    for c in f.commands:
      g = cn.order[c.step] if c.step is not None and c.step < len(cn.order) else None
      e = self.rec.get(g) if g is not None else None
      stack = [[fl, ln, n, source(fl, ln)] for fl, ln, n in e.get("stack", ())] if e is not None else c.stack
      cmds.append(attrs.evolve(c, stack=stack, step=g))
    return attrs.evolve(f, commands=cmds)

  def occurrence(self, f: Finding, at: tuple, cn: Canon, rebuilt: Optional[Finding] = None) -> Occurrence:
    events = tuple((cn.order[p], k) for p, k in at)
    g = events[0][0] if events else None
    return Occurrence(rebuilt or self.rebuilt(f, cn), events, self.rec[g].get("call", 0) if g in self.rec else 0)

  def commit(self, out: "Outcome", cn: Canon, final: bool, own: bool = True, found: Optional[list] = None) -> list:
    """Report, hold, note and forget as `out` says (in this window's terms; `own`: the window's own check's outcome,
    whose values are its own, else a template's, whose values are ranks here; `found`: its reports read back already)."""
    self.checks += 1
    occs = [self.occurrence(f, at, cn, found[i] if found is not None else None) for i, (f, at) in enumerate(out.reports)]
    for pos, f, at in out.holds: self.first_wait[self.rec[cn.order[pos]]["queue"]] = self.occurrence(f, at, cn)
    occs, self.released = self.released + occs, []
    for x in out.incomplete: self.incomplete[x] = self.incomplete.get(x, 0) + 1
    for c, name, waited, host, queue in out.uses:
      a = cn.signals[c]
      self.whole_name.setdefault(a, name.replace("{}", f"{a:x}"))
      use = self.uses.get(a)
      if use is None: use = self.uses[a] = _SignalUse(exempt=name.endswith(".timeline"))
      use.waited |= waited
      if use.host is None and host is not None: use.host = (self.rebuilt(host[0], cn), (cn.order[host[1][0]], host[1][1]))
      if use.queue is None and queue is not None: use.queue = (self.rebuilt(queue[0], cn), (cn.order[queue[1][0]], queue[1][1]))
    if out.forget is not None and not final: self.forget(out.forget, cn, own)
    return occs + (self.unused() if final else [])

  def forget(self, fg: tuple, cn: Canon, own: bool = True) -> None:
    """Drop the queues and the host's prefix the frontier says can go; the signals' values after the dropped writes
    become the next check's initial values; what ran is old."""
    dropped, stubbed, cut, ran, values, gone_stubs = fg
    order = cn.order
    for r in gone_stubs: self.run.stubs.pop(r, None)
    for p in stubbed:   # dropped but for its last write (hcq2's ring order): kept as a queue of its own
      g = order[p]
      self.run.stubs[self.rec[g]["queue"]] = self.run.nth[g]
    gone = {order[p] for p in dropped + stubbed}
    host_gone = self.host if cut is None else [g for g in self.host if cn.pos[g] < cut]
    self.host = [] if cut is None else [g for g in self.host if cn.pos[g] >= cut]
    self.front = sorted(g for g in self.front + [g for g in host_gone if self.rec[g]["op"] == "submit"] if g not in gone)
    live = set(self.front) | set(self.host)
    for g in [g for g in self.rec if g not in live]:
      del self.rec[g]
      self.old.pop(g, None)
    for p, keys in ran:   # (a step's keys: a frozenset the template shares; old sets are replaced, never changed)
      if (g := order[p]) in live and not keys.issubset(o := self.old.get(g, ())): self.old[g] = set(o) | keys if o else keys
    for c, (r, v) in values.items(): self.value[cn.signals[c]] = v if own else cn.value(c, r)
    if live: self.run.forget(min(live))

  def unused(self) -> list:
    """`unused-signal` over the whole run: each signal written and never waited on, at its first write (the host's,
    else the first queue's), as the check of the whole run reports it."""
    out = []
    for use in self.uses.values():
      if use.waited or use.exempt or (first := use.host or use.queue) is None: continue
      f, c = first
      out.append(Occurrence(f, (c,), self.rec[c[0]].get("call", 0) if c[0] in self.rec else 0))
    return out

TEMPLATES = 256   # the window outcomes kept (the least recently used go first)

@attrs.define
class Outcome:
  """What one check of a window reports, holds, notes and forgets, in its canonical terms (canon.py: positions of its
  steps, its signals, the ranks of their values): what a later window with the same key commits without a check."""
  reports: list            # (Finding with its commands' `step` a position, ((position, key), ...) of its statements)
  holds: list              # (position of the submission, Finding, statements): hcq2's first chain waits, held
  uses: list               # (signal, its name here, waited, (Finding, statement) of the host's first new write, of a queue's)
  incomplete: list         # what was not checked, in words
  # (dropped, stubbed, host cut, ran: (position, frozenset of keys) per step, values: signal -> (rank, value), stub
  # rings dropped); None: nothing
  forget: Optional[tuple]
  reusable: bool = True    # False: its values are not all the key's (it is not kept as a template)

def _positioned(f: Finding, cn: Canon) -> Finding:
  """`f` with its commands' steps as positions of the window (Outcome's terms)."""
  return attrs.evolve(f, commands=[attrs.evolve(c, step=cn.pos.get(c.step) if c.step is not None else None) for c in f.commands])

def _same(t: Outcome, out: Outcome, cn: Canon) -> None:
  """(HCQDSL_SANITIZE_VERIFY) a template's outcome is what checking the window gives: the same reports and holds (codes
  and statements), signal uses, notes and what is forgotten."""
  def rep(o): return sorted((f.code, at) for f, at in o.reports), sorted((f.code, at) for _, f, at in o.holds)
  def uses(o): return sorted((c, w, h[1] if h else None, q[1] if q else None) for c, _, w, h, q in o.uses)
  def fg(o): return None if o.forget is None else o.forget[:4] + ({c: r for c, (r, _) in o.forget[4].items()}, o.forget[5])
  for what, a, b in (("reports", rep(t), rep(out)), ("signal uses", uses(t), uses(out)), ("notes", sorted(t.incomplete), sorted(out.incomplete)),
                     ("frontier", fg(t), fg(out))):
    assert a == b, f"sanitize: a template's {what} differ from the check's at steps {cn.order[:3]}..: {str(a)[:2000]} != {str(b)[:2000]}"
