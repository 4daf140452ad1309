"""`hcqdsl sanitize --confirm`: prove or weigh each finding by running the script again on tinygrad's mock GPU with the
finding's witness order forced, and comparing what the program reads back (docs/sanitize.md, "Confirming a finding").

A race's witness (check/witness.py) names two commands: the one reported (later in the lifted program) runs to its end
before the other starts. Each is found in another run of the script by its place in what tinygrad submitted — its
ring and the offset of its first dword in that ring's stream, the lift's `# @N` (mock_order.Place) — and the script runs
twice more (rerun.py, each in a process of its own with the random seeds fixed): once with the witness's order forced
(the other command's queue held before it until the reported one has run: mock_order.Hold), once with the program's
order forced the same way (the reported command's queue held until the other has run). What the script reads back
(every tensor it reads, and every live tensor's buffers when it ends: readback.py) and its own result (its asserts) are
compared:

- `confirmed`: the two orders give different numbers (which output, how many values, the first index, both values);
- `not-observed`: the witness's order ran and every output matched (and why, when it can be told: the value the racing
  command computed is overwritten, or never read, before the program ends);
- `not-tried`: why not (the order cannot run with what tinygrad submitted, one of the two is a host step, the mock NV GPU
  runs no kernels, the run submitted different commands, ...).

A `stale-input` finding (a TinyJit replay reading an earlier call's input) is confirmed by running the script with
TinyJit's graph off (`JIT=2`: every call resolves its inputs) and comparing with a run with the graph. A `deadlock` is
confirmed by the run's own hang. The JSON of a finding carries `confirmation`: {"status", "why" or "differences", ...}."""
from __future__ import annotations
import json, os, pathlib, re, subprocess, sys, tempfile, time, types
from typing import Callable, Optional
from .readback import compare
from .confirmation import describe, STATUSES

__all__ = ["confirm", "sanitize_script", "describe", "place_of", "why_unseen", "stale_unseen", "Runs", "LIMIT", "STATUSES"]

LIMIT = 8          # races confirmed per run (each takes a run of the script, beside one shared); the others are `not-tried`
TIMEOUT = 1800     # seconds one run of the script may take

# ---------------------------------------------------------------- where a command is

def _ring(capture, name: str):
  return next((r for r in capture.rings.values() if r.name == name), None)

def place_of(capture, cmd) -> Optional[dict]:
  """The mock_order.Place (as a dict) of a finding's command: its ring's tinygrad device and queue, its dwords."""
  if cmd.ring is None or cmd.offset is None: return None
  r = _ring(capture, cmd.ring)
  if r is None or not 0 <= cmd.offset < len(r.dwords): return None
  dev = next((d for d in capture.devices.values() if d["name"] == r.device), None)
  if dev is None: return None
  from ..amd.meaning import decoder
  from ..amd.lift import group_packets
  pk = decoder(r.engine, r.target).decode(r.dwords[cmd.offset:cmd.offset + 4096])
  groups = group_packets(pk, r.engine)
  n = sum(len(p.dwords) for p in groups[0]) if groups else 1
  idx = int(r.name[4:r.name.index("_")]) if r.engine == "copy" and r.name[4:r.name.index("_")].isdigit() else 0
  return {"device": dev["tinygrad"], "engine": r.engine, "index": idx, "start": cmd.offset, "end": cmd.offset + n,
          "header": int(r.dwords[cmd.offset])}

# ---------------------------------------------------------------- running the script again

class Runs:
  """The script's runs made for confirmations (each in a process of its own), cached by what they force."""
  def __init__(self, script: pathlib.Path, fn: str, args: list, env: Optional[dict] = None, progress: Optional[Callable] = None,
               keep: Optional[pathlib.Path] = None):
    self.script, self.fn, self.args, self.keep = script, fn, args, keep
    self.env = dict(os.environ if env is None else env)
    self.env.setdefault("HCQDEV_WAIT_TIMEOUT_MS", "10000")   # the mock runs synchronously: a wait that has not passed will not
    self.progress = progress
    self.cache: dict = {}
    self.count, self.seconds = 0, 0.0

  def run(self, orders: Optional[list] = None, **env) -> dict:
    key = json.dumps([orders, env], sort_keys=True)
    if key in self.cache: return self.cache[key]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hcqdsl-confirm-") as tmp:
      spec, out = pathlib.Path(tmp) / "spec.json", pathlib.Path(tmp) / "out.json"
      spec.write_text(json.dumps({"script": str(self.script), "fn": self.fn, "args": self.args, "orders": orders or []}))
      e = dict(self.env, **env)
      here = str(pathlib.Path(__file__).resolve().parents[2])   # (hcqdsl itself, wherever the user runs from)
      e["PYTHONPATH"] = os.pathsep.join(x for x in [here] + e.get("PYTHONPATH", "").split(os.pathsep) if x)
      try:
        p = subprocess.run([sys.executable, "-m", "hcqdsl.tinygrad.rerun", str(spec), str(out)], capture_output=True, text=True,
                           timeout=TIMEOUT, env=e)
        res = json.loads(out.read_text()) if out.is_file() else \
          {"failure": f"the run ended without a result (exit {p.returncode}): {(p.stderr.strip().splitlines() or [''])[-1]}"}
      except subprocess.TimeoutExpired: res = {"failure": f"the run took more than {TIMEOUT} s"}
    self.count += 1
    self.seconds += time.perf_counter() - t0
    if self.keep is not None:   # each run's orders and what it read back, to look at (`sanitize --keep DIR`)
      try:
        self.keep.mkdir(parents=True, exist_ok=True)
        (self.keep / f"confirm_run{self.count}.json").write_text(json.dumps({"orders": orders, "env": env, "result": res}, indent=1))
      except OSError: pass
    if self.progress is not None: self.progress(f"hcqdsl sanitize --confirm: run {self.count} of the script done ({self.seconds:.1f} s)")
    self.cache[key] = res
    return res

# ---------------------------------------------------------------- verdicts

def _hung(res: dict) -> bool:
  return bool(res.get("error")) and ("Wait timeout" in res["error"] or "hang detected" in res["error"])

def _places(capture, f) -> tuple:
  """(first, then) places of a race between two queue commands, or (None, why not)."""
  a, b = f.commands[0], f.commands[1] if len(f.commands) > 1 else None
  if b is None: return None, "the finding names one command: there is no order to force"
  if "host" in (a.queue, b.queue):
    return None, ("one of the two is the host's step: the mock runs the host's steps as tinygrad's Python runs them, and "
                  "holding the host is not supported")
  first, then = place_of(capture, a), place_of(capture, b)
  if first is None or then is None: return None, "the commands' places in the rings were not recorded (a lift without offsets)"
  return (first, then), None

def _held_wrong(res: dict, name: str, k: Optional[int]) -> Optional[str]:
  """Why run `res` (`name`) cannot be compared: hcqdsl failed, it submitted other commands, order k did not run, hung."""
  if res.get("failure"): return f"the run with {name} failed in hcqdsl: {res['failure']}"
  h = res.get("hold") or {}
  if h.get("wrong"): return f"the run with {name} submitted other commands than the sanitized run ({h['wrong']})"
  if k is not None:
    o = (h.get("orders") or [{}])[k]
    if o.get("infeasible"): return f"{name} cannot run with what tinygrad submitted: {o['infeasible']}"
    if not o.get("ran"): return f"{name} did not run: the awaited command was never reached"
  if _hung(res): return f"with {name} forced tinygrad hung: {res['error']}"
  return None

def _races(runs: Runs, capture, races: list, why_dead: Callable, limit: int) -> None:
  """Each race's confirmation. The reference run forces the program's order of every race (what tinygrad computes with
  each missing order present); race k's run forces its witness's order instead and the program's for the others, so
  another race that happens on the mock anyway does not hide this one. The first `limit` races get a run of their own."""
  placed = []
  for f in races:
    pl, why = _places(capture, f)
    if pl is None: f.confirmation = {"status": "not-tried", "why": why}
    else: placed.append((f, pl))
  if not placed: return
  program = [{"held": first, "until": then} for _, (first, then) in placed]
  ref = runs.run(program)
  if (bad := _held_wrong(ref, "the program's order of every race", None)) is not None:
    for f, _ in placed: f.confirmation = {"status": "not-tried", "why": bad}
    return
  for k, (f, (first, then)) in enumerate(placed):
    if k >= limit:
      f.confirmation = {"status": "not-tried", "why": f"--confirm tries the first {limit} races (a run of the script each)"}
      continue
    a, b = f.commands[0], f.commands[1]
    witness = runs.run(program[:k] + [{"held": then, "until": first}] + program[k + 1:])
    how = f"{b.queue}'s `{b.text}` held until {a.queue}'s `{a.text}` had run"
    if (bad := _held_wrong(witness, "the witness's order", k)) is not None:
      f.confirmation = {"status": "not-tried", "why": bad}
      continue
    diffs = [d.to_json() for d in compare(witness, ref)]
    if diffs or witness.get("error") != ref.get("error"):
      f.confirmation = {"status": "confirmed", "how": how, "differences": diffs, "got_as": "in the witness's order",
                        "want_as": "in the program's order", "error": witness.get("error") if witness.get("error") != ref.get("error") else None}
      continue
    f.confirmation = {"status": "not-observed", "how": how}
    if (why := why_dead(f)) is not None: f.confirmation["why"] = why

def _stale(runs: Runs, why_dead: Callable) -> dict:
  graph, plain = runs.run(), runs.run(JIT="2")
  for res, name in ((graph, "the run with TinyJit's graph"), (plain, "the run with the graph off (JIT=2)")):
    if res.get("failure"): return {"status": "not-tried", "why": f"{name} failed in hcqdsl: {res['failure']}"}
  diffs = [d.to_json() for d in compare(graph, plain)]
  how = "the script ran with TinyJit's graph and with it off (JIT=2, every call resolves its inputs)"
  if diffs or graph.get("error") != plain.get("error"):
    return {"status": "confirmed", "how": how, "differences": diffs, "got_as": "with the graph", "want_as": "with the graph off",
            "error": graph.get("error") if graph.get("error") != plain.get("error") else None}
  out = {"status": "not-observed", "how": how}
  if (why := why_dead()) is not None: out["why"] = why
  return out

_NOT_TRIED = {
  "visibility": "tinygrad's mock GPU has no HDP or caches: a missing memory barrier cannot change what it computes there",
  "signal-race": "no witness order is forced for a signal written twice without order (only races and deadlocks have witnesses)",
  "non-monotonic": "no witness order is forced for a signal moving backwards (only races and deadlocks have witnesses)",
}

def _statement(s, c):
  """The lifted statement of finding command `c` in the sanitizer's last checked program (found by its `# @N`)."""
  if c.offset is None or c.ring is None or s.program is None or s.text is None: return None
  lines = s.text.splitlines()
  # (the ring's submissions are its queues in the whole lift: `comp_gpu0`, `comp_gpu0_2`, ...)
  named = [q for q in s.program.queues if q.name == c.queue]
  for q in named + [q for q in s.program.queues if q.name != c.queue and (q.name == c.ring or q.name.startswith(c.ring + "_"))]:
    st = next((st for st in q.body if st.span is not None and f"@{c.offset}" in lines[st.span.line - 1].split("#", 1)[-1].split()), None)
    if st is not None: return st
  return None

def _touches(st, kernels: dict, sizes: dict) -> list:
  """(buffer, lo, hi, writes) of each memory access of an exec or copy."""
  from ..ir import Exec, Copy, Slice
  if isinstance(st, Copy):
    return [(x.buffer.name, *x.bounds(sizes.get(x.buffer.name, 0)), w) for x, w in ((st.src, False), (st.dst, True))]
  if isinstance(st, Exec) and (k := kernels.get(st.kernel.name)) is not None:
    return [(a.buffer.name, *a.bounds(sizes.get(a.buffer.name, 0)), p.writes) for a, p in zip(st.args, k.params)
            if isinstance(a, Slice) and not p.scalar]
  return []

def _program_index(s) -> tuple:
  """(kernels, buffer sizes, statement -> its queue's name, statement -> its order key) of the sanitizer's program: the
  order key is its queue's submission (the host's Submit order), then its line."""
  from ..ir import Submit
  prog = s.program
  kernels, sizes = {k.name: k for k in prog.kernels}, {b.name: b.size for b in prog.buffers}
  order = {r.name: i for i, st in enumerate(prog.host.body) if isinstance(st, Submit) for r in st.queues}
  queue_of = {id(st): q.name for q in prog.queues for st in q.body}
  return kernels, sizes, queue_of, lambda st: (order.get(queue_of.get(id(st)), -1), st.span.line)

def _unread(s, reader, what: str) -> Optional[str]:
  """Why what `reader` (a lifted statement) writes cannot show: a later command overwrites it before any reads it, or
  none reads it (None: one reads it)."""
  kernels, sizes, queue_of, key = _program_index(s)
  outs = [(b, lo, hi) for b, lo, hi, w in _touches(reader, kernels, sizes) if w]
  if not outs: return None
  later = sorted((st for q in s.program.queues for st in q.body if st.span is not None and key(st) > key(reader)), key=key)
  ranges = ", ".join(f"{b}[{lo}:{hi}]" for b, lo, hi in outs)
  for st in later:
    for b, lo, hi, w in _touches(st, kernels, sizes):
      if any(b == ob and lo < ohi and olo < hi for ob, olo, ohi in outs):
        if not w: return None
        return (f"what {what} wrote ({ranges}) is overwritten by {queue_of.get(id(st))}'s "
                f"`{s.text.splitlines()[st.span.line - 1].split('#')[0].strip()}` before anything reads it")
  return f"nothing submitted after {what} reads what it wrote ({ranges}): the program never reads it back"

def why_unseen(s, f) -> Optional[str]:
  """Why a race's value could not show, read off the lifted program: what the racing reader wrote is overwritten before
  any later command reads it, or nothing submitted after it reads it (None: it is read; the reason is elsewhere)."""
  sts = [_statement(s, c) for c in f.commands[:2]]
  if any(st is None for st in sts) or s.program is None or s.program.host is None: return None
  kernels, sizes, queue_of, _ = _program_index(s)
  def overlap(x, y) -> bool: return x[0] == y[0] and x[1] < y[2] and y[1] < x[2]
  # the reader: the command reading what the other writes
  reader = next((st for st, other in ((sts[0], sts[1]), (sts[1], sts[0])) for r in _touches(st, kernels, sizes) if not r[3]
                 for w in _touches(other, kernels, sizes) if w[3] and overlap(r, w)), None)
  return None if reader is None else _unread(s, reader, f"{queue_of.get(id(reader))}'s racing command")

def stale_unseen(s, f) -> Optional[str]:
  """Why a stale input read could not show: every replay's command that reads the earlier call's input (in the run as
  it happened: a command submitted from the second graph call on that reads that call's input memory) writes what
  nothing reads (None: one is read, or the commands cannot be told)."""
  m = re.search(r"\bin_([0-9a-f]+)@1\b", f.message)
  names = getattr(s, "names", None)
  if m is None or s.program is None or s.program.host is None or names is None or len(names.graph_windows) < 2: return None
  buf = f"b_{m.group(1)}"
  start = names.graph_windows[1][0]
  kernels, sizes, queue_of, _ = _program_index(s)
  lines = s.text.splitlines()
  readers = []
  for q in s.program.queues:
    for st in q.body:
      if st.span is None or not any(b == buf and not w for b, _, _, w in _touches(st, kernels, sizes)): continue
      at = re.search(r"#\s*@(\d+)", lines[st.span.line - 1])
      ring = re.sub(r"_\d+$", "", q.name)
      step = names.step_of(types.SimpleNamespace(ring=ring, offset=int(at.group(1)))) if at else None
      if step is not None and step >= start: readers.append(st)
  whys = [_unread(s, st, f"{queue_of.get(id(st))}'s `{lines[st.span.line - 1].split('#')[0].strip()}` (it reads the earlier input)")
          for st in readers]
  if not readers or any(w is None for w in whys): return None
  return f"{whys[0]}" + (f" (and the same for the {len(readers) - 1} later replays)" if len(readers) > 1 else "")

def whole_run(s) -> tuple:
  """(program, text): the lift of the whole run a retaining Sanitizer captured (`lift --whole` of its capture.json),
  where each finding's command is found by its ring and offset."""
  from ..lift.manifest import load_manifest, lift_manifest
  from ..lang.format import format_program
  from ..check import parse
  text = format_program(lift_manifest(load_manifest(s.capture.manifest(), "<sanitize>"), None, None, {}, whole=True))
  return parse(text, "<captured>"), text

def confirm(s, script, fn: str = "", args: Optional[list] = None, env: Optional[dict] = None, progress: Optional[Callable] = None,
            limit: int = LIMIT, why_dead: Optional[Callable] = None, keep=None) -> Runs:
  """Set `confirmation` on each of Sanitizer `s`'s findings by running `script` (`fn`, `args`: as sanitize ran it) again
  on the mock GPU (module docstring). `why_dead(finding)`: why a race's value cannot be seen (None: unknown). `keep`: a
  directory each run's orders and what it read back are written to (confirm_runN.json)."""
  runs = Runs(pathlib.Path(script), fn, list(args or []), env, progress, pathlib.Path(keep) if keep is not None else None)
  if s.capture.retain: s.program, s.text = whole_run(s)   # (what the findings' rings and offsets are in)
  archs = [str(d["arch"]) for d in s.capture.devices.values()]
  nv = bool(archs) and all(a.startswith("sm") for a in archs)
  races: list = []
  for f in s.findings:
    if nv:
      f.confirmation = {"status": "not-tried", "why": "tinygrad's mock NV GPU runs no kernels: an order forced there changes no "
                                                      "number (its queues, semaphores and copies are real: the race can be ordered, not seen)"}
    elif f.code == "stale-input": f.confirmation = _stale(runs, lambda: stale_unseen(s, f))
    elif f.code == "deadlock":
      f.confirmation = ({"status": "confirmed", "how": "the run hung", "differences": [], "error": s.hang.message} if s.hang is not None else
                        {"status": "not-tried", "why": "the run did not hang; no order is forced for a deadlock (check finds the wait "
                                                       "nothing can release in every order)"})
    elif f.code == "race": races.append(f)
    else: f.confirmation = {"status": "not-tried", "why": _NOT_TRIED.get(f.code, f"no order is forced for `{f.code}`")}
  _races(runs, s.capture, races, why_dead or (lambda f: why_unseen(s, f)), limit)
  return runs

def sanitize_script(script, fn: str = "", args: Optional[list] = None, confirm_findings: bool = True, keep=None, **kw):
  """`hcqdsl sanitize [--confirm] SCRIPT.py[:FN] ARGS` as an API: the script run under a Sanitizer (`kw` go to it), then,
  with `confirm_findings`, each finding confirmed (`confirm`). Returns (the Sanitizer, the script's exit code, its error
  line or None, the confirmation runs or None)."""
  from .script import run_script
  from .sanitize import Sanitizer
  s = Sanitizer(keep=keep, retain=confirm_findings, **kw)
  rc, err = run_script(pathlib.Path(script), fn, list(args or []), s)
  runs = confirm(s, script, fn, args, keep=keep) if confirm_findings and s.findings and s.failure is None else None
  return s, rc, err, runs
