"""The .hcq program as immutable data. Every later stage (check, compile, run, emit) reads only this module.

Source positions (`Span`) and comments are carried on every node but excluded from equality, so two programs
that mean the same thing compare equal whatever their layout.
"""
from __future__ import annotations
from typing import Iterator, Optional, Sequence
import functools, re
import attrs

__all__ = ["Span", "Ref", "Expr", "Slice", "Data", "Param", "Impl", "Device", "Buffer", "Signal", "Var", "Kernel",
           "Wait", "SignalWrite", "Exec", "Copy", "Write", "HostWrite", "Poll", "Barrier", "Timestamp", "Epoch", "Submit", "Queue", "Host", "Expect",
           "timeline_of", "epoch_of", "implicit", "epoch_wait", "finalizer", "declare_implicit",
           "Program", "Node", "Stmt", "Decl", "DTYPES", "AMD_ARCHS", "NV_ARCHS", "TARGETS", "VENDORS", "DEFAULT_ARCHS", "vendor_of", "device_arch",
           "KEYWORDS", "KERNARGS", "U32_MAX", "U64_MAX", "NO_SPAN", "SCALARS", "PER_LAUNCH",
           "DEVICE_WINDOW", "MAX_DEVICES", "MEMORY_WINDOW", "BUFFER_ALIGN", "NV_WINDOW_BASE", "NV_DEVICE_WINDOW", "NV_MEMORY_WINDOW",
           "NV_HOST_WINDOW", "WRITE_SIZES", "POLL_SIZE", "MAX_LAUNCHES", "kernarg_layout", "NV_KERNARG_MAX", "nv_kernarg_error", "MAX_SCHEDULES",
           "DEVICE_INDEX_MAX", "in_launches", "launches_text",
           "resolve", "resolve_var_args", "stored_body", "store_body"]

U32_MAX = 2**32 - 1   # signals, vars and scalar values are 32 bits on the GPU; also the 32-bit mask everywhere
# a kernel's last parameter `in kernargs`: the exec reads its kernel-argument block through that argument, and the
# host's writes of the block are statements of the program (a lifted capture's), not an implicit patch per launch
KERNARGS = "kernargs"
U64_MAX = 2**64 - 1   # the host compares a signal's whole 64-bit memory (tinygrad's HCQSignal.wait): its waits' range
# The address space a program's memories share (every target has 48-bit GPU virtual addresses): device i's memory is
# window i + 1 of DEVICE_WINDOW bytes (window 0 holds system memory); the buffers of one memory, each aligned to
# BUFFER_ALIGN, fit in MEMORY_WINDOW (the rest of the window holds rings, signals, code, kernargs and command buffers)
DEVICE_WINDOW = 1 << 44
MAX_DEVICES = (1 << 48) // DEVICE_WINDOW - 1
DEVICE_INDEX_MAX = (1 << 16) - 1   # `AMD:N`: N is 0 .. 65535 (an image holds it as such)
MEMORY_WINDOW = DEVICE_WINDOW // 4   # 4 TiB
BUFFER_ALIGN = 0x1000
# the most consecutive launches a command analyses or runs (`--launches`, `# hcq: launches=N`, a witness): check unrolls
# every launch and run emulates each, so 2**63 would never end
MAX_LAUNCHES = 1 << 16
# the most random schedules one `run --schedules K` (or a scenario's `# hcq: seeds=K`) emulates: each is a whole run
MAX_SCHEDULES = 10_000
# NV queues address 40 bits (the semaphore methods' SEM_ADDR_HI holds 8 bits, QMD pointers are addresses >> 8 in 32):
# NV device i's memory is the window NV_WINDOW_BASE + i * NV_DEVICE_WINDOW (32 GiB), its buffers fit NV_MEMORY_WINDOW,
# and with an NV device in the program the host's buffers (from 2**36) end below NV_WINDOW_BASE (docs/nv.md)
NV_WINDOW_BASE = 1 << 39
NV_DEVICE_WINDOW = 1 << 35
NV_MEMORY_WINDOW = 3 * NV_DEVICE_WINDOW // 4   # 24 GiB
NV_HOST_WINDOW = NV_WINDOW_BASE - (1 << 36)     # 448 GiB
assert NV_WINDOW_BASE + MAX_DEVICES * NV_DEVICE_WINDOW <= 1 << 40
AMD_ARCHS = ("gfx942", "gfx1100", "gfx1201")   # AMD's
# NVIDIA's (docs/nv.md): the SM versions tinygrad 0.14's NVDevice drives (Ampere GA10x, Ada, Blackwell GB20x) and Hopper
NV_ARCHS = ("sm_86", "sm_89", "sm_90", "sm_120")
VENDORS = {"AMD": AMD_ARCHS, "NV": NV_ARCHS}       # `device g = VENDOR:i ARCH`: the archs of each vendor
TARGETS = AMD_ARCHS + NV_ARCHS                    # every arch a device or `--target` may name
DEFAULT_ARCHS = {"AMD": "gfx1100", "NV": "sm_89"}   # a device declared without an arch (and no --target of its vendor)
def vendor_of(arch: str) -> str: return "NV" if arch in NV_ARCHS else "AMD"
def device_arch(d, target: Optional[str] = None) -> str:
  """A device declaration's arch: declared, else `target` (`--target`) when it is of the device's vendor, else the
  vendor's default (an unknown vendor, a static error, AMD's). The one rule: compile, run and the checker's per-arch
  facts all ask it."""
  return d.arch or (target if target is not None and vendor_of(target) == d.vendor else DEFAULT_ARCHS.get(d.vendor, DEFAULT_ARCHS["AMD"]))
def kernarg_layout(params) -> tuple:
  """(byte offset of each argument in the kernel arguments, their size) for Params (a buffer: an 8-byte pointer, a
  scalar: a 4-byte value) or byte sizes, each aligned to its size: tinygrad's layout (its kernels take buffers first,
  then their variables), which compile writes and lift reads back."""
  offs, top = [], 0
  for p in params:
    n = p if type(p) is int else 4 if p.scalar else 8
    top += -top % n
    offs.append(top)
    top += n
  return offs, top

# An NV exec's arguments follow the driver's part of constant bank 0 (0x160 bytes, Blackwell's 0x380: nv/cubin.py) and
# the QMD holds the bank's size in a 13-bit field (nv/qmd.py): the most bytes of arguments an NV exec passes, per arch
# (sm_89: 7839, i.e. 979 buffers); tests/test_hostile_cli.py compiles the largest on each arch through nv/cubin.py and nv/qmd.py
NV_KERNARG_MAX = {a: (1 << 13) - 1 - (0x380 if a == "sm_120" else 0x160) for a in NV_ARCHS}

def nv_kernarg_error(kernel, arch: str) -> Optional[str]:
  """Why an NV exec of `kernel` on `arch` cannot be encoded (its arguments past NV_KERNARG_MAX), else None: the one
  message check's static pass and compile give."""
  size = kernarg_layout(kernel.params)[1]
  if size <= NV_KERNARG_MAX[arch]: return None
  return (f"kernel `{kernel.name}` takes {size:,} bytes of arguments ({len(kernel.params):,} parameters): an NV exec passes at most "
          f"{NV_KERNARG_MAX[arch]:,} on {arch} (constant bank 0's size is a 13-bit field of the QMD)")

# dtype -> (numpy type code, size in bytes)
DTYPES = {"u8": ("u1", 1), "i8": ("i1", 1), "u16": ("u2", 2), "i16": ("i2", 2), "u32": ("u4", 4), "i32": ("i4", 4),
          "u64": ("u8", 8), "i64": ("i8", 8), "f16": ("f2", 2), "f32": ("f4", 4), "f64": ("f8", 8)}
SCALARS = {"i32": (-(1 << 31), (1 << 31) - 1), "u32": (0, U32_MAX)}  # scalar kernel parameter types -> value range
PER_LAUNCH = ("rebound", "rewritten")  # buffers with contents per launch: new memory each launch | the same, host-written
KEYWORDS = frozenset("device buffer signal var kernel queue host expect on size compute copy in out inout wait exec "
                     "barrier timestamp epoch grid block submit".split())

_ORIGIN = re.compile(r"(?:^#|\s)from (\S+:\d+(?:: .*)?)$")


def split_lines(text: str) -> list[str]:
  """The source's lines as the language counts them: split at `\\n`, `\\r\\n` and a lone `\\r` only (never
  `str.splitlines`, which also splits at `\\f`, `\\v`, `\\x1c`-`\\x1e`, `\\x85`, U+2028 and U+2029). A text ending
  in a newline has an empty last line, so `split_lines(t)[n - 1]` is line n for every line a span can name."""
  if "\r" in text: text = text.replace("\r\n", "\n").replace("\r", "\n")
  return text.split("\n")

_lines = functools.lru_cache(maxsize=4)(split_lines)

@attrs.frozen
class Span:
  """1-based line and column of the first character, and of the character just past the end."""
  file: str
  line: int
  column: int
  end_line: int
  end_column: int
  def __str__(self): return f"{self.file}:{self.line}:{self.column}"
  def to(self, other: Optional["Span"]) -> "Span":
    return self if other is None else Span(self.file, self.line, self.column, other.end_line, other.end_column)

NO_SPAN = Span("<generated>", 0, 0, 0, 0)

@attrs.frozen
class Ref:
  """A use of a name. `D.timeline` and `D.epoch` are single names containing a dot. Refs, Exprs, Slices and Params are
  plain values (no span, shared between statements); the statement or declaration holding them has the span, and
  `Program.locate` finds a name inside it."""
  name: str
  def __str__(self): return self.name

@attrs.frozen
class Expr:
  """`offset`, or `var + offset` when `var` is set (a `var` or `D.epoch`)."""
  var: Optional[Ref]
  offset: int = 0
  def eval(self, env: dict[str, int]) -> int: return self.offset if self.var is None else env[self.var.name] + self.offset
  def __str__(self):
    if self.var is None: return str(self.offset)
    return self.var.name if self.offset == 0 else f"{self.var.name} {'+' if self.offset > 0 else '-'} {abs(self.offset)}"

@attrs.frozen
class Slice:
  """A buffer, or the byte range [start, end) of it; a missing bound means the buffer's start or end."""
  buffer: Ref
  start: Optional[int] = None
  end: Optional[int] = None
  ranged: bool = False   # written with [..]; kept so that `a[:]` formats back as written
  launch: Optional[int] = None   # `x@k`: the memory a rebound buffer has in launch k (whatever launch runs it)
  def bounds(self, size: int) -> tuple[int, int]:
    return (0 if self.start is None else self.start, size if self.end is None else self.end)

@attrs.frozen
class Data:
  """Typed values: `u32 [1, 2, 3]`. Ints for integer dtypes, floats (incl. inf/nan) for float dtypes. Data read from a
  data file (`f32 from "m.safetensors" ["w"]`) has `source` = (file as written, tensor name) and its values are a
  read-only numpy array mapped from the file."""
  dtype: str
  values: Sequence   # a tuple; a data file's: a numpy array
  span: Optional[Span] = attrs.field(default=None, eq=False, repr=False, kw_only=True)
  source: Optional[tuple[str, str]] = attrs.field(default=None, eq=False, repr=False, kw_only=True)   # (file, tensor name)
  @property
  def nbytes(self) -> int: return DTYPES[self.dtype][1] * len(self.values)
  def to_bytes(self) -> bytes:
    """The values' little-endian bytes, as the host stores them (the one rule: check, the memory plan and capture ask it)."""
    import numpy as np
    return np.array(self.values, dtype=np.dtype(DTYPES[self.dtype][0]).newbyteorder("<")).tobytes()
  def __eq__(self, other):  # nan == nan here: two programs with the same text are the same program
    if not isinstance(other, Data) or self.dtype != other.dtype or len(self.values) != len(other.values): return False
    if self.source is not None and self.source == other.source: return True
    if isinstance(self.values, tuple) and isinstance(other.values, tuple):
      return all(a == b or (a != a and b != b) for a, b in zip(self.values, other.values))
    import numpy as np
    return bool(np.array_equal(np.asarray(self.values), np.asarray(other.values), equal_nan=self.dtype[0] == "f"))
  def __hash__(self): return hash((self.dtype, len(self.values)))

@attrs.frozen
class Param:
  mode: str  # in | out | inout (a buffer), or a scalar type of SCALARS (a value in the kernel arguments)
  name: str
  @property
  def reads(self) -> bool: return self.mode in ("in", "inout")
  @property
  def writes(self) -> bool: return self.mode in ("out", "inout")
  @property
  def scalar(self) -> bool: return self.mode in SCALARS

@attrs.frozen
class Impl:
  """How the emulator computes a kernel: a built-in (`builtin add<f32>(2)`), C source (`c "..."`), and/or a real AMD
  code object file (`amd "k.co"`, path relative to the program)."""
  builtin: Optional[str] = None
  dtype: Optional[str] = None
  args: tuple = ()
  c_source: Optional[str] = None
  amd_code: Optional[str] = None
  code: Optional[str] = None   # `amd "k.co" code B`: the buffer the code was uploaded to; each exec reads it
  span: Optional[Span] = attrs.field(default=None, eq=False, repr=False, kw_only=True)

@attrs.frozen
class Node:
  """A declaration or statement: where it was written and the comments around it (neither part of equality)."""
  span: Optional[Span] = attrs.field(default=None, eq=False, repr=False, kw_only=True)
  comments: tuple = attrs.field(default=(), eq=False, repr=False, kw_only=True)        # own-line comments just before it
  comment: Optional[str] = attrs.field(default=None, eq=False, repr=False, kw_only=True)     # the comment ending its line
  @property
  def origin(self) -> Optional[str]:
    """Provenance: the user's source line a statement came from, `FILE:LINE: CODE`, written at the end of its trailing
    comment as `from FILE:LINE: CODE` (hcqdsl emit writes it for each exec and copy; check quotes it)."""
    m = _ORIGIN.search(self.comment) if self.comment else None
    return m.group(1) if m else None

# ---- declarations

@attrs.frozen
class Device(Node):
  name: str
  vendor: str
  index: int
  arch: Optional[str] = None

@attrs.frozen
class Buffer(Node):
  name: str
  device: Optional[Ref]  # None: host memory
  size: int
  init: Optional[Data] = None
  per_launch: Optional[str] = None  # rebound: new memory each launch | rewritten: the host rewrites it in place
  launch_inits: tuple = ()          # of Data: launch k's contents (per_launch buffers)

@attrs.frozen
class Signal(Node):
  name: str
  device: Optional[Ref]  # None: host memory
  init: int = 0

@attrs.frozen
class Var(Node):
  name: str
  values: Optional[tuple] = None  # launch k takes values[k - 1]; None: the launch number

@attrs.frozen
class Kernel(Node):
  name: str
  params: tuple  # of Param
  impl: Optional[Impl] = None

# ---- statements (queue and host)

@attrs.frozen
class Wait(Node):
  signal: Ref
  value: Expr

@attrs.frozen
class SignalWrite(Node):
  signal: Ref
  value: Expr

@attrs.frozen
class Exec(Node):
  kernel: Ref
  args: tuple  # of Slice (buffer parameters) or Expr (scalar parameters)
  grid: Optional[tuple] = None   # (x, y, z): int, or Expr over a var
  block: Optional[tuple] = None  # (x, y, z)

@attrs.frozen
class Copy(Node):
  dst: Slice
  src: Slice

@attrs.frozen
class Write(Node):
  """`write x[0:4] = v`: the queue stores a 32-bit value (a 4-byte range) or a 64-bit one (8 bytes, the value
  zero-extended) once its earlier commands completed (tinygrad's `HWQueue.write`)."""
  dst: Slice
  value: Expr

@attrs.frozen
class HostWrite(Node):
  """`write x[0:64] = f32 [..], f32 [..]` in the host block: the host stores launch k's bytes (the k-th list) into the
  range at that point of its block (tinygrad's CPU device refilling a host staging buffer between two copies)."""
  dst: Slice
  launch_inits: tuple  # of Data: launch k's bytes

WRITE_SIZES = (4, 8)   # the byte ranges a `write` stores: tinygrad's write(b, v) and write(b, v, b64=True)

@attrs.frozen
class Poll(Node):
  """`poll cq[60:64] & 0x01000000 == 0x01000000`: the queue blocks until the 32-bit little-endian word in `src` (4
  bytes, 4-aligned), ANDed with `mask`, equals `value` (tinygrad's `HWQueue.poll_bit(b, val, mask)`: a WAIT_REG_MEM
  with function `==`). `mask` is a 32-bit literal (U32_MAX when the source writes no `& MASK`); `value` an expression,
  patched per launch like a wait's. It reads those bytes; what satisfies it is their initial contents or a `write`."""
  src: Slice
  mask: int
  value: Expr

POLL_SIZE = 4   # the bytes a `poll` reads: one dword, as WAIT_REG_MEM compares

@attrs.frozen
class Barrier(Node):
  """Later commands see memory written by work this queue has waited for."""

@attrs.frozen
class Timestamp(Node):
  signal: Ref

@attrs.frozen
class Epoch(Node):
  """`wait D.timeline >= D.epoch - 1` for the queue's device D (epoch_wait)."""

# every device D implicitly declares the signal `D.timeline` (on D, starting at 0) and the var `D.epoch` (the launch
# number): the names are these two functions, the declarations `implicit`, the `epoch` statement's meaning `epoch_wait`
def timeline_of(dev: str) -> str: return f"{dev}.timeline"
def epoch_of(dev: str) -> str: return f"{dev}.epoch"
def implicit(d: Device) -> tuple[Signal, Var]: return Signal(timeline_of(d.name), Ref(d.name), 0, span=d.span), Var(epoch_of(d.name), span=d.span)
def epoch_wait(dev: str, **meta) -> Wait:
  """What `epoch` on a queue of `dev` means: wait until the previous launch is done with the device."""
  return Wait(Ref(timeline_of(dev)), Expr(Ref(epoch_of(dev)), -1), **meta)
def finalizer(dev: str, **meta) -> SignalWrite:
  """`signal D.timeline = D.epoch`: this launch is done with the device (what the next launch's `epoch` waits for)."""
  return SignalWrite(Ref(timeline_of(dev)), Expr(Ref(epoch_of(dev))), **meta)

@attrs.frozen
class Submit(Node):
  queues: tuple  # of Ref; empty: every queue not yet submitted in this launch

def resolve(x, env: dict[str, int]) -> int:
  """A launch dimension or scalar argument in a launch: ints are constants, Exprs read `env`."""
  return x if isinstance(x, int) else x.eval(env)

Stmt = (Wait, SignalWrite, Exec, Copy, Write, HostWrite, Poll, Barrier, Timestamp, Epoch, Submit)

# ---- blocks and the program

def in_launches(launches: Optional[tuple], k: int) -> bool:
  """Does a block with `launches` (a `queue`'s or `host`'s clause: (first, last), last None for `first..`; None: every
  launch) take part in launch k?"""
  return launches is None or (launches[0] <= k and (launches[1] is None or k <= launches[1]))

def launches_text(launches: tuple) -> str:
  """A clause's range as written: `3`, `2..7`, `2..`."""
  first, last = launches
  return str(first) if first == last else f"{first}..{'' if last is None else last}"

@attrs.frozen
class Queue(Node):
  name: str
  engine: str  # compute | copy
  device: Ref
  body: tuple  # of statements
  launches: Optional[tuple] = None   # `launches 2..7`: (first, last), last None for `2..`; None: every launch
  end_comments: tuple = attrs.field(default=(), eq=False, repr=False, kw_only=True)       # own-line comments before `}`
  end_comment: Optional[str] = attrs.field(default=None, eq=False, repr=False, kw_only=True)    # after `}`

@attrs.frozen
class Host(Node):
  body: tuple
  launches: Optional[tuple] = None   # as a queue's: the launches its statements run in
  end_comments: tuple = attrs.field(default=(), eq=False, repr=False, kw_only=True)
  end_comment: Optional[str] = attrs.field(default=None, eq=False, repr=False, kw_only=True)

@attrs.frozen
class Expect(Node):
  target: Slice
  data: Data
  approx: bool = False  # `~=`: floats compared with numpy.allclose (its defaults, or rtol/atol)
  rtol: Optional[float] = None  # `~= ... rtol 1e-4 atol 1e-6`: numpy.allclose's rtol and atol
  atol: Optional[float] = None

def _built_on_read(cls):
  """A block's `body` is stored as given: the tuple of statements, or the columns the parser's fast path read them into
  (lang/rows.py's `Rows`: a million-statement body is then not a million nodes and spans), which the first read of
  `body` builds into that tuple, each node once. Everything that reads `body` sees the tuple (equality, hashing,
  `attrs.evolve`, pickling read it too); the stages that can read columns ask `stored_body`."""
  slot = cls.__dict__["body"]
  def body(self): return b if type(b := slot.__get__(self, cls)) is tuple else b.nodes()
  _STORED[cls] = slot
  cls.body = property(body, slot.__set__, doc="the statements, a tuple (built from the parser's columns when first read)")

_STORED: dict = {}
for _cls in (Queue, Host): _built_on_read(_cls)

def stored_body(block):
  """A Queue's or Host's body as stored: its tuple, or the `lang.rows.Rows` it is built from."""
  return _STORED[type(block)].__get__(block)

def store_body(block, rows) -> None:
  """Keep `rows` (lang.rows.Rows: the same statements as `block.body`, which reads them) as the body's storage, so the
  stages that read columns read a tuple body's once."""
  assert rows.nodes() is block.body
  _STORED[type(block)].__set__(block, rows)

Decl = (Device, Buffer, Signal, Var, Kernel, Queue, Host, Expect)

@attrs.frozen
class Program:
  """Declarations in source order. Lookups by kind are derived, never stored twice."""
  decls: tuple
  file: str = attrs.field(default="<input>", eq=False)
  end_comments: tuple = attrs.field(default=(), eq=False, repr=False, kw_only=True)  # comments after the last declaration
  source: Optional[str] = attrs.field(default=None, eq=False, repr=False)  # the text it was parsed from

  def locate(self, name: str, within: Optional[Span], nth: int = 1) -> Optional[Span]:
    """The span of the `nth` whole-word occurrence of `name` inside `within` (a statement's span; of a block, its
    first line: the header), else `within`."""
    if within is None or self.source is None or within.line < 1: return within
    lines = _lines(self.source)
    if not lines or within.line > len(lines): return within
    line = lines[within.line - 1]
    lo, hi = within.column - 1, within.end_column - 1 if within.line == within.end_line else len(line)
    i = lo
    while True:
      i = line.find(name, i, hi)
      if i < 0: return within
      before = line[i - 1] if i > 0 else " "
      after = line[i + len(name)] if i + len(name) < len(line) else " "
      if not (before.isalnum() or before in "_.") and not (after.isalnum() or after == "_"):
        nth -= 1
      if nth == 0:
        return Span(within.file, within.line, i + 1, within.line, i + 1 + len(name))
      i += 1

  def of(self, kind) -> Iterator: return (d for d in self.decls if isinstance(d, kind))
  @property
  def devices(self) -> list[Device]: return list(self.of(Device))
  @property
  def buffers(self) -> list[Buffer]: return list(self.of(Buffer))
  @property
  def signals(self) -> list[Signal]:
    """Declared signals followed by every device's implicit `D.timeline`."""
    return list(self.of(Signal)) + [implicit(d)[0] for d in self.of(Device)]
  @property
  def vars(self) -> list[str]:
    """Declared vars followed by every device's implicit `D.epoch`."""
    return [v.name for v in self.of(Var)] + [epoch_of(d.name) for d in self.of(Device)]
  @property
  def var_lists(self) -> dict[str, tuple]:
    """var name -> its listed per-launch values (only vars declared with a list)."""
    return {v.name: v.values for v in self.of(Var) if v.values is not None}
  @property
  def listed_launches(self) -> Optional[tuple[int, str]]:
    """(launches, the name that limits them): the fewest values any var list or per-launch buffer gives; None: no lists."""
    lists = [(len(v), n) for n, v in self.var_lists.items()] + \
            [(len(b.launch_inits), b.name) for b in self.of(Buffer) if b.per_launch is not None] + \
            [(n, s.dst.buffer.name) for h in self.of(Host) for s in h.body if type(s) is HostWrite
             for n in [(h.launches[0] - 1 if h.launches else 0) + len(s.launch_inits)]   # (its block's launches, from the first)
             if h.launches is None or h.launches[1] is None or n < h.launches[1]]
    return min(lists) if lists else None
  @property
  def kernels(self) -> list[Kernel]: return list(self.of(Kernel))
  @property
  def queues(self) -> list[Queue]: return list(self.of(Queue))
  @property
  def host(self) -> Optional[Host]:
    """The first host block (a program may have several: within a launch they run in program order, `hosts`)."""
    return next(self.of(Host), None)
  @property
  def hosts(self) -> list[Host]: return list(self.of(Host))
  @property
  def expects(self) -> list[Expect]: return list(self.of(Expect))
  def lookup(self) -> dict[str, Node]:
    """name -> declaration (devices, buffers, signals incl. timelines, vars incl. epochs, kernels, queues)."""
    names: dict = {}
    for d in self.decls:
      if isinstance(d, (Device, Buffer, Signal, Var, Kernel, Queue)): names.setdefault(d.name, d)
    return declare_implicit(names, self.of(Device))

def declare_implicit(names: dict, devices) -> dict:
  """`names` with each device's implicit timeline and epoch, where no declaration took the name."""
  for d in devices:
    for x in implicit(d): names.setdefault(x.name, x)
  return names

def resolve_var_args(prog: Program) -> Program:
  """`exec k(a, pos)`: both parse paths read a bare name as a buffer; it is the value of a var when it names one (names
  are unique, so this is never ambiguous)."""
  vs = {v.name for v in prog.of(Var)}
  if not vs: return prog
  def fix(st):
    if type(st) is not Exec or not any(type(a) is Slice and not a.ranged and a.buffer.name in vs for a in st.args): return st
    return attrs.evolve(st, args=tuple(Expr(a.buffer) if type(a) is Slice and not a.ranged and a.buffer.name in vs else a
                                       for a in st.args))
  if not any(type(st) is Exec and any(type(a) is Slice and a.buffer.name in vs for a in st.args) for q in prog.of(Queue) for st in q.body):
    return prog
  return attrs.evolve(prog, decls=tuple(attrs.evolve(d, body=tuple(map(fix, d.body))) if isinstance(d, Queue) else d
                                        for d in prog.decls))
