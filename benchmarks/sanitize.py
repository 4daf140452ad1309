"""The cost of `hcqdsl sanitize` on tinygrad scripts in tinygrad's own styles, side by side with the same script run
plainly (the anchor: tinygrad itself on its mock GPU), each in a fresh process: wall time and peak memory (max RSS),
best of --repeat, on both of tinygrad's AMD paths (classic HCQ/HCQGraph, and hcq2 with HCQ2=1 HCQ_RUNTIME_DEV=PYTHON).
The issue's target: sanitize <= 1.5x the plain run's wall time and peak memory.
  python benchmarks/sanitize.py [--repeat 1] [--paths classic,hcq2] [--workloads dp_adam,decode,convnet,copy_ring]"""
import argparse, json, pathlib, subprocess, sys
ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from mock_gpu import env, unavailable, WORKLOADS  # noqa: E402

WORKLOADS_ENV = {"dp_adam": {"NDEV": "2", "CALLS": "4"}, "decode": {}, "convnet": {}, "copy_ring": {}}

def rss_of(cmd: list, e: dict) -> tuple:
  """Wall time, peak RSS (MiB) and the submissions a sanitize run reports, measured by a wrapper process so each
  command's peak is its own (RUSAGE_CHILDREN only grows)."""
  probe = ("import resource, subprocess, sys, time, json; t = time.perf_counter(); "
           "r = subprocess.run(sys.argv[1:], capture_output=True, text=True); dt = time.perf_counter() - t; "
           "print(json.dumps([dt, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, r.returncode, r.stdout[-3000:], r.stderr[-3000:]]))")
  r = subprocess.run([sys.executable, "-c", probe, *cmd], capture_output=True, text=True, env=e, cwd=str(ROOT))
  dt, rss, rc, out, err = json.loads(r.stdout)
  assert rc in (0, 1), (cmd, err)
  subs = next((int(ln.split(" in ")[-1].split()[0]) for ln in out.splitlines()[::-1] if " submission" in ln and " in " in ln), None)
  return dt, rss, subs, out.strip().splitlines()[-1] if out.strip() else ""

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--repeat", type=int, default=1)
  ap.add_argument("--paths", default="classic,hcq2")
  ap.add_argument("--workloads", default=",".join(WORKLOADS_ENV))
  a = ap.parse_args()
  if (why := unavailable()): sys.exit(f"benchmarks/sanitize.py: {why}")
  rows = []
  print(f"{'workload':10s} {'path':7s} {'subs':>5s} {'plain s':>8s} {'sanitize s':>10s} {'x':>5s} {'plain MiB':>9s} {'sanitize MiB':>12s} {'x':>5s} "
        f" verdict")
  for path in a.paths.split(","):
    for w in a.workloads.split(","):
      e = env(hcq2=path == "hcq2", **WORKLOADS_ENV[w])
      script = str(WORKLOADS / f"{w}.py")
      plain = min((rss_of([sys.executable, script], e) for _ in range(a.repeat)), key=lambda x: x[0])
      san = min((rss_of([sys.executable, "-m", "hcqdsl", "sanitize", "-q", script], e) for _ in range(a.repeat)), key=lambda x: x[0])
      rows.append((w, path, san[2], plain[0], san[0], plain[1], san[1]))
      print(f"{w:10s} {path:7s} {san[2] or 0:5d} {plain[0]:8.2f} {san[0]:10.2f} {san[0] / plain[0]:5.2f} {plain[1]:9.0f} {san[1]:12.0f} "
            f"{san[1] / plain[1]:5.2f}  {san[3].split(':')[0]}", flush=True)

if __name__ == "__main__": main()
