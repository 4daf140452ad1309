"""Per-architecture facts for the NV target. Everything numeric comes from tinygrad's generated NVIDIA headers
(`tinygrad.runtime.autogen.nv_570`, the driver version tinygrad defaults to); this module only says which SM version
and compute class each architecture has, and what tinygrad's NVDevice / NVProgram derive from them (ops_nv.py)."""
from __future__ import annotations
import functools
from tinygrad.runtime.autogen import nv_570 as nv
from ..ir import NV_ARCHS

__all__ = ["Target", "get_target", "BOARDS", "QMD_PREFIX"]

# arch -> (the SM version RM reports (NV2080_CTRL_GR_INFO_SM_VERSION_*), the compute class tinygrad's NVDevice binds):
# RTX 3090 (GA102), RTX 4090 (AD102), H100 (GH100), RTX 5090 (GB202). tinygrad 0.14 picks the first of BLACKWELL_COMPUTE_B,
# ADA_COMPUTE_A, AMPERE_COMPUTE_B the GPU lists (NVKIface.setup_usermode; NV_GSP.init_sw the same by chip); its lists omit
# Hopper's classes (tinygrad issue #16314), so sm_90 is HOPPER_COMPUTE_A as that fix selects it.
BOARDS = {
  "sm_86": (nv.NV2080_CTRL_GR_INFO_SM_VERSION_8_6, nv.AMPERE_COMPUTE_B),
  "sm_89": (nv.NV2080_CTRL_GR_INFO_SM_VERSION_8_9, nv.ADA_COMPUTE_A),
  "sm_90": (nv.NV2080_CTRL_GR_INFO_SM_VERSION_9_0, nv.HOPPER_COMPUTE_A),
  "sm_120": (nv.NV2080_CTRL_GR_INFO_SM_VERSION_10_4, nv.BLACKWELL_COMPUTE_B),
}
assert tuple(BOARDS) == NV_ARCHS   # the archs are the language's (ir.NV_ARCHS); this table says what each is
QMD_PREFIX = {3: "NVC6C0_QMDV03_00", 5: "NVCEC0_QMDV05_00"}   # the QMD layout of each version, as QMD.__init__ picks it

class Target:
  """One NV architecture: what tinygrad's NVDevice and NVProgram compute from its SM version and compute class."""
  def __init__(self, name: str):
    self.name = name
    self.sm_version, self.compute_class = BOARDS[name]
    sm = self.sm_version
    # NVDevice.__init__: the arch string and the QMD's SASS version
    self.arch = "sm_120" if sm == 0xa04 else f"sm_{(sm >> 8) & 0xff}{(v >> 4) if (v := sm & 0xff) > 0xf else v}"
    assert self.arch == name, (self.arch, name)
    self.sass_version = ((sm & 0xf00) >> 4) | (sm & 0xf)
    # QMD.__init__: version 5 (0x60 dwords) from Blackwell's compute class on, else 3 (0x40 dwords)
    self.blackwell = self.compute_class >= nv.BLACKWELL_COMPUTE_A
    self.qmd_version, qmd_dwords = (5, 0x60) if self.blackwell else (3, 0x40)
    self.qmd_size = 4 * qmd_dwords
    # NVProgram.__init__: constant buffer 0's driver part (the kernel arguments follow it) is at least 224 dwords on
    # Blackwell (its driver parameters reach dword 223) and 12 before
    self.cbuf0_min = 224 if self.blackwell else 12
    # where the kernel arguments start in constant bank 0 (Volta+ cubins' PARAM_CBANK: c[0][0x160]; after the driver part)
    self.args_offset = 4 * self.cbuf0_min if self.blackwell else 0x160

  def __repr__(self): return f"Target({self.name})"

@functools.cache
def get_target(name: str) -> Target:
  if name not in BOARDS: raise ValueError(f"unknown NV architecture {name!r} (known: {', '.join(NV_ARCHS)})")
  return Target(name)
