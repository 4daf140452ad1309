"""AMD's instruction pseudocode (tinygrad.runtime.autogen.amd.*.str_pcode) translated to C: one function per opcode that
runs the pseudocode once per active lane, for the native executor (native.py).

The pseudocode is per-lane by nature, so the C is close to it: registers are 64-bit bit containers (`uint64_t S0`),
typed reads are views of their bits (`S0.f32` is the float in the low 32 bits), typed writes replace the bits the
type covers (a 32-bit write keeps the upper half), and if/elsif/else, for loops and `break` are C's own. Values follow
one numeric model, held to tinygrad's RDNA3 emulator opcode by opcode (tests/test_rdna3_diff.py): integers compute in 64 bits (the
pseudocode's 32-bit results are the low bits), 65-bit expressions in `__int128`, f32 in float, f64 in double, and f16
in float rounded to half after every operation (exact: float has more than twice half's precision). Transcendental
functions are evaluated in double and rounded once.

A local variable is a bit container like a register, with the kind of value it last received (so `tmp = S0.f32 * 2;
D0.f32 = tmp` stays a float, and `tmp[15 : 0].f16 = ...; D0 = tmp.b32` packs bits). `lambda`s and opcodes called by
name (`v_max_i32(a, b)`) are inlined as GNU statement expressions, which gcc and clang both take.

`translate(pcode, name)` returns a `CFunction` (source, registers read and written, registers written one bit per
lane) or raises `pcode.Unsupported` naming what it cannot translate."""
from __future__ import annotations
import math, struct
from typing import Callable, Optional, Union
from .pcode import Unsupported, statements, split_statements, ACCESSORS

__all__ = ["translate", "CFunction", "REG_INDEX", "NREGS", "HEADER"]

# the per-lane registers a pseudocode function reads and writes, as rows of the executor's register block
REG_INDEX = {r: i for i, r in enumerate(("S0", "S1", "S2", "D0", "D1", "SCC", "VCC", "EXEC", "PC", "SIMM16", "SIMM32",
                                         "M0", "VCCZ", "EXECZ", "SRC0", "OFFSET", "OPSEL", "OPSEL_HI", "NEG", "NEG_HI",
                                         "VDST"))}
NREGS = 24
WRITABLE = {"D0", "D1", "SCC", "VCC", "EXEC", "PC", "S0"}
C_TYPE = {"u": "uint64_t", "i": "int64_t", "f16": "float", "f32": "float", "f64": "double", "b": "int", "w": "__int128"}
FLOATS = ("f16", "f32", "f64")
MASK64 = (1 << 64) - 1

# C helpers every generated function may call (static inline: only the used ones cost compile time)
HEADER = r"""
#include <stdint.h>
#include <string.h>
#include <math.h>
typedef struct { uint64_t r[24][32]; int ieee; uint32_t *vgpr; } Regs;   /* vgpr: the wave's VGPRs [reg][lane] */
static inline float b2f(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static inline uint32_t f2b(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }
static inline double b2d(uint64_t b) { double f; memcpy(&f, &b, 8); return f; }
static inline uint64_t d2b(double f) { uint64_t b; memcpy(&b, &f, 8); return b; }
static inline int64_t sx(uint64_t v, int n) { return n >= 64 ? (int64_t)v : (int64_t)(v << (64 - n)) >> (64 - n); }
static inline uint64_t mk(int n) { return n >= 64 ? ~0ULL : (1ULL << n) - 1; }
/* half <-> float, bit exact (NaN payloads and signaling kept, as numpy's conversions) */
static inline float h2f(uint32_t h) {
  uint32_t s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, b;
  if (e == 0x1f) b = s | 0x7f800000u | (m << 13);
  else if (e) b = s | ((e + 112) << 23) | (m << 13);
  else if (!m) b = s;
  else { int k = 0; while (!(m & 0x400)) { m <<= 1; k++; } b = s | ((uint32_t)(113 - k) << 23) | ((m & 0x3ff) << 13); }
  return b2f(b);
}
static inline uint32_t d2h(double x) {   /* round to nearest even, from double */
  uint64_t b = d2b(x); uint32_t s = (uint32_t)(b >> 48) & 0x8000u; int e = (int)((b >> 52) & 0x7ff);
  uint64_t m = b & 0xFFFFFFFFFFFFFULL;
  if (e == 0x7ff) return m ? (s | 0x7c00u | 0x200u | (uint32_t)(m >> 42)) : (s | 0x7c00u);
  double a = fabs(x);
  if (a >= 65520.0) return s | 0x7c00u;
  if (a < 0x1p-25) return s;   /* below half of the smallest denormal: +-0 (exactly half rounds to even 0) */
  int ex; frexp(a, &ex);   /* a = f * 2^ex, f in [0.5, 1) */
  int q = ex - 11 < -24 ? -24 : ex - 11;   /* the ulp's exponent: normals 2^(ex-11), denormals 2^-24 */
  double r = nearbyint(ldexp(a, -q));      /* the value in ulps, rounded to nearest even */
  uint64_t ul = (uint64_t)r;
  if (q == -24) return s | (uint32_t)ul;    /* denormal (or rounded up into the smallest normal: same bits) */
  if (ul == 2048) { ul = 1024; q++; }
  int he = q + 25;
  if (he >= 31) return s | 0x7c00u;
  return s | ((uint32_t)he << 10) | (uint32_t)(ul & 0x3ff);
}
static inline uint32_t f2h(float x) {
  uint32_t b = f2b(x);
  if ((b & 0x7f800000u) == 0x7f800000u && (b & 0x7fffffu))   /* NaN: keep sign and top payload bits */
    return ((b >> 16) & 0x8000u) | 0x7c00u | ((b >> 13) & 0x3ffu) | (((b >> 13) & 0x3ffu) ? 0 : 0x200u);
  return d2h((double)x);
}
static inline float hr(float x) { return h2f(f2h(x)); }       /* a float rounded to half */
static inline float hrd(double x) { return h2f(d2h(x)); }
static inline double f2d(float x) {  /* keeps a signaling NaN signaling: its payload moved, not quieted as a C cast may */
  uint32_t b = f2b(x);
  if ((b & 0x7f800000u) == 0x7f800000u && (b & 0x7fffffu))
    return b2d(((uint64_t)(b >> 31) << 63) | (0x7ffULL << 52) | ((uint64_t)(b & 0x7fffffu) << 29));
  return (double)x;
}
static inline int64_t d2i(double x) {  /* float -> int64 as x86's cvttsd2si: out of range and NaN give INT64_MIN (C's cast is undefined there) */
  if (!(x > -9223372036854775808.0 && x < 9223372036854775808.0)) return INT64_MIN;
  return (int64_t)x;
}
static inline int64_t sat_i(double x, double lo, double hi) { if (x != x) return 0; x = trunc(x); return (int64_t)(x < lo ? lo : x > hi ? hi : x); }
static inline uint64_t shl(uint64_t a, uint64_t n) { return n >= 64 ? 0 : a << n; }
static inline uint64_t shr(uint64_t a, uint64_t n) { return n >= 64 ? 0 : a >> n; }
static inline int64_t sar(int64_t a, uint64_t n) { return n >= 64 ? (a < 0 ? -1 : 0) : a >> n; }
static inline int64_t ishl(int64_t a, uint64_t n) { return n >= 64 ? 0 : (int64_t)((uint64_t)a << n); }
static inline __int128 wshl(__int128 a, uint64_t n) { return n >= 128 ? 0 : (__int128)((unsigned __int128)a << n); }
static inline __int128 wshr(__int128 a, uint64_t n) { return n >= 128 ? (a < 0 ? -1 : 0) : a >> n; }
static inline uint64_t udiv(uint64_t a, uint64_t b) { return b ? a / b : 0; }
static inline int64_t idiv(int64_t a, int64_t b) { if (!b) return 0; int64_t q = a / b; if ((a % b) && ((a < 0) != (b < 0))) q--; return q; }
static inline uint64_t umod(uint64_t a, uint64_t b) { return b ? a % b : 0; }
static inline int64_t imod(int64_t a, int64_t b) { if (!b) return 0; int64_t r = a % b; if (r && ((r < 0) != (b < 0))) r += b; return r; }
static inline uint64_t brev(uint64_t v, int n) { uint64_t r = 0; for (int i = 0; i < n; i++) r |= ((v >> i) & 1) << (n - 1 - i); return r; }
static inline int isnan_f(double x) { return x != x; }
static inline int qbit_f32(float x) { return (f2b(x) >> 22) & 1; }
static inline int qbit_f64(double x) { return (int)((d2b(x) >> 51) & 1); }
static inline double to_qnan(double x) { return x != x ? b2d(d2b(x) | (1ULL << 51)) : x; }
static inline int sign_f32(float x) { return (f2b(x) >> 31) & 1; }
static inline int sign_f64(double x) { return (int)(d2b(x) >> 63); }
static inline uint64_t exp_f16(float x) { return (f2h(x) >> 10) & 0x1f; }
static inline uint64_t exp_f32(float x) { return (f2b(x) >> 23) & 0xff; }
static inline uint64_t exp_f64(double x) { return (d2b(x) >> 52) & 0x7ff; }
static inline float fma_f32(float a, float b, float c) {  /* one rounding: exact product, sum rounded to odd in double */
  double p = (double)a * (double)b, cc = (double)c, s = p + cc, bb = s - p, err = (p - (s - bb)) + (cc - bb);
  if (err != 0 && s - s == 0 && !(d2b(s) & 1)) s = nextafter(s, err > 0 ? 1.0/0.0 : -1.0/0.0);
  return (float)s;
}
static inline double fma_f64(double a, double b, double c) { return fma(a, b, c); }
static inline uint32_t f2h_rtz(float x) {   /* round toward zero (v_cvt_pk_rtz_f16_f32) */
  uint32_t b = f2b(x);
  if ((b & 0x7f800000u) == 0x7f800000u) return f2h(x);
  uint32_t h = f2h(x);
  if (fabs((double)h2f(h)) > fabs((double)x)) h = (h & 0x7fffu) ? h - 1 : h;   /* rounded away from zero: one step back */
  if ((h & 0x7c00u) == 0x7c00u) h = (h & 0x8000u) | 0x7bffu;                      /* no overflow to infinity */
  return h;
}
static inline int isdenorm_f32(float x) { uint32_t b = f2b(x); return !(b & 0x7f800000u) && (b & 0x7fffffu); }
static inline int isdenorm_f64(double x) { uint64_t b = d2b(x); return !(b & 0x7ff0000000000000ULL) && (b & 0xfffffffffffffULL); }
static inline float mant_f32(float x) { int e; return (x != x || isinf(x)) ? x : frexpf(x, &e); }
static inline double mant_f64(double x) { int e; return (x != x || isinf(x)) ? x : frexp(x, &e); }
static inline float fmax_np_f(float a, float b) { return a != a ? a : b != b ? b : (a >= b ? a : b); }
static inline float fmin_np_f(float a, float b) { return a != a ? a : b != b ? b : (a <= b ? a : b); }
static inline double fmax_np_d(double a, double b) { return a != a ? a : b != b ? b : (a >= b ? a : b); }
static inline double fmin_np_d(double a, double b) { return a != a ? a : b != b ? b : (a <= b ? a : b); }
"""

def _two_over_pi_words() -> list:
  """2/PI as the 1201-bit fraction v_trig_preop reads (bit 1200 the first bit after the point), in 19 u64 words from
  the least significant; pi by Machin's formula in integers, 80 guard bits."""
  prec = 1201 + 80
  def atan_inv(x: int) -> int:   # atan(1/x) * 2**prec
    total, term, k, x2 = 0, (1 << prec) // x, 1, x * x
    while term:
      total += term // k if (k // 2) % 2 == 0 else -(term // k)
      term //= x2
      k += 2
    return total
  pi = 16 * atan_inv(5) - 4 * atan_inv(239)   # pi * 2**prec
  n = (2 << (prec + 1201)) // pi               # floor(2/pi * 2**1201)
  return [(n >> (64 * i)) & MASK64 for i in range(19)]

HEADER += ("static const uint64_t TWO_OVER_PI[19] = {" + ", ".join(f"{w:#x}ULL" for w in _two_over_pi_words()) + "};\n" + r"""
static inline double trig_preop(int64_t shift) {  /* the 53 bits of 2/PI from bit 1148 - shift up, as an integer */
  int64_t pos = 1148 - shift;
  if (pos < 0) pos = 0;
  uint64_t lo = TWO_OVER_PI[pos >> 6], hi = (pos >> 6) + 1 < 19 ? TWO_OVER_PI[(pos >> 6) + 1] : 0;
  int off = (int)(pos & 63);
  uint64_t bits = ((lo >> off) | (off ? hi << (64 - off) : 0)) & 0x1FFFFFFFFFFFFFULL;
  return (double)bits;
}
""")

class CFunction:
  """One opcode's C function `void NAME(Regs *r, int n, uint32_t active)`: `source`; `reads`/`writes` the registers
  (REG_INDEX) it reads and assigns; `lane_bits` those it writes one bit per lane (`VCC.u64[laneId] = ...`)."""
  def __init__(self, name: str, source: str, reads: set, writes: set, lane_bits: set, cross_lane: bool = False,
               d0_width: int = 0):
    self.name, self.source, self.reads, self.writes, self.lane_bits = name, source, reads, writes, lane_bits
    self.cross_lane = cross_lane   # reads or writes VGPR[lane][reg]: runs once per wave, not per lane
    self.d0_width = d0_width       # bits of D0 its writes reach (D0.f16: 16, D0[31 : 16].f16: 32, D0.u64: 64)

# ---- values: (C expression, kind, bit width); kinds u i f16 f32 f64 b w, c (an integer constant: the expression is
# its Python int), cf (a float constant: a Python float), r (raw bits of a register or local container, uint64_t)

class V:
  __slots__ = ("code", "kind", "width", "hex")
  def __init__(self, code, kind: str, width: int = 64, hex: bool = False):  # noqa: A002  (the literal was written in hex)
    self.code, self.kind, self.width, self.hex = code, kind, width, hex   # hex: an integer constant written in hex
  def __repr__(self): return f"V({self.code!r}, {self.kind}, {self.width})"

def _flit(x: float, kind: str) -> str:
  """A float constant as an exact C literal of `kind`."""
  if kind == "f64" or kind == "cf":
    if math.isinf(x): return "(1.0/0.0)" if x > 0 else "(-1.0/0.0)"
    if math.isnan(x): return "(0.0/0.0)"
    return f"({x.hex()})"
  if kind == "f16": x = struct.unpack("<e", struct.pack("<e", x))[0] if abs(x) < 65520 else math.copysign(math.inf, x)
  f = struct.unpack("<f", struct.pack("<f", x))[0] if not math.isinf(x) and abs(x) < 3.4028235677973366e38 else x
  if math.isinf(f): return "(1.0f/0.0f)" if f > 0 else "(-1.0f/0.0f)"
  if math.isnan(f): return "(0.0f/0.0f)"
  return f"({f.hex()}f)"

def join(a: str, b: str) -> str:
  """The kind two operands of an arithmetic operator compute in: a constant or a bool takes the other side's kind, a
  float constant makes an integer side f64, a 65-bit side makes it 65 bits, else the wider float, else signed over
  unsigned."""
  a, b = ("u" if a == "r" else a), ("u" if b == "r" else b)
  if a == b: return a
  if a in ("c", "b"): return b if b not in ("c", "b") else "u" if "c" in (a, b) else "b"
  if b in ("c", "b"): return a
  if "cf" in (a, b):
    o = b if a == "cf" else a
    return "f64" if o in ("i", "u", "w") else o
  if "w" in (a, b): return "w"
  fl = [x for x in (a, b) if x in FLOATS]
  if fl: return "f64" if "f64" in fl else "f32" if "f32" in fl else "f16"
  if "i" in (a, b): return "i"
  return "u"

def conv(e: V, k: str) -> str:
  """e's value as a C expression of kind k (value conversion; raw bits reinterpret as floats)."""
  c, kind = e.code, e.kind
  if kind == k and kind not in ("c", "cf"): return c
  if kind == "c":
    v = c
    if k in FLOATS: return _flit(float(v), k)
    if k == "u": return f"{v & MASK64}ULL"
    if k == "i": return f"((int64_t){v & MASK64}ULL)" if not -2**63 <= v < 2**63 else (f"({v}LL)" if v != -2**63 else "INT64_MIN")
    if k == "w": return f"((__int128){v}LL)" if -2**63 <= v < 2**63 else f"((__int128){v & MASK64}ULL)"
    if k == "b": return "1" if v else "0"
    raise Unsupported(f"constant as {k}")
  if kind == "cf":
    if k in FLOATS: return _flit(c, k)
    if k == "b": return "1" if c else "0"
    if k == "i": return f"({int(c)}LL)"
    if k == "u": return f"({int(c) & MASK64}ULL)"
    raise Unsupported(f"float constant as {k}")
  if kind == "r":
    return {"u": c, "i": f"((int64_t){c})", "f32": f"b2f((uint32_t){c})", "f64": f"b2d({c})", "f16": f"h2f((uint32_t){c} & 0xffff)",
            "b": f"({c} != 0)", "w": f"((__int128)(uint64_t){c})"}[k]
  if k == "b": return f"({c} != 0)"
  if kind in FLOATS:
    if k == "f32": return c if kind == "f16" else f"((float){c})"
    if k == "f64": return f"f2d({c})"   # (an f16 is held in a float: the same bit-exact widening)
    if k == "f16": return f"hr({c})" if kind == "f32" else f"hrd({c})"
    if k == "i": return f"d2i({c})"
    if k == "u": return f"((uint64_t)d2i({c}))"
    if k == "w": return f"((__int128)d2i({c}))"
  if kind in ("u", "i", "b", "w"):
    if k == "f16": return f"hrd((double){c})"
    if k in ("f32", "f64"): return f"(({C_TYPE[k]}){c})"
    if k == "u": return f"((uint64_t){c})"
    if k == "i": return f"((int64_t){c})"
    if k == "w": return f"((__int128){c})" if kind != "u" else f"((__int128)(uint64_t){c})"
  raise Unsupported(f"conversion {kind} -> {k}")

def view(container: str, acc: str) -> V:
  """A typed read of a bit container (register or local)."""
  k, n = ACCESSORS[acc]
  if k == "u": return V(container if n == 64 else f"({container} & {(1 << n) - 1}ULL)", "u", n)
  if k == "i": return V(f"sx({container}, {n})", "i", n)
  return V(conv(V(container, "r"), k), k, n)

def as_acc(e: V, acc: str) -> V:
  """An accessor applied to a value (not a container; `view` reads a container's bits): its bits, sign-extended or
  converted to the accessor's type."""
  k, n = ACCESSORS[acc]
  if e.kind == "r": return view(e.code, acc)
  if k == "u": return V(f"({conv(e, 'u')} & {(1 << n) - 1}ULL)" if n < 64 else conv(e, "u"), "u", n)
  if k == "i": return V(f"sx({conv(e, 'u') if e.kind != 'i' else f'(uint64_t){e.code}'}, {n})", "i", n)
  if e.kind in FLOATS + ("cf",): return V(conv(e, k), k, n)
  return V(conv(V(conv(e, "u"), "r"), k), k, n)   # integer bits as a float

def bits_of(e: V, kind: str) -> str:
  """The raw bits (uint64_t) a write of kind `kind` stores for value e."""
  if kind == "f32": return f"(uint64_t)f2b({conv(e, 'f32')})"
  if kind == "f64": return f"d2b({conv(e, 'f64')})"
  if kind == "f16": return f"(uint64_t)f2h({conv(e, 'f16')})"
  if e.kind in FLOATS + ("cf",): return f"(uint64_t){conv(e, 'i')}"
  if e.kind == "w": return f"(uint64_t)({e.code})"
  return conv(e, "u") if e.kind not in ("b", "c") else conv(e, "u")

def truth(e: V) -> str:
  if e.kind == "b": return e.code
  if e.kind == "c": return "1" if e.code else "0"
  if e.kind == "r": return f"({e.code} != 0)"
  return f"({conv(e, e.kind if e.kind != 'cf' else 'f64')} != 0)"

CMP = {"==", "!=", "<", ">", "<=", ">=", "<>"}
def binop(op: str, a: V, b: V) -> V:
  if op == "||": return V(f"({truth(a)} || {truth(b)})", "b", 1)
  if op == "&&": return V(f"({truth(a)} && {truth(b)})", "b", 1)
  if a.kind == "c" and b.kind == "c":   # constant folding, exact
    x, y = a.code, b.code
    r = {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y, "&": lambda: x & y, "|": lambda: x | y,
         "^": lambda: x ^ y, "<<": lambda: x << y, ">>": lambda: x >> y, "/": lambda: int(x / y) if y else 0,
         "%": lambda: x % y if y else 0, "**": lambda: x ** y}.get(op)
    if r is not None: return V(r(), "c")
    if op in CMP: return V("1" if eval(f"{x} {op.replace('<>', '!=')} {y}") else "0", "b", 1)
  if op in ("<<", ">>"):
    k = a.kind if a.kind not in ("c", "b", "r") else "u"
    if k in FLOATS: k = "u"
    n = conv(b, "u") if b.kind != "w" else f"(uint64_t)({b.code})"
    if k == "u": return V(f"{'shl' if op == '<<' else 'shr'}({conv(a, 'u')}, {n})", "u", a.width if op == ">>" else 64)
    if k == "i": return V(f"{'ishl' if op == '<<' else 'sar'}({conv(a, 'i')}, {n})", "i")
    return V(f"{'wshl' if op == '<<' else 'wshr'}({conv(a, 'w')}, {n})", "w")
  if op == "**":   # 2.0 ** n (ldexp), exact in double
    return V(f"pow({conv(a, 'f64')}, {conv(b, 'f64')})", "f64")
  k = join(a.kind, b.kind)
  if k == "b" and op not in CMP: k = "u"
  if k == "c": k = "i"
  if k == "cf": k = "f64"
  x, y = conv(a, k), conv(b, k)
  w = max(a.width if a.kind not in ("c", "cf") else 0, b.width if b.kind not in ("c", "cf") else 0) or 64
  if op == "<>": return V(f"(({x} < {y}) || ({x} > {y}))" if k in FLOATS else f"({x} != {y})", "b", 1)   # ordered: NaN is not <>
  if op in CMP: return V(f"({x} {op} {y})", "b", 1)
  if op == "/":
    if k in FLOATS: return V(f"({x} / {y})" if k != "f16" else f"hr({x} / {y})", k)
    return V(f"{'udiv' if k == 'u' else 'idiv'}({x}, {y})" if k != "w" else f"({x} / {y})", k)
  if op == "%":
    if k in FLOATS: return V(f"fmod({x}, {y})", k)
    return V(f"{'umod' if k == 'u' else 'imod'}({x}, {y})", k)
  if k in FLOATS and op in "&|^": raise Unsupported(f"bit operator {op} on floats")
  if k == "i" and op in "+-*": return V(f"((int64_t)((uint64_t){x} {op} (uint64_t){y}))", "i", w)   # wraps, no UB
  if k == "f16": return V(f"hr({x} {op} {y})", "f16")
  return V(f"({x} {op} {y})", k, w)

# ---- the math helpers the pseudocode calls

def _f(kind: str) -> str: return "f" if kind == "f32" else ""

def call(name: str, args: list, rtz: bool = False) -> V:
  """A call of a pseudocode function (FUNCS): its C, by the group that knows the name."""
  if not args: raise Unsupported(f"unknown function `{name}`" if name not in FUNCS else f"`{name}` without arguments")
  a = args[0]
  ak = "f64" if a.kind == "cf" else a.kind
  for group in (_call_classify, _call_convert, _call_math):
    if (v := group(name, args, a, ak, rtz)) is not None: return v
  raise Unsupported(f"unknown function `{name}`")

def _call_classify(name: str, args: list, a: V, ak: str, rtz: bool) -> Optional[V]:
  """What a value is: NaN kinds, sign, exponent, mantissa, denormals."""
  if name == "isNAN": return V(f"isnan_f({conv(a, ak if ak in FLOATS else 'f64')})", "b", 1)
  if name in ("isSignalNAN", "isQuietNAN"):
    k = ak if ak in ("f32", "f64") else "f64"
    x = conv(a, k) if ak != "f16" else conv(a, "f64")
    q = f"qbit_{k}({x})"
    return V(f"(isnan_f({x}) && {q} == {0 if name == 'isSignalNAN' else 1})", "b", 1)
  if name == "cvtToQuietNAN": return V(f"to_qnan({conv(a, 'f64')})", "f64")
  if name == "sign":
    if ak in FLOATS: return V(f"sign_{'f64' if ak == 'f64' else 'f32'}({a.code})", "b", 1)
    return V(f"({conv(a, 'i')} < 0)", "b", 1)
  if name == "exponent":
    k = ak if ak in FLOATS else "f32"
    return V(f"(int64_t)exp_{k}({conv(a, k)})", "i", 16)   # signed: exponent differences are compared
  if name == "isDENORM":
    k = "f64" if ak == "f64" else "f32"
    return V(f"isdenorm_{k}({conv(a, k)})", "b", 1)
  if name == "mantissa":
    k = "f64" if ak == "f64" else "f32"
    return V(f"mant_{k}({conv(a, k)})", k)
  if name == "divWouldBeDenorm":
    k = "f64" if ak == "f64" else "f32"
    return V(f"((int64_t)exp_{k}({conv(a, k)}) - (int64_t)exp_{k}({conv(args[1], k)}) < {-1022 if k == 'f64' else -126})", "b", 1)
  return None

def _call_convert(name: str, args: list, a: V, ak: str, rtz: bool) -> Optional[V]:
  """Conversions between widths and number formats, saturating where the pseudocode's names say so."""
  if name == "signext": return V(conv(a, "i") if a.kind != "u" else f"((int64_t){a.code})", "i")
  if name == "abs":
    if ak == "f64": return V(f"fabs({a.code})", "f64")
    if ak in ("f32", "f16"): return V(f"fabsf({a.code})", ak)
    return V(f"llabs({conv(a, 'i')})", "i")
  if name in ("i32_to_f32", "u32_to_f32", "f64_to_f32", "f16_to_f32"): return V(conv(a, "f32"), "f32")
  if name in ("f32_to_f64", "i32_to_f64", "u32_to_f64"): return V(conv(a, "f64") if name != "f32_to_f64" else f"((double){conv(a, 'f32')})", "f64")
  if name in ("f32_to_f16", "f16_to_f16"):
    return V(f"h2f(f2h_rtz({conv(a, 'f32')}))", "f16") if rtz and name == "f32_to_f16" else V(conv(a, "f16"), "f16")
  if name in ("v_cvt_i16_f32", "v_cvt_u16_f32"):
    lo, hi = (-32768.0, 32767.0) if name == "v_cvt_i16_f32" else (0.0, 65535.0)
    return V(f"sat_i({conv(a, 'f64')}, {lo}, {hi})", "i" if "i16" in name else "u", 16)
  if name == "i32_to_i16": return V(f"sx({conv(a, 'u')}, 16)", "i", 16)
  if name == "u32_to_u16": return V(f"({conv(a, 'u')} & 0xffffULL)", "u", 16)
  if name in ("f32_to_i32", "f64_to_i32"): return V(f"sat_i({conv(a, 'f64')}, -2147483648.0, 2147483647.0)", "i", 32)
  if name in ("f32_to_u32", "f64_to_u32"): return V(f"(uint64_t)sat_i({conv(a, 'f64')}, 0.0, 4294967295.0)", "u", 32)
  if name == "signext_from_bit":
    return V(f"sx({conv(a, 'u')}, (int){conv(args[1], 'u')} ? (int){conv(args[1], 'u')} : 64)", "i")
  if name in ("u16_to_f16", "i16_to_f16"): return V(f"hrd((double){conv(a, 'i')})", "f16")
  if name in ("f16_to_i16", "f16_to_u16"):
    lo, hi = (-32768.0, 32767.0) if name == "f16_to_i16" else (0.0, 65535.0)
    return V(f"sat_i({conv(a, 'f64')}, {lo}, {hi})", "i" if name == "f16_to_i16" else "u", 16)
  if name in ("u8_to_u32", "u4_to_u32"): return V(f"({conv(a, 'u')} & {0xff if name == 'u8_to_u32' else 0xf}ULL)", "u", 32)
  if name == "bf16_to_f32": return V(f"b2f((uint32_t)(({conv(a, 'u')} & 0xffff) << 16))", "f32")
  return None

def _call_math(name: str, args: list, a: V, ak: str, rtz: bool) -> Optional[V]:
  """Rounding, the transcendental functions (in double, rounded once), fma, min/max, bit counts."""
  if name == "trunc": return V(f"trunc{_f(ak)}({a.code})" if ak != "f16" else f"truncf({a.code})", ak)
  if name == "floor": return V(f"floor{_f(ak)}({a.code})" if ak != "f16" else f"floorf({a.code})", ak)
  if name == "ceil": return V(f"ceil{_f(ak)}({a.code})" if ak != "f16" else f"ceilf({a.code})", ak)
  if name in ("sqrt", "log2", "exp", "sin", "cos"):
    k = ak if ak in FLOATS else "f64"
    if name == "sqrt" and k == "f32": return V(f"sqrtf({a.code})", "f32")
    d = f"{name}({conv(a, 'f64') if k != 'f64' else a.code})"
    return V(d if k == "f64" else f"((float){d})" if k == "f32" else f"hrd({d})", k)
  if name == "pow":   # pow(2.0, x): exp2 in double, rounded once
    b = args[1]
    k = b.kind if b.kind in FLOATS else "f32"
    d = f"pow({conv(a, 'f64')}, {conv(b, 'f64')})"
    return V(d if k == "f64" else f"((float){d})" if k == "f32" else f"hrd({d})", k)
  if name == "fma":
    k = next((x.kind for x in args if x.kind in FLOATS), "f32")
    if k == "f16": return V(f"hrd(fma({', '.join(conv(x, 'f64') for x in args)}))", "f16")
    return V(f"fma_{k}({', '.join(conv(x, k) for x in args)})", k)
  if name in ("max", "min"):
    k = args[0].kind if args[0].kind not in ("c", "cf", "r") else (args[1].kind if args[1].kind not in ("c", "cf", "r") else "f32")
    k = {"b": "u"}.get(k, k)
    x, y = conv(args[0], k), conv(args[1], k)
    if k in FLOATS:
      f = f"f{name}_np_{'d' if k == 'f64' else 'f'}({x}, {y})"
      return V(f, k)
    return V(f"(({x}) {'>=' if name == 'max' else '<='} ({y}) ? ({x}) : ({y}))", k)
  if name == "isEven": return V(f"((d2i({conv(a, 'f64')}) & 1) == 0)", "b", 1)
  if name == "fract":
    k = ak if ak in FLOATS else "f32"
    f = "floor" if k == "f64" else "floorf"
    x = conv(a, k)
    return V(f"({x} - {f}({x}))" if k != "f16" else f"hr({x} - floorf({x}))", k)
  if name == "ldexp":
    k = ak if ak in FLOATS else "f64"
    e = conv(args[1], 'i')
    return V(f"ldexp{_f(k)}({conv(a, k)}, (int){e})" if k != "f16" else f"hrd(ldexp({conv(a, 'f64')}, (int){e}))", k)
  if name == "trig_preop_result": return V(f"trig_preop({conv(a, 'i')})", "f64")
  if name == "countbits": return V(f"(uint64_t)__builtin_popcountll({conv(a, 'u')})", "u", 32)
  if name == "reverse_bits": return V(f"brev({conv(a, 'u')}, {a.width})", "u", a.width)
  return None

FUNCS = {"isNAN", "isSignalNAN", "isQuietNAN", "cvtToQuietNAN", "sign", "exponent", "signext", "abs", "i32_to_f32",
         "u32_to_f32", "f64_to_f32", "f16_to_f32", "f32_to_f64", "i32_to_f64", "u32_to_f64", "f32_to_f16", "f32_to_i32",
         "f64_to_i32", "f32_to_u32", "f64_to_u32", "trunc", "floor", "ceil", "sqrt", "log2", "exp", "sin", "cos", "pow",
         "fma", "max", "min", "isEven", "fract", "ldexp", "signext_from_bit", "u16_to_f16", "i16_to_f16", "f16_to_i16",
         "f16_to_u16", "countbits", "reverse_bits", "u8_to_u32", "u4_to_u32", "bf16_to_f32", "isDENORM", "mantissa",
         "v_cvt_i16_f32", "v_cvt_u16_f32", "i32_to_i16", "u32_to_u16", "divWouldBeDenorm", "trig_preop_result"}
# constants read with an accessor (`NAN.f32`) or bare: (f32 bits, f64 bits)
FLOAT_CONSTS = {"NAN": (0x7FC00000, 0x7FF8000000000000), "UNDERFLOW_F32": (1, None), "OVERFLOW_F32": (0x7F7FFFFF, None),
                "UNDERFLOW_F64": (None, 1), "OVERFLOW_F64": (None, 0x7FEFFFFFFFFFFFFF)}
CONSTS = {"PI": V(math.pi, "cf"), "INF": V(math.inf, "cf"), "MAX_FLOAT_F32": V(3.4028234663852886e38, "cf"),
          "WAVE32": V(1, "c"), "WAVE64": V(0, "c")}

# ---- the translator

class _Fn:
  """Translation state of one function: locals (bit containers with the kind of their last value), declared arrays,
  lambdas, the registers touched, the lines."""
  def __init__(self, resolve: Optional[Callable]):
    self.lines: list = []
    self.locals: dict = {}      # name -> kind of its value
    self.arrays: dict = {}      # name -> (kind, length)
    self.lambdas: dict = {}
    self.params: dict = {}      # name -> V (loop variables, lambda parameters)
    self.reads: set[str] = set()       # the registers (REG_INDEX) read
    self.writes: set[str] = set()      # and written
    self.lane_bits: set[str] = set()   # written one bit per lane
    self.resolve, self.n, self.depth = resolve, 0, 1
    self.decl_order: list = []  # (name, kind) of the locals, in order of first assignment
    self.ret: Optional[tuple[str, list, str]] = None   # inside a lambda body with statements: (result variable, [its kind], end label)
    self.rtz = False            # ROUND_MODE = ROUND_TOWARD_ZERO in effect
    self.vgpr = False           # reads or writes VGPR[lane][reg] (cross-lane)
    self.d0_width = 0           # the highest bit of D0 a write reaches, + 1

  def tmp(self) -> str:
    self.n += 1
    return f"_t{self.n}"

  def emit(self, s: str): self.lines.append("  " * self.depth + s)

  def container(self, name: str) -> str:
    if name in REG_INDEX:
      self.reads.add(name)
      return name
    if name in self.locals: return f"L_{name}"
    raise Unsupported(f"unknown name `{name}`")

class _Expr:
  """Expression parser (precedence climbing) over one statement's tokens."""
  BIN = [("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!=", "<>"), ("<", ">", "<=", ">="), ("<<", ">>"), ("+", "-"),
         ("*", "/", "%"), ("**",)]
  def __init__(self, toks: list, fn: _Fn):
    self.t, self.i, self.fn = toks, 0, fn
  def peek(self, k: int = 0): return self.t[self.i + k][1] if self.i + k < len(self.t) else None
  def peek_kind(self, k: int = 0): return self.t[self.i + k][0] if self.i + k < len(self.t) else None
  def next(self):
    tok = self.t[self.i]
    self.i += 1
    return tok
  def lane_and_reg(self) -> tuple:
    """`[lane][reg]` after `VGPR` (v_readlane's read, v_writelane's target): the two index expressions."""
    self.next()
    lane = self.expr(0)
    self.expect("]")
    self.expect("[")
    reg = self.expr(0)
    self.expect("]")
    return lane, reg

  def expect(self, v):
    if self.peek() != v: raise Unsupported(f"expected {v!r}, got {self.peek()!r}")
    self.i += 1

  def expr(self, level: int = 0) -> V:
    if level == 0:
      c = self.expr(1)
      if self.peek() == "?":
        self.next()
        a = self.expr(0)
        self.expect(":")
        b = self.expr(0)
        k = join(a.kind, b.kind)
        k = {"c": "i", "cf": "f64", "b": "u" if "b" not in (a.kind, b.kind) or a.kind != b.kind else "b"}.get(k, k)
        if a.kind == "c" and b.kind == "c": k = "i"
        return V(f"({truth(c)} ? {conv(a, k)} : {conv(b, k)})", k, max(a.width, b.width))
      return c
    if level > len(self.BIN): return self.unary()
    lhs = self.expr(level + 1)
    while self.peek() in self.BIN[level - 1]:
      op = self.next()[1]
      lhs = binop(op, lhs, self.expr(level + 1))
    return lhs

  def unary(self) -> V:
    v = self.peek()
    if v == "-":
      self.next()
      a = self.unary()
      if a.kind == "c": return V(-a.code, "c")
      if a.kind == "cf": return V(-a.code, "cf")
      k = "i" if a.kind in ("u", "r", "b") else a.kind
      return V(f"(-{conv(a, k)})", k, a.width)
    if v == "+":
      self.next()
      return self.unary()
    if v == "!":
      self.next()
      a = self.unary()
      return V(f"(!{truth(a)})", "b", 1)
    if v == "~":
      self.next()
      a = self.unary()
      if a.kind == "c": return V(~a.code, "c")
      k = a.kind if a.kind in ("i", "w") else "u"
      return V(f"(~{conv(a, k)})", k, a.width)
    return self.postfix(self.primary())

  def args(self) -> list:
    out = []
    while self.peek() != ")":
      out.append(self.expr(0))
      if self.peek() == ",": self.next()
    self.next()
    return out

  def primary(self) -> V:
    kind, v = self.next()
    if v == "(":
      e = self.expr(0)
      self.expect(")")
      return e
    if v == "{": return self.concat()
    if kind == "cast": return self.cast(v)
    if kind == "sized":
      n, val = v.split("'")
      if val.endswith("F"): return V(float(val[:-1]), "cf")
      val = val.rstrip("UI")
      if "." in val: return V(float(val), "cf")
      return V(int(val, 0), "c", int(n))
    if kind == "num":
      s = v.rstrip("LUF") if not v.startswith("0x") else v.rstrip("LU")
      if "." in v or (v.endswith("F") and not v.startswith("0x")): return V(float(s), "cf")
      return V(int(s, 0), "c", 64, v.startswith("0x"))
    if kind == "type": raise Unsupported(f"type {v} in an expression")
    if kind != "id": raise Unsupported(f"unexpected {v!r}")
    return self.name(v)

  def concat(self) -> V:
    """`{ hi, lo }` (its `{` read): bit concatenation, widths from the parts."""
    parts = [self.expr(0)]
    while self.peek() == ",":
      self.next()
      parts.append(self.expr(0))
    self.expect("}")
    code, shift = [], 0
    for p in reversed(parts):
      if p.kind in ("c", "cf") and p.width >= 64: raise Unsupported("a constant of unknown width in a concatenation")
      mask = (1 << p.width) - 1 if p.width < 64 else MASK64
      code.append(f"((unsigned __int128)({conv(p, 'u') if p.kind != 'w' else p.code} & {mask}ULL) << {shift})")
      shift += p.width
    if shift > 64: return V(f"((__int128)({' | '.join(code)}))", "w", shift)
    return V(f"((uint64_t)({' | '.join(code)}))", "u", shift)

  def cast(self, v: str) -> V:
    """`N'T(e)` (its `N'T(` read): e as N bits of type T (F a float, I a signed integer, else unsigned)."""
    bits, t = v.split("'")
    e = self.expr(0)
    self.expect(")")
    n = int(bits)
    if t == "F":
      k = {16: "f16", 32: "f32", 64: "f64"}[n]
      if e.kind == "c" and e.hex: return V(conv(V(str(e.code & MASK64) + "ULL", "r"), k), k, n)   # 32'F(0xffc00000): those bits
      return V(conv(e, k), k, n)
    if n > 64:
      if e.kind == "cf": raise Unsupported("a float as a wide integer")
      return V(conv(e, "w"), "w", n)
    if t == "I":
      src = conv(e, "u") if e.kind != "i" else f"(uint64_t){e.code}"
      return V(f"sx({src}, {n})", "i", n)
    if e.kind in FLOATS: src = f"(uint64_t){conv(e, 'i')}"   # a float's unsigned bits: truncated to an integer first
    else: src = conv(e, "u") if e.kind != "w" else f"(uint64_t)({e.code})"
    return V(f"({src} & {(1 << n) - 1 if n < 64 else MASK64}ULL)" if n < 64 else src, "u", n)

  def name(self, v: str) -> V:
    """A name in an expression: a call, a constant, a register, a lane's VGPR, a parameter, an array cell, a local."""
    fn = self.fn
    if v in fn.lambdas and self.peek() == "(":
      self.next()
      return self.call_lambda(v, self.args())
    if v in FUNCS and self.peek() == "(":
      self.next()
      return call(v, self.args(), fn.rtz)
    if v[:2] in ("v_", "s_") and self.peek() == "(":
      self.next()
      return self.call_op(v, self.args())
    if v in FLOAT_CONSTS:
      f32, f64 = FLOAT_CONSTS[v]
      if self.peek() == "." and self.peek(1) in ("f32", "f64", "f16"):
        self.next()
        acc = self.next()[1]
        if acc == "f16": raise Unsupported(f"{v}.f16")
        bits = f32 if acc == "f32" else f64
        if bits is None: raise Unsupported(f"{v}.{acc}")
        return V(f"b2f({bits}u)", "f32") if acc == "f32" else V(f"b2d({bits}ULL)", "f64")
      return V(f"b2f({f32}u)", "f32") if f32 is not None else V(f"b2d({f64}ULL)", "f64")
    if v == "EXEC_LO":
      fn.reads.add("EXEC")
      return V("(EXEC & 4294967295ULL)", "u", 32)
    if v == "VGPR" and self.peek() == "[":
      lane, reg = self.lane_and_reg()
      fn.vgpr = True
      return V(f"((uint64_t)r->vgpr[(({conv(reg, 'u')}) & 255) * 32 + (({conv(lane, 'u')}) & 31)])", "r")
    if v == "WAVE_MODE":
      self.expect(".")
      f = self.next()[1]
      if f != "IEEE": raise Unsupported(f"WAVE_MODE.{f}")
      return V("r->ieee", "b", 1)
    if v in fn.params: return fn.params[v]
    if v in CONSTS: return CONSTS[v]
    if v == "laneId": return V("(uint64_t)laneId", "u", 32)
    if v in fn.arrays:
      (ak, aw), length = fn.arrays[v]
      self.expect("[")
      i = self.expr(0)
      self.expect("]")
      idx = conv(i, "i")
      cell = f"L_{v}[({idx}) & {length - 1}]" if length & (length - 1) == 0 else f"L_{v}[(uint64_t)({idx}) % {length}]"
      if self.peek() in (".", "["): return V(cell, "r")   # typed or sliced: its bits
      return V(conv(V(cell, "r"), ak), ak, aw)
    if v in REG_INDEX:
      fn.reads.add(v)
      return V(v, "r")
    if v in fn.locals:
      k = fn.locals[v]
      if self.peek() in (".", "["): return V(f"L_{v}", "r")   # typed or sliced: its bits
      return V(f"L_{v}", "r") if k == "r" else V(conv(V(f"L_{v}", "r"), k), k)
    raise Unsupported(f"unknown name `{v}`")

  def postfix(self, e: V) -> V:
    while True:
      if self.peek() == "." and self.peek_kind(1) == "id" and self.peek(1) in ACCESSORS:
        self.next()
        acc = self.next()[1]
        e = as_acc(e, acc)
      elif self.peek() == "[":
        self.next()
        if self.peek() == "laneId" and self.peek(1) == "]":
          self.next()
          self.next()
          e = V(f"(({conv(e, 'u') if e.kind != 'r' else e.code} >> laneId) & 1ULL)", "u", 1)
          continue
        hi = self.expr(0)
        src = e.code if e.kind == "r" else conv(e, "u") if e.kind != "w" else e.code
        if self.peek() == ":":
          self.next()
          lo = self.expr(0)
          self.expect("]")
          if hi.kind != "c" or lo.kind != "c":   # variable bounds (a loop's bytes): hi >= lo
            if e.kind == "w": raise Unsupported("a variable bit slice of a wide value")
            l, h = conv(lo, "u"), conv(hi, "u")
            e = V(f"(shr({src}, {l}) & (shl(1ULL, {h} - {l} + 1) - 1))", "u")
            continue
          h, l = hi.code, lo.code
          if e.kind == "w":
            e = V(f"((uint64_t)((unsigned __int128)({src}) >> {l}) & {(1 << (h - l + 1)) - 1 if h - l < 63 else MASK64}ULL)", "u", h - l + 1)
          elif h >= l:
            mask = (1 << (h - l + 1)) - 1 if h - l < 63 else MASK64
            e = V(f"(({src} >> {l}) & {mask}ULL)" if (h, l) != (63, 0) else src, "u", h - l + 1)
          else: e = V(f"brev(({src} >> {h}) & {(1 << (l - h + 1)) - 1 if l - h < 63 else MASK64}ULL, {l - h + 1})", "u", l - h + 1)
        else:
          self.expect("]")
          e = V(f"(shr({src}, {conv(hi, 'u')}) & 1ULL)", "u", 1) if e.kind != "w" else V(f"((uint64_t)wshr({src}, {conv(hi, 'u')}) & 1ULL)", "u", 1)
      else: return e

  def call_lambda(self, name: str, args: list) -> V:
    params, body = self.fn.lambdas[name]
    fn = self.fn
    saved = dict(fn.params)
    decl = []
    for p, a in zip(params, args):
      k = a.kind if a.kind not in ("c", "cf") else ("i" if a.kind == "c" else "f64")
      t = fn.tmp()
      decl.append(f"{C_TYPE['u' if k == 'r' else k]} {t} = {conv(a, k) if k != 'r' else a.code};")
      fn.params[p] = V(t, k, a.width)
    try:
      stmts = split_statements(body)
      if len(stmts) == 1 and not any(tok[0] == "id" and tok[1] in ("return", "declare", "for") for tok in stmts[0]):
        r = _Expr(stmts[0], fn).expr(0)
        k = r.kind if r.kind not in ("c", "cf") else ("i" if r.kind == "c" else "f64")
        code, w = f"{conv(r, k) if k != 'r' else r.code};", r.width
      else: code, k, w = self.lambda_statements(stmts)
    finally: fn.params = saved
    return V(f"({{ {' '.join(decl)} {code} }})", k, w)

  def lambda_statements(self, stmts: list) -> tuple:
    """A lambda body of statements (declare, for, if and `return`s: BYTE_PERMUTE, SAT8): C statements inside the
    statement expression, each `return` storing the result's bits and jumping to the end."""
    fn = self.fn
    res, end = fn.tmp(), fn.tmp()
    saved_lines, saved_depth, saved_ret = fn.lines, fn.depth, fn.ret
    fn.lines, fn.depth, fn.ret = [], 0, (res, [None, 64], end)
    try:
      _Block(fn).block(stmts)
      lines, (k, w) = fn.lines, fn.ret[1]
    finally: fn.lines, fn.depth, fn.ret = saved_lines, saved_depth, saved_ret
    if k is None: raise Unsupported("a lambda without `return`")
    value = V(res, "r") if k == "r" else V(conv(V(res, "r"), k), k)
    return f"uint64_t {res} = 0; {' '.join(l.strip() for l in lines)} {end}: ; {value.code};", k, w

  def call_op(self, name: str, args: list) -> V:
    """Another opcode's pseudocode, its sources the arguments' bits, its D0 the value (in D0's number format)."""
    got = self.fn.resolve(name) if self.fn.resolve is not None else None
    if got is None: raise Unsupported(f"unknown opcode `{name}`")
    pcode, fmt = got
    inner = _Fn(self.fn.resolve)
    inner.depth = 0
    srcs = {f"S{i}": a for i, a in enumerate(args)}
    body_lines = _translate_body(pcode, inner, inline=True)
    if inner.writes - {"D0"}: raise Unsupported(f"`{name}` called for more than its D0")
    decl, bind = [], []   # the arguments into temporaries first: `uint64_t S0 = f(S0)` would read the new S0
    for r in sorted(inner.reads | {"D0"}):
      if r in srcs:
        a = srcs[r]
        bits = bits_of(a, a.kind) if a.kind in FLOATS else (f"(uint64_t)f2b({conv(a, 'f32')})" if a.kind == "cf" else
                                                            a.code if a.kind == "r" else conv(a, "u"))
        t = self.fn.tmp()
        decl.append(f"uint64_t {t} = {bits};")
        bind.append(f"uint64_t {r} = {t};")
      elif r == "D0": bind.append("uint64_t D0 = 0;")
      else: self.fn.reads.add(r)   # a register of the enclosing function (IEEE mode, laneId are in scope)
    decl += bind
    locs = " ".join(body_lines)
    k = fmt[0]
    n = int(fmt[1:]) if fmt[1:].isdigit() else 32
    acc = f"{'f' if k == 'F' else 'i' if k == 'I' else 'u'}{n}"
    res = view("D0", {"F": f"f{n}", "I": f"i{n}", "U": f"u{n}", "B": f"u{n}"}[k] if acc in ACCESSORS else "u32")
    return V(f"({{ {' '.join(decl)} {locs} {res.code}; }})", res.kind, res.width)

def _translate_body(pcode: str, fn: _Fn, inline: bool = False) -> list:
  """Translate pseudocode into fn's lines; returns the C statements (declarations of locals first)."""
  stmts = statements(pcode)
  _Block(fn).block(stmts)
  decls = []
  for name, k in fn.decl_order: decls.append(f"uint64_t L_{name} = 0;")
  for name, (_, n) in fn.arrays.items(): decls.append(f"uint64_t L_{name}[{n}] = {{0}};")
  return decls + [l.strip() if inline else l for l in fn.lines]

class _Block:
  def __init__(self, fn: _Fn):
    self.fn, self.loops = fn, 0

  def local(self, name: str, kind: str):
    fn = self.fn
    if name not in fn.locals: fn.decl_order.append((name, kind))
    fn.locals[name] = kind

  def block(self, stmts: list):
    fn = self.fn
    i = 0
    while i < len(stmts):
      s = stmts[i]
      head = s[0][1] if s[0][0] == "id" else None
      if head == "if":
        i = self.if_chain(stmts, i)
        continue
      if head in ("then", "elsif", "else", "endif"): raise Unsupported(f"stray `{head}`")
      if head == "declare":
        if len(s) == 4 and s[2][1] == ":" and s[3][0] == "type":
          n, t = s[3][1].split("'")
          self.local(s[1][1], {"U": "u", "B": "u", "I": "i"}.get(t) or {16: "f16", 32: "f32", 64: "f64"}[int(n)])
        elif len(s) == 7 and s[2][1] == ":" and s[3][0] == "type" and s[4][1] == "[" and s[6][1] == "]":
          n, t = s[3][1].split("'")
          name, length = s[1][1], int(s[5][1])
          fn.arrays[name] = (({"U": "u", "B": "u", "I": "i"}.get(t) or {16: "f16", 32: "f32", 64: "f64"}[int(n)], int(n)), length)
          if name == "S" and length == 3:   # the sources as an array (v_fma_mix_*): S[i] is Si
            fn.reads.update(("S0", "S1", "S2"))
            fn.emit("L_S[0] = S0; L_S[1] = S1; L_S[2] = S2;")
        else: raise Unsupported("`declare` form")
        i += 1
        continue
      if head == "for":
        i = self.loop(stmts, i)
        continue
      if head == "break":
        if not self.loops: raise Unsupported("`break` outside a loop")
        fn.emit("break;")
        i += 1
        continue
      if head == "return" and fn.ret is not None:
        res, kind, end = fn.ret
        e = _Expr(s[1:], fn).expr(0)
        if kind[0] is None: kind[0] = e.kind if e.kind not in ("c", "cf", "b") else ("u" if e.kind != "cf" else "f64")
        if e.width < 64 and kind[1] >= 64: kind[1] = e.width
        k = kind[0]
        val = bits_of(e, k) if k in FLOATS else e.code if e.kind == 'r' else conv(e, 'u') if e.kind != 'w' else f'(uint64_t)({e.code})'
        fn.emit(f"{res} = {val}; goto {end};")
        i += 1
        continue
      if head in ("case", "while", "endfor", "return"): raise Unsupported(f"`{head}`")
      if head == "ROUND_MODE" or (len(s) == 3 and s[2][1] == "ROUND_MODE"):   # only v_cvt_pk_rtz_f16_f32 sets it
        if s[-1][1] == "ROUND_TOWARD_ZERO": fn.rtz = True
        elif head == "ROUND_MODE": fn.rtz = False
        i += 1
        continue
      if len(s) >= 2 and s[1][1] == "<=" and head and head.islower():  # s_waitcnt's `x <= y`
        i += 1
        continue
      self.statement(s)
      i += 1

  def if_chain(self, stmts: list, i: int) -> int:
    """if/elsif/else/endif starting at stmts[i]: branches whose condition is a constant (WAVE32, WAVE64) are decided
    here, the others become C's if / else if / else. Returns the index after `endif`."""
    fn, branches, depth, j, cur = self.fn, [], 0, i, None
    while True:   # [(condition tokens or None for else, first statement, end)]
      if j >= len(stmts): raise Unsupported("`if` without `endif`")
      h = stmts[j][0][1] if stmts[j][0][0] == "id" else None
      if h == "if" and depth == 0 and j == i or (h in ("elsif", "else", "endif") and depth == 0):
        if cur is not None: branches.append((cur[0], cur[1], j))
        if h == "endif": break
        if h == "else":
          cur = (None, j + 1)
          j += 1
          continue
        if j + 2 >= len(stmts) or stmts[j + 2][0][1] != "then": raise Unsupported("`if` without `then`")
        cur = (stmts[j + 1], j + 3)
        j += 3
        continue
      if h == "if": depth += 1
      elif h == "endif": depth -= 1
      j += 1
    opened = False
    for cond, lo, hi in branches:
      c = "1" if cond is None else truth(_Expr(cond, fn).expr(0))
      if c == "0": continue
      if c == "1" and not opened:
        self.block(stmts[lo:hi])
        break
      fn.emit(("} else " if opened else "") + (f"if ({c}) {{" if c != "1" else "{"))
      fn.depth += 1
      self.block(stmts[lo:hi])
      fn.depth -= 1
      opened = True
      if c == "1": break
    if opened: fn.emit("}")
    return j + 1

  def loop(self, stmts: list, i: int) -> int:
    s, fn = stmts[i], self.fn
    if len(s) < 6 or s[2][1] != "in" or s[-1][1] != "do": raise Unsupported("`for` form")
    var, rng, depth, cut = s[1][1], s[3:-1], 0, None
    for j, t in enumerate(rng):
      depth += (t[1] == "(" or t[0] == "cast") - (t[1] == ")")
      if t[1] == ":" and depth == 0 and cut is None and not any(x[1] == "?" for x in rng[:j]): cut = j
    if cut is None: raise Unsupported("`for` bounds")
    lo, hi = (_Expr(part, fn).expr(0) for part in (rng[:cut], rng[cut + 1:]))
    depth, j = 1, i + 1
    while depth:
      if j >= len(stmts): raise Unsupported("`for` without `endfor`")
      h = stmts[j][0][1]
      depth += (h == "for") - (h == "endfor")
      j += 1
    t = fn.tmp()
    saved = fn.params.get(var)
    fn.params[var] = V(t, "i", 32)
    fn.emit(f"for (int64_t {t} = {conv(lo, 'i')}; {t} <= {conv(hi, 'i')}; {t}++) {{")
    fn.depth += 1
    self.loops += 1
    self.block(stmts[i + 1:j - 1])
    fn.depth -= 1
    self.loops -= 1
    fn.emit("}")
    if saved is None: fn.params.pop(var)
    else: fn.params[var] = saved
    return j

  def statement(self, toks: list):
    fn = self.fn
    if len(toks) > 3 and toks[1][1] == "=" and toks[2][1] == "lambda": return self.lambda_def(toks)   # NAME = lambda(a, b) (expr)
    if toks[0][1] == "{": return self.concat_assign(toks)   # { D1.u1, D0.u64 } = 65'B(...)
    p = _Expr(toks, fn)
    name = p.next()[1]
    acc = lane = idx = None
    sl: Union[tuple[int, int], V, None] = None   # a bit slice [hi : lo], or one bit at a position
    if name == "VGPR" and p.peek() == "[":   # VGPR[lane][reg] = value (v_writelane)
      ln, reg = p.lane_and_reg()
      p.expect("=")
      e = p.expr(0)
      fn.vgpr = True
      fn.emit(f"r->vgpr[(({conv(reg, 'u')}) & 255) * 32 + (({conv(ln, 'u')}) & 31)] = (uint32_t)({conv(e, 'u') if e.kind != 'r' else e.code});")
      return
    if name in fn.arrays:
      p.expect("[")
      idx = p.expr(0)
      p.expect("]")
    while p.peek() in (".", "["):
      if p.peek() == ".":
        p.next()
        acc = p.next()[1]
      else:
        p.next()
        if p.peek() == "laneId" and p.peek(1) == "]":
          p.next()
          p.next()
          lane = True
        else:
          hi = p.expr(0)
          if p.peek() == ":":
            p.next()
            lo = p.expr(0)
            p.expect("]")
            if hi.kind != "c" or lo.kind != "c": raise Unsupported("a bit slice with variable bounds")
            sl = (hi.code, lo.code)
          else:  # one bit, possibly at a variable position
            p.expect("]")
            sl = hi
    op = p.next()[1]
    if op not in ("=", "+=", "-=", "|=", "&="): raise Unsupported(f"statement `{name} {op}`")
    e = p.expr(0)
    if p.i != len(toks): raise Unsupported(f"trailing {toks[p.i][1]!r}")
    if idx is not None:   # an array element
      (k, _), n = fn.arrays[name]
      cur = V(conv(V(f"L_{name}[{conv(idx, 'i')}]", "r"), k), k)
      if op != "=": e = binop(op[0], cur, e)
      fn.emit(f"L_{name}[{conv(idx, 'i')}] = {bits_of(e, k) if k in FLOATS else conv(e, 'u') if e.kind != 'w' else f'(uint64_t)({e.code})'};")
      return
    if op != "=":   # X.f32 += e  ==  X.f32 = X.f32 + e
      if name in REG_INDEX or acc is not None: cur = view(fn.container(name), acc) if acc else V(fn.container(name), "r")
      elif name in fn.locals:
        k = fn.locals[name]
        cur = V(f"L_{name}", "r") if k == "r" else V(conv(V(f"L_{name}", "r"), k), k)
      else: raise Unsupported(f"`{op}` on an unknown name `{name}`")
      e = binop(op[0], cur, e)
    self.write(name, sl, e, acc, lane)

  def lambda_def(self, toks: list) -> None:
    """`NAME = lambda(a, b) (expr)`: kept as tokens, expanded where it is called"""
    fn = self.fn
    p = _Expr(toks, fn)
    p.i = 3
    p.expect("(")
    params = []
    while p.peek() != ")":
      params.append(p.next()[1])
      if p.peek() == ",": p.next()
    p.next()
    p.expect("(")
    depth, j = 1, p.i
    while depth:
      v = toks[j][1]
      depth += (v == "(" or toks[j][0] == "cast") - (v == ")")
      j += 1
    fn.lambdas[toks[0][1]] = (params, toks[p.i:j - 1])

  def concat_assign(self, toks: list) -> None:
    """`{ D1.u1, D0.u64 } = 65'B(...)`: one wide value split over the named registers, the last the lowest bits"""
    fn = self.fn
    parts, i = [], 1
    while toks[i][1] != "}":
      if toks[i][1] == ",":
        i += 1
        continue
      parts.append((toks[i][1], toks[i + 2][1]))
      i += 3
    if toks[i + 1][1] != "=": raise Unsupported("concatenated target without `=`")
    p = _Expr(toks, fn)
    p.i = i + 2
    e = p.expr(0)
    t = fn.tmp()
    fn.emit(f"unsigned __int128 {t} = (unsigned __int128)({conv(e, 'w') if e.kind != 'w' else e.code});")
    shift = 0
    for reg, acc in reversed(parts):
      n = ACCESSORS[acc][1]
      self.write(reg, None, V(f"(uint64_t)(({t} >> {shift}) & {(1 << n) - 1 if n < 64 else MASK64}ULL)", "u", n), acc)
      shift += n

  def write(self, name: str, sl, e: V, acc: Optional[str], lane=None):
    fn = self.fn
    if name in REG_INDEX:
      if name not in WRITABLE: raise Unsupported(f"write to {name}")
      fn.writes.add(name)
      fn.reads.add(name)
      c = name
      if name == "D0":
        w = (sl[0] + 1) if isinstance(sl, tuple) else 64 if sl is not None or lane else ACCESSORS[acc][1] if acc else 0
        fn.d0_width = max(fn.d0_width, w)
    else:
      if name in fn.params: raise Unsupported(f"write to `{name}`")
      if name not in fn.locals:
        if acc is None and sl is None and not lane:   # a new value-typed local
          k = e.kind if e.kind not in ("c", "cf", "b") else ("i" if e.kind == "c" else "f64" if e.kind == "cf" else "u")
          if k == "w": raise Unsupported(f"a 65-bit local `{name}`")
          self.local(name, k)
        else: self.local(name, "r")
      elif acc is None and sl is None and not lane and fn.locals[name] != "r":
        k = e.kind if e.kind not in ("c", "cf", "b") else fn.locals[name]
        if k == "w": raise Unsupported(f"a 65-bit local `{name}`")
        fn.locals[name] = k
      c = f"L_{name}"
    if lane:
      fn.lane_bits.add(name)
      fn.emit(f"{c} = ({c} & ~(1ULL << laneId)) | (({conv(e, 'u') if e.kind != 'b' else f'(uint64_t){e.code}'} & 1ULL) << laneId);")
      return
    if isinstance(sl, tuple):
      hi, lo = sl
      m = ((1 << (hi - lo + 1)) - 1) << lo
      k = ACCESSORS[acc][0] if acc else "u"
      bits = bits_of(e, k) if k in FLOATS else (conv(e, "u") if e.kind != "w" else f"(uint64_t)({e.code})")
      fn.emit(f"{c} = ({c} & {~m & MASK64}ULL) | ((({bits}) << {lo}) & {m & MASK64}ULL);")
      return
    if sl is not None:   # one bit at a variable position
      pos = conv(sl, "u")
      fn.emit(f"{c} = ({c} & ~shl(1ULL, {pos})) | shl(({conv(e, 'u') if e.kind != 'b' else f'(uint64_t){e.code}'}) & 1ULL, {pos});")
      return
    if name == "SCC" and acc is None:
      fn.emit(f"SCC = {f'({e.code} & 1ULL)' if e.kind == 'u' else f'(uint64_t)({truth(e)})'};")
      return
    if name == "PC" and acc is None:
      fn.emit(f"PC = (uint64_t){conv(e, 'i')};")
      return
    if name not in REG_INDEX and acc is None:   # a value-typed local
      k = fn.locals[name]
      if k == "r": fn.emit(f"{c} = {bits_of(e, e.kind) if e.kind in FLOATS else conv(e, 'u') if e.kind != 'w' else f'(uint64_t)({e.code})'};")
      else: fn.emit(f"{c} = {bits_of(e, k) if k in FLOATS else conv(e, 'u') if e.kind not in ('w',) else f'(uint64_t)({e.code})'};")
      return
    k, n = ACCESSORS[acc or "b64"]
    if k in FLOATS: bits = bits_of(e, k)
    elif e.kind in FLOATS + ("cf",): bits = f"((uint64_t){conv(e, 'i')} & {(1 << n) - 1 if n < 64 else MASK64}ULL)"
    elif e.kind == "w": bits = f"((uint64_t)({e.code}) & {(1 << n) - 1 if n < 64 else MASK64}ULL)"
    else: bits = f"({conv(e, 'u')} & {(1 << n) - 1 if n < 64 else MASK64}ULL)" if n < 64 else conv(e, "u")
    if n < 64 and k in FLOATS: bits = f"({bits} & {(1 << n) - 1}ULL)"
    if n < 64: fn.emit(f"{c} = ({c} & {~((1 << n) - 1) & MASK64}ULL) | {bits};")   # a narrow write keeps the upper bits
    else: fn.emit(f"{c} = {bits};")

def translate(pcode: str, name: str, resolve: Optional[Callable] = None) -> CFunction:
  """`void NAME(Regs *r, int n, uint32_t active)`: pcode run for each active lane of n, over the register block.
  `resolve(opcode name)` gives (pseudocode, D0 number format) of an opcode the pseudocode calls by name."""
  fn = _Fn(resolve)
  try: body = _translate_body(pcode, fn)
  except Unsupported: raise
  except Exception as e: raise Unsupported(f"untranslatable pseudocode ({type(e).__name__}: {e})") from None
  regs = sorted(fn.reads | fn.writes, key=REG_INDEX.__getitem__)
  load = " ".join(f"uint64_t {r} = r->r[{REG_INDEX[r]}][laneId];" for r in regs)
  store = " ".join(f"r->r[{REG_INDEX[r]}][laneId] = {r};" for r in sorted(fn.writes, key=REG_INDEX.__getitem__))
  src = (f"void {name}(Regs *r, int n, uint32_t active) {{\n"
         f"  for (int laneId = 0; laneId < n; laneId++) {{\n    if (!((active >> laneId) & 1)) continue;\n"
         f"    {load}\n" + "\n".join("  " + l for l in body) + f"\n    {store}\n  }}\n}}\n")
  return CFunction(name, src, set(fn.reads | fn.writes), set(fn.writes), set(fn.lane_bits), fn.vgpr, fn.d0_width)
