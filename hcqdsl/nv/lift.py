"""NV queues back to .hcq statements: the pushbuffer's method groups and the QMDs they launch. What methods cannot say
is in the QMDs: an exec launched by the QMD before it (DEPENDENT_QMD0) and a `signal` carried by a QMD's release
semaphore have no methods of their own (the image's source map gives them empty groups), so a QMD stands for its
exec, then its releases, then the QMD it launches. `timestamp s` and `signal s = 0` are the same bytes on NV (tinygrad's
NVCommandQueue.timestamp is a signal of 0): the source map's text tells them apart, else it lifts as the signal.
Whole images (hcqdsl/lift/image.py) and captures of tinygrad's NV runtime (hcqdsl/lift/nv_capture.py) lift NV queues here."""
from __future__ import annotations
from ..ir import Wait, SignalWrite, Exec, Copy, Write, Poll, Barrier, Timestamp, Epoch, Ref, Expr, Slice, U32_MAX, POLL_SIZE, epoch_wait
from ..target.image import Image, QueueImage
from ..target.lifting import Unliftable, signal_at, buffer_slice
from . import pushbuf
from .qmd import QMD
from .targets import get_target

__all__ = ["lift_queue", "SETUP_METHODS"]

_ACQ_GEQ, _RELEASE, _ACQ_AND, _ACQ_NOR = "ACQ_CIRC_GEQ", "RELEASE", "ACQ_AND", "ACQ_NOR"
# methods that set up a channel (tinygrad's NVCommandQueue.setup: the class bound to a subchannel, the shader memory
# windows and local memory; PM_TRIGGER, the profiler's): channel state, no statement (a capture's first submissions)
SETUP_METHODS = ("SET_OBJECT", "SET_SHADER_LOCAL_MEMORY", "SET_SHADER_SHARED_MEMORY", "PM_TRIGGER")

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
    qmd = self.qmd(qa)
    prog, ka = qmd.address("program"), qmd.address("cbuf0")
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
    go = qmd.offset(qmd.grid_field())
    grid = tuple(self.dim(qa + go + 4 * j, int.from_bytes(qmd.data[go + 4 * j:go + 4 * j + 4], "little")) for j in range(3))
    bo = qmd.offset("cta_thread_dimension0")
    block = (int.from_bytes(qmd.data[bo:bo + 2], "little"), int.from_bytes(qmd.data[bo + 2:bo + 4], "little"),
             qmd.data[qmd.offset("cta_thread_dimension2")])
    self.chain = []
    for i in range(2):
      en, af, pf = qmd.release_fields(i)
      if qmd.read(en): self.chain.append(("release", qmd.address(f"release{i}"), qa + qmd.offset(pf), qmd.read(pf)))
    if qmd.read("dependent_qmd0_enable"): self.chain.append(("launch", qmd.address("dependent")))
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
    names, f = [p.name for p in pk], [p.fields for p in pk]
    self.chain = []
    if names[0] == "SEM_ADDR_LO..SEM_EXECUTE":
      x, at = f[0], pk[0].offset
      op, big = x.get("sem_execute.operation"), x.get("sem_execute.payload_size") == "64BIT"
      v, patch = x["sem_payload"] & U32_MAX, self.patches.get(at + 3)
      if op == _ACQ_GEQ:
        name, e = self.signal(x["sem_addr"]), self.expr(patch, v)
        return [Epoch() if (w := Wait(Ref(name), e)) == epoch_wait(self.q.device) else w]
      if op == _RELEASE and x.get("sem_execute.release_timestamp") == "EN":
        name = self.signal(x["sem_addr"])
        return [Timestamp(Ref(name)) if text.startswith("timestamp") and v == 0 else SignalWrite(Ref(name), self.expr(patch, v))]
      if op == _RELEASE: return [Write(self.slice(x["sem_addr"], 8 if big else 4, at + 1 in self.patches), self.expr(patch, v))]
      if op in (_ACQ_AND, _ACQ_NOR):
        mask = v if op == _ACQ_AND else ~v & U32_MAX
        return [Poll(self.slice(x["sem_addr"], POLL_SIZE, at + 1 in self.patches), mask, Expr(None, mask if op == _ACQ_AND else 0))]
    if names[0] == "INVALIDATE_SHADER_CACHES_NO_WFI": return [Barrier()]
    if names[0] == "SEND_PCAS_A": return [self.launch(f[0]["qmd_addr"])]
    if names[0] == "SET_SEMAPHORE_A..SET_SEMAPHORE_PAYLOAD":
      v, name = f[0]["set_semaphore_payload"], self.signal(f[0]["semaphore_addr"])
      if text.startswith("timestamp") and v == 0: return [Timestamp(Ref(name))]
      return [SignalWrite(Ref(name), self.expr(self.patches.get(pk[0].offset + 3), v))]
    if names[0] == "OFFSET_IN_UPPER..OFFSET_OUT_LOWER":
      pieces = [p for p in pk if p.name == "OFFSET_IN_UPPER..OFFSET_OUT_LOWER"]
      size = sum(p.fields["line_length_in"] for p in pk if p.name == "LINE_LENGTH_IN")
      at = pieces[0].offset
      src, dst = pieces[0].fields["src_addr"], pieces[0].fields["dst_addr"]
      return [Copy(self.slice(dst, size, at + 3 in self.patches), self.slice(src, size, at + 1 in self.patches))]
    raise Unliftable("methods " + ", ".join(names) + " are no .hcq statement")

def _groups(q: QueueImage, pk: list) -> list:
  """(methods, statement text) per statement: the image's source map, else a statement's methods by their kind (a
  semaphore release with its interrupt, SEND_PCAS_A with its action, a copy piece or a copy-queue release whole)."""
  if q.stmts: return [([p for p in pk if s.covers(p.offset)], s.text) for s in q.stmts]
  out: list = []
  tails = {"NON_STALL_INTERRUPT", "SEND_SIGNALING_PCAS2_B", "LINE_LENGTH_IN", "LAUNCH_DMA"}
  for p in pk:
    if out and p.name in tails and not any(x.raw for x in out[-1][0]): out[-1][0].append(p)
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
