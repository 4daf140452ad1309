"""The compiled image: memory plan, per-queue command buffers and patch tables, and its on-disk format.

The format is one declaration, IMAGE (at the end, in hcqdsl/schema.py's types): `Image.to_bytes` writes through it and `Image.from_bytes` reads
through it, and both check every value against it (types, ranges, names that must be defined, offsets inside their
queue), so what `to_bytes` writes always reads back, and a bad file is refused naming its first bad field.
docs/amd.md lists the declaration (`describe()`)."""
from __future__ import annotations
import bisect, json, pathlib, struct
from typing import Optional
import attrs
from ..ir import Expr, Ref, U32_MAX, TARGETS, NV_ARCHS, DTYPES, SCALARS, DEVICE_INDEX_MAX, MAX_LAUNCHES
from .. import schema
from ..schema import Pass, Invalid, convert, Int, Str, Bool, Num, Opt, List, Row, Map, Obj, Rec, Variant
from .layout import SIGNAL_SLOT, TIMESTAMP_OFFSET

__all__ = ["Image", "QueueImage", "Patch", "Region", "SourceEntry", "ImageError", "MAGIC", "VERSION", "HEADER_SIZE", "ADDR_MAX",
           "REGION_KINDS", "ENCODINGS", "IMAGE", "describe", "packet_format"]

MAGIC, VERSION = b"HCQIMG\0\0", 2   # 2: a rewrite lists its bytes only (the host zero-fills the rest)
HEADER_SIZE = 16                  # magic, u32 version, u32 metadata length
ADDR_MAX = (1 << 48) - 1          # GPU virtual addresses (and sizes) are below 2**48
REGION_KINDS = ("signals", "buffer", "code", "kernargs", "scratch", "cmdbuf")
ENCODINGS = ("u32", "lo", "hi")   # Patch.encoding: the value's low dword; lo/hi: the low/high dword of a 64-bit one

@attrs.define
class Region:
  """One allocation of the memory plan. kind: one of REGION_KINDS; meta: what it holds (IMAGE says which keys)."""
  name: str
  kind: str
  device: Optional[str]  # None: host memory
  addr: int
  size: int
  meta: dict = attrs.field(factory=dict)

@attrs.define
class Patch:
  """Dword `offset` of a queue's command buffer (or, in the queue's memory patches, the dword at address `offset`)
  holds `var + add` (var None: a constant): encoding u32 (or lo) its low 32 bits, hi the high dword of a 64-bit
  address."""
  offset: int
  var: Optional[str]
  add: int
  encoding: str = "u32"
  def value(self, env: dict) -> int:
    v = (env[self.var] if self.var is not None else 0) + self.add
    return (v >> 32 if self.encoding == "hi" else v) & U32_MAX
  def expr(self) -> str:
    e = str(Expr(Ref(self.var) if self.var else None, self.add))
    return e if self.encoding == "u32" else f"{self.encoding}({e})"

def packet_format(engine: str, arch: str) -> str:
  """pm4 | sdma (an AMD queue's packets) | nv (an NV queue's pushbuffer methods, docs/nv.md)."""
  return "nv" if arch in NV_ARCHS else "pm4" if engine == "compute" else "sdma"

@attrs.define(frozen=True)
class SourceEntry:
  """One statement of a queue's source map: its packets are dwords offset .. offset + length of the command buffer
  (length 0: a statement without packets, the SDMA barrier), written at line:column .. end_line:end_column as `text`."""
  offset: int
  length: int
  line: int
  column: int
  end_line: int
  end_column: int
  text: str
  def covers(self, offset: int) -> bool: return self.offset <= offset < self.offset + self.length

@attrs.define
class QueueImage:
  name: str
  engine: str   # compute (PM4) | copy (SDMA)
  device: str
  arch: str
  addr: int     # where the command buffer lives (its cmdbuf region)
  dwords: list  # the template, filled in for launch 1
  patches: list  # of Patch
  stmts: list   # of SourceEntry, in order
  mem_patches: list = attrs.field(factory=list)  # of Patch (offset = address): kernarg dwords written at its submit
  launches: Optional[tuple] = None   # its `launches` clause (first, last or None); None: every launch
  @property
  def packet_format(self) -> str: return packet_format(self.engine, self.arch)
  def span_at(self, offset: int) -> Optional[SourceEntry]:
    """The statement whose packets cover dword `offset`."""
    i = bisect.bisect_right([s.offset for s in self.stmts], offset) - 1
    while i >= 0 and self.stmts[i].length == 0: i -= 1  # statements without packets (barrier on SDMA) cover nothing
    return self.stmts[i] if i >= 0 and self.stmts[i].covers(offset) else None

@attrs.define
class Image:
  target: str
  file: str
  devices: list   # {"name", "index", "arch"}
  vars: list      # every var incl. D.epoch and a rebound buffer's B.addr
  regions: list   # of Region
  signals: dict   # name -> address of the value (timestamp at +TIMESTAMP_OFFSET)
  buffers: dict   # name -> (address, size)
  kernels: list   # {"name", "device", "code_addr", "kd_addr", "prog_addr", "synthetic", "kernarg_size", "params", "impl"}
  queues: list    # of QueueImage
  data: list      # (address, bytes): initial memory contents (signal values, buffer inits, code, kernargs)
  host: list      # host statements with resolved addresses, see docs/amd.md
  expects: list = attrs.field(factory=list)
  var_values: dict = attrs.field(factory=dict)  # var -> per-launch values (listed vars, `B.addr` of rebound buffers)
  rewrites: list = attrs.field(factory=list)    # (launch, address, bytes): the host rewrites a buffer as launch k starts

  def queue(self, name: str) -> QueueImage: return next(q for q in self.queues if q.name == name)
  @property
  def listed_launches(self) -> Optional[int]:
    """The launches the listed values cover (the shortest list); None: no lists."""
    return min(map(len, self.var_values.values())) if self.var_values else None
  def env(self, launch: int = 1, **overrides) -> dict:
    env = {v: launch for v in self.vars}
    for v, vals in self.var_values.items():
      if launch <= len(vals): env[v] = vals[launch - 1]
    env.update(overrides)
    return env
  def patched(self, q: QueueImage, env: dict) -> list:
    dw = list(q.dwords)
    for p in q.patches: dw[p.offset] = p.value(env)
    return dw
  def name_at(self, addr: int) -> Optional[str]:
    """`sig`, `sig.timestamp`, `buf`, `buf+0x10`, `kernel.code`, ... for an address inside the memory plan."""
    for n, a in self.signals.items():
      if a <= addr < a + SIGNAL_SLOT: return n if addr == a else f"{n}.timestamp" if addr == a + TIMESTAMP_OFFSET else f"{n}+{addr - a}"
    for r in self.regions:
      if r.kind != "signals" and r.addr <= addr < r.addr + max(r.size, 1):
        return r.name if addr == r.addr else f"{r.name}+{addr - r.addr:#x}"
    return None

  # ---- on-disk format: MAGIC, u32 version, u32 metadata length, the metadata (JSON, by IMAGE), zero pad to 8, data
  def to_bytes(self) -> bytes:
    """The file. Raises ImageError when the image does not fit IMAGE (a bug in whoever built it)."""
    c = _Pass(False, bytearray())
    js = json.dumps(convert(IMAGE, self, c), separators=(",", ":")).encode()
    head = MAGIC + struct.pack("<II", VERSION, len(js)) + js
    return head + bytes(-len(head) % 8) + bytes(c.data)

  @staticmethod
  def from_bytes(b: bytes) -> "Image":
    """Raises ImageError (a ValueError) naming what is wrong: magic, version, length, or the first bad field."""
    if len(b) < HEADER_SIZE or b[:8] != MAGIC: raise ImageError("not an hcqdsl image (bad magic)")
    ver, n = struct.unpack_from("<II", b, 8)
    if ver != VERSION: raise ImageError(f"unsupported image version {ver} (this hcqdsl reads {VERSION})")
    if HEADER_SIZE + n > len(b): raise ImageError("truncated image (metadata)")
    try: m = json.loads(b[HEADER_SIZE:HEADER_SIZE + n])
    except ValueError as e: raise ImageError(f"corrupt image metadata: {e}") from None   # also bad UTF-8
    except RecursionError: raise ImageError("corrupt image metadata: JSON nested too deeply") from None
    base = HEADER_SIZE + n + -(HEADER_SIZE + n) % 8
    return convert(IMAGE, m, _Pass(True, memoryview(b)[base:]))

  def save(self, path) -> None:
    """Write the image to `path` atomically (the old file stays whole when the write fails)."""
    from ..files import write_atomic
    write_atomic(path, self.to_bytes())
  @staticmethod
  def load(path) -> "Image": return Image.from_bytes(pathlib.Path(path).read_bytes())

# ---------------------------------------------------------------- the schema

class ImageError(ValueError):
  """An image that cannot be read (or, from to_bytes, written); the message names the first bad field."""

class _Pass(Pass):
  """One pass over an image's metadata, reading (JSON -> objects) or writing (objects -> JSON; the data part grows
  as bytes are met), with the dword count of the queue being converted (patches and the source map index into it)."""
  NOUN = "image"
  def __init__(self, reading: bool, data):
    super().__init__(reading)
    self.data, self.ndw = data, 0
  def error(self, e: Invalid) -> ImageError:
    return ImageError(f"{'corrupt image metadata' if self.reading else 'cannot write image metadata'}: {super().error(e)}")

class Blob:
  """Bytes in the data part; JSON [offset, length] (each piece starts 8-byte aligned)."""
  fast = None
  def conv(self, v, c: _Pass, at: str):
    if not c.reading:
      if type(v) not in (bytes, bytearray): c.fail(at, "bytes", v)
      off = len(c.data)
      c.data += v
      c.data += bytes(-len(c.data) % 8)
      return [off, len(v)]
    if type(v) is not list or len(v) != 2 or type(v[0]) is not int or type(v[1]) is not int:
      c.fail(at, "[offset, length] of the data part", v)
    off, n = v
    if not (0 <= off and 0 <= n and off + n <= len(c.data)): c.bad(f"{at} is {v}, past the end of the {len(c.data)}-byte data part")
    return bytes(c.data[off:off + n])
  def doc(self) -> str: return "[data offset, length]"

class Dwords(Blob):
  """A queue's dwords: little-endian u32s in the data part. Sets the pass's dword count (patches and the source map
  index into them)."""
  def conv(self, v, c: _Pass, at: str):
    if c.reading:
      b = super().conv(v, c, at)
      if len(b) % 4: c.bad(f"{at} is {v}, not a whole number of dwords")
      v = list(struct.unpack(f"<{len(b) // 4}I", b))
    else:
      if type(v) is not list: c.fail(at, "a list of dwords", v)
      try: b = struct.pack(f"<{len(v)}I", *v)
      except struct.error: c.fail(at, "a list of 32-bit unsigned integers", v)
      v = super().conv(b, c, at)
    c.ndw = len(b) // 4
    return v
  def doc(self) -> str: return "[data offset, length] of little-endian u32s"

ADDR, SIZE = Int(0, ADDR_MAX, "address (below 2**48)"), Int(0, ADDR_MAX, "size (below 2**48)")
U32 = Int(0, U32_MAX, "u32")
LINE = Int(0, (1 << 31) - 1, "int 0..2**31-1")
ADD = Int(-(1 << 64), 1 << 64, "int -2**64..2**64")   # a var's value, or the constant of `var + add`
VAR = Opt(Str(ref="vars"))
PATCH = Row(Patch, Int(0, lambda c: c.ndw - 1, "index into dwords"), VAR, ADD, Str(ENCODINGS), names=("offset", "var", "add", "encoding"))
MEM_PATCH = Row(Patch, ADDR, VAR, ADD, Str(ENCODINGS), names=("address", "var", "add", "encoding"))
STMT = Row(SourceEntry, Int(0, lambda c: c.ndw, "index into dwords"), Int(0, lambda c: c.ndw - c.row[0], "dwords, to the end at most"),
           LINE, LINE, LINE, LINE, Str(),
           names=("offset", "length", "line", "column", "end_line", "end_column", "text"))
KERNEL = Obj({"name": Str(), "device": Str(ref="devices"), "code_addr": ADDR, "kd_addr": ADDR, "prog_addr": ADDR,
              "synthetic": Bool(), "kernarg_size": U32,
              "params": List(Row(list, Str(("in", "out", "inout", *SCALARS)), Str(), U32, names=("mode", "name", "kernarg offset"))),
              "impl": Opt(Obj({"builtin": Opt(Str()), "dtype": Opt(Str()), "args": List(Num()), "c_source": Opt(Str()),
                               "amd_code": Opt(Str()), "code": Opt(Str())}, optional=("code",))),
              "code_object": Blob()}, optional=("code_object",))
# a block's `launches` clause: [first, last] (last null: every launch from first on); absent: every launch
LAUNCHES = Row(tuple, Int(1, MAX_LAUNCHES, f"launch 1..{MAX_LAUNCHES}"), Opt(Int(1, MAX_LAUNCHES, f"launch 1..{MAX_LAUNCHES}")),
               names=("first", "last"))
_SIGNAL_STEP = {"line": LINE, "signal": Str(ref="signals"), "addr": ADDR, "var": VAR, "add": ADD, "launches": LAUNCHES}
_O = ("launches",)
HOST_STEP = Variant("op", {"submit": Obj({"op": Str(("submit",)), "line": LINE, "queues": List(Str(ref="queues")), "launches": LAUNCHES}, _O),
                           "wait": Obj({"op": Str(("wait",)), **_SIGNAL_STEP}, _O), "signal": Obj({"op": Str(("signal",)), **_SIGNAL_STEP}, _O),
                           "write": Obj({"op": Str(("write",)), "line": LINE, "buffer": Str(ref="buffers"), "addr": ADDR, "size": SIZE,
                                         "dtype": Str(tuple(DTYPES)), "data": List(Blob()), "launches": LAUNCHES}, _O)})

def _arities(out: dict, c: _Pass, at: str) -> None:
  """Each exec's kernel arguments (a kernargs region's `args`, one per parameter) as many as its kernel's parameters:
  the lift declares the kernel by `params` and the exec by `args`."""
  if not c.reading: return
  kernels = {(k["name"], k["device"]): (j, len(k["params"])) for j, k in enumerate(out["kernels"])}
  for i, r in enumerate(out["regions"]):
    if r.kind != "kernargs" or "args" not in r.meta or (got := kernels.get((r.meta.get("kernel"), r.device))) is None: continue
    j, n = got
    if n != len(r.meta["args"]):
      c.bad(f"kernels[{j}].params holds {n} parameter{'s' * (n != 1)} of `{r.meta['kernel']}`, but regions[{i}].meta.args "
            f"(the kernel arguments of its exec `{r.name}`) holds {len(r.meta['args'])}")

# The metadata, in the order it is converted: names are defined before they are used (devices, vars, signals,
# buffers, then queues for the host steps).
IMAGE = Rec(Image, check=_arities,
  target=Str(TARGETS), file=Str(),
  devices=List(Obj({"name": Str(defines="devices"), "index": Int(0, DEVICE_INDEX_MAX), "arch": Str(TARGETS)})),
  vars=List(Str(defines="vars")),
  signals=Map(Str(defines="signals"), ADDR),
  buffers=Map(Str(defines="buffers"), Row(tuple, ADDR, SIZE, names=("address", "size"))),
  regions=List(Rec(Region, name=Str(), kind=Str(REGION_KINDS), device=Opt(Str(ref="devices")), addr=ADDR, size=SIZE,
                   meta=Obj({"names": List(Str(ref="signals")), "kernel": Str(), "queue": Str(), "launch": Int(1, U32_MAX),
                             "args": List(Opt(Row(list, Str(ref="buffers"), Opt(SIZE), Opt(SIZE), Bool(), Opt(Int(1, U32_MAX, "launch 1..")),
                                                  names=("buffer", "start", "end", "ranged", "launch"))))},
                            optional=("names", "kernel", "queue", "launch", "args")))),
  kernels=List(KERNEL),
  var_values=Map(Str(ref="vars"), List(ADD)),
  queues=List(Rec(QueueImage, name=Str(defines="queues"), engine=Str(("compute", "copy")), device=Str(ref="devices"),
                  arch=Str(TARGETS), addr=ADDR, dwords=Dwords(), patches=List(PATCH), stmts=List(STMT), mem_patches=List(MEM_PATCH),
                  launches=LAUNCHES, sparse=("launches",))),
  data=List(Row(tuple, ADDR, Blob(), names=("address", "bytes"))),
  host=List(HOST_STEP),
  expects=List(Obj({"buffer": Str(ref="buffers"), "addr": ADDR, "size": SIZE, "dtype": Str(tuple(DTYPES)),
                    "values": List(Num()), "approx": Bool(), "line": LINE, "rtol": Num(), "atol": Num()},
                   optional=("rtol", "atol"))),
  rewrites=List(Row(tuple, Int(1, U32_MAX, "launch 1.."), ADDR, Blob(), names=("launch", "address", "bytes"))))

def describe() -> str:
  """IMAGE as text: one line per key, nested keys indented (docs/amd.md holds it; a test keeps the two equal)."""
  return schema.describe(IMAGE)
