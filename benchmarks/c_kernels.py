"""Cost of guarding C kernels: `run` of a program of N `exec`s of a tiny C kernel (8 floats), C kernels in the worker
process (the default: a crash or hang is a device fault) against in this process (`--kernel-timeout 0`). Prints the
best of 3 wall times and the per-exec overhead of the worker (one pipe round trip).
  python benchmarks/c_kernels.py [--n 2000]"""
import argparse, os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from hcqdsl import parse  # noqa: E402
from hcqdsl.runtime import run  # noqa: E402

def program(n: int) -> str:
  body = "\n".join("  exec saxpy(y, x)" for _ in range(n))
  return ("device g = AMD:0\nbuffer x on g size 32\nbuffer y on g size 32\n"
          'kernel saxpy(out y, in x) = c "void saxpy(float *y, const float *x) { for (int i = 0; i < 8; i++) y[i] = 2.0f * x[i] + 0.5f; }"\n'
          f"queue q compute on g {{\n{body}\n}}\n")

def best(prog, **kw) -> float:
  out = []
  for _ in range(3):
    t0 = time.perf_counter()
    r = run(prog, **kw)
    out.append(time.perf_counter() - t0)
    assert r.ok, r.summary()
  return min(out)

if __name__ == "__main__":
  ap = argparse.ArgumentParser()
  ap.add_argument("--n", type=int, default=2000)
  a = ap.parse_args()
  prog = parse(program(a.n), "bench.hcq")
  run(prog)  # compile the kernel once (cached)
  inproc, worker = best(prog, kernel_timeout=None), best(prog, kernel_timeout=10.0)
  print(f"{a.n} execs of a C kernel: in-process {inproc * 1e3:.0f} ms, worker {worker * 1e3:.0f} ms "
        f"({worker / inproc:.2f}x); worker overhead {(worker - inproc) / a.n * 1e6:.1f} us per exec")
