"""`hcqdsl.capture()` / `hcqdsl capture SCRIPT.py[:FN]`: record what tinygrad's AMD runtime gives the GPU, at the ring:
each time a queue's doorbell is rung, the dwords between the previous and the new write pointer (with the indirect
buffers they point at spliced in, as the command processor reads them), the kernel-argument blocks and the contents of
the buffers those dwords touch, the values of the signals they wait on and write — all read before the GPU runs them —
and, in order with the submissions, the host's signal writes and waits. Kernel names and code objects come from
tinygrad's AMDProgram objects by their code address, buffer devices from their allocations, so queues built before
the capture started (a warmed-up TinyJit's HCQGraph) are recorded whole. Both of tinygrad's AMD paths are recorded:
classic HCQ/HCQGraph (`AMDQueueDesc.signal_doorbell`) and hcq2 (`HCQ2=1`: each hcq program the submitter runs, its
queues' write pointers before and after). Recording only reads: every wrapped method calls tinygrad's own with the
same arguments. The manifest's format is docs/lift.md's; `hcqdsl lift` turns it into a checkable program."""
from __future__ import annotations
import bisect, ctypes, functools, gc, hashlib, importlib, importlib.abc, importlib.util, json, pathlib, sys, time, types
from typing import Optional
import attrs
import numpy as np
from ..lang.lexical import identifier
from ..ir import U32_MAX
from ..lift.schema import MANIFEST_KIND, MANIFEST_VERSION, encode
from ..amd import pm4 as _pm4, sdma as _sdma
from ..amd.meaning import meaning, Registers, splice, SIGNAL_MEMORY, STORES, pointer_dwords
from .shapes import Shapes, Shape

__all__ = ["capture", "Capture", "Ring", "user_frames", "user_stack", "source"]

# the recorders of other vendors' queues: a module of this package with `install(cap)` -> the tinygrad runtime it hooks.
# Installed on entering a capture when tinygrad has imported that runtime already, else when it does (an AMD program
# never imports ops_nv and its generated headers, ~15 MiB: a capture must not either); they record through Capture's
# public methods (device, add_allocation, use, remember, note_signal, ...)
VENDOR_RECORDERS = {"capture_nv": "tinygrad.runtime.ops_nv"}

U64 = (1 << 64) - 1
KEPT = 8192   # what a bounded capture keeps per address or shape, at most (the oldest go first)
BLOCK_VARIANTS = 4   # kernel-argument blocks kept per address (the least recently seen go first)
SHAPE_FACTS = 1024   # (shape, facts) whose reading a bounded capture keeps (an eager dispatch's facts name a fresh
                     # kernel-argument address each time and never come back: they go first)
GROUP_BYTES = 1 << 16   # a submission's kernel-argument blocks read at once when they lie within this many bytes
# sanitize checks what it computes the fast way against the slow way (tests; docs/sanitize.md, "Cost")
VERIFY = bool(__import__("os").environ.get("HCQDSL_SANITIZE_VERIFY"))
_OWN = (str(pathlib.Path(__file__).resolve().parents[1]),)  # hcqdsl's own frames are never the user's line

def _tinygrad_dirs() -> tuple:
  """Directories whose frames are never the user's line: tinygrad's, its mock GPU's (a checkout's test/mockgpu and
  extra/), and the test runner's (pytest, pluggy: `--hcq-sanitize` runs each test under the sanitizer)."""
  import tinygrad
  dirs = [str(pathlib.Path(tinygrad.__file__).resolve().parent)]
  try:
    import test.mockgpu as mg  # tinygrad's mock GPU (a tinygrad checkout's test/ and extra/; a namespace package: no __file__)
    root = pathlib.Path(mg.__file__ or str(next(iter(mg.__path__))) + "/__init__.py").resolve().parents[2]
    dirs += [str(root / "test" / "mockgpu"), str(root / "extra")]
  except Exception: pass
  for name in ("_pytest", "pluggy"):
    if (mod := sys.modules.get(name)) is not None and getattr(mod, "__file__", None):
      dirs.append(str(pathlib.Path(str(mod.__file__)).resolve().parent))
  return tuple(dirs)

@functools.lru_cache(maxsize=4096)
def _resolved(filename: str) -> str:
  return str(pathlib.Path(filename).resolve()) if not filename.startswith("<") else filename

USER, OWN, OTHER = 0, 1, 2   # a frame's file: the user's, hcqdsl's own, or one that is never the user's line
_KINDS: dict = {}            # skipped directories -> {file name: its kind}

def _kind(filename: str, skip: tuple) -> int:
  kinds = _KINDS.setdefault(skip, {})
  k = kinds.get(filename)
  if k is None:
    p = _resolved(filename)
    k = kinds[filename] = (OWN if p.startswith(_OWN) else OTHER if p.startswith(skip) or p.startswith("<") or
                           ("/lib/python3" in p and "site-packages" not in p) else USER)
  return k

_STACKS: dict = {}   # every stack recorded, interned: the same tuple object for the same frames (a loop's steps share one)

def user_stack(skip: tuple = (), depth: int = 1) -> tuple:
  """The user's frames of the current call stack, outermost first, as an interned tuple of (file, line, function): the
  innermost user frame and the user frames outside it up to the first frame of hcqdsl's own (the CLI that ran the script,
  `hcqdsl sanitize`'s console script and runpy above it, or the pytest plugin: never the user's); tinygrad's, its mock
  GPU's, the test runner's, Python's and hcqdsl's frames are left out. A walk of the frames, no source read (`source`
  reads a line when it is shown). `depth`: frames of the caller's own to skip."""
  f: Optional[types.FrameType] = sys._getframe(depth + 1)
  out: list = []
  kinds = _KINDS.get(skip)
  if kinds is None: kinds = _KINDS.setdefault(skip, {})
  while f is not None:
    code = f.f_code
    k = kinds.get(code.co_filename)
    if k is None: k = _kind(code.co_filename, skip)
    if k == USER: out.append((code.co_filename, f.f_lineno, code.co_name))
    elif k == OWN and out: break
    f = f.f_back
  key = tuple(reversed(out))
  return _STACKS.setdefault(key, key)

def source(file: str, line: int) -> str:
  """The source line (stripped) of a frame, for a report."""
  import linecache
  return linecache.getline(file, line).strip()
def useful_extent(extent: Optional[int], size: Optional[int]) -> bool:
  """An extent worth recording: less than the argument's bytes (a bound at or past them says nothing more; an index
  tinygrad cannot bound reads as a huge vmax)."""
  return extent is not None and 0 < extent < (size if isinstance(size, int) and size > 0 else U32_MAX)

def param_extents(ast) -> dict:
  """Buffer argument -> the bytes its kernel touches from the argument's pointer on, from tinygrad's kernel (a PROGRAM's
  SINK: every use of a PARAM is a SHRINK(PARAM, start, width) or an INDEX(PARAM, i), whose bounds tinygrad knows):
  the end of the last element it may touch. An argument used any other way, or unbounded, is left out (its signature's
  bytes stand)."""
  try:
    from tinygrad.uop.ops import Ops
    sink = ast.src[0] if ast.op is Ops.PROGRAM else ast
    ends: dict = {}
    unknown: set = set()
    for u in sink.toposort():
      for k, p in enumerate(u.src):
        if p.op is not Ops.PARAM or not hasattr(p.arg, "slot"): continue
        slot = p.arg.slot
        end = (u.src[1].vmax + u.src[2].vmax if u.op is Ops.SHRINK and len(u.src) == 3 else
               u.src[1].vmax + 1 if u.op is Ops.INDEX and len(u.src) >= 2 else None) if k == 0 else None
        if not isinstance(end, int) or end <= 0: unknown.add(slot)
        else: ends[slot] = max(ends.get(slot, 0), end * p.arg.dtype.itemsize)
    return {s: e for s, e in ends.items() if s not in unknown}
  except Exception: return {}   # (a kernel of another shape: the signature's bytes stand)

def user_frames(skip: tuple = (), stack: Optional[list] = None) -> list:
  """The user's frames (user_stack's rule) of the call stack, or of `stack` ((file, line, function, source) tuples,
  outermost first), outermost first, with their source lines: [(file, line, function, source line)]. The last one is
  the user's line that caused what is being recorded."""
  if stack is None: return [(f, ln, n, source(f, ln)) for f, ln, n in user_stack(skip, 2)]
  out: list = []
  for file, line, name, src in reversed(stack):
    k = _kind(file, skip)
    if k == USER: out.append((file, line, name, (src or "").strip()))
    elif k == OWN and out: break
  return out[::-1]

@functools.lru_cache(maxsize=64)
def ring_words(addr: int, n: int) -> np.ndarray:
  """A ring's memory (n dwords at addr) as an array, read in place."""
  return np.ctypeslib.as_array((ctypes.c_uint32 * n).from_address(addr))

def ring_span(words: np.ndarray, dws: range) -> np.ndarray:
  """The dwords `dws` (pointer_dwords': counted from the ring's start, not wrapped) of a ring's memory `words`, wrapped,
  as a copy (the ring is written again)."""
  n, lo, k = len(words), dws.start % len(words), dws.stop - dws.start
  return words[lo:lo + k].copy() if lo + k <= n else np.concatenate([words[lo:], words[:lo + k - n]])

def _cpu_buffer(b) -> bool:
  """Is HCQBuffer `b` tinygrad's CPU device's (classic HCQ records none: `_register_alloc`)?"""
  return type(getattr(b, "owner", None)).__name__ == "CPUDevice"

class _OnImport:
  """A meta-path finder that calls `then()` once module `name` has been imported (and is only watching: the module is
  found and loaded by the finders after it, as it would be without it)."""
  def __init__(self, name: str, then):
    self.name, self.then, self.busy = name, then, False
  def find_spec(self, fullname: str, path=None, target=None):
    if fullname != self.name or self.busy: return None
    self.busy = True
    try: spec = importlib.util.find_spec(fullname)
    except Exception: return None   # (the finders after this one say so again, to the importer)
    finally: self.busy = False
    if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"): return spec
    loader, then = spec.loader, self.then
    class Watched(importlib.abc.Loader):   # (the loader's own, then `then`; a finder must not patch a shared loader)
      def __getattr__(self, name): return getattr(loader, name)   # (get_source, is_package, ...: the loader's)
      def create_module(self, spec): return loader.create_module(spec)
      def exec_module(self, module):
        loader.exec_module(module)
        if self_ in sys.meta_path: sys.meta_path.remove(self_)
        try: then()
        except Exception: pass   # (a recorder that cannot install records nothing; the program's import goes on)
    self_ = self
    spec.loader = Watched()
    return spec

class Meter:
  """hcqdsl's own CPU time inside its hooks (`hcqdsl sanitize --stats`, docs/sanitize.md "Cost"): thread CPU time, from
  entering hcqdsl's code to leaving it — what tinygrad and its mock do in between is not counted —, by what the program
  is doing: `graph` inside a TinyJit replay (tinygrad's CapturedJit: its HCQGraph launches), else `eager`; and the
  submissions made in each."""
  def __init__(self):
    self.depth, self.t0, self.kind = 0, 0.0, "eager"
    self.cpu = {"graph": 0.0, "eager": 0.0}
    self.submissions = {"graph": 0, "eager": 0}
    self.marks: list = []   # (submissions, cpu) by kind, at 64, 128, 256, ... submissions: the cost after warm-up

  def submitted(self) -> None:
    """One more submission of the current kind."""
    self.submissions[self.kind] += 1
    n = self.submissions["graph"] + self.submissions["eager"]
    if n >= 64 and n & (n - 1) == 0: self.marks.append((dict(self.submissions), dict(self.cpu)))

  def recent(self) -> dict:
    """µs per submission by kind over the run's later half (since the last mark at half its submissions or fewer)."""
    n = self.submissions["graph"] + self.submissions["eager"]
    base = next(((s, c) for s, c in reversed(self.marks) if sum(s.values()) * 2 <= n), ({"graph": 0, "eager": 0}, {"graph": 0.0, "eager": 0.0}))
    return {k: ((self.cpu[k] - base[1][k]) / (self.submissions[k] - base[0][k]) * 1e6 if self.submissions[k] > base[0][k] else None)
            for k in self.cpu}
  def __enter__(self) -> "Meter":
    if self.depth == 0: self.t0 = time.thread_time()
    self.depth += 1
    return self
  def __exit__(self, *exc) -> None:
    self.depth -= 1
    if self.depth == 0: self.cpu[self.kind] += time.thread_time() - self.t0

class _Allocations:
  """Every allocation tinygrad made on an AMD device (and its host buffers): address, size, device, CPU-readable."""
  def __init__(self):
    self.starts, self.items, self.version = [], [], 0
    # the latest allocations (what may change an address's allocation): their version, start and end, as rows
    self.added, self.nadded = np.zeros((64, 3), dtype=np.int64), 0
  def add(self, addr: int, size: int, info: dict):
    self.version += 1
    if self.nadded == len(self.added):
      if self.nadded >= 4096: self.added, self.nadded = self.added[2048:].copy(), self.nadded - 2048
      self.added = np.concatenate([self.added, np.zeros_like(self.added)])
    self.added[self.nadded] = (self.version, addr, addr + size)
    self.nadded += 1
    i = bisect.bisect_left(self.starts, addr)
    if i < len(self.starts) and self.starts[i] == addr:
      self.items[i] = (addr, size, info)
      return
    self.starts.insert(i, addr)
    self.items.insert(i, (addr, size, info))
  def remove(self, addr: int):
    i = bisect.bisect_left(self.starts, addr)
    if i < len(self.starts) and self.starts[i] == addr: del self.starts[i], self.items[i]
  def find(self, addr: int) -> Optional[tuple]:
    i = bisect.bisect_right(self.starts, addr) - 1
    if i >= 0 and self.items[i][0] <= addr < self.items[i][0] + self.items[i][1]: return self.items[i]
    return None

@attrs.define(eq=False)
class Ring:
  """One hardware queue's ring as the capture saw it: the manifest's `queues[]` entry, and where reading resumes."""
  name: str           # the manifest's queue name: comp_gpu0, copy1_gpu0
  device: str         # the manifest's device name (gpu0)
  target: str         # the device's arch (gfx1100)
  engine: str         # compute (PM4) | copy (SDMA)
  put: int            # the write pointer (the runtime's unit) up to which the ring has been recorded
  key: object         # the runtime's queue object (kept alive so its id is not reused)
  dwords: list = attrs.field(factory=list)   # every dword submitted, in order (submissions index into it)

class Capture:
  """Installs the recording wrappers while active (`with Capture() as cap:`); `cap.manifest()` is the manifest dict,
  `cap.save(path)` writes it. `contents`: also record buffer contents (before each submission that touches them, and
  at the end), so the lift carries data and `expect`s; `stacks`: record the user's call stack of each host step (for
  sanitize's reports). `on_step(cap, step)` is called after each host step is recorded. `handover`: each step holds
  its own dwords (`dw`), the memory read before it (`mem`: [(addr, bytes)]) and the allocations it used (`uses`:
  [(addr, size, device)]), for `on_step`; `bounded`: that, and nothing of a step is kept once `on_step` has it
  (sanitize's checking as the run goes: its memory is the run's live part, not its length), each signal's value is
  read once, a shape's facts are reused, and `manifest()` has no steps; `retain` (`sanitize --keep`) keeps the steps
  for `manifest()` all the same. Every step has its index (`i`) and the tinygrad call it was made in (`call`, counted by whoever sets
  `cap.call`). Nesting is refused."""
  _active: Optional["Capture"] = None

  def __init__(self, path=None, contents: bool = True, stacks: bool = False, on_step=None, bounded: bool = False, handover: bool = False,
               retain: Optional[bool] = None):
    self.path, self.contents, self.stacks, self.on_step, self.bounded = path, contents, stacks, on_step, bounded
    self.retain = not bounded if retain is None else retain
    self.handover = handover or bounded
    self._mem_mark = 0        # handover: the readings before this are an earlier step's
    # sanitize (handover): submissions read by shapes (shapes.py: decoded once per shape), allocations and kernel-argument
    # blocks by address as last seen, each signal's value read once (the whole run's lift reads its first reading)
    self.shapes: Optional[Shapes] = Shapes(self.read) if self.handover else None
    self._found: dict = {}    # address -> its allocation (start, size, info), or None (reset when allocations change, or full)
    # kernel-argument address -> (the kernel, its last few blocks there: (bytes, the allocations its pointers use), the
    # latest first; an HCQGraph's inputs alternate between buffers)
    self._blocks: dict = {}
    self._read_once: set = set()
    self._shape_done: dict = {}   # (shape number, id of its facts) -> what they did last (bounded: reused when they are the same)
    self.call = 0             # the tinygrad call being made (the sanitizer counts them)
    self.meter = Meter()      # hcqdsl's CPU time in its hooks
    self._nsteps = 0
    self._uses: list = []     # bounded: the allocations used since the last step
    self.devices: dict = {}   # id(dev) -> {"name", "index", "arch", "tinygrad", "_dev"}
    self.duplicates: list = []   # (tinygrad's name, the manifest's) of a second object of an open device (register_device)
    self.rings: dict = {}     # id(queue object) -> Ring
    self.host: list = []
    self.signals: dict = {}   # addr -> {"addr", "value", "device"?, "timeline"?, "mailbox"?}
    self.allocs = _Allocations()
    self.used: dict = {}      # allocation addr -> (size, device name or None)
    self.memory: list = []    # (addr, bytes, step)
    self.last: dict = {}      # (addr, size) -> bytes last recorded
    self.kernels: dict = {}   # prog addr -> {"name", "lib", "signature", "kernargs", "device"}
    self.path_kind: Optional[str] = None
    self._submissions = 0
    self._saved: list = []
    self._staging: dict = {}     # id(device) -> (its allocator's staging buffers, how many, their spans)
    self._cpu_memory = True     # record allocations of tinygrad's CPU device (not on classic HCQ: _register_alloc)
    self._watchers: list = []   # vendor recorders waiting for tinygrad to import their runtime (_OnImport)
    self._in_init = 0
    self._skip = ()
    self._puts: dict = {}     # id(queue object) -> its write pointer when the capture started
    self._modes: dict = {}    # id(AMDProgram) -> (outs, ins)
    self._runtimes: dict = {} # id(runtime) -> (its PROGRAM, the runtime, its (outs, ins, extents) or None)
    self._unknown: set = set()
    self.program_finders: list = []   # fn(prog addr) -> kernel record or None: a runtime's programs without objects (hcq2)
    self.graph_calls: list = []  # per HCQGraph call: {"step", "graph", "inputs": [[(addr, nbytes) per device] per input]}
    self._graphs: dict = {}      # id(HCQGraph) -> (index, the graph: kept so its id is not reused)
    self.arch_of = lambda dev: str(dev.arch)   # a device's arch as the manifest names it (a vendor's recorder may map it)

  # ---- what tinygrad objects tell us
  def register_device(self, dev) -> str:
    """The manifest's name of tinygrad device `dev` (gpuN, N its index), registered at its first use. A second object
    for a device tinygrad already opened (two script threads' first uses of `Device["AMD"]` racing: its cache is not
    thread-safe, and each object has its own queues and timeline) is a device of its own, at the next free index
    (`duplicates` names it)."""
    if id(dev) not in self.devices:
      name = str(getattr(dev, "device", "AMD"))
      index = getattr(dev, "device_id", None)
      if not isinstance(index, int):
        _, _, idx = name.partition(":")
        index = int(idx) if idx.isdigit() else 0
      taken = {d["index"] for d in self.devices.values()}
      if index in taken:
        index = next(i for i in range(len(taken) + 1) if i not in taken)
        self.duplicates.append((name, f"gpu{index}"))
      self.devices[id(dev)] = {"name": f"gpu{index}", "index": index, "arch": self.arch_of(dev), "tinygrad": name, "_dev": dev}
      mb = getattr(dev, "queue_event_mailbox_ptr", None)
      if isinstance(mb, int) and not (hasattr(dev, "is_am") and dev.is_am()):
        self.devices[id(dev)]["mailbox"] = mb
        self.signals.setdefault(mb, {"addr": mb, "value": self._read_u32(mb), "mailbox": True})
    return self.devices[id(dev)]["name"]

  def _register_alloc(self, b) -> None:
    # (classic HCQ: tinygrad's CPU device's memory is no AMD or NV packet's — its copies to a GPU go through the GPU's own
    # staging memory —, and tinygrad's mock GPU allocates it for every wave it emulates: passed by. hcq2's submitter
    # runs on a CPU-side device whose memory its queues do use)
    if not self._cpu_memory and _cpu_buffer(b): return
    try: addr, size = int(b.va_addr), int(b.size)
    except (TypeError, ValueError, AttributeError): return
    if size <= 0 or getattr(b, "_base", None) is not None: return
    owner, meta = getattr(b, "owner", None), getattr(b, "meta", None)
    flags = getattr(meta, "flags", None)
    vram = bool(flags & 1) if isinstance(flags, int) else False   # KFD_IOC_ALLOC_MEM_FLAGS_VRAM
    mock = owner is not None and type(getattr(owner, "iface", None)).__name__.startswith("MOCK")
    readable = getattr(b, "view", None) is not None or mock or not vram
    self.allocs.add(addr, size, {"owner": owner, "vram": vram, "readable": readable})

  def _register_program(self, prg) -> None:
    try: addr = int(prg.prog_addr)
    except (AttributeError, TypeError, ValueError): return
    sig = []
    for s in getattr(prg, "signature", ()) or ():
      try: sig.append(self.sig_entry(s))
      except Exception: sig.append({"name": None})
    self.kernels[addr] = {"name": str(prg.name), "lib": bytes(getattr(prg, "lib", b"") or b""), "signature": sig,
                          "kernargs": int(getattr(prg, "kernargs_segment_size", 0) or 0), "_prg": prg}
    if id(prg) in self._modes: self._set_modes(addr, *self._modes[id(prg)])

  def _set_modes(self, addr: int, outs, ins, extents: Optional[dict] = None) -> None:
    """tinygrad's own access modes of a program's buffer arguments (its PROGRAM's ProgramInfo outs/ins), and the bytes
    each touches from its pointer on (`extent`, when its kernel says: a view's kernel reads part of its buffer)."""
    bufs = [s for s in self.kernels[addr]["signature"] if s.get("name") is None]
    for i, s in enumerate(bufs):
      s["mode"] = "inout" if i in outs and i in ins else "out" if i in outs else "in" if i in ins else "inout"
      if extents and useful_extent(extents.get(i), s.get("bytes")): s["extent"] = extents[i]

  def _on_runtime(self, device, ast, rt) -> None:
    got = self._runtimes.get(id(rt))
    if got is None or got[0] is not ast or got[1] is not rt:   # (tinygrad asks for a runtime at every call: read once per kernel)
      info = getattr(ast, "arg", None)
      outs, ins = tuple(getattr(info, "outs", ()) or ()), tuple(getattr(info, "ins", ()) or ())
      got = self._runtimes[id(rt)] = (ast, rt, (outs, ins, param_extents(ast)) if outs or ins else None)
    if got[2] is None: return
    self._modes[id(rt)] = got[2]
    addr: Optional[int]
    try: addr = int(rt.prog_addr)
    except (AttributeError, TypeError, ValueError):   # (a program with no prog_addr, NV's: by the object recorded)
      addr = next((a for a, k in self.kernels.items() if k.get("_prg") is rt), None)
    if addr is not None and addr in self.kernels: self._set_modes(addr, *self._modes[id(rt)])

  def find(self, addr: int) -> Optional[tuple]:
    """The allocation holding `addr` (remembered per address until allocations change)."""
    # (started again when allocations change, or when it holds KEPT addresses: an eager loop's kernel arguments take a
    # fresh address each dispatch, ~8 a call on a 2-GPU step, and tinygrad allocates nothing for thousands of calls)
    if self._found.get(-1) != self.allocs.version or len(self._found) > KEPT: self._found = {-1: self.allocs.version}
    try: return self._found[addr]
    except KeyError:
      a = self._found[addr] = self.allocs.find(addr)
      return a

  def read(self, addr: int, n: int) -> Optional[bytes]:
    a = self.find(addr)
    if a is None or not a[2]["readable"] or n <= 0: return None
    n = min(n, a[0] + a[1] - addr)
    return ctypes.string_at(addr, n)

  def _read_u32(self, addr: int) -> int:
    b = self.read(addr, 4)
    return int.from_bytes(b, "little") if b and len(b) == 4 else 0

  def _read_u64(self, addr: int) -> Optional[int]:
    b = self.read(addr, 8)
    return int.from_bytes(b, "little") if b and len(b) == 8 else None

  def remember(self, addr: int, n: int, step: int) -> None:
    """Record `n` bytes at `addr` as read before host step `step` runs, unless they are what was recorded last."""
    b = self.read(addr, n)
    if b is None: return
    if n > (1 << 16) and self.last.get((addr, n)) == b: return  # big and unchanged: the lift reads the last one
    self.last[(addr, n)] = b
    self.memory.append((addr, b, step))

  def use(self, addr: int) -> Optional[tuple]:
    """The allocation holding `addr` (start, size, info), marked used: the manifest lists it (None: no allocation)."""
    a = self.find(addr)
    if a is None: return None
    owner = a[2]["owner"]
    dev = self.register_device(owner) if owner is not None and a[2]["vram"] and hasattr(owner, "arch") else None
    if self.handover: self._uses.append((a[0], a[1], dev))
    if self.retain: self.used[a[0]] = (a[1], dev)
    return a

  param_extents = staticmethod(param_extents)   # (for the recorders of the recorder interface: capture_hcq2.py)
  ring_words = staticmethod(ring_words)
  ring_span = staticmethod(ring_span)
  useful_extent = staticmethod(useful_extent)

  @staticmethod
  def sig_entry(s) -> dict:
    """One (name, slot, dtype, shape) of tinygrad's program signature: a buffer (name None) or a scalar, with its bytes."""
    name, _, dt, shape = s
    n = 1
    for x in shape: n *= int(x) if isinstance(x, int) else 1
    return {"name": name, "dtype": dt.name, "itemsize": dt.itemsize, "bytes": n * dt.itemsize, "fmt": dt.fmt,
            "shape": [int(x) if isinstance(x, int) else str(x) for x in shape]}

  # ---- packets: what a submission reads and writes
  def _expand(self, dw: list, engine: str, target: str) -> list:
    """The dwords the engine executes: indirect buffers read from memory and spliced in place of their packet."""
    return [d for p in splice(dw, engine, target, self.read) for d in p.dwords]

  def _scan(self, dw: list, engine: str, target: str, step: int) -> dict:
    """Signals, kernel arguments and buffers the dwords refer to; records their values/contents as of now."""
    dec = (_pm4 if engine == "compute" else _sdma).decoder(target)
    sigs: dict = {}
    regs = Registers()
    for p in dec.decode(dw):
      if p.raw: continue
      m, addr = meaning(p), None
      at = m.addr if m is not None else None
      if m is not None and at is not None and m.kind == "poll":   # poll_bit: a buffer's word
        if self.use(at) is not None and self.contents: self.remember(at, m.size, step)
      elif m is not None and at is not None and m.kind in STORES: self.use(at)   # HWQueue.write: a store into a buffer, no signal
      elif m is not None and m.kind in SIGNAL_MEMORY: addr = at
      elif m is not None and m.kind == "copy":
        for a in (m.src, m.addr):
          if a is not None and self.use(a) is not None and self.contents: self.remember(a, m.size, step)
      elif (d := regs.see(p)) is not None: self._dispatch(d.program, d.kernargs, step)
      if addr is not None and addr not in sigs:
        if addr not in self.signals and self.allocs.find(addr) is None: continue
        if addr not in self.signals: self.register_signal(addr)
        if (v := self._read_u64(addr)) is not None: sigs[addr] = v
    return sigs

  def _dispatch(self, prog: int, ka: int, step: int) -> None:
    k = self.kernels.get(prog)
    if self.shapes is not None and k is not None and (got := self._blocks.get(ka)) is not None and got[0] is k:
      # (sanitize: a block as it was at one of its last dispatches uses what it used then)
      seen = got[1]
      blk = self.read(ka, len(seen[0][0]))
      for n, (last, uses) in enumerate(seen):
        if blk == last:
          self.memory.append((ka, last, step))   # (the same bytes object: what reads it can tell it is unchanged)
          self._uses += uses
          if n: seen.insert(0, seen.pop(n))
          return
    if k is None and prog not in self._unknown:
      if (h := next((h for f in self.program_finders if (h := f(prog)) is not None), None)) is not None: self.kernels[prog] = h
      else:
        for obj in gc.get_objects():  # a program made while nothing was hooked (another thread, an odd path)
          if type(obj).__name__ == "AMDProgram" and getattr(obj, "prog_addr", None) == prog:
            self._register_program(obj)
            break
      k = self.kernels.get(prog)
      if k is None and not self.program_finders: self._unknown.add(prog)   # (a finder's runtime may load it later)
    sig = k["signature"] if k else []
    nbufs = sum(1 for s in sig if s.get("name") is None)
    size = k["kernargs"] if k and k["kernargs"] else 8 * max(nbufs, 1) + 4 * (len(sig) - nbufs)
    blk = self.read(ka, size)
    if blk is None: return
    mark = len(self._uses)
    self.use(ka)
    self.memory.append((ka, blk, step))
    if self.contents: self.last[(ka, len(blk))] = blk
    for i in range(min(nbufs, len(blk) // 8)):
      ptr = int.from_bytes(blk[8 * i:8 * i + 8], "little")
      if (a := self.use(ptr)) is not None and self.contents:
        # a small allocation whole (the JIT's planner packs several buffers into one: the bytes beside the argument
        # are the initial state of the others), a big one from the pointer over the argument's bytes
        if a[1] <= (1 << 16): self.remember(a[0], a[1], step)
        else: self.remember(ptr, min(sig[i].get("bytes") or (a[0] + a[1] - ptr), a[0] + a[1] - ptr), step)
    if self.shapes is not None and k is not None:
      got = self._blocks.get(ka)
      if got is None or got[0] is not k: got = self._blocks[ka] = (k, list[tuple]())
      got[1].insert(0, (blk, self._uses[mark:]))
      del got[1][BLOCK_VARIANTS:]
      if len(self._blocks) > KEPT: self._blocks.pop(next(iter(self._blocks)))   # (the oldest: an eager loop's bump allocator moves on)

  def _dispatches(self, dispatches: list, step: int, seen: list) -> None:
    """`_dispatch` of each of a submission's dispatches, their blocks read at once: a replay of an HCQGraph has the
    kernel-argument blocks of its dispatches side by side in one allocation, and as they were at one of its last few
    submissions (`seen`: (bytes from the first block's start to the last one's end, [(address, block)], the
    allocations they use, their kernels), the latest first) they use what they used then — the same block objects."""
    if len(dispatches) < 2 or self.contents:
      for prog, ka in dispatches: self._dispatch(prog, ka, step)
      return
    kernels = self.kernels
    if seen:
      lo, hi = seen[0][0]
      now = self.read(lo, hi - lo)
      for n, (_, blob, blocks, uses, ks) in enumerate(seen):
        if now == blob and all(kernels.get(prog) is k for (prog, _), k in zip(dispatches, ks)):
          self.memory += [(ka, b, step) for ka, b in blocks]
          self._uses += uses
          if n: seen.insert(0, seen.pop(n))
          return
    mark, umark = len(self.memory), len(self._uses)
    for prog, ka in dispatches: self._dispatch(prog, ka, step)
    blocks = [(ka, b) for ka, b, _ in self.memory[mark:]]
    ks = tuple(kernels.get(prog) for prog, _ in dispatches)
    if len(blocks) != len(dispatches) or any(k is None for k in ks): return
    lo, hi = min(ka for ka, _ in blocks), max(ka + len(b) for ka, b in blocks)
    if hi - lo > GROUP_BYTES or (blob := self.read(lo, hi - lo)) is None or len(blob) != hi - lo: return
    seen.insert(0, ((lo, hi), blob, blocks, self._uses[umark:], ks))
    del seen[BLOCK_VARIANTS:]

  # ---- hooks
  def _on_exec(self, q, prg, args_state, *rest, **kw) -> None:
    """A program the recorder has not seen (made before it started by a path it does not scan, or a stand-in): its
    name and argument layout from the exec call (tinygrad's CLikeArgsState: buffers, then values)."""
    try: addr = int(prg.prog_addr)
    except (AttributeError, TypeError, ValueError): return
    if addr in self.kernels: return
    if type(prg).__name__ == "AMDProgram":
      self._register_program(prg)
      return
    sig = [{"name": None} for _ in getattr(args_state, "bufs", ())] + [{"name": f"v{i}", "dtype": "int", "itemsize": 4, "bytes": 4}
                                                                      for i, _ in enumerate(getattr(args_state, "vals", ()))]
    self.kernels[addr] = {"name": str(getattr(prg, "name", f"k_{addr:x}")), "lib": b"", "signature": sig, "kernargs": 0, "_prg": prg}

  def _on_graph_call(self, graph, input_uops=(), *rest, **kw) -> None:
    """HCQGraph.__call__: the graph's inputs at this call, as tinygrad hands them over (`input_uops`: one buffer per
    input, a MultiBuffer's per device), with their contents. The lift reads from them which memory is a launch's input,
    so a command that kept an earlier call's input address (an input replacement missed) is recognized as such."""
    step = self.steps()
    gid = self._graphs.setdefault(id(graph), (len(self._graphs), graph))[0]
    inputs: list = []
    for u in input_uops:
      try: b = u.buffer
      except Exception:
        inputs.append(None)
        continue
      row: list = []
      for x in getattr(b, "bufs", None) or [b]:
        try: addr, n = int(x._buf.va_addr), int(x.nbytes)
        except Exception:
          row.append(None)
          continue
        row.append((addr, n))
        if self.use(addr) is not None and self.contents: self.remember(addr, n, step)
      inputs.append(row)
    self.graph_calls.append({"step": step, "graph": gid, "inputs": inputs})

  # ---- the recorder interface: what a runtime's hooks call (classic HCQ's below, capture_hcq2.py's, a vendor's in
  # VENDOR_RECORDERS); vendor-neutral but for `submit`, which reads AMD packets (a vendor's recorder calls `submitted`)
  def ring(self, key, dev, engine: str, idx: int) -> Ring:
    """The ring of queue object `key` (one per hardware queue), registered at its first use: device `dev`'s compute
    ring or its copy ring `idx`; recording resumes from the write pointer it had when the capture started."""
    if id(key) not in self.rings:
      dname = self.register_device(dev)
      self.rings[id(key)] = Ring(f"{'comp' if engine == 'compute' else f'copy{idx}'}_{dname}", dname, self.arch_of(dev), engine,
                                 self._puts.get(id(key), 0), key)
    return self.rings[id(key)]

  def ring_started_at(self, key, put: int) -> None:
    """Queue object `key`'s write pointer when the capture started: what the ring held before is no submission of it."""
    self._puts[id(key)] = put

  def submit(self, ring: Ring, new, dev, path: str) -> None:
    """A submission: `new`, the dwords between the ring's previous and new write pointer, before the GPU runs them (the
    indirect buffers they point at are read and spliced in, the memory and signals they use recorded as of now).
    `path`: the runtime that submitted (the manifest's producer: hcq, hcq2)."""
    self.path_kind = self.path_kind or path
    if self.shapes is not None:   # (sanitize: by shapes)
      self._submit_shaped(ring, new if isinstance(new, np.ndarray) else np.asarray(new, dtype=np.uint32), dev)
      return
    dw = self._expand(new, ring.engine, ring.target)
    if ring.engine == "copy" and self.path_kind == "hcq":
      for addr, n in self._staged(dw, ring, dev):   # the host's write of the staged chunk comes first
        self.host_write(addr, self.read(addr, n) if self.contents else None, n, staged=True)
    self.submitted(ring, dw, self._scan(dw, ring.engine, ring.target, self.steps()))

  def untouched(self, version: int, spans: np.ndarray) -> bool:
    """No allocation made since `version` overlaps one of `spans` ((start, end) rows: what they were then)."""
    if version == self.allocs.version: return True
    added = self.allocs.added[:self.allocs.nadded]
    if not len(added) or added[0, 0] > version + 1: return False   # (forgotten: too many since)
    new = added[int(np.searchsorted(added[:, 0], version, side="right")):, 1:]
    if not len(spans) or not len(new): return True
    return not bool(((new[:, None, 0] < spans[None, :, 1]) & (spans[None, :, 0] < new[:, None, 1])).any())

  def _submit_shaped(self, ring: Ring, words: np.ndarray, dev) -> None:
    """A submission read by shapes (shapes.py): the same side effects as `submit`'s scan — the host's staged writes
    first, the allocations used, the signals registered and read (each once), the dispatches' kernel arguments. A
    submission with the facts its shape had last time (the same object) and untouched allocations uses what they used
    then; only its kernel-argument blocks are read again."""
    assert self.shapes is not None
    dw, shape, facts = self.shapes.submission(ring.name, ring.engine, ring.target, words)
    done = self._shape_done.get((shape.id, id(facts))) if self.bounded else None
    if done is not None and done[0] is facts and self.untouched(done[1], done[5]):
      self._shape_done[shape.id, id(facts)] = (facts, self.allocs.version) + done[2:]   # (untouched up to now)
      self._staged_facts(ring, facts, dev)
      step = self.steps()
      self._uses += done[2]
      self._dispatches(done[4], step, done[6])
      self.submitted(ring, dw, {}, done[3], (shape.id, facts))
      return
    if VERIFY:   # (tests: the shape's facts are a fresh decode's)
      _, fresh = self.shapes.splice(ring.engine, ring.target, words)
      assert np.array_equal(fresh, dw), f"{ring.name}: expanded dwords differ from a fresh splice"
      assert Shape(ring.engine, ring.target, words, None, fresh).facts == facts, f"{ring.name}: facts differ from a fresh decode"
    self._staged_facts(ring, facts, dev)
    step, sigs, named = self.steps(), {}, dict[int, None]()
    own: list = []        # the allocations the facts use but for the dispatches'
    dispatches: list = []
    for _, f in facts:
      if f.kind == "use":
        mark = len(self._uses)
        if self.use(f.addr) is not None and self.contents: self.remember(f.addr, f.size, step)
        own += self._uses[mark:]
      elif f.kind == "dispatch":
        self._dispatch(f.addr, f.kargs, step)
        dispatches.append((f.addr, f.kargs))
      elif f.kind == "signal" and f.addr not in named:
        a = f.addr
        if a not in self.signals:
          if self.find(a) is None: continue
          self.register_signal(a)
        named[a] = None
        if self.bounded and a in self._read_once: continue
        if (v := self._read_u64(a)) is not None:
          sigs[a] = v
          self._read_once.add(a)
    if self.bounded:
      spans = np.asarray([(a, a + n) for a, n, _ in own], dtype=np.int64).reshape(-1, 2)
      self._shape_done[shape.id, id(facts)] = (facts, self.allocs.version, own, tuple(named), dispatches, spans, [])
      if len(self._shape_done) > SHAPE_FACTS: self._shape_done.pop(next(iter(self._shape_done)))
    self.submitted(ring, dw, sigs, tuple(named), (shape.id, facts))

  def _staged_facts(self, ring: Ring, facts: list, dev) -> None:
    """Classic HCQ's staged chunks a copy reads: the host's writes of them come first (as `_staged` says)."""
    if ring.engine != "copy" or self.path_kind != "hcq": return
    bufs = getattr(getattr(dev, "allocator", None), "b", None) or ()
    got = self._staging.get(id(dev))
    if got is None or got[0] is not bufs or got[1] != len(bufs):   # (the allocator's staging buffers: made once)
      got = self._staging[id(dev)] = (bufs, len(bufs), [(int(b.va_addr), int(b.size)) for b in bufs if hasattr(b, "va_addr")])
    spans = got[2]
    for _, f in facts:
      if f.kind == "copy" and any(a <= f.addr and f.addr + f.size <= a + sz for a, sz in spans): self.host_write(f.addr, None, f.size, staged=True)

  def submitted(self, ring: Ring, dw, signals: dict, named: tuple = (), shaped: Optional[tuple] = None) -> None:
    """A submission of `dw` to `ring`, what it refers to already recorded (`use`, `remember`, `register_signal`), with
    the values of the signals it names: the vendor-neutral part of `submit` (an NV recorder scans its own methods).
    `named`: every signal it names (a bounded capture reads a signal's value once, so `signals` may leave some out);
    `shaped`: (its shape's number, its facts) when shapes.py read it."""
    ent = {"op": "submit", "queue": ring.name, "start": len(ring.dwords), "length": len(dw)}
    if signals: ent["signals"] = signals
    if self.handover: ent["dw"], ent["named"] = dw, named or tuple(signals)
    if shaped is not None: ent["shape"], ent["facts"] = shaped   # (shapes.py: the shape's number, what the packets refer to)
    if self.retain: ring.dwords.extend(dw.tolist() if isinstance(dw, np.ndarray) else dw)
    self._step(ent)

  def steps(self) -> int:
    """The host steps recorded so far (the next one's index)."""
    return self._nsteps

  def add_allocation(self, buf, vram: Optional[bool] = None) -> None:
    """Record an allocation (again), `vram` overriding what its flags say (an NV buffer's metadata has none)."""
    self._register_alloc(buf)
    try: a = self.allocs.find(int(buf.va_addr))
    except (TypeError, ValueError, AttributeError): return
    if a is not None and vram is not None: a[2]["vram"] = vram

  def add_kernel(self, addr: int, name: str, lib: bytes, signature: list, prg=None) -> None:
    """A program at `addr` (its entry point): tinygrad's name, code object and signature (`sig_entry`'s)."""
    self.kernels[addr] = {"name": name, "lib": lib, "signature": signature, "kernargs": 0, "_prg": prg}
    if id(prg) in self._modes: self._set_modes(addr, *self._modes[id(prg)])

  def register_signal(self, addr: int, owner=None, timeline: bool = False) -> None:
    """A signal at `addr` (its value read now), of device `owner` (None: host memory); `timeline`: the device's."""
    if addr in self.signals: return
    ent: dict = {"addr": addr, "value": self._read_u64(addr) or 0}
    if owner is not None and hasattr(owner, "arch"):
      ent["device"] = self.register_device(owner)
      if timeline: ent["timeline"] = True
    self.signals[addr] = ent

  def host_signal(self, addr: int, value: int) -> None:
    """The host's write of `value` to the signal at `addr` (marked `init` while tinygrad creates a signal)."""
    ent = {"op": "signal", "addr": addr, "value": int(value) & U64}
    if self._in_init: ent["init"] = True
    self._step(ent)

  def host_wait(self, addr: int, value: int) -> None:
    """The host's wait until the signal at `addr` reaches `value`."""
    self._step({"op": "wait", "addr": addr, "value": int(value) & U64})

  def host_write(self, addr: int, data: Optional[bytes], size: Optional[int] = None, staged: bool = False) -> None:
    """The host's store of `data` into host memory at `addr` (None: not recorded, only its `size`); `staged`: a copy-in
    chunk of classic HCQ's staging buffers (a folded lift leaves it to `rebound` buffers)."""
    ent = {"op": "write", "addr": addr, "hex": data if data is not None else b""}
    if size is not None: ent["size"] = size
    if staged: ent["staged"] = True
    self._step(ent)

  def replace(self, obj, name: str, new) -> None:
    """Set `obj.name` to `new` until the capture ends (then the original is put back)."""
    self._saved.append((obj, name, obj.__dict__.get(name) if isinstance(obj, type) else getattr(obj, name, None)))
    setattr(obj, name, new)

  def _step(self, ent: dict) -> None:
    if self.stacks: ent["stack"] = user_stack(self._skip)
    ent["i"], ent["call"] = self._nsteps, self.call
    self._nsteps += 1
    self._submissions += ent["op"] == "submit"
    if ent["op"] == "submit":
      self.meter.submitted()
      ent["kind"] = self.meter.kind
    if self.handover:
      ent["mem"], ent["uses"] = [(a, b) for a, b, _ in self.memory[self._mem_mark:]], self._uses
      self._uses = []
      if not self.retain: self.memory = []
      self._mem_mark = len(self.memory)
    if self.retain: self.host.append(ent)
    if self.on_step is not None: self.on_step(self, ent)

  def _staged(self, dw: list, ring: Ring, dev) -> list:
    """(address, bytes) of each copy out of one of the device's staging buffers (tinygrad's HCQAllocator._copyin: the
    host wrote the chunk into `allocator.b[b_next]` right before this submission, after waiting for the copy that read
    it last)."""
    bufs = getattr(getattr(dev, "allocator", None), "b", None) or ()
    spans = [(int(b.va_addr), int(b.size)) for b in bufs if hasattr(b, "va_addr")]
    out = []
    for p in _sdma.decoder(ring.target).decode(dw):
      if (m := meaning(p)) is None or m.kind != "copy" or (src := m.src) is None: continue
      if any(a <= src and src + m.size <= a + sz for a, sz in spans): out.append((src, m.size))
    return out

  # ---- classic HCQ's hooks
  def _on_doorbell(self, desc, dev, *rest, **kw):
    if getattr(dev, "is_aql", False): return  # AQL packets are no PM4: not recorded (docs/lift.md)
    self.path_kind = self.path_kind or "hcq"
    if desc is getattr(dev, "compute_queue", None): engine, idx = "compute", 0
    else:
      idx = next((i for i, q in getattr(dev, "sdma_queues", {}).items() if q is desc), 0)
      engine = "copy"
    ring = self.ring(desc, dev, engine, idx)
    ring_dw = desc.ring
    n = len(ring_dw)
    old, new = ring.put, int(desc.put_value)
    ring.put = new
    if new <= old: return
    dws = pointer_dwords(engine, old, new)
    if self.shapes is not None and isinstance(getattr(ring_dw, "addr", None), int):   # (sanitize: the ring's memory as an array)
      self.submit(ring, ring_span(ring_words(ring_dw.addr, n), dws), dev, "hcq")
      return
    self.submit(ring, [int(ring_dw[i % n]) & U32_MAX for i in dws], dev, "hcq")

  def _on_host_write(self, sig, value):
    try: addr = int(sig.value_addr)
    except (TypeError, ValueError, AttributeError): return
    owner = getattr(sig, "owner", None)
    if addr not in self.signals:
      timeline = bool(getattr(sig, "is_timeline", False)) and owner is not None and getattr(owner, "timeline_signal", None) is sig
      self.register_signal(addr, owner, timeline)
    self.host_signal(addr, value)

  def _on_host_wait(self, sig, value=0, *rest, **kw):
    try: addr = int(sig.value_addr)
    except (TypeError, ValueError, AttributeError): return
    owner = getattr(sig, "owner", None)
    if addr not in self.signals: self.register_signal(addr, owner, owner is not None and getattr(owner, "timeline_signal", None) is sig)
    self.host_wait(addr, value)

  # ---- installing
  def wrap(self, cls, name: str, before=None, after=None) -> None:
    """cls.name calls `before` and `after` around tinygrad's own (same arguments) until the capture ends."""
    orig = cls.__dict__[name]
    meter = self.meter
    def wrapped(obj, *args, **kw):
      if before is not None:
        with meter: before(obj, *args, **kw)
      ret = orig(obj, *args, **kw)
      if after is not None:
        with meter: after(obj, *args, **kw)
      return ret
    setattr(wrapped, "__wrapped__", orig)
    setattr(cls, name, wrapped)
    self._saved.append((cls, name, orig))

  def _wrap_init(self, cls):
    orig = cls.__dict__["__init__"]
    def init(sig, *args, **kw):
      self._in_init += 1
      try: orig(sig, *args, **kw)
      finally: self._in_init -= 1
    setattr(init, "__wrapped__", orig)
    cls.__init__ = init
    self._saved.append((cls, "__init__", orig))

  def __enter__(self) -> "Capture":
    if Capture._active is not None: raise RuntimeError("hcqdsl.capture() is already recording")
    from tinygrad.runtime.support.hcq import HCQSignal, HCQBuffer
    from tinygrad.runtime import ops_amd
    Capture._active = self
    self._skip = _tinygrad_dirs()
    hcq2 = self._cpu_memory = "extra.hcq2.ops_amd2" in sys.modules  # HCQ2=1: ops_amd's names are ops_amd2's (no HWQueue, no AMDProgram)
    try:
      for obj in gc.get_objects():  # what exists already: allocations, programs, rings' write pointers
        t = type(obj)
        if t is HCQBuffer: self._register_alloc(obj)
        elif t.__name__ == "AMDProgram": self._register_program(obj)
        elif t.__name__ == "AMDQueueDesc":
          try: self._puts[id(obj)] = int(obj.put_value) if isinstance(obj.put_value, int) else int(obj.put_value._buf.cpu_view().view(fmt='Q')[0])
          except Exception: pass
      self._programs_modes()
      init, meter, cpu = HCQBuffer.__dict__["__init__"], self.meter, self._cpu_memory
      def buffer_init(b, *a, **kw):   # (as `wrap`, with _register_alloc's first test before the meter: the mock GPU's
        init(b, *a, **kw)             # CPU buffers for its waves are thousands a second, and a meter costs more than the test)
        if cpu or not _cpu_buffer(b):
          with meter: self._register_alloc(b)
      setattr(buffer_init, "__wrapped__", init)
      self.replace(HCQBuffer, "__init__", buffer_init)
      if not hcq2:
        self.wrap(ops_amd.AMDProgram, "__init__", after=lambda p, *a, **k: self._register_program(p))
        self.wrap(ops_amd.AMDQueueDesc, "signal_doorbell", before=self._on_doorbell)
        self.wrap(ops_amd.AMDComputeQueue, "exec", before=self._on_exec)
        from tinygrad.runtime.graph.hcq import HCQGraph
        self.wrap(HCQGraph, "__call__", before=self._on_graph_call)
      self.wrap(HCQSignal, "wait", before=self._on_host_wait)
      self._wrap_init(HCQSignal)
      prop = HCQSignal.__dict__["value"]
      def fset(sig, v, _set=prop.fset):
        with self.meter: self._on_host_write(sig, v)
        _set(sig, v)
      setattr(HCQSignal, "value", property(prop.fget, fset, prop.fdel, prop.__doc__))
      self._saved.append((HCQSignal, "value", prop))
      if hcq2: self._install_hcq2()
      else:
        for m, runtime in VENDOR_RECORDERS.items():
          install = importlib.import_module(f"{__package__}.{m}").install
          if runtime in sys.modules: install(self)
          else:
            self._watchers.append(w := _OnImport(runtime, functools.partial(install, self)))
            sys.meta_path.insert(0, w)
    except Exception:
      self._restore()
      raise
    return self

  def _programs_modes(self) -> None:
    """Access modes for the programs tinygrad made already (its runtime cache, keyed by the PROGRAM's key), and a
    wrapper on get_runtime for the ones it makes while capturing."""
    from tinygrad.engine import realize
    from tinygrad.uop.ops import UOpMetaClass, Ops
    if realize.runtime_cache:
      for ref in list(UOpMetaClass.ucache.values()):
        u = ref()
        if u is None or u.op is not Ops.PROGRAM: continue
        for (key, dev), rt in list(realize.runtime_cache.items()):
          if key == u.key: self._on_runtime(dev, u, rt)
    orig = realize.get_runtime
    def get_runtime(device, ast, *a, **kw):
      rt = orig(device, ast, *a, **kw)
      try:
        with self.meter: self._on_runtime(device, ast, rt)
      except Exception: pass
      return rt
    setattr(get_runtime, "__wrapped__", orig)
    # the JIT's GraphRunner (engine/jit.py) and ops_cpu call it by the name they imported: wrapped there too
    for mod in [realize] + [m for n, m in list(sys.modules.items()) if n.startswith("tinygrad.") and m is not realize]:
      if getattr(mod, "get_runtime", None) is orig:
        setattr(mod, "get_runtime", get_runtime)
        self._saved.append((mod, "get_runtime", orig))

  def _install_hcq2(self):
    """hcq2 (`HCQ2=1`): the submitter is a program on HCQ_RUNTIME_DEV that writes rings and doorbells itself; each hcq
    program it runs is bracketed: the write pointers of every AMD queue before and after tell what it submitted, and
    its host effects (a fence's wait, a reset's and a finalizer's writes) are read from the signals it touched."""
    from . import capture_hcq2
    capture_hcq2.install(self)

  def _restore(self):
    for w in self._watchers:
      if w in sys.meta_path: sys.meta_path.remove(w)
    self._watchers.clear()
    for cls, name, orig in reversed(self._saved): setattr(cls, name, orig)
    self._saved.clear()
    Capture._active = None

  def __exit__(self, *exc):
    self._restore()   # first: the capture's own synchronize below is no step of the script's
    if self.contents and exc[0] is None:   # so the final contents are the GPU's last writes
      for d in self.devices.values():
        try: d["_dev"].synchronize()
        except Exception: pass
    if self.path is not None: self.save(self.path)
    return False

  # ---- output
  def submissions(self) -> int: return self._submissions

  def warnings(self) -> list:
    """What the capture recorded differently from the script's own view (a device tinygrad opened twice), in words."""
    return [f"tinygrad opened device {t} twice (the script's threads first used it at the same time: tinygrad's Device[] "
            f"cache is not thread-safe); the second one, with queues and a timeline of its own, is {n} in the capture"
            for t, n in self.duplicates]

  def skipped_dirs(self) -> tuple:
    """The directories (tinygrad's, its mock's, the test runner's) whose frames are never the user's line."""
    return self._skip

  def manifest(self) -> dict:
    """The manifest (lift/schema.py's MANIFEST writes it: addresses as "0x...", bytes and dwords as hex)."""
    for d in self.devices.values():  # the device's timeline signal (now; it may not have existed when first written)
      try: tl = int(d["_dev"].timeline_signal.value_addr)
      except (AttributeError, TypeError, ValueError): continue
      if tl in self.signals: self.signals[tl].update(timeline=True, device=d["name"])
    return encode({
      "format": MANIFEST_KIND, "version": MANIFEST_VERSION, "producer": {"tool": "hcqdsl capture", "path": self.path_kind or "hcq"},
      "devices": sorted(self.devices.values(), key=lambda d: d["index"]),
      "queues": [r for r in self.rings.values() if r.dwords],   # (a ring whose doorbell rang with nothing new: no queue of this run)
      "signals": list(self.signals.values()),
      "buffers": [{"addr": a, "size": n, **({"device": d} if d else {})} for a, (n, d) in sorted(self.used.items())],
      "memory": [{"addr": a, "hex": b, "step": st} for a, b, st in self.memory], "final": self._final(), "kernels": self._kernels(),
      "host": [{k: v for k, v in h.items() if k not in ("i", "call")} | ({"stack": [[f, ln, n, source(f, ln)] for f, ln, n in h["stack"]]}
                                                                          if "stack" in h else {}) for h in self.host],
      "graph_calls": self.graph_calls})

  def _final(self) -> list:
    """The contents of each allocation used when the capture ended (its trailing zeros dropped)."""
    final, seen = [], set()
    for a, _, _ in self.memory if self.contents else ():
      if (al := self.allocs.find(a)) is None or al[0] in seen or al[0] not in self.used: continue
      seen.add(al[0])
      if (b := self.read(al[0], al[1])) is not None: final.append({"addr": al[0], "hex": b.rstrip(b"\0")})
    return final

  def _kernels(self) -> list:
    """Each program by its entry point: a name per (tinygrad name, code), the signature, the code object."""
    names: dict = {}
    kernels = []
    for a, k in self.kernels.items():
      key, base = (k["name"], hashlib.sha1(k["lib"]).hexdigest()), identifier(k["name"], "k")
      names.setdefault(key, base if not any(n == base for n in names.values()) else f"{base}_{1 + sum(n.startswith(base) for n in names.values())}")
      params = [{"name": s.get("name"), "dtype": s.get("dtype"), "bytes": s.get("bytes"), **({"mode": s["mode"]} if "mode" in s else {}),
                 **({"shape": s["shape"]} if "shape" in s else {}), **({"extent": s["extent"]} if "extent" in s else {})}
                for s in k["signature"]]
      kernels.append({"prog_addr": a, "name": names[key], "tinygrad_name": k["name"], "params": params,
                      **({"code": k["lib"]} if self.contents and k["lib"] else {})})
    return kernels

  def save(self, path) -> None:
    """Write the manifest to `path` atomically (the old file stays whole when the write fails)."""
    from ..files import write_atomic
    write_atomic(path, json.dumps(self.manifest(), indent=1) + "\n")

def capture(path=None, contents: bool = True) -> Capture:
  """`with hcqdsl.capture("run.json") as cap: ...` records every AMD queue submission tinygrad makes inside the block
  and writes the manifest to `path` (if given) when the block ends; `cap.manifest()` is the same dict."""
  return Capture(path, contents=contents)

class _CallableModule(types.ModuleType):
  """`hcqdsl.capture(path)` is the API, and `hcqdsl.capture` is also this module (as `hcqdsl.emit`)."""
  def __call__(self, path=None, contents: bool = True) -> Capture: return capture(path, contents)

sys.modules[__name__].__class__ = _CallableModule
