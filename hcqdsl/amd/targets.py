"""Per-architecture facts for the AMD target. Everything numeric comes from tinygrad's generated AMD headers
(`tinygrad.runtime.autogen.am`); this module only says which header/IP version each gfx target uses, exactly as
tinygrad's AMDDevice picks them from the IP discovery versions."""
from __future__ import annotations
import functools, importlib, types
from tinygrad.runtime.support.amd import AMDIP, import_module, import_soc
from ..ir import AMD_ARCHS

# gfx target -> (gfx version, GC IP, NBIO/NBIF IP, SDMA IP), the versions amdgpu's IP discovery reports for MI300 (gfx942),
# Navi31 (gfx1100) and Navi48 (gfx1201).
IP_VERSIONS = {
  "gfx942":  ((9, 4, 2),  (9, 4, 3),  (7, 9, 0), (4, 4, 2)),
  "gfx1100": ((11, 0, 0), (11, 0, 0), (4, 3, 0), (6, 0, 0)),
  "gfx1201": ((12, 0, 1), (12, 0, 1), (6, 3, 1), (7, 0, 1)),
}
assert tuple(IP_VERSIONS) == AMD_ARCHS   # the archs are the language's (ir.AMD_ARCHS); this table says what each is

def unmasked(fn):
  """The header's `PACKET3_X__FIELD` lambdas are C macros calling `(unsigned)(x)`; rebind them with `unsigned=int`."""
  return types.FunctionType(fn.__code__, {**fn.__globals__, "unsigned": int})

class Target:
  """One gfx target: its header modules, register blocks and the facts the encoders need."""
  def __init__(self, name: str):
    self.name = name
    self.gfx, gc_ver, nbio_ver, sdma_ver = IP_VERSIONS[name]
    self.gen = self.gfx[0]
    off = importlib.import_module(f"tinygrad.runtime.autogen.am.{'vega' if self.gen == 9 else 'navi'}_offsets")
    self.soc = import_soc(self.gfx)
    self.pm4 = importlib.import_module(f"tinygrad.runtime.autogen.am.pm4_{'soc15' if self.gen == 9 else 'nv'}")
    # tinygrad caps the SDMA header at 6.0.0: SDMA 7 (gfx12) keeps SDMA 6's packet layouts
    self.sdma = import_module("sdma", min(sdma_ver, (6, 0, 0)))
    self.gc = AMDIP("gc", gc_ver, bases={i: tuple(getattr(off, f"GC_BASE__INST{i}_SEG{s}", 0) for s in range(6)) for i in range(6)})
    self.nbio = AMDIP("nbio" if self.gen < 12 else "nbif", nbio_ver,
                      bases={i: tuple(getattr(off, f"NBIO_BASE__INST{i}_SEG{s}", 0) for s in range(9)) for i in range(6)})
    # SDMA before 5.0 has a 22-bit COPY_LINEAR count field (4 MiB), later ones 30 bits (1 GiB)
    self.max_copy_size = 0x40000000 if sdma_ver[0] >= 5 else 0x400000
    # the HDP flush request/done registers (NBIO 7.11 moved them to PF1)
    pf = "1" if nbio_ver[:2] == (7, 11) else "0"
    self.hdp_flush_req = getattr(self.nbio, f"regBIF_BX_PF{pf}_GPU_HDP_FLUSH_REQ").addr[0]
    self.hdp_flush_done = getattr(self.nbio, f"regBIF_BX_PF{pf}_GPU_HDP_FLUSH_DONE").addr[0]

  def __repr__(self): return f"Target({self.name})"

  @functools.cached_property
  def sh_regs(self) -> dict[int, str]:
    """SET_SH_REG offset -> register name (for the disassembler)."""
    start, end = self.pm4.PACKET3_SET_SH_REG_START, self.pm4.PACKET3_SET_SH_REG_END
    out: dict[int, str] = {}
    for name in self.gc.regs:
      reg = self.gc.regs[name]
      a = reg.segment < len(reg.bases[0]) and reg.addr[0]
      if a and start <= a < end: out.setdefault(a - start, name)
    return out

@functools.cache
def get_target(name: str) -> Target:
  if name not in IP_VERSIONS: raise ValueError(f"unknown AMD target {name!r} (known: {', '.join(AMD_ARCHS)})")
  return Target(name)
