"""NV queues back to .hcq statements: the pushbuffer's method groups and the QMDs they launch. What methods cannot say
is in the QMDs: an exec launched by the QMD before it (DEPENDENT_QMD0) and a `signal` carried by a QMD's release
semaphore have no methods of their own (the image's source map gives them empty groups), so a QMD stands for its
exec, then its releases, then the QMD it launches. `timestamp s` and `signal s = 0` are the same bytes on NV (tinygrad's
NVCommandQueue.timestamp is a signal of 0): the source map's text tells them apart, else it lifts as the signal.
Whole images (hcqdsl/lift/image.py) and captures of tinygrad's NV runtime (hcqdsl/lift/nv_capture.py) lift NV queues here."""
from __future__ import annotations
from ..ir import Wait, SignalWrite, Exec, Copy, Write, Poll, Barrier, Timestamp, Epoch, Ref, Expr, Slice, U32_MAX, epoch_wait
from ..target.image import Image, QueueImage
from ..target.lifting import Unliftable, signal_at, buffer_slice
from . import pushbuf
from .qmd import QMD
from .targets import get_target
from .meaning import meaning, launch, SETUP_METHODS, STATEMENT_TAILS

__all__ = ["lift_queue"]

class _Lifter:
  def __init__(self, img: Image, q: QueueImage):
    self.img, self.q, self.t = img, q, get_target(q.arch)
    self.data = dict(img.data)
    self.patches = {p.offset: p for p in q.patches}
    self.mem = {p.offset: p for p in q.mem_patches}
    self.chain: list = []   # what the last QMD still stands for: its releases, then the QMD it launches

  def expr(self, patch, v: int) -> Expr: return Expr(Ref(patch.var), patch.add) if patch is not None and patch.var else Expr(None, v)
  def signal(self, a: int) -> str:
    if (name := signal_at(self.img, a)) is None: raise Unliftable(f"semaphore at {a:#x}, which is no signal")
    return name
  def slice(self, a: int, size: int, patched: bool) -> Slice:
    if (sl := buffer_slice(self.img, a, size, patched)) is None: raise Unliftable(f"{size} bytes at {a:#x}, which are in no buffer")
    return sl

  # ---- the QMD chain

  def qmd(self, qa: int) -> QMD:
    r = next((r for r in self.img.regions if r.kind == "kernargs" and r.addr <= qa < r.addr + r.size), None)
    if r is None or qa + self.t.qmd_size > r.addr + len(self.data.get(r.addr, b"")):
      raise Unliftable(f"QMD at {qa:#x} is in no kernel-argument region")
    mem = self.data[r.addr]
    return QMD.of(self.t, bytearray(mem[qa - r.addr:qa - r.addr + self.t.qmd_size]))

  def launch(self, qa: int) -> Exec:
    """The exec a QMD stands for; its releases and dependent QMD become the chain."""
    got = launch(self.qmd(qa))
    prog, ka = got.program, got.kernargs
    k = next((k for k in self.img.kernels if k["prog_addr"] == prog), None)
    kr = next((r for r in self.img.regions if r.kind == "kernargs" and r.addr == ka), None)
    if k is None or kr is None: raise Unliftable(f"QMD at {qa:#x} launches unknown program {prog:#x}")
    args: list = []   # slices and scalar exprs, in parameter order
    for i, a in enumerate(kr.meta.get("args") or ()):
      if a is not None:
        args.append(Slice(Ref(a[0]), a[1], a[2], a[3], a[4]))
        continue
      off = k["params"][i][2]
      raw = int.from_bytes(self.data.get(ka, b"")[off:off + 4].ljust(4, b"\0"), "little")
      args.append(self.expr(self.mem.get(ka + off), raw))
    grid, block = tuple(self.dim(qa + got.grid_at + 4 * j, v) for j, v in enumerate(got.grid)), got.block
    self.chain = [("release", r.addr, qa + r.value_at, r.value & U32_MAX) for r in got.releases]
    if got.dependent is not None: self.chain.append(("launch", got.dependent))
    return Exec(Ref(k["name"]), tuple(args), None if grid == (1, 1, 1) else grid, None if block == (1, 1, 1) else block)

  def dim(self, at: int, v: int):
    e = self.expr(self.mem.get(at), v)
    return e if e.var is not None else e.offset

  def next_in_chain(self, text: str):
    """An empty group: what the last QMD stands for next."""
    if not self.chain: raise Unliftable("no methods, and no QMD carries a statement here")
    item = self.chain.pop(0)
    if item[0] == "launch": return self.launch(item[1])
    _, a, at, v = item
    name = self.signal(a)
    return Timestamp(Ref(name)) if text.startswith("timestamp") else SignalWrite(Ref(name), self.expr(self.mem.get(at), v))

  # ---- method groups

  def group(self, pk: list, text: str = "") -> list:
    if any(p.raw for p in pk): raise Unliftable(pk[0].note or "raw methods")
    if not pk:
      if self.q.engine == "copy": return [Barrier()]   # NVCopyQueue has no memory_barrier: no methods
      return [self.next_in_chain(text)]
    ms = [meaning(p) for p in pk]
    self.chain = []
    m = ms[0]
    if m is not None and m.kind in ("wait", "signal", "write", "poll"):
      patch = self.patches.get(m.value_at)
      if m.kind == "wait":
        w = Wait(Ref(self.signal(m.addr)), self.expr(patch, m.value))
        return [Epoch() if w == epoch_wait(self.q.device) else w]
      if m.kind == "signal":
        name = self.signal(m.addr)
        return [Timestamp(Ref(name)) if text.startswith("timestamp") and m.value == 0 else SignalWrite(Ref(name), self.expr(patch, m.value))]
      sl = self.slice(m.addr, m.size, m.addr_at in self.patches)
      return [Write(sl, self.expr(patch, m.value)) if m.kind == "write" else Poll(sl, m.mask, Expr(None, m.value))]
    if m is not None and m.kind == "barrier": return [Barrier()]
    if m is not None and m.kind == "dispatch": return [self.launch(m.addr)]
    if m is not None and m.kind == "copy":
      size = sum(x.value for x in ms if x is not None and x.kind == "length")
      return [Copy(self.slice(m.addr, size, m.addr_at in self.patches), self.slice(m.src, size, m.src_at in self.patches))]
    raise Unliftable("methods " + ", ".join(p.name for p in pk) + " are no .hcq statement")

def _groups(q: QueueImage, pk: list) -> list:
  """(methods, statement text) per statement: the image's source map, else a statement's methods by their kind (a
  semaphore release with its interrupt, SEND_PCAS_A with its action, a copy piece or a copy-queue release whole)."""
  if q.stmts: return [([p for p in pk if s.covers(p.offset)], s.text) for s in q.stmts]
  out: list = []
  for p in pk:
    if out and p.name in STATEMENT_TAILS and not any(x.raw for x in out[-1][0]): out[-1][0].append(p)
    else: out.append(([p], ""))
  return out

def lift_queue(img: Image, q: QueueImage) -> list:
  """An NV queue's statements, recovered from its methods and QMDs. A group that is no statement lifts to a comment
  string; without a source map, the statements the QMDs carry follow their exec."""
  L, out = _Lifter(img, q), []
  pk = pushbuf.decoder(q.arch).decode(q.dwords)
  for g, text in _groups(q, pk):
    if g and all(x.raw and x.dwords == (0,) for x in g): continue   # zero dwords: padding (a bound queue's whole page is submitted)
    if g and not g[0].raw and (g[0].name.startswith(SETUP_METHODS) or g[0].name == "METHOD_0x0"):   # (method 0: SET_OBJECT in every class)
      out.append(f"# @{g[0].offset}: {g[0].name}: channel setup (NVCommandQueue.setup), no statement")
      continue
    try: out += L.group(g, text)
    except (Unliftable, KeyError, IndexError, TypeError, ValueError) as e:
      out.append(f"# dwords {g[0].offset if g else '?'}: cannot lift ({e})")
      L.chain = []
      continue
    if not q.stmts:
      while L.chain:
        try: out.append(L.next_in_chain(""))
        except (Unliftable, KeyError, IndexError, TypeError, ValueError) as e:
          out.append(f"# cannot lift ({e})")
          L.chain = []
  return out
