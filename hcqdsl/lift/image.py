"""Images back to .hcq: `lift_image` recovers the whole program an image was compiled from (names, vars, host steps,
kernels and expects from its metadata, queue statements from its packets), `as_hcq` the same as text; `lift_queue`
only a queue's statements; `code_objects` the AMD code objects the lifted program names (`amd "E_2.co"`), to be written next to it.
A queue is lifted by its vendor's lifter (`LIFTERS`: hcqdsl/amd/lift.py, hcqdsl/nv/lift.py); `lift_statements` attaches
what is no statement as comments, for the lifts of raw dumps and captures (lift/raw.py, lift/captured.py) too."""
from __future__ import annotations
import pathlib, struct
from typing import Callable, Optional
import attrs
import numpy as np
from ..ir import (Program, Device, Buffer, Signal, Var, Kernel, Param, Impl, Queue, Host, Expect, Wait, SignalWrite,
                  HostWrite, Submit, Ref, Expr, Slice, Data, U32_MAX, DTYPES,
                  timeline_of, epoch_of, vendor_of)
from ..target.image import Image, QueueImage
from ..files import write_atomic
from ..amd import lift as amd_lift
from ..nv import lift as nv_lift

__all__ = ["lift_image", "lift_queue", "as_hcq", "code_objects", "write_code_objects", "lift_statements", "queue_decl",
           "lifted_program", "trimmed_data", "attach_comments", "LIFTERS", "QueueLifter"]

@attrs.frozen
class QueueLifter:
  """A vendor's lift of an image's queue: `statements` (statements and comment strings: lift_queue, as_hcq) and
  `items` (the statements with the comments attached, trailing comments strings: lift_image's queue bodies)."""
  statements: Callable[[Image, QueueImage], list]
  items: Callable[[Image, QueueImage], list]

# vendor -> its lifter: AMD's packets in hcqdsl/amd/lift.py, NV's methods and QMDs in hcqdsl/nv/lift.py
LIFTERS = {"AMD": QueueLifter(amd_lift.lift_queue, lambda img, q: lift_statements(img, q, [(g, None) for g in amd_lift.statement_groups(q)])),
           "NV": QueueLifter(nv_lift.lift_queue, lambda img, q: attach_comments(nv_lift.lift_queue(img, q)))}

def lift_queue(img: Image, q: QueueImage) -> list:
  """The queue's statements, recovered from its commands by its vendor's lifter (LIFTERS). A group that is no
  statement lifts to a comment string."""
  return LIFTERS[vendor_of(q.arch)].statements(img, q)

def as_hcq(img: Image) -> str:
  """The image as a program (`hcqdsl disasm --as-hcq`): `lift_image`'s — the devices, buffers, signals, vars and
  kernels the queues name, each queue lifted by its vendor's lifter, the host block, the expects — as text, so that it
  parses and checks as it is. The code objects it names are not written (`hcqdsl lift` writes them)."""
  from ..lang.format import format_program
  return format_program(lift_image(img, by="hcqdsl disasm --as-hcq"))

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
    try: stmts = amd_lift.lift_group(img, q, g, q.engine)
    except amd_lift.LIFT_ERRORS as e:
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

def queue_decl(name: str, engine: str, device: str, items: list, head: tuple = (), launches: Optional[tuple] = None) -> Queue:
  """A queue of lifted statements (strings among them are comments) with `head` comments first (`launches`: its clause)."""
  stmts = [s for s in items if not isinstance(s, str)]
  tail = tuple(s for s in items if isinstance(s, str))
  if head and stmts: stmts[0] = attrs.evolve(stmts[0], comments=head + stmts[0].comments)
  elif head: tail = head + tail
  return Queue(name, engine, Ref(device), tuple(stmts), launches, end_comments=tail)

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
    try: write_atomic(path, b)
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

def lift_image(img: Image, code_dir: Optional[str] = None, by: str = "hcqdsl lift") -> Program:
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
    blocks.append((key, len(blocks), queue_decl(q.name, q.engine, q.device, LIFTERS[vendor_of(q.arch)].items(img, q), launches=q.launches)))
  # the host blocks: each run of steps with one `launches` clause (the steps of two adjacent blocks with the same clause
  # lift as one block: it compiles to the same steps)
  runs: list = []
  for h in img.host:
    if not runs or runs[-1][0] != h.get("launches"): runs.append((h.get("launches"), []))
    runs[-1][1].append(h)
  for n, (launches, steps) in enumerate(runs):
    body: list = []
    for h in steps:
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
    blocks.append((min(h["line"] for h in steps), n - len(runs), Host(tuple(body), launches)))
  decls += [b for _, _, b in sorted(blocks, key=lambda b: b[:2])]
  for e in img.expects:
    a, size = img.buffers[e["buffer"]]
    lo = e["addr"] - a
    target = Slice(Ref(e["buffer"])) if lo == 0 and e["size"] == size else Slice(Ref(e["buffer"]), lo, lo + e["size"], True)
    vals = tuple(float(v) if isinstance(v, str) else v for v in e["values"])
    decls.append(Expect(target, Data(e["dtype"], vals), e["approx"], e.get("rtol"), e.get("atol")))
  return lifted_program(decls, img.file, [f"# lifted from {img.file} ({img.target}) by {by}"])
