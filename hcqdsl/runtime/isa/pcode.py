"""Reading AMD's instruction pseudocode (the `PCODE` tables shipped in tinygrad.runtime.autogen.amd.*.str_pcode):
tokens, statements, the typed accessors. pcode_c.py translates what this reads into C.

A statement is a list of (kind, text) tokens; kinds: cast (`32'U(` opens a cast), type (`32'U`), sized (`16'4`),
num, id, op. `Unsupported` names a construct a translator cannot take (the executor faults naming it).
"""
from __future__ import annotations
import re

__all__ = ["Unsupported", "statements", "split_statements", "ACCESSORS", "KEYWORDS", "ERRATA", "corrected"]

class Unsupported(Exception): pass

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
KEYWORDS = {"if", "then", "elsif", "else", "endif"}

# The shipped pseudocode of a few opcodes is subtly wrong; tinygrad's emulator (test/mockgpu/amd/emu.py, its
# _pcode_fixes and _fix_div_scale, checked on hardware) corrects it, and these are the same corrections: the division
# helpers' scaling (v_div_fmas scales by 2**64 or 2**-64 by the exponent of S2, v_div_scale returns S0 unscaled except
# where it must scale and sets VCC exactly when it does, v_div_fixup of a NaN quotient is a signed infinity), and
# v_trig_preop takes the 53 bits of 2/PI from the top of the 1201-bit constant.
_DIV_SCALE = """VCC.u64[laneId] = 0;
if ((64'F(S2.{t}) == 0.0) || (64'F(S1.{t}) == 0.0)) then
VCC.u64[laneId] = 1;
D0.{t} = NAN.{t}
elsif exponent(S2.{t}) - exponent(S1.{t}) >= {near} then
VCC.u64[laneId] = 1;
if S0.{t} == S1.{t} then
D0.{t} = ldexp(S0.{t}, {sc})
else
D0.{t} = S0.{t}
endif
elsif divWouldBeDenorm(S2.{t}, S1.{t}) then
VCC.u64[laneId] = 1;
D0.{t} = S0.{t}
elsif exponent(S2.{t}) <= {tiny} then
{tinyvcc}D0.{t} = ldexp(S0.{t}, {sc})
else
D0.{t} = S0.{t}
endif;
if isDENORM(S1.{t}) then
D0.{t} = NAN.{t}
endif"""
ERRATA = {
  "V_DIV_SCALE_F32": _DIV_SCALE.format(t="f32", near=96, sc=64, tiny=23, tinyvcc="VCC.u64[laneId] = 1;\n"),
  "V_DIV_SCALE_F64": _DIV_SCALE.format(t="f64", near=768, sc=128, tiny=53, tinyvcc=""),
  "V_DIV_FMAS_F32": ("D0.f32 = 2.0F ** 32 * fma(S0.f32, S1.f32, S2.f32)",
                     "D0.f32 = (exponent(S2.f32) > 127) ? (2.0F ** 64 * fma(S0.f32, S1.f32, S2.f32)) : (2.0F ** -64 * fma(S0.f32, S1.f32, S2.f32))"),
  "V_DIV_FMAS_F64": ("D0.f64 = 2.0 ** 64 * fma(S0.f64, S1.f64, S2.f64)",
                     "D0.f64 = (exponent(S2.f64) > 1023) ? (2.0 ** 128 * fma(S0.f64, S1.f64, S2.f64)) : (2.0 ** -128 * fma(S0.f64, S1.f64, S2.f64))"),
  "V_DIV_FIXUP_F32": ("D0.f32 = sign_out ? -abs(S0.f32) : abs(S0.f32)",
                      "D0.f32 = isNAN(S0.f32) ? (sign_out ? -INF.f32 : +INF.f32) : (sign_out ? -abs(S0.f32) : abs(S0.f32))"),
  "V_DIV_FIXUP_F64": ("D0.f64 = sign_out ? -abs(S0.f64) : abs(S0.f64)",
                      "D0.f64 = isNAN(S0.f64) ? (sign_out ? -INF : +INF) : (sign_out ? -abs(S0.f64) : abs(S0.f64))"),
  "V_TRIG_PREOP_F64": ("result = 64'F((1201'B(2.0 / PI)[1200 : 0] << shift.u32) & 1201'0x1fffffffffffff)",
                       "result = trig_preop_result(shift)"),
}

def corrected(name: str, pcode: str) -> str:
  """The pseudocode of opcode `name` with the corrections above (its _E32/_E64 forms alike)."""
  fix = ERRATA.get(name.replace("_E32", "").replace("_E64", ""))
  if fix is None: return pcode
  if isinstance(fix, str): return fix
  if fix[0] not in pcode: raise Unsupported(f"the correction for {name} does not apply to its pseudocode")
  return pcode.replace(fix[0], fix[1])

def _strip(pc: str) -> str:   # the `//` comments
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
    kind = str(m.lastgroup)
    out.append((kind, m.group(kind)))
    i = m.end()
  return out

