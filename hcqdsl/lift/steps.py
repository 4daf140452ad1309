"""A capture's host steps and memory readings, as the capture lift (lift/captured.py) reads them: which steps are a
launch's, the block of steps that repeats, each launch's graph inputs, memory contents as of a step, and per-launch
values as the program says them (`launch + c` or a listed var)."""
from __future__ import annotations
from typing import Optional
import numpy as np
from ..ir import Data, KEYWORDS, U32_MAX
from .schema import Manifest, LAUNCH_VAR

__all__ = ["launch_steps", "period", "Vars", "Naming", "graph_inputs", "Readings", "assemble", "bytes_data"]

def launch_steps(ev: list, whole: bool = False) -> list:
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

def period(shapes: list, launching: Optional[set] = None) -> Optional[tuple]:
  """(start, P, K): the K >= 2 back-to-back repetitions of a P-step block covering the most steps (on a tie the
  fewest steps per block, then the latest start), each containing a submission — with `launching` (the steps whose
  submission dispatches a kernel), one that dispatches: a launch of a TinyJit's graph runs kernels, while two
  identical uploads in a row are no launch; None when nothing repeats."""
  n, best = len(shapes), None
  for P in range(1, n // 2 + 1):
    run = 0  # run[i]: how many consecutive j >= i have shapes[j] == shapes[j + P], computed right to left
    runs = [0] * (n + 1)
    for i in range(n - P - 1, -1, -1):
      runs[i] = runs[i + 1] + 1 if shapes[i] == shapes[i + P] else 0
    for i in range(n - 2 * P + 1):
      K = 1 + runs[i] // P
      if K < 2 or not any(s[0] == "submit" and (launching is None or i + j in launching) for j, s in enumerate(shapes[i:i + P])): continue
      key = (K * P, -P, i)  # on a tie the latest phase: its last launch is the one the program ended with
      if best is None or key > best[0]: best = (key, (i, P, K))
    del run
  return best[1] if best else None

class Vars:
  """Per-launch values as the program says them: `launch + c` when they step by one, else a listed var. `base`: the
  program's launches before the first of these (a capture's warm-up, launch 1 of the default lift): value k is launch
  base + k + 1's, so `launch + c` counts the program's launches."""
  def __init__(self, used: set, base: int = 0):
    self.lists: dict = {}        # per-launch values -> the listed var that holds them
    self.used = used             # the names taken in the program (a new var's is added)
    self.uses_launch = False     # some value is `launch + c`
    self.base = base
  def fit(self, vals: list, hint: str) -> Optional[tuple]:
    """(var, add) for values that change between launches; None when they do not."""
    vals = [v & U32_MAX for v in vals]
    if len(set(vals)) == 1: return None
    c = vals[0] - 1 - self.base
    if all((v - (k + 1 + self.base + c)) & U32_MAX == 0 for k, v in enumerate(vals)):
      self.uses_launch = True
      return (LAUNCH_VAR, c if c <= U32_MAX // 2 else c - (1 << 32))
    key = tuple(vals)
    if key not in self.lists:
      name, i = hint, 2
      while name in self.used or name in KEYWORDS: name, i = f"{hint}_{i}", i + 1
      self.used.add(name)
      self.lists[key] = name
    return (self.lists[key], 0)

class Naming:
  """The names a capture's lifts share when several lift one program (the default lift: the warm-up, the repeated
  launches and the steps after them, lift/segments.py): each address keeps one name — a signal's, an allocation's —,
  a kernel one declaration, a ring's submissions are numbered on from the earlier part's, a chained ring one signal."""
  def __init__(self, used: set):
    self.used = used                 # every name taken in the program
    self.signals: dict = {}          # signal address -> its name
    self.buffers: dict = {}          # allocation address -> its name
    self.kernels: dict = {}          # (name, code, code buffer) -> its Kernel declaration
    self.rings: dict = {}            # ring -> the submissions named so far (the next is NAME_{n + 1})
    self.fifo: dict = {}             # ring -> its order signal's name (hcq2's chained rings)

def graph_inputs(m: Manifest, ev: list, start: int, P: int, K: int) -> dict:
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

class Readings:
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
    return assemble(steps, addr, size, t, final, after)

def assemble(steps: list, addr: int, size: int, t: int, final: Optional[list] = None, after: bool = False) -> Optional[bytes]:
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
      if s0 >= s1:
        left.append((m0, m1))
        continue
      out[s0:s1] = b[s0 + addr - a:s1 + addr - a]
      left += [r for r in ((m0, s0), (s1, m1)) if r[0] < r[1]]
    missing = left
    if not missing: break
  return bytes(out) if after else bytes(out).rstrip(b"\0")

def bytes_data(b: bytes) -> Data:
  """Bytes as the widest integer data that holds them exactly (u32 for tinygrad's float and int inputs)."""
  dt = "u32" if len(b) % 4 == 0 else "u8"
  return Data(dt, tuple(int(x) for x in np.frombuffer(b, "<u4" if dt == "u32" else "u1")))
