"""Bounded fuzzing of every entry point that reads untrusted input: program text (`check`), images
(`Image.from_bytes` and what reads an image: disasm, --as-hcq, name_at, span_at), raw dwords (the disassembler) and
rings (the emulator). Each fuzzer returns (inputs tried, failures): a failure is an exception other than the entry
point's documented error, or an emulator fault that is an internal error. Seeded: the same inputs every run.

  python tests/fuzz.py [--n 2000]      prints the figures for docs/reliability.md
"""
from __future__ import annotations
import glob, json, os, random, struct, traceback
import numpy as np

ROOT = os.path.join(os.path.dirname(__file__), "..")
ARCHS = ("gfx942", "gfx1100", "gfx1201")
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
      j = rng.randrange(len(text) + 1); a, b = min(i, j), max(i, j); text = text[:i] + text[a:b][:200] + text[i:]
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

def _images():
  from hcqdsl import parse
  from hcqdsl.amd.compile import compile_program
  out = []
  for p in PROGRAMS:
    try: out.append(compile_program(parse(open(p, encoding="utf-8").read(), p)).to_bytes())
    except Exception: pass   # programs with errors on purpose
  return out

_VALUES = [None, True, 0, -1, 1, 3, 2**32, 2**48, 2**64, 1.5, "", "x", "gfx992", "nan", [], [0], [0, 0], [-1, 8], {}, {"a": 1}]

def _mutate_meta(rng: random.Random, m):
  """Replace, delete or retype one node of the JSON tree."""
  path, node = [], m
  while isinstance(node, (dict, list)) and node and (not path or rng.random() < 0.85):
    k = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
    path.append((node, k)); node = node[k]
  if not path: return rng.choice(_VALUES)
  parent, k = path[-1]
  r = rng.random()
  if r < 0.15 and isinstance(parent, dict): del parent[k]
  elif r < 0.3 and isinstance(parent, list): del parent[k]
  elif r < 0.5 and isinstance(node, int) and not isinstance(node, bool): parent[k] = node + rng.choice([-1, 1, 4, -4, 1 << 20, -(1 << 40)])
  else: parent[k] = rng.choice(_VALUES)
  return m

def _reads_image(img, rng: random.Random):
  from hcqdsl.amd.disasm import disasm_image, as_hcq
  disasm_image(img); as_hcq(img)
  for a in [r.addr for r in img.regions] + [rng.randrange(1 << 48) for _ in range(4)]: img.name_at(a); img.name_at(a + 8)
  for q in img.queues:
    for off in range(-1, len(q.dwords) + 2, max(1, len(q.dwords) // 8)): q.span_at(off)

def fuzz_images(n: int, seed: int = 0):
  from hcqdsl.amd.image import Image, MAGIC
  rng = random.Random(seed)
  imgs = _images()
  fails = []
  for _ in range(n):
    b = rng.choice(imgs)
    if rng.random() < 0.7:   # the metadata, structurally
      ln = struct.unpack_from("<I", b, 12)[0]
      m = _mutate_meta(rng, json.loads(b[16:16 + ln]))
      js = json.dumps(m).encode()
      head = MAGIC + struct.pack("<II", 1, len(js)) + js
      blob = b[16 + ln + (-(16 + ln) % 8):]
      b = head + b"\0" * (-len(head) % 8) + blob
    else:                    # bytes anywhere
      b = bytearray(b)
      for _ in range(rng.randint(1, 8)): b[rng.randrange(len(b))] = rng.randrange(256)
      b = bytes(b[:len(b) - rng.choice([0, 0, 0, 1, 7, 100])])
    try: img = Image.from_bytes(b)
    except ValueError: continue
    except Exception as e: fails.append(_fail("from_bytes", b[:200], e)); continue
    try: _reads_image(img, rng)
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
    engine, arch = rng.choice(["compute", "copy"]), rng.choice(ARCHS)
    dw = _dwords(rng, engine)
    try: disasm_dwords(dw, engine, arch)
    except Exception as e: fails.append(_fail(f"disasm {engine} {arch}", dw, e))
  return n, fails

def fuzz_rings(n: int, seed: int = 0):
  from hcqdsl.runtime.emulator import Emulator
  rng = random.Random(seed)
  fails = []
  for _ in range(n):
    engine, arch = rng.choice(["compute", "copy"]), rng.choice(ARCHS)
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

FUZZERS = {"text": fuzz_text, "images": fuzz_images, "raw dwords": fuzz_dwords, "rings": fuzz_rings}

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
