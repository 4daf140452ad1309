"""The RDNA3 executor on the example workloads' real gfx1100 code objects (tests/amd_code/, from `hcqdsl emit
--amd-code`): per workload the wall time of `run` with `--kernels amd` and with `--kernels c` (best of 3, after one
warm-up run that pays for decoding and translating), the wave instructions executed and the executor's rate in
wave instructions per CPU second (process time: steadier than wall time on a shared machine).
  python benchmarks/rdna3.py [--repeat 3]"""
import argparse, os, pathlib, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from hcqdsl.runtime import run  # noqa: E402
from hcqdsl.runtime.isa.rdna3 import STATS  # noqa: E402

CODE = pathlib.Path(__file__).parent.parent / "tests" / "amd_code"

def timed(src, f, kernels, repeat):
  best, insts, secs = float("inf"), 0, 0.0
  run(src, filename=f, kernels=kernels)   # warm-up: C compile cache, decode and pseudocode translation
  for _ in range(repeat):
    i0, s0 = STATS.instructions, STATS.seconds
    t0 = time.perf_counter()
    r = run(src, filename=f, kernels=kernels)
    dt = time.perf_counter() - t0
    assert r.ok, r.summary()
    if dt < best: best, insts, secs = dt, STATS.instructions - i0, STATS.seconds - s0
  return best, insts, secs

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--repeat", type=int, default=3)
  a = ap.parse_args()
  print(f"{'workload':13s} {'amd ms':>8s} {'c ms':>8s} {'amd/c':>6s} {'wave insts':>10s} {'exec CPU ms':>11s} {'insts/s':>8s}")
  tot_i = tot_s = 0.0
  for d in sorted(CODE.iterdir()):
    f = str(d / f"{d.name}.hcq")
    src = pathlib.Path(f).read_text()
    ta, insts, secs = timed(src, f, "amd", a.repeat)
    tc, _, _ = timed(src, f, "c", a.repeat)
    tot_i += insts; tot_s += secs
    print(f"{d.name:13s} {ta * 1e3:8.1f} {tc * 1e3:8.1f} {ta / tc:6.1f} {insts:10d} {secs * 1e3:11.1f} {insts / secs:8.0f}")
  print(f"{'all':13s} {'':8s} {'':8s} {'':6s} {int(tot_i):10d} {tot_s * 1e3:11.1f} {tot_i / tot_s:8.0f}")

if __name__ == "__main__": main()
