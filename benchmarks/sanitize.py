"""The cost of `hcqdsl sanitize` over long runs (issue 39): a data-parallel TinyJit training step on 2 of tinygrad's
mock GPUs (tests/mock_workloads/dp_adam.py, NDEV=2) called N times with fresh inputs, run plainly (the anchor: tinygrad
itself) and under `hcqdsl sanitize --stats`, each in a fresh process, on both of tinygrad's AMD paths (classic
HCQ/HCQGraph, and hcq2 with HCQ2=1 HCQ_RUNTIME_DEV=PYTHON): wall time, peak RSS, the submissions, the warnings printed,
and hcqdsl's own CPU time per submission (thread time inside its hooks: `--stats`), with the process's resident
memory every N/20 calls (the RSS curve). Each result is written to --out as it comes (a long run is kept if a later
one fails). The issue's targets on the mock: sanitize <= 1.3x the plain run's wall time and peak RSS at 1,000 calls,
RSS at 10,000 calls within 10% of RSS at 1,000; <= 100 µs of hcqdsl CPU per replayed graph submission, <= 1 ms per
eager submission.
  python benchmarks/sanitize.py [--calls 100,1000] [--paths classic,hcq2] [--which plain,sanitize] [--out results.json]
  python benchmarks/sanitize.py --table results.json      # the table of docs/performance.md"""
import argparse, json, pathlib, subprocess, sys, threading, time
ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from mock_gpu import env, unavailable, WORKLOADS  # noqa: E402

def run(cmd: list, e: dict) -> dict:
  """Wall time, peak RSS (MiB), the RSS curve (from the workload's `rss` lines) and the last stdout line of `cmd`."""
  t = time.perf_counter()
  p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e, cwd=str(ROOT))
  peak, curve, err = [0], [], []
  def sample():
    while p.poll() is None:
      try: peak[0] = max(peak[0], int(next(ln for ln in open(f"/proc/{p.pid}/status") if ln.startswith("VmHWM")).split()[1]))
      except (OSError, StopIteration, ValueError): pass
      time.sleep(0.5)
  th = threading.Thread(target=sample, daemon=True)
  th.start()
  def drain():
    for ln in p.stderr:
      err.append(ln)
      if ln.startswith("rss "): curve.append([int(x) for x in ln.split()[1:3]])
  td = threading.Thread(target=drain, daemon=True)
  td.start()
  out = p.stdout.read()
  p.wait()
  td.join()
  dt = time.perf_counter() - t
  assert p.returncode in (0, 1), (cmd, "".join(err)[-3000:])
  return {"wall_s": dt, "peak_rss_mib": peak[0] / 1024, "curve_kib": curve, "stdout": out.strip().splitlines()[-1] if out.strip() else "",
          "stderr": "".join(x for x in err if not x.startswith("rss "))[-2000:]}

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--calls", default="100,1000")
  ap.add_argument("--paths", default="classic,hcq2")
  ap.add_argument("--which", default="plain,sanitize")
  ap.add_argument("--out", default="sanitize-bench.json")
  ap.add_argument("--table", metavar="RESULTS", help="print the table of a results file")
  a = ap.parse_args()
  if a.table:
    results = json.loads(pathlib.Path(a.table).read_text())
    table(results)
    return curves(results)
  if (why := unavailable()): sys.exit(f"benchmarks/sanitize.py: {why}")
  out = pathlib.Path(a.out)
  results = json.loads(out.read_text()) if out.exists() else {}
  script = str(WORKLOADS / "dp_adam.py")
  for calls in map(int, a.calls.split(",")):
    for path in a.paths.split(","):
      for which in a.which.split(","):
        e = env(hcq2=path == "hcq2", NDEV="2", CALLS=str(calls), RSS_EVERY=str(max(1, calls // 20)))
        cmd = [sys.executable, script] if which == "plain" else \
          [sys.executable, "-m", "hcqdsl", "sanitize", "-q", "--stats", "--format", "json", script]
        r = run(cmd, e)
        if which == "sanitize":
          rep = json.loads(r["stdout"])
          r.update(submissions=rep["submissions"], warnings=len(rep["warnings"]), warning_calls=sum(w["count"] for w in rep["warnings"]),
                   findings=len(rep["findings"]), stats=rep["stats"], ok=rep["ok"])
        results[f"{path}/{calls}/{which}"] = r
        out.write_text(json.dumps(results, indent=1))
        print(f"{path:7s} {calls:6d} {which:8s} {r['wall_s']:9.1f} s {r['peak_rss_mib']:7.0f} MiB", flush=True)
  table(results)
  curves(results)

def table(results: dict) -> None:
  print("| calls | path | plain | sanitize | × | plain RSS | sanitize RSS | × | submissions | warnings (distinct) | "
        "hcqdsl CPU per graph / eager submission |")
  print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
  keys = sorted({tuple(k.split("/")[:2]) for k in results}, key=lambda x: (int(x[1]), x[0]))
  for path, calls in keys:
    p, s = results.get(f"{path}/{calls}/plain"), results.get(f"{path}/{calls}/sanitize")
    if not p or not s: continue
    st = s["stats"]["cpu_us_per_submission"]
    print(f"| {int(calls):,} | {path} | {p['wall_s']:.1f} s | {s['wall_s']:.1f} s | {s['wall_s'] / p['wall_s']:.2f} | "
          f"{p['peak_rss_mib']:.0f} MiB | {s['peak_rss_mib']:.0f} MiB | {s['peak_rss_mib'] / p['peak_rss_mib']:.2f} | {s['submissions']:,} | "
          f"{s['warnings']} | {st['graph'] or 0:,.0f} µs / {st['eager'] or 0:,.0f} µs |")

def curves(results: dict) -> None:
  """The RSS curves (MiB at each tenth of the run) of the runs of 1,000 calls or more, plain and sanitized side by side,
  with their difference: hcqdsl's share of the process's memory as the run goes (docs/sanitize.md)."""
  for key in sorted({tuple(k.split("/")[:2]) for k in results}, key=lambda x: (x[0], int(x[1]))):
    path, calls = key[0], int(key[1])
    runs = {w: results.get(f"{path}/{calls}/{w}") for w in ("plain", "sanitize")}
    if calls < 1000 or not any(runs.values()): continue
    at = {w: {c: kib / 1024 for c, kib in (r or {}).get("curve_kib", [])} for w, r in runs.items()}
    points = sorted(set(at["plain"]) | set(at["sanitize"]))
    points = [c for c in points if c % max(1, calls // 10) == 0 or c == points[-1]]
    print(f"\n{path}, {calls:,} calls: resident memory (MiB) at call")
    print("| | " + " | ".join(f"{c:,}" for c in points) + " |")
    print("| --- |" + " ---: |" * len(points))
    for w in ("plain", "sanitize"):
      print(f"| {w} | " + " | ".join(f"{at[w][c]:.0f}" if c in at[w] else "" for c in points) + " |")
    print("| sanitize − plain | " + " | ".join(f"{at['sanitize'][c] - at['plain'][c]:.0f}" if c in at["plain"] and c in at["sanitize"] else ""
                                             for c in points) + " |")

if __name__ == "__main__": main()
