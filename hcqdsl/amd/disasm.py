"""Disassembler: command buffers -> a packet listing in the manner of Mesa's ac_parse_ib (offset, packet name, then
one line per field), with addresses named by the image's memory plan and each packet's .hcq line; and the reader of
raw dwords (hex text, `compile --hex` lines, binary). Never raises on any dword input. Lifting packets back to .hcq
statements is hcqdsl/lift/image.py."""
from __future__ import annotations
import re, struct
from typing import Optional
from ..ir import U32_MAX, TARGETS
from ..target.image import Image, QueueImage
from . import pm4, sdma

__all__ = ["disasm_queue", "disasm_statement", "disasm_dwords", "disasm_packets", "decoder", "read_raw", "RawError"]

# fields not worth a line: the opcode is the name, halves of joined 64-bit values are shown whole
_HIDE = {"opcode", "op", "sub_op"}

def decoder(engine: str, target: str):
  """The packet decoder of a queue engine (compute or pm4: PM4; copy or sdma: SDMA) for `target`."""
  return (pm4 if engine in ("compute", "pm4") else sdma).decoder(target)

def _fmt_field(k: str, v, img: Optional[Image]) -> str:
  if isinstance(v, tuple): return " ".join(f"{x:#010x}" for x in v)
  if not isinstance(v, int): return str(v)
  s = f"{v:#x}" if v > 9 else str(v)
  if k == "function" or k == "func": s += f" ({pm4.WAIT_FUNCTIONS.get(v, '?')})"
  if img is not None and (k.endswith("addr") or k in ("addr", "coher_base")) and (n := img.name_at(v)): s += f" ({n})"
  return s

def _fields(p) -> list:
  f = p.fields
  hidden = set(_HIDE)
  for k in f:  # a joined 64-bit value replaces its halves
    for lo, hi in (("_31_0", "_63_32"), ("_31_3", "_63_32"), ("_31_2", "_63_32"), ("_lo", "_hi")):
      if k + lo in f and k + hi in f: hidden |= {k + lo, k + hi}
  return [(k, v) for k, v in f.items() if k not in hidden]

def disasm_packets(packets, img: Optional[Image] = None, q: Optional[QueueImage] = None, base: int = 0) -> list[str]:
  out = []
  patches = {p.offset: p for p in q.patches} if q else {}
  last = None
  for p in packets:
    where = ""
    if q is not None and (st := q.span_at(p.offset)) is not None and st is not last:  # the line, once per statement
      where, last = f"  ; {img.file if img else ''}:{st.line}  {st.text}", st
    out.append(f"{base + p.offset:6d}  {p.name}{where}")
    if p.note: out.append(f"          ; {p.note}: " + " ".join(f"{x:08x}" for x in p.dwords))
    if p.name == "SET_SH_REG" or p.name == "SET_UCONFIG_REG":
      out.append(f"          {p.fields.get('reg', hex(p.fields['reg_addr'])):<34} " + " ".join(f"{x:#x}" for x in p.fields["values"]))
    else:
      for k, v in _fields(p): out.append(f"          {k:<34} {_fmt_field(k, v, img)}")
    for o in range(p.offset, p.offset + p.length):
      if o in patches: out.append(f"          dword +{o - p.offset}: patched per launch = {patches[o].expr()}")
  return out

def disasm_dwords(dwords, engine: str, target: str) -> str:
  """A listing of raw dwords (no image: addresses are not named)."""
  return "\n".join(disasm_packets(decoder(engine, target).decode(dwords))) + "\n"

def disasm_queue(img: Image, q: QueueImage) -> list[str]:
  """An AMD queue's listing: its packets, with the image's names and source map."""
  return disasm_packets(decoder(q.engine, q.arch).decode(q.dwords), img, q)

def disasm_statement(img: Image, q: QueueImage, index: int) -> list[str]:
  """The listing of statement `index` of an AMD queue's body: the packets its source map's entry covers."""
  e = q.stmts[index]
  return disasm_packets(decoder(q.engine, q.arch).decode(q.dwords, e.offset, e.offset + e.length), img, q)

# ---------------------------------------------------------------- CLI

_HEX_QUEUE = re.compile(r"queue\s+(\S+)\s+(compute|copy)(?:\s+(gfx\w+|sm_\d+))?\s*$")   # sm_*: an NV queue (docs/nv.md)

class RawError(ValueError):
  """Raw input that is not dwords; `line`, `column` (1-based) where the text says what is wrong, else None."""
  def __init__(self, msg: str, line: Optional[int] = None, column: Optional[int] = None):
    super().__init__(f"{line}:{column}: {msg}" if line is not None else msg)
    self.line, self.column = line, column

_WORD = re.compile(r"[^\s,]+")

def read_raw(b: bytes) -> list:
  """Hex text (`0x` optional, `#` comments) or little-endian binary -> [(queue name, engine, arch, dwords)]. Lines of
  `compile --hex` (`queue NAME ENGINE ARCH: dwords`) carry their own queue, engine and arch; other text is one
  anonymous queue (engine and arch None). Raises RawError (a word that is not hex or is past 32 bits, an unknown
  arch: at its line and column)."""
  try: return _read_hex(b.decode("ascii"))
  except UnicodeDecodeError: pass
  except RawError:
    if all(32 <= c < 127 or c in b"\t\n\r" for c in b): raise   # (other bytes: binary that decodes as ASCII)
  if len(b) % 4: raise RawError(f"binary input of {len(b)} bytes is not a whole number of dwords")
  return [(None, None, None, list(struct.unpack(f"<{len(b) // 4}I", b)))]

def _read_hex(text: str) -> list:
  out: list = []
  for n, line in enumerate(text.split("\n"), 1):
    line = line.split("#")[0]
    head, colon, rest = line.partition(":")
    m = _HEX_QUEUE.fullmatch(head.strip()) if colon else None
    at = 0
    if m:
      if m[3] is not None and m[3] not in TARGETS:   # (an NV queue's words are read here too: docs/nv.md)
        raise RawError(f"unknown arch `{m[3]}` (one of {', '.join(TARGETS)})", n, len(head) - len(head.lstrip()) + m.start(3) + 1)
      out.append((m[1], m[2], m[3], []))
      at = len(head) + 1
    elif colon: raise RawError(f"`{head.strip()}:` is not a `queue NAME ENGINE ARCH:` prefix of `compile --hex`", n,
                               len(head) - len(head.lstrip()) + 1)
    if not out: out.append((None, None, None, []))
    dw = out[-1][3]
    for w in _WORD.finditer(line, at):
      try: v = int(w[0], 16) if w[0][:1] not in "+-" else -1
      except ValueError: v = -1
      if v < 0: raise RawError(f"`{w[0]}` is not a hex dword", n, w.start() + 1)
      if not 0 <= v <= U32_MAX: raise RawError(f"`{w[0]}` is more than 32 bits (a dword is 0 .. 0xffffffff)", n, w.start() + 1)
      dw.append(v)
  return out
