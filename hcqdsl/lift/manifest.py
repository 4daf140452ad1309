"""`hcqdsl lift`: command buffers back to a whole, checkable .hcq program — from an image (`.hcqimg`: names, vars, host
steps and kernels from its metadata) or from a raw dump described by a manifest (JSON, format in docs/lift.md: queues
with their dwords, optional read/write pointers, a signal snapshot, memory such as kernarg blocks, and the host's
submissions, signal writes and waits as `hcqdsl capture` records them). Packets are decoded by hcqdsl.amd and turned
into statements by the image lifter's (lift/image.py); what is no statement is kept as a comment with its dword offset."""
from __future__ import annotations
import json, pathlib, re, struct
from typing import Optional
import attrs
from ..ir import (Program, Device, Buffer, Signal, Var, Kernel, Param, Queue, Host, Wait, SignalWrite, Epoch, Submit,
                 Ref, Expr, ARCHS, KEYWORDS, U32_MAX)
from ..amd.image import Image, QueueImage, Patch, Region, MAGIC
from ..amd.disasm import decoder, read_raw
from .image import lift_image, write_code_objects, lift_group, lift_statements, queue_decl, lifted_program, Unliftable

__all__ = ["lift_manifest", "load_manifest", "lift_file", "Manifest", "ManifestError", "MANIFEST_VERSION"]

MANIFEST_KIND, MANIFEST_VERSION = "hcqdsl-manifest", 1
LAUNCH_VAR = "launch"

class ManifestError(ValueError):
  """A manifest that cannot be used: the message names the file and the JSON path of the bad field."""

# ---------------------------------------------------------------- manifests

@attrs.define
class MQueue:
  name: str
  device: str
  target: str
  engine: str         # compute | copy
  dwords: list        # the ring (or a linear stream) as given
  read_ptr: Optional[int]
  write_ptr: Optional[int]
  start: Optional[int]
  base: Optional[int]

@attrs.define
class Manifest:
  file: str
  devices: list       # {"name", "index", "arch"}
  queues: list        # of MQueue
  signals: dict       # addr -> {"value", "name", "device"}
  buffers: list       # {"addr", "size", "name", "device"}
  memory: list        # (addr, bytes)
  kernels: dict       # prog addr -> {"name", "params"}
  host: Optional[list]  # ordered {"op": submit|signal|wait, ...}; None: a raw dump without host steps

class _V:
  """Typed access to one JSON object with its path, for error messages."""
  def __init__(self, file: str, obj, path: str): self.file, self.obj, self.path = file, obj, path
  def fail(self, key: str, msg: str):
    where = ".".join(x for x in (self.path, key) if x) or "(top level)"
    raise ManifestError(f"{self.file}: {where}: {msg}")
  def get(self, key: str, kind: str, required=False, default=None):
    if not isinstance(self.obj, dict): self.fail("", f"expected an object, got {type(self.obj).__name__}")
    if key not in self.obj:
      if required: self.fail(key, "missing")
      return default
    v = self.obj[key]
    if kind == "int":
      if isinstance(v, str):
        try: v = int(v.replace("_", ""), 0)
        except ValueError: self.fail(key, f"expected an integer (or a \"0x...\" string), got {v!r}")
      if not isinstance(v, int) or isinstance(v, bool): self.fail(key, f"expected an integer, got {json.dumps(v)}")
      if v < 0: self.fail(key, f"expected a non-negative integer, got {v}")
      return v
    if kind == "str":
      if not isinstance(v, str) or not v: self.fail(key, f"expected a non-empty string, got {json.dumps(v)}")
      return v
    if kind == "bool":
      if not isinstance(v, bool): self.fail(key, f"expected true or false, got {json.dumps(v)}")
      return v
    if kind == "list":
      if not isinstance(v, list): self.fail(key, f"expected a list, got {type(v).__name__}")
      return [_V(self.file, x, f"{self.path}{'.' if self.path else ''}{key}[{i}]") for i, x in enumerate(v)]
    raise AssertionError(kind)

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
_ENGINES = {"compute": "compute", "pm4": "compute", "copy": "copy", "sdma": "copy"}

def _name(v: _V, key: str, default: Optional[str]) -> Optional[str]:
  n = v.get(key, "str", default=default)
  if n is not None and not _IDENT.match(n): v.fail(key, f"`{n}` is not an identifier ([A-Za-z_][A-Za-z0-9_]*)")
  return n

def _hex_bytes(v: _V, key: str) -> bytes:
  s = v.get(key, "str", required=True)
  try: return bytes.fromhex(s.replace(" ", "").replace("\n", ""))
  except ValueError: v.fail(key, "expected hex bytes")

def _raw_dwords(b: bytes) -> list:
  """One queue's dwords: hex text or little-endian binary (disasm's reader; a `compile --hex` line prefix is allowed)."""
  qs = read_raw(b)
  if len(qs) != 1: raise ValueError(f"holds {len(qs)} queues (`queue NAME ...:` lines); give one queue's dwords")
  return qs[0][3]

def load_manifest(source, file: Optional[str] = None) -> Manifest:
  """A manifest from a path, JSON text or an already-parsed dict. Raises ManifestError naming the bad field."""
  base = pathlib.Path(".")
  if isinstance(source, (str, pathlib.Path)) and not (isinstance(source, str) and source.lstrip().startswith("{")):
    p = pathlib.Path(source)
    file, base = file or str(p), p.parent
    try: source = p.read_text(encoding="utf-8", errors="replace")
    except OSError as e: raise ManifestError(f"{p}: {e.strerror or e}") from None
  file = file or "<manifest>"
  if isinstance(source, str):
    try: source = json.loads(source)
    except json.JSONDecodeError as e:
      if e.pos == 0: raise ManifestError(f"{file}: neither an image (.hcqimg) nor a manifest (JSON); raw dwords need a manifest (docs/lift.md)") from None
      raise ManifestError(f"{file}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
  top = _V(file, source, "")
  if top.get("format", "str", required=True) != MANIFEST_KIND:
    top.fail("format", f"expected \"{MANIFEST_KIND}\", got {json.dumps(source['format'])}")
  if (ver := top.get("version", "int", required=True)) != MANIFEST_VERSION:
    top.fail("version", f"this hcqdsl reads manifest version {MANIFEST_VERSION}, got {ver}")
  devices, by_name = [], {}
  for d in top.get("devices", "list", default=[]):
    arch = d.get("arch", "str", required=True)
    if arch not in ARCHS: d.fail("arch", f"unknown arch `{arch}` (one of {', '.join(ARCHS)})")
    dev = {"name": _name(d, "name", None) or d.fail("name", "missing"), "index": d.get("index", "int", required=True), "arch": arch}
    if dev["name"] in by_name: d.fail("name", f"device `{dev['name']}` listed twice")
    devices.append(dev); by_name[dev["name"]] = dev
  queues, qnames = [], set()
  qs = top.get("queues", "list", required=True)
  if not qs: top.fail("queues", "no queues")
  for i, q in enumerate(qs):
    target = q.get("target", "str", required=True)
    if target not in ARCHS: q.fail("target", f"unknown target `{target}` (one of {', '.join(ARCHS)})")
    eng = q.get("engine", "str", required=True)
    if eng not in _ENGINES: q.fail("engine", f"expected compute (pm4) or copy (sdma), got `{eng}`")
    dev = _name(q, "device", None) or q.fail("device", "missing")
    if dev not in by_name:
      by_name[dev] = {"name": dev, "index": 1 + max((d["index"] for d in devices), default=-1), "arch": target}
      devices.append(by_name[dev])
    elif by_name[dev]["arch"] != target: q.fail("target", f"device `{dev}` is {by_name[dev]['arch']}, not {target}")
    engine = _ENGINES[eng]
    name = _name(q, "name", f"{engine}{i}_{dev}")
    if name in qnames: q.fail("name", f"queue `{name}` listed twice")
    qnames.add(name)
    if "dwords" in q.obj and "file" in q.obj: q.fail("", "give `dwords` or `file`, not both")
    if "file" in q.obj:
      path = base / q.get("file", "str")
      try: raw = path.read_bytes()
      except OSError as e: q.fail("file", f"{path}: {e.strerror or e}")
      try: dw = _raw_dwords(raw)
      except ValueError as e: q.fail("file", f"{path}: {e}")
    elif isinstance(q.obj.get("dwords"), list):
      dw = [x.obj for x in q.get("dwords", "list")]
      for j, x in enumerate(dw):
        if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x <= U32_MAX: q.fail(f"dwords[{j}]", f"expected a 32-bit unsigned integer, got {json.dumps(x)}")
    elif "dwords" in q.obj:
      try: dw = _raw_dwords(q.get("dwords", "str").encode())
      except (ValueError, UnicodeEncodeError) as e: q.fail("dwords", f"expected hex dwords: {e}")
    else: q.fail("dwords", "missing (give `dwords`: hex text or a list of integers, or `file`)")
    rp, wp, st = q.get("read_ptr", "int"), q.get("write_ptr", "int"), q.get("start", "int")
    n = len(dw)
    if wp is not None and rp is not None and rp > wp:
      if rp < n and wp < n: wp += n  # ring indices: the write pointer wrapped past the ring's end
      else: q.fail("read_ptr", f"{rp} is past write_ptr {wp}")
    if wp is not None and n and (wp - (st if st is not None else rp if rp is not None else max(0, wp - n))) > n:
      q.fail("write_ptr", f"{wp - (st if st is not None else rp)} dwords between start/read_ptr and write_ptr, but the ring holds {n}")
    if wp is None and (rp is not None and rp > n): q.fail("read_ptr", f"{rp} is past the {n} dwords given (give write_ptr for a ring)")
    if st is not None and ((rp is not None and st > rp) or (wp is not None and st > wp)): q.fail("start", f"{st} is past read_ptr/write_ptr")
    queues.append(MQueue(name, dev, target, engine, dw, rp, wp, st, q.get("base", "int")))
  signals = {}
  for s in top.get("signals", "list", default=[]):
    a, v = s.get("addr", "int", required=True), s.get("value", "int", required=True)
    if v > U32_MAX: s.fail("value", f"{v} is not a 32-bit signal value")
    dev = _name(s, "device", None)
    if dev is not None and dev not in by_name: s.fail("device", f"unknown device `{dev}`")
    tl = s.get("timeline", "bool", default=False)
    if tl and dev is None: s.fail("timeline", "a timeline signal needs its `device`")
    signals[a] = {"value": v, "name": _name(s, "name", None), "device": dev, "timeline": tl}
  buffers = []
  for b in top.get("buffers", "list", default=[]):
    dev = _name(b, "device", None)
    if dev is not None and dev not in by_name: b.fail("device", f"unknown device `{dev}`")
    size = b.get("size", "int", required=True)
    if size < 1: b.fail("size", "must be at least 1")
    buffers.append({"addr": b.get("addr", "int", required=True), "size": size, "name": _name(b, "name", None), "device": dev})
  memory = [(m.get("addr", "int", required=True), _hex_bytes(m, "hex")) for m in top.get("memory", "list", default=[])]
  kernels = {}
  for k in top.get("kernels", "list", default=[]):
    params = None
    if "params" in k.obj:
      params = [p.obj for p in k.get("params", "list")]
      for j, p in enumerate(params):
        if p not in ("in", "out", "inout"): k.fail(f"params[{j}]", f"expected in, out or inout, got {json.dumps(p)}")
    kernels[k.get("prog_addr", "int", required=True)] = {"name": _name(k, "name", None), "params": params}
  host = None
  if "host" in top.obj:
    host = []
    for h in top.get("host", "list"):
      op = h.get("op", "str", required=True)
      if op == "submit":
        qn = h.get("queue", "str", required=True)
        q = next((q for q in queues if q.name == qn), None)
        if q is None: h.fail("queue", f"unknown queue `{qn}`")
        s0, ln = h.get("start", "int", required=True), h.get("length", "int", required=True)
        if s0 + ln > len(q.dwords): h.fail("length", f"dwords {s0}..{s0 + ln} are past the {len(q.dwords)} dwords of `{qn}`")
        host.append({"op": "submit", "queue": qn, "start": s0, "length": ln})
      elif op in ("signal", "wait"):
        v = h.get("value", "int", required=True)
        if v > U32_MAX: h.fail("value", f"{v} is not a 32-bit signal value")
        host.append({"op": op, "addr": h.get("addr", "int", required=True), "value": v})
      else: h.fail("op", f"expected submit, signal or wait, got `{op}`")
  return Manifest(file, devices, queues, signals, buffers, memory, kernels, host)

# ---- packets -> statement groups for streams without a source map

def _pending_wait(p, snapshot: dict) -> bool:
  """A wait the snapshot does not satisfy (the engine is executing it although its read pointer ran past it)."""
  f = p.fields
  if p.name == "WAIT_REG_MEM" and f.get("mem_space") == 1: a, v = f.get("addr"), f.get("reference")
  elif p.name == "POLL_REGMEM" and f.get("mem_poll") == 1: a, v = f.get("addr"), f.get("value")
  else: return False
  return a in snapshot and snapshot[a]["value"] < v

def _group(pk: list, engine: str) -> list:
  """Statement-sized groups of packets, by the shapes hcqdsl and tinygrad emit; anything else is a group of one."""
  out, i, n = [], 0, len(pk)
  name = lambda j: pk[j].name if j < n and not pk[j].raw else None
  while i < n:
    p, f = pk[i], pk[i].fields
    take = 1
    if p.raw:  # a run of the same bad dword (unwritten ring space) is one comment
      while i + take < n and pk[i + take].raw and pk[i + take].note == p.note and pk[i + take].length == p.length == 1: take += 1
    elif engine == "compute":
      if p.name == "WAIT_REG_MEM" and f.get("mem_space") == 0 and name(i + 1) == "ACQUIRE_MEM": take = 2
      elif p.name == "RELEASE_MEM" and f.get("data_sel") == 0 and name(i + 1) == "RELEASE_MEM" and name(i + 2) == "ACQUIRE_MEM": take = 3
      elif p.name == "ACQUIRE_MEM":
        j = i + 1
        while name(j) == "SET_SH_REG": j += 1
        if name(j) == "DISPATCH_DIRECT": take = j - i + 1 + (name(j + 1) == "EVENT_WRITE")
      elif p.name in ("NOP", "TYPE2_NOP"): i += 1; continue
    else:
      if p.name == "NOP": i += 1; continue
      if p.name == "COPY_LINEAR":
        while name(i + take) == "COPY_LINEAR":
          a, b = pk[i + take - 1].fields, pk[i + take].fields
          if b["src_addr"] != a["src_addr"] + a["count"] + 1 or b["dst_addr"] != a["dst_addr"] + a["count"] + 1: break
          take += 1
    out.append(pk[i:i + take]); i += take
  return out

def _signal_addrs(p) -> list:
  f = p.fields
  if p.raw: return []
  if p.name == "WAIT_REG_MEM" and f.get("mem_space") == 1: return [f["addr"]]
  if p.name == "RELEASE_MEM" and f.get("data_sel") == 1: return [f["addr"]]
  if p.name == "RELEASE_MEM" and f.get("data_sel") == 3: return [f["addr"] - 8]
  if p.name == "POLL_REGMEM" and f.get("mem_poll") == 1: return [f["addr"]]
  if p.name == "FENCE": return [f["addr"]]
  if p.name == "TIMESTAMP_GET_GLOBAL": return [f["write_addr"] - 8]
  return []

def _dispatch(g: list) -> Optional[tuple]:
  """(program address, kernarg address) of an exec group."""
  regs = {p.fields["reg"]: p.fields["values"] for p in g if p.name == "SET_SH_REG"}
  pgm, user = regs.get("regCOMPUTE_PGM_LO"), regs.get("regCOMPUTE_USER_DATA_0")
  if not any(p.name == "DISPATCH_DIRECT" for p in g) or not pgm or len(pgm) < 2 or not user or len(user) < 2: return None
  return ((pgm[1] << 32) | pgm[0]) << 8, (user[-1] << 32) | user[-2]

class _Mem:
  def __init__(self, chunks): self.chunks = sorted(chunks)
  def read(self, addr: int, n: int) -> Optional[bytes]:
    for a, b in self.chunks:
      if a <= addr and addr + n <= a + len(b): return b[addr - a:addr - a + n]
    return None
  def block(self, addr: int) -> Optional[bytes]:
    for a, b in self.chunks:
      if a <= addr < a + len(b): return b[addr - a:]
    return None

def _follow(dw: list, engine: str, target: str, mem: _Mem, depth: int = 0) -> tuple:
  """Packets of `dw` with indirect buffers whose contents the manifest holds spliced in (their packets keep the
  offset of the IB packet, so comments point at the ring). Returns (packets, notes)."""
  pk = decoder(engine, target).decode(dw)
  out = []
  for p in pk:
    ib = (p.fields.get("ib_base"), p.fields.get("ib_size")) if p.name in ("INDIRECT_BUFFER", "INDIRECT") and not p.raw else None
    if ib is None or None in ib or depth > 2: out.append(p); continue
    b = mem.read(ib[0], 4 * ib[1])
    if b is None:
      out.append(attrs.evolve(p, note=f"indirect buffer at {ib[0]:#x} ({ib[1]} dwords) is not in the manifest's memory")); continue
    sub = _follow(list(struct.unpack(f"<{len(b) // 4}I", b)), engine, target, mem, depth + 1)
    out += [attrs.evolve(x, offset=p.offset) for x in sub]
  return out

def _hexname(prefix: str, a: int) -> str: return f"{prefix}_{a:x}"

def lift_manifest(m: Manifest) -> Program:
  """A program from a raw dump. With read pointers: the work still to do at the dump (signals start at the snapshot;
  what ran already is listed as comments; check with launches=1). With host steps (a capture): the launches, with a var
  `launch` wherever a dword changes by one per launch. Otherwise: every queue's whole stream, launches=1."""
  mem = _Mem(m.memory)
  triage = any(q.read_ptr is not None for q in m.queues)
  notes: list = []
  # per queue: (dwords to lift, patches [(offset, add)], dwords already run (triage) or None, ring index of each dword)
  plan = _launches(m, notes) if (m.host is not None and not triage) else None
  streams = {}
  for q in m.queues:
    if plan is not None:
      if q.name not in plan["dwords"]: continue
      streams[q.name] = (plan["dwords"][q.name], plan["patches"].get(q.name, []), None, plan["offsets"][q.name])
      continue
    n = len(q.dwords)
    wp = q.write_ptr if q.write_ptr is not None else n
    st = q.start if q.start is not None else (0 if wp <= n else q.read_ptr if q.read_ptr is not None else wp - n)
    dw = [q.dwords[p % n] for p in range(st, wp)] if n else []
    streams[q.name] = (dw, [], None if q.read_ptr is None else q.read_ptr - st, [p % n for p in range(st, wp)] if n else [])
  # decode once, collect names
  decoded, sig_addrs, copies, dispatches = {}, list(m.signals), [], []
  for q in m.queues:
    if q.name not in streams: continue
    pk = _follow(streams[q.name][0], q.engine, q.target, mem)
    decoded[q.name] = groups = _group(pk, q.engine)
    for g in groups:
      for p in g: sig_addrs += _signal_addrs(p)
      if g and g[0].name == "COPY_LINEAR" and not g[0].raw:
        f = g[0].fields
        size = sum(p.fields["count"] + 1 for p in g)
        copies += [(f["src_addr"], size), (f["dst_addr"], size)]
      if q.engine == "compute" and (d := _dispatch(g)) is not None: dispatches.append(d)
  if m.host is not None: sig_addrs += [h["addr"] for h in m.host if h["op"] != "submit"]
  used = {d["name"] for d in m.devices} | {q.name for q in m.queues} | {LAUNCH_VAR}
  def fresh(name: Optional[str], fallback: str) -> str:
    """A manifest's name if it is free (names are global in .hcq, keywords are no names), else one from the address."""
    for n in (name, fallback):
      if n and n not in used and n not in KEYWORDS: used.add(n); return n
    i = 2
    while f"{fallback}_{i}" in used: i += 1
    used.add(n := f"{fallback}_{i}")
    return n
  signals: dict = {}
  for a in sig_addrs:
    if a in signals: continue
    info = m.signals.get(a, {})
    # a device's timeline becomes `D.timeline` (so its epoch waits read as `epoch`) when its value needs no init
    tl = f"{info['device']}.timeline" if info.get("timeline") and not triage and not info.get("value") else None
    signals[a] = tl if tl and tl not in signals.values() else fresh(info.get("name"), _hexname("s", a))
  # buffers: the manifest's, the copies' ranges, and kernel arguments
  ranges = [(b["addr"], b["addr"] + b["size"], b) for b in m.buffers] + [(a, a + n, None) for a, n in copies if n]
  kargs: dict = {}
  for prog, ka in dispatches:
    if ka in kargs: continue
    blk = mem.block(ka)
    ptrs = []
    if blk is not None:
      words = struct.unpack(f"<{len(blk) // 8}Q", blk[:len(blk) // 8 * 8])
      want = m.kernels.get(prog, {}).get("params")
      if want is not None: ptrs = list(words[:len(want)])
      else:
        inside = lambda w: any(lo <= w < hi for lo, hi, _ in ranges)
        for w in words:
          if not (inside(w) if ranges else w >= 0x10000): break
          ptrs.append(w)
    kargs[ka] = (prog, ptrs)
  for _, ptrs in kargs.values():
    ranges += [(w, w + 1, None) for w in ptrs if not any(lo <= w < hi for lo, hi, _ in ranges)]
  merged: list = []
  for lo, hi, b in sorted(ranges, key=lambda r: (r[0], -r[1])):
    if merged and lo < merged[-1][1]:
      merged[-1][1] = max(merged[-1][1], hi); merged[-1][2] = merged[-1][2] or b
    else: merged.append([lo, hi, b])
  buffers = {}
  for lo, hi, b in merged: buffers[fresh((b or {}).get("name"), _hexname("b", lo))] = (lo, hi - lo, (b or {}).get("device"))
  def buf_at(a: int) -> Optional[tuple]:
    return next(((n, a - lo) for n, (lo, size, _) in buffers.items() if lo <= a < lo + size), None)
  # kernels by program address, kernarg regions for the lifter; one declaration per kernel: the same named kernel on several devices (one code address each) is one `kernel`
  kernels, kdecl, kname, regions = [], {}, {}, []
  for ka, (prog, ptrs) in kargs.items():
    info = m.kernels.get(prog, {})
    modes = tuple(info["params"][:len(ptrs)]) if info.get("params") else ("inout",) * len(ptrs)
    key = (info.get("name") or prog, modes)
    if key not in kdecl:
      kdecl[key] = Kernel(fresh(info.get("name"), _hexname("k", prog)), tuple(Param(md, f"a{i}") for i, md in enumerate(modes)))
    kname[prog, len(ptrs)] = kdecl[key].name
    args = []
    for w in ptrs:
      nm, off = buf_at(w)
      args.append([nm, off or None, None, bool(off)])
    regions.append(Region(f"kernargs_{ka:x}", "kernargs", None, ka, 8 * len(ptrs), {"kernel": kdecl[key].name, "args": args}))
  kparams = {k.name: [[p.mode, p.name, 8 * i] for i, p in enumerate(k.params)] for k in kdecl.values()}
  kernels = [{"name": n, "prog_addr": prog, "params": kparams[n]} for (prog, _), n in kname.items()]
  # the pseudo image the statement lifter reads names from
  img = Image(m.queues[0].target, m.file, m.devices, [], regions, {n: a for a, n in signals.items()},
              {n: (lo, size) for n, (lo, size, _) in buffers.items()}, kernels, [], [], [])
  decls: list = [Device(d["name"], "AMD", d["index"], d["arch"]) for d in m.devices]
  decls += [Buffer(n, Ref(dev) if dev else None, size) for n, (lo, size, dev) in buffers.items()]
  for a, n in signals.items():
    info = m.signals.get(a, {})
    if n.endswith(".timeline"): continue
    decls.append(Signal(n, Ref(info["device"]) if info.get("device") else None, info.get("value", 0)))
  if plan is not None and plan["uses_var"]: decls.append(Var(LAUNCH_VAR))
  decls += list(kdecl.values())
  for q in m.queues:
    if q.name not in decoded: continue
    dw, patches, done, ring_at = streams[q.name]
    qi = QueueImage(q.name, q.engine, q.device, q.target, 0, dw, [Patch(o, LAUNCH_VAR, add) for o, add in patches], [])
    groups = decoded[q.name]
    head: tuple = ()
    if triage:
      rp = done or 0
      cut = next((k for k, g in enumerate(groups) if g[0].offset + sum(p.length for p in g) > rp), len(groups))
      while cut > 0 and len(groups[cut - 1]) == 1 and _pending_wait(groups[cut - 1][0], m.signals): cut -= 1
      ran = [f"# ran @{ring_at[g[0].offset]}: {_describe(img, qi, g)}" for g in groups[:cut]]
      where = f"read_ptr {q.read_ptr}, write_ptr {q.write_ptr if q.write_ptr is not None else len(q.dwords)}" \
        if q.read_ptr is not None else "no read_ptr: nothing known to have run"
      head = tuple(ran) + (f"# stopped here ({where})",)
      groups = groups[cut:]
    at = lambda g: f"@{ring_at[g[0].offset]}" if g and g[0].offset < len(ring_at) else None
    items = [_epochs(s, q.device) for s in lift_statements(img, qi, [(g, at(g)) for g in groups])]
    decls.append(queue_decl(q.name, q.engine, q.device, items, head))
  if triage: decls = _mark_stuck(decls, {n: m.signals.get(a, {}).get("value", 0) for a, n in signals.items()})
  if plan is not None and plan["host"]:
    decls.append(Host(tuple(_epochs(_host_stmt(h, signals), None) for h in plan["host"])))
  launches = plan["launches"] if plan is not None else 1
  mode = "the work left at the dump: signals start at their snapshot values" if triage else \
    f"{launches} captured launch{'es' * (launches != 1)}" if plan is not None else "each queue's whole stream, run once"
  header = [f"# hcq: launches={launches}", f"# lifted from {m.file} by hcqdsl lift ({mode})"] + [f"# note: {x}" for x in notes]
  return lifted_program(decls, m.file, header)

def _epochs(s, device: Optional[str]):
  """A value on `D.timeline` that grows by one per launch is `D.epoch + c`; the queue's own `wait D.timeline >=
  D.epoch - 1` is `epoch` (every var is k in launch k, so this is the same program)."""
  if not isinstance(s, (Wait, SignalWrite)) or not s.signal.name.endswith(".timeline") or s.value.var != Ref(LAUNCH_VAR): return s
  d = s.signal.name[:-len(".timeline")]
  e = Expr(Ref(f"{d}.epoch"), s.value.offset)
  if isinstance(s, Wait) and d == device and e.offset == -1: return Epoch(comments=s.comments, comment=s.comment)
  return attrs.evolve(s, value=e)

def _mark_stuck(decls: list, values: dict) -> list:
  """The stop mark of a queue whose next statement is an unsatisfied wait says what it needs, what the signal holds
  and which queue's pending write could release it (or that none can)."""
  queues = [d for d in decls if isinstance(d, Queue)]
  out = []
  for d in decls:
    if not isinstance(d, Queue) or not d.body or not isinstance(d.body[0], Wait) or d.body[0].value.var is not None:
      out.append(d); continue
    w = d.body[0]
    sig, need, now = w.signal.name, w.value.offset, values.get(w.signal.name, 0)
    if now >= need: out.append(d); continue
    writers = [f"{q.name} `signal {sig} = {s.value}`{' ' + s.comment[2:] if s.comment else ''}" for q in queues for s in q.body
               if isinstance(s, SignalWrite) and s.signal.name == sig and s.value.var is None and s.value.offset >= need]
    why = f"# stuck: waits for {sig} >= {need}, which holds {now}; " + \
      (f"released only by {' or '.join(writers)}" if writers else "no pending write brings it there: nothing can release it")
    out.append(attrs.evolve(d, body=(attrs.evolve(w, comments=w.comments + (why,)),) + d.body[1:]))
  return out

def _describe(img, qi, g) -> str:
  from ..lang.format import format_stmt
  try: return "; ".join(format_stmt(s) for s in lift_group(img, qi, g, qi.engine))
  except (Unliftable, KeyError, IndexError, TypeError): return ", ".join(p.name for p in g)

def _host_stmt(h: dict, signals: dict):
  if h["op"] == "submit": return Submit(tuple(Ref(q) for q in h["queues"]))
  e = Expr(Ref(LAUNCH_VAR), h["add"]) if h.get("var") else Expr(None, h["value"])
  return (Wait if h["op"] == "wait" else SignalWrite)(Ref(signals[h["addr"]]), e)

def _launches(m: Manifest, notes: list) -> Optional[dict]:
  """Split the host's steps into launches (the shortest period that repeats, each queue submitted at most once per
  launch) and make one template of them: a dword or host value that grows by one per launch becomes `launch + c`."""
  ev = m.host
  shape = lambda e: (e["op"], e.get("queue"), e.get("addr"), e.get("length"))
  n = len(ev)
  period = None
  for P in range(1, n + 1):
    if n % P: continue
    if any(shape(ev[i]) != shape(ev[i % P]) for i in range(n)): continue
    subs = [e["queue"] for e in ev[:P] if e["op"] == "submit"]
    if len(subs) != len(set(subs)): continue
    period = P; break
  qmap = {q.name: q for q in m.queues}
  out = {"launches": 1, "dwords": {}, "patches": {}, "offsets": {}, "host": [], "uses_var": False}
  if period is None:
    notes.append("the host's steps do not repeat launch by launch: lifted as one launch in which each queue's whole "
                 "stream is submitted at its first submission (later work may look submitted earlier than it was)")
    for e in ev:
      if e["op"] != "submit":
        out["host"].append({**e, "var": False}); continue
      if e["queue"] in out["dwords"]: continue
      q = qmap[e["queue"]]
      out["dwords"][q.name], out["offsets"][q.name] = list(q.dwords), list(range(len(q.dwords)))
      if out["host"] and out["host"][-1]["op"] == "submit": out["host"][-1]["queues"].append(q.name)
      else: out["host"].append({"op": "submit", "queues": [q.name]})
    return out
  K = out["launches"] = n // period
  def fit(vals: list, what: str) -> Optional[int]:
    """c with vals[k] == k + 1 + c (mod 2**32) for every launch k, else None (noted)."""
    if len(set(vals)) == 1: return None
    c = vals[0] - 1
    if all((v - (k + 1 + c)) & U32_MAX == 0 for k, v in enumerate(vals)):
      out["uses_var"] = True
      return c if c <= U32_MAX // 2 else c - (1 << 32)
    notes.append(f"{what} changes between launches as {', '.join(str(v) for v in vals[:6])}: not `launch + c`; "
                 "kept launch 1's value")
    return False
  for i, e in enumerate(ev[:period]):
    if e["op"] == "submit":
      q = qmap[e["queue"]]
      per = [q.dwords[ev[i + k * period]["start"]:ev[i + k * period]["start"] + e["length"]] for k in range(K)]
      out["dwords"][q.name] = per[0]
      out["offsets"][q.name] = list(range(e["start"], e["start"] + e["length"]))
      pats = []
      for o in range(e["length"]):
        c = fit([d[o] for d in per], f"dword @{e['start'] + o} of `{q.name}`")
        if c is not None and c is not False: pats.append((o, c))
      out["patches"][q.name] = pats
      if out["host"] and out["host"][-1]["op"] == "submit": out["host"][-1]["queues"].append(q.name)
      else: out["host"].append({"op": "submit", "queues": [q.name]})
    else:
      c = fit([ev[i + k * period]["value"] for k in range(K)], f"host {e['op']} on {e['addr']:#x} (step {i + 1})")
      out["host"].append({**e, "var": c is not None and c is not False, "add": c})
  return out

# ---------------------------------------------------------------- files, CLI

def lift_file(path, program_file: Optional[str] = None, code_dir=None) -> Program:
  """Lift an image (`.hcqimg`, by its magic) or a manifest (JSON). An image's real code objects are written into
  `code_dir` when given (the lifted program names them relative to itself: put it there too). Raises ValueError
  (ManifestError) on bad input."""
  p = pathlib.Path(path)
  try: b = p.read_bytes()
  except OSError as e: raise ManifestError(f"{p}: {e.strerror or e}") from None
  if b[:8] == MAGIC:
    try:
      img = Image.from_bytes(b)
      prog = lift_image(img)
    except ValueError as e: raise ManifestError(f"{p}: {e}") from None
    if code_dir is not None:
      try: write_code_objects(img, code_dir)
      except ValueError as e: raise ManifestError(str(e)) from None
  else: prog = lift_manifest(load_manifest(p))
  return attrs.evolve(prog, file=program_file or prog.file)
