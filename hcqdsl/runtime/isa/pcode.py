"""AMD's instruction pseudocode (the `PCODE` tables shipped in tinygrad.runtime.autogen.amd.*.str_pcode) translated
once per opcode into a Python function over numpy lane vectors.

The translated function takes the operands as raw register bits (uint64 arrays, one element per lane; scalar
instructions are one-lane vectors) and returns the registers it assigned. Typed reads (`S0.f32`, `S1.i32`, `S2[4 : 0]`,
`VCC.u64[laneId]`) become numpy views and masks, typed writes turn values back into bits, `if/elsif/else` becomes
predication (every assignment under a condition is `np.where(cond, new, old)`, so all lanes run every branch), and a
`lambda` is inlined at its call sites. Integer arithmetic runs in 64 bits (the pseudocode's 32-bit results are the low
bits of those) and in Python integers for the few 65-bit expressions; f32 in float32, f64 in float64.

`translate(pcode)` returns a `Translated` or raises `Unsupported` naming the construct it cannot translate (the
executor reports that as a device fault when such an instruction runs); see docs/run.md for the covered opcodes.
"""
from __future__ import annotations
import re
from typing import Optional
import numpy as np

__all__ = ["translate", "Translated", "Unsupported", "RUNTIME", "statements", "split_statements", "ACCESSORS", "REGS"]

class Unsupported(Exception): pass

M = {1: 1, 2: 3, 3: 7, 4: 0xF, 5: 0x1F, 6: 0x3F, 8: 0xFF, 16: 0xFFFF, 24: 0xFFFFFF, 32: 0xFFFFFFFF, 64: 0xFFFFFFFFFFFFFFFF}
U64 = np.uint64

# ---- runtime helpers the generated code calls (bits in, bits out; lanes are numpy arrays)

_MASK = {b: U64(m) for b, m in M.items()}
_ND = np.ndarray

def _u(x, bits: int):   # unsigned view of the low `bits` bits, as uint64
  if type(x) is _ND and x.dtype == U64: return x & _MASK[bits] if bits < 64 else x
  x = np.asarray(x)
  if x.dtype == object: return np.array([int(v) & M[bits] for v in x.ravel()], U64).reshape(x.shape)
  if x.dtype.kind == "f": x = x.astype(np.int64)
  if x.dtype == np.bool_: x = x.astype(U64)
  return x.astype(U64) & U64(M[bits]) if bits < 64 else x.astype(U64)

def _i(x, bits: int):   # signed view of the low `bits` bits, as int64
  x = np.asarray(x)
  if x.dtype == object: x = _u(x, 64)
  if x.dtype.kind == "f": return x.astype(np.int64)
  if bits == 64: return x.astype(U64).view(np.int64) if x.dtype == U64 else x.astype(np.int64)
  v = (x.astype(U64) if x.dtype != U64 else x) & U64(M[bits])
  s = U64(1 << (bits - 1))
  return (v ^ s).view(np.int64) - np.int64(1 << (bits - 1))

def _f32(x):            # float32 view of the low 32 bits of raw register bits
  if type(x) is _ND and x.dtype == U64: return (x & _MASK[32]).astype(np.uint32).view(np.float32)
  return (np.asarray(x).astype(U64) & U64(M[32])).astype(np.uint32).view(np.float32)

def _f64(x): return np.asarray(x).astype(U64).view(np.float64)

def _f16(x): return (np.asarray(x).astype(U64) & U64(M[16])).astype(np.uint16).view(np.float16)

def _bits_f32(x): return np.asarray(x, np.float32).view(np.uint32).astype(U64)
def _bits_f64(x): return np.asarray(x, np.float64).view(U64)
def _bits_f16(x): return np.asarray(x, np.float16).view(np.uint16).astype(U64)

def _cast(x, kind: str):
  """`32'F(x)`-style conversions of a value (not of bits)."""
  x = np.asarray(x)
  if kind == "f32": return x.astype(np.float32)
  if kind == "f64":
    if x.dtype == np.float32:  # keep a signaling NaN signaling (the FPU's conversion would quiet it)
      b = x.view(np.uint32).astype(U64)
      nan = ((b & U64(0x7F800000)) == U64(0x7F800000)) & ((b & U64(0x7FFFFF)) != 0)
      with np.errstate(invalid="ignore"): y = x.astype(np.float64)
      if nan.any(): y = np.where(nan, (((b >> U64(31)) << U64(63)) | U64(0x7FF << 52) | ((b & U64(0x7FFFFF)) << U64(29))).view(np.float64), y)
      return y
    return x.astype(np.float64)
  if kind == "f16": return x.astype(np.float16)
  if kind == "o": return x.astype(object) if x.dtype != U64 else np.array([int(v) for v in x.ravel()], object).reshape(x.shape)
  raise Unsupported(kind)

def _where(c, a, b):
  if type(a) is _ND and type(b) is _ND and a.dtype == b.dtype != object: return np.where(c, a, b)
  a, b = np.asarray(a), np.asarray(b)
  if a.dtype == object or b.dtype == object: return np.where(c, a.astype(object), b.astype(object))
  return np.where(c, a, b)

def _fma(a, b, c):
  """Fused multiply-add rounded once: the product is exact in f64, the sum is rounded to odd in f64 (TwoSum), and the
  f64 -> f32 conversion then rounds to nearest even exactly as one rounding of a*b+c would."""
  if np.asarray(a).dtype == np.float64: return _fma64(a, b, c)
  with np.errstate(all="ignore"):
    p = np.asarray(a, np.float64) * np.asarray(b, np.float64)
    c = np.asarray(c, np.float64)
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)
    inexact = (err != 0) & np.isfinite(s) & ((s.view(U64) & U64(1)) == 0)
    if inexact.any(): s = np.where(inexact, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)

def _fma64(a, b, c):
  import math
  f = getattr(math, "fma", None)
  if f is not None: return np.array([f(float(x), float(y), float(z)) for x, y, z in np.broadcast(a, b, c)])
  with np.errstate(all="ignore"): return np.asarray(a, np.float64) * b + c  # Python < 3.13: rounded twice

def _isnan(x): return np.isnan(np.asarray(x, np.float64))
def _quiet_bit(x):
  x = np.asarray(x)
  return (x.view(U64) >> U64(51)) & U64(1) if x.dtype == np.float64 else (x.astype(np.float32).view(np.uint32) >> 22) & 1
def _is_snan(x): return _isnan(x) & (_quiet_bit(x) == 0)
def _is_qnan(x): return _isnan(x) & (_quiet_bit(x) == 1)
def _to_qnan(x):
  x = np.asarray(x, np.float64)
  return np.where(np.isnan(x), (x.view(U64) | U64(1 << 51)).view(np.float64), x)
def _sign(x):
  x = np.asarray(x)
  return np.signbit(x) if x.dtype.kind == "f" else x < 0
def _signext(x): return np.asarray(x).astype(np.int64) if np.asarray(x).dtype != U64 else _i(x, 64)
def _shl(a, n):
  a = np.asarray(a)
  if a.dtype == object: return a << np.asarray(n).astype(object)
  n = np.asarray(n).astype(a.dtype)
  with np.errstate(all="ignore"): return np.where(n >= 64, np.zeros_like(a), a << (n & a.dtype.type(63)))
def _shr(a, n):
  a = np.asarray(a)
  if a.dtype == object: return a >> np.asarray(n).astype(object)
  n = np.asarray(n).astype(a.dtype)
  fill = np.where(a < 0, -1, 0).astype(a.dtype) if a.dtype == np.int64 else np.zeros_like(a)
  return np.where(n >= 64, fill, a >> (n & a.dtype.type(63)))
def _div(a, b):
  a, b = np.asarray(a), np.asarray(b)
  if a.dtype.kind == "f" or b.dtype.kind == "f":
    with np.errstate(all="ignore"): return a / b
  with np.errstate(all="ignore"): return np.where(b == 0, 0, a // np.where(b == 0, 1, b))
def _fn(f):
  def g(*a):
    with np.errstate(all="ignore"): return f(*a)
  return g
def _in_f64(f, x):
  """A transcendental function of an f16/f32 value evaluated in double and rounded once (as the C translation does)."""
  x = np.asarray(x)
  if x.dtype in (np.float32, np.float16): return f(x.astype(np.float64)).astype(x.dtype)
  return f(x)
def _exponent(x):
  x = np.asarray(x)
  if x.dtype == np.float64: return (x.view(U64) >> U64(52)) & U64(0x7FF)
  if x.dtype == np.float16: return ((x.view(np.uint16) >> 10) & 0x1F).astype(U64)
  return ((x.astype(np.float32).view(np.uint32) >> 23) & 0xFF).astype(U64)
def _f2i(x, lo, hi, dt):   # f32_to_i32 and friends: truncate, saturate, NaN -> 0
  x = np.asarray(x, np.float64)
  return np.where(np.isnan(x), 0, np.clip(np.trunc(np.nan_to_num(x)), lo, hi)).astype(dt)

# `v_max_i32(a, b)` in one opcode's pseudocode calls another opcode: the ISA (rdna3.py) installs the resolver,
# name -> (Translated, number format of its D0 such as 'F32', 'I32', 'U16'), or None when there is no such opcode
OP_RESOLVER: list = [None]

def _call_op(name: str, laneId, IEEE, *args):
  t, _ = OP_RESOLVER[0](name)
  srcs = {f"S{i}": a for i, a in enumerate(args)}
  env = {"laneId": laneId, "IEEE": IEEE, **srcs}
  n = np.shape(laneId)
  return t.fn(**{k: env[k] if k in env else np.zeros(n, U64) for k in t.args})["D0"]

RUNTIME = {
  "np": np, "U64": U64, "_u": _u, "_i": _i, "_f32": _f32, "_f64": _f64, "_f16": _f16, "_bits_f32": _bits_f32,
  "_bits_f64": _bits_f64, "_bits_f16": _bits_f16, "_cast": _cast, "_where": _where, "_shl": _shl, "_shr": _shr,
  "_div": _div,
  "fma": _fma, "pow": _fn(lambda a, b: _in_f64(lambda x: np.power(2.0 if a == 2.0 else a, x), b)), "log2": _fn(lambda x: _in_f64(np.log2, x)),
  "sqrt": _fn(np.sqrt), "abs": np.abs, "trunc": np.trunc, "floor": np.floor, "ceil": np.ceil,
  "sin": _fn(lambda x: _in_f64(np.sin, x)), "cos": _fn(lambda x: _in_f64(np.cos, x)), "exp": _fn(lambda x: _in_f64(np.exp, x)), "sign": _sign,
  "isNAN": _isnan, "isSignalNAN": _is_snan, "isQuietNAN": _is_qnan, "cvtToQuietNAN": _to_qnan, "signext": _signext,
  "i32_to_f32": lambda x: np.asarray(x).astype(np.float32), "u32_to_f32": lambda x: np.asarray(x).astype(np.float32),
  "f32_to_i32": lambda x: _f2i(x, -2**31, 2**31 - 1, np.int64), "f32_to_u32": lambda x: _f2i(x, 0, 2**32 - 1, U64),
  "f32_to_f64": lambda x: np.asarray(x, np.float64), "f64_to_f32": lambda x: np.asarray(x).astype(np.float32),
  "i32_to_f64": lambda x: np.asarray(x, np.float64), "u32_to_f64": lambda x: np.asarray(x, np.float64),
  "f64_to_i32": lambda x: _f2i(x, -2**31, 2**31 - 1, np.int64), "f64_to_u32": lambda x: _f2i(x, 0, 2**32 - 1, U64),
  "f16_to_f32": lambda x: np.asarray(x).astype(np.float32), "f32_to_f16": lambda x: np.asarray(x).astype(np.float16),
  "max": np.maximum, "min": np.minimum, "PI": np.pi, "exponent": _exponent, "_call_op": _call_op,
}
FUNCS = {k for k in RUNTIME if not k.startswith("_") and k not in ("np", "U64", "PI")}

# ---- the translator

TOKEN = re.compile(r"""\s*(?:
  (?P<cast>\d+'[UIFB])\( |
  (?P<type>\d+'[UIFB])(?![\w.']) |
  (?P<sized>\d+'-?(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?)[UIF]?) |
  (?P<num>0x[0-9a-fA-F]+(?:ULL|LL|U|L)? | \d+\.\d+(?:e[+-]?\d+)?F? | \d+(?:ULL|LL|U|L|F)?) |
  (?P<id>[A-Za-z_][A-Za-z_0-9]*) |
  (?P<op>&&|\|\||==|!=|<>|<=|>=|<<|>>|\+=|-=|\*\*|[-+*/%&|^~!<>?:=()\[\]{},.;])
)""", re.X)

ACCESSORS = {"u1": ("u", 1), "u8": ("u", 8), "u16": ("u", 16), "u24": ("u", 24), "u32": ("u", 32), "u64": ("u", 64),
             "b1": ("u", 1), "b8": ("u", 8), "b16": ("u", 16), "b32": ("u", 32), "b64": ("u", 64),
             "i1": ("i", 1), "i8": ("i", 8), "i16": ("i", 16), "i24": ("i", 24), "i32": ("i", 32), "i64": ("i", 64),
             "f16": ("f16", 16), "f32": ("f32", 32), "f64": ("f64", 64), "u2": ("u", 2), "u3": ("u", 3), "u4": ("u", 4),
             "i4": ("i", 4), "b2": ("u", 2), "b3": ("u", 3), "u5": ("u", 5), "u6": ("u", 6)}
REGS = {"S0", "S1", "S2", "D0", "D1", "SCC", "VCC", "EXEC", "SIMM16", "SIMM32", "PC", "VCCZ", "EXECZ", "M0",
        "laneId", "SRC0", "OFFSET"}
OUT_REGS = {"D0", "D1", "SCC", "VCC", "EXEC", "PC"}
KEYWORDS = {"if", "then", "elsif", "else", "endif"}

class Translated:
  """fn(**regs) -> dict of assigned registers (raw uint64 bits); `writes` names them, `lane_bits` those written one bit
  per lane (`VCC.u64[laneId] = ...`: a wave mask), `source` is the generated Python."""
  def __init__(self, fn, writes: set, lane_bits: set, reads: set, source: str):
    self.fn, self.writes, self.lane_bits, self.reads, self.source = fn, writes, lane_bits, reads, source
    self.args = fn.__code__.co_varnames[:fn.__code__.co_argcount]

def _strip(pc: str) -> str:
  return "\n".join(l.split("//")[0] for l in pc.split("\n"))

def statements(pcode: str) -> list:
  """The pseudocode as a list of statements, each a list of (kind, text) tokens: split at `;` and line ends outside
  parentheses, and around if/then/elsif/else/endif (each keyword a statement of its own); comments dropped."""
  return split_statements(_tokens(_strip(pcode).replace("\n", " ; ")))

def split_statements(toks: list) -> list:
  """Tokens split into statements (see `statements`). Line breaks inside parentheses are dropped, except in a
  `lambda`'s body, where they separate the body's own statements (split those with this function again)."""
  stmts, cur, depth, bodies, pending = [], [], 0, [], 0
  for t in toks:
    v = t[1]
    if t[0] == "id" and v == "lambda": pending = 2   # the second `(` after `lambda` opens its body
    if v == "(" and pending:
      pending -= 1
      if not pending: bodies.append(depth + 1)
    if depth > 0 and v == ";":
      if bodies and depth == bodies[-1]: cur.append(t)
      continue   # a line break inside parentheses
    if v in ("(", "[", "{") or t[0] == "cast": depth += 1
    if v in (")", "]", "}"):
      if bodies and depth == bodies[-1]: bodies.pop()
      depth -= 1
    if depth == 0 and (v == ";" or (t[0] == "id" and v in KEYWORDS)):
      if cur: stmts.append(cur)
      cur = []
      if v != ";": stmts.append([t])
      continue
    cur.append(t)
  if cur: stmts.append(cur)
  return stmts

def _tokens(s: str) -> list:
  out, i = [], 0
  while i < len(s):
    if s[i:].strip() == "": break
    m = TOKEN.match(s, i)
    if not m or m.end() == i: raise Unsupported(f"cannot read pseudocode at {s[i:i + 20]!r}")
    kind = m.lastgroup
    out.append((kind, "!=" if m.group(kind) == "<>" else m.group(kind)))
    i = m.end()
  return out

class _Parser:
  def __init__(self, toks: list, tr: "_Translator"):
    self.t, self.i, self.tr = toks, 0, tr
  def peek(self, k: int = 0): return self.t[self.i + k][1] if self.i + k < len(self.t) else None
  def next(self):
    tok = self.t[self.i]; self.i += 1; return tok
  def expect(self, v):
    if self.peek() != v: raise Unsupported(f"expected {v!r}, got {self.peek()!r}")
    self.i += 1

  # precedence climbing: returns (python source, kind) with kind in u i f32 f64 f16 b c (int const) cf (float const) o
  BIN = [("?",), ("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", ">", "<=", ">="), ("<<", ">>"),
         ("+", "-"), ("*", "/", "%"), ("**",)]
  def expr(self, level: int = 0):
    if level == 0:
      c = self.expr(1)
      if self.peek() == "?":
        self.next(); a = self.expr(0); self.expect(":"); b = self.expr(0)
        k = _join("u" if a[1] == "r" else a[1], "u" if b[1] == "r" else b[1])
        k = {"c": "i", "cf": "f64"}.get(k, k)
        return f"_where({_bool(c)}, {_conv(a, k)}, {_conv(b, k)})", k
      return c
    if level >= len(self.BIN): return self.unary()
    lhs = self.expr(level + 1)
    while self.peek() in self.BIN[level] and not (self.peek() in ("<", ">") and False):
      op = self.next()[1]
      rhs = self.expr(level + 1)
      lhs = _binop(op, lhs, rhs)
    return lhs

  def unary(self):
    v = self.peek()
    if v == "-": self.next(); a = self.unary(); return (f"(-{a[0]})", "i" if a[1] == "u" else a[1])
    if v == "+": self.next(); return self.unary()
    if v == "!": self.next(); a = self.unary(); return f"np.logical_not({_bool(a)})", "b"
    if v == "~": self.next(); a = self.unary(); return f"(~{_conv(a, 'u' if a[1] == 'c' else a[1])})", "u" if a[1] == "c" else a[1]
    return self.postfix(self.primary())

  def primary(self):
    kind, v = self.next()
    if v == "(":
      e = self.expr(0); self.expect(")"); return (f"({e[0]})", e[1])
    if kind == "cast":
      n, t = v.split("'"); e = self.expr(0); self.expect(")")
      n = int(n)
      if t == "F": return _conv(e, {16: "f16", 32: "f32", 64: "f64"}[n]), {16: "f16", 32: "f32", 64: "f64"}[n]
      if n > 64: return f"_cast({_conv(e, 'u' if e[1] in ('c', 'b') else e[1])}, 'o')", "o"
      if t == "I": return f"_i({_conv(e, 'i' if e[1] in ('c', 'b') else e[1])}, {n})", "i"
      return f"_u({e[0]}, {n})", "u"
    if kind == "sized":
      n, val = v.split("'")
      if val.endswith("F"): return (repr(float(val[:-1])), "cf")
      val = val.rstrip("UI")
      if "." in val: return (repr(float(val)), "cf")
      return (str(int(val, 0)), "c")
    if kind == "num":
      s = v.rstrip("LUF") if not v.startswith("0x") else v.rstrip("LU")
      if "." in v or (v.endswith("F") and not v.startswith("0x")): return (repr(float(s)), "cf")
      return (str(int(s, 0)), "c")
    if kind == "id":
      if v in self.tr.lambdas and self.peek() == "(": return self.call_lambda(v)
      if v[:2] in ("v_", "s_") and self.peek() == "(" and OP_RESOLVER[0] is not None:
        got = OP_RESOLVER[0](v)
        if got is None: raise Unsupported(f"unknown opcode `{v}`")
        fmt = got[1]
        self.next(); args = []
        while self.peek() != ")":
          args.append(self.expr(0))
          if self.peek() == ",": self.next()
        self.next()
        bits = [f"_bits_{a[1]}({a[0]})" if a[1] in ("f16", "f32", "f64") else
                f"_bits_f32(np.float32({a[0]}))" if a[1] == "cf" else f"_u({_conv(a, 'u') if a[1] != 'r' else a[0]}, 64)"
                for a in args]
        call = f"_call_op({v!r}, laneId, IEEE, {', '.join(bits)})"
        if fmt.startswith("F"): return f"_f{fmt[1:]}({call})", "f" + fmt[1:]
        n = int(fmt[1:]) if fmt[1:].isdigit() else 32
        return (f"_i({call}, {n})", "i") if fmt.startswith("I") else (f"_u({call}, {n})", "u")
      if v in FUNCS and self.peek() == "(":
        self.next(); args = []
        while self.peek() != ")":
          args.append(self.expr(0))
          if self.peek() == ",": self.next()
        self.next()
        return _call(v, args)
      if v == "WAVE_MODE":
        self.expect("."); f = self.next()[1]
        if f != "IEEE": raise Unsupported(f"WAVE_MODE.{f}")
        return ("IEEE", "b")
      if v == "PI": return ("PI", "cf")
      if v in self.tr.params: return self.tr.params[v]
      if v in REGS:
        self.tr.reads.add(v)
        return (v, "r")   # raw register bits, typed by the accessor that follows
      if v in self.tr.locals: return (v, self.tr.locals[v])
      raise Unsupported(f"unknown name `{v}`")
    raise Unsupported(f"unexpected {v!r}")

  def postfix(self, e):
    while True:
      if self.peek() == "." and self.i + 1 < len(self.t) and self.t[self.i + 1][1] in ACCESSORS:
        self.next(); acc = self.next()[1]
        e = _access(e, acc)
      elif self.peek() == "[":
        self.next()
        if self.peek() == "laneId":
          self.next(); self.expect("]")
          e = (f"((_u({_conv(e, 'u') if e[1] != 'r' else e[0]}, 64) >> laneId) & U64(1))", "u")
          continue
        hi = self.expr(0)
        if self.peek() == ":":
          self.next(); lo = self.expr(0); self.expect("]")
          hi_v, lo_v = int(eval(hi[0], {})), int(eval(lo[0], {}))
          src = e[0] if e[1] == "r" else _conv(e, "u")
          e = (f"((_u({src}, 64) >> U64({lo_v})) & U64({M.get(hi_v - lo_v + 1, (1 << (hi_v - lo_v + 1)) - 1)}))", "u")
        else:
          self.expect("]")
          src = e[0] if e[1] == "r" else _conv(e, "u")
          e = (f"((_u({src}, 64) >> _u({hi[0]}, 64)) & U64(1))", "u")
      else: return e

  def call_lambda(self, name):
    params, body = self.tr.lambdas[name]
    self.next(); args = []
    while self.peek() != ")":
      args.append(self.expr(0))
      if self.peek() == ",": self.next()
    self.next()
    saved = dict(self.tr.params)
    self.tr.params.update({p: (f"({a[0]})", a[1]) for p, a in zip(params, args)})
    sub = _Parser(body, self.tr)
    r = sub.expr(0)
    self.tr.params = saved
    return (f"({r[0]})", r[1])

def _access(e, acc):
  k, n = ACCESSORS[acc]
  src, kind = e
  if kind == "r":
    if k == "u": return (f"_u({src}, {n})", "u")
    if k == "i": return (f"_i({src}, {n})", "i")
    return (f"_{k}({src})", k)
  if k == "u": return (f"_u({_conv(e, kind if kind != 'c' else 'u')}, {n})", "u")
  if k == "i": return (f"_i({_conv(e, kind if kind != 'c' else 'i')}, {n})", "i")
  if kind in ("f32", "f64", "f16", "cf"): return (_conv(e, k), k)
  return (f"_{k}({src})", k)  # bits -> float

def _bool(e):
  src, k = e
  if k == "b": return src
  if k == "r": return f"(_u({src}, 64) != 0)"
  return f"(np.asarray({src}) != 0)"

def _join(a: str, b: str) -> str:
  if a == b: return a
  if a in ("c", "b"): return b if b not in ("c", "b") else "u" if "c" in (a, b) else "b"
  if b in ("c", "b"): return a
  if "cf" in (a, b):
    o = b if a == "cf" else a
    return "f64" if o in ("i", "u", "c", "cf", "o") else o   # an integer meets a float constant: float arithmetic
  if "o" in (a, b): return "o"
  fl = [x for x in (a, b) if x in ("f16", "f32", "f64")]
  if fl: return "f64" if "f64" in fl else "f32" if "f32" in fl else "f16"
  if "i" in (a, b): return "i"
  return "u"

def _conv(e, k: str) -> str:
  src, kind = e
  if kind == k: return src
  if kind == "r":
    return {"u": f"_u({src}, 64)", "i": f"_i({src}, 64)"}.get(k) or f"_{k}({src})"
  if kind in ("c", "cf"):
    if k in ("f32", "f64", "f16"): return f"np.{ {'f32': 'float32', 'f64': 'float64', 'f16': 'float16'}[k] }({src})"
    if k == "u": return f"U64({src} & {M[64]})" if kind == "c" else f"U64({src})"
    if k == "i": return f"np.int64({src})"
    if k == "o": return f"({src})"
    return src
  if k in ("f32", "f64", "f16"): return f"_cast({src}, '{k}')"
  if k == "u": return f"_u({src}, 64)"
  if k == "i": return f"_i({src}, 64)"
  if k == "o": return f"_cast({src}, 'o')"
  if k == "b": return _bool(e)
  return src

CMP = {"==", "!=", "<", ">", "<=", ">="}
def _binop(op, a, b):
  if op == "||": return f"np.logical_or({_bool(a)}, {_bool(b)})", "b"
  if op == "&&": return f"np.logical_and({_bool(a)}, {_bool(b)})", "b"
  ka, kb = ("u" if a[1] == "r" else a[1]), ("u" if b[1] == "r" else b[1])
  if op in ("<<", ">>"):
    k = ka if ka not in ("c", "b") else "u"
    fn = "_shl" if op == "<<" else "_shr"
    return f"{fn}({_conv(a, k)}, {_conv(b, 'u' if kb != 'o' else 'o')})", k
  k = _join(ka, kb)
  if k == "b" and op not in CMP: k = "u"
  if k == "c" and op in CMP: return f"({a[0]} {op} {b[0]})", "b"
  if k == "cf": k = "f64"
  if op == "/": return f"_div({_conv(a, k)}, {_conv(b, k)})", k
  if op == "**":   # 2.0F ** n (ldexp): exact in f64
    return f"np.power({_conv(a, 'f64')}, {_conv(b, 'f64')})", "f64"
  if op in CMP: return f"({_conv(a, k)} {op} {_conv(b, k)})", "b"
  return f"({_conv(a, k)} {op} {_conv(b, k)})", k

def _call(name, args):
  srcs = [a[0] if a[1] != "r" else f"_u({a[0]}, 64)" for a in args]
  k = args[0][1] if args else "f32"
  if name in ("isNAN", "isSignalNAN", "isQuietNAN", "sign"): return f"{name}({', '.join(srcs)})", "b"
  if name == "cvtToQuietNAN": return f"{name}({srcs[0]})", "f64"
  if name == "exponent": return f"{name}({srcs[0]})", "u"
  if name == "signext": return f"{name}({srcs[0]})", "i"
  if name in ("i32_to_f32", "u32_to_f32", "f64_to_f32", "f16_to_f32"): return f"{name}({srcs[0]})", "f32"
  if name in ("f32_to_i32", "f64_to_i32"): return f"{name}({srcs[0]})", "i"
  if name in ("f32_to_u32", "f64_to_u32"): return f"{name}({srcs[0]})", "u"
  if name in ("f32_to_f64", "i32_to_f64", "u32_to_f64"): return f"{name}({srcs[0]})", "f64"
  if name == "f32_to_f16": return f"{name}({srcs[0]})", "f16"
  if name == "pow":
    kb = args[1][1]
    return f"pow({args[0][0]}, {_conv(args[1], kb if kb != 'cf' else 'f32')})", kb if kb != "cf" else "f32"
  if name in ("fma", "max", "min"):
    kk = "f32"
    for a in args:
      if a[1] not in ("c", "cf", "r"): kk = _join(kk, a[1]) if kk in ("f32",) and a[1] in ("f64",) else a[1]; break
    return f"{name}({', '.join(_conv(a, kk) for a in args)})", kk
  if k == "cf": k = "f64"
  return f"{name}({', '.join(srcs)})", k

class _Translator:
  def __init__(self):
    self.lines: list = []
    self.locals: dict = {}
    self.reads: set = set()
    self.writes: set = set()
    self.lane_bits: set = set()
    self.lambdas: dict = {}
    self.params: dict = {}
    self.mask: Optional[str] = None   # python name of the current predicate, None: always
    self.n = 0

  def tmp(self) -> str:
    self.n += 1
    return f"_t{self.n}"

  def emit(self, s: str): self.lines.append("  " + s)

  def assign(self, target: str, value: str):
    if self.mask is None or target not in self.defined: self.emit(f"{target} = {value}")
    else: self.emit(f"{target} = _where({self.mask}, {value}, {target})")
    self.defined.add(target)

  def statement(self, toks: list):
    p = _Parser(toks, self)
    # lambda definition: NAME = lambda(a, b) (expr)
    if len(toks) > 3 and toks[1][1] == "=" and toks[2][1] == "lambda":
      name = toks[0][1]
      p.i = 3; p.expect("(")
      params = []
      while p.peek() != ")":
        params.append(p.next()[1])
        if p.peek() == ",": p.next()
      p.next(); p.expect("(")
      depth, j = 1, p.i
      while depth:
        v = toks[j][1]; depth += (v == "(" or toks[j][0] == "cast") - (v == ")"); j += 1
      self.lambdas[name] = (params, [t for t in toks[p.i:j - 1] if t[1] != ";"])
      return
    if toks[0][1] == "{":   # { D1.u1, D0.u64 } = 65'B(...)
      parts, i = [], 1
      while toks[i][1] != "}":
        if toks[i][1] == ",": i += 1; continue
        parts.append((toks[i][1], toks[i + 2][1])); i += 3
      p.i = i + 2
      if toks[i + 1][1] != "=": raise Unsupported("concatenated target without `=`")
      e = p.expr(0)
      v = self.tmp(); self.emit(f"{v} = {_conv(e, 'o')}")
      shift = 0
      for reg, acc in reversed(parts):
        n = ACCESSORS[acc][1]
        self.writes.add(reg); self.reads.add(reg)
        self.assign(reg, f"_u(({v} >> {shift}) & {M[n] if n in M else (1 << n) - 1}, 64)")
        shift += n
      return
    # target
    name = p.next()[1]
    acc = lane = sl = None
    while p.peek() in (".", "["):
      if p.peek() == ".": p.next(); acc = p.next()[1]
      else:
        p.next()
        if p.peek() == "laneId": p.next(); p.expect("]"); lane = True
        else:
          hi = p.expr(0); p.expect(":"); lo = p.expr(0); p.expect("]"); sl = (int(eval(hi[0], {})), int(eval(lo[0], {})))
    op = p.next()[1]
    if op not in ("=", "+=", "-="): raise Unsupported(f"statement `{name} {op}`")
    e = p.expr(0)
    if p.i != len(toks): raise Unsupported(f"trailing {toks[p.i][1]!r}")
    if op != "=":   # X.f32 += e  ==  X.f32 = X.f32 + e
      cur = _access((name, "r"), acc) if name in REGS else (name, self.locals[name])
      if name in REGS: self.reads.add(name)
      e = _binop(op[0], cur, e)
    if name in REGS:
      if name not in OUT_REGS: raise Unsupported(f"write to {name}")
      self.writes.add(name); self.reads.add(name)
      if lane:
        self.lane_bits.add(name)
        bit = _conv(e, "u") if e[1] != "b" else f"_u({e[0]}, 1)"
        self.assign(name, f"((_u({name}, 64) & ~(U64(1) << laneId)) | ((_u({bit}, 1)) << laneId))")
      elif sl is not None:
        hi, lo = sl
        m = ((1 << (hi - lo + 1)) - 1) << lo
        k = ACCESSORS[acc][0] if acc else "u"
        bits = f"_bits_{k}({_conv(e, k)})" if k in ("f16", "f32", "f64") else _conv(e, "u")   # D0[31 : 16].f16 = x
        self.assign(name, f"((_u({name}, 64) & U64({~m & M[64]})) | ((_u({bits}, 64) << U64({lo})) & U64({m})))")
      elif name in ("SCC",) and acc is None: self.assign(name, f"_u({_bool(e) if e[1] != 'u' else e[0]}, 1)")
      elif name == "PC" and acc is None: self.assign(name, f"_u({_conv(e, 'i')}, 64)")
      else:
        k, n = ACCESSORS[acc or "b64"]
        if k in ("f32", "f64", "f16"): bits = f"_bits_{k}({_conv(e, k)})"
        elif e[1] in ("f32", "f64", "f16"): bits = f"_u({_conv(e, 'i')}, {n})"
        else: bits = f"_u({_conv(e, 'u' if e[1] in ('c', 'b') else e[1])}, {n})"
        if n < 64 and name not in ("SCC",):  # a 32-bit write leaves the upper half of a 64-bit operand alone
          self.assign(name, f"((_u({name}, 64) & U64({~M[n] & M[64]})) | {bits})")
        else: self.assign(name, bits)
    else:
      if acc is not None:
        if name not in self.locals: self.locals[name] = ACCESSORS[acc][0]
        k = ACCESSORS[acc][0]
        e = (_conv(e, k if e[1] != "c" else ("u" if k == "u" else k)), k)
      kind = e[1] if e[1] not in ("c", "cf") else ("i" if e[1] == "c" else "f64")
      self.locals[name] = kind
      self.assign(name, _conv(e, kind))

  def block(self, stmts: list) -> None:
    """Translate a statement list (if/elsif/else/endif, for loops, declarations, assignments)."""
    stack = []   # (parent mask, taken mask)
    i = 0
    while i < len(stmts):
      s = stmts[i]
      head = s[0][1] if s[0][0] == "id" else None
      if head in ("if", "elsif"):
        cond = stmts[i + 1]
        if i + 2 >= len(stmts) or stmts[i + 2][0][1] != "then": raise Unsupported("`if` without `then`")
        c = _bool(_Parser(cond, self).expr(0))
        if head == "if":
          parent = self.mask
          taken = self.tmp(); self.emit(f"{taken} = np.zeros((), bool)")
          stack.append((parent, taken))
        else: parent, taken = stack[-1]
        m = self.tmp()
        self.emit(f"{m} = np.logical_and(np.logical_and({parent or 'True'}, np.logical_not({taken})), {c})")
        self.emit(f"{taken} = np.logical_or({taken}, {m})")
        self.mask = m
        i += 3; continue
      if head == "else":
        parent, taken = stack[-1]
        m = self.tmp(); self.emit(f"{m} = np.logical_and({parent or 'True'}, np.logical_not({taken}))")
        self.mask = m
        i += 1; continue
      if head == "endif":
        self.mask = stack.pop()[0]
        if self.loops:   # lanes that broke out inside the `if` skip the rest of the loop
          m = self.tmp(); self.emit(f"{m} = np.logical_and({self.mask or 'True'}, np.logical_not({self.loops[-1]}))")
          self.mask = m
        i += 1; continue
      if head in ("then",): raise Unsupported("stray `then`")
      if head == "declare":   # declare NAME : N'T;  a lane-wide local, zero until assigned
        if len(s) != 4 or s[2][1] != ":" or s[3][0] != "type": raise Unsupported("`declare` of an array")
        name, t = s[1][1], s[3][1].split("'")
        kind = {"U": "u", "B": "u", "I": "i"}.get(t[1]) or {16: "f16", 32: "f32", 64: "f64"}[int(t[0])]
        dt = {"u": "U64", "i": "np.int64", "f16": "np.float16", "f32": "np.float32", "f64": "np.float64"}[kind]
        self.locals[name] = kind
        self.emit(f"{name} = np.zeros(np.shape(laneId), {dt})"); self.defined.add(name)
        i += 1; continue
      if head == "for":
        i = self.loop(stmts, i)
        continue
      if head == "break":
        if not self.loops: raise Unsupported("`break` outside a loop")
        brk = self.loops[-1]
        self.emit(f"{brk} = np.logical_or({brk}, {self.mask or 'True'})")
        i += 1; continue
      if head in ("case", "while", "endfor"): raise Unsupported(f"`{head}`")
      if len(s) >= 2 and s[1][1] == "<=" and head and head.islower(): i += 1; continue   # s_waitcnt's `x <= y`
      self.statement(s)
      i += 1
    if stack: raise Unsupported("`if` without `endif`")

  def loop(self, stmts: list, i: int) -> int:
    """`for VAR in A : B do ... endfor` with constant bounds, unrolled; `break` masks the lanes that took it out of the
    remaining iterations. Returns the index after `endfor`."""
    s = stmts[i]
    if len(s) < 6 or s[2][1] != "in" or s[-1][1] != "do": raise Unsupported("`for` form")
    var, rng, depth, cut = s[1][1], s[3:-1], 0, None
    for j, t in enumerate(rng):
      depth += (t[1] == "(" or t[0] == "cast") - (t[1] == ")")
      if t[1] == ":" and depth == 0 and cut is None and not any(x[1] == "?" for x in rng[:j]): cut = j
    if cut is None: raise Unsupported("`for` bounds")
    saved = dict(self.params)
    self.params.update(WAVE64=("False", "b"), WAVE32=("True", "b"))
    lo, hi = (int(eval(_Parser(part, self).expr(0)[0], dict(RUNTIME))) for part in (rng[:cut], rng[cut + 1:]))
    self.params = saved
    depth, j = 1, i + 1
    while depth:
      if j >= len(stmts): raise Unsupported("`for` without `endfor`")
      h = stmts[j][0][1]
      depth += (h == "for") - (h == "endfor")
      j += 1
    body = stmts[i + 1:j - 1]
    parent, brk = self.mask, self.tmp()
    self.emit(f"{brk} = np.zeros((), bool)")
    self.loops.append(brk)
    for k in range(lo, hi + 1):
      m = self.tmp(); self.emit(f"{m} = np.logical_and({parent or 'True'}, np.logical_not({brk}))")
      self.mask = m
      self.params[var] = (str(k), "c")
      self.block(body)
    self.params.pop(var, None)
    self.loops.pop()
    self.mask = parent
    return j

  def translate(self, pcode: str) -> Translated:
    self.defined = set(REGS)
    stmts = statements(pcode)
    self.loops: list = []   # break masks of the enclosing `for` loops
    self.block(stmts)
    params = sorted(self.reads | self.writes | {"laneId", "IEEE"})
    body = "\n".join(self.lines) or "  pass"
    src = f"def op({', '.join(params)}):\n{body}\n  return {{{', '.join(f'{w!r}: {w}' for w in sorted(self.writes))}}}\n"
    ns = dict(RUNTIME)
    exec(compile(src, "<pcode>", "exec"), ns)
    return Translated(ns["op"], set(self.writes), set(self.lane_bits), set(self.reads), src)

def translate(pcode: str) -> Translated:
  try: return _Translator().translate(pcode)
  except Unsupported: raise
  except Exception as e: raise Unsupported(f"untranslatable pseudocode ({type(e).__name__}: {e})") from None
