"""The manifest: the JSON file a raw dump or a capture is described by. Its format is one declaration, MANIFEST (below):
`load_manifest` reads every key through it (checking each value, a bad one an error naming the file and its JSON path),
`encode` writes through it (`hcqdsl capture`'s `Capture.manifest()`), and docs/lift.md's table of fields is its
`describe()`."""
from __future__ import annotations
import json, pathlib, re
from typing import NoReturn, Optional
import attrs
from ..ir import TARGETS, KEYWORDS, U32_MAX, DEVICE_INDEX_MAX
from ..amd.disasm import read_raw
from ..schema import too_deep

__all__ = ["Manifest", "MQueue", "ManifestError", "Field", "MANIFEST", "load_manifest", "encode", "describe",
           "MANIFEST_KIND", "MANIFEST_VERSION", "READABLE_VERSIONS", "MAX_QUEUE_FILE", "LAUNCH_VAR", "U64"]

U64 = (1 << 64) - 1
MANIFEST_KIND, MANIFEST_VERSION = "hcqdsl-manifest", 2
READABLE_VERSIONS = (1, 2)  # version 1: no steps, contents or code (older captures and hand-written dumps)
LAUNCH_VAR = "launch"       # the lift's var (k in launch k): a device or queue of that name is renamed
MAX_QUEUE_FILE = 256 << 20   # bytes of a queue's `file` read at most (a ring is far smaller; /dev/zero never ends)

class ManifestError(ValueError):
  """A manifest that cannot be used: the message names the file and the JSON path of the bad field."""

# ---------------------------------------------------------------- the declaration

# kind -> (what a value is, for the docs; how it is written from its in-memory form). Every integer kind reads a JSON
# number or a "0x..." string (addresses do not fit a double everywhere)
KINDS: dict[str, tuple] = {
  "int": ("integer", lambda v: v), "addr": ("address (written \"0x...\")", hex), "str": ("string", lambda v: v),
  "name": ("identifier", lambda v: v), "bool": ("true or false", lambda v: v), "hex": ("hex bytes", lambda b: b.hex()),
  "dwords": ("hex dwords (whitespace-separated, `0x` optional, `#` comments) or a list of integers",
             lambda dw: " ".join(f"{x:08x}" for x in dw)),
  "values": ("object of \"0x...\" address: integer", lambda d: {hex(a): v for a, v in d.items()}),
  "inputs": ("per input: null, or per device null or [address, size]",
             lambda rows: [None if r is None else [None if x is None else [hex(x[0]), x[1]] for x in r] for r in rows]),
  "json": ("JSON", lambda v: v), "list": ("list of objects", None), "object": ("object", None)}

@attrs.frozen
class Field:
  """One key of the manifest."""
  key: str                 # the JSON key
  kind: str                # one of KINDS
  doc: str                 # what it means (docs/lift.md)
  required: bool = False   # a manifest without it is refused
  since: int = 1           # the manifest version that introduced it
  fields: tuple = ()       # kind list / object: the keys of each item (a host step's: of every op)

  def read(self, v: "_V", default=None):
    """The value of this key of the JSON object `v` (checked against its kind; `default` when absent)."""
    if self.kind == "hex": return _hex_bytes(v, self.key)
    if self.kind == "name": return _name(v, self.key, default, self.required)
    kind = {"addr": "int", "name": "str"}.get(self.kind, self.kind)
    return v.get(self.key, kind, self.required, default)

  def write(self, value):
    """The JSON of an in-memory value (a dict, or an attrs record, per item of a list or object)."""
    if self.kind == "list": return [encode(self.fields, x) for x in value] if self.fields else list(value)
    if self.kind == "object": return encode(self.fields, value)
    return KINDS[self.kind][1](value)

  def __getitem__(self, key: str) -> "Field": return next(f for f in self.fields if f.key == key)

F = Field
_ADDR_HEX = (F("addr", "addr", "where", True), F("hex", "hex", "the bytes there (trailing zeros may be left out; `\"\"`: zeros)", True))
MANIFEST = F("", "object", "the manifest", fields=(
  F("format", "str", f"`\"{MANIFEST_KIND}\"`", True),
  F("version", "int", f"{' or '.join(map(str, READABLE_VERSIONS))} (written: {MANIFEST_VERSION})", True),
  F("producer", "object", "what wrote it", since=2, fields=(
    F("tool", "str", "`hcqdsl capture`"),
    F("path", "str", "which of tinygrad's paths submitted: `hcq` (HWQueue objects, default), `hcq2` (the submitter program)"))),
  F("devices", "list", "the GPUs; a device a queue names that is not listed is declared with the queue's target and the next index", fields=(
    F("name", "name", "its name in the program", True), F("index", "int", "the `AMD:N` number", True),
    F("arch", "str", f"one of {', '.join(TARGETS)}", True), F("tinygrad", "str", "tinygrad's name of it (`AMD:1`)", since=2))),
  F("queues", "list", "the rings", True, fields=(
    F("name", "name", "default `<engine><i>_<device>`"), F("device", "name", "the device's name", True),
    F("target", "str", "the device's arch", True), F("engine", "str", "`compute` (PM4; also `pm4`) or `copy` (SDMA; also `sdma`)", True),
    F("dwords", "dwords", "the ring or stream (this or `file` is required)"),
    F("file", "str", "a path relative to the manifest holding hex text or little-endian binary dwords"),
    F("read_ptr", "int", "the dword counter of the first packet the engine has not finished: giving it for any queue makes the lift a "
                         "hang triage; ring indices work too (a write pointer below it has wrapped once)"),
    F("write_ptr", "int", "the dword counter one past the last dword written (tinygrad's `put_value`; SDMA's byte counter / 4); "
                          "default: the dwords given. Larger than the ring: positions are taken modulo the ring's size"),
    F("start", "int", "where decoding starts (a packet boundary); default 0 while the ring has not wrapped, else `read_ptr`"),
    F("base", "int", "the ring's address"))),
  F("signals", "list", "signal memory: a snapshot (triage) or the values when the capture began", fields=(
    F("addr", "addr", "the value's address", True), F("value", "int", "its value (32-bit in version 1, 64-bit since 2)", True),
    F("name", "name", "its name in the program"), F("device", "name", "the device whose memory holds it (default: host memory)"),
    F("timeline", "bool", "it is `device`'s timeline signal"),
    F("mailbox", "bool", "a KFD interrupt mailbox (a write there orders nothing)", since=2))),
  F("buffers", "list", "allocations kernel arguments and copies point into", fields=(
    F("addr", "addr", "its address", True), F("size", "int", "bytes, at least 1", True), F("name", "name", "its name in the program"),
    F("device", "name", "the device whose memory it is (default: host memory)"))),
  F("memory", "list", "memory contents: kernarg blocks (an `exec`'s arguments), indirect buffers (lifted in place of the "
                      "INDIRECT_BUFFER / SDMA INDIRECT packet); with `step`, read before that host step ran",
    fields=_ADDR_HEX + (F("step", "int", "the host step it was read before", since=2),)),
  F("final", "list", "contents when the capture ended (the lift's `expect`s)", since=2, fields=_ADDR_HEX),
  F("kernels", "list", "the programs, by entry point", fields=(
    F("prog_addr", "addr", "the entry point (COMPUTE_PGM_LO/HI << 8)", True), F("name", "name", "its name in the program"),
    F("tinygrad_name", "str", "tinygrad's name of it", since=2),
    F("params", "json", "`in`/`out`/`inout` per pointer argument; since version 2 also tinygrad's signature: per argument "
                        "{name (null: a buffer), dtype, bytes, mode, shape, extent (the bytes its kernel touches from the pointer on)}"),
    F("code", "hex", "its code object (ELF)", since=2))),
  F("host", "list", "the host's steps in order (by `op`)", fields=(
    F("op", "str", "`submit`, `signal`, `wait`, `write` (since 2)", True),
    F("queue", "str", "submit: the queue", True), F("start", "int", "submit: its first dword", True), F("length", "int", "submit: its dwords", True),
    F("signals", "values", "submit: the values of the signals it uses, read before it ran", since=2),
    F("addr", "addr", "signal, wait: the signal; write: where", True), F("value", "int", "signal, wait: the value (a wait compares 64 bits)", True),
    F("init", "bool", "signal: tinygrad creating the signal", since=2), F("hex", "hex", "write: the bytes stored", True, since=2),
    F("size", "int", "write: its bytes when `hex` is empty (not recorded)", since=2),
    F("staged", "bool", "write: a copy-in chunk of classic HCQ's staging buffers", since=2),
    F("stack", "json", "the user's call stack: [file, line, function, source] per frame, outermost first", since=2))),
  F("graph_calls", "list", "each HCQGraph call", since=2, fields=(
    F("step", "int", "the host step it came before", True), F("graph", "int", "which graph", True),
    F("inputs", "inputs", "its inputs (tinygrad's input_uops; a MultiBuffer's per device)", True)))))

def encode(fields: tuple, obj) -> dict:
  """The JSON object of `obj` (a dict or an attrs record) by `fields`: each declared key it has, in declared order
  (what it holds beyond them is not written)."""
  get = (lambda k: obj.get(k, _ABSENT)) if isinstance(obj, dict) else (lambda k: getattr(obj, k, _ABSENT))
  return {f.key: f.write(v) for f in fields if (v := get(f.key)) is not _ABSENT}
_ABSENT = object()

def describe() -> str:
  """MANIFEST as docs/lift.md's table: one row per key (a test keeps the two equal)."""
  rows = ["| field | kind | meaning |", "| --- | --- | --- |"]
  def walk(fields: tuple, at: str):
    for f in fields:
      path = f"{at}{f.key}" + ("[]" if f.kind == "list" else "")
      flags = ", ".join(x for x in ("required" * f.required, f"since version {f.since}" * (f.since > 1)) if x)
      rows.append(f"| `{path}` | {KINDS[f.kind][0]}{f' ({flags})' if flags else ''} | {f.doc} |")
      walk(f.fields, path + ".")
  walk(MANIFEST.fields, "")
  return "\n".join(rows) + "\n"

# ---------------------------------------------------------------- what a manifest reads into

@attrs.define
class MQueue:
  """A manifest's queue."""
  name: str                  # its name in the program (a keyword renamed: NAME_1)
  device: str                # the device's name
  target: str                # the device's arch
  engine: str                # compute | copy
  dwords: list               # the ring (or a linear stream) as given
  read_ptr: Optional[int]    # the dword counter of the first packet not finished (a dump: hang triage)
  write_ptr: Optional[int]   # one past the last dword written (ring indices: made larger than read_ptr)
  start: Optional[int]       # where decoding starts
  base: Optional[int]        # the ring's address

@attrs.define
class Manifest:
  """A manifest, read and checked."""
  file: str           # its file name, for messages and the lift's header
  devices: list       # {"name", "index", "arch"}
  queues: list        # of MQueue
  signals: dict       # addr -> {"value", "name", "device", "timeline", "mailbox"}
  buffers: list       # {"addr", "size", "name", "device"}
  memory: list        # (addr, bytes)
  kernels: dict       # prog addr -> {"name", "params", "signature", "code", "tinygrad_name"}
  host: Optional[list]  # ordered {"op": submit|signal|wait|write, ...}; None: a raw dump without host steps
  version: int = 1    # the manifest's format version (READABLE_VERSIONS)
  steps: list = attrs.field(factory=list)   # version 2: (addr, bytes, step) memory read before host step `step` ran
  final: list = attrs.field(factory=list)   # version 2: (addr, bytes) contents when the capture ended
  mailboxes: set = attrs.field(factory=set)  # KFD interrupt mailbox addresses (writes there order nothing)
  path: str = "hcq"   # version 2: which of tinygrad's paths submitted (hcq: HWQueue objects, hcq2: the submitter program)
  graph_calls: list = attrs.field(factory=list)  # version 2: (step, graph, inputs): an HCQGraph call before host step
                      # `step`, its inputs as [[(addr, size) or None per device] or None per input] (tinygrad's input_uops)

# ---------------------------------------------------------------- reading

class _V:
  """Typed access to one JSON object with its path, for error messages."""
  def __init__(self, file: str, obj, path: str): self.file, self.obj, self.path = file, obj, path
  def fail(self, key: str, msg: str) -> NoReturn:
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
    return v   # json, values, inputs, dwords: read by their section

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
_ENGINES = {"compute": "compute", "pm4": "compute", "copy": "copy", "sdma": "copy"}

def _name(v: _V, key: str, default: Optional[str], required: bool = False) -> Optional[str]:
  n = v.get(key, "str", required, default)
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

def _parse(source, file: Optional[str]) -> tuple:
  """(JSON, file name for messages, directory `file` paths are relative to) of a path, JSON text or a dict."""
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
      if e.pos == 0:
        raise ManifestError(f"{file}: neither an image (.hcqimg) nor a manifest (JSON); raw dwords need a manifest (docs/lift.md)") from None
      raise ManifestError(f"{file}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    except RecursionError: raise ManifestError(f"{file}:{too_deep(source)}: invalid JSON: nested too deeply") from None
  return source, file, base

def load_manifest(source, file: Optional[str] = None) -> Manifest:
  """A manifest from a path, JSON text or an already-parsed dict. Raises ManifestError naming the bad field."""
  source, file, base = _parse(source, file)
  top, T = _V(file, source, ""), MANIFEST
  if T["format"].read(top) != MANIFEST_KIND: top.fail("format", f"expected \"{MANIFEST_KIND}\", got {json.dumps(source['format'])}")
  if (ver := T["version"].read(top)) not in READABLE_VERSIONS:
    top.fail("version", f"this hcqdsl reads manifest versions {' and '.join(map(str, READABLE_VERSIONS))}, got {ver}")
  devices, by_name = _devices(top)
  queues = _queues(top, base, devices, by_name)
  signals, buffers = _signals(top, ver, by_name), _buffers(top, by_name)
  memory, steps = [], []
  for m in T["memory"].read(top, []):
    ent = (T["memory"]["addr"].read(m), T["memory"]["hex"].read(m))
    if "step" in m.obj: steps.append(ent + (T["memory"]["step"].read(m),))
    else: memory.append(ent)
  final = [(T["final"]["addr"].read(m), T["final"]["hex"].read(m)) for m in T["final"].read(top, [])]
  kernels = _kernels(top, ver)
  host = _host(top, ver, queues, steps) if "host" in top.obj else None
  graph_calls = _graph_calls(top, file)
  prod = source.get("producer") if isinstance(source.get("producer"), dict) else {}
  _rename_keywords(devices, queues, signals, buffers, host)
  return Manifest(file, devices, queues, signals, buffers, memory, kernels, host, ver, steps, final,
                  {a for a, s in signals.items() if s.get("mailbox")}, str(prod.get("path", "hcq")), graph_calls)

def _devices(top: _V) -> tuple:
  D = MANIFEST["devices"]
  devices: list = []
  by_name: dict = {}   # name -> the device's entry
  for d in D.read(top, []):
    arch = D["arch"].read(d)
    if arch not in TARGETS: d.fail("arch", f"unknown arch `{arch}` (one of {', '.join(TARGETS)})")
    dev = {"name": D["name"].read(d), "index": D["index"].read(d), "arch": arch}
    if dev["index"] > DEVICE_INDEX_MAX: d.fail("index", f"{dev['index']} is past the largest device index, {DEVICE_INDEX_MAX}")
    if dev["name"] in by_name: d.fail("name", f"device `{dev['name']}` listed twice")
    if (o := next((x for x in devices if x["index"] == dev["index"]), None)) is not None:
      d.fail("index", f"{dev['index']} is already device `{o['name']}`'s index")
    devices.append(dev)
    by_name[dev["name"]] = dev
  return devices, by_name

def _queues(top: _V, base: pathlib.Path, devices: list, by_name: dict) -> list:
  Q, queues, qnames = MANIFEST["queues"], [], set()
  qs = Q.read(top)
  if not qs: top.fail("queues", "no queues")
  for i, q in enumerate(qs):
    target = Q["target"].read(q)
    if target not in TARGETS: q.fail("target", f"unknown target `{target}` (one of {', '.join(TARGETS)})")
    eng = Q["engine"].read(q)
    if eng not in _ENGINES: q.fail("engine", f"expected compute (pm4) or copy (sdma), got `{eng}`")
    dev = Q["device"].read(q)
    if dev not in by_name:
      by_name[dev] = {"name": dev, "index": 1 + max((d["index"] for d in devices), default=-1), "arch": target}
      if by_name[dev]["index"] > DEVICE_INDEX_MAX: q.fail("device", f"`{dev}` would be device index {by_name[dev]['index']}, past {DEVICE_INDEX_MAX}")
      devices.append(by_name[dev])
    elif by_name[dev]["arch"] != target: q.fail("target", f"device `{dev}` is {by_name[dev]['arch']}, not {target}")
    engine = _ENGINES[eng]
    name = Q["name"].read(q, f"{engine}{i}_{dev}")
    if name in qnames: q.fail("name", f"queue `{name}` listed twice")
    qnames.add(name)
    dw = _dwords(q, base)
    rp, wp, st = Q["read_ptr"].read(q), Q["write_ptr"].read(q), Q["start"].read(q)
    wp, st = _pointers(q, len(dw), rp, wp, st)
    queues.append(MQueue(name, dev, target, engine, dw, rp, wp, st, Q["base"].read(q)))
  return queues

def _dwords(q: _V, base: pathlib.Path) -> list:
  """A queue's dwords: `dwords` (hex text or integers) or `file`."""
  if "dwords" in q.obj and "file" in q.obj: q.fail("", "give `dwords` or `file`, not both")
  if "file" in q.obj:
    path = base / MANIFEST["queues"]["file"].read(q)
    try:
      with open(path, "rb") as f: raw = f.read(MAX_QUEUE_FILE + 1)   # (bounded: a device like /dev/zero never ends)
    except OSError as e: q.fail("file", f"{path}: {e.strerror or e}")
    if len(raw) > MAX_QUEUE_FILE: q.fail("file", f"{path}: more than {MAX_QUEUE_FILE} bytes (a queue's dwords are far fewer)")
    try: return _raw_dwords(raw)
    except ValueError as e: q.fail("file", f"{path}: {e}")
  if isinstance(q.obj.get("dwords"), list):
    dw = [x.obj for x in q.get("dwords", "list")]
    for j, x in enumerate(dw):
      if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x <= U32_MAX:
        q.fail(f"dwords[{j}]", f"expected a 32-bit unsigned integer, got {json.dumps(x)}")
    return dw
  if "dwords" in q.obj:
    try: return _raw_dwords(q.get("dwords", "str").encode())
    except (ValueError, UnicodeEncodeError) as e: q.fail("dwords", f"expected hex dwords: {e}")
  q.fail("dwords", "missing (give `dwords`: hex text or a list of integers, or `file`)")

def _pointers(q: _V, n: int, rp: Optional[int], wp: Optional[int], st: Optional[int]) -> tuple:
  """(write_ptr, start), checked against the read pointer and the `n` dwords given (ring indices: wp past rp)."""
  if wp is not None and rp is not None and rp > wp:
    if rp < n and wp < n: wp += n  # ring indices: the write pointer wrapped past the ring's end
    else: q.fail("read_ptr", f"{rp} is past write_ptr {wp}")
  if wp is not None and n and wp - (lo := st if st is not None else rp if rp is not None else max(0, wp - n)) > n:
    q.fail("write_ptr", f"{wp - lo} dwords between start/read_ptr and write_ptr, but the ring holds {n}")
  if wp is None and (rp is not None and rp > n): q.fail("read_ptr", f"{rp} is past the {n} dwords given (give write_ptr for a ring)")
  if st is not None and ((rp is not None and st > rp) or (wp is not None and st > wp)): q.fail("start", f"{st} is past read_ptr/write_ptr")
  return wp, st

def _signals(top: _V, ver: int, by_name: dict) -> dict:
  S, signals = MANIFEST["signals"], {}
  for s in S.read(top, []):
    a, v = S["addr"].read(s), S["value"].read(s)
    if v > (U32_MAX if ver == 1 else U64): s.fail("value", f"{v} is not a {32 if ver == 1 else 64}-bit signal value")
    dev = S["device"].read(s)
    if dev is not None and dev not in by_name: s.fail("device", f"unknown device `{dev}`")
    tl = S["timeline"].read(s, False)
    if tl and dev is None: s.fail("timeline", "a timeline signal needs its `device`")
    signals[a] = {"value": v & U32_MAX, "name": S["name"].read(s), "device": dev, "timeline": tl, "mailbox": S["mailbox"].read(s, False)}
  return signals

def _buffers(top: _V, by_name: dict) -> list:
  B, buffers = MANIFEST["buffers"], []
  for b in B.read(top, []):
    dev = B["device"].read(b)
    if dev is not None and dev not in by_name: b.fail("device", f"unknown device `{dev}`")
    size = B["size"].read(b)
    if size < 1: b.fail("size", "must be at least 1")
    buffers.append({"addr": B["addr"].read(b), "size": size, "name": B["name"].read(b), "device": dev})
  return buffers

def _kernels(top: _V, ver: int) -> dict:
  K, kernels = MANIFEST["kernels"], {}
  for k in K.read(top, []):
    if not isinstance(k.obj, dict): k.fail("", f"expected an object, got {type(k.obj).__name__}")
    params, sig = None, None
    if "params" in k.obj:
      params = [p.obj for p in k.get("params", "list")]
      if ver >= 2 and all(isinstance(p, dict) for p in params):  # a capture: tinygrad's signature (buffers, then scalars)
        sig, params = params, None
      for j, p in enumerate(params or ()):
        if p not in ("in", "out", "inout"): k.fail(f"params[{j}]", f"expected in, out or inout, got {json.dumps(p)}")
    kernels[K["prog_addr"].read(k)] = {"name": K["name"].read(k), "params": params, "signature": sig,
      "code": K["code"].read(k) if "code" in k.obj else None, "tinygrad_name": K["tinygrad_name"].read(k)}
  return kernels

def _host(top: _V, ver: int, queues: list, steps: list) -> list:
  """The host's steps; a `write` with its bytes is also a memory reading (`steps`) from the next step on."""
  H, host = MANIFEST["host"], []
  for h in H.read(top):
    op = H["op"].read(h)
    extra = {"stack": h.obj["stack"]} if "stack" in h.obj else {}
    if op == "submit": host.append(_submit(h, queues) | extra)
    elif op in ("signal", "wait"):
      v = H["value"].read(h)
      if v > (U32_MAX if ver == 1 and op == "signal" else U64):   # the host's waits compare 64 bits in every version
        h.fail("value", f"{v} is not a {32 if ver == 1 and op == 'signal' else 64}-bit {'signal value' if op == 'signal' else 'host wait value'}")
      host.append({"op": op, "addr": H["addr"].read(h), "value": v, **({"init": True} if h.obj.get("init") is True else {}), **extra})
    elif op == "write" and ver >= 2:   # the host's store of bytes into host memory (a staging refill)
      a, b = H["addr"].read(h), H["hex"].read(h)
      if (n := H["size"].read(h)) is not None:   # `size`: the bytes were not recorded (sanitize), only the range
        if b and len(b) != n: h.fail("size", f"{n}, but `hex` holds {len(b)} bytes")
        if n > U32_MAX: h.fail("size", f"{n} bytes: a host write is at most {U32_MAX} bytes")
      host.append({"op": "write", "addr": a, "data": b, "size": len(b) if n is None else n, **extra,
                   **({"staged": True} if h.obj.get("staged") is True else {})})
      if h.obj.get("hex"): steps.append((a, b, len(host)))   # what the memory holds from the next step on
    else: h.fail("op", f"expected {'submit, signal, wait or write' if ver >= 2 else 'submit, signal or wait'}, got `{op}`")
  return host

def _submit(h: _V, queues: list) -> dict:
  H = MANIFEST["host"]
  qn = H["queue"].read(h)
  q = next((q for q in queues if q.name == qn), None)
  if q is None: h.fail("queue", f"unknown queue `{qn}`")
  s0, ln = H["start"].read(h), H["length"].read(h)
  if s0 + ln > len(q.dwords): h.fail("length", f"dwords {s0}..{s0 + ln} are past the {len(q.dwords)} dwords of `{qn}`")
  snap = h.obj.get("signals", {})
  if not isinstance(snap, dict): h.fail("signals", "expected an object of address: value")
  try: snap = {int(a, 0): int(v) for a, v in snap.items()}
  except (TypeError, ValueError): h.fail("signals", "expected \"0x...\" addresses and integer values")
  return {"op": "submit", "queue": qn, "start": s0, "length": ln, "signals": snap}

def _graph_calls(top: _V, file: str) -> list:
  G, out = MANIFEST["graph_calls"], []
  for g in G.read(top, []):
    inputs: list = []
    for row in g.get("inputs", "list", required=True):
      if row.obj is None:
        inputs.append(None)
        continue
      if not isinstance(row.obj, list): row.fail("", f"expected a list of [addr, size] per device, got {json.dumps(row.obj)}")
      bufs: list = []
      for j, x in enumerate(row.obj):
        if x is None:
          bufs.append(None)
          continue
        pair = _V(file, {"addr": x[0], "size": x[1]} if isinstance(x, list) and len(x) == 2 else x, f"{row.path}[{j}]")
        if not isinstance(pair.obj, dict): pair.fail("", f"expected [addr, size], got {json.dumps(x)}")
        bufs.append((pair.get("addr", "int", required=True), pair.get("size", "int", required=True)))
      inputs.append(bufs)
    out.append((G["step"].read(g), G["graph"].read(g), inputs))
  return out

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
  def dev(n):
    return new.get(n, n) if n is not None else None
  for d in devices: d["name"] = dev(d["name"])
  for q in queues: q.name, q.device = new.get(q.name, q.name), dev(q.device)
  for s in signals.values(): s["device"] = dev(s["device"])
  for b in buffers: b["device"] = dev(b["device"])
  for h in host or ():
    if h.get("op") == "submit": h["queue"] = new.get(h["queue"], h["queue"])
