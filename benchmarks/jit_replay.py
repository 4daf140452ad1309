"""Per-launch CPU cost of the patching a TinyJit replay needs (issue 12): hcqdsl's submit interpreter patching one queue
(command dwords: launch dims, signal values; kernel arguments: scalars, rebound buffer addresses) against tinygrad 0.14's
own `HWQueue._apply_var_vals` on the same queue built by its encoders with `UOp.variable`s in those places (the
stand-in device of tests/amd_standin.py). Both produce identical dwords (checked every launch).
  python benchmarks/jit_replay.py [--execs 100] [--launches 2000] [--target gfx1100]"""
import argparse, os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from hcqdsl import parse  # noqa: E402
from hcqdsl.vendors import compile_program  # noqa: E402
from hcqdsl.runtime.emulator import Emulator  # noqa: E402
from hcqdsl.runtime.submit import Submitter  # noqa: E402
from amd_replay import symbolic_replay  # noqa: E402

def program(n: int, arch: str, launches: int) -> str:
  """A decode step of n execs: each takes the position (a listed var), a rebound token and a dim over the position."""
  pos = ", ".join(str(k % 4096) for k in range(launches))
  toks = ", ".join("i32 [1]" for _ in range(launches))
  body = "\n".join(f"  exec k(cache, tok, pos + {i}) grid (pos + 1, 1, 1)" for i in range(n))
  return (f"device g = AMD:0 {arch}\nbuffer cache on g size 64K\nbuffer tok on g size 4 rebound = {toks}\nvar pos = [{pos}]\n"
          f"kernel k(inout cache, in tok, i32 at)\nqueue c compute on g {{\n  epoch\n{body}\n  signal g.timeline = g.epoch\n}}\n")

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--execs", type=int, default=100)
  ap.add_argument("--launches", type=int, default=2000)
  ap.add_argument("--target", default="gfx1100")
  a = ap.parse_args()
  prog = parse(program(a.execs, a.target, a.launches))
  img = compile_program(prog)
  qi = img.queue("c")
  sub = Submitter(img, Emulator())
  qs = sub.queues["c"]
  tq, symname, kernargs = symbolic_replay(img, prog, "c")  # kernargs: tinygrad's kernel-argument memory, kept alive
  envs = [img.env(k) for k in range(1, a.launches + 1)]
  vecs = [sub.env_vector(k) for k in range(1, a.launches + 1)]
  tvals = [{symname[v]: x for v, x in e.items()} for e in envs]
  for k in (0, 1, 2):  # identical dwords first
    sub.patch(qs, vecs[k])
    tq._apply_var_vals(tvals[k])
    assert list(qs.tmpl) == [x & 0xFFFFFFFF for x in tq._q]
  best = {}
  for name, fn in (("hcqdsl", lambda k: sub.patch(qs, vecs[k])), ("tinygrad", lambda k: tq._apply_var_vals(tvals[k]))):
    t = []
    for _ in range(3):
      t0 = time.perf_counter()
      for k in range(3, a.launches): fn(k)
      t.append((time.perf_counter() - t0) / (a.launches - 3))
    best[name] = min(t)
  print(f"{a.execs} execs, {len(qi.patches)} command-dword patches, {len(qi.mem_patches)} kernel-argument patches, "
        f"{a.target}, best of 3 over {a.launches - 3} launches")
  for name, t in best.items(): print(f"  {name:9s} {t * 1e6:8.1f} us per launch")
  print(f"  ratio tinygrad / hcqdsl: {best['tinygrad'] / best['hcqdsl']:.2f}x")

if __name__ == "__main__": main()
