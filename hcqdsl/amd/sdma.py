"""SDMA packets for AMD copy queues: encoders producing exactly the dwords tinygrad's AMDCopyQueue emits, and a decoder
whose packet layouts are read from the `SDMA_PKT_<PACKET>_<DWORD>_<field>_{offset,mask,shift}` constants of
tinygrad's sdma_4_0_0 / sdma_6_0_0 headers."""
from __future__ import annotations
import functools, re
from .targets import Target, get_target
from ..ir import U32_MAX
from .packet import Walker, Packet, raw_packet, join64
from .pm4 import FUNC_GE

class SDMA:
  """Encoders for one target; each method appends dwords to `out`."""
  # the dword, from the start of the statement's packet, that a launch patches (a value, or an address's low dword), and
  # a COPY_LINEAR piece's length: read in __init__ from the target's header layouts, as the decoder reads them
  WAIT_VALUE_AT: int
  SIGNAL_VALUE_AT: int
  WRITE_VALUE_AT: int
  WRITE_ADDR_AT: int
  COPY_DWORDS: int
  COPY_SRC_AT: int
  COPY_DST_AT: int

  def __init__(self, t: Target):
    s, self.t = t.sdma, t
    lay = _layouts(s)
    def at(packet: str, field: str) -> int: return field_at(lay, packet, field)
    self.WAIT_VALUE_AT, self.SIGNAL_VALUE_AT = at("POLL_REGMEM", "value"), at("FENCE", "data")
    self.WRITE_VALUE_AT, self.WRITE_ADDR_AT = at("WRITE_UNTILED", "data0"), at("WRITE_UNTILED", "dst_addr_31_0")
    self.COPY_SRC_AT, self.COPY_DST_AT = at("COPY_LINEAR", "src_addr_31_0"), at("COPY_LINEAR", "dst_addr_31_0")
    self.COPY_DWORDS = max(o for o, *_ in lay["COPY_LINEAR"]) + 1
    self.max_copy_size = t.max_copy_size
    self.POLL = s.SDMA_OP_POLL_REGMEM | s.SDMA_PKT_POLL_REGMEM_HEADER_FUNC(FUNC_GE) | s.SDMA_PKT_POLL_REGMEM_HEADER_MEM_POLL(1)
    self.POLL_DW5 = s.SDMA_PKT_POLL_REGMEM_DW5_INTERVAL(0x04) | s.SDMA_PKT_POLL_REGMEM_DW5_RETRY_COUNT(0xfff)
    # gfx10+: MTYPE 3 (uncached) so the fence write is visible to other agents without a flush
    self.FENCE = s.SDMA_OP_FENCE | (s.SDMA_PKT_FENCE_HEADER_MTYPE(3) if t.gen != 9 else 0)
    self.TIMESTAMP = s.SDMA_OP_TIMESTAMP | s.SDMA_PKT_TIMESTAMP_GET_HEADER_SUB_OP(s.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL)
    self.WRITE = s.SDMA_OP_WRITE
    self.COPY = s.SDMA_OP_COPY | s.SDMA_PKT_COPY_LINEAR_HEADER_SUB_OP(s.SDMA_SUBOP_COPY_LINEAR)
    self.INDIRECT = s.SDMA_OP_INDIRECT | s.SDMA_PKT_INDIRECT_HEADER_VMID(0)
    self.NOP, self.NOP_COUNT = s.SDMA_OP_NOP, s.SDMA_PKT_NOP_HEADER_COUNT
    self.PADDING_MAX = s.SDMA_PKT_NOP_HEADER_count_mask + 1   # dwords one NOP can cover (its count field)
    self.COUNT = s.SDMA_PKT_COPY_LINEAR_COUNT_COUNT

  def wait(self, out: list, addr: int, value: int):
    """POLL_REGMEM: memory, `>=`, full mask (AMDCopyQueue.wait)."""
    out += (self.POLL, addr & U32_MAX, addr >> 32, value, U32_MAX, self.POLL_DW5)

  def signal(self, out: list, addr: int, value: int):
    """FENCE: a 32-bit write once earlier packets completed (AMDCopyQueue.signal; the extra FENCE+TRAP tinygrad adds
    for a KFD timeline's interrupt mailbox is a driver detail, not part of the program)."""
    out += (self.FENCE, addr & U32_MAX, addr >> 32, value)

  def write(self, out: list, addr: int, value: int, b64: bool = False):
    """WRITE (linear): one dword, or two for a 64-bit value (AMDCopyQueue.write; the count field is dwords - 1)."""
    out += (self.WRITE, addr & U32_MAX, addr >> 32, 1 if b64 else 0, value & U32_MAX) + ((value >> 32 & U32_MAX,) if b64 else ())

  def indirect(self, out: list, addr: int, ndw: int):
    """INDIRECT: run `ndw` dwords at `addr` (it must end on an 8-dword boundary: tinygrad pads it with NOPs)."""
    out += (self.INDIRECT, addr & U32_MAX, addr >> 32, ndw, 0, 0)

  def padding(self, ndw: int) -> int:
    """The header of a NOP covering `ndw` dwords (itself and the ndw - 1 after it; at most PADDING_MAX)."""
    return self.NOP | self.NOP_COUNT(ndw - 1)

  def barrier(self, out: list):
    """Nothing: SDMA writes are not cached by the engine (tinygrad has no copy-queue memory_barrier)."""

  def timestamp(self, out: list, ts_addr: int):
    out += (self.TIMESTAMP, ts_addr & U32_MAX, ts_addr >> 32)

  def copy(self, out: list, dst: int, src: int, size: int):
    """COPY_LINEAR, split in pieces of at most the generation's maximum (count field holds bytes - 1)."""
    step, C, COUNT = self.max_copy_size, self.COPY, self.COUNT
    for off in range(0, size, step):
      s, d = src + off, dst + off
      out += (C, COUNT(min(step, size - off) - 1), 0, s & U32_MAX, s >> 32, d & U32_MAX, d >> 32)

  def copy_packets(self, size: int) -> int: return max(1, -(-size // self.max_copy_size)) if size else 0

@functools.cache
def encoder(target: str) -> SDMA: return SDMA(get_target(target))

# ---------------------------------------------------------------- decoder

# packet name -> (opcode constant, sub-opcode constant or 0); layouts themselves come from the header
_OPS = {
  "NOP": ("SDMA_OP_NOP", 0), "COPY_LINEAR": ("SDMA_OP_COPY", "SDMA_SUBOP_COPY_LINEAR"),
  "WRITE_UNTILED": ("SDMA_OP_WRITE", "SDMA_SUBOP_WRITE_LINEAR"), "INDIRECT": ("SDMA_OP_INDIRECT", 0),
  "FENCE": ("SDMA_OP_FENCE", 0), "TRAP": ("SDMA_OP_TRAP", 0), "POLL_REGMEM": ("SDMA_OP_POLL_REGMEM", 0),
  "POLL_REG_WRITE_MEM": ("SDMA_OP_POLL_REGMEM", "SDMA_SUBOP_POLL_REG_WRITE_MEM"), "ATOMIC": ("SDMA_OP_ATOMIC", 0),
  "CONSTANT_FILL": ("SDMA_OP_CONST_FILL", 0), "TIMESTAMP_SET": ("SDMA_OP_TIMESTAMP", "SDMA_SUBOP_TIMESTAMP_SET"),
  "TIMESTAMP_GET": ("SDMA_OP_TIMESTAMP", "SDMA_SUBOP_TIMESTAMP_GET"),
  "TIMESTAMP_GET_GLOBAL": ("SDMA_OP_TIMESTAMP", "SDMA_SUBOP_TIMESTAMP_GET_GLOBAL"),
  "SRBM_WRITE": ("SDMA_OP_SRBM_WRITE", 0), "COND_EXE": ("SDMA_OP_COND_EXE", 0), "GCR_REQ": ("SDMA_OP_GCR_REQ", 0),
}

def _layouts(mod) -> dict:
  """packet name -> [(dword, field, shift, mask)] from the header's per-field constants."""
  names = {k[len("SDMA_PKT_"):-len("_HEADER_op_offset")] for k in vars(mod) if k.startswith("SDMA_PKT_") and k.endswith("_HEADER_op_offset")}
  out: dict = {}
  for k, off in vars(mod).items():
    if not (k.startswith("SDMA_PKT_") and k.endswith("_offset")): continue
    rest = k[len("SDMA_PKT_"):-len("_offset")]
    pkt = max((n for n in names if rest.startswith(n + "_")), key=len, default=None)
    if pkt not in _OPS: continue
    base = k[:-len("_offset")]
    # field names are lowercase after the upper-case dword name: HEADER_sub_op, DW_3_count, SRC_ADDR_LO_src_addr_31_0
    m = re.match(r"^([A-Z0-9_]+?)_([a-z].*)$", rest[len(pkt) + 1:])
    if m is None: continue
    fname = m.group(2)
    if m.group(1) == "HEADER" and fname in ("op", "sub_op"): continue
    out.setdefault(pkt, []).append((off, fname, getattr(mod, base + "_shift"), getattr(mod, base + "_mask")))
  return out

def field_at(layouts: dict, packet: str, field: str) -> int:
  """The dword (0: the header) of `packet` that holds `field`, in a target's layouts (_layouts: the decoder's)."""
  return next(o for o, f, *_ in layouts[packet] if f == field)

class Decoder(Walker):
  def __init__(self, t: Target):
    s, self.t = t.sdma, t
    self.layouts = _layouts(s)
    self.ops: dict[tuple, str] = {}
    for name, (op, sub) in _OPS.items():
      if (opv := getattr(s, op, None)) is None or name not in self.layouts: continue
      subv = getattr(s, sub, None) if isinstance(sub, str) else sub
      if subv is not None: self.ops.setdefault((opv, subv), name)
    self.lengths = {name: max(o for o, *_ in lay) + 1 for name, lay in self.layouts.items()}

  def op(self, h: int) -> tuple:
    """(op, sub-op) of a header dword (every packet's HEADER dword has them at the same place)."""
    s = self.t.sdma
    return ((h >> s.SDMA_PKT_NOP_HEADER_op_shift) & s.SDMA_PKT_NOP_HEADER_op_mask,
            (h >> s.SDMA_PKT_NOP_HEADER_sub_op_shift) & s.SDMA_PKT_NOP_HEADER_sub_op_mask)

  def header_length(self, h: int):
    """Dwords of the packet whose header is `h`, or None when a later dword holds it (WRITE_UNTILED); an unknown op
    is one dword."""
    s, name = self.t.sdma, self.ops.get(self.op(h))
    if name is None: return 1
    if name == "NOP": return 1 + ((h >> s.SDMA_PKT_NOP_HEADER_count_shift) & s.SDMA_PKT_NOP_HEADER_count_mask)
    return None if name == "WRITE_UNTILED" else self.lengths[name]

  def packet_length(self, h: int, get) -> int:
    """Dwords of the SDMA packet whose header is `h`; `get(k)` reads its dword k (0 past the end). The one SDMA length
    rule of the decoder, the emulator and the submitter."""
    n = self.header_length(h)
    if n is not None: return n
    s = self.t.sdma   # WRITE_UNTILED: header, address (2), DW_3 with count = data dwords - 1, the data
    return 5 + ((get(3) >> s.SDMA_PKT_WRITE_UNTILED_DW_3_count_shift) & s.SDMA_PKT_WRITE_UNTILED_DW_3_count_mask)

  def decode_one(self, dw, i: int) -> Packet:
    h, n = dw[i], len(dw)
    op, sub = self.op(h)
    name = self.ops.get((op, sub))
    if name is None:
      return raw_packet(dw, i, 1, f"unknown SDMA op {op} sub-op {sub}", name=f"UNKNOWN_{op}_{sub}")
    ln = self.packet_length(h, lambda k: dw[i + k] if i + k < n else 0)
    if i + ln > n: return raw_packet(dw, i, n - i, f"truncated: {name} needs {ln} dwords, {n - i} left", name=name)
    fields: dict = {"op": op, "sub_op": sub}
    for o, fname, sh, mask in self.layouts[name]:
      if o < ln: fields[fname] = (dw[i + o] >> sh) & mask
    if name == "WRITE_UNTILED": fields["data"] = tuple(dw[i + 4:i + ln])
    return Packet(i, name, ln, join64(fields), tuple(dw[i:i + ln]))


@functools.cache
def decoder(target: str) -> Decoder: return Decoder(get_target(target))

def decode(dwords, target: str = "gfx1100") -> list[Packet]: return decoder(target).decode(dwords)
