"""Program -> Image: a memory plan, one command buffer per queue (the launch template, filled in for launch 1) and a
patch table of every dword that changes between launches. Packet layouts live in hcqdsl/amd; this module only lays
out memory and walks statements. The on-disk format is described in docs/amd.md."""
from __future__ import annotations
import bisect, json, pathlib, struct, sys
from typing import Optional
import attrs
from .ir import (Program, Wait, SignalWrite, Exec, Copy, Barrier, Timestamp, Epoch, Submit, Expr, Ref, Slice, DTYPES,
                 ARCHS, U32_MAX, NO_SPAN, Span, resolve)
from .diagnostics import Diagnostic, HcqError

__all__ = ["compile_program", "Image", "QueueImage", "Patch", "Region", "add_compile_args", "cli_compile", "kernarg_layout"]

M32 = U32_MAX
MAGIC, VERSION = b"HCQIMG\0\0", 1
from .amd.layout import HOST_BASE, DEVICE_BASE, BUFFER_ALIGN
SIGNAL_SLOT = 16                    # value (u64, 32 bits used) at +0, timestamp (u64) at +8
ALIGN = {"signals": 0x1000, "buffer": BUFFER_ALIGN, "code": 0x1000, "kernargs": 64, "scratch": 0x1000, "cmdbuf": 0x1000}

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
      if a <= addr < a + SIGNAL_SLOT: return n if addr == a else f"{n}.timestamp" if addr == a + 8 else f"{n}+{addr - a}"
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

# ---------------------------------------------------------------- compiler

class _Alloc:
  def __init__(self, base: int): self.base, self.top = base, base
  def take(self, size: int, align: int) -> int:
    self.top += -self.top % align
    a, self.top = self.top, self.top + max(size, 1)
    return a

def _err(code: str, msg: str, span) -> HcqError: return HcqError([Diagnostic(code, msg, span)])

def _stmt_text(s) -> str:
  try:
    from .syntax import format_stmt  # type: ignore
    return format_stmt(s)
  except Exception: return type(s).__name__.lower()

def compile_program(program: Program, target: str = "gfx1100") -> Image:
  """Lower `program` for AMD. Each device uses its declared arch, else `target`. Raises HcqError (code `name` or
  `bounds`) on a program that cannot be lowered; run `check` first for the full set of diagnostics."""
  from .amd import pm4, sdma
  from .amd.targets import get_target
  from .amd.codeobj import synthetic, from_elf, ENTRY_OFFSET
  if target not in ARCHS: raise ValueError(f"unknown target {target!r} (known: {', '.join(ARCHS)})")
  names = program.lookup()
  devices = program.devices
  arch = {d.name: d.arch or target for d in devices}
  allocs = {None: _Alloc(HOST_BASE), **{d.name: _Alloc(DEVICE_BASE * (i + 1)) for i, d in enumerate(devices)}}
  regions: list[Region] = []
  data: list = []
  def region(name, kind, dev, size, **meta) -> int:
    if dev not in allocs: raise _err("name", f"unknown device `{dev}`", None)
    a = allocs[dev].take(size, ALIGN[kind])
    regions.append(Region(name, kind, dev, a, size, meta))
    return a
  def dev_of(ref) -> Optional[str]: return None if ref is None else ref.name

  # signals: one 16-byte slot each, packed into one region per memory
  signals: dict[str, int] = {}
  by_mem: dict = {}
  for s in program.signals: by_mem.setdefault(dev_of(s.device), []).append(s)
  for mem, sigs in by_mem.items():
    base = region(f"signals@{mem or 'host'}", "signals", mem, SIGNAL_SLOT * len(sigs), names=[s.name for s in sigs])
    for i, s in enumerate(sigs):
      signals[s.name] = base + SIGNAL_SLOT * i
      if s.init: data.append((signals[s.name], struct.pack("<Q", s.init & M32)))
  import numpy as np
  def contents(d) -> bytes: return np.array(d.values, dtype=np.dtype(DTYPES[d.dtype][0]).newbyteorder("<")).tobytes()
  buffers: dict[str, tuple] = {}
  var_values: dict = {n: list(v) for n, v in program.var_lists.items() if v}  # empty lists: a static error
  rebound: dict = {}   # rebound buffer -> its `B.addr` var (launch k's memory is a region of its own)
  rewrites: list = []
  for b in program.buffers:
    if b.per_launch == "rebound" and b.launch_inits:
      addrs = [region(f"{b.name}@{k + 1}", "buffer", dev_of(b.device), b.size, launch=k + 1) for k in range(len(b.launch_inits))]
      for a, d in zip(addrs, b.launch_inits): data.append((a, contents(d)))
      buffers[b.name] = (addrs[0], b.size)
      rebound[b.name] = var_values[f"{b.name}.addr"] = addrs
      continue
    buffers[b.name] = (a := region(b.name, "buffer", dev_of(b.device), b.size), b.size)
    if b.per_launch == "rewritten" and b.launch_inits:
      for k, d in enumerate(b.launch_inits): rewrites.append((k + 1, a, contents(d).ljust(b.size, b"\0")))
      data.append((a, rewrites[-len(b.launch_inits)][2]))
    elif b.init is not None: data.append((a, contents(b.init)))

  def sig_addr(ref: Ref, span=None) -> int:
    if ref.name not in signals: raise _err("name", f"`{ref.name}` is not a signal", span)
    return signals[ref.name]
  def slice_range(sl: Slice, span=None) -> tuple:
    if sl.buffer.name not in buffers: raise _err("name", f"`{sl.buffer.name}` is not a buffer", span)
    a, size = buffers[sl.buffer.name]
    lo, hi = sl.bounds(size)
    if not 0 <= lo <= hi <= size: raise _err("bounds", f"byte range [{lo}:{hi}) outside `{sl.buffer.name}` ({size} bytes)", span)
    return a + lo, hi - lo
  all_vars = list(program.vars) + [f"{b}.addr" for b in rebound]
  env1 = {**{v: 1 for v in all_vars}, **{v: vals[0] for v, vals in var_values.items()}}
  def value(e, at: int, q: str, patches: list, span=None, encoding="u32") -> int:
    """The launch-1 value of `e` (an int or Expr); a patch of dword `at` when it depends on a var."""
    if type(e) is int: return e & M32
    if e.var is None: return e.offset & M32
    if e.var.name not in env1: raise _err("name", f"`{e.var.name}` is not a var", span)
    p = Patch(q, at, e.var.name, e.offset, encoding)
    patches.append(p)
    return p.value(env1)
  def address(sl: Slice, at: int, q: str, patches: list, span=None, step=1) -> int:
    """The address of a slice's first byte; lo/hi patches at `at`, `at + step` (dwords of a command buffer: 1, bytes
    of memory: 4) when its buffer is rebound."""
    a, _ = slice_range(sl, span)
    if sl.buffer.name in rebound:
      e = Expr(Ref(f"{sl.buffer.name}.addr"), a - buffers[sl.buffer.name][0])
      value(e, at, q, patches, span, "lo"); value(e, at + step, q, patches, span, "hi")
    return a

  kernels: list = []
  code: dict = {}  # (kernel, device) -> (CodeObject, code address)
  base_dir = pathlib.Path(program.file).parent if program.file and not program.file.startswith("<") else pathlib.Path(".")
  def code_for(kname: str, dev: str, span):
    if (kname, dev) in code: return code[kname, dev]
    k = names.get(kname)
    if k is None or type(k).__name__ != "Kernel": raise _err("name", f"`{kname}` is not a kernel", span)
    t = get_target(arch[dev])
    if k.impl is not None and k.impl.amd_code:
      path = base_dir / k.impl.amd_code
      try: co = from_elf(t, path.read_bytes())
      except (OSError, ValueError) as e: raise _err("name", f"kernel `{kname}`: cannot load AMD code object {path}: {e}", span or k.span)
    else: co = synthetic(t, kname, len(k.params))
    a = region(f"{kname}.code@{dev}", "code", dev, len(co.image) + (-len(co.image) % 4), kernel=kname)
    if (a + co.entry_offset) % 256: raise _err("name", f"kernel `{kname}`: entry point is not 256-byte aligned", span)
    data.append((a, co.image))
    offs, _ = kernarg_layout(k.params)
    kernels.append({"name": kname, "device": dev, "code_addr": a, "kd_addr": a + co.kd_offset,
                    "prog_addr": a + co.entry_offset, "synthetic": co.synthetic, "kernarg_size": co.kernarg_size,
                    "params": [[p.mode, p.name, o] for p, o in zip(k.params, offs)],
                    "impl": attrs.asdict(k.impl, filter=lambda a, _: a.name != "span") if k.impl is not None else None})
    code[kname, dev] = (co, a)
    return code[kname, dev]
  scratch: dict = {}
  def scratch_for(dev: str) -> int:
    if dev not in scratch: scratch[dev] = region(f"scratch@{dev}", "scratch", dev, SCRATCH_SIZE)
    return scratch[dev]

  queues: list[QueueImage] = []
  for q in program.queues:
    dev = q.device.name
    if dev not in arch: raise _err("name", f"queue `{q.name}`: unknown device `{dev}`", q.span)
    t = arch[dev]
    enc = pm4.encoder(t) if q.engine == "compute" else sdma.encoder(t)
    out: list = []
    patches: list = []
    mem_patches: list = []
    stmts: list = []
    for n, s in enumerate(q.body):
      start = len(out)
      sp = s.span
      if isinstance(s, Epoch): s_eff = Wait(Ref(f"{dev}.timeline"), Expr(Ref(f"{dev}.epoch"), -1))
      else: s_eff = s
      if isinstance(s_eff, Wait):
        a = sig_addr(s_eff.signal, sp)
        enc.wait(out, a, value(s_eff.value, start + enc.WAIT_VALUE_AT, q.name, patches, sp))
      elif isinstance(s_eff, SignalWrite):
        a = sig_addr(s_eff.signal, sp)
        enc.signal(out, a, value(s_eff.value, start + enc.SIGNAL_VALUE_AT, q.name, patches, sp))
      elif isinstance(s, Barrier): enc.barrier(out)
      elif isinstance(s, Timestamp): enc.timestamp(out, sig_addr(s.signal, sp) + 8)
      elif isinstance(s, Copy):
        if q.engine != "copy": raise _err("name", "`copy` on a compute queue", s.span)
        (da, dn), (sa, sn) = slice_range(s.dst, sp), slice_range(s.src, sp)
        if dn != sn: raise _err("bounds", f"copy of {sn} bytes into {dn} bytes", s.span)
        enc.copy(out, da, sa, dn)
        for sl, at in ((s.src, enc.COPY_SRC_AT), (s.dst, enc.COPY_DST_AT)):
          if sl.buffer.name not in rebound: continue
          for j, off in enumerate(range(0, dn, enc.max_copy_size)):  # each COPY_LINEAR piece holds its own addresses
            address(Slice(sl.buffer, (sl.bounds(buffers[sl.buffer.name][1])[0]) + off, None, True), start + j * enc.COPY_DWORDS + at, q.name, patches, sp)
      elif isinstance(s, Exec):
        if q.engine != "compute": raise _err("name", "`exec` on a copy queue", s.span)
        co, ca = code_for(s.kernel.name, dev, sp)
        k = names[s.kernel.name]
        if len(s.args) != len(k.params): raise _err("name", f"`{k.name}` takes {len(k.params)} arguments, got {len(s.args)}", s.span)
        offs, size = kernarg_layout(k.params)
        kasz = max(size, co.kernarg_size)
        ka = region(f"{q.name}.kernargs.{n}", "kernargs", dev, kasz + (64 if co.dispatch_ptr else 0), kernel=k.name,
                    args=[[sl.buffer.name, sl.start, sl.end, sl.ranged] if type(sl) is Slice else None for sl in s.args])
        kargs = bytearray(kasz)
        for p, a, o in zip(k.params, s.args, offs):
          if p.scalar:
            if type(a) is not Expr: raise _err("name", f"parameter `{p.name}` of `{k.name}` takes a value", sp)
            struct.pack_into("<I", kargs, o, value(a, ka + o, q.name, mem_patches, sp))
          else:
            if type(a) is not Slice: raise _err("name", f"parameter `{p.name}` of `{k.name}` takes a buffer", sp)
            struct.pack_into("<Q", kargs, o, address(a, ka + o, q.name, mem_patches, sp, 4))
        data.append((ka, bytes(kargs)))
        gdims, bdims = s.grid or (1, 1, 1), s.block or (1, 1, 1)
        grid, block = tuple(resolve(x, env1) & M32 for x in gdims), tuple(resolve(x, env1) & M32 for x in bdims)
        if co.dispatch_ptr and any(type(x) is Expr for x in gdims + bdims):
          raise _err("name", f"kernel `{k.name}`: launch dimensions over vars need a code object without a dispatch packet", sp)
        user = []
        if co.private_segment_sgpr:  # scratch buffer resource, as tinygrad sets it up
          sc = scratch_for(dev)
          user += [sc & M32, (sc >> 32) | 1 << 31, M32, 0x20c14000]
        if co.dispatch_ptr: user += [(ka + kasz) & M32, (ka + kasz) >> 32]; data.append((ka + kasz, _dispatch_packet(co, grid, block, ka)))
        user += [ka & M32, ka >> 32]
        enc.exec(out, ca + co.entry_offset, co.rsrc1, co.rsrc2, co.rsrc3, _tmpring(t, co),
                 scratch_for(dev) if co.private_segment_size or co.private_segment_sgpr else 0, tuple(user), grid, block, co.wave32)
        for dims, back in ((bdims, enc.EXEC_BLOCK_FROM_END), (gdims, enc.EXEC_GRID_FROM_END)):
          for j, x in enumerate(dims): value(x, len(out) - back + j, q.name, patches, sp)
      else: raise _err("syntax", f"`{type(s).__name__}` is not a queue statement", getattr(s, "span", None))
      sp = s.span or NO_SPAN
      stmts.append((start, len(out) - start, sp.line, sp.column, sp.end_line, sp.end_column, _stmt_text(s)))
    ca = region(f"{q.name}.cmdbuf", "cmdbuf", dev, 4 * len(out), queue=q.name)
    queues.append(QueueImage(q.name, q.engine, dev, t, ca, out, patches, stmts, mem_patches))

  host = []
  if (h := program.host) is not None:
    for s in h.body:
      sp = s.span or NO_SPAN
      if isinstance(s, Submit): host.append({"op": "submit", "queues": [r.name for r in s.queues], "line": sp.line})
      elif isinstance(s, (Wait, SignalWrite)):
        v = s.value
        host.append({"op": "wait" if isinstance(s, Wait) else "signal", "signal": s.signal.name, "addr": sig_addr(s.signal, sp),
                     "var": v.var.name if v.var else None, "add": v.offset, "line": sp.line})
  expects = []
  for e in program.expects:
    a, n = slice_range(e.target, e.span)
    expects.append({"buffer": e.target.buffer.name, "addr": a, "size": n, "dtype": e.data.dtype,
                    "values": [v if v == v and v not in (float("inf"), float("-inf")) else repr(v) for v in e.data.values],
                    "approx": e.approx, "line": (e.span or NO_SPAN).line})
  return Image(target, program.file, [{"name": d.name, "index": d.index, "arch": arch[d.name]} for d in devices],
               all_vars, regions, signals, buffers, kernels, queues, data, host, expects, var_values, rewrites)

def kernarg_layout(params) -> tuple:
  """(byte offset of each parameter in the kernel arguments, their size): buffers are 8-byte pointers, scalars 4-byte
  values, each aligned to its size (tinygrad's layout: its kernels take buffers first, then their variables)."""
  offs, top = [], 0
  for p in params:
    n = 4 if p.scalar else 8
    top += -top % n
    offs.append(top); top += n
  return offs, top

SCRATCH_SIZE = 1 << 20  # per device, only when a real code object needs private memory

def _tmpring(t: str, co) -> int:
  """COMPUTE_TMPRING_SIZE: 0 without private memory; else WAVESIZE (per-wave bytes / 256, gfx9: / 1024) and as many
  waves as fit SCRATCH_SIZE."""
  if not co.private_segment_size: return 0
  from tinygrad.runtime.autogen import hsa
  from .amd.targets import get_target
  gen = get_target(t).gen
  align = 1024 if gen == 9 else 256
  wavesize = -(-64 * (co.private_segment_size + 3 & ~3) // align)
  ty = getattr(hsa, f'union_COMPUTE_TMPRING_SIZE{"_GFX" + str(gen) if gen != 9 else ""}_bitfields')
  return int.from_bytes(ty(WAVES=min(SCRATCH_SIZE // (wavesize * align), 0x3FF), WAVESIZE=wavesize), "little")

def _dispatch_packet(co, grid, block, kernarg_addr) -> bytes:
  from tinygrad.runtime.autogen import hsa
  dp = hsa.hsa_kernel_dispatch_packet_t()
  dp.workgroup_size_x, dp.workgroup_size_y, dp.workgroup_size_z = block
  dp.grid_size_x, dp.grid_size_y, dp.grid_size_z = (g * b for g, b in zip(grid, block))
  dp.group_segment_size, dp.private_segment_size = co.group_segment_size, co.private_segment_size
  dp.kernarg_address = kernarg_addr
  return bytes(dp)

# ---------------------------------------------------------------- CLI

def add_compile_args(p) -> None:
  from .cliutil import add_var_arg, add_no_check_arg
  p.add_argument("file", help="a .hcq program")
  p.add_argument("--target", default="gfx1100", choices=ARCHS, help="arch of devices that do not declare one (default gfx1100)")
  p.add_argument("-o", "--output", metavar="FILE", help="write the image here (default: FILE with suffix .hcqimg)")
  p.add_argument("--hex", action="store_true", help="print each queue's dwords (patched for launch 1) as `queue NAME ENGINE ARCH: dwords` lines, "
                 "which `hcqdsl disasm` reads back, instead of writing an image")
  add_var_arg(p)
  add_no_check_arg(p)

def cli_compile(a) -> int:
  from .diagnostics import render_text
  from .cliutil import read_source, parse_vars, check_vars, warn_check_errors
  text = read_source(a.file)
  var_values = parse_vars(a.var)
  from .syntax import parse
  try:
    prog = parse(text, a.file)
    check_vars(var_values, prog, a.file)
    img = compile_program(prog, a.target)
  except HcqError as e:
    sys.stderr.write(render_text(e.diagnostics, {a.file: text})); return 1
  if not a.no_check: warn_check_errors(prog, a.file, 2, var_values)
  if a.hex:
    for q in img.queues:
      print(f"queue {q.name} {q.engine} {q.arch}: " + " ".join(f"{x:08x}" for x in img.patched(q, img.env(1, **var_values))))
    return 0
  out = a.output or str(pathlib.Path(a.file).with_suffix(".hcqimg"))
  try: img.save(out)
  except OSError as e:
    sys.stderr.write(f"hcqdsl: error: {out}: {e.strerror or e}\n"); return 2
  sys.stderr.write(f"wrote {out}: {len(img.queues)} queue{'s' * (len(img.queues) != 1)}, "
                   f"{sum(len(q.dwords) for q in img.queues)} dwords, {sum(len(q.patches) for q in img.queues)} patches\n")
  return 0
