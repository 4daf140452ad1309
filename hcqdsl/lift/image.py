"""Images back to .hcq: `lift_image` recovers the whole program an image was compiled from (names, vars, host steps,
kernels and expects from its metadata, queue statements from its packets); `lift_queue` / `as_hcq` only the queue
statements; `code_objects` the AMD code objects the lifted program names (`amd "E_2.co"`), to be written next to it.
The statement lifter (`lift_group`) is shared with the lifts of raw dumps and captures (lift/raw.py, lift/captured.py)."""
from __future__ import annotations
import pathlib, struct
from typing import Callable, Optional
import attrs
import numpy as np
from ..ir import (Program, Device, Buffer, Signal, Var, Kernel, Param, Impl, Queue, Host, Expect, Wait, SignalWrite,
                  Exec, Copy, Write, HostWrite, Poll, Barrier, Timestamp, Epoch, Submit, Ref, Expr, Slice, Data, U32_MAX, POLL_SIZE, DTYPES,
                  epoch_wait, timeline_of, epoch_of, vendor_of)
from ..target.image import Image, QueueImage
from ..target.layout import TIMESTAMP_OFFSET
from ..target.lifting import Unliftable, signal_at, buffer_slice
from ..amd.disasm import decoder
from ..amd.pm4 import FUNC_GE, FUNC_EQ, DATA_SEL_CLOCK
from ..amd.meaning import meaning, field_at, program_address, kernarg_address, PGM_REG, USER_DATA_REG
from ..nv import lift as nv_lift

__all__ = ["lift_image", "lift_queue", "as_hcq", "code_objects", "write_code_objects", "lift_group", "lift_statements", "queue_decl",
           "lifted_program", "trimmed_data", "attach_comments", "LIFTERS", "QueueLifter"]

# what a group of packets may raise on an image whose records disagree with its packets: kept as a comment
_CANNOT = (Unliftable, KeyError, IndexError, TypeError)

def _args(img: Image, q: QueueImage, k: dict, kr, ka: int):
  """An exec's arguments from its kernel-argument region: slices by the region's record, scalar parameters (`None`
  there) from the queue's kernel-argument patches, else the value stored in the kernel arguments."""
  mem = {p.offset: p for p in q.mem_patches}
  data = dict(img.data)
  params = k.get("params") or []
  for i, a in enumerate(kr.meta["args"]):
    if a is not None:
      yield Slice(Ref(a[0]), a[1], a[2], a[3], a[4])
      continue
    off = params[i][2]
    if (p := mem.get(ka + off)) is not None:
      yield Expr(Ref(p.var) if p.var else None, p.add)
      continue
    raw = int.from_bytes(data.get(ka, b"")[off:off + 4].ljust(4, b"\0"), "little")
    yield Expr(None, raw)  # as the program wrote it: a literal is 0 .. 2**32-1 (an i32 parameter takes its bits), never negative

def lift_group(img: Image, q: QueueImage, pk: list, engine: str) -> list:
  """The statements a group of packets (one statement's, or one packet without a source map) stands for. Raises
  Unliftable when it stands for none."""
  if any(p.note for p in pk): raise Unliftable(pk[0].note or "raw packet")
  g = _Group(img, q, engine)
  out = g.compute(pk) if engine == "compute" else g.copy(pk)
  if out is None: raise Unliftable("packets " + ", ".join(p.name for p in pk) + " are no .hcq statement")
  return out

class _Group:
  """Lifts one group of packets of queue `q`; a dword the queue patches per launch is its var's expression. Where a
  field sits in its packet is the decoders' (amd.meaning.field_at), as the patch table's offsets are."""
  def __init__(self, img: Image, q: QueueImage, engine: str):
    self.img, self.q, self.engine, self.patches = img, q, engine, {p.offset: p for p in q.patches}

  def at(self, p, field: str) -> int:
    """The dword offset of packet `p`'s `field` in the queue."""
    return p.offset + field_at(self.engine, self.q.arch, p.name, field)

  def expr(self, off: int, v: int) -> Expr:
    p = self.patches.get(off)
    return Expr(Ref(p.var), p.add) if p and p.var else Expr(None, v)

  def compute(self, pk: list) -> Optional[list]:
    names, f = [p.name for p in pk], [p.fields for p in pk]
    if names == ["WAIT_REG_MEM"] and f[0]["mem_space"] == 1:
      return [self.wait(pk[0], f[0]["addr"], "reference", f[0]["function"], f[0]["mask"])]
    if names == ["WAIT_REG_MEM", "ACQUIRE_MEM"] and f[0]["mem_space"] == 0: return [Barrier()]
    m = meaning(pk[0]) if len(pk) == 1 else None
    if m is not None and m.kind == "write": return self.write(pk[0], m)   # RELEASE_MEM with no cache action: HWQueue.write
    if m is not None and m.kind == "signal" and names == ["RELEASE_MEM"] and m.addr is not None and m.value_field and m.value is not None:
      return [SignalWrite(Ref(self.sig(m.addr)), self.expr(self.at(pk[0], m.value_field), m.value))]
    if names == ["RELEASE_MEM", "RELEASE_MEM", "ACQUIRE_MEM"] and f[1]["data_sel"] == DATA_SEL_CLOCK:
      return [Timestamp(Ref(self.sig(f[1]["addr"] - TIMESTAMP_OFFSET)))]
    # hcq2's timestamp (extra/hcq2/ops_amd2.py pm4_timestamp): the GPU clock by one RELEASE_MEM, no cache action
    if names == ["RELEASE_MEM"] and f[0]["data_sel"] == DATA_SEL_CLOCK: return [Timestamp(Ref(self.sig(f[0]["addr"] - TIMESTAMP_OFFSET)))]
    if "DISPATCH_DIRECT" in names: return [self.exec(pk)]
    return None

  def copy(self, pk: list) -> Optional[list]:
    names, f = [p.name for p in pk], [p.fields for p in pk]
    if not pk: return [Barrier()]  # the only statement with no SDMA packets
    if names == ["POLL_REGMEM"] and f[0]["mem_poll"] == 1: return [self.wait(pk[0], f[0]["addr"], "value", f[0]["func"], f[0]["mask"])]
    if names == ["FENCE"]: return [SignalWrite(Ref(self.sig(f[0]["addr"])), self.expr(self.at(pk[0], "data"), f[0]["data"]))]
    if names == ["TIMESTAMP_GET_GLOBAL"]: return [Timestamp(Ref(self.sig(f[0]["write_addr"] - TIMESTAMP_OFFSET)))]
    if len(pk) == 1 and (m := meaning(pk[0])) is not None and m.kind == "write": return self.write(pk[0], m)
    if names and all(n == "COPY_LINEAR" for n in names):
      size, img = sum(x["count"] + 1 for x in f), self.img
      s = buffer_slice(img, f[0]["src_addr"], size, self.at(pk[0], "src_addr_31_0") in self.patches)
      d = buffer_slice(img, f[0]["dst_addr"], size, self.at(pk[0], "dst_addr_31_0") in self.patches)
      if s is None or d is None: raise Unliftable("copy outside every buffer")
      return [Copy(d, s)]
    return None

  def wait(self, p, sig_addr: int, value: str, func: int = FUNC_GE, mask: int = U32_MAX):
    """A `wait` (`>=` on every bit), or on a compute queue tinygrad's poll_bit (`==` under a mask): a `poll`."""
    off, v = self.at(p, value), p.fields[value]
    if func == FUNC_EQ and self.engine == "compute": return self.poll(p, sig_addr, off, v, mask)
    if func != FUNC_GE or mask != U32_MAX:   # only tinygrad's compute queue has poll_bit
      raise Unliftable(f"masked poll (function {func}, mask {mask:#x}) of {sig_addr:#x}: a `wait` compares `>=` with every bit"
                       + (", and a `poll` (`==`) runs on compute queues only (tinygrad's AMDCopyQueue has no poll_bit)"
                          if self.engine != "compute" else ""))
    name = signal_at(self.img, sig_addr)
    if name is None: raise Unliftable(f"wait on {sig_addr:#x}, which is no signal")
    return Epoch() if (w := Wait(Ref(name), self.expr(off, v))) == epoch_wait(self.q.device) else w

  def poll(self, p, addr: int, off: int, v: int, mask: int):
    """tinygrad's poll_bit: `(word & mask) == value` on a buffer's word (a signal is no buffer: no `poll` names it)."""
    if (name := signal_at(self.img, addr)) is not None:
      raise Unliftable(f"masked poll (mask {mask:#x}) of signal {name}: a `poll` reads a buffer's word, and a `wait` compares `>=`")
    sl = buffer_slice(self.img, addr, POLL_SIZE, self.at(p, "addr_lo") in self.patches)
    if sl is None: raise Unliftable(f"poll of {addr:#x}, which is in no buffer")
    return Poll(sl, mask, self.expr(off, v))

  def sig(self, addr: int) -> str:
    if (name := signal_at(self.img, addr)) is None: raise Unliftable(f"write to {addr:#x}, which is no signal")
    return name

  def write(self, p, m) -> list:
    """`write`: a store into a buffer (tinygrad's HWQueue.write; `m` its amd.meaning.Meaning); a signal's memory is no buffer."""
    sl = buffer_slice(self.img, m.addr, m.size, self.at(p, m.addr_field) in self.patches)
    if sl is None: raise Unliftable(f"{m.size}-byte write to {m.addr:#x}, which is in no buffer")
    return [Write(sl, self.expr(self.at(p, m.value_field), m.value))]

  def exec(self, pk: list) -> Exec:
    """An `exec`: the program and kernel arguments from its SET_SH_REGs, the grid from DISPATCH_DIRECT, the
    workgroup size from COMPUTE_NUM_THREAD_X..Z (the values after COMPUTE_START_X..Z)."""
    img, regs = self.img, {p.fields["reg"]: p.fields["values"] for p in pk if p.name == "SET_SH_REG"}
    pgm, user, start = regs.get(PGM_REG), regs.get(USER_DATA_REG), regs.get("regCOMPUTE_START_X")
    if not pgm or not user or len(user) < 2 or not start or len(start) < 6: raise Unliftable("dispatch without program/user data")
    prog = program_address(pgm)
    k = next((k for k in img.kernels if k["prog_addr"] == prog), None)
    ka = kernarg_address(user)
    kr = next((r for r in img.regions if r.kind == "kernargs" and r.addr == ka), None)
    if k is None or kr is None: raise Unliftable(f"dispatch of unknown program {prog:#x}")
    d = next(p for p in pk if p.name == "DISPATCH_DIRECT")
    sx = next(p for p in pk if p.name == "SET_SH_REG" and p.fields["reg"] == "regCOMPUTE_START_X")
    def dims(vals, at):  # launch dims: patched dwords are expressions over vars
      return tuple(e if e.var is not None else e.offset for e in (self.expr(at + j, v) for j, v in enumerate(vals)))
    grid = dims((d.fields["dim_x"], d.fields["dim_y"], d.fields["dim_z"]), self.at(d, "dim_x"))
    block = dims(tuple(start[3:6]), sx.offset + sx.length - len(start) + 3)
    return Exec(Ref(k["name"]), tuple(_args(img, self.q, k, kr, ka)), None if grid == (1, 1, 1) else grid, None if block == (1, 1, 1) else block)

def _statement_groups(q: QueueImage) -> list:
  """The packets of each statement: the image's source map groups them (a split copy stays one `copy`, the
  packet-less SDMA barrier is an empty group); without one, each packet is a group."""
  pk = decoder(q.engine, q.arch).decode(q.dwords)
  if not q.stmts: return [[p] for p in pk]
  return [[p for p in pk if s.covers(p.offset)] for s in q.stmts]

def _amd_queue(img: Image, q: QueueImage) -> list:
  """An AMD queue's statements, recovered from its packets; a group that is no statement lifts to a comment string."""
  out: list = []
  for g in _statement_groups(q):
    try: out += lift_group(img, q, g, q.engine)
    except _CANNOT as e: out.append(f"# dwords {g[0].offset if g else '?'}: cannot lift ({e})")
  return out

@attrs.frozen
class QueueLifter:
  """A vendor's lift of an image's queue: `statements` (statements and comment strings: lift_queue, as_hcq) and
  `items` (the statements with the comments attached, trailing comments strings: lift_image's queue bodies)."""
  statements: Callable[[Image, QueueImage], list]
  items: Callable[[Image, QueueImage], list]

# vendor -> its lifter: AMD's packets here (_Group), NV's methods and QMDs in hcqdsl/nv/lift.py
LIFTERS = {"AMD": QueueLifter(_amd_queue, lambda img, q: lift_statements(img, q, [(g, None) for g in _statement_groups(q)])),
           "NV": QueueLifter(nv_lift.lift_queue, lambda img, q: attach_comments(nv_lift.lift_queue(img, q)))}

def lift_queue(img: Image, q: QueueImage) -> list:
  """The queue's statements, recovered from its commands by its vendor's lifter (LIFTERS). A group that is no
  statement lifts to a comment string."""
  return LIFTERS[vendor_of(q.arch)].statements(img, q)

def as_hcq(img: Image) -> str:
  """The queue blocks of `img` as .hcq text (`hcqdsl disasm --as-hcq`), each queue lifted by its vendor's lifter."""
  from ..lang.format import format_stmt
  out = [f"# lifted from {img.file} ({img.target})"]
  for q in img.queues:
    out.append(f"queue {q.name} {q.engine} on {q.device} {{")
    out += [f"  {s}" if isinstance(s, str) else f"  {format_stmt(s)}" for s in lift_queue(img, q)]
    out.append("}")
  return "\n".join(out) + "\n"

def attach_comments(items: list) -> list:
  """Lifted statements and comment strings: each run of comments attached to the statement after it (trailing ones
  stay strings, placed before `}` by queue_decl)."""
  out, pending = [], []
  for s in items:
    if isinstance(s, str): pending.append(s)
    else:
      out.append(attrs.evolve(s, comments=tuple(pending) + s.comments))
      pending = []
  return out + pending

def lift_statements(img: Image, q: QueueImage, groups: list) -> list:
  """Statements of (packets, label) groups, with the comments that stand for what is no statement attached to the
  next one; trailing comments stay strings (placed before `}` by queue_decl)."""
  out, pending = [], []
  for g, label in groups:
    if isinstance(g, str):
      pending.append(g)
      continue
    try: stmts = lift_group(img, q, g, q.engine)
    except _CANNOT as e:
      pending.append(_raw_comment(g, str(e), label))
      continue
    for s in stmts:
      out.append(attrs.evolve(s, comments=tuple(pending), comment=f"# {label}" if label else None))
      pending = []
  return out + pending

def _raw_comment(g: list, why: str, label) -> str:
  if not g: return f"# {label or '?'}: cannot lift ({why})"
  dw = [x for p in g for x in p.dwords]
  shown = " ".join(f"{x:08x}" for x in dw[:12]) + (" ..." if len(dw) > 12 else "")
  names = ", ".join(dict.fromkeys(p.name for p in g))
  if len(g) > 1 and len({p.name for p in g}) == 1: names = f"{len(g)} x {names}"
  return f"# {label or f'@{g[0].offset}'}: {names}: cannot lift ({why}): {shown}"

def queue_decl(name: str, engine: str, device: str, items: list, head: tuple = ()) -> Queue:
  """A queue of lifted statements (strings among them are comments) with `head` comments first."""
  stmts = [s for s in items if not isinstance(s, str)]
  tail = tuple(s for s in items if isinstance(s, str))
  if head and stmts: stmts[0] = attrs.evolve(stmts[0], comments=head + stmts[0].comments)
  elif head: tail = head + tail
  return Queue(name, engine, Ref(device), tuple(stmts), end_comments=tail)

def lifted_program(decls: list, file: str, header: list) -> Program:
  """The program of `decls` with `header` comment lines on top (at the end when there are no declarations)."""
  if not decls: return Program((), file=file, end_comments=tuple(header))
  return Program(tuple([attrs.evolve(decls[0], comments=tuple(header) + decls[0].comments)] + decls[1:]), file=file)

# ---------------------------------------------------------------- whole images

def _code_files(img: Image) -> dict:
  """kernel -> (file name, ELF bytes) of each real code object: the original file's name, unless another code object
  took it (then the kernel's name)."""
  out: dict = {}
  files: dict = {}   # file name -> bytes
  for k in img.kernels:
    if k["name"] in out or k.get("code_object") is None or not (k["impl"] or {}).get("amd_code"): continue
    b = k["code_object"]
    for name in ([pathlib.PurePath(k["impl"]["amd_code"]).name, f"{k['name']}.co"] + [f"{k['name']}_{i}.co" for i in range(2, 99)]):
      if files.setdefault(name, b) == b: break
    out[k["name"]] = (name, b)
  return out

def code_objects(img: Image) -> dict:
  """file name -> ELF bytes of each real code object in `img`: the files the program `lift_image` makes names in its
  `amd "..."` implementations, relative to the program (write them next to it)."""
  return dict(_code_files(img).values())

def write_code_objects(img: Image, directory) -> list:
  """Write code_objects(img) into `directory` (a file already there with the same bytes is left alone); the paths
  written. Raises ValueError, writing nothing, when a file there holds other bytes, or on an OSError."""
  d = pathlib.Path(directory)
  files = {d / name: b for name, b in code_objects(img).items()}
  for path, b in files.items():
    try: held = path.read_bytes() if path.exists() else None
    except OSError as e: raise ValueError(f"{path}: {e.strerror or e}") from None
    if held is not None and held != b:
      raise ValueError(f"{path} exists and is not the image's code object of that name; lift into another directory")
  out = []
  for path, b in files.items():
    if path.exists(): continue
    try: path.write_bytes(b)
    except OSError as e: raise ValueError(f"{path}: {e.strerror or e}") from None
    out.append(path)
  return out

def _impl(d: Optional[dict], amd_file: Optional[str]) -> Optional[Impl]:
  if not d: return None
  return Impl(d.get("builtin"), d.get("dtype"), tuple(d.get("args") or ()), d.get("c_source"), amd_file or d.get("amd_code"), d.get("code"))

def _init_data(b: bytes) -> Data:
  """Initial bytes as written: u32 words when they are whole words, else u8."""
  if len(b) % 4: return Data("u8", tuple(b))
  return Data("u32", struct.unpack(f"<{len(b) // 4}I", b))

def trimmed_data(b: bytes, size: int) -> Optional[Data]:
  """Contents whose trailing zeros are implied (memory a capture read): without them, as u32 words unless the words would
  run past `size` bytes; None when all zero."""
  b = b.rstrip(b"\0")
  if not b: return None
  if len(b) + -len(b) % 4 > size: return Data("u8", tuple(b))
  return _init_data(b + bytes(-len(b) % 4))

def lift_image(img: Image, code_dir: Optional[str] = None) -> Program:
  """The program `img` was compiled from, up to layout: same names, declaration order (so compiling it again gives the
  same memory plan and dwords), vars, host steps, expects; queue statements recovered from the packets. A kernel with
  a real code object names its file (code_objects' names; in `code_dir`, relative to the program, when given)."""
  def region_of(a):
    return next((r for r in img.regions if r.addr <= a < r.addr + max(r.size, 1)), None)
  data = dict(img.data)
  decls: list = [Device(d["name"], vendor_of(d["arch"]), d["index"], d["arch"]) for d in img.devices]
  devs = {d["name"] for d in img.devices}
  def dev_ref(r):
    return Ref(r.device) if r is not None and r.device is not None else None
  rewrites: dict = {}
  for k, a, b in sorted(img.rewrites): rewrites.setdefault(a, []).append(b)
  for n, (a, size) in img.buffers.items():
    if (addrs := img.var_values.get(f"{n}.addr")) is not None:  # rebound: launch k's memory is a region of its own
      inits = tuple(_init_data(data.get(x, b"")) for x in addrs)
      decls.append(Buffer(n, dev_ref(region_of(a)), size, None, "rebound", inits))
    elif a in rewrites:
      decls.append(Buffer(n, dev_ref(region_of(a)), size, None, "rewritten", tuple(_init_data(b) for b in rewrites[a])))
    else: decls.append(Buffer(n, dev_ref(region_of(a)), size, _init_data(data[a]) if a in data else None))
  for n, a in img.signals.items():
    if n in {timeline_of(d) for d in devs}: continue
    init = struct.unpack("<Q", data[a])[0] & U32_MAX if len(data.get(a, b"")) == 8 else 0
    decls.append(Signal(n, dev_ref(region_of(a)), init))
  def implicit(v):
    return v in {epoch_of(d) for d in devs} or (v.endswith(".addr") and v[:-len(".addr")] in img.buffers)
  decls += [Var(v, tuple(img.var_values[v]) if v in img.var_values else None) for v in img.vars if not implicit(v)]
  def where(name):
    return name if code_dir in (None, "", ".") else str(pathlib.PurePosixPath(pathlib.Path(code_dir).as_posix()) / name)
  seen, code = set(), {k: where(name) for k, (name, _) in _code_files(img).items()}
  for k in img.kernels:
    if k["name"] in seen: continue
    seen.add(k["name"])
    decls.append(Kernel(k["name"], tuple(Param(p[0], p[1]) for p in k["params"]), _impl(k["impl"], code.get(k["name"]))))
  # queues and the host block in source order (by their statements' lines), as the checker's reports depend on it
  blocks: list = []
  key = 0
  for q in img.queues:
    key = next((s.line for s in q.stmts if s.line), key)
    blocks.append((key, len(blocks), queue_decl(q.name, q.engine, q.device, LIFTERS[vendor_of(q.arch)].items(img, q))))
  if img.host:
    body: list = []
    for h in img.host:
      if h["op"] == "submit": body.append(Submit(tuple(Ref(n) for n in h["queues"])))
      elif h["op"] == "write":
        base, size = img.buffers[h["buffer"]]
        lo = h["addr"] - base
        dts = [h["dtype"] if len(b) % DTYPES[h["dtype"]][1] == 0 else "u8" for b in h["data"]]
        ds = tuple(Data(dt, tuple(np.frombuffer(b, np.dtype(DTYPES[dt][0]).newbyteorder("<")).tolist())) for dt, b in zip(dts, h["data"]))
        body.append(HostWrite(Slice(Ref(h["buffer"]), lo, lo + h["size"], True), ds))
      else:
        e = Expr(Ref(h["var"]) if h["var"] else None, h["add"])
        body.append((Wait if h["op"] == "wait" else SignalWrite)(Ref(h["signal"]), e))
    blocks.append((min(h["line"] for h in img.host), -1, Host(tuple(body))))
  decls += [b for _, _, b in sorted(blocks, key=lambda b: b[:2])]
  for e in img.expects:
    a, size = img.buffers[e["buffer"]]
    lo = e["addr"] - a
    target = Slice(Ref(e["buffer"])) if lo == 0 and e["size"] == size else Slice(Ref(e["buffer"]), lo, lo + e["size"], True)
    vals = tuple(float(v) if isinstance(v, str) else v for v in e["values"])
    decls.append(Expect(target, Data(e["dtype"], vals), e["approx"], e.get("rtol"), e.get("atol")))
  return lifted_program(decls, img.file, [f"# lifted from {img.file} ({img.target}) by hcqdsl lift"])
