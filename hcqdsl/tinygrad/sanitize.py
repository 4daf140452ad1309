"""`hcqdsl.sanitize()` / `hcqdsl sanitize SCRIPT.py[:FN]`: run a tinygrad program under capture (docs/lift.md) with
the user's call stack of every submission recorded, lift what tinygrad's AMD or NV runtime submitted to the program it ran
— the run as it happened, every step in one launch, nothing folded away —, check it, and report each race and
deadlock in tinygrad's terms — kernel names and argument shapes, the tinygrad device and queue, and the user's Python
line (and whole stack) where each of the two commands was enqueued — the way PyTorch's CUDA sanitizer
(torch.cuda._sanitizer) reports a stream race with both stack traces. Findings are reported whatever the script did:
when it failed (its own error follows the findings) and when tinygrad timed out waiting for the GPU (a `hang`: the
wait that never completed, and what the check says of it). docs/sanitize.md."""
from __future__ import annotations
import json, pathlib, re, time
from typing import Optional
import attrs
from .capture import Capture, user_frames
from .memnames import MemoryNames
from ..lift.manifest import load_manifest, lift_manifest
from ..lang.format import format_program
from ..check import parse, check
from ..ir import Program, Submit, HostWrite, Wait, KERNARGS, vendor_of

__all__ = ["Sanitizer", "SanitizerError", "Finding", "Command", "Hang", "sanitize", "hang_of", "advice", "ADVICE"]

@attrs.define
class Command:
  """One of the two commands of a finding: the lifted statement and what tinygrad did there."""
  text: str            # the lifted statement, e.g. `exec E_4_4(b_7f.., in_7f..)`
  queue: str           # the lifted queue (ring and submission), e.g. comp_gpu0
  device: str          # tinygrad's device name, e.g. AMD:1
  what: str            # in tinygrad's terms: kernel name with argument modes and shapes, or a copy
  stack: list          # the user's frames at the submission, outermost first: [file, line, function, source]
  ring: Optional[str] = None     # the capture's ring it was submitted to (comp_gpu0), and its first dword's offset in
  offset: Optional[int] = None   # that ring's stream (the lift's `# @N`): where `--confirm` finds it in another run
  def where(self) -> str:
    return f"{self.stack[-1][0]}:{self.stack[-1][1]}" if self.stack else "(no user frame: submitted by tinygrad itself)"

@attrs.define
class Finding:
  code: str            # race, deadlock, signal-race, ... (hcqdsl.diagnostics.CODES)
  message: str         # check's message on the lifted program
  commands: list       # of Command: the one reported and the other one involved (when there is one)
  confirmation: Optional[dict] = None   # `--confirm`'s verdict (tinygrad/confirm.py): {"status": confirmed | not-observed | not-tried, ...}
  memory: list = attrs.field(factory=list)   # [{"name", "what"}]: the memory it names, in tinygrad's terms (tinygrad/memnames.py)
  what_to_do: Optional[str] = None           # whose code should build the missing order, for this finding
  def format(self) -> str:
    out = [f"hcqdsl sanitize: {self.code}: {self.message}"]
    for i, c in enumerate(self.commands):
      out.append(f"  {'the first' if i == 0 else 'the other'} command: {c.what} on {c.device} (queue {c.queue})")
      out.append(f"    enqueued at {c.where()}" + (f" in {c.stack[-1][2]}: {c.stack[-1][3]}" if c.stack and c.stack[-1][3] else ""))
      if len(c.stack) > 1:
        out.append("    stack (most recent call last):")
        out += [f"      {f[0]}:{f[1]} in {f[2]}" + (f": {f[3]}" if f[3] else "") for f in c.stack]
      out.append(f"    lifted as `{c.text}`")
    out += [f"  memory: {m['name']} is {m['what']}" for m in self.memory]
    if self.what_to_do: out.append(f"  what to do: {self.what_to_do}")
    if self.confirmation is not None:
      from .confirmation import describe
      out += describe(self.confirmation)
    return "\n".join(out)
  def to_json(self) -> dict: return attrs.asdict(self)

# tinygrad's words when a wait for the GPU gives up (HCQSignal.wait, hcq2's _wait_signal -> on_device_hang)
_HANG = re.compile(r"Wait timeout|hang detected", re.I)

def hang_of(e: Optional[BaseException]) -> Optional[BaseException]:
  """The exception in `e`'s chain that is tinygrad giving up on a wait for the GPU (a deadlock, or a GPU that is too
  slow), or None. (ops_amd's on_device_hang raises its own RuntimeError while handling the wait's timeout.)"""
  seen = set()
  while e is not None and id(e) not in seen:
    if isinstance(e, RuntimeError) and _HANG.search(str(e)): return e
    seen.add(id(e))
    e = e.__cause__ or e.__context__
  return None

@attrs.define
class Hang:
  """tinygrad timed out waiting for the GPU: its message and the user's frames of the wait."""
  message: str
  stack: list
  def where(self) -> str: return f"{self.stack[-1][0]}:{self.stack[-1][1]}" if self.stack else "(no user frame)"

# What to do about a finding in code tinygrad generated: the user wrote neither command; these name the part of
# tinygrad that orders them (`hcqdsl sanitize --explain CODE`, and once per code under a report's findings)
ADVICE = {
  "race": ("Both commands were generated by tinygrad, not written by you: the queue that should wait for the other is "
           "built by tinygrad's HCQGraph (runtime/graph/hcq.py: `_resolve_deps` and the waits it adds per queue) for a TinyJit "
           "replay, by the eager path (HCQProgram.__call__ and the allocator's copies, each waiting on the device's timeline), "
           "or by hcq2's planner (runtime/support/hcq2.py: `_build_wait_ins`) with HCQ2=1. Your script is fine as long as it "
           "reads results through tinygrad (`.numpy()`, `.item()`); report the two commands and their stacks to tinygrad."),
  "deadlock": ("A wait nothing can release: tinygrad's host (a synchronize, `.numpy()`) or a queue tinygrad built waits for a "
               "signal value no submitted command writes. With a hang, this is why tinygrad timed out. The waits and signals are "
               "tinygrad's (HCQGraph's kickoff and timeline signals, hcq2's batch signals): report it with the stack of the wait."),
  "signal-race": ("Two writes of one signal with no order between them, in tinygrad's queues: which value a waiter sees depends "
                  "on timing. The signals are tinygrad's (HCQGraph's per-queue signals, the device timeline): report it to tinygrad."),
  "non-monotonic": ("A timeline signal tinygrad's queues can move backwards (a later write of a smaller value): a waiter may pass "
                    "too early or never. tinygrad's graph resets its signals between launches; report the two writes to tinygrad."),
  "visibility": ("A kernel reads memory the host wrote (tinygrad's kernel arguments, or an input it copied in) with no memory "
                 "barrier (the HDP flush) between the write and the dispatch: tinygrad's rule is a `memory_barrier()` after a "
                 "direct write to VRAM (HCQProgram.__call__ and HCQGraph's compute queues open with one)."),
  "stale-input": ("A TinyJit replay reads an earlier call's input memory instead of this call's: tinygrad's JIT kept an address "
                  "it should have replaced (docs/findings/stale-jit-copy.md). Until tinygrad fixes it, `.contiguous()` the input "
                  "before the view that the JIT copies."),
}

def advice(code: str) -> str:
  """`hcqdsl sanitize --explain CODE`: what a finding in tinygrad's generated commands means and whose it is."""
  return ADVICE.get(code, f"`{code}`: see `hcqdsl check --explain {code}` (the lifted program is tinygrad's, not yours).")

def ring_at(host: list, step: Optional[int], at) -> tuple:
  """(ring, offset) of a lifted command: the capture's ring its submission (host step `step`) went to, and its `# @N`."""
  ring = host[step].get("queue") if step is not None and step < len(host) and host[step].get("op") == "submit" else None
  return ring, int(at.group(1)) if at else None

class SanitizerError(RuntimeError):
  """Raised (with `raise_on_error=True`) out of the tinygrad call that enqueued work with an error, so the traceback
  ends at the user's line."""

class Sanitizer:
  """`with hcqdsl.sanitize() as s: ...` records what tinygrad submits inside the block and checks it as the program
  runs. The lifted program is the run as it happened (every submission, host wait and signal write in one launch,
  `hcqdsl lift --whole`): what `capture` + `lift --whole` + `check` say of the same run. Checks are made when one of
  tinygrad's calls that submit returns (a realize, a TinyJit call: `run_linear`) once the submissions have doubled
  since the last check (so all checks together cost at most about twice one check of the whole run), at every such
  call with `every_call=True` (and with `raise_on_error=True`), and once more when the block ends — also when it ends
  with an exception: a script that fails, or tinygrad timing out on a wait for the GPU (`s.hang`), still gets its
  findings. `s.findings` holds the errors and the host writes a kernel may read stale (`visibility` through the HDP:
  a dropped `memory_barrier`), `s.warnings` the rest, `s.incomplete` what was captured but not checked (packets the
  lift could not read, dispatches whose arguments were not recorded), `s.ok` whether there were no findings.
  `raise_on_error`: raise SanitizerError with the report from the call that enqueued the first error. `progress`: a
  callable given a one-line status after each check (the CLI prints it on stderr on long runs). `keep`: a directory
  the lifted program of the last check is written to (`sanitized.hcq`), so the lines a finding quotes can be read."""
  def __init__(self, raise_on_error: bool = False, every_call: bool = False, progress=None, keep=None):
    self.raise_on_error, self.every_call = raise_on_error, every_call or raise_on_error
    self.progress, self.keep = progress, (pathlib.Path(keep) if keep is not None else None)
    self.capture = Capture(contents=False, stacks=True)
    self.names = MemoryNames(self.capture)   # what each buffer is to tinygrad (tinygrad/memnames.py)
    self.findings: list = []
    self.warnings: list = []
    self.incomplete: list = []   # what was captured and not checked, in words
    self.program: Optional[Program] = None
    self.text: Optional[str] = None
    self.kept: Optional[pathlib.Path] = None
    self.checked = False
    self.checks = 0              # how many times the capture was lifted and checked
    self.checked_submissions = 0  # how many submissions the last check covered
    self.detected_at: list = []  # the user's frames of the call after which the first findings were seen
    self.hang: Optional[Hang] = None
    self.error: Optional[BaseException] = None     # the exception the block ended with (the script's own failure)
    self.failure: Optional[BaseException] = None   # hcqdsl's own failure in a check made while the program ran
    self._saved: list = []
    self._depth, self._next = 0, 1
    self._t0 = time.perf_counter()

  def __enter__(self) -> "Sanitizer":
    self.capture.__enter__()
    try: self._install()
    except Exception:
      self.capture.__exit__(None, None, None)
      raise
    return self

  def __exit__(self, *exc):
    self._restore()
    self.capture.__exit__(*exc)
    if exc[1] is not None and not isinstance(exc[1], SanitizerError):
      self.error = exc[1]
      if (h := hang_of(exc[1])) is not None: self.hang = Hang(str(h).strip().splitlines()[0], self._frames_of(exc[2]))
    if self.failure is not None and exc[0] is None: raise self.failure
    if self.failure is None and self.capture.submissions() and not isinstance(exc[1], (SanitizerError, KeyboardInterrupt)):
      try:
        if self.checked_submissions != self.capture.submissions(): self.run_check()
        if not self.findings: self.check_inputs()
      except Exception as e:
        if exc[0] is None: raise
        self.failure = e
    self.names.annotate(self.findings)
    if exc[0] is None and self.raise_on_error and self.findings and not self.detected_at: raise SanitizerError(self.report())
    return False

  def _frames_of(self, tb) -> list:
    """The user's frames of a traceback, outermost first (as user_frames gives them for the stack)."""
    import traceback
    stack = [(f.filename, f.lineno, f.name, f.line or "") for f in traceback.extract_tb(tb)]
    return [list(f) for f in user_frames(self.capture.skipped_dirs(), stack)]

  @property
  def ok(self) -> bool: return self.checked and not self.findings and self.hang is None

  # ---- checking as the program runs
  def _install(self) -> None:
    """Wrap tinygrad's `run_linear` (every realize and TinyJit call goes through it; jit.py and tensor.py hold their own
    references) so the capture is checked when the outermost call returns."""
    from tinygrad.engine import realize, jit
    import tinygrad.tensor as tensor
    self.names.install()
    orig = realize.run_linear
    def run_linear(*a, **kw):
      self._depth += 1
      try: ret = orig(*a, **kw)
      finally: self._depth -= 1
      if self._depth == 0: self._checkpoint()
      return ret
    setattr(run_linear, "__wrapped__", orig)
    for mod in (realize, jit, tensor):
      if getattr(mod, "run_linear", None) is orig:
        self._saved.append((mod, orig))
        setattr(mod, "run_linear", run_linear)   # tinygrad modules hold their own references

  def _restore(self) -> None:
    for mod, orig in reversed(self._saved): mod.run_linear = orig
    self._saved.clear()
    self.names.restore()

  def _checkpoint(self) -> None:
    n = self.capture.submissions()
    if self.findings or self.failure is not None or n == self.checked_submissions: return
    if not self.every_call and n < self._next: return
    self._next = 2 * n   # checks at doubling counts: their total cost is at most about twice the last one's
    try: self.run_check()
    except Exception as e:  # hcqdsl's own failure: reported as hcqdsl's when the block ends, never as the user's line
      self.failure = e
      return
    if self.findings:
      self.detected_at = [list(f) for f in user_frames(self.capture.skipped_dirs())]
      if self.raise_on_error:
        self.names.annotate(self.findings)
        raise SanitizerError(self.report())

  def vendors(self) -> str:
    """AMD, NV or `AMD and NV`: whose queues were submitted to (the devices' architectures)."""
    vs = sorted({vendor_of(d["arch"]) for d in self.capture.devices.values()}) or ["AMD"]
    return " and ".join(vs)

  def run_check(self) -> list:
    man = self.capture.manifest()
    m = load_manifest(man, "<sanitize>")
    info: dict = {}
    prog = lift_manifest(m, None, None, info, whole=True)
    text = format_program(prog)
    self.text = text
    self.program = prog = parse(text, "<captured>")
    diags = check(prog, 1)
    self.checks += 1
    self.checked_submissions = self.capture.submissions()
    unlifted = sum(": cannot lift (" in ln for ln in text.splitlines())
    self.incomplete = list(info.get("left_out") or []) + ([f"{unlifted} packet group{'s' * (unlifted != 1)} the lift could not read "
                                                          "(kept as `cannot lift` comments)"] if unlifted else [])
    devname = {d["name"]: d.get("tinygrad", d["name"]) for d in man["devices"]}
    host = man["host"]
    kernels = {k.name: k for k in prog.kernels}
    sigs = {k["name"]: k for k in man["kernels"]}
    lines = text.splitlines()
    host_at = {st.span.line: (i, st) for i, st in enumerate(prog.host.body)} if prog.host is not None else {}
    def stack_of(step) -> list: return [list(f) for f in host[step].get("stack", [])] if step is not None and step < len(host) else []
    def command(span, queue_hint: Optional[str] = None, note: str = "") -> Optional[Command]:
      if span is None: return None
      q = next((q for q in prog.queues if q.span and q.span.line <= span.line <= q.span.end_line), None)
      stmt = lines[span.line - 1].split("#")[0].strip() if 0 < span.line <= len(lines) else ""
      if q is None:
        if not stmt: return None
        i, st = host_at.get(span.line, (None, None))
        steps = (info.get("host") or [])[i] if i is not None and i < len(info.get("host") or []) else []
        step = steps[0] if steps else None
        if isinstance(st, Submit) and queue_hint is not None:  # the submission of the queue the finding is about
          step = next((s for r, s in zip(st.queues, steps) if r.name == queue_hint), step)
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
        return Command(stmt, "host", "CPU", what + (f" ({note})" if note else ""), stack_of(step))
      segs = info.get("queues", {}).get(q.name) or []
      at = re.search(r"#\s*@(\d+)", lines[span.line - 1]) if 0 < span.line <= len(lines) else None
      step = next((g[2] for g in segs if at and g[3] <= int(at.group(1)) < g[3] + g[1] - g[0]), segs[0][2] if segs else None)
      what = stmt
      if stmt.startswith("exec "):
        kname = stmt[5:].split("(")[0]
        k, sk = kernels.get(kname), sigs.get(kname)
        params = []
        for i, p in enumerate(k.params if k else ()):
          if p.name == KERNARGS and i >= len((sk or {}).get("params", [])): continue   # lift --whole's kernel-argument block
          s = (sk or {}).get("params", [])
          s = s[i] if i < len(s) else {}
          shape = "x".join(str(x) for x in s.get("shape", [])) or "?"
          params.append(f"{p.mode} {s.get('dtype') or ''}[{shape}]" if not p.scalar else f"{s.get('name') or p.name}: {p.mode}")
        what = f"kernel {(sk or {}).get('tinygrad_name') or kname}({', '.join(params)})"
      elif stmt.startswith("copy "): what = f"copy ({stmt[5:]})"
      return Command(stmt, q.name, devname.get(q.device.name, q.device.name), what + (f" ({note})" if note else ""), stack_of(step),
                     *ring_at(host, step, at))
    findings, warnings = [], []
    for d in diags:
      hdp = d.code == "visibility" and (d.extra or {}).get("cause") == "hdp"
      if d.severity != "error" and not hdp:
        warnings.append(d)
        continue
      qname = (d.extra or {}).get("queue")
      rel = (d.related or ())[:1]
      first = command(d.span, note="reads what the host wrote, with no memory barrier (HDP flush) after it" if hdp else "")
      other = [command(r.span, qname, r.message.replace(" here", "") if hdp else "") for r in rel]
      cmds = [c for c in [first] + other if c is not None]
      findings.append(Finding(d.code, d.message, cmds))
    self.findings, self.warnings, self.checked = findings, warnings, True
    if self.keep is not None: self._keep(self.keep, text, man)
    if self.progress is not None:
      self.progress(f"hcqdsl sanitize: {self.checked_submissions} submissions seen, {self.checks} check{'s' * (self.checks != 1)} made, "
                    f"{len(findings)} finding{'s' * (len(findings) != 1)} ({time.perf_counter() - self._t0:.1f} s)")
    return self.findings

  def check_inputs(self) -> list:
    """A TinyJit replay reading an earlier call's input (`stale-input`, docs/findings/stale-jit-copy.md) is no race of
    the run as it happened: it shows only across launches, so the capture is also lifted with its launches folded
    (HCQGraph's calls, their inputs) and checked for that one code; its findings join the run's."""
    man = self.capture.manifest()
    if not man.get("graph_calls"): return []
    m = load_manifest(man, "<sanitize>")
    info: dict = {}
    prog = lift_manifest(m, None, None, info)
    text = format_program(prog)
    folded = parse(text, "<captured, launches folded>")
    found = [d for d in check(folded, info.get("launches", 1)) if d.code == "stale-input"]
    lines = text.splitlines()
    host = man["host"]
    for d in found:
      q = next((q for q in folded.queues if d.span and q.span and q.span.line <= d.span.line <= q.span.end_line), None)
      stmt = lines[d.span.line - 1].split("#")[0].strip() if d.span and 0 < d.span.line <= len(lines) else ""
      segs = (info.get("queues") or {}).get(q.name) if q is not None else None
      step = segs[0][2] if segs else None
      stack = [list(f) for f in host[step].get("stack", [])] if step is not None and step < len(host) else []
      self.findings.append(Finding(d.code, d.message, [Command(stmt, q.name if q else "?", q.device.name if q else "?",
                                                               f"copy ({stmt[5:]})" if stmt.startswith("copy ") else stmt, stack)]))
    return found

  def _keep(self, keep: pathlib.Path, text: str, man: dict) -> None:
    """DIR/sanitized.hcq (the program checked) and DIR/capture.json (the run's capture: `hcqdsl lift --whole` of it
    gives the same program, so `check` can be rerun on exactly this run)."""
    try:
      keep.mkdir(parents=True, exist_ok=True)
      (p := keep / "sanitized.hcq").write_text(text)
      (keep / "capture.json").write_text(json.dumps(man, indent=1) + "\n")
      self.kept = p
    except OSError as e: self.incomplete.append(f"the lifted program could not be written to {keep}: {e.strerror or e}")

  def summary(self) -> str:
    """The last line: the verdict, the counts, and what was left unchecked."""
    n, e, w = self.capture.submissions(), len(self.findings), len(self.warnings)
    verdict = "failed" if self.findings or self.hang else "ok"
    out = (f"{verdict}: {e} error{'s' * (e != 1)}, {w} warning{'s' * (w != 1)} in {n} submission{'s' * (n != 1)} "
           f"of tinygrad's {self.vendors()} runtime"
           f" ({self.checks} check{'s' * (self.checks != 1)})")
    if self.incomplete: out += f"; NOT CHECKED: {'; '.join(self.incomplete)}"
    if (c := [f.confirmation["status"] for f in self.findings if f.confirmation]):   # (`--confirm`: tinygrad/confirm.py)
      out += "; --confirm: " + ", ".join(f"{c.count(k)} {k}" for k in dict.fromkeys(c))
    return out

  def report(self) -> str:
    if not self.checked and self.hang is None: return "hcqdsl sanitize: nothing checked (no AMD or NV queue was submitted to)"
    out = [f.format() for f in self.findings]
    if self.hang is not None:
      dl = any(f.code == "deadlock" for f in self.findings)
      out.append(f"hcqdsl sanitize: hang: tinygrad gave up waiting for the GPU at {self.hang.where()}: {self.hang.message}\n  " +
                 ("the check of what was submitted up to the hang finds the deadlock above: nothing can release that wait" if dl else
                  "the check of what was submitted up to the hang finds no deadlock: every wait can be released, so the GPU (or the mock) "
                  "was too slow for tinygrad's timeout (HCQDEV_WAIT_TIMEOUT_MS), or it faulted"))
    if self.findings and self.detected_at:
      f = self.detected_at[-1]
      out.append(f"found when the program had enqueued up to {f[0]}:{f[1]} in {f[2]}" + (f": {f[3]}" if f[3] else "") +
                 f" (check {self.checks} of the capture as it ran)")
    for code in dict.fromkeys(f.code for f in self.findings): out.append(f"what to do about `{code}`: {advice(code)}")
    if self.kept is not None and self.findings: out.append(f"the lifted program the findings quote: {self.kept}")
    out.append(self.summary())
    return "\n".join(out)

  def to_json(self) -> str:
    warn = [{"code": d.code, "message": d.message, "line": d.span.line if d.span else None} for d in self.warnings]
    return json.dumps({"ok": self.ok, "findings": [f.to_json() for f in self.findings], "warnings": warn,
                       "submissions": self.capture.submissions(), "checks": self.checks, "detected_at": self.detected_at,
                       "incomplete": self.incomplete, "hang": attrs.asdict(self.hang) if self.hang else None,
                       "error": f"{type(self.error).__name__}: {self.error}" if self.error is not None else None,
                       "program": str(self.kept) if self.kept else None})

def sanitize(raise_on_error: bool = False, every_call: bool = False, progress=None, keep=None) -> Sanitizer:
  """`with hcqdsl.sanitize(): model(x).realize()` — see Sanitizer. (What a run would do over more launches than it made
  is `capture` + `lift` + `check --launches N`: sanitize checks the run as it happened.)"""
  return Sanitizer(raise_on_error, every_call, progress, keep)
