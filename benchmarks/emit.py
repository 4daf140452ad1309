"""Time `hcqdsl emit` adds on top of tinygrad's own path for the same tensors (schedule, compile, run on CPU), per
workload in examples/tinygrad; plus the waits and signals each planner emits. Caches are warm in both (kernels compiled
once before timing), so the difference is emit's own work: reading buffers, kernels, planning, formatting.
Times are best of --repeat runs; the last column is emit's best own time over tinygrad's best time inside emit (tinygrad's
time includes resolving call arguments to Buffers, `UOp.buffer`: run_linear does that for the same arguments too).
  python benchmarks/emit.py [--repeat 5]

--decode LAYERS DIM [VOCAB]: examples/tinygrad/gpt2_decode.py at that size, 6 calls (TinyJit: call 1 eager, 5
launches), side by side in one run, each in its own process: tinygrad's own TinyJit over the calls, then `hcqdsl emit
-o` (the program and its safetensors data file), `hcqdsl check` and `hcqdsl run` of what it wrote; wall time and peak
RSS of each. 8 512 is the 26M-parameter decode of issue 23, 12 768 50257 GPT-2 small's shape (124M parameters).
  python benchmarks/emit.py --decode 8 512

--step LAYERS DIM [VOCAB]: one decode step of the same model without a TinyJit (gpt2_decode.py's `step`: the forward
realizes its own result), end to end as a user runs it, each in its own process: the script under plain tinygrad (the
model built, the step run, the token read back), then `hcqdsl emit SCRIPT.py -o` of the same function, then `hcqdsl run`
of what it wrote (issue 37: emit called such a function twice); wall and CPU time (user + system) of each, best of
--repeat rounds.
  python benchmarks/emit.py --step 8 512 --repeat 3"""
import argparse, os, pathlib, resource, sys, time
os.environ.setdefault("DEV", "CPU")
ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from hcqdsl.tinygrad.script import load_function, call_script
from hcqdsl.tinygrad.schedule import schedule
from hcqdsl.tinygrad.planners import program
from hcqdsl.ir import Wait, Epoch, SignalWrite
from hcqdsl.lang.format import format_program
from hcqdsl.check import check

WORKLOADS = [("matmul_sum", "matmul_sum.py:main"), ("mlp_train", "mlp_train.py:main"), ("conv", "conv.py:main"),
             ("shard2", "shard_matmul.py:main"), ("shard4", "shard_matmul.py:four"), ("shard8", "shard_matmul.py:eight"),
             ("allreduce", "allreduce.py:main"), ("copy_chain", "copy_chain.py:main")]

def stats(prog):
  waits = sum(isinstance(s, Wait) for q in prog.queues for s in q.body)
  epochs = sum(isinstance(s, Epoch) for q in prog.queues for s in q.body)
  hwaits = sum(isinstance(s, Wait) for s in (prog.host.body if prog.host else ()))
  writes = sum(isinstance(s, SignalWrite) for q in prog.queues for s in q.body)
  hwrites = sum(isinstance(s, SignalWrite) for s in (prog.host.body if prog.host else ()))
  sigs = len(list(prog.of(__import__("hcqdsl").ir.Signal)))
  warns = sum(d.severity == "warning" for d in check(prog, launches=2))
  return dict(queues=len(prog.queues), waits=waits, epochs=epochs, host_waits=hwaits, signal_writes=writes,
              host_writes=hwrites, signals=sigs, warnings=warns)

DECODE = """
import sys, time, resource
sys.path.insert(0, {ex!r})
import gpt2_decode as m
kw = dict(layers={layers}, dim={dim}, vocab={vocab}, heads=max(1, {dim} // 64))
t0 = time.perf_counter()
if {which!r} == "tinygrad": m.reference(0, 6, **kw)
else:
  import hcqdsl, pathlib
  from hcqdsl.lang.format import format_program
  from hcqdsl.lang.sidecar import move_out
  out = pathlib.Path({out!r})
  prog = move_out(hcqdsl.emit_jit(*m.main(0, 6, **kw)), str(out.with_suffix(".safetensors")), out.with_suffix(".safetensors").name)
  out.write_text(format_program(prog))
print(f"{{time.perf_counter() - t0:.1f}} {{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}}")
"""

CLI = ("import sys, resource; from hcqdsl.cli import main; rc = main(sys.argv[1:]); "
       "sys.stderr.write(f'PEAK {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}\\n'); sys.exit(rc)")

def measure(argv: list) -> tuple:
  """(wall seconds, the subprocess's completed result); each child reports its own peak RSS."""
  import subprocess
  t0 = time.perf_counter()
  r = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "DEV": "CPU"})
  if r.returncode != 0: raise SystemExit(f"{argv[:4]} failed:\n{r.stdout[-1000:]}{r.stderr[-2000:]}")
  return time.perf_counter() - t0, r

def decode(layers: int, dim: int, vocab: int):
  import tempfile
  ex, tmp = str(ROOT / "examples" / "tinygrad"), tempfile.mkdtemp(prefix="hcqdsl-bench-")
  out = f"{tmp}/decode.hcq"
  params = layers * 12 * dim * dim + (vocab + 16) * dim   # blocks, token and position embeddings (the head is tied)
  print(f"gpt2_decode.py: {layers} layers, dim {dim}, vocab {vocab}: {params / 1e6:.1f}M parameters, 6 calls\n")
  print("| step | wall s | peak RSS MB |")
  print("| --- | --- | --- |")
  rows = {}
  for which in ("tinygrad", "hcqdsl"):
    code = DECODE.format(ex=ex, layers=layers, dim=dim, vocab=vocab, which=which, out=out)
    wall, r = measure([sys.executable, "-c", code])
    inner, peak = r.stdout.split()[-2:]
    rows[which] = (wall, float(peak))
    print(f"| {'tinygrad TinyJit, 6 calls' if which == 'tinygrad' else 'hcqdsl emit -o (text + data file)'} | {wall:.1f} | {peak} |")
  sizes = (os.path.getsize(out), os.path.getsize(out.replace(".hcq", ".safetensors")))
  for cmd in ("check", "run"):
    wall, r = measure([sys.executable, "-c", CLI, cmd, out])
    last = (r.stdout.strip().splitlines() or [""])[-1]
    print(f"| hcqdsl {cmd} ({last[:48]}) | {wall:.1f} | {r.stderr.split('PEAK ')[-1].strip()} |")
  print(f"\nemit / tinygrad wall time: {rows['hcqdsl'][0] / rows['tinygrad'][0]:.2f}x; text {sizes[0] / 1e6:.2f} MB, "
        f"data file {sizes[1] / 1e6:.1f} MB")

STEP = """
import sys
sys.path.insert(0, {ex!r})
from gpt2_decode import Transformer, MAX_CTX
import numpy as np
from tinygrad import Tensor, Variable
def main():
  model = Transformer({layers}, {dim}, max(1, {dim} // 64), np.random.default_rng(0), {vocab})
  return model(Tensor([1]).realize(), Variable("start_pos", 0, MAX_CTX - 1).bind(0))
if __name__ == "__main__": print(int(main().item()))
"""

def cpu_of(argv: list) -> tuple:
  """(wall seconds, CPU seconds — user + system — of the child, its completed result)."""
  c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
  wall, r = measure(argv)
  c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
  return wall, (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime), r

def step(layers: int, dim: int, vocab: int, rounds: int):
  """One decode step without a TinyJit: tinygrad's plain run of the script, then `hcqdsl emit` and `hcqdsl run`,
  `rounds` times in turn (best of each: the machine is shared, noise only ever adds)."""
  import tempfile
  tmp = pathlib.Path(tempfile.mkdtemp(prefix="hcqdsl-bench-"))
  script, out = tmp / "step.py", tmp / "step.hcq"
  script.write_text(STEP.format(ex=str(ROOT / "examples" / "tinygrad"), layers=layers, dim=dim, vocab=vocab))
  params = layers * 12 * dim * dim + (vocab + 16) * dim
  print(f"gpt2_decode.py's step: {layers} layers, dim {dim}, vocab {vocab}: {params / 1e6:.1f}M parameters, one call; "
        f"best of {rounds} rounds\n")
  plain = [sys.executable, "-c", "import runpy, sys, resource; sys.argv = [sys.argv[1]]; runpy.run_path(sys.argv[0], run_name='__main__'); "
           "sys.stderr.write(f'PEAK {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}\\n')", str(script)]
  rows: dict = {"tinygrad": [], "emit": [], "run": []}
  for _ in range(rounds):
    rows["tinygrad"].append(cpu_of(plain))
    rows["emit"].append(cpu_of([sys.executable, "-c", CLI, "emit", str(script), "-o", str(out)]))
    rows["run"].append(cpu_of([sys.executable, "-c", CLI, "run", str(out), "--no-check"]))
  best = {k: (min(w for w, _, _ in v), min(c for _, c, _ in v), v[-1][2]) for k, v in rows.items()}
  tg = best["tinygrad"]
  print("| step | wall s | CPU s | peak RSS MB |")
  print("| --- | --- | --- | --- |")
  for k, what in (("tinygrad", f"tinygrad, plain run (token {tg[2].stdout.strip()})"), ("emit", "hcqdsl emit -o"),
                  ("run", f"hcqdsl run ({(best['run'][2].stdout.strip().splitlines() or [''])[-1][:40]})")):
    w, c, r = best[k]
    ratio, cratio = (f" ({w / tg[0]:.2f}x)", f" ({c / tg[1]:.2f}x)") if k == "emit" else ("", "")
    print(f"| {what} | {w:.1f}{ratio} | {c:.1f}{cratio} | {r.stderr.split('PEAK ')[-1].strip()} |")
def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--repeat", type=int, default=5)
  ap.add_argument("--decode", type=int, nargs="+", metavar="LAYERS DIM [VOCAB]")
  ap.add_argument("--step", type=int, nargs="+", metavar="LAYERS DIM [VOCAB]")
  a = ap.parse_args()
  if a.step: return step(a.step[0], a.step[1], a.step[2] if len(a.step) > 2 else 64, a.repeat)
  if a.decode: return decode(a.decode[0], a.decode[1], a.decode[2] if len(a.decode) > 2 else 64)
  from tinygrad import Tensor
  ex = ROOT / "examples" / "tinygrad"
  print("| workload | cmds | tinygrad realize ms | emit ms | overhead | plan+format ms (hcqdsl / tinygrad) | "
        "emit's own work / tinygrad's, same run |")
  print("| --- | --- | --- | --- | --- | --- | --- |")
  table = []
  for name, spec in WORKLOADS:
    fn = load_function(str(ex / spec))
    Tensor.realize(*call_script(fn))  # warm tinygrad's compile caches
    tg, em, pl, own, tgin = [], [], {"hcqdsl": [], "tinygrad": []}, [], []
    for _ in range(a.repeat):
      ts = call_script(fn)
      t0 = time.perf_counter()
      Tensor.realize(*ts)
      tg.append(time.perf_counter() - t0)
      ts = call_script(fn)
      t0 = time.perf_counter()
      tim: dict = {}
      s = schedule(*ts, timings=tim)
      progs = {}
      for p in ("hcqdsl", "tinygrad"):
        t1 = time.perf_counter()
        progs[p] = program(s, p)
        format_program(progs[p])
        pl[p].append(time.perf_counter() - t1)
      # `hcqdsl emit` (default planner) = schedule + run + collect + the hcqdsl planner + format
      em.append(time.perf_counter() - t0 - pl["tinygrad"][-1])
      own.append(tim["total"] - tim["tinygrad"] + pl["hcqdsl"][-1])
      tgin.append(tim["tinygrad"])
    def m(x): return min(x) * 1e3  # best of N: the machine is shared, noise only ever adds
    print(f"| {name} | {len(s.cmds)} | {m(tg):.1f} | {m(em):.1f} | {100 * (m(em) - m(tg)) / m(tg):+.0f}% | "
          f"{m(pl['hcqdsl']):.1f} / {m(pl['tinygrad']):.1f} | {100 * min(own) / min(tgin):.0f}% |")
    table.append((name, stats(progs["hcqdsl"]), stats(progs["tinygrad"])))
  print()
  print("| workload | planner | queues | waits (epoch) | host waits | signal writes (host) | signals | check warnings |")
  print("| --- | --- | --- | --- | --- | --- | --- | --- |")
  for name, h, t in table:
    for p, st in (("hcqdsl", h), ("tinygrad", t)):
      print(f"| {name} | {p} | {st['queues']} | {st['waits']} ({st['epochs']}) | {st['host_waits']} | "
            f"{st['signal_writes']} ({st['host_writes']}) | {st['signals']} | {st['warnings']} |")
  sys.stdout.flush()
  os._exit(0)  # tinygrad's atexit device teardown is noisy with several CPU devices

if __name__ == "__main__": main()
