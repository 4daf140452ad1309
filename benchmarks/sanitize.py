"""The cost of `hcqdsl sanitize` (and of `hcqdsl capture`) on a tinygrad script, side by side with the same script
run plainly, each in a fresh process on tinygrad's mock GPU (the anchor: tinygrad itself). The mock's RDNA3 emulator
dominates a kernel's time, so the overhead is also given per submission.
  python benchmarks/sanitize.py [--script tests/mock_workloads/jit_inputs.py] [--repeat 3]"""
import argparse, json, pathlib, subprocess, sys, tempfile, time
ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from mock_gpu import env, unavailable  # noqa: E402

def timed(cmd: list, e: dict) -> float:
  t = time.perf_counter()
  r = subprocess.run(cmd, capture_output=True, text=True, env=e, cwd=str(ROOT))
  dt = time.perf_counter() - t
  assert r.returncode in (0, 1), r.stderr
  return dt

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--script", default=str(ROOT / "tests" / "mock_workloads" / "jit_inputs.py"))
  ap.add_argument("--repeat", type=int, default=3)
  a = ap.parse_args()
  if (why := unavailable()): sys.exit(f"benchmarks/sanitize.py: {why}")
  e = env()
  with tempfile.TemporaryDirectory() as d:
    man = pathlib.Path(d) / "m.json"
    runs = {"tinygrad alone": [sys.executable, a.script],
            "hcqdsl capture": [sys.executable, "-m", "hcqdsl", "capture", "-o", str(man), a.script],
            "hcqdsl sanitize": [sys.executable, "-m", "hcqdsl", "sanitize", a.script]}
    best = {k: min(timed(c, e) for _ in range(a.repeat)) for k, c in runs.items()}
    subs = sum(h["op"] == "submit" for h in json.loads(man.read_text())["host"])
  base = best["tinygrad alone"]
  print(f"{pathlib.Path(a.script).name}: {subs} submissions, best of {a.repeat} (wall, fresh process each)")
  for k, t in best.items():
    print(f"  {k:16s} {t:7.2f} s" + ("" if k == "tinygrad alone" else f"   +{t - base:5.2f} s ({t / base:.2f}x, {1e3 * (t - base) / subs:.1f} ms per submission)"))

if __name__ == "__main__": main()
