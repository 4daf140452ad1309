"""Encode the same 100k operations with hcqdsl's AMD encoders and with tinygrad's AMDComputeQueue/AMDCopyQueue (on the
test stand-in device); print both rates and the ratio, and check the dwords are identical.
  python benchmarks/encode.py [--n 100000] [--target gfx1100]"""
import argparse, os, random, struct, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from amd_standin import StandinDevice, signal, buf, program, args_state, compute_queue, copy_queue  # noqa: E402
from hcqdsl.amd import pm4, sdma  # noqa: E402

def ops(n: int, seed: int = 0):
  """(engine, op, args): 70% compute (wait/signal/exec/barrier/timestamp), 30% copy (wait/signal/copy/timestamp)."""
  rng = random.Random(seed)
  out = []
  for _ in range(n):
    a, v = rng.randrange(0x1000, 1 << 47, 16), rng.randrange(1 << 32)
    if rng.random() < 0.7:
      op = rng.choices(("wait", "signal", "exec", "barrier", "timestamp"), (35, 35, 15, 10, 5))[0]
      out.append(("compute", op, (a, v, rng.randrange(1, 64), rng.randrange(1, 256))))
    else:
      op = rng.choices(("wait", "signal", "copy", "timestamp"), (35, 35, 25, 5))[0]
      out.append(("copy", op, (a, v, rng.randrange(1, 1 << 20))))
  return out

PROG, RSRC, KARGS = 0x7000_0000_0100, (0x11, 0x22, 0x33), 0x6000_0000_0000

def run_hcqdsl(work, arch, dev):
  e, s = pm4.encoder(arch), sdma.encoder(arch)
  c, x = [], []
  user = (KARGS & 0xFFFFFFFF, KARGS >> 32)
  tmp, scr = dev.tmpring_size, dev.scratch.va_addr
  for eng, op, a in work:
    if eng == "compute":
      if op == "wait": e.wait(c, a[0], a[1])
      elif op == "signal": e.signal(c, a[0], a[1])
      elif op == "exec": e.exec(c, PROG, *RSRC, tmp, scr, user, (a[2], 1, 1), (a[3], 1, 1), True)
      elif op == "barrier": e.barrier(c)
      else: e.timestamp(c, a[0] + 8)
    else:
      if op == "wait": s.wait(x, a[0], a[1])
      elif op == "signal": s.signal(x, a[0], a[1])
      elif op == "copy": s.copy(x, a[0], a[0] + (1 << 40), a[2])
      else: s.timestamp(x, a[0] + 8)
  return struct.pack(f"<{len(c)}I", *c), struct.pack(f"<{len(x)}I", *x)

def run_tinygrad(work, dev):
  cq, xq = compute_queue(dev), copy_queue(dev)
  prg, st = program(dev, PROG, *RSRC), args_state(KARGS)
  for eng, op, a in work:
    if eng == "compute":
      if op == "wait": cq.wait(signal(a[0]), a[1])
      elif op == "signal": cq.signal(signal(a[0]), a[1])
      elif op == "exec": cq.exec(prg, st, (a[2], 1, 1), (a[3], 1, 1))
      elif op == "barrier": cq.memory_barrier()
      else: cq.timestamp(signal(a[0]))
    else:
      if op == "wait": xq.wait(signal(a[0]), a[1])
      elif op == "signal": xq.signal(signal(a[0]), a[1])
      elif op == "copy": xq.copy(buf(a[0]), buf(a[0] + (1 << 40)), a[2])
      else: xq.timestamp(signal(a[0]))
  return struct.pack(f"<{len(cq._q)}I", *cq._q), struct.pack(f"<{len(xq._q)}I", *xq._q)

def best(fn, reps):
  ts = []
  for _ in range(reps):
    st = time.perf_counter()
    r = fn()
    ts.append(time.perf_counter() - st)
  return min(ts), r

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--n", type=int, default=100_000)
  ap.add_argument("--target", default="gfx1100")
  ap.add_argument("--reps", type=int, default=3)
  a = ap.parse_args()
  dev = StandinDevice(a.target)
  work = ops(a.n)
  # signal objects are built inside the tinygrad loop (tinygrad needs one per call); their cost is measured apart
  t_sig, _ = best(lambda: [signal(x[2][0]) for x in work], a.reps)
  t_ours, ours = best(lambda: run_hcqdsl(work, a.target, dev), a.reps)
  t_tg, theirs = best(lambda: run_tinygrad(work, dev), a.reps)
  assert ours == theirs, "hcqdsl and tinygrad dwords differ"
  t_tg_net = t_tg - t_sig
  print(f"target {a.target}: {a.n} operations, {(len(ours[0]) + len(ours[1])) // 4} dwords, identical")
  print(f"hcqdsl:   {a.n / t_ours:12,.0f} ops/s  ({t_ours * 1e3:.1f} ms)")
  print(f"tinygrad: {a.n / t_tg_net:12,.0f} ops/s  ({t_tg_net * 1e3:.1f} ms, excluding {t_sig * 1e3:.1f} ms building signal objects)")
  print(f"ratio:    {t_tg_net / t_ours:.2f}x")

if __name__ == "__main__": main()
