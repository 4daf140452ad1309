"""Parse speed: generate programs of 10k, 100k and 1M statements, print statements/second for the parser (fast path
on formatted text), for the grammar alone on the small sizes (the anchor: lark LALR over the same text), and for
format.

  python benchmarks/parse.py [--sizes 10000,100000,1000000] [--grammar-max 100000]
"""
from __future__ import annotations
import argparse, random, time
import hcqdsl.scan
from hcqdsl.syntax import parse_syntax, format_program
from hcqdsl.static import check_static

def generate(n: int, queues: int = 16, devices: int = 8, seed: int = 0) -> str:
  """A program with n statements over `queues` queues on `devices` devices: varied waits, signals, execs, copies."""
  rng = random.Random(seed)
  out = [f"device g{d} = AMD:{d} gfx1100" for d in range(devices)]
  out += [f"buffer b{i} on g{i % devices} size 1M" for i in range(32)]
  out += [f"signal s{i} on g{i % devices}" for i in range(queues)]
  out += ["var kick", "kernel k3(out c, in a, in b)", "kernel k1(inout a)"]
  per = n // queues
  for q in range(queues):
    eng = "compute" if q % 2 == 0 else "copy"
    out.append(f"queue q{q} {eng} on g{q % devices} {{")
    for i in range(per):
      r = rng.random()
      if r < 0.3: out.append(f"  wait s{rng.randrange(queues)} >= kick + {rng.randrange(1000)}")
      elif r < 0.55: out.append(f"  signal s{q} = kick + {i}")
      elif eng == "compute" and r < 0.85:
        a = rng.randrange(0, 1 << 19, 256)
        out.append(f"  exec k3(b{rng.randrange(32)}[{a}:{a + 256}], b{rng.randrange(32)}, b{rng.randrange(32)}) grid ({rng.randrange(1, 64)}, 1, 1)")
      elif eng == "copy" and r < 0.85:
        a, c = rng.randrange(0, 1 << 19, 64), rng.randrange(0, 1 << 19, 64)
        out.append(f"  copy b{rng.randrange(32)}[{a}:{a + 4096}] <- b{rng.randrange(32)}[{c}:{c + 4096}]")
      elif r < 0.95: out.append("  barrier  # keep writes visible")
      else: out.append("  epoch")
    out.append("}")
  return "\n".join(out) + "\n"

def rate(fn, text: str, n: int, repeat: int) -> float:
  best = float("inf")
  for _ in range(repeat):
    t = time.perf_counter(); fn(text); best = min(best, time.perf_counter() - t)
  return n / best

def grammar_only(text: str):
  orig = hcqdsl.scan.scan
  hcqdsl.scan.scan = lambda t, f: None
  try: return parse_syntax(text, "bench.hcq")
  finally: hcqdsl.scan.scan = orig

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--sizes", default="10000,100000,1000000")
  ap.add_argument("--grammar-max", type=int, default=100000, help="largest size to time the lark grammar on")
  a = ap.parse_args()
  print(f"{'statements':>11} {'parse stmt/s':>13} {'+static stmt/s':>15} {'grammar stmt/s':>15} {'ratio':>6} {'format stmt/s':>14}")
  for n in map(int, a.sizes.split(",")):
    text = generate(n)
    prog, diags = parse_syntax(text, "bench.hcq")
    assert prog is not None and not diags and hcqdsl.scan.scan(text, "bench.hcq") is not None
    repeat = 3 if n <= 100000 else 1
    fast = rate(lambda t: parse_syntax(t, "bench.hcq"), text, n, repeat)
    slow = rate(grammar_only, text, n, 1) if n <= a.grammar_max else float("nan")
    full = rate(lambda t: check_static(parse_syntax(t, "bench.hcq")[0]), text, n, repeat)
    fmt = rate(lambda _: format_program(prog), text, n, repeat)
    ratio = f"{fast / slow:>5.1f}x" if slow == slow else f"{'-':>6}"
    slow_s = f"{slow:>15,.0f}" if slow == slow else f"{'-':>15}"
    print(f"{n:>11} {fast:>13,.0f} {full:>15,.0f} {slow_s} {ratio} {fmt:>14,.0f}")

if __name__ == "__main__": main()
