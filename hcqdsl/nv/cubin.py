"""Kernel code for NV queues: a cubin (CUDA ELF) read the way tinygrad's NVProgram reads it — the `.text.NAME` entry,
constant banks, the `.nv.info` attributes (register count, stack size, where the parameters start in constant bank 0) —
and the QMD template and constant-bank-0 prefix NVProgram builds from it. A kernel without NV code gets a synthetic
cubin (docs/nv.md): the same sections around one `EXIT`, so real hardware runs it as a no-op and tinygrad's own
NVProgram loads it."""
from __future__ import annotations
import ctypes, re, struct
from typing import Optional
import attrs
from tinygrad.runtime.autogen import libc, nv_570 as nv
from .targets import Target
from .qmd import QMD

__all__ = ["NVCode", "synthetic", "load", "program_qmd", "cbuf0_prefix", "EXIT", "SHARED_MEM_WINDOW", "LOCAL_MEM_WINDOW",
           "SYNTH_REGS", "EIATTR_PARAM_CBANK", "EIATTR_REGCOUNT", "EIATTR_MIN_STACK_SIZE", "round_up"]

# `EXIT` in the Volta+ SASS encoding (two 64-bit words: instruction, control): the whole synthetic kernel
EXIT = struct.pack("<QQ", 0x000000000000794D, 0x000FEA0003800000)
# NVDevice._setup_gpfifos' shared and local memory windows: NVProgram writes them into constant bank 0's driver part
SHARED_MEM_WINDOW, LOCAL_MEM_WINDOW = 0x729400000000, 0x729300000000
LOCAL_MEM_TOP = 0xfffdc0   # the stack top NVProgram writes after the windows
# .nv.info attributes NVProgram reads (EIFMT_SVAL, 4-byte header then the value): PARAM_CBANK (symbol, parameter offset
# u16, parameter size u16), MIN_STACK_SIZE (symbol, bytes), REGCOUNT (symbol, registers)
EIFMT_SVAL, EIATTR_PARAM_CBANK, EIATTR_MIN_STACK_SIZE, EIATTR_REGCOUNT = 0x04, 0x0A, 0x12, 0x2F
# the synthetic kernel's registers: one allocation granule (NVProgram: "Registers allocation granularity per warp is 256")
SYNTH_REGS = 256 // 32

def round_up(x: int, a: int) -> int: return (x + a - 1) // a * a

@attrs.frozen
class NVCode:
  """A loaded cubin: `image` to place at the code address (what elf_loader lays out), the entry's offset and size in
  it, and the facts NVProgram takes from the sections."""
  image: bytes = attrs.field(repr=False)
  prog_offset: int
  prog_size: int
  regs: int             # register_count
  shmem: int            # shared memory bytes (0x400 + .nv.shared, 128-aligned)
  lcmem: int            # local memory per thread (stack + 0x240)
  cbuf0_size: int       # where the parameters start in constant bank 0 (PARAM_CBANK's offset)
  constbufs: tuple      # ((bank, image offset or None, size), ...): bank 0 defaults to (0, None, 0x160)
  synthetic: bool
  @property
  def cbuf0_bytes(self) -> int: return dict((i, sz) for i, _, sz in self.constbufs)[0]
  @property
  def qmd_offset(self) -> int:
    """Where NVComputeQueue.exec puts the QMD in the kernel-argument block: after constant bank 0, 256-aligned."""
    return round_up(self.cbuf0_bytes, 1 << 8)

def _attr(param: int, *vals, fmt: str) -> bytes:
  body = struct.pack("<" + fmt, *vals)
  return struct.pack("<BBH", EIFMT_SVAL, param, len(body)) + body

def synthetic(t: Target, name: str, kernarg_size: int) -> bytes:
  """A cubin for a kernel without NV code: `.text.NAME` = EXIT, `.nv.constant0.NAME` the driver part (its size the
  Target's prefix) plus `kernarg_size` bytes of parameters, `.nv.info` REGCOUNT and `.nv.info.NAME` PARAM_CBANK."""
  param_off = 4 * t.cbuf0_min if t.blackwell else 0x160   # Volta+ cubins start the parameters at c[0x0][0x160]
  secs = [(f".text.{name}", libc.SHT_PROGBITS, libc.SHF_ALLOC | libc.SHF_EXECINSTR, 128, EXIT),
          (f".nv.constant0.{name}", libc.SHT_PROGBITS, libc.SHF_ALLOC, 4, bytes(param_off + kernarg_size)),
          (".nv.info", libc.SHT_LOPROC, 0, 4, _attr(EIATTR_REGCOUNT, 0, SYNTH_REGS, fmt="II")),
          (f".nv.info.{name}", libc.SHT_LOPROC, 0, 4, _attr(EIATTR_PARAM_CBANK, 0, param_off, kernarg_size, fmt="IHH"))]
  names = b"\0.shstrtab\0" + b"".join(n.encode() + b"\0" for n, *_ in secs)
  secs = [(".shstrtab", libc.SHT_STRTAB, 0, 1, names)] + secs
  body, offs = bytearray(), []
  for _, _, _, align, data in secs:
    body += bytes(-(64 + len(body)) % align)
    offs.append(64 + len(body))
    body += data
  body += bytes(-(64 + len(body)) % 8)
  eh = libc.Elf64_Ehdr()
  eh.e_ident[:8] = list(libc.ELFMAG.encode() + bytes([libc.ELFCLASS64, libc.ELFDATA2LSB, libc.EV_CURRENT, 0]))
  eh.e_type, eh.e_machine, eh.e_version, eh.e_ehsize = libc.ET_EXEC, libc.EM_CUDA, libc.EV_CURRENT, ctypes.sizeof(eh)
  eh.e_shoff, eh.e_shentsize, eh.e_shnum, eh.e_shstrndx = 64 + len(body), ctypes.sizeof(libc.Elf64_Shdr), len(secs) + 1, 1
  shdrs = [bytes(libc.Elf64_Shdr())]
  for (n, typ, flags, align, data), off in zip(secs, offs):
    sh = libc.Elf64_Shdr()
    sh.sh_name, sh.sh_type, sh.sh_flags, sh.sh_offset = names.index(b"\0" + n.encode() + b"\0") + 1, typ, flags, off
    sh.sh_size, sh.sh_addralign = len(data), align
    shdrs.append(bytes(sh))
  return bytes(eh) + bytes(body) + b"".join(shdrs)

def _info(content: bytes):
  """NVProgram._parse_elf_info: (format, attribute, value bytes or the inline value)."""
  off = 0
  while off + 4 <= len(content):
    typ, param, sz = struct.unpack_from("<BBH", content, off)
    yield typ, param, content[off + 4:off + 4 + sz] if typ == EIFMT_SVAL else sz
    off += (sz if typ == EIFMT_SVAL else 0) + 4

def load(blob: bytes, name: str, synthetic: bool = False) -> NVCode:
  """A cubin's facts, as NVProgram.__init__ reads them (elf_loader with 128-byte section alignment). Relocations are
  refused (a synthetic cubin has none). Raises ValueError on anything that is not such a cubin."""
  from tinygrad.runtime.support.elf import elf_loader
  try: image, sections, relocs = elf_loader(blob, force_section_align=128)
  except Exception as e: raise ValueError(f"not a CUDA ELF (cubin) ({e})") from None
  if relocs: raise ValueError(f"{len(relocs)} relocations: code needing its load address is not supported")
  regs, shmem, lcmem, cbuf0 = 0, 0x400, 0x240, 0
  prog_off, prog_sz = None, len(image)
  banks: dict[int, tuple[Optional[int], int]] = {0: (None, 0x160)}
  for sh in sections:
    if sh.name == f".nv.shared.{name}": shmem = round_up(0x400 + sh.header.sh_size, 128)
    if sh.name == f".text.{name}": prog_off, prog_sz = sh.header.sh_addr, sh.header.sh_size
    elif m := re.match(r"\.nv\.constant(\d+)", sh.name): banks[int(m.group(1))] = (sh.header.sh_addr, sh.header.sh_size)
    elif sh.name.startswith(".nv.info"):
      for typ, param, data in _info(sh.content):
        if sh.name == f".nv.info.{name}" and param == EIATTR_PARAM_CBANK: cbuf0 = struct.unpack_from("<IH", data)[1]
        elif sh.name == ".nv.info" and param == EIATTR_MIN_STACK_SIZE: lcmem = struct.unpack_from("<II", data)[1] + 0x240
        elif sh.name == ".nv.info" and param == EIATTR_REGCOUNT: regs = struct.unpack_from("<II", data)[1]
  if prog_off is None: raise ValueError(f"no .text.{name} section (the kernel's code)")
  return NVCode(bytes(image), prog_off, prog_sz, regs, shmem, lcmem, cbuf0, tuple((i, o, sz) for i, (o, sz) in banks.items()), synthetic)

def cbuf0_prefix(t: Target, code: NVCode) -> list:
  """NVProgram's cbuf_0: the driver part of constant bank 0 the kernel arguments follow (CLikeArgsState's prefix)."""
  c = [0] * max(code.cbuf0_size // 4, t.cbuf0_min)
  def lohi(x): return [x & 0xFFFFFFFF, x >> 32]
  if t.blackwell: c[188:192], c[223] = [*lohi(SHARED_MEM_WINDOW), *lohi(LOCAL_MEM_WINDOW)], LOCAL_MEM_TOP
  else: c[6:12] = [*lohi(SHARED_MEM_WINDOW), *lohi(LOCAL_MEM_WINDOW), *lohi(LOCAL_MEM_TOP)]
  return c

def program_qmd(t: Target, code: NVCode, code_addr: int, slm_per_thread: int) -> QMD:
  """NVProgram.__init__'s QMD template for the code at `code_addr` on a device whose local memory per thread is
  `slm_per_thread`: program, registers, shared/local memory, caches, constant banks."""
  prog = code_addr + code.prog_offset
  lo, hi = prog & 0xFFFFFFFF, prog >> 32
  if t.blackwell:
    f = {"qmd_major_version": 5, "qmd_type": nv.NVCEC0_QMDV05_00_QMD_TYPE_GRID_CTA, "program_address_upper_shifted4": (prog >> 4) >> 32,
         "program_address_lower_shifted4": (prog >> 4) & 0xFFFFFFFF, "register_count": code.regs, "shared_memory_size_shifted7": code.shmem >> 7,
         "shader_local_memory_high_size_shifted4": slm_per_thread >> 4}
  else:
    f = {"qmd_major_version": 3, "sm_global_caching_enable": 1, "program_address_upper": hi, "program_address_lower": lo,
         "shared_memory_size": code.shmem, "register_count_v": code.regs, "shader_local_memory_high_size": slm_per_thread}
  smem_cfg = min(c * 1024 for c in (32, 64, 100) if c * 1024 >= code.shmem) // 4096 + 1
  q = QMD.of(t).write(**f, qmd_group_id=0x3f, invalidate_texture_header_cache=1, invalidate_texture_sampler_cache=1,
    invalidate_texture_data_cache=1, invalidate_shader_data_cache=1, api_visible_call_limit=1, sampler_index=1, barrier_count=1,
    cwd_membar_type=nv.NVC6C0_QMDV03_00_CWD_MEMBAR_TYPE_L1_SYSMEMBAR, constant_buffer_invalidate_0=1, min_sm_config_shared_mem_size=smem_cfg,
    target_sm_config_shared_mem_size=smem_cfg, max_sm_config_shared_mem_size=0x1a, program_prefetch_size=min(code.prog_size >> 8, 0x1ff),
    sass_version=t.sass_version, program_prefetch_addr_upper_shifted=prog >> 40, program_prefetch_addr_lower_shifted=prog >> 8)
  for i, off, sz in code.constbufs:
    q.set_constant_buf_addr(i, 0 if off is None else code_addr + off)
    q.write(**{f"constant_buffer_size_shifted4_{i}": sz, f"constant_buffer_valid_{i}": 1})   # tinygrad writes the size unshifted
  return q
