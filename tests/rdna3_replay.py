"""Every dispatch of a program, replayed on tinygrad's own RDNA3 emulator (the peer's test/mockgpu/amd/emu.py) on the
same image: the same code object bytes, kernel arguments and buffers at the same addresses, the launch registers the
packets set. Memory before and after each dispatch comes from hcqdsl's run (rdna3.OBSERVERS); a worker process with
the peer on its path maps every region of the plan at its own address (mmap MAP_FIXED_NOREPLACE: tinygrad's emulator
addresses host memory directly), writes the before-bytes, calls its `run_asm`, and sends back the after-bytes and the
time it took. Comparing the two after-states tests the executor on whole real kernels, and times both on the same
work.

tinygrad's emulator sets DAZ/FTZ for every dispatch (denormals flushed); tinygrad's kernels ask for denormals to be
kept (FLOAT_MODE 0xF0) and this executor keeps them, so the replay runs its dispatches without that when the kernel's
float mode keeps FP32 denormals (`flush=False`)."""
from __future__ import annotations
import os, pathlib, pickle, subprocess, sys, tempfile, time
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from rdna3_diff import peer  # noqa: E402

def record(path: str, kernels: str = "amd", max_bytes: int = 64 << 20) -> tuple:
  """(RunResult, [dispatch]) of running the program: per dispatch its launch description and the bytes of every
  region (below max_bytes) before and after it."""
  from hcqdsl.runtime import run
  from hcqdsl.runtime.isa import rdna3
  out = []
  def obs(phase, desc, mem):
    regions = [(r.base, r.u8[:r.size].tobytes()) for r in mem.regions if r.size <= max_bytes]
    if phase == "before": out.append({**desc, "before": regions})
    else: out[-1]["after"] = regions
  rdna3.OBSERVERS.append(obs)
  try: res = run(pathlib.Path(path).read_text(), filename=str(path), kernels=kernels)
  finally: rdna3.OBSERVERS.remove(obs)
  return res, out

def worker(inp: str, outp: str):
  """In the peer's environment: replay the dispatches of `inp` (a pickle) on tinygrad's emulator, twice (the first
  pass compiles each instruction, the second is warm); write the after-regions and the seconds of each pass."""
  import ctypes
  os.environ.setdefault("DEV", "CPU")
  from test.mockgpu.amd import emu
  libc = ctypes.CDLL(None, use_errno=True)
  libc.mmap.restype, libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
  libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
  PROT, FLAGS = 3, 0x02 | 0x20 | 0x100000   # READ|WRITE; MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE
  with open(inp, "rb") as f: ds = pickle.load(f)
  spans = {}
  for d in ds:
    for base, data in d["before"]:
      lo, hi = base & ~0xFFF, (base + len(data) + 0xFFF) & ~0xFFF
      for p in range(lo, hi, 0x1000): spans[p] = True
  pages = sorted(spans)
  runs, start = [], None   # contiguous page runs
  for i, p in enumerate(pages):
    if start is None: start = p
    if i + 1 == len(pages) or pages[i + 1] != p + 0x1000:
      runs.append((start, p + 0x1000))
      start = None
  for lo, hi in runs:
    got = libc.mmap(lo, hi - lo, PROT, FLAGS, -1, 0)
    if got != lo: raise OSError(f"cannot map {lo:#x}..{hi:#x} at its own address (errno {ctypes.get_errno()})")
  class NoFlush:   # the kernel keeps FP32 denormals: run without tinygrad's DAZ/FTZ
    def __enter__(self): return self
    def __exit__(self, *a): return False
  results, seconds = None, []
  for _ in range(2):
    outs, t_pass = [], 0.0
    for d in ds:
      for base, data in d["before"]: ctypes.memmove(base, data, len(data))
      keep = ((d["float_mode"] >> 4) & 3) == 3
      saved = emu._MXCSRContext
      if keep: emu._MXCSRContext = NoFlush
      try:
        t0 = time.perf_counter()
        emu.run_asm(d["entry"], 0, *d["grid"], *d["block"], 0, d["rsrc2"], d["scratch_size"], "rdna3", list(d["user"]))
        t_pass += time.perf_counter() - t0
        err = None
      except Exception as e: err = f"{type(e).__name__}: {str(e)[:300]}"
      finally: emu._MXCSRContext = saved
      outs.append({"error": err, "after": [(base, ctypes.string_at(base, len(data))) for base, data in d["before"]]})
    results = outs if results is None else results
    seconds.append(t_pass)
  with open(outp, "wb") as f: pickle.dump({"results": results, "seconds": seconds}, f)

def replay(ds: list, timeout: float = 3600) -> dict:
  """tinygrad's after-states for the dispatches: {"results": [{"error", "after"}], "seconds": [cold, warm]}; None
  without the peer."""
  p = peer()
  if p is None: return None
  with tempfile.TemporaryDirectory(prefix="hcqdsl-replay-") as tmp:
    inp, outp = os.path.join(tmp, "in.pkl"), os.path.join(tmp, "out.pkl")
    with open(inp, "wb") as f: pickle.dump([{k: d[k] for k in d if k != "after"} for d in ds], f)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(p), str(ROOT)]), DEV="CPU")
    r = subprocess.run([sys.executable, str(pathlib.Path(__file__).resolve()), inp, outp], env=env, cwd=str(p),
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0: raise RuntimeError(f"tinygrad's emulator replay failed: {r.stderr[-3000:]}")
    with open(outp, "rb") as f: return pickle.load(f)

def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """Distance in f32 units in the last place (NaN to NaN: 0) of two equal-length byte strings read as f32."""
  x, y = a.view("<i4").astype(np.int64), b.view("<i4").astype(np.int64)
  x = np.where(x < 0, -(x & 0x7FFFFFFF), x)
  y = np.where(y < 0, -(y & 0x7FFFFFFF), y)
  d = np.abs(x - y)
  fa, fb = a.view("<f4"), b.view("<f4")
  return np.where(np.isnan(fa) & np.isnan(fb), 0, d)

def compare(ds: list, tg: dict) -> list:
  """Per dispatch: (kernel, differing bytes, max f32 ulps among differing words, error or None)."""
  out = []
  for d, t in zip(ds, tg["results"]):
    nbytes, worst = 0, 0
    for (base, ours), (_, theirs) in zip(d["after"], t["after"]):
      if ours == theirs: continue
      a, b = np.frombuffer(ours, np.uint8), np.frombuffer(theirs, np.uint8)
      nbytes += int((a != b).sum())
      n = len(a) // 4 * 4
      if n: worst = max(worst, int(ulps(a[:n].copy(), b[:n].copy()).max()))
    out.append((d["kernel"], nbytes, worst, t["error"]))
  return out

if __name__ == "__main__":
  worker(sys.argv[1], sys.argv[2])
