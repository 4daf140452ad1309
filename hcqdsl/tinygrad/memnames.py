"""What the memory of a sanitizer's finding is to tinygrad, and whose code builds the order it misses (docs/sanitize.md,
"What the memory is"). A lifted program names memory by address (`b_7f50880ff000`); while the script runs this module
records, beside the capture, every tinygrad Buffer allocated and freed (dtype, elements, device, the user's line that
made tinygrad allocate it, views of a memory planner's arena), every tensor's creation line, and each HCQGraph call,
so a finding can say: "a float buffer of 16 elements on AMD:1, tensor `h = (x + 0).contiguous()` (float[2, 8]) made at
multi_device.py:15", "input 0 of TinyJit call 3", "the kernel-argument block of E_4_4", "AMD:0's host staging
buffer", "the timeline of AMD:1"; and the finding's what-to-do names the code that should order its two commands:
HCQGraph's `_resolve_deps` (a TinyJit replay on classic HCQ), the eager path's waits (a realize), hcq2's planner."""
from __future__ import annotations
import re, sys, weakref
from typing import Optional
import attrs
from .readback import user_site, install_sites, restore_sites
from .capture import KEPT

__all__ = ["MemoryNames", "Alloc", "WHOSE"]

@attrs.define
class Alloc:
  """One tinygrad Buffer's memory: [addr, end), what it holds, where and when it was allocated and freed."""
  addr: int
  end: int
  dtype: str
  size: int         # elements
  device: str
  site: tuple       # (file, line, source) of the user's line that made tinygrad allocate it
  step: int         # the capture's host step count when it was allocated
  freed: Optional[int] = None
  view: bool = False      # a view into another Buffer (a memory planner's arena)
  arena: bool = False     # other Buffers are views into it
  ref: object = None      # a weak reference to the Buffer (a strong one would keep its memory from being reused)

_NAME = re.compile(r"\b((?:b|in|kargs)_([0-9a-f]+))(?:@\d+)?(?:\[(\d+):(\d+)\])?")

# whose code builds the missing order, by the path and where the commands were submitted
WHOSE = {
  "graph": ("tinygrad's HCQGraph (runtime/graph/hcq.py) built both commands for a TinyJit replay: `_resolve_deps` gives each "
            "queue its waits (on other queues' signals, and on a device's kickoff before it touches that device's memory, "
            "`sync_signals`); it should have made {later} wait for {earlier}"),
  "eager": ("tinygrad's eager path submitted them (a realize outside TinyJit's graph): HCQProgram.__call__ waits for its own "
            "device's timeline, the allocator's copies (`_transfer`, `_copyin`) wait for the devices they copy between; "
            "{later} should wait for {earlier}"),
  "hcq2": ("tinygrad's hcq2 planner (runtime/support/hcq2.py) built both: `_finalize_batch` orders a batch's queues after "
           "earlier batches only through each queue's own devices' timelines, and a copy is enqueued on its source device "
           "(`_get_enqueue_devs`); it should have made {later} wait for {earlier}"),
}

_MOCK: dict = {}   # file name -> is it tinygrad's mock GPU's (test/mockgpu)

def _mock_own(f) -> bool:
  """Is a Buffer allocated from this frame (or its two callers) one the mock GPU makes for itself?"""
  for _ in range(3):
    if f is None: return False
    fn = f.f_code.co_filename
    m = _MOCK.get(fn)
    if m is None: m = _MOCK[fn] = "/mockgpu/" in fn
    if m: return True
    f = f.f_back
  return False

class MemoryNames:
  """Installed beside a Capture while the script runs (`install()`, `restore()`); then `annotate(findings)`."""
  def __init__(self, capture):
    self.cap = capture
    self.allocs: list = []
    self.graph_windows: list = []    # [start step, end step) of each HCQGraph call
    self.graphs: list = []           # the HCQGraph objects called (their signals' roles)
    self._saved: list = []
    self._sites = None
    self._freed = 0                  # Buffers freed since the list was last trimmed (plus the KEPT freed ones kept)
    self._live: dict = {}            # id(Buffer) -> its latest Alloc not freed (a free or a view's base found in O(1))

  def install(self) -> "MemoryNames":
    from tinygrad.device import Buffer
    orig_alloc, orig_free = Buffer.__dict__["allocate"], Buffer.__dict__["deallocate"]
    # (hcqdsl's own time: `--stats` counts it; a Buffer with no address, or one tinygrad's mock GPU makes for its own
    # emulation — a wave's registers, its LDS —, is no memory of the program's: passed by)
    names, meter, live = self, self.cap.meter, self._live
    def allocate(b, *a, **kw):
      ret = orig_alloc(b, *a, **kw)
      try: hcq = b._buf.va_addr is not None
      except AttributeError: hcq = False
      if hcq and not _mock_own(sys._getframe(1)):
        with meter: names.allocated(b)
      return ret
    def deallocate(b, *a, **kw):
      if id(b) in live:
        with meter: names.freed(b)
      return orig_free(b, *a, **kw)
    setattr(Buffer, "allocate", allocate)
    setattr(Buffer, "deallocate", deallocate)
    self._saved += [(Buffer, "allocate", orig_alloc), (Buffer, "deallocate", orig_free)]
    try:
      from tinygrad.runtime.graph.hcq import HCQGraph
      orig_call = HCQGraph.__dict__["__call__"]
      def call(g, *a, **kw):
        start = self.cap.steps()
        try: return orig_call(g, *a, **kw)
        finally:
          self.graph_windows.append((start, self.cap.steps()))
          if len(self.graph_windows) > 2 * KEPT:   # (a long run: the first two calls and the latest KEPT are what a report names)
            self.graph_windows[2:] = self.graph_windows[-KEPT:]
          if not any(x() is g for x in self.graphs): self.graphs.append(weakref.ref(g))
      setattr(HCQGraph, "__call__", call)
      self._saved.append((HCQGraph, "__call__", orig_call))
    except ImportError: pass
    self._sites = install_sites(self._saved)
    return self

  def restore(self) -> None: restore_sites(self._saved, self._sites)

  def allocated(self, b) -> None:
    try: addr = int(b._buf.va_addr)
    except Exception: return   # (not an HCQ buffer: the CPU's, a disk's)
    view = getattr(b, "_base", None) is not None
    if view:
      base = b._base
      if (a := self._live.get(id(base))) is not None and a.ref is not None and a.ref() is base and a.freed is None: a.arena = True
    a = Alloc(addr, addr + int(b.nbytes), str(b.dtype.name), int(b.size), str(b.device), user_site(3), self.cap.steps(), view=view,
              ref=weakref.ref(b))
    self.allocs.append(a)
    self._live[id(b)] = a

  def freed(self, b) -> None:
    if (a := self._live.pop(id(b), None)) is not None and a.ref is not None and a.ref() is b and a.freed is None:
      a.freed = self.cap.steps()
    self._freed += 1
    if self._freed > 2 * KEPT:   # (a long run: the live Buffers and the latest KEPT freed ones, memory bounded by them)
      freed = [a for a in self.allocs if a.freed is not None]
      drop = {id(a) for a in freed[:len(freed) - KEPT]}
      self.allocs = [a for a in self.allocs if id(a) not in drop]
      for k in [k for k, a in self._live.items() if a.ref is None or a.ref() is None]: del self._live[k]   # (Buffers gone unfreed)
      self._freed = KEPT

  # ---- naming
  def step_of(self, cmd) -> Optional[int]:
    """The host step of the submission a finding's command was in (its ring and offset)."""
    if getattr(cmd, "ring", None) is None or cmd.offset is None: return None
    for i, h in enumerate(self.cap.host):
      if h.get("op") == "submit" and h["queue"] == cmd.ring and h["start"] <= cmd.offset < h["start"] + h["length"]: return i
    return None

  def tensor_at(self, lo: int, hi: int) -> Optional[str]:
    """The live tensor whose buffer holds [lo, hi): its dtype, shape and the line that made it."""
    if self._sites is None: return None
    for ref, site in list(self._sites.site.items()):
      t = ref()
      if t is None: continue
      try:
        if not t.uop.is_realized: continue
        bufs = [x for x in (getattr(t.uop.base.realized, "bufs", None) or [t.uop.base.realized]) if x.is_allocated()]
      except Exception: continue
      for b in bufs:
        try: a = int(b._buf.va_addr)
        except Exception: continue
        if a <= lo and hi <= a + b.nbytes:
          src = f" `{site[2]}`" if site[2] else ""
          return f"tensor{src} ({t.dtype.name}[{', '.join(map(str, t.shape))}]) made at {site[0]}:{site[1]}"
    return None

  def what(self, name: str, lo: int, hi: int, step: Optional[int]) -> str:
    """`name[lo:hi]` (a lifted buffer) in tinygrad's words."""
    m = _NAME.match(name)
    if m is None: return "?"
    if name.startswith("kargs_"):
      return "a kernel-argument block (tinygrad's kernel-argument allocator: HCQProgram.fill_kernargs, or HCQGraph's for its launches)"
    base = int(m.group(2), 16)
    a0, a1 = base + lo, base + hi
    out = []
    for k, call in enumerate(getattr(self.cap, "graph_calls", []) or []):
      for i, row in enumerate(call.get("inputs") or []):
        if row and any(r is not None and r[0] <= a0 and a1 <= r[0] + r[1] for r in row):
          out.append(f"input {i} of TinyJit's graph call {k + 1}")
          break
      if out: break
    live = [a for a in self.allocs if a.addr <= a0 and a1 <= a.end and (step is None or (a.step <= step and (a.freed is None or a.freed > step)))]
    live.sort(key=lambda a: (a.end - a.addr, -a.step))
    if live:
      a = live[0]
      what = f"a {a.dtype} buffer of {a.size} elements on {a.device}"
      if a.view: what += f", a view at byte {a0 - next((x.addr for x in live if x.arena), a.addr)} of a memory planner's arena"
      elif a.arena: what = f"a memory planner's arena on {a.device} ({a.end - a.addr} bytes)"
      what += f", allocated at {a.site[0]}:{a.site[1]}" + (f" (`{a.site[2]}`)" if a.site[2] else "")
      out.append(what)
    if (t := self.tensor_at(a0, a1)) is not None: out.append(f"held by the {t}")
    if (st := self.staging(a0)) is not None: out.append(st)
    return "; ".join(out) if out else "memory tinygrad allocated outside a tinygrad Buffer (a runtime's own)"

  def staging(self, addr: int) -> Optional[str]:
    """Classic HCQ's host staging buffers (HCQAllocator.b), or hcq2's (the CPU device's memory)."""
    for d in self.cap.devices.values():
      dev = d.get("_dev")
      for b in getattr(getattr(dev, "allocator", None), "b", None) or ():
        try:
          if int(b.va_addr) <= addr < int(b.va_addr) + int(b.size):
            return f"{d['tinygrad']}'s host staging buffer (HCQAllocator.b: the chunks `_copyin` and `_copyout` stage through)"
        except Exception: continue
    return None

  def signal_role(self, addr: int) -> Optional[str]:
    for d in self.cap.devices.values():
      dev = d.get("_dev")
      for name in ("timeline_signal",):
        sig = getattr(dev, name, None)
        if sig is not None and getattr(sig, "value_addr", None) == addr: return f"the timeline signal of {d['tinygrad']}"
    for k, gref in enumerate(self.graphs):
      for key, sig in getattr(gref(), "signals", {}).items():
        if getattr(sig, "value_addr", None) == addr:
          role = "the kickoff signal of " + str(getattr(key, "device", "?")) if hasattr(key, "device") and hasattr(key, "allocator") \
            else "a queue's signal"
          return f"{role} in HCQGraph {k + 1}"
    return None

  def memory(self, f) -> list:
    """[{"name", "what"}] for each memory range a finding's message names."""
    step = min((s for c in f.commands if (s := self.step_of(c)) is not None), default=None)
    out, seen = [], set()
    for m in _NAME.finditer(f.message):
      name, lo, hi = m.group(1), m.group(3), m.group(4)
      key = (name, lo, hi)
      if key in seen: continue
      seen.add(key)
      rng = f"{name}[{lo}:{hi}]" if lo is not None else name
      out.append({"name": rng, "what": self.what(name, int(lo or 0), int(hi or 1), step)})
    named: set = set()
    for m in re.finditer(r"\b(s_([0-9a-f]+)|tl_gpu\d+)\b", f.message):
      if m.group(2) is not None and (role := self.signal_role(int(m.group(2), 16))) is not None and m.group(1) not in named:
        named.add(m.group(1))
        out.append({"name": m.group(1), "what": role})
    return out

  def whose(self, f) -> Optional[str]:
    """What to do about a race: whose code should order its two commands."""
    if f.code != "race" or len(f.commands) < 2: return None
    later, earlier = f.commands[0], f.commands[1]
    def said(c): return f"{c.queue} ({c.what.split(' (')[0]} on {c.device})"
    if self.cap.path_kind == "hcq2": key = "hcq2"
    else:
      steps = [self.step_of(c) for c in (later, earlier)]
      in_graph = [s is not None and any(a <= s < b for a, b in self.graph_windows) for s in steps]
      key = "graph" if any(in_graph) else "eager"
    return WHOSE[key].format(later=said(later), earlier=said(earlier))

  def annotate(self, findings: list) -> None:
    for f in findings:
      try:
        f.memory = self.memory(f)
        f.what_to_do = self.whose(f) or f.what_to_do
      except Exception: pass   # naming is a courtesy: a finding is reported without it rather than not at all
