"""How `hcqdsl check`'s dynamic analysis scales: programs of 10k, 100k, 1M statements over 16 queues on 8 devices,
checked over 2 launches. Target: 100k statements in <= 1 s, t(1M) / t(100k) <= 12.

The programs are what a big captured graph looks like: per device a compute and a copy queue; every queue produces
into its own buffer, one 256-byte slice per step, and signals its step count; consumers wait for a neighbour's step,
`barrier`, then read that slice (cross-device for half of the neighbours); each device's compute queue finishes by
waiting for every queue and bumping its timeline; the host waits for the timelines, resets the queue signals (as
tinygrad's HCQGraph does between launches) and submits. They are race- and deadlock-free, so the whole run is the
one happens-before pass.

When `spin` (and gcc) are on PATH, the small sizes are also translated to Promela (hcqdsl.check.promela) and
checked by SPIN for deadlock, and a table prints SPIN's time beside ours (cap: SPIN_CAP seconds, default 60).

`--cli` (issue 37 item 6) runs `hcqdsl check --launches 1 FILE` as a user does (a subprocess: start-up, read, parse,
static checks, analysis, text report) on the generator's clean programs (race- and deadlock-free, 16 queues on 8
devices) written as .hcq text, at 100k, 250k, 500k and 1M statements, and records each process's user and system CPU
time and peak RSS (os.wait4's rusage), best of REPS interleaved rounds (and the spread of user CPU over them; peak RSS
the largest), in a table. Each tree's modules are compiled to bytecode first, as an installed package's are. Targets: <= 3 s CPU and <= 1 GB
at 1M, linear from 100k. It then splits one in-process run into its phases (start-up imports, parse, static checks,
analysis, report). `--warnings` times instead the issue-13 program: every cross-queue read going to another device
and written without its `barrier` (~17% of statements draw a `visibility` warning, ~1.5% `redundant-wait`), checked
over 2 launches.

Usage: python benchmarks/check_scaling.py [sizes...]     (default 10000 100000 1000000)
       python benchmarks/check_scaling.py --spin            (the SPIN table only)
       python benchmarks/check_scaling.py --no-spin [sizes] (no SPIN table)
       python benchmarks/check_scaling.py --cli [sizes]     (the CLI end to end; default 100000 250000 500000 1000000)
       python benchmarks/check_scaling.py --cli --vs REV    (... and git revision REV's CLI, interleaved, with ratios)
       python benchmarks/check_scaling.py --cli --warnings  (the issue-13 program with warnings, 2 launches)
       python benchmarks/check_scaling.py --passes [sizes]  (one in-process run of the --cli program, per pass)
"""
from __future__ import annotations
import random, shutil, subprocess, sys, time, tempfile, os
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from hcqdsl.ir import (Program, Device, Buffer, Signal, Kernel, Param, Queue, Host, Wait, SignalWrite, Exec, Copy,
                       Barrier, Epoch, Submit, Ref, Expr, Slice, Span)
from hcqdsl.check.pipeline import analyze

NDEV, NQ, SLICE = 8, 16, 256
REPS = int(os.environ.get("REPS", 3))   # best of 3 at every size (1M: ~6-9 s a run)

def make(n: int, seed: int = 0, ndev: int = NDEV, no_barrier: float = 0.0, read: float = 0.5, cross: bool = False) -> Program:
  """`no_barrier`: the share of cross-queue reads written without their `barrier` (each a `visibility` warning when
  the data crosses devices)."""
  NQ = 2 * ndev
  rnd = random.Random(seed)
  line = [0]
  def sp():
    line[0] += 1
    return Span("bench.hcq", line[0], 3, line[0], 20)
  def qname(i): return f"{'c' if i % 2 == 0 else 'x'}{i // 2}"
  steps = max(1, n // NQ // 3)
  decls = [Device(f"gpu{d}", "AMD", d, "gfx1100", span=sp()) for d in range(ndev)]
  decls += [Buffer(f"buf_{qname(i)}", Ref(f"gpu{i // 2}"), steps * SLICE, span=sp()) for i in range(NQ)]
  decls.append(Buffer("weights", None, SLICE, span=sp()))  # host memory, only read
  decls += [Signal(f"sig_{qname(i)}", Ref(f"gpu{i // 2}"), span=sp()) for i in range(NQ)]
  decls += [Kernel("produce", (Param("out", "dst"),), span=sp()),
            Kernel("step", (Param("out", "dst"), Param("in", "src")), span=sp())]
  def rng(i, t): return Slice(Ref(f"buf_{qname(i)}"), t * SLICE, (t + 1) * SLICE, True)
  for i in range(NQ):
    body = [Epoch(span=sp())]
    waited = {}
    for t in range(steps):
      j = (i + rnd.choice((2, 3, NQ - 2, NQ // 2) if cross else (1, NQ - 1, 2, NQ // 2))) % NQ
      lo = waited.get(j, -1) + 1
      src = None
      if t > 0 and lo < t and rnd.random() < read:
        tj = rnd.randrange(lo, t)
        waited[j] = tj
        body.append(Wait(Ref(f"sig_{qname(j)}"), Expr(None, tj + 1), span=sp()))
        if not no_barrier or rnd.random() >= no_barrier: body.append(Barrier(span=sp()))
        src = rng(j, tj)
      if i % 2 == 0:
        body.append(Exec(Ref("step"), (rng(i, t), src), span=sp()) if src else Exec(Ref("produce"), (rng(i, t),), span=sp()))
      else:
        body.append(Copy(rng(i, t), src or (rng(i, t - 1) if t else Slice(Ref("weights"))), span=sp()))
      body.append(SignalWrite(Ref(f"sig_{qname(i)}"), Expr(None, t + 1), span=sp()))
    if i % 2 == 0:  # the device's finalizer
      body += [Wait(Ref(f"sig_{qname(j)}"), Expr(None, steps), span=sp()) for j in range(NQ) if j != i]
      body.append(SignalWrite(Ref(f"gpu{i // 2}.timeline"), Expr(Ref(f"gpu{i // 2}.epoch")), span=sp()))
    decls.append(Queue(qname(i), "compute" if i % 2 == 0 else "copy", Ref(f"gpu{i // 2}"), tuple(body), span=sp()))
  host = [Wait(Ref(f"gpu{d}.timeline"), Expr(Ref(f"gpu{d}.epoch"), -1), span=sp()) for d in range(ndev)]
  host += [SignalWrite(Ref(f"sig_{qname(i)}"), Expr(None, 0), span=sp()) for i in range(NQ)]
  host.append(Submit((), span=sp()))
  decls.append(Host(tuple(host), span=sp()))
  return Program(tuple(decls), file="bench.hcq")

def count(p: Program) -> int: return sum(len(q.body) for q in p.queues) + len(p.host.body)

def main(sizes, spin=True):
  # wall time and CPU time of this process: the dev box has 2 cores shared with other jobs, and CPU time is what
  # the analysis costs whatever else runs
  print(f"load average {os.getloadavg()[0]:.2f}")
  print(f"{'statements':>11} {'steps':>9} {'wall s':>8} {'cpu s':>8} {'diags':>6}")
  # the rounds go over every size in turn (best of REPS per size), so a slow spell of the shared box (its speed drifts
  # by 1.5x over minutes) hits the sizes alike instead of skewing t(1M)/t(100k)
  progs = {n: make(n) for n in sizes}
  times, res = {}, {}
  for _ in range(REPS):
    for n in sizes:
      t0, c0 = time.perf_counter(), time.process_time()
      res[n] = analyze(progs[n], launches=2)
      dt = (time.perf_counter() - t0, time.process_time() - c0)
      times[n] = dt if n not in times else min(times[n], dt)
  for n in sizes:
    m, d, best = count(progs[n]), res[n], times[n]
    codes = sorted({x.code for x in d})
    print(f"{m:>11} {2 * m:>9} {best[0]:>8.3f} {best[1]:>8.3f} {len(d):>6} {' '.join(codes)}")
  if 100_000 in times and 1_000_000 in times:
    print(f"t(1M)/t(100k) = {times[1_000_000][0] / times[100_000][0]:.2f} wall, "
          f"{times[1_000_000][1] / times[100_000][1]:.2f} cpu")
  if not spin: pass
  elif shutil.which("spin") is None or shutil.which("gcc") is None:
    print("spin: not installed (or no gcc), Promela comparison skipped")
  else: spin_table()

SPIN_CAP = float(os.environ.get("SPIN_CAP", 60))   # seconds per SPIN run (spin -a + gcc + pan)

def spin_table(cases=None):
  """The same programs (and, where SPIN can finish, a 2-device / 4-queue variant) through SPIN: the Promela model from
  hcqdsl.check.promela, `spin -a`, `gcc -O2 -DSAFETY -DCOLLAPSE -DMEMLIM=1024`, `pan`; deadlock only. SPIN's time
  is the whole run (its compile step included: that is what using it costs); `pan s` is the search alone."""
  from hcqdsl.check.promela import to_promela, spin_verify
  cases = cases or [(100, NDEV), (1_000, NDEV), (10_000, NDEV), (100, 2), (1_000, 2), (10_000, 2)]
  print(f"\nSPIN {subprocess.run(['spin', '-V'], capture_output=True, text=True).stdout.strip()}, cap {SPIN_CAP:.0f} s, "
        f"memory bound 1 GB; hcqdsl: best of 3, deadlock + races + the rest")
  print(f"{'statements':>11} {'queues':>6} {'hcqdsl s':>9} {'SPIN s':>16} {'pan s':>7} {'states':>10} {'ratio':>8}  verdicts")
  for n, ndev in cases:
    p = make(n, ndev=ndev)
    m = count(p)
    ours = min(_timed(p) for _ in range(3))
    dl = any(x.code == "deadlock" for x in analyze(p, launches=2))
    r = spin_verify(to_promela(p, launches=2), timeout=SPIN_CAP)
    if r["timeout"]: spin_s, ratio = f"timeout >{SPIN_CAP:.0f}", f">{SPIN_CAP / ours:.0f}x"
    elif r["deadlock"] is None: spin_s, ratio = f"no verdict {r['total']:.1f}", "-"
    else: spin_s, ratio = f"{r['total']:.2f}", f"{r['total'] / ours:.0f}x"
    why = ("out of memory" if r["memlim"] else "incomplete") if not r["timeout"] and r["deadlock"] is None else ""
    st = r["states"] if r["states"] is not None else "-"
    verdict = f"check: {'deadlock' if dl else 'no deadlock'}, SPIN: " + (
      "timeout" if r["timeout"] else why or ("deadlock" if r["deadlock"] else "no deadlock"))
    print(f"{m:>11} {2 * ndev:>6} {ours:>9.3f} {spin_s:>16} {r['t_pan']:>7.1f} {st:>10} {ratio:>8}  {verdict}")

def _timed(p) -> float:
  t0 = time.perf_counter()
  analyze(p, launches=2)
  return time.perf_counter() - t0

def cli_text(n: int) -> str:
  """The `--cli` program as .hcq text: cross-device reads without barriers."""
  from hcqdsl.lang.format import format_program
  return format_program(make(n, no_barrier=1.0, read=1.0, cross=True))

def phases(path: str, launches: int = 2) -> dict:
  """One in-process run of what `hcqdsl check PATH` does, timed per phase (GC off, as the CLI runs it)."""
  import gc
  from hcqdsl.lang.parse import parse_syntax
  from hcqdsl.check.static import check_static
  from hcqdsl.check import _sorted
  from hcqdsl.check.pipeline import analyze as dyn
  from hcqdsl.diagnostics import render_text, summary
  gc.collect()
  gc.disable()
  clock = time.process_time   # CPU time of this process: less inflated than wall time on a shared box
  try:
    t = [clock()]
    text = open(path).read()
    t.append(clock())
    prog, _ = parse_syntax(text, path)
    t.append(clock())
    st = check_static(prog)
    t.append(clock())
    d = _sorted(st + dyn(prog, launches=launches))
    t.append(clock())
    out = render_text(d, {path: text}, 20) + summary(d, launches, len(prog.queues))
    t.append(clock())
  finally: gc.enable()
  del prog, d, out
  return dict(zip(("read", "parse", "static", "analysis", "report"), (b - a for a, b in zip(t, t[1:]))))

def passes(path: str) -> dict:
  """One in-process run of `hcqdsl check PATH` split finer than `phases`: the static checks, unroll, the
  happens-before pass, each pass of `PASSES`, and the report's sort, capped text and summary line (CPU s, GC off)."""
  import gc
  from hcqdsl.lang.parse import parse_syntax
  from hcqdsl.check.static import check_static
  from hcqdsl.check import _sorted
  from hcqdsl.check.unroll import unroll
  from hcqdsl.check.hb import happens_before
  from hcqdsl.check import passes as A
  from hcqdsl.check.findings import Stuck, WaitStats
  from hcqdsl.diagnostics import render_text, summary
  text = open(path).read()
  gc.collect()
  gc.disable()
  out, clock = {}, time.process_time
  def timed(name, f, *args):
    t0 = clock()
    r = f(*args)
    out[name] = clock() - t0
    return r
  try:
    prog, _ = parse_syntax(text, path)
    d = timed("static", check_static, prog)
    u = timed("unroll", unroll, prog, 2)
    t = timed("hb", happens_before, u)
    found = A.Findings(deadlocks=[Stuck(t.done, t.values)] if t.blocked else [], races=t.races,
                       wstats={k: WaitStats(*v) for k, v in t.wstats.items()}, vis=t.vis_found)
    for p in A.PASSES: d += timed(p.code, p.run, u, found)   # (the program is inside the exact fragment)
    d = timed("sort", _sorted, d)
    timed("text", render_text, d, {path: text}, 20)
    timed("summary", summary, d, 2, len(prog.queues))
  finally: gc.enable()
  del prog, u, t, d
  return out

def passes_main(sizes):
  tmp = tempfile.mkdtemp(prefix="check_passes_")
  for n in sizes:
    path = os.path.join(tmp, f"p{n}.hcq")
    with open(path, "w") as f: f.write(cli_text(n))
    best: dict = {}
    for _ in range(REPS):
      for k, v in passes(path).items(): best[k] = min(best.get(k, v), v)
    warn = sum(best[k] for k in ("overflow", "redundant-wait", "visibility", "unused-signal"))
    print(f"{n:>11,} " + " ".join(f"{k} {v:.3f}" for k, v in best.items()) +
          f"  (warning passes {warn:.3f}, sort+report {best['sort'] + best['text'] + best['summary']:.3f})")
    os.unlink(path)
  os.rmdir(tmp)

def clean_text(n: int) -> str:
  """The `--cli` program as .hcq text: the generator's clean program (as `main` checks it)."""
  from hcqdsl.lang.format import format_program
  return format_program(make(n))

def run_cli(tree: str, argv: list) -> dict:
  """`python -m hcqdsl ARGV` with `tree` first on the path: its wall time, user and system CPU time and peak RSS (this
  process's rusage from os.wait4, not the children's running maximum), and the last line it printed."""
  t0 = time.perf_counter()
  p = subprocess.Popen([sys.executable, "-m", "hcqdsl", *argv], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=tree,
                       env={**os.environ, "PYTHONPATH": tree})
  out = p.stdout.read().decode() if p.stdout is not None else ""
  _, status, ru = os.wait4(p.pid, 0)
  p.returncode = os.waitstatus_to_exitcode(status)
  return {"wall": time.perf_counter() - t0, "user": ru.ru_utime, "sys": ru.ru_stime, "rss": ru.ru_maxrss / 1024,
          "last": (out.strip().splitlines() or [""])[-1]}

def cli_main(sizes, vs=None, warnings=False):
  """With `vs` (a git revision), the same runs of that revision's `hcqdsl check` (a `git archive` of it), interleaved
  with this tree's, and the ratios: before/after figures from one run."""
  argv = [] if warnings else ["--launches", "1"]
  print(f"load average {os.getloadavg()[0]:.2f}; hcqdsl check {' '.join(argv)} FILE ({'the warnings program' if warnings else 'clean programs'}"
        f", 16 queues on 8 devices), best of {REPS} interleaved rounds")
  tmp = tempfile.mkdtemp(prefix="check_cli_")
  files = {n: os.path.join(tmp, f"p{n}.hcq") for n in sizes}
  # written by another process: a child's peak RSS (ru_maxrss) starts at this process's size when it forks, so this one
  # must stay small (it never holds a program)
  gen = "import sys, check_scaling as c\nfor n, p in zip(sys.argv[1::2], sys.argv[2::2]): open(p, 'w').write(c.%s(int(n)))"
  subprocess.run([sys.executable, "-c", gen % ("cli_text" if warnings else "clean_text"), *(str(x) for n in sizes for x in (n, files[n]))],
                 check=True, cwd=os.path.dirname(os.path.abspath(__file__)))
  here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
  trees = {"this tree": here}
  if vs is not None:
    trees[vs] = other = os.path.join(tmp, "vs")
    os.mkdir(other)
    subprocess.run(f"git -C {here} archive {vs} | tar -x -C {other}", shell=True, check=True)
  # as installed: the modules' bytecode cached (pip writes it on install; a run under PYTHONDONTWRITEBYTECODE=1, as
  # these sessions' environment sets, would otherwise compile every module of the tree in every process, ~0.1 s)
  for tree in trees.values(): subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(tree, "hcqdsl")], check=True)
  best: dict = {}
  users: dict = {}   # every round's user CPU: the spread beside the best
  for _ in range(REPS):  # interleaved rounds, as above
    for n in sizes:
      for name, tree in trees.items():
        r, k = run_cli(tree, ["check", *argv, files[n]]), (name, n)
        users.setdefault(k, []).append(r["user"])
        if k not in best: best[k] = r
        else: best[k] = {**{x: min(best[k][x], r[x]) for x in ("wall", "user", "sys")}, "rss": max(best[k]["rss"], r["rss"]), "last": r["last"]}
  print(f"{'statements':>11} {'MB':>5} {'tree':>10} {'user s':>7} {'spread':>6} {'sys s':>6} {'CPU s':>6} {'peak RSS MB':>11} "
        f"{'wall s':>7}  summary line")
  for n in sizes:
    stmts = sum(1 for line in open(files[n]) if line.startswith("  "))
    for name in trees:
      b, u = best[name, n], users[name, n]
      print(f"{stmts:>11,} {os.path.getsize(files[n]) / 1e6:>5.1f} {name:>10} {b['user']:>7.2f} {max(u) - min(u):>6.2f} {b['sys']:>6.2f} "
            f"{b['user'] + b['sys']:>6.2f} {b['rss']:>11.0f} {b['wall']:>7.2f}  {b['last']}")
    if vs is not None:
      o, t = best[vs, n], best["this tree", n]
      print(f"{'':>11} {'':>5} {'ratio':>10} {o['user'] / t['user']:>6.2f}x {'':>6} {(o['user'] + o['sys']) / (t['user'] + t['sys']):>5.2f}x "
            f"{o['rss'] / t['rss']:>10.2f}x {o['wall'] / t['wall']:>6.2f}x  ({vs} / this tree)")
  lo, hi = min(sizes), max(sizes)
  if hi > lo:
    u = {n: best["this tree", n]["user"] for n in sizes}
    print(f"t({hi:,})/t({lo:,}) = {u[hi] / u[lo]:.2f} in user CPU for {hi / lo:.0f}x the statements")
  print("phases of one in-process run (cpu s):")
  for n in sizes:   # (after the CLI runs: this process grows by the program)
    ph = phases(files[n], 2 if warnings else 1)
    print(f"{n:>11,} " + " ".join(f"{k} {v:.2f}" for k, v in ph.items()) + f"  (all but parse: {sum(ph.values()) - ph['parse']:.2f})")
  shutil.rmtree(tmp)

if __name__ == "__main__":
  if sys.argv[1:] == ["--spin"]: spin_table()
  elif "--cli" in sys.argv:
    args = sys.argv[1:]
    vs = args[args.index("--vs") + 1] if "--vs" in args else None
    if vs is not None: del args[args.index("--vs"):args.index("--vs") + 2]
    cli_main([int(x) for x in args if x not in ("--cli", "--warnings")] or [100_000, 250_000, 500_000, 1_000_000], vs, "--warnings" in args)
  elif "--passes" in sys.argv: passes_main([int(x) for x in sys.argv[1:] if x != "--passes"] or [100_000, 1_000_000])
  else:
    args = [x for x in sys.argv[1:] if x != "--no-spin"]
    main([int(x) for x in args] or [10_000, 100_000, 1_000_000], spin="--no-spin" not in sys.argv)
