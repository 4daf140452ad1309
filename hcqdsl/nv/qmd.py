"""The QMD (queue meta data): the launch descriptor a compute queue's SEND_PCAS_A points at — program, grid, block,
constant buffers, the semaphores released when the grid completes and the QMD launched after it. Its bit fields are
the header's (`NVC6C0_QMDV03_00_*` for version 3, `NVCEC0_QMDV05_00_*` for version 5: (high bit, low bit) tuples, and
functions of the index for the per-buffer and per-release ones), read and written exactly as tinygrad's QMD class does."""
from __future__ import annotations
import functools
from tinygrad.runtime.autogen import nv_570 as nv
from .targets import Target, QMD_PREFIX

__all__ = ["QMD", "fields", "ADDR_FIELDS"]

@functools.cache
def fields(version: int) -> dict:
  """field name (lower case, indexed ones with `_i`, i < 8) -> (high bit, low bit), from the header (QMD.__init__)."""
  pref = QMD_PREFIX[version]
  out = {k[len(pref) + 1:].lower(): v for k, v in vars(nv).items() if k.startswith(pref) and isinstance(v, tuple)}
  out.update({f"{k[len(pref) + 1:].lower()}_{i}": v(i) for k, v in vars(nv).items() if k.startswith(pref) and callable(v) for i in range(8)})
  return out

# the fields holding an address, per version: (field of the low part, of the high part, shift of the stored value);
# the release semaphores' and the dependent QMD's, for the disassembler and the emulator
ADDR_FIELDS = {
  3: {"program": ("program_address_lower", "program_address_upper", 0), "cbuf0": ("constant_buffer_addr_lower_0", "constant_buffer_addr_upper_0", 0),
      "release0": ("release0_address_lower", "release0_address_upper", 0), "release1": ("release1_address_lower", "release1_address_upper", 0),
      "grid": ("cta_raster_width", None, 0), "dependent": ("dependent_qmd0_pointer", None, 8)},
  5: {"program": ("program_address_lower_shifted4", "program_address_upper_shifted4", 4),
      "cbuf0": ("constant_buffer_addr_lower_shifted6_0", "constant_buffer_addr_upper_shifted6_0", 6),
      "release0": ("release_semaphore0_addr_lower", "release_semaphore0_addr_upper", 0),
      "release1": ("release_semaphore1_addr_lower", "release_semaphore1_addr_upper", 0),
      "grid": ("grid_width", None, 0), "dependent": ("dependent_qmd0_pointer", None, 8)},
}

class QMD:
  """A QMD's bytes (`data`, a bytearray, shared with whoever holds it) and its fields by name."""
  def __init__(self, version: int, data=None):
    self.version, self.fields = version, fields(version)
    self.size = 4 * (0x60 if version == 5 else 0x40)
    self.data = bytearray(self.size) if data is None else data
  @staticmethod
  def of(t: Target, data=None) -> "QMD": return QMD(t.qmd_version, data)

  def _bits(self, name: str) -> tuple:
    hi, lo = self.fields[name]
    return hi, lo, lo // 8, hi // 8 + 1
  def read(self, name: str) -> int:
    hi, lo, a, b = self._bits(name)
    return (int.from_bytes(self.data[a:b], "little") >> (lo % 8)) & ((1 << (hi - lo + 1)) - 1)
  def write(self, **kw) -> "QMD":
    """QMD.write: each value must fit its field (ValueError otherwise, as tinygrad's)."""
    for k, v in kw.items():
      hi, lo, a, b = self._bits(k)
      width = hi - lo + 1
      if v >= (1 << width): raise ValueError(f"{v:#x} does not fit QMD field {k} ({width} bits)")
      mask = ((1 << width) - 1) << (lo % 8)
      num = int.from_bytes(self.data[a:b], "little")
      self.data[a:b] = ((num & ~mask) | ((v << (lo % 8)) & mask)).to_bytes(b - a, "little")
    return self
  def offset(self, name: str) -> int:
    """QMD.field_offset: the byte holding the field's low bit."""
    return self.fields[name][1] // 8
  def set_constant_buf_addr(self, i: int, addr: int) -> "QMD":
    """QMD.set_constant_buf_addr: version 3 stores the address, version 5 the address >> 6."""
    if self.version < 4: return self.write(**{f"constant_buffer_addr_upper_{i}": addr >> 32, f"constant_buffer_addr_lower_{i}": addr & 0xFFFFFFFF})
    return self.write(**{f"constant_buffer_addr_upper_shifted6_{i}": (addr >> 6) >> 32,
                         f"constant_buffer_addr_lower_shifted6_{i}": (addr >> 6) & 0xFFFFFFFF})
  def address(self, what: str) -> int:
    """One of ADDR_FIELDS' addresses, as the hardware reads it."""
    lo, hi, sh = ADDR_FIELDS[self.version][what]
    return ((self.read(lo) | ((self.read(hi) << 32) if hi else 0)) << sh)
  # the names of the fields a launch and a release use, by version
  def grid_field(self) -> str: return "cta_raster_width" if self.version < 4 else "grid_width"
  def release_fields(self, i: int) -> tuple:
    """(enable, address low, payload low) fields of release semaphore i (NVComputeQueue.signal)."""
    if self.version < 4: return f"release{i}_enable", f"release{i}_address_lower", f"release{i}_payload_lower"
    return f"release{i}_enable", f"release_semaphore{i}_addr_lower", f"release_semaphore{i}_payload_lower"
