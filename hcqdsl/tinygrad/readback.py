"""What a tinygrad program reads back, recorded so two runs of it can be compared (`sanitize --confirm`): every
tensor's data it asks for — `.numpy()`, `.item()`, `.tolist()`, `.data()` all go through `Tensor._buffer`, then the
buffer's `as_memoryview`, whose result is recorded (nothing is read, so nothing is submitted, that the program does not
read itself) — with the user's line, and when it ends, the contents of every live realized tensor's buffers (each device's shard of a
multi-device tensor on its own: a replica only one device holds wrong is seen), named by the user's line that created
the tensor. `compare` says where two recordings differ, in the program's terms."""
from __future__ import annotations
import base64, pathlib, sys
from types import FrameType
from typing import Optional
import attrs

__all__ = ["ReadBack", "Difference", "compare", "user_site", "TensorSites", "install_sites", "restore_sites"]

_SKIP: tuple = ()

def _skip_dirs() -> tuple:
  global _SKIP
  if not _SKIP:
    import tinygrad
    _SKIP = (str(pathlib.Path(tinygrad.__file__).resolve().parent), str(pathlib.Path(__file__).resolve().parents[1]), "<")
  return _SKIP

_USER: dict = {}   # file name -> is it the user's (user_site's rule; decided once per file)

def user_site(depth: int = 2) -> tuple:
  """(file, line, source) of the innermost frame outside tinygrad, hcqdsl and Python's library: the user's line."""
  import linecache
  f: Optional[FrameType] = sys._getframe(depth)
  while f is not None:
    fn = f.f_code.co_filename
    user = _USER.get(fn)
    if user is None:
      user = _USER[fn] = not fn.startswith(_skip_dirs()) and "site-packages" not in fn and "/lib/python3" not in fn and "/mockgpu/" not in fn
    if user: return fn, f.f_lineno, linecache.getline(fn, f.f_lineno).strip()
    f = f.f_back
  return "?", 0, ""

class TensorSites(dict):
  """tinygrad's `all_tensors` (weakref -> None) that also remembers where each tensor was created."""
  def __init__(self, orig: dict):
    super().__init__(orig)
    self.site: dict = {}
    self.seq = 0
  def __setitem__(self, ref, v) -> None:
    super().__setitem__(ref, v)
    self.seq += 1
    self.site[ref] = (*user_site(2), self.seq)
  def pop(self, ref, *default):
    self.site.pop(ref, None)
    return super().pop(ref, *default)

def install_sites(saved: list) -> TensorSites:
  """Swap tinygrad's `all_tensors` for a TensorSites in every tinygrad module holding it (tinygrad/engine/jit.py keeps
  its own reference: the buffers its JIT holds); `saved` gets what restore_sites puts back."""
  import tinygrad.tensor as tt
  sites = TensorSites(orig := tt.all_tensors)
  for mod in [m for m in list(sys.modules.values()) if getattr(m, "__name__", "").startswith("tinygrad")]:
    if getattr(mod, "all_tensors", None) is orig:
      saved.append((mod, "all_tensors", orig))
      setattr(mod, "all_tensors", sites)
  return sites

def restore_sites(saved: list, sites: Optional[TensorSites]) -> None:
  """Put back what install_sites (and other wrappers saved in `saved`) replaced; tinygrad's dict gets the live tensors."""
  if sites is not None and any(name == "all_tensors" for _, name, _ in saved):
    orig = next(o for _, name, o in saved if name == "all_tensors")
    orig.clear()
    orig.update(dict(sites))
  for obj, name, orig in reversed(saved): setattr(obj, name, orig)
  saved.clear()

def _entry(site: tuple, shape, dtype, device, data: bytes, **more) -> dict:
  return {"file": site[0], "line": site[1], "source": site[2], "shape": [int(x) if isinstance(x, int) else str(x) for x in shape],
          "dtype": str(getattr(dtype, "name", dtype)), "fmt": getattr(dtype, "fmt", None) or "B", "device": str(device),
          "data": base64.b64encode(data).decode(), **more}

class ReadBack:
  """Records what the program reads back while installed (`install()` ... `finish()`); `to_json()`."""
  def __init__(self):
    self.reads: list = []
    self.final: list = []
    self._saved: list = []
    self._sites: Optional[TensorSites] = None

  def install(self) -> "ReadBack":
    import tinygrad.tensor as tt
    from tinygrad.device import Buffer
    orig, orig_mv = tt.Tensor.__dict__["_buffer"], Buffer.__dict__["as_memoryview"]
    pending: dict = {}   # id(Buffer) -> (site, shape, dtype, device): the tensor whose data the program is about to read
    rb = self
    def _buffer(t):
      b = orig(t)
      pending[id(b)] = (user_site(2), t.shape, t.dtype, t.device)
      return b
    def as_memoryview(b, *a, **kw):   # the program's own read (a read of ours would submit a copy of its own)
      mv = orig_mv(b, *a, **kw)
      if (p := pending.pop(id(b), None)) is not None: rb.reads.append(_entry(p[0], p[1], p[2], p[3], bytes(mv)))
      return mv
    setattr(tt.Tensor, "_buffer", _buffer)
    setattr(Buffer, "as_memoryview", as_memoryview)
    self._saved += [(tt.Tensor, "_buffer", orig), (Buffer, "as_memoryview", orig_mv)]
    self._sites = install_sites(self._saved)
    return self

  def restore(self) -> None:
    restore_sites(self._saved, self._sites)

  def finish(self) -> None:
    """Record every live realized tensor's buffers (once per buffer, named by the earliest tensor created over it)."""
    sites = self._sites
    if sites is None: return
    seen: set = set()
    live = sorted(((s, ref()) for ref, s in list(sites.site.items()) if ref() is not None), key=lambda x: x[0][3])
    for site, t in live:
      try:
        if not t.uop.is_realized: continue
        base = t.uop.base.realized
      except Exception: continue
      bufs = list(getattr(base, "bufs", None) or [base])
      for shard, b in enumerate(bufs):
        if id(b) in seen or not getattr(b, "is_allocated", lambda: True)(): continue
        seen.add(id(b))
        try: data = bytes(b.as_memoryview())
        except Exception: continue
        self.final.append(_entry(site, (b.size,), b.dtype, b.device, data, shard=shard, shards=len(bufs), tensor_shape=list(map(str, t.shape))))

  def to_json(self) -> dict: return {"reads": self.reads, "final": self.final}

@attrs.define
class Difference:
  """Where two recordings of one program differ: which output (in words), how many values, the first index, and the
  value in each run."""
  what: str
  values: int
  total: int
  index: list
  got: str        # the value in the run under test (the witness's order)
  want: str       # the value in the reference run
  def to_json(self) -> dict: return attrs.asdict(self)

def _decode(e: dict):
  import numpy as np
  b = base64.b64decode(e["data"])
  fmt = e.get("fmt") or "B"
  try: dt = np.dtype(fmt)
  except TypeError: dt = np.dtype("B")
  if len(b) % dt.itemsize: dt = np.dtype("B")
  return np.frombuffer(b, dt)

def _differ(a: dict, b: dict, what: str) -> Optional[Difference]:
  import numpy as np
  x, y = _decode(a), _decode(b)
  if x.shape != y.shape:
    return Difference(what, max(x.size, y.size), max(x.size, y.size), [], f"{x.size} values", f"{y.size} values")
  # bit for bit (the same kernels on the same inputs give the same bits; NaN payloads count)
  bad = np.flatnonzero((x.view(np.uint8).reshape(x.size, -1) != y.view(np.uint8).reshape(y.size, -1)).any(axis=1)) if x.size else np.zeros(0, int)
  if not len(bad): return None
  i = int(bad[0])
  shape = [int(s) for s in a.get("shape", []) if str(s).isdigit()]
  index = [int(v) for v in np.unravel_index(i, shape)] if shape and int(np.prod(shape)) == x.size else [i]
  return Difference(what, len(bad), int(x.size), index, repr(x[i].item()), repr(y[i].item()))

def _where(e: dict) -> str:
  return f"{e['file']}:{e['line']}" + (f" (`{e['source']}`)" if e.get("source") else "")

def compare(got: dict, want: dict) -> list:
  """Where recording `got` differs from `want`: reads matched in order, then the live tensors' buffers matched by the
  line that created them (and their order among that line's)."""
  out: list = []
  for i, (a, b) in enumerate(zip(got["reads"], want["reads"])):
    if (d := _differ(a, b, f"read {i + 1}, {a['dtype']}{a['shape']} on {a['device']} at {_where(a)}")) is not None: out.append(d)
  if len(got["reads"]) != len(want["reads"]):
    n, m = len(got["reads"]), len(want["reads"])
    out.append(Difference(f"the number of reads ({n} against {m})", abs(n - m), max(n, m), [], str(n), str(m)))
  def keyed(rows: list) -> dict:
    seen: dict = {}
    out: dict = {}
    for r in rows:
      k = (r["file"], r["line"], r.get("shard", 0))
      seen[k] = seen.get(k, 0) + 1
      out[k + (seen[k],)] = r
    return out
  g, w = keyed(got["final"]), keyed(want["final"])
  for k, a in g.items():
    if (b := w.get(k)) is None: continue
    shard = f", shard {a['shard']} of {a['shards']} on {a['device']}" if a.get("shards", 1) > 1 else f" on {a['device']}"
    what = f"the tensor created at {_where(a)} ({a['dtype']}[{', '.join(a.get('tensor_shape', []))}]{shard}) when the program ended"
    if (d := _differ(a, b, what)) is not None: out.append(d)
  return out
