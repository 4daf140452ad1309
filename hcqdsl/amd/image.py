"""The compiled image: memory plan, per-queue command buffers and patch tables, and its on-disk format (docs/amd.md)."""
from __future__ import annotations
import bisect, json, pathlib, struct
from typing import Optional
import attrs
from ..ir import Expr, Ref, U32_MAX
from .layout import SIGNAL_SLOT, TIMESTAMP_OFFSET

__all__ = ["Image", "QueueImage", "Patch", "Region", "MAGIC", "VERSION"]

M32 = U32_MAX
MAGIC, VERSION = b"HCQIMG\0\0", 1

@attrs.define
class Region:
  """One allocation of the memory plan. kind: signals | buffer | code | kernargs | scratch | cmdbuf."""
  name: str
  kind: str
  device: Optional[str]  # None: host memory
  addr: int
  size: int
  meta: dict = attrs.field(factory=dict)

@attrs.define
class Patch:
  """Dword `offset` of `queue`'s command buffer (or, for the queue's memory patches, the dword at address `offset`)
  holds `var + add` (var None: a constant): encoding u32 its low 32 bits, lo/hi the low/high dword of a 64-bit
  address."""
  queue: str
  offset: int
  var: Optional[str]
  add: int
  encoding: str = "u32"
  def value(self, env: dict) -> int:
    v = (env[self.var] if self.var is not None else 0) + self.add
    return (v >> 32 if self.encoding == "hi" else v) & M32
  def expr(self) -> str:
    e = str(Expr(Ref(self.var) if self.var else None, self.add))
    return e if self.encoding == "u32" else f"{self.encoding}({e})"

@attrs.define
class QueueImage:
  name: str
  engine: str   # compute (PM4) | copy (SDMA)
  device: str
  arch: str
  addr: int     # where the command buffer lives (its cmdbuf region)
  dwords: list  # the template, filled in for launch 1
  patches: list  # of Patch
  stmts: list   # (dword offset, dword length, line, column, end_line, end_column, statement text), in order
  mem_patches: list = attrs.field(factory=list)  # of Patch (offset = address): kernarg dwords written at its submit
  @property
  def packet_format(self) -> str: return "pm4" if self.engine == "compute" else "sdma"
  def span_at(self, offset: int) -> Optional[tuple]:
    """The statement (offset, length, line, col, end_line, end_col, text) whose packets cover dword `offset`."""
    i = bisect.bisect_right([s[0] for s in self.stmts], offset) - 1
    while i >= 0 and self.stmts[i][1] == 0: i -= 1  # statements without packets (barrier on SDMA) cover nothing
    return self.stmts[i] if i >= 0 and offset < self.stmts[i][0] + self.stmts[i][1] else None

@attrs.define
class Image:
  target: str
  file: str
  devices: list   # {"name", "index", "arch"}
  vars: list      # every var incl. D.epoch
  regions: list   # of Region
  signals: dict   # name -> address of the value (timestamp at +8)
  buffers: dict   # name -> (address, size)
  kernels: list   # {"name", "device", "code_addr", "prog_addr", "kd_addr", "synthetic", "kernarg_size"}
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

  # ---- on-disk format: MAGIC, u32 version, u32 json length, JSON, zero pad to 8, blob (docs/amd.md)
  def to_bytes(self) -> bytes:
    blob = bytearray()
    def put(b: bytes) -> list:
      off = len(blob); blob.extend(b); blob.extend(b"\0" * (-len(blob) % 8))
      return [off, len(b)]
    meta = {"target": self.target, "file": self.file, "devices": self.devices, "vars": self.vars,
            "regions": [attrs.asdict(r) for r in self.regions], "signals": self.signals,
            "buffers": {k: list(v) for k, v in self.buffers.items()}, "kernels": self.kernels, "host": self.host,
            "expects": self.expects, "var_values": self.var_values,
            "rewrites": [[k, a, put(b)] for k, a, b in self.rewrites],
            "queues": [{"name": q.name, "engine": q.engine, "device": q.device, "arch": q.arch, "addr": q.addr,
                        "dwords": put(struct.pack(f"<{len(q.dwords)}I", *q.dwords)),
                        "patches": [[p.offset, p.var, p.add, p.encoding] for p in q.patches],
                        "mem_patches": [[p.offset, p.var, p.add, p.encoding] for p in q.mem_patches],
                        "stmts": [list(s) for s in q.stmts]} for q in self.queues],
            "data": [[a, put(b)] for a, b in self.data]}
    js = json.dumps(meta, separators=(",", ":")).encode()
    head = MAGIC + struct.pack("<II", VERSION, len(js)) + js
    return head + b"\0" * (-len(head) % 8) + bytes(blob)

  @staticmethod
  def from_bytes(b: bytes) -> "Image":
    if len(b) < 16 or b[:8] != MAGIC: raise ValueError("not an hcqdsl image (bad magic)")
    ver, n = struct.unpack_from("<II", b, 8)
    if ver != VERSION: raise ValueError(f"unsupported image version {ver} (this hcqdsl reads {VERSION})")
    if 16 + n > len(b): raise ValueError("truncated image (metadata)")
    try: m = json.loads(b[16:16 + n])
    except ValueError as e: raise ValueError(f"corrupt image metadata: {e}") from None
    base = 16 + n + (-(16 + n) % 8)
    from .image_meta import validate
    validate(m, max(0, len(b) - base))
    def get(ref) -> bytes:
      off, ln = ref
      if base + off + ln > len(b): raise ValueError("truncated image (data)")
      return bytes(b[base + off:base + off + ln])
    try:
      queues = [QueueImage(q["name"], q["engine"], q["device"], q["arch"], q["addr"],
                           list(struct.unpack(f"<{q['dwords'][1] // 4}I", get(q["dwords"]))),
                           [Patch(q["name"], o, v, a, e) for o, v, a, e in q["patches"]], [tuple(s) for s in q["stmts"]],
                           [Patch(q["name"], o, v, a, e) for o, v, a, e in q.get("mem_patches", [])])
                for q in m["queues"]]
      return Image(m["target"], m["file"], m["devices"], m["vars"], [Region(**r) for r in m["regions"]], m["signals"],
                   {k: tuple(v) for k, v in m["buffers"].items()}, m["kernels"], queues,
                   [(a, get(r)) for a, r in m["data"]], m["host"], m.get("expects", []), m.get("var_values", {}),
                   [(k, a, get(r)) for k, a, r in m.get("rewrites", [])])
    except (KeyError, TypeError, struct.error) as e: raise ValueError(f"corrupt image metadata: {e!r}") from None

  def save(self, path) -> None: pathlib.Path(path).write_bytes(self.to_bytes())
  @staticmethod
  def load(path) -> "Image": return Image.from_bytes(pathlib.Path(path).read_bytes())
