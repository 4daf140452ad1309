"""The vendors, as tinygrad's ops_amd.py and ops_nv.py fill in runtime/support/hcq.py: a table vendor -> what its
back end (hcqdsl/amd, hcqdsl/nv) fills into the target layer (hcqdsl/target), and the API that picks the vendor
from a program's or an image's devices — `compile_program`, `disasm_image`, `disasm_dwords` — queue by queue, so a
program with AMD and NV devices compiles and lists each queue by its own device's vendor. The lifters' table is
lift/image.py's LIFTERS (the AMD packet lifter lives in hcqdsl/lift)."""
from __future__ import annotations
from typing import Callable
import attrs
from .ir import Program, vendor_of, launches_text
from .target.image import Image, QueueImage
from .target.lower import Lowering
from .amd.compile import AMDLowering
from .amd import disasm as amd_disasm, meaning as amd_meaning
from .nv.compile import NVLowering
from .nv import disasm as nv_disasm, meaning as nv_meaning

__all__ = ["Backend", "BACKENDS", "compile_program", "disasm_image", "disasm_statement", "disasm_dwords", "wptr_bytes"]

@attrs.frozen
class Backend:
  """What one vendor fills in: its queue lowering (target/lower.py's QueueLowering), its listing of an image's queue
  and of raw dwords (engine, arch), what the host patches in its memory when it submits a queue (for the listing), and
  the bytes one step of a ring's write pointer covers per engine (its meaning.WPTR_BYTES)."""
  lowering: type
  disasm_queue: Callable[[Image, QueueImage], list]
  disasm_dwords: Callable[[list, str, str], str]
  patched_memory: str
  disasm_statement: Callable[[Image, QueueImage, int], list]   # one statement's packets (by the source map)
  wptr_bytes: dict

BACKENDS = {
  "AMD": Backend(AMDLowering, amd_disasm.disasm_queue, amd_disasm.disasm_dwords, "kernel arguments", amd_disasm.disasm_statement,
                 amd_meaning.WPTR_BYTES),
  "NV": Backend(NVLowering, nv_disasm.disasm_queue, lambda dwords, engine, arch: nv_disasm.disasm_dwords(dwords, arch), "kernel arguments, QMDs",
                nv_disasm.disasm_statement, nv_meaning.WPTR_BYTES),
}

def wptr_bytes(arch: str, engine: str) -> int:
  """The bytes one step of the write pointer of a ring of `engine` (compute, copy) on an `arch` device covers."""
  return BACKENDS[vendor_of(arch)].wptr_bytes[engine]

def compile_program(program: Program, target: str = "gfx1100") -> Image:
  """Lower `program`: each queue by its device's vendor (AMD: PM4/SDMA, NV: pushbuffers and QMDs, docs/nv.md). Each
  device uses its declared arch, else `target` when it is one of the device's vendor, else the vendor's default
  (ir.device_arch). Raises ValueError for an unknown target, HcqError with the static checks' errors (they hold NV's
  refusals too: check/static.py), or with what only lowering finds (a code object that does not load, an entry point
  off 256 bytes, an address past an NV queue's 40 bits)."""
  return Lowering(program, target, {v: b.lowering for v, b in BACKENDS.items()}).image()

def disasm_image(img: Image) -> str:
  """The listing of every queue of `img` (`hcqdsl disasm`), each by its vendor's disasm_queue, then the memory the
  host patches when it submits it."""
  out = []
  for q in img.queues:
    b = BACKENDS[vendor_of(q.arch)]
    clause = f" launches {launches_text(q.launches)}" if q.launches is not None else ""
    out.append(f"queue {q.name} {q.engine} on {q.device}{clause} ({q.arch}, {q.packet_format}) @ {q.addr:#x}: {len(q.dwords)} dwords, "
               f"{len(q.patches)} patched" + (f", {len(q.mem_patches)} kernel-argument dwords patched" if q.mem_patches else ""))
    out += b.disasm_queue(img, q)
    if q.mem_patches: out.append(f"  memory the host patches when it submits {q.name} ({b.patched_memory}):")
    for p in q.mem_patches: out.append(f"  {p.offset:#x} ({img.name_at(p.offset)}) = {p.expr()}")
    out.append("")
  return "\n".join(out)

def disasm_statement(img: Image, queue: str, index: int) -> list[str]:
  """The listing of statement `index` of queue `queue`'s body, by its vendor: the packets (AMD) or method groups and
  QMD (NV) the image's source map says it compiled to, with the image's names and what the host patches per launch
  (the language server's hover)."""
  q = next(q for q in img.queues if q.name == queue)
  return BACKENDS[vendor_of(q.arch)].disasm_statement(img, q, index)

def disasm_dwords(dwords, engine: str, arch: str) -> str:
  """A listing of raw dwords of a queue of `engine` (compute, copy; an NV arch's: its pushbuffer methods) on `arch`
  (no image: addresses are not named)."""
  return BACKENDS[vendor_of(arch)].disasm_dwords(dwords, engine, arch)
