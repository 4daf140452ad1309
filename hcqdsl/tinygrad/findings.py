"""What `hcqdsl sanitize` reports (docs/sanitize.md): each problem as a `Finding` — its code, check's message and the
two commands involved (`Command`: the lifted statement and what tinygrad did there, with the user's stack) — once per
bug: occurrences with the same code, the same user lines and the same pattern of tinygrad's commands are one Finding
with a count of the calls it was seen in and the first and last of them (`Findings`)."""
from __future__ import annotations
import functools, re
from typing import Optional
import attrs

__all__ = ["Command", "Finding", "Findings", "pattern"]

@attrs.define
class Command:
  """One of the two commands of a finding: the lifted statement and what tinygrad did there."""
  text: str            # the lifted statement, e.g. `exec E_4_4(b_7f.., in_7f..)`
  queue: str           # the lifted queue (ring and submission), e.g. comp_gpu0
  device: str          # tinygrad's device name, e.g. AMD:1
  what: str            # in tinygrad's terms: kernel name with argument modes and shapes, or a copy
  stack: list          # the user's frames at the submission, outermost first: [file, line, function, source]
  step: Optional[int] = None   # the capture's host step that submitted it (or is it), counted from 0
  ring: Optional[str] = None     # the capture's ring it was submitted to (comp_gpu0), and its first dword's offset in
  offset: Optional[int] = None   # that ring's stream (the whole lift's `# @N`): where `--confirm` finds it in another run
  def where(self) -> str:
    return f"{self.stack[-1][0]}:{self.stack[-1][1]}" if self.stack else "(no user frame: submitted by tinygrad itself)"

@attrs.define
class Finding:
  code: str            # race, deadlock, signal-race, ... (hcqdsl.diagnostics.CODES)
  message: str         # check's message on the lifted program (of its first occurrence)
  commands: list       # of Command: the one reported and the other one involved (when there is one)
  count: int = 1       # the tinygrad calls (realizes, TinyJit calls) it was seen in
  first_call: Optional[int] = None   # the first and last of them (counted from 1)
  last_call: Optional[int] = None
  severity: str = "error"            # error, or warning (redundant-wait, unused-signal, visibility through L2)
  confirmation: Optional[dict] = None   # `--confirm`'s verdict (tinygrad/confirm.py): {"status": confirmed | not-observed | not-tried, ...}
  memory: list = attrs.field(factory=list)   # [{"name", "what"}]: the memory it names, in tinygrad's terms (tinygrad/memnames.py)
  what_to_do: Optional[str] = None           # whose code should build the missing order, for this finding
  def format(self) -> str:
    seen = f" (× {self.count} calls: {self.first_call}..{self.last_call})" if self.count > 1 else ""
    out = [f"hcqdsl sanitize: {self.code}: {self.message}{seen}"]
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
  def place(self) -> str:
    """Where it is, in one line: the user's line of each command and what tinygrad did there."""
    return "; ".join(f"{c.what} at {c.where()}" for c in self.commands) or "(no command)"
  def to_json(self) -> dict: return attrs.asdict(self)

_ADDRESSED = re.compile(r"\b([A-Za-z]+)_[0-9a-f]{6,}\b")   # a lifted name made of an address: b_7f.., kargs_7f.., s_7f..
_VALUE = re.compile(r"(>=|=|\[)\s*\d+")
_TIMELINE = re.compile(r"\btl_(\w+?)(?:_\d+)?\b")          # a device's timeline named as a signal (its value not 0 when lifted)

def pattern(c: Command) -> str:
  """What tinygrad did, without what changes from call to call: the addresses in names, the signal values (and a
  device's timeline by one name: `gpu0.timeline`, `tl_gpu0` where a check began with it past 0)."""
  return _pattern(c.what)

@functools.lru_cache(maxsize=4096)
def _pattern(what: str) -> str:   # (a template's findings say the same `what` at every hit)
  what = _TIMELINE.sub(lambda m: m.group(1) + ".timeline", what)
  return _VALUE.sub(lambda m: m.group(1) + "N", _ADDRESSED.sub(lambda m: m.group(1) + "_*", what))

class Findings:
  """The findings of a run, one per bug: an occurrence is added to the Finding with its code, its commands' user lines
  and their patterns, or starts one. What is kept is one Finding per distinct bug, never one per occurrence."""
  def __init__(self):
    self.by_key: dict = {}   # key -> Finding, in the order first seen

  @staticmethod
  def key(f: Finding) -> tuple:
    return (f.code, tuple(c.where() for c in f.commands), tuple(pattern(c) for c in f.commands))

  def add(self, f: Finding, call: int) -> Finding:
    """Count one occurrence of `f` seen in tinygrad call `call`; returns the Finding it counts in."""
    old = self.by_key.get(k := self.key(f))
    if old is None:
      f.count, f.first_call, f.last_call = 1, call, call
      self.by_key[k] = f
      return f
    if call != old.last_call: old.count += 1
    old.first_call, old.last_call = min(old.first_call or call, call), max(old.last_call or call, call)
    return old

  def seen(self, code: str, wheres: tuple, patterns: tuple) -> Optional[Finding]:
    return self.by_key.get((code, wheres, patterns))

  def all(self, severity: Optional[str] = None) -> list:
    return [f for f in self.by_key.values() if severity is None or f.severity == severity]
