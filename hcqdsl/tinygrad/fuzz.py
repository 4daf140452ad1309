"""`hcqdsl fuzz`: random multi-device tinygrad programs, each sanitized and its findings confirmed on tinygrad's mock
GPU, failing ones shrunk, findings grouped by cause (docs/fuzz.md). In the spirit of tinygrad's own
test/external/fuzz_graph.py (random kernels and copies across devices, graphed, compared with the ungraphed run), but
written against tinygrad 0.14's Tensor/TinyJit API, as users write programs: shards on several axes, copies between
devices, slices of JIT inputs, `assign` to state, reductions, matmuls, realize boundaries, memory freed and reused,
a symbolic var.

Each program is generated from (seed, index) alone, so a campaign is reproducible. For each program and path (classic
HCQ, hcq2, the mock NV GPU): `hcqdsl sanitize --confirm --format json` of it; what it reads back on the mock with no
forced order against tinygrad's CPU device (does tinygrad compute right here?); the findings' confirmations. A
finding is grouped by its cause: its code, whose code should have ordered it (the what-to-do: HCQGraph's
`_resolve_deps`, the eager path, hcq2's planner) and what its two commands are (a kernel, a copy, on one device or
across two)."""
from __future__ import annotations
import json, os, pathlib, random, subprocess, sys, time
from typing import Callable, Optional
import attrs

__all__ = ["generate", "Campaign", "ProgramResult", "PATHS", "cause_of", "shrink", "summary"]

PATHS = {"classic": {"DEV": "MOCKKFD+AMD"}, "hcq2": {"DEV": "MOCKKFD+AMD", "HCQ2": "1", "HCQ_RUNTIME_DEV": "PYTHON"},
         "nv": {"DEV": "MOCK+NV"}}

# ---------------------------------------------------------------- programs

ROWS, COLS = 12, 24   # divisible by 2, 3 and 4 devices on both axes

class _Gen:
  """One random program: a TinyJit step (or eager realizes) over several devices, called with new inputs. A tensor's
  placement is tracked: one device (`one`), replicated over all (`rep`), sharded on axis 0 or 1."""
  def __init__(self, rng: random.Random):
    self.r = rng
    self.ndev = rng.choice((2, 2, 3, 4))

  def expr(self, x: str, place: str, depth: int) -> tuple:
    """An expression over tensor `x` (shape (ROWS, COLS)) placed at `place`, and where it ends up."""
    r = self.r
    for _ in range(depth):
      ops = ["add", "mul", "relu", "contiguous", "realize"]
      if place == "one": ops += ["to", "shard", "shard", "slice", "replicate", "matmul"]
      elif place == "rep": ops += ["matmul"]
      op = r.choice(ops)
      if op == "add": x = f"({x} + {r.choice((1, 2, 0.5))})"
      elif op == "mul": x = f"({x} * {r.choice((2, 3, -1))})"
      elif op == "relu": x = f"{x}.relu()"
      elif op == "contiguous": x = f"{x}.contiguous()"
      elif op == "realize": x = f"{x}.contiguous().realize()"
      elif op == "to": x = f"{x}.to(devs[{r.randrange(self.ndev)}])"
      elif op == "shard": x, place = f"{x}.shard(devs, axis={(a := r.choice((0, 1)))})", str(a)
      elif op == "replicate": x, place = f"{x}.to(devs)", "rep"
      elif op == "matmul":   # W is sharded on its columns: the tensor-parallel layer
        x, place = (f"({x}.to(devs) @ W)" if place == "one" else f"({x} @ W)"), "1"
      elif op == "slice": x = f"{x}[:, {(k := r.choice((2, 4, 6)))}:].pad(((0, 0), (0, {k})))"   # a view
    return x, place

  def program(self, seed: int) -> str:
    r, n = self.r, self.ndev
    state = r.random() < 0.5
    jit = r.random() < 0.8
    x, place = "x", "one"
    pick, sharded_input = r.random(), False
    # how the step first uses its input: views of a JIT input are what TinyJit must replace on every call
    if pick < 0.2: x, place = f"x.shard(devs, axis={(a := r.choice((0, 1)))})", str(a)   # a shard of the JIT input
    elif pick < 0.35: x = "x[1:].pad(((0, 1), (0, 0)))"                              # a slice of the JIT input
    elif pick < 0.5: x, place = "(x.to(devs) @ W)", "1"                              # the tensor-parallel layer of the input
    elif pick < 0.6:                                                                 # a copy of a slice of the input
      k = r.choice((2, 4, 6))
      x = f"x[{k}:].to(devs[{r.randrange(1, n)}]).pad((({k}, 0), (0, 0)))"
    elif pick < 0.7: x, place, sharded_input = "x", "0", True                        # an input sharded by the caller
    body = []
    y, p1 = self.expr(x, place, r.randint(2, 5))
    body.append(f"y = {y}")
    if r.random() < 0.5: body.append("y = y.contiguous().realize()   # a realize boundary")
    z, p2 = self.expr("y", p1, r.randint(1, 4))
    if p2 == "one": z, p2 = f"({z}).to(devs)", "rep"
    body.append(f"z = ({z}).contiguous()")
    # (S and out realized together crash tinygrad 0.14's scheduler when out gathers a sharded z: docs/fuzz.md)
    if state: body += ["S.assign(S + z).realize()", "out = z.to(devs[0]).contiguous()"]
    else:
      body.append("out = z.to(devs[0]).contiguous()")
      if r.random() < 0.5: body.append("out = (out + out.sum(axis=1, keepdim=True)).contiguous()   # a reduction")
    body.append("return out.realize()")
    s_axis = None if p2 == "rep" else int(p2)
    lines = [f"# generated by hcqdsl fuzz (seed {seed}): {n} devices", "import gc", "import numpy as np",
             "from tinygrad import Tensor, TinyJit, Device", "",
             f"devs = tuple(f\"{{Device.DEFAULT}}:{{i}}\" for i in range({n}))", f"rng = np.random.default_rng({seed})",
             f"W = Tensor(rng.standard_normal(({COLS}, {COLS}), dtype=np.float32) / 4).shard(devs, axis=1).realize()"]
    if state: lines.append(f"S = Tensor(np.zeros(({ROWS}, {COLS}), np.float32)).shard(devs, axis={s_axis}).realize()   # state")
    lines += [""] + (["@TinyJit"] if jit else []) + ["def step(x):"] + [f"  {b}" for b in body] + [""]
    where = "devs[0]" if r.random() < 0.5 else f"devs[{r.randrange(n)}]"
    make = (f"Tensor(rng.standard_normal(({ROWS}, {COLS}), dtype=np.float32)).shard(devs, axis=0)" if sharded_input else
            f"Tensor(rng.standard_normal(({ROWS}, {COLS}), dtype=np.float32), device={where})")
    lines += [f"for i in range({r.randint(3, 5)}):", f"  x = {make}.realize()", "  out = step(x)"]
    if r.random() < 0.3: lines.append("  gc.collect()   # the last call's memory back to the allocator")
    lines.append("  print(i, out.numpy().sum())")
    if state: lines.append("print([S.to(d).numpy().sum() for d in devs] if S.uop.axis is None else S.numpy().sum())   # every replica")
    return "\n".join(lines) + "\n"

def generate(seed: int, index: int) -> str:
  """Program `index` of the campaign with `seed`: the same text every time."""
  return _Gen(random.Random(seed * 1_000_003 + index)).program(seed * 1000 + index)

# ---------------------------------------------------------------- causes

def cause_of(f: dict) -> str:
  """A finding's cause, as the campaign groups them: its code, whose code should have ordered it, its two commands'
  kinds and whether they are on one device or two."""
  kinds = "/".join(sorted(c["what"].split(" ")[0] for c in f.get("commands", [])))
  devs = {c.get("device") for c in f.get("commands", [])}
  wtd = f.get("what_to_do") or ""
  owner = ("HCQGraph._resolve_deps" if "HCQGraph" in wtd else "hcq2 _finalize_batch" if "hcq2" in wtd else
           "eager path" if "eager" in wtd else "TinyJit input replacement" if f["code"] == "stale-input" else f["code"])
  return f"{f['code']}: {owner}: {kinds or '-'} {'across devices' if len(devs) > 1 else 'on one device'}"

# ---------------------------------------------------------------- a campaign

@attrs.define
class ProgramResult:
  index: int
  path: str
  file: str
  ok: bool                     # sanitize found nothing
  findings: list               # [{"code", "cause", "status", "message"}]
  right: Optional[bool]        # tinygrad's numbers on the mock equal the CPU device's (None: not compared)
  error: Optional[str]         # the program failed (an invalid program, or tinygrad's own error)
  seconds: float
  def to_json(self) -> dict: return attrs.asdict(self)

class Campaign:
  """Programs `0..programs-1` of `seed` on each path, until `seconds` have passed; results appended to `out/results.jsonl`."""
  def __init__(self, seed: int, programs: int, seconds: float, paths: list, out: pathlib.Path, env: Optional[dict] = None,
               progress: Optional[Callable] = None, confirm: bool = True):
    self.seed, self.programs, self.seconds, self.paths, self.out = seed, programs, seconds, paths, out
    self.env, self.progress, self.confirm = dict(os.environ if env is None else env), progress, confirm
    self.results: list = []

  def run(self) -> list:
    self.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    for i in range(self.programs):
      if time.perf_counter() - t0 > self.seconds: break
      text = generate(self.seed, i)
      f = self.out / f"prog_{self.seed}_{i}.py"
      f.write_text(text)
      for p in self.paths:
        res = self.one(i, p, f)
        self.results.append(res)
        with open(self.out / "results.jsonl", "a") as fh: fh.write(json.dumps(res.to_json()) + "\n")
        if self.progress is not None:
          self.progress(f"hcqdsl fuzz: program {i} on {p}: " + (f"error: {res.error}" if res.error else
                        f"{len(res.findings)} findings" + (f", numbers {'right' if res.right else 'WRONG'}" if res.right is not None else "")))
    return self.results

  def env_of(self, path: str) -> dict:
    e = {k: v for k, v in self.env.items() if k not in ("DEV", "HCQ2", "HCQ_RUNTIME_DEV", "JIT")}
    e.update(PATHS[path])
    here = str(pathlib.Path(__file__).resolve().parents[2])
    e["PYTHONPATH"] = os.pathsep.join(x for x in [here] + e.get("PYTHONPATH", "").split(os.pathsep) if x)
    return e

  def one(self, i: int, path: str, f: pathlib.Path) -> ProgramResult:
    from .confirm import Runs
    from .readback import compare
    t0 = time.perf_counter()
    env = self.env_of(path)
    args = [sys.executable, "-m", "hcqdsl", "sanitize", "--format", "json", "-q"] + (["--confirm"] if self.confirm else []) + [str(f)]
    try: p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=3600)
    except subprocess.TimeoutExpired:
      return ProgramResult(i, path, str(f), False, [], None, "sanitize took more than an hour", time.perf_counter() - t0)
    try: rep = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
      return ProgramResult(i, path, str(f), False, [], None, (p.stderr.strip().splitlines() or ["no report"])[-1][:300], time.perf_counter() - t0)
    if rep.get("error") and not rep.get("findings"):
      return ProgramResult(i, path, str(f), False, [], None, str(rep["error"])[:300], time.perf_counter() - t0)
    finds = [{"code": x["code"], "cause": cause_of(x), "status": (x.get("confirmation") or {}).get("status"), "message": x["message"][:300],
              "why": (x.get("confirmation") or {}).get("why")} for x in rep.get("findings", [])]
    right = None
    if path != "nv":   # (the mock NV GPU runs no kernels: its numbers are zeros)
      mock, cpu = Runs(f, "", [], env).run(), Runs(f, "", [], dict(env, DEV="CPU")).run()
      if not mock.get("failure") and not cpu.get("failure") and not mock.get("rc") and not cpu.get("rc"):
        right = not [d for d in compare(mock, cpu) if d.values and _far(d)]
    return ProgramResult(i, path, str(f), not finds, finds, right, None, time.perf_counter() - t0)

def shrink(results: list, out: pathlib.Path, env_of: Callable, progress: Optional[Callable] = None) -> dict:
  """For each distinct cause with a confirmed finding, its first program shrunk to a reproduction (`sanitize --reproduce`):
  cause -> {"program", "path", "test", "statements": [before, after], "failure"}."""
  done: dict = {}
  for r in results:
    for f in r.findings:
      if f["status"] != "confirmed" or f["cause"] in done: continue
      d = out / "reproductions"
      args = [sys.executable, "-m", "hcqdsl", "sanitize", "--reproduce", str(d), "--confirm-limit", "1", "--format", "json", "-q", r.file]
      try:
        p = subprocess.run(args, capture_output=True, text=True, env=env_of(r.path), timeout=7200)
        reps = json.loads(p.stdout.strip().splitlines()[-1]).get("reproductions") or []
      except (subprocess.TimeoutExpired, ValueError, IndexError): reps = []
      rep = next((x for x in reps if x.get("path")), None)
      done[f["cause"]] = {"program": r.file, "path": r.path, "test": rep["path"] if rep else None,
                          "statements": rep["statements"] if rep else None, "failure": rep["failure"] if rep else None,
                          "why": None if rep else (reps[0]["why"] if reps else "no reproduction was written")}
      if progress is not None: progress(f"hcqdsl fuzz: shrunk {r.file} for `{f['cause']}`: {done[f['cause']]['statements']}")
  return done

def _far(d) -> bool:
  """A difference beyond float rounding (the CPU device and the GPU sum in different orders)."""
  try: a, b = float(d.got), float(d.want)
  except ValueError: return True
  return abs(a - b) > 1e-3 * max(1.0, abs(a), abs(b))

def summary(results: list) -> dict:
  """The campaign's numbers: programs, findings, confirmed, causes (per path and in all)."""
  progs = {(r.index, r.path) for r in results}
  finds = [f for r in results for f in r.findings]
  causes: dict = {}
  for r in results:
    for f in r.findings:
      c = causes.setdefault(f["cause"], {"findings": 0, "confirmed": 0, "not-observed": 0, "not-tried": 0, "programs": set()})
      c["findings"] += 1
      c[f["status"] or "not-tried"] = c.get(f["status"] or "not-tried", 0) + 1
      c["programs"].add((r.index, r.path))
  return {"programs": len(progs), "findings": len(finds), "confirmed": sum(f["status"] == "confirmed" for f in finds),
          "causes": {k: dict(v, programs=len(v["programs"])) for k, v in causes.items()},
          "errors": sum(1 for r in results if r.error), "wrong": sum(1 for r in results if r.right is False),
          "unconfirmed_where_right": sum(1 for r in results if r.right and any(f["status"] != "confirmed" for f in r.findings))}
