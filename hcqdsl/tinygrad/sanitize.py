"""`hcqdsl.sanitize()` / `hcqdsl sanitize SCRIPT.py[:FN]`: run a tinygrad program under capture (docs/lift.md) with
the user's call stack of every submission recorded, lift what tinygrad's AMD runtime submitted to the program it ran,
check it, and report each race and deadlock in tinygrad's terms — kernel names and argument shapes, the tinygrad
device and queue, and the user's Python line (and whole stack) where each of the two commands was enqueued — the way
PyTorch's CUDA sanitizer (torch.cuda._sanitizer) reports a stream race with both stack traces. docs/sanitize.md."""
from __future__ import annotations
import json, re, sys
from typing import Optional
import attrs
from ..lift.capture import Capture
from ..lift.manifest import load_manifest, lift_manifest
from ..lang.format import format_program
from ..check import parse, check

__all__ = ["Sanitizer", "Finding", "sanitize"]

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

class Sanitizer:
  """`with hcqdsl.sanitize() as s: ...` records what tinygrad submits inside the block; when it ends, `s.findings`
  holds the races and deadlocks (errors) found, `s.warnings` the rest, and `s.ok` says whether there were none.
  `launches`: check this many launches (default: the launches captured). `raise_on_error`: raise RuntimeError with
  the report when the block ends with findings."""
  def __init__(self, launches: Optional[int] = None, raise_on_error: bool = False):
    self.launches, self.raise_on_error = launches, raise_on_error
    self.capture = Capture(contents=False, stacks=True)
    self.findings: list = []
    self.warnings: list = []
    self.program = None
    self.checked = False
  def __enter__(self) -> "Sanitizer":
    self.capture.__enter__(); return self
  def __exit__(self, *exc):
    self.capture.__exit__(*exc)
    if exc[0] is None and self.capture.submissions():
      self.run_check()
      if self.raise_on_error and self.findings: raise RuntimeError(self.report())
    return False
  @property
  def ok(self) -> bool: return self.checked and not self.findings

  def run_check(self) -> list:
    man = self.capture.manifest()
    m = load_manifest(man, "<sanitize>")
    info: dict = {}
    prog = lift_manifest(m, None, None, info)
    text = format_program(prog)
    self.program = prog = parse(text, "<captured>")
    launches = self.launches or info.get("launches", 1)
    diags = check(prog, launches)
    queues = {q.name: q for q in prog.queues}
    devname = {d["name"]: d.get("tinygrad", d["name"]) for d in man["devices"]}
    host = man["host"]
    kernels = {k.name: k for k in prog.kernels}
    sigs = {k["name"]: k for k in man["kernels"]}
    lines = text.splitlines()
    def command(span) -> Optional[Command]:
      if span is None: return None
      q = next((q for q in prog.queues if q.span and q.span.line <= span.line <= q.span.end_line), None)
      stmt = lines[span.line - 1].split("#")[0].strip() if 0 < span.line <= len(lines) else ""
      if q is None:
        return Command(stmt, "host", "CPU", f"the host's `{stmt}`", []) if stmt else None
      segs = info.get("queues", {}).get(q.name) or []
      at = re.search(r"#\s*@(\d+)", lines[span.line - 1]) if 0 < span.line <= len(lines) else None
      step = next((g[2] for g in segs if at and g[3] <= int(at.group(1)) < g[3] + g[1] - g[0]), segs[0][2] if segs else None)
      stack = host[step].get("stack", []) if step is not None and step < len(host) else []
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
      return Command(stmt, q.name, devname.get(q.device.name, q.device.name), what, [list(f) for f in stack])
    for d in diags:
      if d.severity != "error":
        self.warnings.append(d); continue
      cmds = [c for c in [command(d.span)] + [command(r.span) for r in (d.related or ())[:1]] if c is not None]
      self.findings.append(Finding(d.code, d.message, cmds))
    self.checked = True
    return self.findings

  def report(self) -> str:
    if not self.checked: return "hcqdsl sanitize: nothing checked (no AMD queue was submitted to)"
    out = [f.format() for f in self.findings]
    n = self.capture.submissions()
    out.append(f"{'ok' if not self.findings else 'failed'}: {len(self.findings)} error{'s' * (len(self.findings) != 1)}, "
               f"{len(self.warnings)} warning{'s' * (len(self.warnings) != 1)} in {n} submission{'s' * (n != 1)} of tinygrad's AMD runtime")
    return "\n".join(out)

  def to_json(self) -> str:
    return json.dumps({"ok": self.ok, "findings": [f.to_json() for f in self.findings], "warnings": len(self.warnings),
                       "submissions": self.capture.submissions()})

def sanitize(launches: Optional[int] = None, raise_on_error: bool = False) -> Sanitizer:
  """`with hcqdsl.sanitize(): model(x).realize()` — see Sanitizer."""
  return Sanitizer(launches, raise_on_error)
