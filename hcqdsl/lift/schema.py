"""The manifest: the JSON file a raw dump or a capture is described by (docs/lift.md, "The manifest"), read into
`Manifest` by `load_manifest` — every field checked, a bad one an error naming the file and its JSON path."""
from __future__ import annotations
import json, pathlib, re
from typing import Optional
import attrs
from ..ir import ARCHS, KEYWORDS, U32_MAX, DEVICE_INDEX_MAX
from ..amd.disasm import read_raw

__all__ = ["Manifest", "MQueue", "ManifestError", "load_manifest", "too_deep", "MANIFEST_KIND", "MANIFEST_VERSION",
           "READABLE_VERSIONS", "MAX_QUEUE_FILE", "LAUNCH_VAR", "U64"]

U64 = (1 << 64) - 1
MANIFEST_KIND, MANIFEST_VERSION = "hcqdsl-manifest", 2
READABLE_VERSIONS = (1, 2)  # version 1: no steps, contents or code (older captures and hand-written dumps)
LAUNCH_VAR = "launch"       # the lift's var (k in launch k): a device or queue of that name is renamed
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
    if arch not in ARCHS: d.fail("arch", f"unknown arch `{arch}` (one of {', '.join(ARCHS)})")
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
    if target not in ARCHS: q.fail("target", f"unknown target `{target}` (one of {', '.join(ARCHS)})")
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
