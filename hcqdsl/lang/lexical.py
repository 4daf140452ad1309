"""The words of the language, written once for both parse paths (the lark grammar in parse.py, the fast path in
scan.py) and the formatter: names, integers (`_` separators, hex, the K/M/G size suffixes), strings (quoting and
escapes), byte ranges, comments, and which characters a program may hold at all.

The grammar's NAME, NUMBER, FLOAT and STRING terminals are `TERMINALS` below, added to grammar.lark when the parser
is built, so the two paths cannot read a number or a string differently."""
from __future__ import annotations
import re
from typing import Optional

__all__ = ["NAME", "DIGITS", "SIZED", "FLOAT", "STRING", "TERMINALS", "SIZE_SUFFIXES", "int_value", "int_text",
           "size_text", "range_text", "quote", "unquote", "comments", "LINE_END", "CONTROL", "has_control",
           "control_positions", "is_binary", "identifier"]

NAME = r"[A-Za-z_][A-Za-z0-9_]*"
DIGITS = r"0[xX][0-9A-Fa-f_]+|[0-9][0-9_]*"          # an integer as written, without a size suffix
SIZE_SUFFIXES = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
SIZED = rf"(?:{DIGITS})[KMG]?"                         # an integer that may carry a size suffix
FLOAT = r"[0-9][0-9_]*\.[0-9_]*(?:[eE][+-]?[0-9]+)?|[0-9][0-9_]*[eE][+-]?[0-9]+"
STRING = r'"""[\s\S]*?"""|"(?:[^"\\\n]|\\.)*"'          # a triple-quoted string is kept as written, no escapes
TERMINALS = {"NAME": NAME, "NUMBER": SIZED, "FLOAT.2": FLOAT, "STRING": STRING}

def int_value(s: str) -> int:
  """An integer token's value, its size suffix applied: `0x1_0` -> 16, `4K` -> 4096."""
  s = s.replace("_", "")
  if s[-1] in SIZE_SUFFIXES: return int(s[:-1], 0) * SIZE_SUFFIXES[s[-1]]
  return int(s, 0)

def int_text(s: str) -> tuple[int, Optional[str]]:
  """An integer token's value and its size suffix (None without one): `4_096` -> (4096, None), `2K` -> (2048, 'K').
  Raises ValueError for a token that is no integer."""
  s = s.replace("_", "")
  if s and s[-1] in SIZE_SUFFIXES: return int(s[:-1], 0) * SIZE_SUFFIXES[s[-1]], s[-1]
  return int(s, 0), None

def size_text(v: int) -> str:
  """A size or byte offset as `fmt` writes it: the largest suffix that divides it (`4096` -> `4K`), else decimal."""
  if v:
    for suf in "GMK":
      if v % SIZE_SUFFIXES[suf] == 0: return f"{v // SIZE_SUFFIXES[suf]}{suf}"
  return str(v)

def range_text(start: Optional[int], end: Optional[int]) -> str:
  """`[start:end]` of a byte range (either side may be open)."""
  return f"[{'' if start is None else size_text(start)}:{'' if end is None else size_text(end)}]"

# ---- strings
_ESC = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "r": "\r", "0": "\0"}
_ESC_RX = re.compile(r"\\(.)")
_QUOTE = {v: "\\" + k for k, v in _ESC.items()}
_QUOTE_RX = re.compile(r'[\n\t"\\\r\0]')

def unquote(s: str) -> str:
  """A STRING token's text: a triple-quoted string as written; escapes (`\\n \\t \\" \\\\ \\r \\0`) in a one-line
  string, any other backslash kept as written."""
  if s.startswith('"""'): return s[3:-3]
  return _ESC_RX.sub(lambda m: _ESC.get(m.group(1), m.group()), s[1:-1])

def quote(s: str) -> str:
  """The STRING that `unquote` reads back as `s`: triple-quoted when it has a line break and can be (no `\"\"\"` in
  it, no `"` at its end, no `\\r` that reading would turn into a line end)."""
  if "\n" in s and '"""' not in s and not s.endswith('"') and "\r" not in s: return f'"""{s}"""'
  return '"' + _QUOTE_RX.sub(lambda m: _QUOTE[m.group()], s) + '"'

_COMMENT_OR_STRING = re.compile(rf"#[^\r\n]*|{STRING}")

def comments(text: str):
  """(offset, text) of every comment: `#` to the line end, outside strings. Only strings and comments can hold a `#`
  or a `"`, so a left-to-right search for either finds exactly the comments the grammar's lexer finds."""
  for m in _COMMENT_OR_STRING.finditer(text):
    if m.group().startswith("#"): yield m.start(), m.group()

# ---- characters: a program is text with tabs and line ends, nothing else
LINE_END = re.compile(r"\r\n?")   # \r\n and a lone \r end a line, as \n does
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029]")  # with tab and line ends, all that is not text
# the same class without the regex engine (8x slower over a 30 MB program): an ASCII text is one C pass deleting the
# allowed bytes, any other a search per character (memchr)
_TEXT_ASCII = bytes([0x09, 0x0a, 0x0d, *range(0x20, 0x7f)])
_CONTROL_ANY = [chr(c) for c in (*range(0x09), *range(0x0b, 0x0d), *range(0x0e, 0x20), *range(0x7f, 0xa0))] + ["\u2028", "\u2029"]

def has_control(text: str) -> bool:
  """Whether `text` holds a character `CONTROL` matches (`\\r` is a line end, not a control character)."""
  if text.isascii(): return bool(text.encode("ascii").translate(None, _TEXT_ASCII))
  return any(c in text for c in _CONTROL_ANY)

def control_positions(text: str, limit: int = 20):
  """(line, column, character) of the first `limit` control characters of a `\\n`-separated text."""
  for k, m in enumerate(CONTROL.finditer(text)):
    if k == limit: return
    line = text.count("\n", 0, m.start()) + 1
    yield line, m.start() - text.rfind("\n", 0, m.start()), m.group()

def is_binary(text: str) -> bool:
  """A file that is not text at all (a compiled image, an archive) rather than a program with a stray control
  character: two NULs in a row (binary formats are full of them), or control characters making up more than a
  twentieth of its first 4K characters."""
  head = text[:4096]
  return "\0\0" in head or len(CONTROL.findall(head)) * 20 > len(head)

_COLORS = re.compile(r"\x1b\[[0-9;]*m")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")

def identifier(name, lead: str = "v") -> str:
  """`name` (a tinygrad kernel's or parameter's) made a NAME: terminal colors dropped (tinygrad's names carry them),
  every other character but letters, digits and `_` written `_`; `lead` for no name, `lead_` before a leading digit."""
  out = "".join(c if c in _NAME_CHARS else "_" for c in _COLORS.sub("", str(name or lead))) or lead
  return out if not out[0].isdigit() else f"{lead}_{out}"
