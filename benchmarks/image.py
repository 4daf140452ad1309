"""Compile, write and read back an image of a big program (benchmarks/submit.py's: 70% compute, 30% copy statements
with per-launch values): best of --reps of compile_program, Image.to_bytes (every value checked against the schema)
and Image.from_bytes (likewise). There is no tinygrad counterpart; compare two trees by running each one's copy.
  python benchmarks/image.py [--n 100000] [--target gfx1100] [--reps 3]"""
import argparse, os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from hcqdsl import parse  # noqa: E402
from hcqdsl.vendors import compile_program  # noqa: E402
from hcqdsl.target.image import Image  # noqa: E402
from submit import program  # noqa: E402

def best(fn, reps: int) -> float:
  out = float("inf")
  for _ in range(reps):
    t = time.perf_counter()
    fn()
    out = min(out, time.perf_counter() - t)
  return out

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--n", type=int, default=100_000)
  ap.add_argument("--target", default="gfx1100")
  ap.add_argument("--reps", type=int, default=3)
  a = ap.parse_args()
  p = parse(program(a.n, a.target), "bench.hcq")
  img = compile_program(p, a.target)
  b = img.to_bytes()
  assert Image.from_bytes(b) == img
  print(f"{a.n} statements, {sum(len(q.dwords) for q in img.queues)} dwords, {sum(len(q.patches) for q in img.queues)} "
        f"patches, {len(b)} bytes")
  print(f"compile_program  {best(lambda: compile_program(p, a.target), a.reps) * 1e3:8.0f} ms")
  print(f"Image.to_bytes   {best(img.to_bytes, a.reps) * 1e3:8.0f} ms")
  print(f"Image.from_bytes {best(lambda: Image.from_bytes(b), a.reps) * 1e3:8.0f} ms")

if __name__ == "__main__": main()
