"""Parse speed. Two tables:

1. scaling: programs of 10k, 100k and 1M statements written one a line (what `fmt` prints): statements/second for
   the parser, parser + static checks, the lark grammar alone (the anchor, on the smaller sizes) and format.
2. layouts: the same 100k statements in every layout — one a line, `;` two a line, whole blocks on a line, comments
   everywhere, compact spacing and tabs, data lists and `expect`s, kernels with C-source strings, all of these at
   once. For each: statements/second, the time relative to the same program written one a line (`fmt`'s output of
   it: the target is ≤ 1.5x), and the lark grammar alone on a tenth of it (what these layouts took before the fast
   path covered them). Then 1M-value data lists.

3. with `--check N`: the scanner alone (CPU time) on `check_scaling.py --cli`'s N-statement program (what issue 13's
   `hcqdsl check` target parses), and with `--vs REV` the scanner of git revision REV on the same text, interleaved.

  python benchmarks/parse.py [--sizes 10000,100000,1000000] [--grammar-max 100000] [--layout-size 100000]
  python benchmarks/parse.py --sizes '' --layout-size 0 --check 1000000 --vs main
"""
from __future__ import annotations
import argparse, os, random, subprocess, sys, time, types
import hcqdsl.lang.scan
from hcqdsl.lang.parse import parse_syntax
from hcqdsl.lang.format import format_program
from hcqdsl.check.static import check_static

def statements(n: int, queues: int = 16, seed: int = 0) -> list:
  """n varied statements (waits, signals, execs, copies, barriers, epochs) over `queues` queues: [(header, [stmt])]."""
  rng = random.Random(seed)
  per = n // queues
  out = []
  for q in range(queues):
    eng = "compute" if q % 2 == 0 else "copy"
    body = []
    for i in range(per):
      r = rng.random()
      if r < 0.3: body.append(f"wait s{rng.randrange(queues)} >= kick + {rng.randrange(1000)}")
      elif r < 0.55: body.append(f"signal s{q} = kick + {i}")
      elif eng == "compute" and r < 0.85:
        a = rng.randrange(0, 1 << 19, 256)
        body.append(f"exec k3(b{rng.randrange(32)}[{a}:{a + 256}], b{rng.randrange(32)}, b{rng.randrange(32)}) grid ({rng.randrange(1, 64)}, 1, 1)")
      elif eng == "copy" and r < 0.85:
        a, c = rng.randrange(0, 1 << 19, 64), rng.randrange(0, 1 << 19, 64)
        body.append(f"copy b{rng.randrange(32)}[{a}:{a + 4096}] <- b{rng.randrange(32)}[{c}:{c + 4096}]")
      elif r < 0.95: body.append("barrier")
      else: body.append("epoch")
    out.append((f"queue q{q} {eng} on g{q % 8}", body))
  return out

_C = '"""\nvoid k3(float *c, const float *a, const float *b) {\n  int i = threadIdx_x;  // {braces}; and # signs\n  c[i] = a[i] + b[i];\n}\n"""'

def render(blocks, layout: str = "line", devices: int = 8, queues: int = 16) -> str:
  rng = random.Random(1)
  data = layout in ("data", "all")
  decls = [f"device g{d} = AMD:{d} gfx1100" for d in range(devices)]
  def init(i): return f" = u32 [{', '.join(str(rng.randrange(1 << 32)) for _ in range(2048))}]" if data and i < 8 else ""
  decls += [f"buffer b{i} on g{i % devices} size 1M" + init(i) for i in range(32)]
  decls += [f"signal s{i} on g{i % devices}" for i in range(queues)]
  decls += ["var kick"]
  k3 = f"kernel k3(out c, in a, in b) = builtin add<f32> c {_C} amd \"k3.co\""
  decls += [k3 if layout in ("strings", "all") else "kernel k3(out c, in a, in b)",
            "kernel k1(inout a)"]
  if data: decls += [f"expect b{i}[0:64] ~= f32 [{', '.join(repr(rng.uniform(-1, 1)) for _ in range(16))}]" for i in range(8)]
  if layout in ("line", "data", "strings"):
    return "\n".join(decls + [f"{h} {{\n" + "".join(f"  {s}\n" for s in body) + "}" for h, body in blocks]) + "\n"
  if layout == "semicolon":
    lines = ["; ".join(decls[i:i + 2]) for i in range(0, len(decls), 2)]
    for h, body in blocks:
      lines.append(h + " {")
      lines += ["  " + "; ".join(body[i:i + 2]) for i in range(0, len(body), 2)]
      lines.append("}")
    return "\n".join(lines) + "\n"
  if layout == "block":
    return "\n".join(decls + [f"{h} {{ {'; '.join(body)} }}" for h, body in blocks]) + "\n"
  if layout == "comments":
    lines = [f"{d}  # declaration {i}" for i, d in enumerate(decls)]
    for h, body in blocks:
      lines.append(f"# the queue\n{h} {{  # opens")
      for i, s in enumerate(body):
        if i % 4 == 0: lines.append(f"  # step {i}")
        lines.append(f"  {s}  # {i}")
      lines.append("  # done\n}  # closes")
    return "\n".join(lines) + "\n# end\n"
  if layout == "compact":
    def pack(s): return s.replace(" >= ", ">=").replace(" = ", "=").replace(" + ", "+").replace(", ", ",").replace(" <- ", "<-")
    return "\n".join(map(pack, decls)) + "\n" + "\n".join(f"{h}{{\n" + "".join(f"\t{pack(s)}\n" for s in body) + "}" for h, body in blocks) + "\n"
  if layout == "all":
    lines = ["; ".join(decls[i:i + 2]) + "  # two" for i in range(0, len(decls), 2)]
    for h, body in blocks:
      lines.append(f"{h} {{ {body[0]}; {body[1]}  # opens")
      lines += ["  " + "; ".join(body[i:i + 3]) + f"  # {i}" for i in range(2, len(body), 3)]
      lines.append("}  # closes")
    return "\n".join(lines) + "\n"
  raise ValueError(layout)

LAYOUTS = {"line": "one a line", "semicolon": "`;` two a line", "block": "block on a line", "comments": "comments everywhere",
           "compact": "compact spacing, tabs", "data": "data lists + expect", "strings": "strings (C sources)",
           "all": "all of these at once"}

def seconds(fn, text: str, repeat: int) -> float:
  best = float("inf")
  for _ in range(repeat):
    t = time.process_time()
    fn(text)
    best = min(best, time.process_time() - t)
  return best

def fast(text: str):
  prog = hcqdsl.lang.scan.scan(text, "bench.hcq")
  assert prog is not None, "the fast path gave up"
  return prog

def grammar_only(text: str):
  orig = hcqdsl.lang.scan.scan
  hcqdsl.lang.scan.scan = lambda t, f, clean=False: None
  try: return parse_syntax(text, "bench.hcq")
  finally: hcqdsl.lang.scan.scan = orig

def scaling(sizes, grammar_max: int):
  print(f"{'statements':>11} {'parse stmt/s':>13} {'+static stmt/s':>15} {'grammar stmt/s':>15} {'ratio':>6} {'format stmt/s':>14}")
  for n in sizes:
    text = render(statements(n))
    prog, diags = parse_syntax(text, "bench.hcq")
    assert prog is not None and not diags and hcqdsl.lang.scan.scan(text, "bench.hcq") is not None
    repeat = 3 if n <= 100000 else 1
    f = n / seconds(lambda t: parse_syntax(t, "bench.hcq"), text, repeat)
    slow = n / seconds(grammar_only, text, 1) if n <= grammar_max else float("nan")
    full = n / seconds(lambda t: check_static(parse_syntax(t, "bench.hcq")[0]), text, repeat)
    fmt = n / seconds(lambda _: format_program(prog), text, repeat)
    ratio = f"{f / slow:>5.1f}x" if slow == slow else f"{'-':>6}"
    slow_s = f"{slow:>15,.0f}" if slow == slow else f"{'-':>15}"
    print(f"{n:>11} {f:>13,.0f} {full:>15,.0f} {slow_s} {ratio} {fmt:>14,.0f}")

def layouts(n: int, grammar: bool):
  blocks, small = statements(n), statements(n // 10)
  print(f"\nlayouts, {n:,} statements: fast path vs the same program one a line (fmt's output), and the grammar alone on {n // 10:,}")
  print(f"{'layout':<24} {'stmt/s':>10} {'vs one a line':>14} {'grammar stmt/s':>15} {'fast/grammar':>13}")
  worst = 0.0
  for key, name in LAYOUTS.items():
    text = render(blocks, key)
    base = format_program(fast(text))
    assert fast(base) == fast(text) and (key == "line" or base != text)
    t = tb = float("inf")
    for _ in range(5):   # interleaved, best of 5 each: the shared box's load drifts between the two alike
      t, tb = min(t, seconds(fast, text, 1)), min(tb, seconds(fast, base, 1))
    worst = max(worst, t / tb)
    g = f"{n // 10 / seconds(grammar_only, render(small, key), 1):>15,.0f}" if grammar else f"{'-':>15}"
    ratio = f"{(n / t) / float(g.replace(',', '')):>12.1f}x" if grammar else f"{'-':>13}"
    print(f"{name:<24} {n / t:>10,.0f} {t / tb:>13.2f}x {g} {ratio}")
  print(f"worst layout vs one a line: {worst:.2f}x")

def big_lists():
  rng = random.Random(2)
  print("\n1M-value data lists (one buffer):")
  for dtype, vals in (("u32", [str(rng.randrange(1 << 32)) for _ in range(1_000_000)]),
                      ("f32", [repr(rng.uniform(-1e3, 1e3)) for _ in range(1_000_000)])):
    text = f"device g = AMD:0\nbuffer b on g size 4M = {dtype} [{', '.join(vals)}]\n"
    t = seconds(fast, text, 3)
    print(f"  {dtype}: {t:.3f} s ({len(text) / t / 1e6:.0f} MB/s)")

def scanner_at(rev: str):
  """`hcqdsl.lang.scan.scan` as of git revision `rev`, loaded beside this tree's (same package, same IR)."""
  root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
  src = subprocess.run(["git", "show", f"{rev}:hcqdsl/lang/scan.py"], cwd=root, capture_output=True, text=True, check=True).stdout
  mod = types.ModuleType(f"hcqdsl.lang._scan_{rev}")
  mod.__package__ = "hcqdsl.lang"
  exec(compile(src, f"{rev}:hcqdsl/lang/scan.py", "exec"), mod.__dict__)
  return mod.scan

def check_program(n: int, rev):
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  from check_scaling import cli_text
  text = cli_text(n)
  runs = [("this tree", hcqdsl.lang.scan.scan)] + ([(rev, scanner_at(rev))] if rev else [])
  best = {k: float("inf") for k, _ in runs}
  for _ in range(2 if n > 100000 else 5):   # interleaved: the shared box's load drifts between them alike
    for k, fn in runs:
      t = time.process_time()
      prog = fn(text, "bench.hcq")
      best[k] = min(best[k], time.process_time() - t)
      assert prog is not None
      del prog
  print(f"\nscan of check_scaling --cli's {n:,}-statement program ({len(text) / 1e6:.0f} MB), CPU s, best of runs:")
  for k, _ in runs: print(f"  {k:<10} {best[k]:.2f} s ({n / best[k]:,.0f} stmt/s)")
  if rev: print(f"  {rev} / this tree: {best[rev] / best['this tree']:.2f}x")

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--sizes", default="10000,100000,1000000")
  ap.add_argument("--grammar-max", type=int, default=100000, help="largest size to time the lark grammar on")
  ap.add_argument("--layout-size", type=int, default=100000)
  ap.add_argument("--no-grammar", action="store_true", help="skip timing the grammar on each layout")
  ap.add_argument("--check", type=int, default=0, help="time the scanner on check_scaling's N-statement CLI program")
  ap.add_argument("--vs", default=None, help="with --check: also the scanner of this git revision")
  a = ap.parse_args()
  if a.sizes: scaling(list(map(int, a.sizes.split(","))), a.grammar_max)   # --sizes '': the layouts only
  if a.layout_size:
    layouts(a.layout_size, not a.no_grammar)
    big_lists()
  if a.check: check_program(a.check, a.vs)

if __name__ == "__main__": main()
