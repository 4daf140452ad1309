"""`hcqdsl.capture()` / `hcqdsl capture SCRIPT.py[:FN]`: record what tinygrad submits through AMDComputeQueue and
AMDCopyQueue — per hardware ring the dwords each submission executes (after tinygrad patched its variables; for a
bound queue the indirect buffer's contents, not the INDIRECT_BUFFER packet), the host's signal writes and waits in
order with the submissions, signal values when first seen, kernarg blocks and argument buffers — and write it as a
manifest that `hcqdsl lift` turns into a checkable program (docs/lift.md). Recording only reads: every wrapped method
calls tinygrad's own afterwards with the same arguments, so what tinygrad submits does not change."""
from __future__ import annotations
import json, pathlib, sys, types
from typing import Optional
from .manifest import MANIFEST_KIND, MANIFEST_VERSION

__all__ = ["capture", "Capture"]

def _words(q) -> list:
  """The dwords a queue object holds (a list, or a bound queue's MMIOInterface view of its indirect buffer)."""
  return [int(x) & 0xFFFFFFFF for x in q._q[0:len(q._q)]]

class Capture:
  """Installs the recording wrappers while active (`with Capture() as cap:`); `cap.manifest()` is the manifest dict,
  `cap.save(path)` writes it. Nesting is refused: one recorder at a time."""
  _active: Optional["Capture"] = None

  def __init__(self, path=None):
    self.path = path
    self.devices: dict = {}   # id(dev) -> {"name", "index", "arch"}
    self.rings: dict = {}     # (id(dev), engine, idx) -> {"name", "device", "target", "engine", "dwords"}
    self.host: list = []
    self.signals: dict = {}   # addr -> {"addr", "value", "name"?, "device"?}
    self.buffers: dict = {}   # addr -> size
    self.memory: dict = {}    # addr -> bytes
    self.kernels: dict = {}   # prog addr -> name
    self._execs: dict = {}    # id(queue) -> [(prg, args_state)]
    self._saved: list = []

  # ---- what tinygrad objects tell us
  def _device(self, dev) -> str:
    if id(dev) not in self.devices:
      name = str(getattr(dev, "device", "")) or f"AMD:{len(self.devices)}"
      kind, _, idx = name.partition(":")
      index = int(idx) if idx.isdigit() else len(self.devices)
      if any(d["index"] == index for d in self.devices.values()): index = 1 + max(d["index"] for d in self.devices.values())
      self.devices[id(dev)] = {"name": f"gpu{index}", "index": index, "arch": str(dev.arch), "_dev": dev}
    return self.devices[id(dev)]["name"]

  def _signal(self, sig):
    try: addr = int(sig.value_addr)
    except (TypeError, ValueError, AttributeError): return None  # a symbolic (virtual) signal: patched at submit
    if addr not in self.signals:
      ent: dict = {"addr": addr}
      try: ent["value"] = int(sig.value) & 0xFFFFFFFF
      except Exception: ent["value"] = 0
      owner = getattr(sig, "owner", None)
      if owner is not None:
        ent["device"] = self._device(owner)
      self.signals[addr] = ent
    return addr

  def _buffer(self, b):
    try: addr, size = int(b.va_addr), int(b.size)
    except (TypeError, ValueError, AttributeError): return
    if size > 0: self.buffers[addr] = max(size, self.buffers.get(addr, 0))

  # ---- hooks
  def _on_queue_signal(self, q, sig, *rest): self._signal(sig)

  def _on_exec(self, q, prg, args_state, *rest):
    self._execs.setdefault(id(q), []).append((prg, args_state))

  def _on_copy(self, q, dest, src, size):
    self._buffer(dest); self._buffer(src)

  def _on_submit(self, q, dev, engine: str):
    dname = self._device(dev)
    key = (id(dev), engine, getattr(q, "queue_idx", 0) if engine == "copy" else 0)
    if key not in self.rings:
      idx = f"{key[2]}" if engine == "copy" else ""
      self.rings[key] = {"name": f"{'comp' if engine == 'compute' else 'copy' + idx}_{dname}", "device": dname,
                         "target": str(dev.arch), "engine": engine, "dwords": []}
    ring = self.rings[key]
    dw = _words(q)
    self.host.append({"op": "submit", "queue": ring["name"], "start": len(ring["dwords"]), "length": len(dw)})
    ring["dwords"] += dw
    for prg, st in self._execs.get(id(q), ()):
      try: self.kernels.setdefault(int(prg.prog_addr), str(prg.name))
      except (AttributeError, TypeError, ValueError): pass
      for b in getattr(st, "bufs", ()): self._buffer(b)
      try:
        ka = int(st.buf.va_addr)
        if ka not in self.memory:
          n = 8 * len(getattr(st, "bufs", ())) + 4 * len(getattr(st, "vals", ()))
          self.memory[ka] = bytes(st.buf.cpu_view().view(0, max(n, 8), "B")[:])
      except Exception: pass  # no CPU view of the kernargs: the lifted exec then has no arguments

  def _on_host_write(self, sig, value):
    try: addr = int(sig.value_addr)
    except (TypeError, ValueError, AttributeError): return
    if addr not in self.signals:  # the first write is the signal's initial value, not a host step
      self.signals[addr] = {"addr": addr, "value": int(value) & 0xFFFFFFFF}
      owner = getattr(sig, "owner", None)
      if owner is not None: self.signals[addr]["device"] = self._device(owner)
      return
    self.host.append({"op": "signal", "addr": addr, "value": int(value) & 0xFFFFFFFF})

  def _on_host_wait(self, sig, value, *rest):
    if (addr := self._signal(sig)) is not None: self.host.append({"op": "wait", "addr": addr, "value": int(value) & 0xFFFFFFFF})

  # ---- installing
  def _wrap(self, cls, name: str, hook):
    orig = cls.__dict__[name]
    def wrapped(obj, *args, **kw):
      hook(obj, *args, **kw)
      return orig(obj, *args, **kw)
    wrapped.__wrapped__ = orig
    setattr(cls, name, wrapped)
    self._saved.append((cls, name, orig))

  def __enter__(self) -> "Capture":
    if Capture._active is not None: raise RuntimeError("hcqdsl.capture() is already recording")
    from tinygrad.runtime.ops_amd import AMDComputeQueue, AMDCopyQueue
    from tinygrad.runtime.support.hcq import HCQSignal
    Capture._active = self
    try:
      for cls, engine in ((AMDComputeQueue, "compute"), (AMDCopyQueue, "copy")):
        for m in ("wait", "signal", "timestamp"): self._wrap(cls, m, self._on_queue_signal)
        self._wrap(cls, "_submit", lambda q, dev, engine=engine: self._on_submit(q, dev, engine))
      self._wrap(AMDComputeQueue, "exec", self._on_exec)
      self._wrap(AMDCopyQueue, "copy", self._on_copy)
      self._wrap(HCQSignal, "wait", self._on_host_wait)
      prop = HCQSignal.__dict__["value"]
      def fset(sig, v, _set=prop.fset):
        self._on_host_write(sig, v)
        _set(sig, v)
      HCQSignal.value = property(prop.fget, fset, prop.fdel, prop.__doc__)
      self._saved.append((HCQSignal, "value", prop))
    except Exception:
      self._restore(); raise
    return self

  def _restore(self):
    for cls, name, orig in reversed(self._saved): setattr(cls, name, orig)
    self._saved.clear()
    Capture._active = None

  def __exit__(self, *exc):
    self._restore()
    if self.path is not None: self.save(self.path)
    return False

  # ---- output
  def manifest(self) -> dict:
    hx = lambda b: b.hex()
    for d in self.devices.values():  # the device's timeline signal (now; it may not have existed when first written)
      try: tl = int(d["_dev"].timeline_signal.value_addr)
      except (AttributeError, TypeError, ValueError): continue
      if tl in self.signals: self.signals[tl].update(timeline=True, device=d["name"])
    return {
      "format": MANIFEST_KIND, "version": MANIFEST_VERSION,
      "devices": [{k: v for k, v in d.items() if not k.startswith("_")} for d in self.devices.values()],
      "queues": [{**{k: v for k, v in r.items() if k != "dwords"}, "dwords": " ".join(f"{x:08x}" for x in r["dwords"])}
                 for r in self.rings.values()],
      "signals": [{**s, "addr": hex(s["addr"])} for s in self.signals.values()],
      "buffers": [{"addr": hex(a), "size": n} for a, n in sorted(self.buffers.items())],
      "memory": [{"addr": hex(a), "hex": hx(b)} for a, b in sorted(self.memory.items())],
      "kernels": [{"prog_addr": hex(a), "name": _ident(n)} for a, n in self.kernels.items()],
      "host": [{**h, "addr": hex(h["addr"])} if "addr" in h else h for h in self.host],
    }

  def save(self, path) -> None: pathlib.Path(path).write_text(json.dumps(self.manifest(), indent=1) + "\n")

def _ident(name: str) -> str:
  out = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "kernel"
  return out if not out[0].isdigit() else "k_" + out

def capture(path=None) -> Capture:
  """`with hcqdsl.capture("run.json") as cap: ...` records every AMD queue submission tinygrad makes inside the block
  and writes the manifest to `path` (if given) when the block ends; `cap.manifest()` is the same dict."""
  return Capture(path)

class _CallableModule(types.ModuleType):
  """`hcqdsl.capture(path)` is the API, and `hcqdsl.capture` is also this module (as `hcqdsl.emit`)."""
  def __call__(self, path=None) -> Capture: return capture(path)

sys.modules[__name__].__class__ = _CallableModule
