"""What a submission to an AMD ring means, decoded once per shape (sanitize's capture, docs/sanitize.md "Cost").

tinygrad submits the same commands over and over: an HCQGraph replay is its bound queues again (an indirect buffer
with only what HCQGraph patches changed: signal values, input addresses), an eager dispatch the same packets with
another timeline value and kernel-argument block. A ring's submission is compared (numpy, a few microseconds) with the
last one of its length decoded there: when the dwords that differ are all sites — a signal's address or the value a
wait compares or a signal writes, a copy's or a write's address, a dispatch's program and kernel-argument address, a
dispatch's grid — the packets are the same and only the facts at those sites are read again (the cost is that of the
changed dwords); otherwise the submission is decoded and becomes its length's shape. What a packet means is
amd/meaning.py's."""
from __future__ import annotations
import functools, struct
from typing import Callable, Optional
import attrs
import numpy as np
from ..amd.disasm import decoder as _decoder
from ..amd.meaning import (meaning, Registers, splice, address_at, field_at, program_address, kernarg_address, SIGNAL_MEMORY, STORES,
                           IB_DEPTH)

__all__ = ["Fact", "Shape", "Shapes", "packet_facts", "NOCACHE"]

@attrs.frozen
class Fact:
  """What one packet (or dispatch) of a submission refers to: `kind` signal (addr), use (addr, size, reads), dispatch
  (program, kernel arguments) or copy (its source: addr, size — what `staged` looks for)."""
  kind: str
  addr: int = 0
  size: int = 0
  reads: bool = False
  kargs: int = 0
  value_at: int = -1   # signal: the dword of the value it compares or writes (-1: none, a timestamp)

@functools.cache
def decoder(engine: str, target: str): return _decoder(engine, target)

def packet_facts(engine: str, target: str, p) -> tuple:
  """(facts, site dwords) of one packet that is no dispatch: a signal it waits on or writes (the address's two dwords
  and the value's), memory it writes or polls, a copy's source and destination (and its source, for `staged`)."""
  m = meaning(p)
  if p.raw or m is None: return [], []
  if m.kind in SIGNAL_MEMORY and m.addr is not None:
    a = address_at(engine, target, p)
    v = p.offset + field_at(engine, target, p.name, m.value_field) if m.value_field else -1
    return [Fact("signal", m.addr, value_at=v)], [a, a + 1]
  if (m.kind in STORES or m.kind == "poll") and m.addr is not None:
    a = address_at(engine, target, p)
    return [Fact("use", m.addr, m.size, m.kind == "poll")], [a, a + 1]
  if m.kind == "copy" and m.addr is not None and m.src is not None:
    s, d = address_at(engine, target, p, m.src_field), address_at(engine, target, p, m.addr_field)
    return [Fact("use", m.src, m.size, True), Fact("use", m.addr, m.size, False), Fact("copy", m.src, m.size)], [s, s + 1, d, d + 1]
  return [], []

class Shape:
  """One submission decoded: the ring's words it came from, how its indirect buffers splice in (`plan`: None when there
  is none, NOCACHE when each submission must be spliced again), the expanded dwords, each packet's facts, and the sites
  (dword -> the packet whose facts it changes, or the dispatch fact whose program or kernel arguments it holds)."""
  serial = 0   # shapes made so far: each has its number (a window's key names a shape by it)

  def __init__(self, engine: str, target: str, ring_words: np.ndarray, plan, words: np.ndarray):
    self.engine, self.target, self.plan, self.words = engine, target, plan, words
    self.ring_key = ring_words.tobytes()   # (its ring words: a plan's indirect buffers are read for these only)
    Shape.serial += 1
    self.id = Shape.serial
    self.packets = decoder(engine, target).decode(words.tolist())
    self.facts: list = []       # (packet index, Fact), in packet order
    self.sites: dict = {}       # dword -> ("packet", packet index) | ("dispatch", fact index, PGM_LO dword, kernarg dword) | ("grid",) | ("value",)
    regs = Registers()
    for n, p in enumerate(self.packets):
      facts, dws = packet_facts(engine, target, p)
      for d in dws: self.sites[d] = ("packet", n)
      for f in facts:   # a signal's value changes no fact (it is read where it sits: `value_at`)
        if f.value_at >= 0: self.sites[f.value_at] = ("value",)
      self.facts += [(n, f) for f in facts]
      if not facts and (d := regs.see(p)) is not None:
        i = len(self.facts)
        self.facts.append((n, Fact("dispatch", d.program, kargs=d.kernargs)))
        for w in (d.program_at, d.program_at + 1, d.kernargs_at, d.kernargs_at + 1): self.sites[w] = ("dispatch", i, d.program_at, d.kernargs_at)
        for w in range(d.grid_at, d.grid_at + 3): self.sites[w] = ("grid",)   # (a grid's dims order nothing)
    self.fixed = np.ones(len(words), dtype=bool)   # the dwords that are no site: a submission of this shape has them all
    self.fixed[[d for d in self.sites if 0 <= d < len(words)]] = False
    # the sites that change a fact (an address, a program): a submission's facts are known by their dwords there, the
    # last few sets of facts kept by them (an HCQGraph replay's inputs alternate between buffers: its facts too), each
    # the same object every time it comes back
    self.fact_sites = np.asarray(sorted(d for d, x in self.sites.items() if x[0] in ("packet", "dispatch") and 0 <= d < len(words)), dtype=np.intp)
    self.variants: dict = {words[self.fact_sites].tobytes(): self.facts}

  def facts_of(self, words: np.ndarray, changed: np.ndarray) -> Optional[list]:
    """`refacts`, the same object for the same dwords at the fact sites (the last VARIANTS of them kept)."""
    key = words[self.fact_sites].tobytes()
    facts = self.variants.get(key)
    if facts is None:
      if (facts := self.refacts(words, changed)) is None: return None
      self.variants[key] = facts
      if len(self.variants) > VARIANTS: self.variants.pop(next(iter(self.variants)))
    return facts

  def refacts(self, words: np.ndarray, changed: np.ndarray) -> Optional[list]:
    """The facts of `words`, equal to this shape's but at `changed` (dwords that differ): None when one of them is no
    site (then it is another shape). Only the packets and dispatches at the changed sites are read again."""
    packets, dispatches = set(), {}
    for d in changed.tolist():
      site = self.sites.get(d)
      if site is None: return None
      if site[0] == "packet": packets.add(site[1])
      elif site[0] == "dispatch": dispatches[site[1]] = site[2:]
    if not packets and not dispatches: return self.facts   # (only values and grids changed: the same facts, the same object)
    facts = list(self.facts)
    for i, (pgm, ka) in dispatches.items():
      facts[i] = (facts[i][0], Fact("dispatch", program_address((int(words[pgm]), int(words[pgm + 1]))),
                                    kargs=kernarg_address((int(words[ka]), int(words[ka + 1])))))
    if packets:
      dec, new = decoder(self.engine, self.target), {}
      for n in packets:
        p = self.packets[n]
        q = attrs.evolve(dec.decode(words[p.offset:p.offset + p.length].tolist())[0], offset=p.offset)
        new[n] = packet_facts(self.engine, self.target, q)[0]
        if len(new[n]) != sum(1 for k, _ in self.facts if k == n): return None
      out, done = [], set()
      for k, f in facts:
        if k not in new: out.append((k, f))
        elif k not in done:
          done.add(k)
          out += [(k, g) for g in new[k]]
      facts = out
    return facts

SHAPES = 16           # shapes kept per ring and length (the least recently matched go first)
VARIANTS = 8          # sets of facts kept per shape (the oldest go first)
NOCACHE = "nocache"   # a plan that splices again every time (an indirect buffer inside one, or one not readable)

class Shapes:
  """Each ring's shapes, by the length of its ring words: `expand` a submission (its indirect buffers read), `facts`
  what it refers to — from the shape it matches, else from a new decode."""
  def __init__(self, read: Callable[[int, int], Optional[bytes]]):
    self.read = read
    self.by: dict = {}   # (ring, ring words' length) -> its Shapes, the most recently matched first
    self.hits = self.misses = 0

  def submission(self, ring: str, engine: str, target: str, ring_words: np.ndarray) -> tuple:
    """(the expanded dwords, their Shape, their facts) of a submission of `ring_words` to `ring`: by the first of the
    ring's shapes of its length it matches (the most recently matched first), else decoded as a new one."""
    cands = self.by.setdefault((ring, len(ring_words)), [])
    key = ring_words.tobytes()
    for n, s in enumerate(cands):
      words = self.expanded(s, ring_words, key)
      if words is None or len(words) != len(s.words): continue
      diff = words != s.words
      if (diff & s.fixed).any(): continue   # (a dword that is no site differs: another shape, told apart in numpy)
      changed = np.flatnonzero(diff)
      facts = s.facts_of(words, changed) if len(changed) else s.facts
      if facts is None: continue
      if n: cands.insert(0, cands.pop(n))
      self.hits += 1
      return words, s, facts
    self.misses += 1
    plan, words = self.splice(engine, target, ring_words)
    s = Shape(engine, target, ring_words, plan, words)
    cands.insert(0, s)
    del cands[SHAPES:]
    return words, s, s.facts

  def expanded(self, s: Shape, ring_words: np.ndarray, key: bytes) -> Optional[np.ndarray]:
    """The dwords of `ring_words` (`key`: their bytes) with the indirect buffers of `s`'s plan read in (None: the
    ring's words are not the shape's own, so its indirect buffers may be others)."""
    if s.plan is None: return ring_words
    if s.plan == NOCACHE or key != s.ring_key: return None
    parts = []
    for lo, hi, addr, size in s.plan:
      if addr is None: parts.append(ring_words[lo:hi])
      else:
        b = self.read(addr, size)
        if b is None or len(b) != size: return None
        parts.append(np.frombuffer(b, dtype=np.uint32))
    return np.concatenate(parts) if parts else ring_words

  def splice(self, engine: str, target: str, ring_words: np.ndarray) -> tuple:
    """(plan, expanded dwords): the ring's packets with each indirect buffer's read in (amd/meaning.splice); the plan
    says which ranges of the ring's words and which indirect buffers make the expanded dwords (None: no indirect
    buffer; a nested one: no plan, each submission is decoded)."""
    rw = ring_words.tolist()
    packets = decoder(engine, target).decode(rw)
    ibs = [(p, m, m.addr) for p in packets if (m := meaning(p)) is not None and m.kind == "indirect" and m.addr is not None]
    if not ibs: return None, ring_words
    out = [d for p in splice(rw, engine, target, self.read) for d in p.dwords]
    plan: list = []
    at = 0
    for p, m, addr in ibs:
      if p.offset > at: plan.append((at, p.offset, None, 0))
      b = self.read(addr, m.size)
      if b is None or IB_DEPTH < 2 or any((x := meaning(q)) is not None and x.kind == "indirect"
                                            for q in decoder(engine, target).decode(list(struct.unpack(f"<{len(b) // 4}I", b)))):
        return NOCACHE, np.asarray(out, dtype=np.uint32)
      plan.append((0, 0, addr, m.size))
      at = p.offset + p.length
    if at < len(rw): plan.append((at, len(rw), None, 0))
    return plan, np.asarray(out, dtype=np.uint32)
