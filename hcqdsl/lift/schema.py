"""The manifest: the JSON file a raw dump or a capture is described by. Its format is one declaration, MANIFEST (below),
in hcqdsl/schema.py's types as the image's and the witness's are: `load_manifest` reads every key through it (checking
each value, a bad one an error naming the file and its JSON path), `encode` writes through it (`hcqdsl capture`'s
`Capture.manifest()`), and docs/lift.md's table of fields is its `describe()`. What the keys must satisfy together
(devices named by queues, pointers within the ring, a host step's keys for its `op`) is checked after."""
from __future__ import annotations
import json, math, pathlib, re
from typing import Callable, NoReturn, Optional
import attrs
from ..ir import TARGETS, KEYWORDS, U32_MAX, DEVICE_INDEX_MAX
from ..amd.disasm import read_raw
from ..schema import Pass, Invalid, convert, too_deep, table, List, Obj, Keep, Key

__all__ = ["Manifest", "MQueue", "ManifestError", "MANIFEST", "load_manifest", "encode", "describe",
           "MANIFEST_KIND", "MANIFEST_VERSION", "READABLE_VERSIONS", "MAX_QUEUE_FILE", "LAUNCH_VAR", "U64"]

U64 = (1 << 64) - 1
MANIFEST_KIND, MANIFEST_VERSION = "hcqdsl-manifest", 2
READABLE_VERSIONS = (1, 2)  # version 1: no steps, contents or code (older captures and hand-written dumps)
LAUNCH_VAR = "launch"       # the lift's var (k in launch k): a device or queue of that name is renamed
MAX_QUEUE_FILE = 256 << 20   # bytes of a queue's `file` read at most (a ring is far smaller; /dev/zero never ends)

class ManifestError(ValueError):
  """A manifest that cannot be used: the message names the file and the JSON path of the bad field."""

# ---------------------------------------------------------------- the declaration

class _Pass(Pass):
  """One pass over a manifest: reading (JSON -> values) or writing (values -> JSON). `base`: the directory a queue's
  `file` is relative to. Errors read `FILE: PATH: what is wrong`."""
  NOUN, TOP = "manifest", "(top level)"
  def __init__(self, reading: bool, file: str = "<manifest>", base: pathlib.Path = pathlib.Path(".")):
    super().__init__(reading)
    self.file, self.base = file, base
  def fail(self, at: str, what: str, v) -> NoReturn: raise Invalid(at or self.TOP, f"expected {what}, got {type(v).__name__}")
  def missing(self, t, at: str, key: str) -> NoReturn: raise Invalid(f"{at}.{key}" if at else key, "missing")
  def error(self, e: Invalid) -> ManifestError: return ManifestError(f"{self.file}: {e.at or self.TOP}: {e.what}")

def _bad(at: str, msg: str) -> NoReturn: raise Invalid(at, msg)

class _Int:
  """A non-negative integer: a JSON number or a "0x..." (or decimal) string; an address is written "0x..."."""
  fast = None
  def __init__(self, addr: bool = False): self.addr = addr
  def conv(self, v, c: _Pass, at: str):
    if not c.reading: return hex(v) if self.addr else v
    if isinstance(v, str):
      try: v = int(v.replace("_", ""), 0)
      except ValueError: _bad(at, f"expected an integer (or a \"0x...\" string), got {v!r}")
    if type(v) is not int: _bad(at, f"expected an integer, got {json.dumps(v)}")
    if v < 0: _bad(at, f"expected a non-negative integer, got {v}")
    return v
  def doc(self) -> str: return "address (written \"0x...\")" if self.addr else "integer"

class _Str:
  """A non-empty string; `refuse(value, path)` says what else it must be (or raises)."""
  fast = None
  def __init__(self, refuse=None, text: str = "string"): self.refuse, self.text = refuse, text
  def conv(self, v, c: _Pass, at: str):
    if not c.reading: return v
    if type(v) is not str or not v: _bad(at, f"expected a non-empty string, got {json.dumps(v)}")
    if self.refuse is not None: self.refuse(v, at)
    return v
  def doc(self) -> str: return self.text

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
def _identifier(v: str, at: str) -> None:
  if not _IDENT.match(v): _bad(at, f"`{v}` is not an identifier ([A-Za-z_][A-Za-z0-9_]*)")
def _one_of(noun: str, among) -> object:
  def refuse(v: str, at: str) -> None:
    if v not in among: _bad(at, f"unknown {noun} `{v}` (one of {', '.join(among)})")
  return refuse
_ENGINES = {"compute": "compute", "pm4": "compute", "copy": "copy", "sdma": "copy"}
def _engine(v: str, at: str) -> None:
  if v not in _ENGINES: _bad(at, f"expected compute (pm4) or copy (sdma), got `{v}`")
def _format(v: str, at: str) -> None:
  if v != MANIFEST_KIND: _bad(at, f"expected \"{MANIFEST_KIND}\", got {json.dumps(v)}")

class _Bool:
  fast = None
  def conv(self, v, c: _Pass, at: str):
    if c.reading and type(v) is not bool: _bad(at, f"expected true or false, got {json.dumps(v)}")
    return v
  def doc(self) -> str: return "true or false"

class _Hex:
  """Bytes as hex text (`""`: none)."""
  fast = None
  def conv(self, v, c: _Pass, at: str):
    if not c.reading: return v.hex()
    if v == "": return b""   # memory that reads as zeros (trailing zeros dropped)
    if type(v) is not str: _bad(at, f"expected a non-empty string, got {json.dumps(v)}")
    try: return bytes.fromhex(v.replace(" ", "").replace("\n", ""))
    except ValueError: _bad(at, "expected hex bytes")
  def doc(self) -> str: return "hex bytes"

class _Dwords:
  """A queue's dwords: hex text (disasm's reader: whitespace-separated, `0x` optional, `#` comments) or a list of
  32-bit integers; written as hex text."""
  fast = None
  def conv(self, v, c: _Pass, at: str):
    if not c.reading: return " ".join(f"{x:08x}" for x in v)
    if type(v) is list:
      for j, x in enumerate(v):
        if type(x) is not int or not 0 <= x <= U32_MAX: _bad(f"{at}[{j}]", f"expected a 32-bit unsigned integer, got {json.dumps(x)}")
      return v
    if type(v) is not str or not v: _bad(at, f"expected a non-empty string, got {json.dumps(v)}")
    try: return _raw_dwords(v.encode())
    except (ValueError, UnicodeEncodeError) as e: _bad(at, f"expected hex dwords: {e}")
  def doc(self) -> str: return "hex dwords (whitespace-separated, `0x` optional, `#` comments) or a list of integers"

class _Values:
  """Signal values by address: {"0x...": integer}."""
  fast = None
  def conv(self, v, c: _Pass, at: str):
    if not c.reading: return {hex(a): x for a, x in v.items()}
    if type(v) is not dict: _bad(at, "expected an object of address: value")
    try: return {int(a, 0): int(x) for a, x in v.items()}
    except (TypeError, ValueError, OverflowError): _bad(at, "expected \"0x...\" addresses and integer values")
  def doc(self) -> str: return "object of \"0x...\" address: integer"

class _Inputs:
  """An HCQGraph call's inputs: per input null, or per device null or [address, size]."""
  fast = None
  def conv(self, v, c: _Pass, at: str):
    if not c.reading: return [None if r is None else [None if x is None else [hex(x[0]), x[1]] for x in r] for r in v]
    if type(v) is not list: _bad(at, f"expected a list, got {type(v).__name__}")
    out: list = []
    for i, row in enumerate(v):
      if row is None or type(row) is not list:
        if row is not None: _bad(f"{at}[{i}]", f"expected a list of [addr, size] per device, got {json.dumps(row)}")
        out.append(None)
        continue
      bufs: list = []
      for j, x in enumerate(row):
        if x is None:
          bufs.append(None)
          continue
        pair = {"addr": x[0], "size": x[1]} if isinstance(x, list) and len(x) == 2 else x
        if type(pair) is not dict: _bad(f"{at}[{i}][{j}]", f"expected [addr, size], got {json.dumps(x)}")
        got = []
        for k in ("addr", "size"):
          if k not in pair: _bad(f"{at}[{i}][{j}].{k}", "missing")
          got.append(_Int().conv(pair[k], c, f"{at}[{i}][{j}].{k}"))
        bufs.append(tuple(got))
      out.append(bufs)
    return out
  def doc(self) -> str: return "per input: null, or per device null or [address, size]"

class _Json:
  fast = None
  def conv(self, v, c: _Pass, at: str): return v
  def doc(self) -> str: return "JSON"

class _Params:
  """A kernel's `params`: `in`/`out`/`inout` per pointer argument, or (version 2) tinygrad's signature, an object per
  argument whose `bytes` is what the lift lays the kernel arguments out by."""
  fast = None
  def conv(self, v, c: _Pass, at: str):
    if not c.reading: return v
    if type(v) is not list: _bad(at, f"expected a list, got {type(v).__name__}")
    if c.kept.get("version", 1) >= 2 and v and all(type(x) is dict for x in v):
      for j, x in enumerate(v): _signature_entry(x, f"{at}[{j}]")
      return v
    for j, x in enumerate(v):
      if x not in ("in", "out", "inout"): _bad(f"{at}[{j}]", f"expected in, out or inout, got {json.dumps(x)}")
    return v
  def doc(self) -> str: return "JSON"

def _signature_entry(x: dict, at: str) -> None:
  """One argument of tinygrad's signature: name (null: a buffer), dtype, bytes, mode, shape, extent."""
  for k in ("bytes", "extent"):
    n = x.get(k)
    if n is not None and (type(n) is not int or not 0 <= n <= U32_MAX):
      _bad(f"{at}.{k}", f"expected null or an integer in 0..{U32_MAX}, got "
                        f"{json.dumps(n) if not (type(n) is float and math.isnan(n)) else 'NaN'}")
  for k in ("name", "dtype", "mode"):
    if x.get(k) is not None and type(x[k]) is not str: _bad(f"{at}.{k}", f"expected null or a string, got {json.dumps(x[k])}")
  if x.get("mode") is not None and x["mode"] not in ("in", "out", "inout"):
    _bad(f"{at}.mode", f"expected in, out or inout, got {json.dumps(x['mode'])}")

def _readable(ver: int, c: _Pass, at: str) -> None:
  if ver not in READABLE_VERSIONS: _bad(at, f"this hcqdsl reads manifest versions {' and '.join(map(str, READABLE_VERSIONS))}, got {ver}")

class _Op(_Str):
  """A host step's `op`: the ops of the manifest's version."""
  def conv(self, v, c: _Pass, at: str):
    v = super().conv(v, c, at)
    if c.reading and v not in HOST_KEYS or (v == "write" and c.kept.get("version", 1) < 2):
      _bad(at, f"expected {'submit, signal, wait or write' if c.kept.get('version', 1) >= 2 else 'submit, signal or wait'}, got `{v}`")
    return v

# a host step's keys its `op` requires, in the order they are checked
HOST_KEYS = {"submit": ("queue", "start", "length"), "signal": ("value", "addr"), "wait": ("value", "addr"), "write": ("addr", "hex")}

def _host_step(out: dict, c: _Pass, at: str) -> None:
  if not c.reading: return
  for k in HOST_KEYS[out["op"]]:
    if k not in out: _bad(f"{at}.{k}", "missing")

def _queue_dwords(out: dict, c: _Pass, at: str) -> None:
  """A queue's dwords: `dwords`, or read from `file` (relative to the manifest)."""
  if not c.reading: return
  if "dwords" in out and "file" in out: _bad(at, "give `dwords` or `file`, not both")
  if "file" not in out:
    if "dwords" not in out: _bad(f"{at}.dwords", "missing (give `dwords`: hex text or a list of integers, or `file`)")
    return
  path = c.base / out["file"]
  try:
    with open(path, "rb") as f: raw = f.read(MAX_QUEUE_FILE + 1)   # (bounded: a device like /dev/zero never ends)
  except OSError as e: _bad(f"{at}.file", f"{path}: {e.strerror or e}")
  if len(raw) > MAX_QUEUE_FILE: _bad(f"{at}.file", f"{path}: more than {MAX_QUEUE_FILE} bytes (a queue's dwords are far fewer)")
  try: out["dwords"] = _raw_dwords(raw)
  except ValueError as e: _bad(f"{at}.file", f"{path}: {e}")

def _obj(required: tuple = (), check=None, **keys) -> Obj:
  """An object of documented keys (other keys ignored), those in `required` required."""
  return Obj(keys, optional=tuple(k for k in keys if k not in required), open=True, check=check)

K, INT, ADDR, NAME, STR, BOOL, HEX = Key, _Int(), _Int(addr=True), _Str(_identifier, "identifier"), _Str(), _Bool(), _Hex()
_ADDR_HEX = dict(addr=K(ADDR, "where"), hex=K(HEX, "the bytes there (trailing zeros may be left out; `\"\"`: zeros)"))
MANIFEST = _obj(("format", "version", "queues"),
  format=K(_Str(_format), f"`\"{MANIFEST_KIND}\"`"),
  version=K(Keep("version", INT, _readable), f"{' or '.join(map(str, READABLE_VERSIONS))} (written: {MANIFEST_VERSION})"),
  producer=K(_obj(tool=K(STR, "`hcqdsl capture`"),
                  path=K(STR, "which of tinygrad's paths submitted: `hcq` (HWQueue objects, default), `hcq2` (the submitter program)")),
             "what wrote it", since=2),
  devices=K(List(_obj(("name", "index", "arch"), name=K(NAME, "its name in the program"), index=K(INT, "the `AMD:N` number"),
                      arch=K(_Str(_one_of("arch", TARGETS)), f"one of {', '.join(TARGETS)}"),
                      tinygrad=K(STR, "tinygrad's name of it (`AMD:1`)", since=2))),
            "the GPUs; a device a queue names that is not listed is declared with the queue's target and the next index"),
  queues=K(List(_obj(("device", "target", "engine"), _queue_dwords,
    name=K(NAME, "default `<engine><i>_<device>`"), device=K(NAME, "the device's name"),
    target=K(_Str(_one_of("target", TARGETS)), "the device's arch"),
    engine=K(_Str(_engine), "`compute` (PM4; also `pm4`) or `copy` (SDMA; also `sdma`)"),
    dwords=K(_Dwords(), "the ring or stream (this or `file` is required)"),
    file=K(STR, "a path relative to the manifest holding hex text or little-endian binary dwords"),
    read_ptr=K(INT, "the dword counter of the first packet the engine has not finished: giving it for any queue makes the lift a "
                    "hang triage; ring indices work too (a write pointer below it has wrapped once)"),
    write_ptr=K(INT, "the dword counter one past the last dword written (tinygrad's `put_value` in dwords: SDMA's byte counter / 4); "
                     "default: the dwords given. Larger than the ring: positions are taken modulo the ring's size"),
    start=K(INT, "where decoding starts (a packet boundary); default 0 while the ring has not wrapped, else `read_ptr`"),
    base=K(INT, "the ring's address"))), "the rings"),
  signals=K(List(_obj(("addr", "value"), addr=K(ADDR, "the value's address"), value=K(INT, "its value (32-bit in version 1, 64-bit since 2)"),
    name=K(NAME, "its name in the program"), device=K(NAME, "the device whose memory holds it (default: host memory)"),
    timeline=K(BOOL, "it is `device`'s timeline signal"),
    mailbox=K(BOOL, "a KFD interrupt mailbox (a write there orders nothing)", since=2))),
    "signal memory: a snapshot (triage) or the values when the capture began"),
  buffers=K(List(_obj(("addr", "size"), addr=K(ADDR, "its address"), size=K(INT, "bytes, at least 1"), name=K(NAME, "its name in the program"),
    device=K(NAME, "the device whose memory it is (default: host memory)"))), "allocations kernel arguments and copies point into"),
  memory=K(List(_obj(("addr", "hex"), **_ADDR_HEX, step=K(INT, "the host step it was read before", since=2))),
           "memory contents: kernarg blocks (an `exec`'s arguments), indirect buffers (lifted in place of the INDIRECT_BUFFER / SDMA "
           "INDIRECT packet); with `step`, read before that host step ran"),
  final=K(List(_obj(("addr", "hex"), **_ADDR_HEX)), "contents when the capture ended (the lift's `expect`s)", since=2),
  kernels=K(List(_obj(("prog_addr",), prog_addr=K(ADDR, "the entry point (COMPUTE_PGM_LO/HI << 8)"), name=K(NAME, "its name in the program"),
    tinygrad_name=K(STR, "tinygrad's name of it", since=2),
    params=K(_Params(), "`in`/`out`/`inout` per pointer argument; since version 2 also tinygrad's signature: per argument "
                        "{name (null: a buffer), dtype, bytes (null or 0..2**32-1), mode, shape, extent (null or 0..2**32-1: the bytes "
                        "its kernel touches from the pointer on, when tinygrad's kernel bounds them)}"),
    code=K(HEX, "its code object (ELF)", since=2))), "the programs, by entry point"),
  host=K(List(_obj(("op",), _host_step,
    op=K(_Op(), "`submit`, `signal`, `wait`, `write` (since 2)"),
    queue=K(STR, "submit: the queue", required=True), start=K(INT, "submit: its first dword", required=True),
    length=K(INT, "submit: its dwords", required=True),
    signals=K(_Values(), "submit: the values of the signals it uses, read before it ran", since=2),
    addr=K(ADDR, "signal, wait: the signal; write: where", required=True),
    value=K(INT, "signal, wait: the value (a wait compares 64 bits)", required=True),
    init=K(BOOL, "signal: tinygrad creating the signal", since=2), hex=K(HEX, "write: the bytes stored", since=2, required=True),
    size=K(INT, "write: its bytes when `hex` is empty (not recorded)", since=2),
    staged=K(BOOL, "write: a copy-in chunk of classic HCQ's staging buffers", since=2),
    stack=K(_Json(), "the user's call stack: [file, line, function, source] per frame, outermost first", since=2))),
    "the host's steps in order (by `op`)"),
  graph_calls=K(List(_obj(("step", "graph", "inputs"), step=K(INT, "the host step it came before"), graph=K(INT, "which graph"),
    inputs=K(_Inputs(), "its inputs (tinygrad's input_uops; a MultiBuffer's per device)"))), "each HCQGraph call", since=2))

def encode(obj) -> dict:
  """The JSON object of a manifest in memory (dicts or attrs records: each declared key it has, in declared order;
  what it holds beyond them is not written)."""
  return convert(MANIFEST, obj, _Pass(False))

def describe() -> str:
  """MANIFEST as docs/lift.md's table: one row per key (a test keeps the two equal)."""
  return table(MANIFEST)

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

_Fail = Callable[[str, str], NoReturn]   # raises the ManifestError at a path

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
  c = _Pass(True, file, base)
  m = convert(MANIFEST, source, c)
  def fail(at: str, msg: str) -> NoReturn: raise ManifestError(f"{file}: {at}: {msg}")
  ver = m["version"]
  devices, by_name = _devices(m.get("devices", []), fail)
  queues = _queues(m["queues"], devices, by_name, fail)
  signals, buffers = _signals(m.get("signals", []), ver, by_name, fail), _buffers(m.get("buffers", []), by_name, fail)
  memory, steps = [], []
  for x in m.get("memory", []):
    if "step" in x: steps.append((x["addr"], x["hex"], x["step"]))
    else: memory.append((x["addr"], x["hex"]))
  final = [(x["addr"], x["hex"]) for x in m.get("final", [])]
  kernels = _kernels(m.get("kernels", []), ver)
  host = _host(m["host"], ver, queues, steps, fail) if "host" in m else None
  graph_calls = [(g["step"], g["graph"], g["inputs"]) for g in m.get("graph_calls", [])]
  _rename_keywords(devices, queues, signals, buffers, host)
  return Manifest(file, devices, queues, signals, buffers, memory, kernels, host, ver, steps, final,
                  {a for a, s in signals.items() if s.get("mailbox")}, str(m.get("producer", {}).get("path", "hcq")), graph_calls)

def _devices(ds: list, fail: _Fail) -> tuple:
  devices: list = []
  by_name: dict = {}   # name -> the device's entry
  for i, d in enumerate(ds):
    dev = {"name": d["name"], "index": d["index"], "arch": d["arch"]}
    if dev["index"] > DEVICE_INDEX_MAX: fail(f"devices[{i}].index", f"{dev['index']} is past the largest device index, {DEVICE_INDEX_MAX}")
    if dev["name"] in by_name: fail(f"devices[{i}].name", f"device `{dev['name']}` listed twice")
    if (o := next((x for x in devices if x["index"] == dev["index"]), None)) is not None:
      fail(f"devices[{i}].index", f"{dev['index']} is already device `{o['name']}`'s index")
    devices.append(dev)
    by_name[dev["name"]] = dev
  return devices, by_name

def _queues(qs: list, devices: list, by_name: dict, fail: _Fail) -> list:
  queues, qnames = [], set()
  if not qs: fail("queues", "no queues")
  for i, q in enumerate(qs):
    target, dev, at = q["target"], q["device"], f"queues[{i}]"
    if dev not in by_name:
      by_name[dev] = {"name": dev, "index": 1 + max((d["index"] for d in devices), default=-1), "arch": target}
      if by_name[dev]["index"] > DEVICE_INDEX_MAX:
        fail(f"{at}.device", f"`{dev}` would be device index {by_name[dev]['index']}, past {DEVICE_INDEX_MAX}")
      devices.append(by_name[dev])
    elif by_name[dev]["arch"] != target: fail(f"{at}.target", f"device `{dev}` is {by_name[dev]['arch']}, not {target}")
    engine = _ENGINES[q["engine"]]
    name = q.get("name", f"{engine}{i}_{dev}")
    if name in qnames: fail(f"{at}.name", f"queue `{name}` listed twice")
    qnames.add(name)
    dw = q["dwords"]
    rp, wp, st = q.get("read_ptr"), q.get("write_ptr"), q.get("start")
    wp, st = _pointers(at, fail, len(dw), rp, wp, st)
    queues.append(MQueue(name, dev, target, engine, dw, rp, wp, st, q.get("base")))
  return queues

def _pointers(at: str, fail: _Fail, n: int, rp: Optional[int], wp: Optional[int], st: Optional[int]) -> tuple:
  """(write_ptr, start), checked against the read pointer and the `n` dwords given (ring indices: wp past rp)."""
  if wp is not None and rp is not None and rp > wp:
    if rp < n and wp < n: wp += n  # ring indices: the write pointer wrapped past the ring's end
    else: fail(f"{at}.read_ptr", f"{rp} is past write_ptr {wp}")
  if wp is not None and n and wp - (lo := st if st is not None else rp if rp is not None else max(0, wp - n)) > n:
    fail(f"{at}.write_ptr", f"{wp - lo} dwords between start/read_ptr and write_ptr, but the ring holds {n}")
  if wp is None and (rp is not None and rp > n): fail(f"{at}.read_ptr", f"{rp} is past the {n} dwords given (give write_ptr for a ring)")
  if st is not None and ((rp is not None and st > rp) or (wp is not None and st > wp)): fail(f"{at}.start", f"{st} is past read_ptr/write_ptr")
  return wp, st

def _signals(ss: list, ver: int, by_name: dict, fail: _Fail) -> dict:
  signals = {}
  for i, s in enumerate(ss):
    a, v, dev = s["addr"], s["value"], s.get("device")
    if v > (U32_MAX if ver == 1 else U64): fail(f"signals[{i}].value", f"{v} is not a {32 if ver == 1 else 64}-bit signal value")
    if dev is not None and dev not in by_name: fail(f"signals[{i}].device", f"unknown device `{dev}`")
    tl = s.get("timeline", False)
    if tl and dev is None: fail(f"signals[{i}].timeline", "a timeline signal needs its `device`")
    signals[a] = {"value": v & U32_MAX, "name": s.get("name"), "device": dev, "timeline": tl, "mailbox": s.get("mailbox", False)}
  return signals

def _buffers(bs: list, by_name: dict, fail: _Fail) -> list:
  buffers = []
  for i, b in enumerate(bs):
    dev = b.get("device")
    if dev is not None and dev not in by_name: fail(f"buffers[{i}].device", f"unknown device `{dev}`")
    if b["size"] < 1: fail(f"buffers[{i}].size", "must be at least 1")
    buffers.append({"addr": b["addr"], "size": b["size"], "name": b.get("name"), "device": dev})
  return buffers

def _kernels(ks: list, ver: int) -> dict:
  kernels = {}
  for k in ks:
    params, sig = k.get("params"), None
    if params is not None and ver >= 2 and all(type(p) is dict for p in params):  # a capture: tinygrad's signature (as before: [] too)
      sig, params = params, None
    kernels[k["prog_addr"]] = {"name": k.get("name"), "params": params, "signature": sig, "code": k.get("code"),
                               "tinygrad_name": k.get("tinygrad_name")}
  return kernels

def _host(hs: list, ver: int, queues: list, steps: list, fail: _Fail) -> list:
  """The host's steps; a `write` with its bytes is also a memory reading (`steps`) from the next step on."""
  host = []
  for i, h in enumerate(hs):
    op, at = h["op"], f"host[{i}]"
    extra = {"stack": h["stack"]} if "stack" in h else {}
    if op == "submit": host.append(_submit(h, at, queues, fail) | extra)
    elif op in ("signal", "wait"):
      v = h["value"]
      if v > (U32_MAX if ver == 1 and op == "signal" else U64):   # the host's waits compare 64 bits in every version
        fail(f"{at}.value", f"{v} is not a {32 if ver == 1 and op == 'signal' else 64}-bit {'signal value' if op == 'signal' else 'host wait value'}")
      host.append({"op": op, "addr": h["addr"], "value": v, **({"init": True} if h.get("init") is True else {}), **extra})
    else:   # write (version 2): the host's store of bytes into host memory (a staging refill)
      a, b = h["addr"], h["hex"]
      if (n := h.get("size")) is not None:   # `size`: the bytes were not recorded (sanitize), only the range
        if b and len(b) != n: fail(f"{at}.size", f"{n}, but `hex` holds {len(b)} bytes")
        if n > U32_MAX: fail(f"{at}.size", f"{n} bytes: a host write is at most {U32_MAX} bytes")
      host.append({"op": "write", "addr": a, "data": b, "size": len(b) if n is None else n, **extra,
                   **({"staged": True} if h.get("staged") is True else {})})
      if b: steps.append((a, b, len(host)))   # what the memory holds from the next step on
  return host

def _submit(h: dict, at: str, queues: list, fail: _Fail) -> dict:
  qn = h["queue"]
  q = next((q for q in queues if q.name == qn), None)
  if q is None: fail(f"{at}.queue", f"unknown queue `{qn}`")
  s0, ln = h["start"], h["length"]
  if s0 + ln > len(q.dwords): fail(f"{at}.length", f"dwords {s0}..{s0 + ln} are past the {len(q.dwords)} dwords of `{qn}`")
  return {"op": "submit", "queue": qn, "start": s0, "length": ln, "signals": h.get("signals", {})}

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
