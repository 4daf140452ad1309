"""Disassembler: command buffers -> a packet listing in the manner of Mesa's ac_parse_ib (offset, packet name, then
one line per field), with addresses named by the image's memory plan and each packet's .hcq line; and the lifter
`as_hcq`, which turns command buffers back into .hcq queue statements. Never raises on any dword input."""
from __future__ import annotations
import re, struct
from typing import Optional
from ..ir import Wait, SignalWrite, Exec, Copy, Write, Barrier, Timestamp, Epoch, Expr, Ref, Slice
from .image import Image, QueueImage, M32

__all__ = ["disasm_image", "disasm_dwords", "lift_queue", "as_hcq"]

_FUNC = {0: "always", 1: "<", 2: "<=", 3: "==", 4: "!=", 5: ">=", 6: ">"}
# fields not worth a line: the opcode is the name, halves of joined 64-bit values are shown whole
_HIDE = {"opcode", "op", "sub_op"}

def _decoder(engine: str, target: str):
  from . import pm4, sdma
  return (pm4 if engine in ("compute", "pm4") else sdma).decoder(target)

def _fmt_field(k: str, v, img: Optional[Image]) -> str:
  if isinstance(v, tuple): return " ".join(f"{x:#010x}" for x in v)
  if not isinstance(v, int): return str(v)
  s = f"{v:#x}" if v > 9 else str(v)
  if k == "function" or k == "func": s += f" ({_FUNC.get(v, '?')})"
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
      where, last = f"  ; {img.file if img else ''}:{st[2]}  {st[6]}", st
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
  return "\n".join(disasm_packets(_decoder(engine, target).decode(dwords))) + "\n"

def disasm_image(img: Image) -> str:
  out = []
  for q in img.queues:
    out.append(f"queue {q.name} {q.engine} on {q.device} ({q.arch}, {q.packet_format}) @ {q.addr:#x}: {len(q.dwords)} dwords, "
               f"{len(q.patches)} patched" + (f", {len(q.mem_patches)} kernel-argument dwords patched" if q.mem_patches else ""))
    out += disasm_packets(_decoder(q.engine, q.arch).decode(q.dwords), img, q)
    if q.mem_patches: out.append(f"  memory the host patches when it submits {q.name} (kernel arguments):")
    for p in q.mem_patches: out.append(f"  {p.offset:#x} ({img.name_at(p.offset)}) = {p.expr()}")
    out.append("")
  return "\n".join(out)

# ---------------------------------------------------------------- lifting back to .hcq

def _signal_at(img: Image, addr: int) -> Optional[str]:
  return next((n for n, a in img.signals.items() if a == addr), None)

def _buffer_slice(img: Image, addr: int, size: int, patched: bool = True) -> Optional[Slice]:
  """The slice at addr; in a rebound buffer's launch-k region with no per-launch patch, `x@k` (a fixed address)."""
  for n, (a, sz) in img.buffers.items():
    for k, base in enumerate(img.var_values.get(f"{n}.addr") or ()):
      if base <= addr and addr + size <= base + sz and (k or not patched):
        lo = addr - base
        return Slice(Ref(n), launch=k + 1) if lo == 0 and size == sz else Slice(Ref(n), lo, lo + size, True, k + 1)
    if a <= addr and addr + size <= a + sz:
      lo = addr - a
      return Slice(Ref(n)) if lo == 0 and size == sz else Slice(Ref(n), lo, lo + size, True)
  return None

class _Unliftable(Exception): pass

def _args(img: Image, q: QueueImage, k: dict, kr, ka: int):
  """An exec's arguments from its kernel-argument region: slices by the region's record, scalar parameters (`None`
  there) from the queue's kernel-argument patches, else the value stored in the kernel arguments."""
  mem = {p.offset: p for p in getattr(q, "mem_patches", ())}
  data = dict(img.data)
  params = k.get("params") or []
  for i, a in enumerate(kr.meta["args"]):
    if a is not None: yield Slice(Ref(a[0]), a[1], a[2], bool(a[3])); continue
    mode, off = params[i][0], params[i][2]
    if (p := mem.get(ka + off)) is not None: yield Expr(Ref(p.var) if p.var else None, p.add); continue
    raw = int.from_bytes(data.get(ka, b"")[off:off + 4].ljust(4, b"\0"), "little")
    yield Expr(None, raw)  # as the program wrote it: a literal is 0 .. 2**32-1 (an i32 parameter takes its bits), never negative

def _lift_group(img: Image, q: QueueImage, pk: list, engine: str) -> list:
  """The statements a group of packets (one statement's, or one packet without a source map) stands for."""
  patches = {p.offset: p for p in q.patches}
  def expr(off: int, v: int) -> Expr:
    p = patches.get(off)
    return Expr(Ref(p.var), p.add) if p and p.var else Expr(None, v)
  def wait(sig_addr: int, off: int, v: int):
    name = _signal_at(img, sig_addr)
    if name is None: raise _Unliftable(f"wait on {sig_addr:#x}, which is no signal")
    e = expr(off, v)
    if name == f"{q.device}.timeline" and e == Expr(Ref(f"{q.device}.epoch"), -1): return Epoch()
    return Wait(Ref(name), e)
  def sig(addr: int) -> str:
    if (name := _signal_at(img, addr)) is None: raise _Unliftable(f"write to {addr:#x}, which is no signal")
    return name
  def write(addr: int, size: int, at: int, value_at: int, v: int):
    """`write`: a store into a buffer (tinygrad's HWQueue.write); a signal's memory is no buffer."""
    sl = _buffer_slice(img, addr, size, at in patches)
    if sl is None: raise _Unliftable(f"{size}-byte write to {addr:#x}, which is in no buffer")
    return [Write(sl, expr(value_at, v))]
  names = [p.name for p in pk]
  f = [p.fields for p in pk]
  if any(p.note for p in pk): raise _Unliftable(pk[0].note or "raw packet")
  if engine == "compute":
    if names == ["WAIT_REG_MEM"] and f[0]["mem_space"] == 1: return [wait(f[0]["addr"], pk[0].offset + 4, f[0]["reference"])]
    if names == ["WAIT_REG_MEM", "ACQUIRE_MEM"] and f[0]["mem_space"] == 0: return [Barrier()]
    if names == ["RELEASE_MEM"] and f[0]["data_sel"] in (1, 2) and not f[0].get("cache_action") and not f[0].get("int_sel"):
      return write(f[0]["addr"], 4 * f[0]["data_sel"], pk[0].offset + 3, pk[0].offset + 5, f[0]["data_lo"])  # no cache action: HWQueue.write
    if names == ["RELEASE_MEM"] and f[0]["data_sel"] == 1: return [SignalWrite(Ref(sig(f[0]["addr"])), expr(pk[0].offset + 5, f[0]["data_lo"]))]
    if names == ["RELEASE_MEM", "RELEASE_MEM", "ACQUIRE_MEM"] and f[1]["data_sel"] == 3: return [Timestamp(Ref(sig(f[1]["addr"] - 8)))]
    if "DISPATCH_DIRECT" in names:
      regs = {p.fields["reg"]: p.fields["values"] for p in pk if p.name == "SET_SH_REG"}
      pgm, user, start = regs.get("regCOMPUTE_PGM_LO"), regs.get("regCOMPUTE_USER_DATA_0"), regs.get("regCOMPUTE_START_X")
      if not pgm or not user or len(user) < 2 or not start or len(start) < 6: raise _Unliftable("dispatch without program/user data")
      prog = ((pgm[1] << 32) | pgm[0]) << 8
      k = next((k for k in img.kernels if k["prog_addr"] == prog), None)
      ka = (user[-1] << 32) | user[-2]
      kr = next((r for r in img.regions if r.kind == "kernargs" and r.addr == ka), None)
      if k is None or kr is None: raise _Unliftable(f"dispatch of unknown program {prog:#x}")
      args = tuple(_args(img, q, k, kr, ka))
      d = f[names.index("DISPATCH_DIRECT")]
      di = pk[names.index("DISPATCH_DIRECT")].offset
      sx = next(p for p in pk if p.name == "SET_SH_REG" and p.fields["reg"] == "regCOMPUTE_START_X").offset
      def dims(vals, at):  # launch dims: patched dwords are expressions over vars
        out = [expr(at + j, v) for j, v in enumerate(vals)]
        return tuple(e if e.var is not None else e.offset for e in out)
      grid, block = dims((d["dim_x"], d["dim_y"], d["dim_z"]), di + 1), dims(tuple(start[3:6]), sx + 5)
      return [Exec(Ref(k["name"]), args, None if grid == (1, 1, 1) else grid, None if block == (1, 1, 1) else block)]
  else:
    if not pk: return [Barrier()]  # the only statement with no SDMA packets
    if names == ["POLL_REGMEM"] and f[0]["mem_poll"] == 1: return [wait(f[0]["addr"], pk[0].offset + 3, f[0]["value"])]
    if names == ["FENCE"]: return [SignalWrite(Ref(sig(f[0]["addr"])), expr(pk[0].offset + 3, f[0]["data"]))]
    if names == ["TIMESTAMP_GET_GLOBAL"]: return [Timestamp(Ref(sig(f[0]["write_addr"] - 8)))]
    if names == ["WRITE_UNTILED"] and f[0]["count"] in (0, 1):
      return write(f[0]["dst_addr"], 4 * (f[0]["count"] + 1), pk[0].offset + 1, pk[0].offset + 4, f[0]["data0"])
    if names and all(n == "COPY_LINEAR" for n in names):
      src, dst = f[0]["src_addr"], f[0]["dst_addr"]
      size = sum(x["count"] + 1 for x in f)
      at = pk[0].offset
      s, d = _buffer_slice(img, src, size, at + 3 in patches), _buffer_slice(img, dst, size, at + 5 in patches)
      if s is None or d is None: raise _Unliftable("copy outside every buffer")
      return [Copy(d, s)]
  raise _Unliftable("packets " + ", ".join(names) + " are no .hcq statement")

def lift_queue(img: Image, q: QueueImage) -> list:
  """The queue's statements, recovered from its packets; the image's statement boundaries group the packets (a copy
  split into several COPY_LINEAR packets stays one `copy`). A group that is no statement lifts to a comment string."""
  pk = _decoder(q.engine, q.arch).decode(q.dwords)
  groups = [[p for p in pk if s[0] <= p.offset < s[0] + s[1]] for s in q.stmts] if q.stmts else [[p] for p in pk]
  out: list = []
  for g in groups:
    try: out += _lift_group(img, q, g, q.engine)
    except (_Unliftable, KeyError, IndexError) as e: out.append(f"# dwords {g[0].offset if g else '?'}: cannot lift ({e})")
  return out

def as_hcq(img: Image) -> str:
  from ..lang.format import format_stmt
  out = [f"# lifted from {img.file} ({img.target})"]
  for q in img.queues:
    out.append(f"queue {q.name} {q.engine} on {q.device} {{")
    out += [f"  {s}" if isinstance(s, str) else f"  {format_stmt(s)}" for s in lift_queue(img, q)]
    out.append("}")
  return "\n".join(out) + "\n"

# ---------------------------------------------------------------- CLI

_HEX_QUEUE = re.compile(r"queue\s+(\S+)\s+(compute|copy)(?:\s+(gfx\w+))?\s*$")

def read_raw(b: bytes) -> list:
  """Hex text (`0x` optional, `#` comments) or little-endian binary -> [(queue name, engine, arch, dwords)]. Lines of
  `compile --hex` (`queue NAME ENGINE ARCH: dwords`) carry their own queue, engine and arch; other text is one
  anonymous queue (engine and arch None)."""
  try:
    out: list = []
    for n, line in enumerate(b.decode("ascii").split("\n"), 1):
      line = line.split("#")[0]
      head, colon, rest = line.partition(":")
      m = _HEX_QUEUE.fullmatch(head.strip()) if colon else None
      if m: out.append((m[1], m[2], m[3], [])); line = rest
      elif colon: raise ValueError(f"line {n}: `{head.strip()}:` is not a `queue NAME ENGINE ARCH:` prefix of `compile --hex`")
      if not out: out.append((None, None, None, []))
      out[-1][3].extend(int(w, 16) & M32 for w in line.replace(",", " ").split())
    return out
  except UnicodeDecodeError: pass
  except ValueError as e:
    if all(32 <= c < 127 or c in b"\t\n\r" for c in b): raise ValueError(f"not hex dwords: {e}")
  if len(b) % 4: raise ValueError(f"binary input of {len(b)} bytes is not a whole number of dwords")
  return [(None, None, None, list(struct.unpack(f"<{len(b) // 4}I", b)))]
