"""The README's test command as a fresh machine runs it, measured whole: wall time, the CPU time of every process it
started (pytest and its children: the mock GPU's subprocesses, C compilers), and the peak memory of that process tree
(the sum of the tree's RSS, sampled every 0.2 s: what a 2-core, few-GB machine must hold at once), with the tests
that took longest and the moment the peak was reached (the test then running).

  python benchmarks/suite.py [--without-extras] [-- PYTEST ARGS...]

--without-extras runs it under ../shared/tools/without-extras (no clang, dot, spin, llvm: a fresh machine)."""
from __future__ import annotations
import argparse, os, pathlib, re, subprocess, sys, threading, time

ROOT = pathlib.Path(__file__).resolve().parents[1]

def tree_rss(root: int) -> int:
  """Bytes resident in process `root` and every descendant (from /proc: one pass over the process table)."""
  kids: dict = {}
  rss: dict = {}
  page = os.sysconf("SC_PAGE_SIZE")
  for d in os.listdir("/proc"):
    if not d.isdigit(): continue
    try:
      stat = pathlib.Path(f"/proc/{d}/stat").read_text()
      fields = stat[stat.rfind(")") + 2:].split()
      kids.setdefault(int(fields[1]), []).append(int(d))
      rss[int(d)] = int(fields[21]) * page
    except (OSError, IndexError, ValueError): continue
  total, todo = 0, [root]
  while todo:
    p = todo.pop()
    total += rss.get(p, 0)
    todo.extend(kids.get(p, []))
  return total

# Loaded into the measured pytest as a plugin (`-p suite`): the test now running, for the peak's report, and each
# test's growth of pytest's own resident memory (what a test leaves behind in the process), in RSS_LOG.
CURRENT, RSS_LOG = "/tmp/hcqdsl-suite.current", "/tmp/hcqdsl-suite.rss"

def _rss_self() -> int:
  return int(pathlib.Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")

def _cpu() -> float:
  t = os.times()
  return t.user + t.system + t.children_user + t.children_system

def pytest_runtest_logstart(nodeid, location):
  pathlib.Path(CURRENT).write_text(nodeid)
  global _before, _cpu_before
  _before, _cpu_before = _rss_self(), _cpu()

def pytest_runtest_logfinish(nodeid, location):
  with open(RSS_LOG, "a") as f:
    f.write(f"{(_rss_self() - _before) / 2**20:.1f} {_rss_self() / 2**20:.0f} {_cpu() - _cpu_before:.2f} {nodeid}\n")

_before, _cpu_before = 0, 0.0

def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--without-extras", action="store_true")
  ap.add_argument("--log", default="/tmp/hcqdsl-suite.log", help="pytest's output (default %(default)s)")
  ap.add_argument("pytest_args", nargs="*")
  a = ap.parse_args()
  cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "suite", "--durations=25", *a.pytest_args]
  if a.without_extras: cmd = [str(ROOT.parent / "shared" / "tools" / "without-extras"), *cmd]
  pathlib.Path(RSS_LOG).write_text("")
  t0, c0 = time.perf_counter(), os.times()
  e = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH")])))
  with open(a.log, "w") as log:
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=e)
    peak, peak_at, peak_test, done = 0, 0.0, "", threading.Event()
    def sample() -> None:
      nonlocal peak, peak_at, peak_test
      while not done.wait(0.2):
        if (r := tree_rss(proc.pid)) > peak:
          peak, peak_at = r, time.perf_counter() - t0
          try: peak_test = pathlib.Path(CURRENT).read_text()
          except OSError: pass
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    rc = proc.wait()
    done.set()
    th.join()
  wall, c1 = time.perf_counter() - t0, os.times()
  cpu = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
  text = pathlib.Path(a.log).read_text(errors="replace")
  summary = next((ln for ln in reversed(text.splitlines()) if re.search(r"\d+ (passed|failed)", ln)), "(no summary)")
  print(f"{' '.join(cmd[-len(a.pytest_args) - 6:]) if a.pytest_args else 'python -m pytest'}: exit {rc}")
  print(f"  {summary.strip('= ')}")
  print(f"  wall {wall:.0f} s, CPU (the whole process tree) {cpu:.0f} s, peak tree RSS {peak / 2**30:.2f} GiB at {peak_at:.0f} s ({peak_test})")
  print(f"  load average now {os.getloadavg()[0]:.1f} (other work on the box stretches wall time, not CPU time); log: {a.log}")
  rows = [ln.split(" ", 3) for ln in pathlib.Path(RSS_LOG).read_text().splitlines() if ln.count(" ") >= 3]
  if rows:
    print(f"  pytest's own RSS at the end {rows[-1][1]} MiB; the tests that grew it most (MiB, RSS after):")
    for grow, after, _, node in sorted(rows, key=lambda r: -float(r[0]))[:12]: print(f"    {float(grow):7.1f} {after:>6} {node}")
    files: dict = {}
    for _, _, cpu, node in rows: files[node.split("::")[0]] = files.get(node.split("::")[0], 0.0) + float(cpu)
    print("  CPU seconds by test file (pytest and its children; the 15 dearest):")
    for f, cpu in sorted(files.items(), key=lambda kv: -kv[1])[:15]: print(f"    {cpu:7.1f} {f}")
  return rc

if __name__ == "__main__":
  sys.exit(main())
