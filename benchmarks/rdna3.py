"""The RDNA3 executor's speed, side by side in one run: per workload the wall time of `run` with `--kernels amd` (the
gfx11 machine code on the executor) and with `--kernels c` (tinygrad's CPU kernels), best of --repeat after a warm-up
run (which pays for compiling: the executor's opcode libraries, the C kernels), the wave instructions executed and the
executor's rate in wave instructions per CPU second; and tinygrad's own emulator (the peer's test/mockgpu/amd/emu.py)
running the same dispatches on the same image (tests/rdna3_replay.py: the code objects, arguments and buffers at the
same addresses), its first pass (compiling each instruction with clang) and its second.

Workloads: the model workload of issue 24, a single-shot 4-layer width-256 MLP forward and backward with an SGD step
(tests/amd_code's mlp4-style script, emitted into the cache directory with `hcqdsl emit --amd-code` when libLLVM is
there), and every workload under tests/amd_code.
  python benchmarks/rdna3.py [--repeat 3] [--no-tinygrad] [--only NAME,...]"""
import argparse, os, pathlib, subprocess, sys, time
ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from hcqdsl.runtime import run  # noqa: E402
from hcqdsl.runtime.isa.rdna3 import STATS  # noqa: E402
from hcqdsl.host_cc import cache_dir  # noqa: E402

MLP = '''"""A single-shot 4-layer, width-256 MLP forward and backward with an SGD step (benchmarks/rdna3.py)."""
import numpy as np
from tinygrad import Tensor, Device, nn
from tinygrad.helpers import Context

def main():
  rng = np.random.default_rng(4)
  dev = Device.DEFAULT
  x = Tensor(rng.standard_normal((32, 256), dtype=np.float32), device=dev)
  y = Tensor(rng.integers(0, 256, (32,), dtype=np.int32), device=dev)
  ws = [Tensor(rng.standard_normal((256, 256), dtype=np.float32) / 16, device=dev) for _ in range(4)]
  opt = nn.optim.SGD(ws, lr=0.01)
  with Context(TRAINING=1):
    h = x
    for i, w in enumerate(ws): h = (h @ w).relu() if i < 3 else h @ w
    loss = h.sparse_categorical_crossentropy(y)
    opt.zero_grad()
    loss.backward()
    return [loss] + opt.schedule_step()
'''

def mlp_program() -> str:
  """The MLP workload's .hcq (emitted once into the cache directory), or None without libLLVM."""
  d = pathlib.Path(cache_dir()) / "bench-mlp4"
  hcq = d / "mlp4.hcq"
  if hcq.exists(): return str(hcq)
  d.mkdir(parents=True, exist_ok=True)
  (d / "mlp4.py").write_text(MLP)
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "emit", str(d / "mlp4.py"), "-o", str(hcq), "--amd-code"],
                     capture_output=True, text=True, cwd=ROOT, env={**os.environ, "DEV": "CPU"})
  if r.returncode != 0:
    print(f"(the MLP workload needs libLLVM to emit: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode})")
    return None
  return str(hcq)

def timed(path: str, kernels: str, repeat: int) -> tuple:
  src = pathlib.Path(path).read_text()
  run(src, filename=path, kernels=kernels)   # warm-up: compile caches
  best, insts, secs = float("inf"), 0, 0.0
  for _ in range(repeat):
    i0, s0 = STATS.instructions, STATS.seconds
    t0 = time.perf_counter()
    r = run(src, filename=path, kernels=kernels)
    dt = time.perf_counter() - t0
    assert r.fault is None and not r.hang, r.summary()
    if dt < best: best, insts, secs = dt, STATS.instructions - i0, STATS.seconds - s0
  return best, insts, secs

def tinygrad_seconds(path: str):
  import rdna3_replay
  _, ds = rdna3_replay.record(path)
  tg = rdna3_replay.replay(ds)
  return None if tg is None else tg["seconds"]

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--repeat", type=int, default=3)
  ap.add_argument("--no-tinygrad", action="store_true")
  ap.add_argument("--only", default="")
  a = ap.parse_args()
  work = []
  mlp = mlp_program()
  if mlp: work.append(("mlp4", mlp))
  work += [(d.name, str(d / f"{d.name}.hcq")) for d in sorted((ROOT / "tests" / "amd_code").iterdir()) if (d / f"{d.name}.hcq").exists()]
  if a.only: work = [w for w in work if w[0] in a.only.split(",")]
  print(f"{'workload':12s} {'amd s':>7s} {'c s':>7s} {'amd/c':>6s} {'wave insts':>10s} {'exec s':>7s} {'insts/s':>9s}"
        f" {'tinygrad emu s (1st/2nd)':>25s} {'2nd/exec':>8s}")
  for name, path in work:
    ta, insts, secs = timed(path, "amd", a.repeat)
    tc, _, _ = timed(path, "c", a.repeat)
    tg = None if a.no_tinygrad else tinygrad_seconds(path)
    tgs = f"{tg[0]:11.2f} / {tg[1]:9.3f}" if tg else f"{'(no peer)':>23s}"
    ratio = f"{tg[1] / secs:8.1f}" if tg and secs else f"{'':8s}"
    print(f"{name:12s} {ta:7.3f} {tc:7.3f} {ta / tc:6.2f} {insts:10d} {secs:7.3f} {insts / max(secs, 1e-9):9.0f} {tgs:>25s} {ratio}", flush=True)

if __name__ == "__main__": main()
