"""The shape, types and ranges of an image's metadata (the JSON part of an .hcqimg, docs/amd.md), checked before
anything uses it: an image is untrusted input. `validate(meta)` raises ValueError naming the first bad field."""
from __future__ import annotations
from ..ir import ARCHS, DTYPES

__all__ = ["validate"]

ADDR = 1 << 48        # GPU virtual addresses (and sizes) are below 2**48
KINDS = ("signals", "buffer", "code", "kernargs", "scratch", "cmdbuf")
ENCODINGS = ("u32", "hi")   # Patch.encoding: the value's low dword, or the high dword of a 64-bit one

class _Bad(ValueError): pass

def _fail(where: str, what: str, v) -> None:
  r = repr(v)
  raise _Bad(f"corrupt image metadata: {where} is {r[:40] + '...' if len(r) > 40 else r}, not {what}")

def _int(v, where: str, lo: int = 0, hi: int = ADDR - 1) -> int:
  if type(v) is not int or not lo <= v <= hi: _fail(where, f"an integer in {lo}..{hi}", v)
  return v

def _str(v, where: str, among=None) -> str:
  if type(v) is not str: _fail(where, "a string", v)
  if among is not None and v not in among:
    _fail(where, f"one of {', '.join(sorted(among)[:8])}{', ...' if len(among) > 8 else ''}", v)
  return v

def _opt(check, v, where: str, *a):
  return None if v is None else check(v, where, *a)

def _list(v, where: str, n=None) -> list:
  if type(v) is not list or (n is not None and len(v) != n): _fail(where, "a list" + (f" of {n}" if n is not None else ""), v)
  return v

def _obj(v, where: str, keys: tuple) -> dict:
  if type(v) is not dict: _fail(where, "an object", v)
  for k in keys:
    if k not in v: raise _Bad(f"corrupt image metadata: {where} has no `{k}`")
  return v

def _blob(v, where: str, blob_len: int) -> int:
  off, ln = _list(v, where, 2)
  _int(off, f"{where}[0]", 0, blob_len); _int(ln, f"{where}[1]", 0, blob_len - off)
  return ln

def validate(m, blob_len: int) -> None:
  """Check `m` (parsed JSON) against the layout `Image.to_bytes` writes; `blob_len`: bytes after the metadata."""
  _obj(m, "the metadata", ("target", "file", "devices", "vars", "regions", "signals", "buffers", "kernels", "queues",
                            "data", "host"))
  _str(m["target"], "target", ARCHS); _str(m["file"], "file")
  devs = set()
  for n, d in enumerate(_list(m["devices"], "devices")):
    w = f"devices[{n}]"
    _obj(d, w, ("name", "index", "arch"))
    devs.add(_str(d["name"], f"{w}.name")); _int(d["index"], f"{w}.index", 0, 1 << 16); _str(d["arch"], f"{w}.arch", ARCHS)
  vars_ = {_str(v, f"vars[{n}]") for n, v in enumerate(_list(m["vars"], "vars"))}
  if type(m["signals"]) is not dict: _fail("signals", "an object", m["signals"])
  for k, a in m["signals"].items(): _int(a, f"signals.{k}")
  if type(m["buffers"]) is not dict: _fail("buffers", "an object", m["buffers"])
  for k, v in m["buffers"].items():
    a, size = _list(v, f"buffers.{k}", 2); _int(a, f"buffers.{k}[0]"); _int(size, f"buffers.{k}[1]")
  bufs = set(m["buffers"])
  for n, r in enumerate(_list(m["regions"], "regions")):
    w = f"regions[{n}]"
    _obj(r, w, ("name", "kind", "device", "addr", "size", "meta"))
    if set(r) - {"name", "kind", "device", "addr", "size", "meta"}: _fail(w, "a region", r)
    _str(r["name"], f"{w}.name"); _str(r["kind"], f"{w}.kind", KINDS); _opt(_str, r["device"], f"{w}.device", devs)
    _int(r["addr"], f"{w}.addr"); _int(r["size"], f"{w}.size")
    _obj(r["meta"], f"{w}.meta", ())
    for i, arg in enumerate(_list(r["meta"].get("args", []), f"{w}.meta.args")):
      b, lo, hi, _ = _list(arg, f"{w}.meta.args[{i}]", 4)
      _str(b, f"{w}.meta.args[{i}][0]", bufs); _opt(_int, lo, f"{w}.meta.args[{i}][1]"); _opt(_int, hi, f"{w}.meta.args[{i}][2]")
  for n, k in enumerate(_list(m["kernels"], "kernels")):
    w = f"kernels[{n}]"
    _obj(k, w, ("name", "device", "code_addr", "prog_addr", "kd_addr", "synthetic", "kernarg_size", "params"))
    _str(k["name"], f"{w}.name"); _str(k["device"], f"{w}.device", devs)
    for f in ("code_addr", "prog_addr", "kd_addr"): _int(k[f], f"{w}.{f}")
    if type(k["synthetic"]) is not bool: _fail(f"{w}.synthetic", "true or false", k["synthetic"])
    _int(k["kernarg_size"], f"{w}.kernarg_size", 0, 1 << 32)
    for i, p in enumerate(_list(k["params"], f"{w}.params")):   # [mode or scalar dtype, name, kernarg offset]
      p = _list(p, f"{w}.params[{i}]", 3)
      _str(p[0], f"{w}.params[{i}][0]", ("in", "out", "inout", *DTYPES)); _str(p[1], f"{w}.params[{i}][1]")
      _int(p[2], f"{w}.params[{i}][2]", 0, 1 << 32)
  vv = m.get("var_values", {})
  if type(vv) is not dict: _fail("var_values", "an object", vv)
  for k, vals in vv.items():
    for i, x in enumerate(_list(vals, f"var_values.{k}")): _int(x, f"var_values.{k}[{i}]", -(1 << 64), 1 << 64)
  patch_vars = vars_ | set(vv)   # `B.addr` of a rebound buffer is patched like a var
  for n, r in enumerate(_list(m.get("rewrites", []), "rewrites")):
    k, a, ref = _list(r, f"rewrites[{n}]", 3)
    _int(k, f"rewrites[{n}][0]", 1, 1 << 32); _int(a, f"rewrites[{n}][1]"); _blob(ref, f"rewrites[{n}][2]", blob_len)
  qnames = set()
  for n, q in enumerate(_list(m["queues"], "queues")):
    w = f"queues[{n}]"
    _obj(q, w, ("name", "engine", "device", "arch", "addr", "dwords", "patches", "stmts"))
    qnames.add(_str(q["name"], f"{w}.name")); _str(q["engine"], f"{w}.engine", ("compute", "copy"))
    _str(q["device"], f"{w}.device", devs); _str(q["arch"], f"{w}.arch", ARCHS); _int(q["addr"], f"{w}.addr")
    nbytes = _blob(q["dwords"], f"{w}.dwords", blob_len)
    if nbytes % 4: _fail(f"{w}.dwords[1]", "a whole number of dwords", nbytes)
    ndw = nbytes // 4
    for i, p in enumerate(_list(q["patches"], f"{w}.patches")):
      off, var, add, enc = _list(p, f"{w}.patches[{i}]", 4)
      _int(off, f"{w}.patches[{i}][0]", 0, ndw - 1); _opt(_str, var, f"{w}.patches[{i}][1]", patch_vars)
      _int(add, f"{w}.patches[{i}][2]", -(1 << 64), 1 << 64); _str(enc, f"{w}.patches[{i}][3]", ENCODINGS)
    for i, p in enumerate(_list(q.get("mem_patches", []), f"{w}.mem_patches")):   # offset = a kernarg address
      off, var, add, enc = _list(p, f"{w}.mem_patches[{i}]", 4)
      _int(off, f"{w}.mem_patches[{i}][0]"); _opt(_str, var, f"{w}.mem_patches[{i}][1]", patch_vars)
      _int(add, f"{w}.mem_patches[{i}][2]", -(1 << 64), 1 << 64); _str(enc, f"{w}.mem_patches[{i}][3]", ENCODINGS)
    for i, s in enumerate(_list(q["stmts"], f"{w}.stmts")):
      s = _list(s, f"{w}.stmts[{i}]", 7)
      off = _int(s[0], f"{w}.stmts[{i}][0]", 0, ndw); _int(s[1], f"{w}.stmts[{i}][1]", 0, ndw - off)
      for j in range(2, 6): _int(s[j], f"{w}.stmts[{i}][{j}]", 0, 1 << 31)
      _str(s[6], f"{w}.stmts[{i}][6]")
  for n, d in enumerate(_list(m["data"], "data")):
    a, ref = _list(d, f"data[{n}]", 2); _int(a, f"data[{n}][0]"); _blob(ref, f"data[{n}][1]", blob_len)
  sigs = set(m["signals"])
  for n, h in enumerate(_list(m["host"], "host")):
    w = f"host[{n}]"
    _obj(h, w, ("op", "line"))
    op = _str(h["op"], f"{w}.op", ("submit", "wait", "signal")); _int(h["line"], f"{w}.line", 0, 1 << 31)
    if op == "submit":
      _obj(h, w, ("queues",))
      for i, x in enumerate(_list(h["queues"], f"{w}.queues")): _str(x, f"{w}.queues[{i}]", qnames)
    else:
      _obj(h, w, ("signal", "addr", "var", "add"))
      _str(h["signal"], f"{w}.signal", sigs); _int(h["addr"], f"{w}.addr"); _opt(_str, h["var"], f"{w}.var", vars_)
      _int(h["add"], f"{w}.add", -(1 << 64), 1 << 64)
  for n, e in enumerate(_list(m.get("expects", []), "expects")):
    w = f"expects[{n}]"
    _obj(e, w, ("buffer", "addr", "size", "dtype", "values", "approx", "line"))
    _str(e["buffer"], f"{w}.buffer", bufs); _int(e["addr"], f"{w}.addr"); _int(e["size"], f"{w}.size")
    _str(e["dtype"], f"{w}.dtype", DTYPES); _int(e["line"], f"{w}.line", 0, 1 << 31)
    if type(e["approx"]) is not bool: _fail(f"{w}.approx", "true or false", e["approx"])
    for i, v in enumerate(_list(e["values"], f"{w}.values")):
      if type(v) not in (int, float) and v not in ("nan", "inf", "-inf"): _fail(f"{w}.values[{i}]", "a number", v)
