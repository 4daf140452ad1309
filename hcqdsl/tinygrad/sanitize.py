"""`hcqdsl.sanitize()` / `hcqdsl sanitize SCRIPT.py[:FN]`: run a tinygrad program under capture (docs/lift.md) with
the user's call stack of every submission recorded, lift what tinygrad's AMD runtime submitted to the program it ran,
check it, and report each race and deadlock in tinygrad's terms — kernel names and argument shapes, the tinygrad
device and queue, and the user's Python line (and whole stack) where each of the two commands was enqueued — the way
PyTorch's CUDA sanitizer (torch.cuda._sanitizer) reports a stream race with both stack traces. docs/sanitize.md."""
from __future__ import annotations
import json, re
from typing import Optional
import attrs
from ..lift.capture import Capture
from ..lift.manifest import load_manifest, lift_manifest
from ..lang.format import format_program
from ..check import parse, check
from ..ir import Submit, HostWrite

__all__ = ["Sanitizer", "SanitizerError", "Finding", "Command", "sanitize"]

@attrs.define
class Command:
  """One of the two commands of a finding: the lifted statement and what tinygrad did there."""
  text: str            # the lifted statement, e.g. `exec E_4_4(b_7f.., in_7f..)`
  queue: str           # the lifted queue (ring and submission), e.g. comp_gpu0
  device: str          # tinygrad's device name, e.g. AMD:1
  what: str            # in tinygrad's terms: kernel name with argument modes and shapes, or a copy
  stack: list          # the user's frames at the submission, outermost first: [file, line, function, source]
  def where(self) -> str:
    return f"{self.stack[-1][0]}:{self.stack[-1][1]}" if self.stack else "(no user frame: submitted by tinygrad itself)"

@attrs.define
class Finding:
  code: str            # race, deadlock, signal-race, ... (hcqdsl.diagnostics.CODES)
  message: str         # check's message on the lifted program
  commands: list       # of Command: the one reported and the other one involved (when there is one)
  def format(self) -> str:
    out = [f"hcqdsl sanitize: {self.code}: {self.message}"]
    for i, c in enumerate(self.commands):
      out.append(f"  {'the first' if i == 0 else 'the other'} command: {c.what} on {c.device} (queue {c.queue})")
      out.append(f"    enqueued at {c.where()}" + (f" in {c.stack[-1][2]}: {c.stack[-1][3]}" if c.stack and c.stack[-1][3] else ""))
      if len(c.stack) > 1:
        out.append("    stack (most recent call last):")
        out += [f"      {f[0]}:{f[1]} in {f[2]}" + (f": {f[3]}" if f[3] else "") for f in c.stack]
      out.append(f"    lifted as `{c.text}`")
    return "\n".join(out)
  def to_json(self) -> dict: return attrs.asdict(self)

class SanitizerError(RuntimeError):
  """Raised (with `raise_on_error=True`) out of the tinygrad call that enqueued work with an error, so the traceback
  ends at the user's line."""

class Sanitizer:
  """`with hcqdsl.sanitize() as s: ...` records what tinygrad submits inside the block and checks it as the program
  runs: after each call that submits (a schedule's realize, a TinyJit call: tinygrad's `run_linear`), everything
  captured so far is lifted and checked; the first check with findings is kept, with the user's line of that call
  (`s.detected_at`), and checking stops there. A block that ends with no findings is checked once more on everything
  (the repeated launches a TinyJit makes are only seen whole at the end). `s.findings` holds the races and deadlocks
  (errors) and the host writes a kernel may read stale (`visibility` through the HDP: a dropped `memory_barrier`),
  `s.warnings` the rest, `s.ok` says whether there were no findings. `launches`: check this many launches (default:
  the launches captured). `raise_on_error`: raise SanitizerError with the report from the call that enqueued the
  first error."""
  def __init__(self, launches: Optional[int] = None, raise_on_error: bool = False):
    self.launches, self.raise_on_error = launches, raise_on_error
    self.capture = Capture(contents=False, stacks=True)
    self.findings: list = []
    self.warnings: list = []
    self.program = None
    self.checked = False
    self.checks = 0              # how many times the capture was lifted and checked
    self.detected_at: list = []  # the user's frames of the call after which the first findings were seen
    self.failure: Optional[BaseException] = None   # hcqdsl's own failure in a check made while the program ran
    self._saved: list = []
    self._depth, self._seen = 0, 0

  def __enter__(self) -> "Sanitizer":
    self.capture.__enter__()
    try: self._install()
    except Exception:
      self.capture.__exit__(None, None, None); raise
    return self

  def __exit__(self, *exc):
    self._restore()
    self.capture.__exit__(*exc)
    if self.failure is not None and exc[0] is None: raise self.failure
    if exc[0] is None and not self.findings and self.capture.submissions(): self.run_check()
    if exc[0] is None and self.raise_on_error and self.findings and not self.detected_at: raise SanitizerError(self.report())
    return False

  @property
  def ok(self) -> bool: return self.checked and not self.findings

  # ---- checking as the program runs
  def _install(self) -> None:
    """Wrap tinygrad's `run_linear` (every realize and TinyJit call goes through it; jit.py and tensor.py hold their own
    references) so the capture is checked when the outermost call returns."""
    from tinygrad.engine import realize, jit
    import tinygrad.tensor as tensor
    orig = realize.run_linear
    def run_linear(*a, **kw):
      self._depth += 1
      try: ret = orig(*a, **kw)
      finally: self._depth -= 1
      if self._depth == 0: self._checkpoint()
      return ret
    run_linear.__wrapped__ = orig
    for mod in (realize, jit, tensor):
      if getattr(mod, "run_linear", None) is orig:
        self._saved.append((mod, orig)); mod.run_linear = run_linear

  def _restore(self) -> None:
    for mod, orig in reversed(self._saved): mod.run_linear = orig
    self._saved.clear()

  def _checkpoint(self) -> None:
    n = self.capture.submissions()
    if self.findings or self.failure is not None or n == self._seen: return
    self._seen = n
    from ..lift.capture import user_frames
    try: self.run_check()
    except Exception as e:  # hcqdsl's own failure: reported as hcqdsl's when the block ends, never as the user's line
      self.failure = e; return
    if self.findings:
      self.detected_at = [list(f) for f in user_frames(self.capture._skip)]
      if self.raise_on_error: raise SanitizerError(self.report())

  def run_check(self) -> list:
    man = self.capture.manifest()
    m = load_manifest(man, "<sanitize>")
    info: dict = {}
    prog = lift_manifest(m, None, None, info)
    text = format_program(prog)
    self.program = prog = parse(text, "<captured>")
    launches = self.launches or info.get("launches", 1)
    diags = check(prog, launches)
    self.checks += 1
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
        if isinstance(st, HostWrite):   # the host's refill of host memory: its bytes per launch are no reading matter
          stmt = f"write {stmt[6:].split(' = ')[0]}"
          what = f"the host's `{stmt}` (its copy of {st.launch_inits[0].nbytes if st.launch_inits else 0} bytes into host memory)"
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
          s = (sk or {}).get("params", [])
          s = s[i] if i < len(s) else {}
          shape = "x".join(str(x) for x in s.get("shape", [])) or "?"
          params.append(f"{p.mode} {s.get('dtype') or ''}[{shape}]" if not p.scalar else f"{s.get('name') or p.name}: {p.mode}")
        what = f"kernel {(sk or {}).get('tinygrad_name') or kname}({', '.join(params)})"
      elif stmt.startswith("copy "): what = f"copy ({stmt[5:]})"
      return Command(stmt, q.name, devname.get(q.device.name, q.device.name), what + (f" ({note})" if note else ""), stack_of(step))
    findings, warnings = [], []
    for d in diags:
      hdp = d.code == "visibility" and (d.extra or {}).get("cause") == "hdp"
      if d.severity != "error" and not hdp:
        warnings.append(d); continue
      qname = (d.extra or {}).get("queue")
      rel = (d.related or ())[:1]
      first = command(d.span, note="reads what the host wrote, with no memory barrier (HDP flush) after it" if hdp else "")
      other = [command(r.span, qname, r.message.replace(" here", "") if hdp else "") for r in rel]
      cmds = [c for c in [first] + other if c is not None]
      findings.append(Finding(d.code, d.message, cmds))
    self.findings, self.warnings, self.checked = findings, warnings, True
    return self.findings

  def report(self) -> str:
    if not self.checked: return "hcqdsl sanitize: nothing checked (no AMD queue was submitted to)"
    out = [f.format() for f in self.findings]
    if self.findings and self.detected_at:
      f = self.detected_at[-1]
      out.append(f"found when the program had enqueued up to {f[0]}:{f[1]} in {f[2]}" + (f": {f[3]}" if f[3] else "") +
                 f" (check {self.checks} of the capture as it ran)")
    n = self.capture.submissions()
    out.append(f"{'ok' if not self.findings else 'failed'}: {len(self.findings)} error{'s' * (len(self.findings) != 1)}, "
               f"{len(self.warnings)} warning{'s' * (len(self.warnings) != 1)} in {n} submission{'s' * (n != 1)} of tinygrad's AMD runtime")
    return "\n".join(out)

  def to_json(self) -> str:
    return json.dumps({"ok": self.ok, "findings": [f.to_json() for f in self.findings], "warnings": len(self.warnings),
                       "submissions": self.capture.submissions(), "checks": self.checks, "detected_at": self.detected_at})

def sanitize(launches: Optional[int] = None, raise_on_error: bool = False) -> Sanitizer:
  """`with hcqdsl.sanitize(): model(x).realize()` — see Sanitizer."""
  return Sanitizer(launches, raise_on_error)
