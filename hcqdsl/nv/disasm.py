"""Disassembler for NV queues: each pushbuffer method group (offset, methods, the .hcq line, one line per value and
named flag field, addresses named by the image's memory plan), then the QMDs the queue's execs wrote — program,
grid, block, constant bank 0, the semaphores released when the grid completes, the QMD it launches next — with the
values the host patches per launch marked. Never raises on any dword input. hcqdsl/vendors.py's disasm_image lists an
image's queues, each by its vendor's disasm_queue."""
from __future__ import annotations
from typing import Optional
from ..target.image import Image, QueueImage
from ..target.layout import kernargs_region
from ..amd import disasm as amd_disasm
from . import pushbuf
from .qmd import QMD
from .targets import get_target

__all__ = ["disasm_queue", "disasm_statement", "disasm_dwords", "disasm_qmd", "qmds"]

def qmds(img: Image, q: QueueImage) -> list:
  """(address, QMD) of each QMD of an NV compute queue's execs, in exec order: after constant bank 0 in each of its
  kernel-argument regions, where the launching SEND_PCAS_A or dependent pointer says."""
  t, data = get_target(q.arch), dict(img.data)
  regs = {r.addr: r for r in img.regions if r.kind == "kernargs" and r.name.startswith(q.name + ".")}
  out = []
  for a, r in sorted(regs.items()):
    mem = data.get(a, b"")
    if len(mem) < t.qmd_size: continue
    qa = a + len(mem) - t.qmd_size
    out.append((qa, QMD.of(t, bytearray(mem[-t.qmd_size:]))))
  return out

def disasm_qmd(img: Optional[Image], qa: int, qmd: QMD, patched: dict) -> list[str]:
  """One QMD: where it is, then its launch fields; `patched` maps addresses to the expressions the host writes there."""
  def name(a): return f" ({n})" if img is not None and (n := img.name_at(a)) else ""
  def mark(f): return f"   ; patched per launch = {patched[qa + qmd.offset(f)].expr()}" if qa + qmd.offset(f) in patched else ""
  out = [f"  QMD v{qmd.version} at {qa:#x}{name(qa)}:"]
  prog, cb = qmd.address("program"), qmd.address("cbuf0")
  out.append(f"          {'program':<34} {prog:#x}{name(prog)}")
  g = qmd.grid_field()
  go = qmd.offset(g)
  grid = [int.from_bytes(qmd.data[go + 4 * j:go + 4 * j + 4], "little") for j in range(3)]
  for j, d in enumerate(grid):
    m = f"   ; patched per launch = {patched[qa + go + 4 * j].expr()}" if qa + go + 4 * j in patched else ""
    out.append(f"          {'grid ' + 'xyz'[j]:<34} {d}{m}")
  bo = qmd.offset("cta_thread_dimension0")
  block = (int.from_bytes(qmd.data[bo:bo + 2], "little"), int.from_bytes(qmd.data[bo + 2:bo + 4], "little"),
           qmd.data[qmd.offset("cta_thread_dimension2")])
  out.append(f"          {'block':<34} {block[0]} {block[1]} {block[2]}")
  out.append(f"          {'constant bank 0':<34} {cb:#x}{name(cb)}, {qmd.read('constant_buffer_size_shifted4_0')} bytes")
  for i in range(2):
    en, af, pf = qmd.release_fields(i)
    if not qmd.read(en): continue
    a = qmd.address(f"release{i}")
    out.append(f"          {f'release {i}':<34} {a:#x}{name(a)} = {qmd.read(pf)} (and the GPU timer at +8){mark(pf)}")
  if qmd.read("dependent_qmd0_enable"):
    d = qmd.address("dependent")
    out.append(f"          {'then launch QMD':<34} {d:#x}{name(d)}")
  out.append(f"          {'sass_version, registers, shared':<34} {qmd.read('sass_version'):#x}, "
             f"{qmd.read('register_count_v' if qmd.version < 4 else 'register_count')}, "
             f"{qmd.read('shared_memory_size') if qmd.version < 4 else qmd.read('shared_memory_size_shifted7') << 7} bytes")
  return out

def disasm_queue(img: Image, q: QueueImage) -> list[str]:
  """An NV queue's listing: its method groups (amd/disasm.py's format), then its QMDs."""
  out = amd_disasm.disasm_packets(pushbuf.decoder(q.arch).decode(q.dwords), img, q)
  patched = {p.offset: p for p in q.mem_patches}
  for qa, qmd in (qmds(img, q) if q.engine == "compute" else ()): out += disasm_qmd(img, qa, qmd, patched)
  return out

def disasm_statement(img: Image, q: QueueImage, index: int) -> list[str]:
  """The listing of statement `index` of an NV queue's body: the method groups its source map's entry covers, then
  the QMD an exec wrote (at the end of its kernel-argument region)."""
  e = q.stmts[index]
  out = amd_disasm.disasm_packets(pushbuf.decoder(q.arch).decode(q.dwords, e.offset, e.offset + e.length), img, q)
  r = next((r for r in img.regions if r.name == kernargs_region(q.name, index)), None)
  if r is None or q.engine != "compute": return out
  patched = {p.offset: p for p in q.mem_patches}
  for qa, qmd in qmds(img, q):
    if r.addr <= qa < r.addr + r.size: out += disasm_qmd(img, qa, qmd, patched)
  return out

def disasm_dwords(dwords, arch: str = "") -> str:
  """A listing of raw NV pushbuffer dwords (no image: addresses are not named, QMDs not found)."""
  return "\n".join(amd_disasm.disasm_packets(pushbuf.decoder(arch).decode(dwords))) + "\n"
