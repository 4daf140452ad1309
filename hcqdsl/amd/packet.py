"""The decoded form of one packet, shared by the PM4 and SDMA decoders (and by the emulator that executes them)."""
from __future__ import annotations
import functools
from typing import Optional
import attrs
from ..ir import U32_MAX


@attrs.define(frozen=True, eq=True, hash=False, slots=True)
class Packet:
  """`offset`: dword index of the header in the buffer that was decoded; `length`: dwords including the header.
  `fields`: named values (ints; `values` of SET_*_REG is a tuple). `note` is set when the packet is raw: unknown,
  malformed or truncated; such a packet still has a length, so a walker always advances."""
  offset: int
  name: str
  length: int
  fields: dict
  dwords: tuple
  note: Optional[str] = None
  @property
  def raw(self) -> bool: return self.note is not None

def raw_packet(dwords, offset: int, length: int, note: str, name: str = "RAW") -> Packet:
  return Packet(offset, name, length, {}, tuple(dwords[offset:offset + length]), note)

def join64(fields: dict) -> dict:
  """`x_31_0` + `x_63_32` (or `x_lo` + `x_hi`) also give `x`; a low part `x_31_3` is a dword-aligned address >> 3."""
  out = dict(fields)
  for lo, hi, name, sh in _pairs(tuple(fields)): out.setdefault(name, (fields[lo] << sh) | (fields[hi] << 32))
  return out

@functools.lru_cache(maxsize=1024)
def _pairs(names: tuple) -> tuple:
  """join64's (low field, high field, joined name, shift) for a packet's field names (a layout has few: decided once)."""
  out = []
  for k in names:
    for lo_sfx, hi_sfx in (("_31_0", "_63_32"), ("_31_3", "_63_32"), ("_31_2", "_63_32"), ("_lo", "_hi")):
      if k.endswith(lo_sfx) and (hk := k[:-len(lo_sfx)] + hi_sfx) in names:
        out.append((k, hk, k[:-len(lo_sfx)], int(lo_sfx.rsplit("_", 1)[1]) if lo_sfx[-1].isdigit() else 0))
  return tuple(out)

class Walker:
  """Decodes a dword stream packet by packet; subclasses provide `decode_one(dw, i) -> Packet` (never raising)."""
  def decode_one(self, dw: list[int], i: int) -> Packet: raise NotImplementedError
  def decode(self, dw, start: int = 0, end: int | None = None) -> list[Packet]:
    dw = [int(x) & U32_MAX for x in dw]
    end, out, i = len(dw) if end is None else end, [], start
    while i < end:
      out.append(p := self.decode_one(dw, i))
      i += p.length
    return out
