"""Reading AMD's instruction pseudocode (the `PCODE` tables shipped in tinygrad.runtime.autogen.amd.*.str_pcode):
tokens, statements, the typed accessors. pcode_c.py translates what this reads into C.

A statement is a list of (kind, text) tokens; kinds: cast (`32'U(` opens a cast), type (`32'U`), sized (`16'4`),
num, id, op. `Unsupported` names a construct a translator cannot take (the executor faults naming it).
"""
from __future__ import annotations
import re

__all__ = ["Unsupported", "statements", "split_statements", "ACCESSORS", "KEYWORDS"]

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
    kind = m.lastgroup
    out.append((kind, m.group(kind)))
    i = m.end()
  return out

