"""The `# hcq:` header of a program (`# hcq: launches=3 seeds=20`): the one reader every command and the pytest plugin
use. Options, on any comment line that starts `# hcq:`: `launches=N`, `seeds=K`, `target=ARCH`, `run=yes|no`,
`unlifted=N` (`lift` of a capture: N captured steps are in no statement — `check` says so on its summary line)."""
from __future__ import annotations
import re
from typing import Any
from .ir import AMD_ARCHS, MAX_LAUNCHES, MAX_SCHEDULES

__all__ = ["HeaderError", "read_header", "header_lines", "header_launches"]

_HEADER = re.compile(r"[ \t]*#[ \t]*hcq:(.*)")
_WHAT = "launches, seeds, target, run, unlifted"

class HeaderError(ValueError):
  """A malformed `# hcq:` option; `line` is its 1-based line."""
  def __init__(self, line: int, message: str):
    super().__init__(f"line {line}: {message}")
    self.line = line

def _value(key: str, val: str, item: str, line: int):
  if key in ("launches", "seeds", "unlifted"):
    try: n = int(val)
    except ValueError: raise HeaderError(line, f"`{item}`: {key} takes an integer") from None
    if n < 1: raise HeaderError(line, f"`{item}`: {key} must be at least 1")
    if key == "launches" and n > MAX_LAUNCHES: raise HeaderError(line, f"`{item}`: launches must be at most {MAX_LAUNCHES}")
    if key == "seeds" and n > MAX_SCHEDULES: raise HeaderError(line, f"`{item}`: seeds must be at most {MAX_SCHEDULES:,}")
    return n
  if key == "target":
    if val not in AMD_ARCHS: raise HeaderError(line, f"`{item}`: target is one of {', '.join(AMD_ARCHS)}")
    return val
  if key == "run":
    if val not in ("yes", "no"): raise HeaderError(line, f"`{item}`: run is yes or no")
    return val == "yes"
  raise HeaderError(line, f"unknown option `{key}` ({_WHAT})")

def header_lines(text: str):
  """(line number, option text) of each `# hcq:` line. Only the lines holding `hcq:` are looked at: a regex over the
  whole of a 30 MB program takes 0.3 s."""
  p = text.find("hcq:")
  if p >= 0 and "\r" in text:   # `\r\n` and a lone `\r` end lines too, as the parser reads them
    text = re.sub(r"\r\n?", "\n", text)
    p = text.find("hcq:")
  if text[:1] == "\ufeff": text = " " + text[1:]                     # a byte order mark
  while p >= 0:
    start = text.rfind("\n", 0, p) + 1
    end = text.find("\n", p)
    end = len(text) if end < 0 else end
    m = _HEADER.fullmatch(text, start, end)
    if m: yield text.count("\n", 0, start) + 1, m.group(1)
    p = text.find("hcq:", end)

def read_header(text: str) -> dict[str, Any]:
  """{"launches": 3, "seeds": 20, "target": ..., "run": bool} for the options given; raises HeaderError."""
  opts: dict = {}
  for line, body in header_lines(text):
    for item in body.split():
      key, eq, val = item.partition("=")
      if not eq: raise HeaderError(line, f"`{item}`: header options are key=value")
      opts[key] = _value(key, val, item, line)
  return opts

def header_launches(text: str) -> int:
  """`# hcq: launches=N` (as emit, lift and the scenario files write it), else 0. Raises HeaderError."""
  return read_header(text).get("launches", 0)
