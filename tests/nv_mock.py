"""tinygrad's mock NV GPU executor (test/mockgpu/nv/nvgpu.py of a tinygrad checkout: its GPFIFO class decodes
pushbuffers, runs semaphores, copies and QMD launches on host memory) driven with an NV image: the image's memory is
mapped at its own addresses in this process, each launch's patched pushbuffers go through GPFIFO entries as tinygrad's
`_submit_to_gpfifo` writes them, and the host steps run as the submitter runs them. The mock runs no kernel here (it
would hand the program to gpuocelot as PTX; without it an exec only releases its semaphores), so a program is compared
with its kernels made implementation-less. What it returns: the final signal values and buffer bytes, or a hang."""
from __future__ import annotations
import ctypes, importlib.util, mmap, sys, types
import attrs
from mock_gpu import tinygrad_repo

MAP_FIXED_NOREPLACE = 0x100000
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype, _libc.mmap.argtypes = ctypes.c_void_p, (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)

def load_nvgpu():
  """nvgpu.py as a module, its `test.mockgpu` imports resolved in the checkout for the load only."""
  repo = tinygrad_repo()
  names = ("test", "test.mockgpu", "test.mockgpu.gpu", "test.mockgpu.helpers")
  saved = {n: sys.modules.get(n) for n in names}
  try:
    for n in names[:2]:
      m = types.ModuleType(n)
      m.__path__ = [str(repo / n.replace(".", "/"))]
      sys.modules[n] = m
    for n in names[2:]:
      spec = importlib.util.spec_from_file_location(n, repo / (n.replace(".", "/") + ".py"))
      m = importlib.util.module_from_spec(spec)
      sys.modules[n] = m
      spec.loader.exec_module(m)
    spec = importlib.util.spec_from_file_location("tinygrad_mock_nvgpu", repo / "test" / "mockgpu" / "nv" / "nvgpu.py")
    nvgpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nvgpu)
    return nvgpu
  finally:
    for n, m in saved.items():
      if m is None: sys.modules.pop(n, None)
      else: sys.modules[n] = m

class Mapped:
  """Anonymous memory at fixed addresses (refusing to replace a mapping), unmapped on close."""
  def __init__(self): self.spans = []
  def map(self, addr: int, size: int):
    lo, hi = addr & ~(mmap.PAGESIZE - 1), -(-(addr + size) // mmap.PAGESIZE) * mmap.PAGESIZE
    got = _libc.mmap(lo, hi - lo, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0)
    if got != lo: raise OSError(f"cannot map {hi - lo} bytes at {lo:#x} (got {got})")
    self.spans.append((lo, hi - lo))
  def close(self):
    for a, n in self.spans: _libc.munmap(a, n)
    self.spans = []

def _spans(regions):
  """The page ranges covering the regions, merged."""
  out = []
  for a, n in sorted((r.addr & ~(mmap.PAGESIZE - 1), -(-(r.addr + max(r.size, 1)) // mmap.PAGESIZE) * mmap.PAGESIZE) for r in regions):
    if out and a <= out[-1][1]: out[-1][1] = max(out[-1][1], n)
    else: out.append([a, n])
  return [(a, b - a) for a, b in out]

@attrs.define
class MockResult:
  signals: dict
  memory: dict
  hang: bool

def run_on_mock(img, launches: int, entries: int = 1024) -> MockResult:
  """The image's launches on tinygrad's mock NV executor (every queue must be an NV one)."""
  from hcqdsl.target.layout import WINDOWS
  nvgpu = load_nvgpu()
  mem = Mapped()
  try:
    for a, n in _spans(img.regions): mem.map(a, n)
    for a, b in img.data: ctypes.memmove(a, bytes(b), len(b))
    order = {d["name"]: i for i, d in enumerate(img.devices)}
    # per queue: a GPFIFO ring and its control page, then room for each launch's pushbuffer
    room = {q.name: -(-4 * len(q.dwords) // 256) * 256 for q in img.queues}
    tops, fifos, pbs = {}, {}, {}
    for q in img.queues:
      base = tops.get(q.device, WINDOWS["NV"].ring_base(order[q.device]))
      size = -(-(entries * 8 + 0x1000 + launches * room[q.name]) // mmap.PAGESIZE) * mmap.PAGESIZE
      mem.map(base, size)
      fifos[q.name] = nvgpu.GPFIFO(len(fifos), base, entries)
      pbs[q.name] = base + entries * 8 + 0x1000
      tops[q.device] = base + size
    put = {q: 0 for q in fifos}
    def state(): return tuple((f.ctrl.GPGet, f.ctrl.GPPut, f.buf_ptr) for f in fifos.values())
    def pump():
      while True:
        before = state()
        for f in fifos.values(): f.execute()
        if state() == before: return
    def w32(a, v): ctypes.c_uint32.from_address(a).value = v & 0xFFFFFFFF
    def submit(q, k, env):
      """NVCommandQueue._submit_to_gpfifo: the launch's patched pushbuffer, its memory patches, a GPFIFO entry."""
      dw = img.patched(q, env)
      a = pbs[q.name] + (k - 1) * room[q.name]
      (ctypes.c_uint32 * len(dw)).from_address(a)[:] = dw
      for p in q.mem_patches: w32(p.offset, p.value(env))
      f = fifos[q.name]
      f.gpfifo[put[q.name] % entries] = (a // 4 << 2) | (len(dw) << 42) | (1 << 41)
      put[q.name] += 1
      f.ctrl.GPPut = put[q.name] % entries
      pump()
    named = {n for st in img.host if st["op"] == "submit" for n in st["queues"]}
    bare = any(st["op"] == "submit" and not st["queues"] for st in img.host)
    size_at = dict(img.buffers.values())
    hung = False
    for k in range(1, launches + 1):
      env, done = img.env(k), set()
      def sub(names):
        for n in names:
          if n in done: continue
          if not done:
            for kk, a, b in img.rewrites:
              if kk == k: ctypes.memmove(a, b.ljust(size_at[a], b"\0"), size_at[a])
          done.add(n)
          submit(img.queue(n), k, env)
      sub([] if bare else [q.name for q in img.queues if q.name not in named])
      for st in img.host:
        if st["op"] == "submit": sub(st["queues"] or [q.name for q in img.queues])
        elif st["op"] == "write":
          b = st["data"][k - 1] if k <= len(st["data"]) else b""
          ctypes.memmove(st["addr"], b, len(b))
        else:
          v = (env[st["var"]] if st["var"] is not None else 0) + st["add"]
          if st["op"] == "signal":
            ctypes.c_uint64.from_address(st["addr"]).value = v & 0xFFFFFFFF
            pump()
            continue
          pump()
          if ctypes.c_uint64.from_address(st["addr"]).value < v:
            hung = True
            break
      if hung: break
    pump()
    hung = hung or any(f.ctrl.GPGet != f.ctrl.GPPut or f.buf is not None for f in fifos.values())
    def last(n, a):
      return a if not img.var_values.get(f"{n}.addr") else img.var_values[f"{n}.addr"][min(launches, len(img.var_values[f"{n}.addr"])) - 1]
    return MockResult({n: ctypes.c_uint32.from_address(a).value for n, a in img.signals.items()},
                      {n: ctypes.string_at(last(n, a), sz) for n, (a, sz) in img.buffers.items()}, hung)
  finally: mem.close()
