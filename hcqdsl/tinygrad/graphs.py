"""`stale-input` in a run `hcqdsl sanitize` checks as it grows (docs/sanitize.md, "Graph templates"): a TinyJit
replay reading an earlier call's input memory (docs/findings/stale-jit-copy.md) is no race of the run as it happened
— it shows only across an HCQGraph's launches, where the folded lift (`hcqdsl lift`) sees which memory is each call's
input (the capture's `graph_calls`: what HCQGraph was handed). Each HCQGraph's calls are cut into blocks (the steps
from its call to the next graph call, or to the end of the tinygrad call that made it); the folded lift of LAUNCHES
consecutive blocks of one shape (the same steps: the same rings and lengths, signal and memory steps in the same
order) is the graph's template, checked once for `stale-input`. A later block of the same shape is a replay of that
template — the same commands with only what HCQGraph patches changed — and repeats its findings (counted, at the
block's own user lines); a block of another shape starts a template of its own."""
from __future__ import annotations
from typing import Optional
import attrs
from ..lift.manifest import lift_manifest
from ..lang.format import format_program
from ..check import parse, check
from .findings import Command, Finding
from .live import Occurrence, manifest_of
from .capture import source

__all__ = ["GraphInputs", "LAUNCHES"]

LAUNCHES = 3   # launches of a template (a replay reading launch j's input shows from launch j + 1 on)

@attrs.define
class _Block:
  """One call of an HCQGraph: its `graph_calls` entry and the steps it made."""
  graph: int
  call: dict
  steps: list = attrs.field(factory=list)
  def shape(self) -> tuple:
    return tuple((e["op"], e.get("queue"), len(e["dw"]) if "dw" in e else 0) for e in self.steps if not e.get("dropped"))

@attrs.define
class _Template:
  shape: tuple
  found: list   # (Finding as first reported, the index of its step in a block)

class GraphInputs:
  """The graphs of one run: `step` takes each step (after `graph_call` for a call's entry), `occurrences` what was found."""
  def __init__(self, cap, kernels):
    self.cap, self.kernels = cap, kernels   # kernels(): the manifest's programs (Live.kernels)
    self.block: Optional[_Block] = None
    self.collecting: dict = {}   # graph -> blocks of one shape, not checked yet
    self.templates: dict = {}    # graph -> _Template
    self.found: list = []        # Occurrences not handed out yet
    self.checks = 0

  def graph_call(self, call: dict) -> None:
    self.close()
    self.block = _Block(call["graph"], call)

  def step(self, e: dict) -> None:
    b = self.block
    if b is not None and b.steps and e.get("call") != b.steps[0].get("call"): self.close()
    if self.block is not None: self.block.steps.append(e)

  def close(self) -> None:
    b, self.block = self.block, None
    if b is None or not any(e["op"] == "submit" for e in b.steps): return
    t = self.templates.get(b.graph)
    if t is not None and t.shape == b.shape():   # a replay of the template: its findings, at this call's lines
      for f, at in t.found: self.found.append(self.occurrence(f, b, at))
      return
    got = self.collecting.setdefault(b.graph, [])
    if got and got[0].shape() != b.shape(): got.clear()
    got.append(b)
    if len(got) == LAUNCHES:
      del self.collecting[b.graph]
      self.template(got)

  def finish(self) -> list:
    """At the end: the blocks still collected are checked as they are (fewer launches); what was found."""
    self.close()
    for blocks in list(self.collecting.values()):
      if len(blocks) >= 2: self.template(blocks)
    self.collecting.clear()
    out, self.found = self.found, []
    return out

  def take(self) -> list:
    out, self.found = self.found, []
    return out

  def occurrence(self, f: Finding, b: _Block, at: int) -> Occurrence:
    e = b.steps[at] if at < len(b.steps) else b.steps[-1]
    stack = [[fl, ln, n, source(fl, ln)] for fl, ln, n in e.get("stack", ())]
    cmds = [attrs.evolve(c, stack=stack, step=e["i"]) for c in f.commands]
    return Occurrence(attrs.evolve(f, commands=cmds), ((e["i"], ("graph", at)),), e.get("call", 0))

  def template(self, blocks: list) -> None:
    """Check `blocks` (one graph's consecutive calls of one shape) folded, for `stale-input`; the graph's template."""
    records = [e for b in blocks for e in b.steps]
    m, steps = manifest_of(self.cap, records, self.kernels(), raw=True)
    at = {g: w for w, g in enumerate(steps)}
    m.graph_calls = [(at[b.steps[0]["i"]], b.graph, [[tuple(x) if x else None for x in row] if row is not None else None
                                                      for row in b.call["inputs"]]) for b in blocks]
    info: dict = {}
    prog = lift_manifest(m, None, None, info, folded_only=True)
    text = format_program(prog)
    folded = parse(text, "<graph>")
    launches = info.get("launches", 1)
    self.checks += 1
    found: list = []
    if launches >= 2:
      lines = text.splitlines()
      for d in check(folded, launches):
        if d.code != "stale-input" or d.span is None: continue
        q = next((q for q in folded.queues if q.span and q.span.line <= d.span.line <= q.span.end_line), None)
        stmt = lines[d.span.line - 1].split("#")[0].strip() if 0 < d.span.line <= len(lines) else ""
        segs = (info.get("queues") or {}).get(q.name) if q is not None else None
        w = segs[0][2] if segs else 0
        pos = next((i for i, e in enumerate(blocks[0].steps) if e["i"] == steps[w]), 0)
        f = Finding(d.code, d.message, [Command(stmt, q.name if q else "?", q.device.name if q else "?",
                                                f"copy ({stmt[5:]})" if stmt.startswith("copy ") else stmt, [])])
        found.append((f, pos))
        k = (d.extra or {}).get("launch", 2)
        for b in blocks[k - 1:]: self.found.append(self.occurrence(f, b, pos))
    self.templates[blocks[0].graph] = _Template(blocks[0].shape(), found)
