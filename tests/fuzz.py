"""Bounded fuzzing of every entry point that reads untrusted input: program text (`check`), images
(`Image.from_bytes` and what reads an image: disasm, --as-hcq, name_at, span_at), raw dwords (the disassembler) and
rings (the emulator). Each fuzzer returns (inputs tried, failures): a failure is an exception other than the entry
point's documented error, or an emulator fault that is an internal error. Seeded: the same inputs every run.

  python tests/fuzz.py [--n 2000]      prints the figures for docs/reliability.md
"""
from __future__ import annotations
import glob, json, os, random, re, struct, traceback
import numpy as np

ROOT = os.path.join(os.path.dirname(__file__), "..")
from hcqdsl.ir import AMD_ARCHS
PROGRAMS = sorted(glob.glob(os.path.join(ROOT, "programs", "*.hcq")))
JUNK = ["\r", "\r\n", "\n", "\t", "\f", "\v", "\x00", "\x85", "\u2028", "\x1b", "{", "}", "[", "]", ":", ";", "=", "<-",
        ">=", "#", "\"", "0x", "99999999999999999999", "-1", "wait", "signal", "exec", "queue", "host", "submit",
        "buffer", "size", "on", "kick", "epoch", "é", "\ud7ff", " "]

def _fail(kind, inp, e) -> tuple: return (kind, repr(inp)[:300], "".join(traceback.format_exception_only(type(e), e)).strip())

def _mutate_text(rng: random.Random, text: str) -> str:
  for _ in range(rng.randint(1, 4)):
    i = rng.randrange(len(text) + 1)
    op = rng.randrange(4)
    if op == 0: text = text[:i] + rng.choice(JUNK) + text[i:]
    elif op == 1: text = text[:i] + text[i + rng.randint(1, 20):]
    elif op == 2:
      j = rng.randrange(len(text) + 1)
      a, b = min(i, j), max(i, j)
      text = text[:i] + text[a:b][:200] + text[i:]
    else: text = text.replace("\n", rng.choice(["\r", "\r\n", "\n"]))
  return text

def fuzz_text(n: int, seed: int = 0):
  from hcqdsl.check import check_text
  rng = random.Random(seed)
  texts = [open(p, encoding="utf-8").read() for p in PROGRAMS]
  fails = []
  for _ in range(n):
    t = _mutate_text(rng, rng.choice(texts))
    try:
      for d in check_text(t, "fuzz.hcq", launches=rng.randint(1, 2), max_states=20_000):
        assert d.span is None or d.span.line >= 0, d
    except Exception as e: fails.append(_fail("text", t, e))
  return n, fails

def _images() -> list:
  """Every compilable `programs/*.hcq` (those with errors on purpose that still lower are kept: an image is an image)."""
  from hcqdsl import parse
  from hcqdsl.diagnostics import HcqError
  from hcqdsl.vendors import compile_program
  out = []
  for p in PROGRAMS:
    try: out.append(compile_program(parse(open(p, encoding="utf-8").read(), p)).to_bytes())
    except HcqError: pass   # a program that does not lower (unknown names, ...)
  return out

def split_image(b: bytes) -> tuple:
  """(metadata JSON, data part) of an image file: the framing of docs/amd.md, read independently of hcqdsl."""
  n = struct.unpack_from("<I", b, 12)[0]
  return json.loads(b[16:16 + n]), b[16 + n + (-(16 + n) % 8):]

def join_image(meta, data: bytes) -> bytes:
  from hcqdsl.target.image import MAGIC, VERSION
  js = json.dumps(meta).encode()
  head = MAGIC + struct.pack("<II", VERSION, len(js)) + js
  return head + b"\0" * (-len(head) % 8) + data

def edit_metadata(b: bytes, edit) -> bytes:
  """The image `b` with `edit(meta)` applied to its metadata JSON (a corrupt image no writer would make)."""
  meta, data = split_image(b)
  edit(meta)
  return join_image(meta, data)

_VALUES = [None, True, 0, -1, 1, 3, 2**32, 2**48, 2**64, 1.5, "", "x", "gfx992", "nan", [], [0], [0, 0], [-1, 8], {}, {"a": 1}]

def _at(at: str, key) -> str: return f"{at}[{key}]" if type(key) is int else f"{at}.{key}" if at else key

def _mutate_meta(rng: random.Random, m):
  """Replace, delete or retype one node of the JSON tree. Returns (tree, [(path, parent path, key, old node, new
  node)]), paths written as the reader names fields (`queues[0].patches[1][2]`); new is _GONE for a deletion (of a
  list item: the change is the list's, its later items move)."""
  at, parent, grand, node, owner = "", None, None, m, None
  while isinstance(node, (dict, list)) and node and (owner is None or rng.random() < 0.85):
    k = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
    owner, key, grand, parent, at, node = node, k, parent, at, _at(at, k), node[k]
  if owner is None: return (new := rng.choice(_VALUES)), [("", None, None, m, new)]
  r = rng.random()
  if r < 0.15 and isinstance(owner, dict):
    del owner[key]
    new = _GONE
  elif r < 0.3 and isinstance(owner, list):
    old = list(owner)
    del owner[key]
    return m, [(parent, grand, None, old, owner)]
  elif r < 0.5 and type(node) is int: new = owner[key] = node + rng.choice([-1, 1, 4, -4, 1 << 20, -(1 << 40)])
  else: new = owner[key] = rng.choice(_VALUES)
  return m, [(at, parent, key, node, new)]

_GONE = object()

def _changes(a, b, at="", parent=None, key=None) -> list:
  """Where JSON trees a and b differ, as _mutate_meta describes a change (a list of another length: the list)."""
  if type(a) is not type(b) or not isinstance(a, (dict, list)):
    return [] if type(a) is type(b) and a == b else [(at, parent, key, a, b)]
  if isinstance(a, list):
    if len(a) != len(b): return [(at, parent, key, a, b)]
    return [c for i, (x, y) in enumerate(zip(a, b)) for c in _changes(x, y, _at(at, i), at)]
  return [c for k in a.keys() | b.keys()
          for c in (_changes(a[k], b[k], _at(at, k), at, k) if k in a and k in b else [(_at(at, k), at, k, a.get(k, _GONE), b.get(k, _GONE))])]

def _strings(x) -> set:
  if isinstance(x, str): return {x}
  if isinstance(x, dict): return set(x) | {s for v in x.values() for s in _strings(v)}
  if isinstance(x, list): return {s for v in x for s in _strings(v)}
  return set()

_ERROR = re.compile(r"corrupt image metadata: (.+?) (?:is (.+?), (?:not|past)|has (?:no|a key) `)")

def expected_meta_error(msg: str, changes: list) -> bool:
  """Is `msg` (from Image.from_bytes) the error these changes call for? It names a changed node, a node inside one,
  the object or row that holds one (a key deleted, a row shortened); or it is a reference to a name the changes
  defined or renamed; or a bound inside the queue whose dwords or source map changed."""
  m = _ERROR.match(msg)
  if m is None: return False
  where, value = ("" if m[1] == "the metadata" else m[1]), m[2]
  for at, parent, key, old, new in changes:
    if where == at or where.startswith((at + ".", at + "[")) or at == "" or where == parent: return True
    if value is not None and value[:1] == "'" and value.strip("'") in _strings([key, old, new]): return True
    q = re.match(r"queues\[\d+\]", at)
    if q and where.startswith(q[0] + ".") and "not an integer in" in msg: return True
  return False

def accepted_change_ok(changes: list) -> bool:
  """A mutation the reader accepted must keep the node's JSON type (or turn null into a value or back, or a number
  into "nan")."""
  for at, parent, key, old, new in changes:
    if new is _GONE or new is None or old is None or type(old) is type(new): continue
    if type(old) in (int, float) and (type(new) in (int, float) or new in ("nan", "inf", "-inf")): continue
    return False
  return True

def _reads_image(img, rng: random.Random):
  from hcqdsl.vendors import disasm_image
  from hcqdsl.lift.image import as_hcq, lift_image
  from hcqdsl.lang.format import format_program
  disasm_image(img)
  as_hcq(img)
  format_program(lift_image(img))
  for a in [r.addr for r in img.regions] + [rng.randrange(1 << 48) for _ in range(4)]:
    img.name_at(a)
    img.name_at(a + 8)
  for q in img.queues:
    for off in range(-1, len(q.dwords) + 2, max(1, len(q.dwords) // 8)): q.span_at(off)

def expected_byte_error(old: bytes, new: bytes):
  """The error Image.from_bytes must give for `new` (bytes of `old` changed, its end cut): None when it must read,
  a string when the framing (magic, version, length, JSON) decides it, else a predicate on the message."""
  from hcqdsl.target.image import MAGIC, VERSION
  if len(new) < 16 or new[:8] != MAGIC: return "not an hcqdsl image (bad magic)"
  if (ver := struct.unpack_from("<I", new, 8)[0]) != VERSION: return f"unsupported image version {ver} (this hcqdsl reads {VERSION})"
  n = struct.unpack_from("<I", new, 12)[0]
  if 16 + n > len(new): return "truncated image (metadata)"
  try: meta = json.loads(new[16:16 + n])
  except ValueError as e: return f"corrupt image metadata: {e}"
  old_meta, old_data = split_image(old)
  data = new[16 + n + (-(16 + n) % 8):]
  changes = _changes(old_meta, meta)
  def past_end(msg):
    return re.fullmatch(rf"corrupt image metadata: \S+ is \[\d+, \d+\], past the end of the {len(data)}-byte data part", msg) is not None
  if changes: return lambda msg: expected_meta_error(msg, changes) or (len(data) < len(old_data) and past_end(msg))
  if len(data) < len(old_data.rstrip(b"\0")): return past_end   # cut into the data pieces: a reference past the end
  return None if len(data) >= len(old_data) else past_end        # only the padding (or zeros) cut: it may read

def fuzz_images(n: int, seed: int = 0):
  """Mutated compiled images: each must read (and then write back the same image, and every reader of an image
  must take it) or fail with the error the mutation calls for (expected_meta_error, expected_byte_error)."""
  from hcqdsl.target.image import Image, ImageError
  rng = random.Random(seed)
  imgs = _images()
  fails = []
  for b in imgs:   # what compile writes reads back, and writes the same bytes again
    if Image.from_bytes(b).to_bytes() != b: fails.append(("round trip", b[:200], "read and written again, the bytes differ"))
  for _ in range(n):
    b = old = rng.choice(imgs)
    if rng.random() < 0.7:   # the metadata, structurally
      meta, data = split_image(b)
      meta, changes = _mutate_meta(rng, meta)
      b = join_image(meta, data)
      def want(msg, changes=changes): return expected_meta_error(msg, changes)
    else:                    # bytes anywhere
      b = bytearray(b)
      for _ in range(rng.randint(1, 8)): b[rng.randrange(len(b))] = rng.randrange(256)
      b = bytes(b[:len(b) - rng.choice([0, 0, 0, 1, 7, 100])])
      changes, want = None, expected_byte_error(old, b)
    try: img = Image.from_bytes(b)
    except ImageError as e:
      if want is None or (want != str(e) if isinstance(want, str) else not want(str(e))): fails.append(("wrong error", b[:200], str(e)))
      continue
    except Exception as e:
      fails.append(_fail("from_bytes", b[:200], e))
      continue
    if isinstance(want, str) or (changes is not None and not accepted_change_ok(changes)):
      fails.append(("accepted", b[:200], f"read, but expected {want if isinstance(want, str) else changes}"))
      continue
    try:
      if Image.from_bytes(img.to_bytes()) != img: fails.append(("rewrite", b[:200], "written and read again, the image differs"))
      _reads_image(img, rng)
    except Exception as e: fails.append(_fail("image reader", b[:200], e))
  return n, fails

def _dwords(rng: random.Random, engine: str) -> list:
  n = rng.randint(1, 40)
  if rng.random() < 0.5: return [rng.randrange(1 << 32) for _ in range(n)]
  out = []
  while len(out) < n:   # packet-shaped: a plausible header, then a few dwords
    if engine == "compute": out.append((3 << 30) | (rng.randrange(16) << 16) | (rng.randrange(0x100) << 8))
    else: out.append(rng.randrange(16) | (rng.randrange(8) << 8) | (rng.randrange(1 << 16) << 16))
    out += [rng.choice([0, 1, 0xFFFFFFFF, rng.randrange(1 << 32)]) for _ in range(rng.randint(0, 6))]
  return out[:n]

def fuzz_dwords(n: int, seed: int = 0):
  from hcqdsl.amd.disasm import disasm_dwords
  rng = random.Random(seed)
  fails = []
  for _ in range(n):
    engine, arch = rng.choice(["compute", "copy"]), rng.choice(AMD_ARCHS)
    dw = _dwords(rng, engine)
    try: disasm_dwords(dw, engine, arch)
    except Exception as e: fails.append(_fail(f"disasm {engine} {arch}", dw, e))
  return n, fails

def fuzz_rings(n: int, seed: int = 0):
  from hcqdsl.runtime.emulator import Emulator
  rng = random.Random(seed)
  fails = []
  for _ in range(n):
    engine, arch = rng.choice(["compute", "copy"]), rng.choice(AMD_ARCHS)
    dw = _dwords(rng, engine)
    try:
      emu = Emulator(max_steps=10_000)
      ring = emu.create_queue("q", engine, "gpu0", arch, 4096, addr=0x1000_0000_0000)
      emu.allocate(0x2000_0000_0000, 4096, "scratch", "gpu0")
      emu.write(ring.addr, np.array(dw, dtype="<u4").tobytes())
      emu.doorbell(ring, 4 * len(dw) // ring.unit)
      emu.run(iter(()))
      if emu.fault is not None and ("internal" in str(emu.fault) or "ring offset" not in str(emu.fault)):
        fails.append(("ring", repr(dw), str(emu.fault)))
    except Exception as e: fails.append(_fail(f"ring {engine} {arch}", dw, e))
  return n, fails

# ---- manifests (`hcqdsl lift`): a dump's JSON, structurally mutated

def _manifests() -> list:
  """A version-1 manifest per compilable `programs/*.hcq`: its queues' dwords (a list, or hex text), signals, buffers,
  kernels and devices as a dump would give them; every other one with read pointers (a triage dump)."""
  from hcqdsl import parse
  from hcqdsl.diagnostics import HcqError
  from hcqdsl.vendors import compile_program
  out = []
  for n, p in enumerate(PROGRAMS):
    try: img = compile_program(parse(open(p, encoding="utf-8").read(), p))
    except HcqError: continue
    qs = [{"name": q.name, "device": q.device, "target": q.arch, "engine": q.engine,
           "dwords": q.dwords if i % 2 else " ".join(f"{x:08x}" for x in q.dwords), **({"read_ptr": 0} if n % 2 else {})}
          for i, q in enumerate(img.queues)]
    if not qs: continue
    out.append({"format": "hcqdsl-manifest", "version": 1, "devices": [dict(d) for d in img.devices], "queues": qs,
                "signals": [{"addr": hex(a), "value": 0, **({"name": s} if "." not in s else
                                                                        {"device": s.split(".")[0], "timeline": True})}
                            for s, a in img.signals.items() if not s.endswith(".epoch")],
                "buffers": [{"addr": a, "size": sz, "name": b} for b, (a, sz) in img.buffers.items()],
                "kernels": [{"prog_addr": k["prog_addr"], "name": k["name"], "params": [m for m, *_ in k["params"] if m in ("in", "out", "inout")]}
                            for k in img.kernels]})
  return out

_MANIFEST_VALUES = _VALUES + ["queue", "host", "device", "launch", "compute", "0x10", "/dev/zero", [5], [{}], {"x": []}]

def fuzz_manifests(n: int, seed: int = 0):
  """Mutated manifests (a node replaced, deleted or shifted, names made keywords): each must load and lift to a program
  with no `syntax` or `name` error, or fail with ManifestError (a ValueError naming the field)."""
  from hcqdsl.lift.manifest import load_manifest, lift_manifest
  from hcqdsl.lang.format import format_program
  from hcqdsl.check import parse_with_diagnostics
  rng = random.Random(seed)
  bases = _manifests()
  fails = []
  for m in bases:   # each lifts as it is
    try: lift_manifest(load_manifest(json.dumps(m), "m.json"))
    except Exception as e: fails.append(_fail("unmutated manifest", json.dumps(m)[:300], e))
  global _VALUES
  for _ in range(n):
    m = json.loads(json.dumps(rng.choice(bases)))
    values = _VALUES
    try:
      for _ in range(rng.randint(1, 3)):   # (fresh values each time: a later mutation may go inside one)
        _VALUES = json.loads(json.dumps(_MANIFEST_VALUES))
        m, _ch = _mutate_meta(rng, m)
    finally: _VALUES = values
    try: text = format_program(lift_manifest(load_manifest(json.dumps(m), "m.json")))
    except ValueError as e:
      if not str(e).startswith("m.json"): fails.append(("wrong error", json.dumps(m)[:300], str(e)))
      continue
    except Exception as e:
      fails.append(_fail("manifest", json.dumps(m)[:300], e))
      continue
    try: _, diags = parse_with_diagnostics(text, "lifted.hcq")
    except Exception as e:
      fails.append(_fail("lifted text", text[:300], e))
      continue
    bad = [str(d) for d in diags if d.code in ("syntax", "name") and d.severity == "error"]
    if bad: fails.append(("lifted program has errors", json.dumps(m)[:300], bad[0]))
  return n, fails

# ---- witnesses (`hcqdsl run --replay`): every field of real witness files mutated

WITNESS_PROGRAMS = ["run_race.hcq", "run_deadlock.hcq", "race_missing_epoch.hcq"]
_NULLABLE = {"at", "line", "mode"}

def witness_files() -> list:
  """(program path, witness dict) for WITNESS_PROGRAMS, as `hcqdsl check FILE --witness` writes them."""
  from hcqdsl.check import parse, check
  from hcqdsl.check.witness import witnesses
  from hcqdsl.header import header_launches
  out = []
  for name in WITNESS_PROGRAMS:
    path = os.path.join(ROOT, "programs", name)
    text = open(path, encoding="utf-8").read()
    n = header_launches(text) or 2
    prog = parse(text, path)
    w = witnesses(prog, check(prog, n), n)
    assert w["witnesses"], name
    out.append((path, w))
  return out

def witness_mutants(w: dict):
  """(JSON path, mutated witness) for every field of `w`: deleted (a missing key), and replaced by values of the wrong
  type, a negative and huge integers (a nullable field's null is no mutant; nor is another string where any string
  goes)."""
  def paths(x, at=""):
    yield at, x
    if isinstance(x, dict):
      for k, v in x.items(): yield from paths(v, f"{at}.{k}" if at else k)
    elif isinstance(x, list):
      for i, v in enumerate(x): yield from paths(v, f"{at}[{i}]")
  def put(root, at, new):
    root = json.loads(json.dumps(root))
    keys = re.findall(r"[^.\[\]]+|\[\d+\]", at)
    o = root
    for k in keys[:-1]: o = o[int(k[1:-1])] if k[0] == "[" else o[k]
    k = keys[-1]
    k = int(k[1:-1]) if k[0] == "[" else k
    if new is _GONE: del o[k]
    else: o[k] = new
    return root
  for at, v in paths(w):
    if not at: continue
    key = re.findall(r"[^.\[\]]+$", at)
    key = key[0] if key else ""
    if not at.endswith("]"): yield at, put(w, at, _GONE)
    news = [None, True, "x", 1.5, [], {}] if type(v) is not str else [None, 1, [], {}] + ([] if key in ("file", "message") else ["x"])
    if type(v) is int: news = [None, "x", 1.5, [], -1, 2**63, 2**64]
    for new in news:
      if new is None and key in _NULLABLE: continue
      if type(new) is type(v) and (new == v or type(v) in (list, dict)): continue   # ([] and {} hold for a list, an object)
      yield at, put(w, at, new)

def fuzz_witnesses(n: int = 0, seed: int = 0):
  """Every mutant of the witness files (n, seed unused: the enumeration is the whole set): each must be refused by
  read_witness with an error naming the mutated field or an object holding it."""
  from hcqdsl.check import parse
  from hcqdsl.check.witness import read_witness
  fails, count = [], 0
  for path, w in witness_files():
    prog = parse(open(path, encoding="utf-8").read(), path)
    read_witness(w, prog, "w.json")   # the real one passes
    for at, m in witness_mutants(w):
      count += 1
      try: read_witness(m, prog, "w.json")
      except ValueError as e:
        where = str(e).split(": ")[1] if str(e).startswith("w.json: ") else None
        def near(a, b): return a == b or a.startswith((b + ".", b + "["))   # the field, an object holding it, or a key inside it
        if where is None or not (near(at, where) or near(where, at)): fails.append(("wrong error", at, str(e)))
        continue
      except Exception as e:
        fails.append(_fail("witness " + at, json.dumps(m)[:300], e))
        continue
      fails.append(("accepted", at, json.dumps(m)[:300]))
  return count, fails

FUZZERS = {"text": fuzz_text, "images": fuzz_images, "raw dwords": fuzz_dwords, "rings": fuzz_rings,
           "manifests": fuzz_manifests, "witnesses": fuzz_witnesses}

if __name__ == "__main__":
  import argparse, sys, time
  sys.path.insert(0, ROOT)
  ap = argparse.ArgumentParser()
  ap.add_argument("--n", type=int, default=2000)
  ap.add_argument("--seed", type=int, default=1)
  a = ap.parse_args()
  for name, f in FUZZERS.items():
    t0 = time.perf_counter()
    n, fails = f(a.n, a.seed)
    print(f"{name}: {n} inputs, {len(fails)} failures ({time.perf_counter() - t0:.1f} s)")
    for x in fails[:5]: print("  ", x)

# ---- NV images and manifests (issue 37): the same promise for the files NV's runtime and compiler give

def nv_images() -> list:
  """Every compilable `programs/*.hcq` compiled for NV (every device sm_89, or sm_89 and sm_120 alternating)."""
  from hcqdsl import parse
  from hcqdsl.diagnostics import HcqError
  from hcqdsl.vendors import compile_program
  from nv_programs import to_nv
  out = []
  for n, p in enumerate(PROGRAMS):
    try: out.append(compile_program(to_nv(parse(open(p, encoding="utf-8").read(), p), ("sm_89",) if n % 2 else ("sm_89", "sm_120"))))
    except (HcqError, ValueError): pass   # a program NV refuses (docs/nv.md) or that does not lower
  return out

def nv_manifest(img) -> dict:
  """A version-2 manifest as a capture of tinygrad's NV runtime gives it, from an NV image: each queue submitted once,
  the image's memory (kernel arguments and QMDs) read before the first step, and tinygrad's signature per kernel."""
  def sig(m: str, n: str) -> dict:
    ptr = m in ("in", "out", "inout")
    return {"name": None if ptr else n, "dtype": "float" if ptr else "int", "bytes": 64 if ptr else 4, **({"mode": m} if ptr else {})}
  return {"format": "hcqdsl-manifest", "version": 2, "devices": [dict(d) for d in img.devices],
          "queues": [{"name": q.name, "device": q.device, "target": q.arch, "engine": q.engine, "dwords": q.dwords} for q in img.queues],
          "signals": [{"addr": hex(a), "value": 0} for s, a in img.signals.items() if not s.endswith(".epoch")],
          "buffers": [{"addr": hex(a), "size": sz, "name": b} for b, (a, sz) in img.buffers.items()],
          "memory": [{"addr": hex(a), "hex": b.hex(), "step": 0} for a, b in img.data],
          "kernels": [{"prog_addr": hex(k["prog_addr"]), "name": k["name"], "tinygrad_name": k["name"],
                       "params": [sig(m, n) for m, n, _ in k["params"]]} for k in img.kernels],
          "host": [{"op": "submit", "queue": q.name, "start": 0, "length": len(q.dwords), "signals": {}} for q in img.queues if q.dwords]}
