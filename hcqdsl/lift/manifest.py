"""`hcqdsl lift`: command buffers back to a whole, checkable .hcq program — from an image (`.hcqimg`: names, vars, host
steps and kernels from its metadata) or from a raw dump described by a manifest (JSON, format in docs/lift.md: queues
with their dwords, optional read/write pointers, a signal snapshot, memory such as kernarg blocks, and the host's
submissions, signal writes and waits as `hcqdsl capture` records them). Packets are decoded by hcqdsl.amd and turned
into statements by the image lifter's (lift/image.py); what is no statement is kept as a comment with its dword offset."""
from __future__ import annotations
import bisect, json, os, pathlib, re, struct
from typing import Optional
import attrs
import numpy as np
from ..ir import (Program, Device, Buffer, Signal, Var, Kernel, Param, Impl, Queue, Host, Expect, Wait, SignalWrite,
                 Epoch, Submit, HostWrite, Ref, Expr, Slice, Data, TARGETS, KEYWORDS, KERNARGS, U32_MAX, POLL_SIZE, DEVICE_INDEX_MAX,
                 timeline_of, epoch_of, epoch_wait)
from ..amd.image import Image, QueueImage, Patch, Region, MAGIC
from ..amd.layout import kernarg_layout
from ..amd.pm4 import FUNC_EQ
from ..amd.disasm import decoder, read_raw
from . import nv_capture
from .image import (lift_image, write_code_objects, lift_group, lift_statements, queue_decl, lifted_program, trimmed_data,
                    Unliftable)

__all__ = ["lift_manifest", "load_manifest", "lift_file", "Manifest", "ManifestError", "MANIFEST_VERSION"]

U64 = (1 << 64) - 1
MANIFEST_KIND, MANIFEST_VERSION = "hcqdsl-manifest", 2
READABLE_VERSIONS = (1, 2)  # version 1: no steps, contents or code (older captures and hand-written dumps)
LAUNCH_VAR = "launch"
# the tolerance of a lifted float32 expect: hcqdsl's RDNA3 executor and tinygrad's emulator round transcendentals (exp2,
# log2, rcp, sqrt) differently by an ulp or two, and chains of kernels (an optimizer step) grow that; values near zero
# differ in absolute terms — Adam's first steps divide a gradient by its own square root, so an update near zero moves
# by up to the learning rate (convnet.py's weights after three steps: 2e-4 apart)
LIFT_RTOL, LIFT_ATOL = 1e-3, 1e-3
MAX_QUEUE_FILE = 256 << 20   # bytes of a queue's `file` read at most (a ring is far smaller; /dev/zero never ends)

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
  version: int = 1
  steps: list = attrs.field(factory=list)   # version 2: (addr, bytes, step) memory read before host step `step` ran
  final: list = attrs.field(factory=list)   # version 2: (addr, bytes) contents when the capture ended
  mailboxes: set = attrs.field(factory=set)  # KFD interrupt mailbox addresses (writes there order nothing)
  path: str = "hcq"   # version 2: which of tinygrad's paths submitted (hcq: HWQueue objects, hcq2: the submitter program)
  graph_calls: list = attrs.field(factory=list)  # version 2: (step, graph, inputs): an HCQGraph call before host step
                      # `step`, its inputs as [[(addr, size) or None per device] or None per input] (tinygrad's input_uops)

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
  if isinstance(v.obj, dict) and v.obj.get(key) == "": return b""  # memory that reads as zeros (trailing zeros dropped)
  s = v.get(key, "str", required=True)
  try: return bytes.fromhex(s.replace(" ", "").replace("\n", ""))
  except ValueError: v.fail(key, "expected hex bytes")

def _raw_dwords(b: bytes) -> list:
  """One queue's dwords: hex text or little-endian binary (disasm's reader; a `compile --hex` line prefix is allowed)."""
  qs = read_raw(b)
  if len(qs) != 1: raise ValueError(f"holds {len(qs)} queues (`queue NAME ...:` lines); give one queue's dwords")
  return qs[0][3]

_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')

def too_deep(text: str, limit: int = 500) -> str:
  """`LINE:COLUMN` of the first bracket nested more than `limit` deep in JSON text (where json.loads gave up with a
  RecursionError, or near it)."""
  depth = 0
  for m in _JSON_TOKEN.finditer(text):
    c = m[0]
    if c in "[{": depth += 1
    elif c in "]}": depth -= 1
    if depth > limit:
      i = m.start()
      return f"{text.count(chr(10), 0, i) + 1}:{i - text.rfind(chr(10), 0, i)}"
  return "1:1"

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
    except RecursionError: raise ManifestError(f"{file}:{too_deep(source)}: invalid JSON: nested too deeply") from None
  top = _V(file, source, "")
  if top.get("format", "str", required=True) != MANIFEST_KIND:
    top.fail("format", f"expected \"{MANIFEST_KIND}\", got {json.dumps(source['format'])}")
  if (ver := top.get("version", "int", required=True)) not in READABLE_VERSIONS:
    top.fail("version", f"this hcqdsl reads manifest versions {' and '.join(map(str, READABLE_VERSIONS))}, got {ver}")
  devices, by_name = [], {}
  for d in top.get("devices", "list", default=[]):
    arch = d.get("arch", "str", required=True)
    if arch not in TARGETS: d.fail("arch", f"unknown arch `{arch}` (one of {', '.join(TARGETS)})")
    dev = {"name": _name(d, "name", None) or d.fail("name", "missing"), "index": d.get("index", "int", required=True), "arch": arch}
    if dev["index"] > DEVICE_INDEX_MAX: d.fail("index", f"{dev['index']} is past the largest device index, {DEVICE_INDEX_MAX}")
    if dev["name"] in by_name: d.fail("name", f"device `{dev['name']}` listed twice")
    if (o := next((x for x in devices if x["index"] == dev["index"]), None)) is not None:
      d.fail("index", f"{dev['index']} is already device `{o['name']}`'s index")
    devices.append(dev); by_name[dev["name"]] = dev
  queues, qnames = [], set()
  qs = top.get("queues", "list", required=True)
  if not qs: top.fail("queues", "no queues")
  for i, q in enumerate(qs):
    target = q.get("target", "str", required=True)
    if target not in TARGETS: q.fail("target", f"unknown target `{target}` (one of {', '.join(TARGETS)})")
    eng = q.get("engine", "str", required=True)
    if eng not in _ENGINES: q.fail("engine", f"expected compute (pm4) or copy (sdma), got `{eng}`")
    dev = _name(q, "device", None) or q.fail("device", "missing")
    if dev not in by_name:
      by_name[dev] = {"name": dev, "index": 1 + max((d["index"] for d in devices), default=-1), "arch": target}
      if by_name[dev]["index"] > DEVICE_INDEX_MAX: q.fail("device", f"`{dev}` would be device index {by_name[dev]['index']}, past {DEVICE_INDEX_MAX}")
      devices.append(by_name[dev])
    elif by_name[dev]["arch"] != target: q.fail("target", f"device `{dev}` is {by_name[dev]['arch']}, not {target}")
    engine = _ENGINES[eng]
    name = _name(q, "name", f"{engine}{i}_{dev}")
    if name in qnames: q.fail("name", f"queue `{name}` listed twice")
    qnames.add(name)
    if "dwords" in q.obj and "file" in q.obj: q.fail("", "give `dwords` or `file`, not both")
    if "file" in q.obj:
      path = base / q.get("file", "str")
      try:
        with open(path, "rb") as f: raw = f.read(MAX_QUEUE_FILE + 1)   # (bounded: a device like /dev/zero never ends)
      except OSError as e: q.fail("file", f"{path}: {e.strerror or e}")
      if len(raw) > MAX_QUEUE_FILE: q.fail("file", f"{path}: more than {MAX_QUEUE_FILE} bytes (a queue's dwords are far fewer)")
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
    if v > (U32_MAX if ver == 1 else U64): s.fail("value", f"{v} is not a {32 if ver == 1 else 64}-bit signal value")
    dev = _name(s, "device", None)
    if dev is not None and dev not in by_name: s.fail("device", f"unknown device `{dev}`")
    tl = s.get("timeline", "bool", default=False)
    if tl and dev is None: s.fail("timeline", "a timeline signal needs its `device`")
    signals[a] = {"value": v & U32_MAX, "name": _name(s, "name", None), "device": dev, "timeline": tl,
                  "mailbox": s.get("mailbox", "bool", default=False)}
  buffers = []
  for b in top.get("buffers", "list", default=[]):
    dev = _name(b, "device", None)
    if dev is not None and dev not in by_name: b.fail("device", f"unknown device `{dev}`")
    size = b.get("size", "int", required=True)
    if size < 1: b.fail("size", "must be at least 1")
    buffers.append({"addr": b.get("addr", "int", required=True), "size": size, "name": _name(b, "name", None), "device": dev})
  memory, steps = [], []
  for m in top.get("memory", "list", default=[]):
    ent = (m.get("addr", "int", required=True), _hex_bytes(m, "hex"))
    if "step" in m.obj: steps.append(ent + (m.get("step", "int"),))
    else: memory.append(ent)
  final = [(m.get("addr", "int", required=True), _hex_bytes(m, "hex")) for m in top.get("final", "list", default=[])]
  mailboxes = {a for a, s in signals.items() if s.get("mailbox")}
  kernels = {}
  for k in top.get("kernels", "list", default=[]):
    if not isinstance(k.obj, dict): k.fail("", f"expected an object, got {type(k.obj).__name__}")
    params, sig = None, None
    if "params" in k.obj:
      params = [p.obj for p in k.get("params", "list")]
      if ver >= 2 and all(isinstance(p, dict) for p in params):  # a capture: tinygrad's signature (buffers, then scalars)
        sig, params = params, None
      for j, p in enumerate(params or ()):
        if p not in ("in", "out", "inout"): k.fail(f"params[{j}]", f"expected in, out or inout, got {json.dumps(p)}")
    kernels[k.get("prog_addr", "int", required=True)] = {"name": _name(k, "name", None), "params": params, "signature": sig,
      "code": _hex_bytes(k, "code") if "code" in k.obj else None, "tinygrad_name": k.get("tinygrad_name", "str", default=None)}
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
        snap = h.obj.get("signals", {})
        if not isinstance(snap, dict): h.fail("signals", "expected an object of address: value")
        try: snap = {int(a, 0): int(v) for a, v in snap.items()}
        except (TypeError, ValueError): h.fail("signals", "expected \"0x...\" addresses and integer values")
        host.append({"op": "submit", "queue": qn, "start": s0, "length": ln, "signals": snap,
                     **({"stack": h.obj["stack"]} if "stack" in h.obj else {})})
      elif op in ("signal", "wait"):
        v = h.get("value", "int", required=True)
        if v > (U32_MAX if ver == 1 and op == "signal" else U64):   # the host's waits compare 64 bits in every version
          h.fail("value", f"{v} is not a {32 if ver == 1 and op == 'signal' else 64}-bit {'signal value' if op == 'signal' else 'host wait value'}")
        host.append({"op": op, "addr": h.get("addr", "int", required=True), "value": v,
                     **({"init": True} if h.obj.get("init") is True else {}), **({"stack": h.obj["stack"]} if "stack" in h.obj else {})})
      elif op == "write" and ver >= 2:   # the host's store of bytes into host memory (a staging refill)
        a, b = h.get("addr", "int", required=True), _hex_bytes(h, "hex")
        if (n := h.get("size", "int")) is not None:   # `size`: the bytes were not recorded (sanitize), only the range
          if b and len(b) != n: h.fail("size", f"{n}, but `hex` holds {len(b)} bytes")
          if n > U32_MAX: h.fail("size", f"{n} bytes: a host write is at most {U32_MAX} bytes")
        host.append({"op": "write", "addr": a, "data": b, "size": len(b) if n is None else n, **({"stack": h.obj["stack"]} if "stack" in h.obj else {}),
                     **({"staged": True} if h.obj.get("staged") is True else {})})
        if h.obj.get("hex"): steps.append((a, b, len(host)))   # what the memory holds from the next step on
      else: h.fail("op", f"expected {'submit, signal, wait or write' if ver >= 2 else 'submit, signal or wait'}, got `{op}`")
  graph_calls = []
  for g in top.get("graph_calls", "list", default=[]):
    inputs = []
    for row in g.get("inputs", "list", required=True):
      if row.obj is None: inputs.append(None); continue
      if not isinstance(row.obj, list): row.fail("", f"expected a list of [addr, size] per device, got {json.dumps(row.obj)}")
      bufs = []
      for j, x in enumerate(row.obj):
        if x is None: bufs.append(None); continue
        pair = _V(file, {"addr": x[0], "size": x[1]} if isinstance(x, list) and len(x) == 2 else x, f"{row.path}[{j}]")
        if not isinstance(pair.obj, dict): pair.fail("", f"expected [addr, size], got {json.dumps(x)}")
        bufs.append((pair.get("addr", "int", required=True), pair.get("size", "int", required=True)))
      inputs.append(bufs)
    graph_calls.append((g.get("step", "int", required=True), g.get("graph", "int", required=True), inputs))
  prod = source.get("producer") if isinstance(source.get("producer"), dict) else {}
  _rename_keywords(devices, queues, signals, buffers, host)
  return Manifest(file, devices, queues, signals, buffers, memory, kernels, host, ver, steps, final, mailboxes, str(prod.get("path", "hcq")),
                  graph_calls)

def _rename_keywords(devices: list, queues: list, signals: dict, buffers: list, host) -> None:
  """Device and queue names that are .hcq keywords (a queue named `queue`) or the lift's var `launch` cannot be names in
  the program: each becomes NAME_1 (the next free), everywhere the manifest uses it."""
  taken = {d["name"] for d in devices} | {q.name for q in queues}
  new: dict = {}
  for n in [d["name"] for d in devices] + [q.name for q in queues]:
    if (n in KEYWORDS or n == LAUNCH_VAR) and n not in new:
      i = 1
      while f"{n}_{i}" in taken: i += 1
      taken.add(new.setdefault(n, f"{n}_{i}"))
  if not new: return
  dev = lambda n: new.get(n, n) if n is not None else None
  for d in devices: d["name"] = dev(d["name"])
  for q in queues: q.name, q.device = new.get(q.name, q.name), dev(q.device)
  for s in signals.values(): s["device"] = dev(s["device"])
  for b in buffers: b["device"] = dev(b["device"])
  for h in host or ():
    if h.get("op") == "submit": h["queue"] = new.get(h["queue"], h["queue"])

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
  # a masked poll (tinygrad's poll_bit: function `==`, a mask) reads memory, not a signal
  if p.name == "WAIT_REG_MEM" and f.get("mem_space") == 1 and f.get("function") == 5 and f.get("mask") == U32_MAX: return [f["addr"]]
  if p.name == "RELEASE_MEM" and f.get("data_sel") == 1 and (f.get("cache_action") or f.get("int_sel")): return [f["addr"]]
  if p.name == "RELEASE_MEM" and f.get("data_sel") == 3: return [f["addr"] - 8]
  if p.name == "POLL_REGMEM" and f.get("mem_poll") == 1 and f.get("func") == 5 and f.get("mask") == U32_MAX: return [f["addr"]]
  if p.name == "FENCE": return [f["addr"]]
  if p.name == "TIMESTAMP_GET_GLOBAL": return [f["write_addr"] - 8]
  return []

def _written(p) -> Optional[tuple]:
  """(address, bytes) a `write` packet stores (tinygrad's HWQueue.write: RELEASE_MEM with no cache action, SDMA WRITE)."""
  f = p.fields
  if p.raw: return None
  if p.name == "RELEASE_MEM" and f.get("data_sel") in (1, 2) and not f.get("cache_action") and not f.get("int_sel"): return f["addr"], 4 * f["data_sel"]
  if p.name == "WRITE_UNTILED" and f.get("count") in (0, 1): return f["dst_addr"], 4 * (f["count"] + 1)
  return None

def _polled(p) -> Optional[tuple]:
  """(address, 4) of the word a `poll` packet reads (tinygrad's poll_bit: WAIT_REG_MEM, memory, function `==`)."""
  f = p.fields
  if p.raw or p.name != "WAIT_REG_MEM" or f.get("mem_space") != 1 or f.get("function") != FUNC_EQ: return None
  return f["addr"], POLL_SIZE

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

def lift_manifest(m: Manifest, code_dir=None, program_dir=None, trace: Optional[dict] = None, whole: bool = False) -> Program:
  """A program from a raw dump. With read pointers: the work still to do at the dump (signals start at the snapshot;
  what ran already is listed as comments; check with launches=1). With host steps (a capture): the launches, with a var
  `launch` wherever a dword changes by one per launch (`whole`: the run as it happened, every step in one launch).
  Otherwise: every queue's whole stream, launches=1."""
  mem = _Mem(m.memory)
  triage = any(q.read_ptr is not None for q in m.queues)
  if m.version >= 2 and m.host and not triage:
    if nv_capture.is_nv_capture(m): return nv_capture.lift_nv_capture(m, code_dir, program_dir, trace, whole)   # tinygrad's NV runtime
    return _lift_capture(m, code_dir, program_dir, trace, whole)
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
      copies += [w for p in g if (w := _written(p) or _polled(p)) is not None]   # a write's or poll's bytes are a buffer's too
  if m.host is not None: sig_addrs += [h["addr"] for h in m.host if h["op"] in ("signal", "wait")]
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
    tl = timeline_of(info['device']) if info.get("timeline") and not triage and not info.get("value") else None
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
      args.append([nm, off or None, None, bool(off), None])
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
  s = attrs.evolve(s, value=Expr(Ref(epoch_of(d)), s.value.offset))
  return Epoch(comments=s.comments, comment=s.comment) if d == device and s == epoch_wait(d) else s

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

def lift_file(path, program_file: Optional[str] = None, code_dir=None, whole: bool = False, trace: Optional[dict] = None) -> Program:
  """Lift an image (`.hcqimg`, by its magic) or a manifest (JSON). Raises ValueError (ManifestError) on bad input.
  Code objects — an image's real ones, a capture's kernels — are written to `code_dir` (default: beside
  `program_file`, else beside the input) and referenced relative to the program file. `whole`: a capture as the run
  happened (every step, one launch; sanitize's reading); `trace` gets what the lift left out (`left_out`)."""
  p = pathlib.Path(path)
  try: b = p.read_bytes()
  except OSError as e: raise ManifestError(f"{p}: {e.strerror or e}") from None
  pdir = pathlib.Path(program_file).parent if program_file else p.parent
  cdir = pathlib.Path(code_dir) if code_dir is not None else pdir
  if b[:8] == MAGIC:
    try:
      img = Image.from_bytes(b)
      prog = lift_image(img, os.path.relpath(cdir, pdir))
    except ValueError as e: raise ManifestError(f"{p}: {e}") from None
    try: write_code_objects(img, cdir)
    except ValueError as e: raise ManifestError(str(e)) from None
  else: prog = lift_manifest(load_manifest(p), cdir, pdir, trace, whole)
  return attrs.evolve(prog, file=program_file or prog.file)

# ---------------------------------------------------------------- captures (version 2): the program tinygrad ran

def _launch_steps(ev: list, whole: bool = False) -> list:
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

def _period(shapes: list) -> Optional[tuple]:
  """(start, P, K): the K >= 2 back-to-back repetitions of a P-step block covering the most steps (on a tie the
  fewest steps per block, then the latest start), each containing a submission; None when nothing repeats."""
  n, best = len(shapes), None
  for P in range(1, n // 2 + 1):
    run = 0  # run[i]: how many consecutive j >= i have shapes[j] == shapes[j + P], computed right to left
    runs = [0] * (n + 1)
    for i in range(n - P - 1, -1, -1):
      runs[i] = runs[i + 1] + 1 if shapes[i] == shapes[i + P] else 0
    for i in range(n - 2 * P + 1):
      K = 1 + runs[i] // P
      if K < 2 or not any(s[0] == "submit" for s in shapes[i:i + P]): continue
      key = (K * P, -P, i)  # on a tie the latest phase: its last launch is the one the program ended with
      if best is None or key > best[0]: best = (key, (i, P, K))
    del run
  return best[1] if best else None

# where in a packet a per-launch value sits: packet name -> {dword index: role}
_ROLES = {"WAIT_REG_MEM": {4: "value", 2: "addr", 3: "addr"}, "RELEASE_MEM": {5: "value", 3: "addr", 4: "addr"},
          "POLL_REGMEM": {3: "value", 1: "addr", 2: "addr"}, "FENCE": {3: "value", 1: "addr", 2: "addr"},
          "COPY_LINEAR": {3: "src", 4: "src", 5: "dst", 6: "dst"}, "DISPATCH_DIRECT": {1: "dim", 2: "dim", 3: "dim"},
          "WRITE_UNTILED": {4: "value", 1: "addr", 2: "addr"}}

class _Vars:
  """Per-launch values as the program says them: `launch + c` when they step by one, else a listed var."""
  def __init__(self, used: set, notes: list): self.lists, self.used, self.notes, self.uses_launch = {}, used, notes, False
  def fit(self, vals: list, hint: str) -> Optional[tuple]:
    """(var, add) for values that change between launches; None when they do not."""
    vals = [v & U32_MAX for v in vals]
    if len(set(vals)) == 1: return None
    c = vals[0] - 1
    if all((v - (k + 1 + c)) & U32_MAX == 0 for k, v in enumerate(vals)):
      self.uses_launch = True
      return (LAUNCH_VAR, c if c <= U32_MAX // 2 else c - (1 << 32))
    key = tuple(vals)
    if key not in self.lists:
      name, i = hint, 2
      while name in self.used or name in KEYWORDS: name, i = f"{hint}_{i}", i + 1
      self.used.add(name); self.lists[key] = name
    return (self.lists[key], 0)

def _graph_inputs(m: Manifest, ev: list, start: int, P: int, K: int) -> dict:
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

def _lift_capture(m: Manifest, code_dir=None, program_dir=None, trace: Optional[dict] = None, whole: bool = False) -> Program:
  """A capture of tinygrad's AMD runtime (manifest version 2) as the program it ran: the repeating part of the host's
  steps (TinyJit calls, HCQGraph launches) as N launches — what came before it (warm-up, compilation) is its initial
  state: signal values and buffer contents as they were when the first repeated step ran —, per-launch values as
  `launch + c` or listed vars, kernel-argument pointers and copy addresses that change per launch as `rebound`
  buffers, a ring submitted several times per launch as one queue per submission, kernels by tinygrad's names with
  their code objects, expects from the contents after the last launch. `whole`: the run as it happened — every step of
  the capture in one launch, nothing taken for initial state or left out (what `sanitize` checks)."""
  notes: list = []
  # a fresh signal's creation (tinygrad writes its first value in HCQSignal.__init__: HCQGraph makes its signals
  # while the captured call runs) is its initial value, no step of a launch: so the captured call is launch 1
  keep = _launch_steps(m.host, whole)
  n_all, orig = len(m.host), (lambda i: keep[i] if i < len(keep) else len(m.host))
  if len(keep) < len(m.host):
    new = lambda st: bisect.bisect_left(keep, st)
    m = attrs.evolve(m, host=[m.host[i] for i in keep], steps=[(a, b, new(st)) for a, b, st in m.steps],
                     graph_calls=[(new(st), g, ins) for st, g, ins in m.graph_calls])
  ev = m.host
  qmap = {q.name: q for q in m.queues}
  def what(e) -> tuple:
    """A submission's packets, by name, with the program each dispatch runs and each copy's length."""
    q = qmap[e["queue"]]
    out, regs = [], {}
    for p in decoder(q.engine, q.target).decode(q.dwords[e["start"]:e["start"] + e["length"]]):
      if p.name == "SET_SH_REG" and not p.raw: regs[p.fields["reg"]] = p.fields["values"]
      extra = tuple(regs.get("regCOMPUTE_PGM_LO", ())) if p.name == "DISPATCH_DIRECT" else p.fields.get("count") if p.name == "COPY_LINEAR" else None
      out.append((p.name, extra))
    return tuple(out)
  shape = lambda e: ("submit", e["queue"], what(e)) if e["op"] == "submit" else ("write", e["addr"], e["size"]) if e["op"] == "write" \
    else (e["op"], e["addr"], bool(e.get("init")))
  found = None if whole else _period([shape(e) for e in ev])
  start, P, K = found if found else (0, len(ev), 1)
  if whole: notes.append("the run as it happened: every step of the capture in one launch")
  elif found is None: notes.append("the host's steps do not repeat: lifted as one launch of every step")
  left_out: list = []   # what the lifted program does not check, in words (sanitize and `lift` say so on their summary)
  if start:
    notes.append(f"steps 1..{orig(start)} (warm-up, compilation, first calls) are the initial state: signals and "
                 f"buffers start as they were at step {orig(start) + 1}")
    left_out.append(f"steps 1..{orig(start)} (the initial state)")
  if start + K * P < len(ev):
    notes.append(f"steps {orig(start + K * P) + 1}..{n_all} after the last repeated launch are not lifted")
    left_out.append(f"steps {orig(start + K * P) + 1}..{n_all} (after the last repeated launch)")
  end = start + K * P
  mem_at = sorted(m.steps, key=lambda x: x[2])
  def snap(addr: int, n: int, lo: int, hi: int = 1 << 62) -> Optional[bytes]:
    """The bytes [addr, addr + n) as read first at a step in [lo, hi)."""
    for a, b, st in mem_at:
      if lo <= st < hi and a <= addr and addr + n <= a + len(b): return b[addr - a:addr - a + n]
    return None
  used = {d["name"] for d in m.devices} | {LAUNCH_VAR} | set(qmap)
  vars_ = _Vars(used, notes)
  # ---- one lifted queue per submission of a launch (a ring submitted twice is two queues, in ring order)
  # ---- one lifted queue per submission; a ring's submissions in one launch are chained through a signal of the
  # ring's own (its FIFO: each packet runs after the previous one finished, tinygrad ends a dispatch with a
  # CS_PARTIAL_FLUSH), so host steps between them keep their place and the ring's order is kept
  subs, count = [], {}
  for i in range(start, start + P):
    e = ev[i]
    if e["op"] != "submit": continue
    count[e["queue"]] = count.get(e["queue"], 0) + 1
    name = e["queue"] if count[e["queue"]] == 1 else f"{e['queue']}_{count[e['queue']]}"
    used.add(name)
    q = qmap[e["queue"]]
    per = [q.dwords[ev[i + k * P]["start"]:ev[i + k * P]["start"] + e["length"]] for k in range(K)]
    subs.append({"name": name, "ring": q, "step": i, "per": per, "segs": [(0, e["length"], i, e["start"])], "nth": count[e["queue"]]})
  # classic HCQ orders a ring's submissions itself (each waits for the timeline value the previous one signals);
  # hcq2's finalizer is a submission of its own that signals the timeline for the batch before it: the ring's order
  chained = {r for r, c in count.items() if c > 1} if m.path == "hcq2" else set()
  if chained:
    notes.append("a ring submitted several times in one launch is one queue per submission (`comp_gpu0_2`, ...), "
                 "ordered as the ring runs them by a signal of the ring's own (`fifo_comp_gpu0`), which no packet writes")
  elif any(c > 1 for c in count.values()):
    notes.append("a ring submitted several times in one launch is one queue per submission (`comp_gpu0_2`, ...): "
                 "tinygrad orders them by the device's timeline")
  seg_of = lambda sub, o: next((g for g in sub["segs"] if g[0] <= o < g[1]), sub["segs"][-1])
  mbox = m.mailboxes
  # ---- addresses: buffers (allocations), rebound groups (an address that changes per launch)
  allocs = sorted((b["addr"], b["size"], b.get("device")) for b in m.buffers)
  alloc_starts = [lo for lo, _, _ in allocs]
  def alloc_of(a: int):
    i = bisect.bisect_right(alloc_starts, a) - 1
    while i >= 0:   # the allocation with the highest start at or below `a` that holds it (allocations do not nest)
      lo, size, dev = allocs[i]
      if lo <= a < lo + size: return lo, size, dev
      if i == 0 or allocs[i - 1][0] + allocs[i - 1][1] <= lo: return None
      i -= 1
    return None
  readings = _Readings(m.steps, alloc_of)
  static: dict = {}     # allocation addr -> {"size", "device", "step"}
  rebound: dict = {}    # tuple of per-launch addresses -> {"size", "device", "step"}
  inputs = _graph_inputs(m, ev, start, P, K)
  at_input: dict = {}   # per-launch addresses -> (input's address tuple, offset, launch j of `x@j` or None)
  def as_input(addrs: tuple, size: int) -> Optional[tuple]:
    """(input, offset, None) for addresses at one offset into each launch's memory of a graph input; (input, offset,
    j) for one address inside exactly one launch j's input — a command that kept it (`x@j`)."""
    for t, n in inputs.items():
      if len(set(addrs)) > 1:
        off = addrs[0] - t[0]
        if 0 <= off and off + size <= n and all(a - b == off for a, b in zip(addrs, t)): return t, off, None
      else:
        hits = [j for j, b in enumerate(t) if b <= addrs[0] < b + n]
        if len(hits) == 1 and addrs[0] + size <= t[hits[0]] + n: return t, addrs[0] - t[hits[0]], hits[0] + 1
    return None
  def use(addrs: tuple, size: int, step: int):
    """`step`: the launch-1 step that first uses it (its contents are read as of then)."""
    if (hit := at_input.get(addrs) or as_input(addrs, size)) is not None:
      at_input[addrs] = hit
      al = alloc_of(hit[0][0])
      r = rebound.setdefault(hit[0], {"size": inputs[hit[0]], "device": al[2] if al else None, "step": step})
      r["size"] = max(r["size"], inputs[hit[0]])
      return
    if len(set(addrs)) == 1:
      al = alloc_of(addrs[0])
      if al is None: static.setdefault(addrs[0], {"size": max(size, 1), "device": None, "step": step}); return
      static.setdefault(al[0], {"size": al[1], "device": al[2], "step": step})
    else:
      al = alloc_of(addrs[0])
      r = rebound.setdefault(addrs, {"size": size, "device": al[2] if al else None, "step": step})
      r["size"] = max(r["size"], size)
  dispatches = []   # (sub, packet offset, prog, [kernarg addr per launch])
  accesses = []     # (step, packet offset, per-launch addresses, reads): what launch 1's commands touch, in order
  for s in subs:
    pk = decoder(s["ring"].engine, s["ring"].target).decode(s["per"][0])
    s["packets"] = pk
    regs_at: dict = {}
    for p in pk:
      if p.raw: continue
      if p.name == "COPY_LINEAR":
        size = p.fields["count"] + 1
        for lo in (3, 5):
          use(t := tuple(d[p.offset + lo] | (d[p.offset + lo + 1] << 32) for d in s["per"]), size, seg_of(s, p.offset)[2])
          accesses.append((seg_of(s, p.offset)[2], p.offset, t, lo == 3))
      elif (w := _written(p)) is not None:   # a `write`: its bytes are a buffer's; an address changing per launch, rebound
        lo = 3 if p.name == "RELEASE_MEM" else 1
        use(t := tuple(d[p.offset + lo] | (d[p.offset + lo + 1] << 32) for d in s["per"]), w[1], seg_of(s, p.offset)[2])
        accesses.append((seg_of(s, p.offset)[2], p.offset, t, False))
      elif _polled(p) is not None:   # a `poll`: its word is a buffer's
        use(t := tuple(d[p.offset + 2] | (d[p.offset + 3] << 32) for d in s["per"]), POLL_SIZE, seg_of(s, p.offset)[2])
        accesses.append((seg_of(s, p.offset)[2], p.offset, t, True))
      elif p.name == "SET_SH_REG": regs_at[p.fields["reg"]] = p
      elif p.name == "DISPATCH_DIRECT":
        pgm, user = regs_at.get("regCOMPUTE_PGM_LO"), regs_at.get("regCOMPUTE_USER_DATA_0")
        if pgm is None or user is None or len(user.fields["values"]) < 2: continue
        uo = user.offset + 2 + len(user.fields["values"]) - 2
        prog = ((pgm.fields["values"][1] << 32) | pgm.fields["values"][0]) << 8
        kas = [d[uo] | (d[uo + 1] << 32) for d in s["per"]]
        dispatches.append((s, prog, kas, seg_of(s, p.offset)[2], p.offset))
  # the run as it happened (`whole`) on classic HCQ: each exec also reads its kernel-argument block, which the host
  # writes before the submission (HCQProgram.fill_kernargs; HCQGraph's update of an input's address or a var): so a
  # rewrite while an earlier exec may still read the block is a race, and one with no `barrier` before the exec a
  # `visibility` error (the HDP), as on the GPU
  kargs_read = m.path == "hcq"
  kgroups: set = set()   # per-launch kernel-argument addresses that differ per launch: a fresh block each (eager dispatches)
  kinfo: dict = {}   # (kernarg addr in launch 1, lifted queue) -> (kernel info, per-launch pointer tuples, per-launch scalar values, ...)
  for s, prog, kas, step, at in dispatches:
    k = m.kernels.get(prog, {})
    sig = k.get("signature") or []
    bufs = [x for x in sig if x.get("name") is None]
    scal = [x for x in sig if x.get("name") is not None]
    offs, need = kernarg_layout([8] * len(bufs) + [x.get("bytes") or 4 for x in scal])  # tinygrad's (TinyELF.iter_sig)
    blocks = [snap(ka, need, step + j * P, step + j * P + 1) for j, ka in enumerate(kas)]
    if any(b is None for b in blocks):
      notes.append(f"the kernel arguments of a dispatch of {k.get('name') or hex(prog)} were not recorded: lifted without arguments")
      left_out.append(f"the arguments of a dispatch of {k.get('tinygrad_name') or k.get('name') or hex(prog)} (not recorded)")
      continue
    ptrs = [tuple(int.from_bytes(blocks[j][8 * i:8 * i + 8], "little") for j in range(K)) for i in range(len(bufs))]
    for i, t in enumerate(ptrs):
      use(t, bufs[i].get("bytes") or 1, step)
      accesses.append((step, at, t, bufs[i].get("mode") != "out"))
    vals = [[int.from_bytes(blocks[j][off:off + 4], "little") for j in range(K)] for off in offs[len(bufs):]]
    if kargs_read:   # the block itself: one allocation's bytes (HCQGraph's, patched per launch), or new memory per launch
      use(tuple(kas), need, step)
      accesses.append((step, at, tuple(kas), True))
      if len(set(kas)) > 1: kgroups.add(tuple(kas))
    kinfo[kas[0], s["name"]] = (prog, ptrs, vals, scal, [x.get("bytes") for x in bufs], blocks, step, tuple(kas))
  # ---- the host's writes between launches: memory in host RAM whose first access in a launch is a read, holding other
  # bytes launch by launch, was refilled on the CPU (hcq2 copies every input through one staging buffer that tinygrad's
  # CPU device rewrites, ordered by that device's own waits, which the capture does not record): a buffer with each
  # launch's bytes as that first read found them, one memory per launch (`rebound`: the CPU's refill is not checked)
  first: dict = {}
  for step, at, t, reads in sorted(accesses, key=lambda x: x[:2]):
    if len(set(t)) == 1 and (al := alloc_of(t[0])) is not None: first.setdefault(al[0], (step, reads))
  host_written = {al[0] for e in ev[start:start + P] if e["op"] == "write" and (al := alloc_of(e["addr"])) is not None}
  rewritten: dict = {}
  kblocks = {al[0] for *_, kas_ in kinfo.values() if len(set(kas_)) == 1 and (al := alloc_of(kas_[0])) is not None}
  for key, (step, reads) in first.items():
    # (a kernel-argument block's per-launch bytes are the host's `write`s: kargs_read)
    if not reads or key not in static or static[key]["device"] is not None or K < 2 or key in host_written or key in kblocks: continue
    per = [readings.assemble(key, static[key]["size"], step + k * P) for k in range(K)]
    if None not in per and len(set(per)) > 1: rewritten[key] = per
    # refilled again between two reads of one launch (two inputs staged through one region): one memory per launch
    # cannot say it; the first read's bytes are kept, and `run` then differs from tinygrad
    later = {readings.assemble(key, static[key]["size"], st) for st, _, t, r in accesses
             if r and st > step and len(set(t)) == 1 and (al := alloc_of(t[0])) is not None and al[0] == key}
    if key in rewritten and later - {per[0]}:
      notes.append(f"the host-memory buffer at {key:#x} is refilled between two reads of one launch (inputs staged "
                   "through one region): lifted with each launch's first read's bytes, so later reads see those")
  if rewritten: notes.append("buffers in host memory refilled on the CPU between launches (read first in each launch, with "
                             "other bytes each time: tinygrad's staging buffer) are `rebound`, holding what each launch read; "
                             "the CPU device's refill and its waits are not recorded, so their order is not checked")
  # ---- names
  def fresh(base: str) -> str:
    name, i = base, 2
    while name in used or name in KEYWORDS: name, i = f"{base}_{i}", i + 1
    used.add(name); return name
  bufname: dict = {}
  kalloc = {al[0] for (ka, _) in kinfo if (al := alloc_of(ka)) is not None} if kargs_read else set()
  for a in sorted(static): bufname[("s", a)] = fresh(_hexname("kargs" if a in kalloc else "b", a))   # kargs_: kernel arguments
  for t in rebound: bufname[("r", t)] = fresh(f"{'kargs' if t in kgroups else 'in'}_{t[0]:x}")
  def buf_for(addrs: tuple):
    """(name, offset, launch of `x@j` or None) of the buffer the per-launch addresses point into."""
    if (hit := at_input.get(addrs)) is not None: return bufname[("r", hit[0])], hit[1], hit[2]
    if len(set(addrs)) > 1: return bufname[("r", addrs)], 0, None
    al = alloc_of(addrs[0])
    lo = al[0] if al else addrs[0]
    return bufname[("s", lo)], addrs[0] - lo, None
  # signals: what the packets and host steps name, without the mailboxes
  sig_addrs = []
  for s in subs:
    for p in s["packets"]: sig_addrs += [a for a in _signal_addrs(p) if a not in mbox]
  sig_addrs += [e["addr"] for e in ev[start:start + P] if e["op"] in ("signal", "wait")]
  signals: dict = {}
  def sig_value(a: int) -> int:
    """The signal's value when step `start` ran: the first submission's reading at or after it (if the host does not
    write it first), else the host's last write or reading before it."""
    for e in ev[start:]:
      if e["op"] == "submit" and a in e.get("signals", {}): return e["signals"][a]
      if e["op"] == "signal" and e["addr"] == a: break
    last = m.signals.get(a, {}).get("value", 0)
    for e in ev[:start]:
      if e["op"] == "signal" and e["addr"] == a: last = e["value"]
      elif e["op"] == "submit" and a in e.get("signals", {}): last = e["signals"][a]
    return last
  # a signal only a timestamp names is the slot before the clock's memory (`timestamp s` writes s's timestamp slot, 8 bytes
  # on): named after the memory the clock goes to (hcq2's profile buffers, tinygrad's HCQSignal.timestamp_addr)
  stamped = {a for s in subs for p in s["packets"] if not p.raw and ((p.name == "RELEASE_MEM" and p.fields.get("data_sel") == 3)
                                                                    or p.name == "TIMESTAMP_GET_GLOBAL") for a in _signal_addrs(p)}
  synced = {a for s in subs for p in s["packets"] if not (p.name == "RELEASE_MEM" and p.fields.get("data_sel") == 3)
            and p.name != "TIMESTAMP_GET_GLOBAL" for a in _signal_addrs(p)} | {e["addr"] for e in ev if e["op"] in ("signal", "wait")}
  for a in dict.fromkeys(sig_addrs):
    info = m.signals.get(a, {})
    if a in stamped and a not in synced and not info.get("timeline"): signals[a] = fresh(_hexname("ts", a + 8)); continue
    if info.get("timeline") and info.get("device") and sig_value(a) == 0 and timeline_of(info['device']) not in signals.values():
      signals[a] = timeline_of(info['device'])  # starts at 0, as the language's D.timeline does: its waits read as `epoch`
    else: signals[a] = fresh(f"tl_{info['device']}" if info.get("timeline") and info.get("device") else _hexname("s", a))
  # ---- kernels: one declaration per (tinygrad name, code), with its code object
  # a kernel whose code a lifted copy uploads (tinygrad's AMDProgram copies its ELF into VRAM) reads that buffer at
  # each exec (`amd "k.co" code B`): check orders every exec after the upload
  uploaded = {al[0] for s in subs for p in s["packets"] if p.name == "COPY_LINEAR" and not p.raw
              and len({d[p.offset + 5] | d[p.offset + 6] << 32 for d in s["per"]}) == 1 and (al := alloc_of(p.fields["dst_addr"])) is not None}
  kdecl, kname_of = {}, {}
  for (ka, _), (prog, ptrs, vals, scal, nbytes, *_) in kinfo.items():
    if prog in kname_of: continue
    k = m.kernels.get(prog, {})
    base = _ident(k.get("tinygrad_name") or k.get("name")) if (k.get("tinygrad_name") or k.get("name")) else _hexname("k", prog)
    al = alloc_of(prog)
    code_buf = bufname.get(("s", al[0])) if al is not None and al[0] in uploaded else None
    key = (base, k.get("code") or prog, code_buf)
    if key not in kdecl:
      bmodes = [x.get("mode") if x.get("mode") in ("in", "out", "inout") else "inout" for x in k.get("signature") or [] if x.get("name") is None]
      modes = [Param(bmodes[i] if i < len(bmodes) else "inout", f"a{i}") for i in range(len(ptrs))] + [Param("u32" if "uint" in (x.get("dtype") or "") else "i32", _ident(x["name"]))
                                                                   for x in scal] + [Param("in", KERNARGS)] * kargs_read
      impl, kn = None, fresh(base)
      if k.get("code") and code_dir is not None:
        cpath = pathlib.Path(code_dir) / f"{kn}.co"
        cpath.write_bytes(k["code"])
        rel = str(cpath.resolve()) if program_dir is None else _relpath(cpath, program_dir)
        impl = Impl(None, None, (), None, rel, code_buf)
      elif code_buf is not None: impl = Impl(amd_code=f"{kn}.co", code=code_buf)   # (no code written: a check only)
      kdecl[key] = Kernel(kn, tuple(modes), impl)
    kname_of[prog] = kdecl[key].name
  # ---- the pseudo image the statement lifter reads names from, with per-launch patches
  ibufs = {}
  for (kind, key), nm in bufname.items():
    if kind == "s": ibufs[nm] = (key, static[key]["size"])
    else: ibufs[nm] = (key[0], rebound[key]["size"])
  ibufs_size = lambda nm: ibufs[nm][1]
  regions, mem_patches, regions_of = [], {}, {}   # regions_of: each lifted queue's (a kernarg address is reused by launches)
  for (ka, sname), (prog, ptrs, vals, scal, nbytes, blk, _, kas_) in kinfo.items():
    args = []
    for t, nb in zip(ptrs, nbytes):
      nm, off, pin = buf_for(t)
      size = ibufs_size(nm)
      hi = off + nb if nb and off + nb < size else None  # tinygrad's byte range of the argument (a view of a bigger allocation)
      args.append([nm, off or None, hi, bool(off) or hi is not None, pin])
    args += [None] * len(vals)
    if kargs_read:
      nm, off, _ = buf_for(kas_)
      args.append([nm, off, off + len(blk[0]), True, None])
    regions.append(Region(f"kernargs_{ka:x}", "kernargs", None, ka, 8 * len(ptrs), {"kernel": kname_of[prog], "args": args}))
    regions_of.setdefault(sname, []).append(regions[-1])
  kparams = {}
  for kd in kdecl.values():
    offs, _ = kernarg_layout(kd.params)
    kparams[kd.name] = [[p.mode, p.name, o] for p, o in zip(kd.params, offs)]
  ikernels = [{"name": kname_of[prog], "prog_addr": prog, "params": kparams[kname_of[prog]]} for prog in dict.fromkeys(p for p, *_ in kinfo.values())]
  for (ka, sname), (prog, ptrs, vals, scal, nbytes, *_) in kinfo.items():
    ps = kparams[kname_of[prog]]
    for i, v in enumerate(vals):
      off = ps[len(ptrs) + i][2]
      fit = vars_.fit(v, _ident(scal[i]["name"]))
      raw = v[0] & U32_MAX
      mem_patches.setdefault(sname, []).append(Patch(ka + off, fit[0] if fit else None, fit[1] if fit else raw))
  img = Image(m.queues[0].target, m.file, m.devices, [], regions, {n: a for a, n in signals.items()}, ibufs, ikernels,
              [], [(r.addr, b"\0" * r.size) for r in regions], [], [])
  # each rebound buffer's memory per launch: a copy address the host patches is one (`x`); a fixed one that kept a
  # graph input's memory of one launch is `x@j`
  img.var_values.update({f"{nm}.addr": list(key) for (kind, key), nm in bufname.items() if kind == "r"})
  # ---- declarations
  decls: list = [Device(d["name"], "AMD", d["index"], d["arch"]) for d in m.devices]
  def data_of(b: Optional[bytes], size: int) -> Optional[Data]: return trimmed_data(b, size) if b else None
  for (kind, key), nm in bufname.items():
    if kind == "s" and key in rewritten:
      decls.append(Buffer(nm, None, static[key]["size"], None, "rebound",
                          tuple(data_of(b, static[key]["size"]) or Data("u8", (0,)) for b in rewritten[key])))
    elif kind == "s":
      st = static[key]
      init = data_of(readings.assemble(key, st["size"], st["step"]), st["size"])
      decls.append(Buffer(nm, Ref(st["device"]) if st["device"] else None, st["size"], init))
    else:
      r = rebound[key]
      inits = tuple(data_of(readings.assemble(a, r["size"], r["step"] + k * P), r["size"]) or Data("u8", (0,)) for k, a in enumerate(key))
      decls.append(Buffer(nm, Ref(r["device"]) if r["device"] else None, r["size"], None, "rebound", inits))
  for a, n in signals.items():
    info = m.signals.get(a, {})
    v = sig_value(a)
    if n.endswith(".timeline"): continue
    if v > U32_MAX: notes.append(f"signal {n} holds {v} (more than 32 bits): its low 32 bits are lifted")
    decls.append(Signal(n, Ref(info["device"]) if info.get("device") else None, v & U32_MAX))
  fifo_names = {r: fresh(f"fifo_{r}") for r in sorted(chained)}
  decls += [Signal(n, Ref(qmap[r].device)) for r, n in fifo_names.items()]
  # queue statements: the template's dwords with per-launch patches
  queues = []
  for s in subs:
    patches = []
    for p in s["packets"]:
      roles = _ROLES.get(p.name, {})
      for idx, role in roles.items():
        o = p.offset + idx
        if o >= len(s["per"][0]): continue
        if role in ("src", "dst") and idx in (3, 5):  # an address that changes per launch: patched (`x`, not `x@1`)
          if len({d[o] | (d[o + 1] << 32) for d in s["per"]}) > 1: patches.append(Patch(o, None, 0, "lo"))
          continue
        if role not in ("value", "dim"): continue
        fit = vars_.fit([d[o] for d in s["per"]], "v")
        if fit: patches.append(Patch(o, fit[0], fit[1]))
    qi = QueueImage(s["name"], s["ring"].engine, s["ring"].device, s["ring"].target, 0, s["per"][0], patches, [],
                    mem_patches.get(s["name"], []))
    img.regions = regions_of.get(s["name"], [])
    groups = []
    for g in _group(s["packets"], s["ring"].engine):
      at = f"@{seg_of(s, g[0].offset)[3] + g[0].offset - seg_of(s, g[0].offset)[0]}" if g else None
      if g and g[0].name in ("RELEASE_MEM", "FENCE") and not g[0].raw and g[0].fields.get("addr") in mbox:
        groups.append((f"# {at}: KFD interrupt: {g[0].name} to the event mailbox (wakes the host's sleep; orders nothing)", None))
      elif g and g[0].name == "TRAP" and not g[0].raw: groups.append((f"# {at}: KFD interrupt: SDMA TRAP", None))
      else: groups.append((g, at))
    items = [_epochs(x, s["ring"].device) for x in lift_statements(img, qi, groups)]
    if s["ring"].name in chained:  # segment n of S in launch k: waits for (k-1)*S + n-1, signals (k-1)*S + n
      S, n, fifo = count[s["ring"].name], s["nth"], fifo_names[s["ring"].name]
      def fx(vals):
        f = vars_.fit(vals, "fifo")
        return Expr(Ref(f[0]), f[1]) if f else Expr(None, vals[0])
      items = [Wait(Ref(fifo), fx([k * S + n - 1 for k in range(K)]), comment="# the ring's order: after its previous submission")] + \
        [x for x in items if not isinstance(x, str)] + [SignalWrite(Ref(fifo), fx([k * S + n for k in range(K)]), comment="# the ring's order")] + \
        [x for x in items if isinstance(x, str)]
    queues.append(queue_decl(s["name"], s["ring"].engine, s["ring"].device, items))
  # the host's writes of the kernel arguments (`kargs_read`), before the submission that dispatches them: a block in new
  # memory each launch is written in every launch (its own memory); one the launches share, when its bytes differ
  # between launches (HCQGraph's update of an input's address or a var) or, in one launch, since the last dispatch
  # that read it (the run as it happened: every eager fill, a graph's first fill)
  kwrites: dict = {}   # lifted queue -> [(slice, per-launch data)]
  last_kargs: dict = {}
  for (ka, sname), (prog, ptrs, vals, scal, nbytes, blk, step, kas_) in sorted(kinfo.items(), key=lambda x: x[1][6]) if kargs_read else ():
    if kas_ not in kgroups and (len(set(blk)) == 1 if K > 1 else last_kargs.get(ka) == blk[0]): continue
    last_kargs[ka] = blk[0]
    nm, off, _ = buf_for(kas_)
    kwrites.setdefault(sname, []).append((Slice(Ref(nm), off, off + len(blk[0]), True), tuple(_bytes_data(b) for b in blk)))
  host, host_steps = [], []   # host_steps[i]: the capture steps host statement i stands for (a submit: each queue's)
  for i in range(start, start + P):
    e = ev[i]
    if e["op"] == "submit":
      nm = next((x["name"] for x in subs if x["step"] == i), None)
      if nm is None: continue  # a later submission of a ring already submitted in this launch
      for kb, kd in kwrites.get(nm, ()):   # the host fills the kernel arguments, then submits
        host.append(HostWrite(kb, kd)); host_steps.append([i])
      if host and isinstance(host[-1], Submit): host[-1] = Submit(host[-1].queues + (Ref(nm),)); host_steps[-1].append(i)
      else: host.append(Submit((Ref(nm),))); host_steps.append([i])
      continue
    if e["op"] == "write":   # the host's refill of host memory: each launch's bytes, at this point of the host block
      al = alloc_of(e["addr"])
      nm = bufname.get(("s", al[0])) if al is not None else None
      if nm is None: continue   # memory no lifted command uses
      off = e["addr"] - al[0]
      n = min(e["size"], static[al[0]]["size"] - off)
      # (bytes not recorded — sanitize's capture — are written as zeros: the range is what a check needs)
      host.append(HostWrite(Slice(Ref(nm), off, off + n, True), tuple(_bytes_data(ev[i + k * P]["data"][:n]) if ev[i + k * P]["data"]
                                                                       else Data("u8", (0,)) for k in range(K))))
      host_steps.append([i])
      continue
    fit = vars_.fit([ev[i + k * P]["value"] for k in range(K)], "h")
    ex = Expr(Ref(fit[0]), fit[1]) if fit else Expr(None, e["value"] & U32_MAX)
    host.append(_epochs((Wait if e["op"] == "wait" else SignalWrite)(Ref(signals[e["addr"]]), ex), None)); host_steps.append([i])
  decls += [Var(n, tuple(v)) for v, n in vars_.lists.items()]
  if vars_.uses_launch: decls.append(Var(LAUNCH_VAR))
  decls += list(kdecl.values())
  decls += queues
  if host: decls.append(Host(tuple(host)))
  # expects: each buffer a launch writes, as it was after the last launch
  written = {buf_for(t)[0] for _, (prog, ptrs, *_) in kinfo.items() for t in ptrs}
  written |= {bufname.get(("s", alloc_of(a)[0] if alloc_of(a) else a)) for s in subs for p in s["packets"]
              if p.name == "COPY_LINEAR" and not p.raw and len({d[p.offset + 5] for d in s["per"]}) == 1
              for a in [p.fields["dst_addr"]]}
  # tinygrad's dtype of each buffer's memory as its last writer left it: a kernel's argument (its signature), or a copy's
  # source (tinygrad reuses memory, a staging buffer for everything: the last write decides)
  events = []   # (step, offset, kind, what)
  for (ka, sname), (prog, ptrs, _, _, _, _, step, _) in kinfo.items():
    bsig = [x for x in m.kernels.get(prog, {}).get("signature") or [] if x.get("name") is None]
    events.append((step, 0, "exec", [(buf_for(t)[0], x.get("dtype"), x.get("mode")) for t, x in zip(ptrs, bsig)]))
  for sub in subs:
    for p in sub["packets"]:
      if p.name == "COPY_LINEAR" and not p.raw:
        ends = [buf_for(tuple(d[p.offset + lo] | (d[p.offset + lo + 1] << 32) for d in sub["per"]))[0] for lo in (3, 5)]
        events.append((seg_of(sub, p.offset)[2], p.offset, "copy", ends))
  dtypes: dict = {}
  for _, _, kind, ends in sorted(events, key=lambda e: e[:2]):
    if kind == "copy": dtypes[ends[1]] = dtypes.get(ends[0])
    else:
      for nm, dt, mode in ends:
        if mode in ("out", "inout") or nm not in dtypes: dtypes[nm] = dt
  for (kind, key), nm in bufname.items():
    if kind != "s" or nm not in written or static[key]["size"] > (1 << 20): continue
    after = readings.assemble(key, static[key]["size"], end, m.final, after=True)
    if after is None: continue
    d = trimmed_data(after, static[key]["size"]) or Data("u8", (0,))
    sl = Slice(Ref(nm), 0, len(after) if d.nbytes == len(after) else d.nbytes, True) if d.nbytes != static[key]["size"] else Slice(Ref(nm))
    if dtypes.get(nm) == "float" and d.nbytes % 4 == 0:   # float32 memory: compared within a tolerance, as floats
      decls.append(Expect(sl, Data("f32", tuple(float(x) for x in np.frombuffer(after[:d.nbytes], "<f4"))), True, LIFT_RTOL, LIFT_ATOL))
    else: decls.append(Expect(sl, d))
  if trace is not None:  # for sanitize: which capture step each lifted queue came from
    trace.update(start=orig(start), period=P, launches=K, steps=[orig(i) for i in range(start, start + P)], left_out=left_out,
                 queues={x["name"]: [(a, b, orig(i), c) for a, b, i, c in x["segs"]] for x in subs},
                 host=[[orig(i) for i in st] for st in host_steps])
  # the launch steps in no statement: the initial state, the steps after the last launch (a signal's creation is its
  # initial value and a folded lift's staged writes are its rebound buffers: both are in the program)
  unlifted = start + len(ev) - end
  header = [f"# hcq: launches={K}"] + [f"# hcq: unlifted={unlifted}"] * bool(unlifted) + [f"# lifted from {m.file} by hcqdsl lift ({K} captured launch{'es' * (K != 1)} of "
            f"tinygrad's AMD runtime, steps {orig(start) + 1}..{orig(end - 1) + 1} of {n_all})"] + [f"# note: {x}" for x in dict.fromkeys(notes)]
  return lifted_program(decls, m.file, header)

class _Readings:
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
    return _assemble(steps, addr, size, t, final, after)

def _assemble(steps: list, addr: int, size: int, t: int, final: Optional[list] = None, after: bool = False) -> Optional[bytes]:
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
      if s0 >= s1: left.append((m0, m1)); continue
      out[s0:s1] = b[s0 + addr - a:s1 + addr - a]
      left += [r for r in ((m0, s0), (s1, m1)) if r[0] < r[1]]
    missing = left
    if not missing: break
  return bytes(out) if after else bytes(out).rstrip(b"\0")

def _bytes_data(b: bytes) -> Data:
  """Bytes as the widest integer data that holds them exactly (u32 for tinygrad's float and int inputs)."""
  dt = "u32" if len(b) % 4 == 0 else "u8"
  return Data(dt, tuple(int(x) for x in np.frombuffer(b, "<u4" if dt == "u32" else "u1")))

def _relpath(p: pathlib.Path, base) -> str:
  import os
  return os.path.relpath(p.resolve(), pathlib.Path(base).resolve())

def _ident(name) -> str:
  name = re.sub(r"\x1b\[[0-9;]*m", "", str(name or "v"))  # tinygrad's names may carry terminal colors
  out = "".join(c if c.isalnum() or c == "_" else "_" for c in str(name or "v")) or "v"
  return out if not out[0].isdigit() else "v_" + out
