"""Emulator throughput in packets/s: sync packets (WAIT_REG_MEM / RELEASE_MEM on a compute queue, POLL_REGMEM / FENCE
on a copy queue) and copy packets (64-byte COPY_LINEAR), each from one queue's ring, all waits already satisfied.
Times only the engines (emulator.run), not compile or submit setup.
  python benchmarks/emulator.py [--n 20000] [--launches 5] [--target gfx1100]"""
import argparse, os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from hcqdsl import parse  # noqa: E402
from hcqdsl.vendors import compile_program  # noqa: E402
from hcqdsl.runtime.emulator import Emulator  # noqa: E402
from hcqdsl.runtime.submit import Submitter  # noqa: E402

def program(kind: str, n: int, arch: str) -> str:
  if kind == "sync-pm4": body, eng = ["signal s = k", "wait s >= k"] * (n // 2), "compute"
  elif kind == "sync-sdma": body, eng = ["signal s = k", "wait s >= k"] * (n // 2), "copy"
  else: body, eng = ["copy b <- a"] * n, "copy"
  lines = "\n".join("  " + s for s in body)
  return (f"device g = AMD:0 {arch}\nbuffer a on g size 64\nbuffer b on g size 64\nsignal s on g\nvar k\n"
          f"queue q {eng} on g {{\n{lines}\n}}\n")

def bench(kind, n, launches, arch):
  img = compile_program(parse(program(kind, n, arch)), arch)
  best = 0.0
  for _ in range(3):
    emu = Emulator()
    sub = Submitter(img, emu)
    t0 = time.perf_counter()
    emu.run(sub.host(launches))
    dt = time.perf_counter() - t0
    assert emu.fault is None and emu.hang is None
    best = max(best, emu.engines[0].packets / dt)
  return emu.engines[0].packets, best

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--n", type=int, default=20000)
  ap.add_argument("--launches", type=int, default=5)
  ap.add_argument("--target", default="gfx1100")
  a = ap.parse_args()
  for kind in ("sync-pm4", "sync-sdma", "copy-sdma"):
    pk, rate = bench(kind, a.n, a.launches, a.target)
    print(f"{kind:10s} {pk:8d} packets  {rate / 1e3:7.0f}k packets/s")

if __name__ == "__main__": main()
