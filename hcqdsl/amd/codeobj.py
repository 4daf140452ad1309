"""Kernel code objects: the register values a dispatch needs, read from a real AMD ELF's kernel descriptor (.kd in
.rodata, as tinygrad's AMDProgram reads it) or made up for a kernel without code (the synthetic descriptor, see
docs/amd.md)."""
from __future__ import annotations
import ctypes, functools, struct
import attrs
from tinygrad.runtime.autogen import amdgpu_kd, hsa
from .targets import Target

KD = amdgpu_kd.llvm_amdhsa_kernel_descriptor_t
KD_SIZE = ctypes.sizeof(KD)
ENTRY_OFFSET = 256          # code starts 256 bytes after the descriptor: COMPUTE_PGM_LO holds address >> 8
SYNTH_MAGIC = b"HCQKERN\0"  # at descriptor + 64 in a synthetic code object, followed by the kernel name

@functools.cache
def s_endpgm(gen: int) -> bytes:
  """The synthetic kernel's only instruction, encoded by tinygrad's instruction classes for the generation's ISA."""
  import importlib
  isa = {9: "cdna", 11: "rdna3", 12: "rdna4"}[gen]
  return importlib.import_module(f"tinygrad.runtime.autogen.amd.{isa}.ins").s_endpgm().to_bytes()

@attrs.frozen
class CodeObject:
  image: bytes          # bytes to place at the code address (descriptor at +kd_offset)
  kd_offset: int        # descriptor offset inside image
  entry_offset: int     # program entry offset inside image (256-aligned relative to a 256-aligned base)
  rsrc1: int
  rsrc2: int
  rsrc3: int
  wave32: bool
  kernarg_size: int
  private_segment_size: int
  group_segment_size: int
  dispatch_ptr: bool    # user SGPRs carry a pointer to an hsa_kernel_dispatch_packet_t (placed after the kernargs)
  private_segment_sgpr: bool
  synthetic: bool

def synthetic(t: Target, name: str, nparams: int) -> CodeObject:
  """A 64-byte kernel descriptor (rsrc2 requests 2 user SGPRs: the kernarg pointer), a marker with the kernel name, and
  `s_endpgm` at +256. Real hardware would run it as a no-op; the emulator recognises the kernel by its address."""
  gc = t.gc
  rsrc1 = gc.regCOMPUTE_PGM_RSRC1.encode(priv=1) if t.gen == 11 else 0  # tinygrad's gfx11 CWSR workaround
  rsrc2 = gc.regCOMPUTE_PGM_RSRC2.encode(user_sgpr=2)
  kd = KD()
  kd.kernarg_size, kd.kernel_code_entry_byte_offset = 8 * nparams, ENTRY_OFFSET
  kd.compute_pgm_rsrc1, kd.compute_pgm_rsrc2 = rsrc1, rsrc2
  kd.kernel_code_properties = hsa.AMD_KERNEL_CODE_PROPERTIES_ENABLE_SGPR_KERNARG_SEGMENT_PTR | \
                              (hsa.AMD_KERNEL_CODE_PROPERTIES_ENABLE_WAVEFRONT_SIZE32 if t.gen != 9 else 0)
  body = bytes(kd) + SYNTH_MAGIC + name.encode()[:ENTRY_OFFSET - KD_SIZE - len(SYNTH_MAGIC) - 1]
  img = body.ljust(ENTRY_OFFSET, b"\0") + s_endpgm(t.gen)
  return CodeObject(img, 0, ENTRY_OFFSET, rsrc1, rsrc2, 0, t.gen != 9, 8 * nparams, 0, 0, False, False, True)

def from_elf(t: Target, blob: bytes) -> CodeObject:
  """The kernel descriptor of an AMD ELF code object (first .kd at the start of .rodata), relocated like tinygrad's
  AMDProgram does it. Raises ValueError on anything that is not such a code object."""
  from tinygrad.runtime.support.elf import elf_loader
  try: image, sections, relocs = elf_loader(blob)
  except Exception as e: raise ValueError(f"not an AMD ELF code object ({e})") from None
  rodata = next((sh.header.sh_addr for sh in sections if sh.name == ".rodata"), -1)
  if rodata < 0: raise ValueError(".rodata section (kernel descriptor) not found")
  for apply_off, sym_off, typ, addend in relocs:
    if typ != 5: raise ValueError(f"unsupported AMD relocation type {typ}")  # R_AMDGPU_REL64 only
    image[apply_off:apply_off + 8] = struct.pack("<q", sym_off - apply_off + addend)
  kd = KD.from_buffer_copy(bytes(image[rodata:rodata + KD_SIZE]))
  lo, hi = t.gc.regCOMPUTE_PGM_RSRC2.fields["lds_size"]   # LDS in 512-byte blocks, as AMDProgram computes it
  lds = ((kd.group_segment_fixed_size + 511) // 512) & ((1 << (hi - lo + 1)) - 1)
  props = kd.kernel_code_properties
  entry = rodata + kd.kernel_code_entry_byte_offset
  return CodeObject(bytes(image), rodata, entry, kd.compute_pgm_rsrc1 | ((1 << 20) if t.gen == 11 else 0),
                    kd.compute_pgm_rsrc2 | (lds << lo), kd.compute_pgm_rsrc3,
                    bool(props & hsa.AMD_KERNEL_CODE_PROPERTIES_ENABLE_WAVEFRONT_SIZE32), kd.kernarg_size,
                    kd.private_segment_fixed_size, kd.group_segment_fixed_size,
                    bool(props & hsa.AMD_KERNEL_CODE_PROPERTIES_ENABLE_SGPR_DISPATCH_PTR),
                    bool(props & hsa.AMD_KERNEL_CODE_PROPERTIES_ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER), False)
