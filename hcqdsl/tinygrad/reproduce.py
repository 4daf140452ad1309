"""`hcqdsl sanitize --reproduce DIR`: for each confirmed finding, a standalone unittest that needs only tinygrad, in
tinygrad's test style (like tests/upstream/*.py), which fails on tinygrad as it is with wrong numbers, minimized by delta
debugging over the script's statements and loop counts (docs/sanitize.md, "Reproductions").

The test runs the script's code (its top-level statements, as the body of `program()`) on tinygrad's mock GPU with the
queue of the race's held command lagging — it runs no packet until the host waits for a signal that is not set, then one
at a time: the mechanism of tests/upstream/, which does not depend on where commands sit in the rings, so the same test
passes once tinygrad is patched — and compares every value the program reads back with `WANT`, what it reads with no lag.
A `stale-input` finding's test runs the program with TinyJit's graph and compares with what it reads with the graph off
(JIT=2). A candidate (the script with statements left out, a loop shortened) is kept when its test, generated and run,
still fails that way; each candidate costs two runs of the script (hcqdsl.tinygrad.rerun) on the mock."""
from __future__ import annotations
import ast, base64, json, os, pathlib, re, subprocess, sys, tempfile, textwrap, time
from typing import Callable, Optional
import attrs
from .confirm import place_of, Runs

__all__ = ["reproduce", "Reproduction", "statements", "ddmin", "test_source"]

MAX_TRIALS = 48   # candidates tried per finding (each: a run of the script, then its test)

@attrs.define
class Reproduction:
  """A reproduction written for a finding (or why none was)."""
  path: Optional[str]
  finding: str
  statements: tuple = (0, 0)        # the script's statements, before and after minimizing
  trials: int = 0
  failure: str = ""                 # how the written test fails on this tinygrad (its first assertion)
  why: str = ""                     # why there is none
  seconds: float = 0.0
  def to_json(self) -> dict: return attrs.asdict(self)

def statements(source: str) -> list:
  """The script's top-level statements, as source texts (an `if __name__ == "__main__":` block's body lifted out; the
  module docstring left out)."""
  tree = ast.parse(source)
  out = []
  for i, node in enumerate(tree.body):
    if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str): continue
    if isinstance(node, ast.If) and "__name__" in (ast.get_source_segment(source, node.test) or "") and not node.orelse:
      out += [_segment(source, n) for n in node.body]
    else: out.append(_segment(source, node))
  return out

def _segment(source: str, node) -> str:
  lines = source.splitlines()
  first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
  return textwrap.dedent("\n".join(lines[first - 1:node.end_lineno]))

def ddmin(items: list, test: Callable[[list], bool], budget: int) -> tuple:
  """Zeller's delta debugging: a 1-minimal sublist of `items` for which `test` holds (`test(items)` is assumed), within
  `budget` tests. Returns (the sublist, tests made)."""
  n, made = 2, 0
  while len(items) >= 2 and made < budget:
    chunk = -(-len(items) // n)
    parts = [items[i:i + chunk] for i in range(0, len(items), chunk)]
    reduced = False
    for k in range(len(parts)):
      complement = [x for j, p in enumerate(parts) if j != k for x in p]
      if made >= budget: break
      made += 1
      if complement and test(complement):
        items, n, reduced = complement, max(n - 1, 2), True
        break
    if not reduced:
      if n >= len(items): break
      n = min(len(items), 2 * n)
  return items, made

_RANGE = re.compile(r"\brange\((\d+)\)")

def shorter_loops(stmts: list) -> list:
  """Candidates with one top-level loop's `range(N)` shortened (each smaller N, smallest first)."""
  out = []
  for i, s in enumerate(stmts):
    first = s.splitlines()[0]
    if not first.startswith("for ") or (m := _RANGE.search(first)) is None: continue
    for k in range(1, int(m.group(1))):
      out.append(stmts[:i] + [s.replace(m.group(0), f"range({k})", 1)] + stmts[i + 1:])
  return out

# ---------------------------------------------------------------- the test file

_HELPERS = '''
def on_mock() -> bool:
  try: Device[Device.DEFAULT]   # (opening the device imports tinygrad's mock GPU when DEV names it)
  except Exception: return False
  return "test.mockgpu.mockgpu" in sys.modules

def record_reads(out: list, lag=None):
  """Every value the program reads back (.numpy(), .item(), .tolist(), .data(): Tensor._buffer, then the buffer's
  as_memoryview), appended to `out` as a flat numpy array; returns the function that stops recording. With `lag`
  (lag_queue's), the lagging queue catches up while the program reads (a read synchronizes: what it reads is what the
  lag made of it)."""
  orig, orig_mv, pending = Tensor._buffer, Buffer.as_memoryview, {}
  def _buffer(t):
    if lag is not None: lag.pause()
    b = orig(t)
    pending[id(b)] = t.dtype
    return b
  def as_memoryview(b, *a, **kw):
    mv = orig_mv(b, *a, **kw)
    if (dt := pending.pop(id(b), None)) is not None:
      out.append(np.frombuffer(bytes(mv), _to_np_dtype(dt) or np.uint8).copy())
      if lag is not None: lag.resume()
    return mv
  Tensor._buffer, Buffer.as_memoryview = _buffer, as_memoryview
  def restore(): Tensor._buffer, Buffer.as_memoryview = orig, orig_mv
  return restore

def lag_queue(device: str, engine: str = "compute", index: int = 0):
  """On tinygrad's mock AMD GPU: `device`'s queue (its compute queue, or copy queue `index`) runs no packet until the
  host waits for a signal that is not set, then one packet at a time (descending into indirect buffers) until it is.
  Every other queue runs as soon as it can: a legal schedule (a real GPU may be that slow, busy with earlier work)."""
  import tinygrad.runtime.autogen.amd_gpu as amd_gpu
  from tinygrad.helpers import mv_address
  from tinygrad.runtime.support.hcq import HCQSignal
  from test.mockgpu.mockgpu import drivers
  from test.mockgpu.amd.amddriver import AMDDriver
  drv = next(d for d in drivers if isinstance(d, AMDDriver))
  state = {"q": None, "running": False, "paused": False}
  def lagging():
    if state["q"] is None and device in Device._opened_devices:
      dev = Device[device]
      q = dev.__dict__.get("compute_queue") if engine == "compute" else (getattr(dev, "sdma_queues", None) or {}).get(index)
      ring = getattr(q, "ring", None)
      if ring is not None:
        addr = int(ring.addr) if hasattr(ring, "addr") else int(ring.ensure_allocated()._buf.va_addr)
        state["q"] = next((x for g in drv.gpus.values() for x in g.queues
                           if (int(x.base) if hasattr(x, "base") else mv_address(getattr(x.queue, "mv", x.queue))) == addr), None)
    return state["q"]
  def run(fn):
    if state["running"]: return False
    state["running"], gc_was = True, gc.isenabled()
    gc.disable()   # a Buffer freed inside a packet would synchronize a device from inside the mock GPU
    try: return fn()
    finally:
      state["running"] = False
      if gc_was: gc.enable()
  def others():
    lag, progress = None if state["paused"] else lagging(), True
    while progress:
      progress = False
      for g in drv.gpus.values():
        for x in g.queues:
          if x is not lag and x.executing: progress |= x.execute() > 0
  def step(q) -> bool:
    if not hasattr(q, "ib_executor"): return q.execute() > 0   # a copy queue: what it can run
    if q.ib_executor is not None:
      if step(q.ib_executor) or not q.ib_executor.executing:
        if not q.ib_executor.executing: q.ib_executor = None
        return True
      return False
    if q.rptr[0] >= q.wptr[0]: return False
    header = q.queue[q.rptr[0] % (q.size // 4)]
    n, op = (header >> 16) & 0x3FFF, (header >> 8) & 0xFF
    if op == amd_gpu.PACKET3_INDIRECT_BUFFER:
      q._next_dword()
      q._exec_indirect_buffer(n)
      return True
    wptr, q.wptr[0] = q.wptr[0], q.rptr[0] + n + 2   # one packet (a wait that does not pass makes no progress)
    try: return q.execute() > 0
    finally: q.wptr[0] = wptr
  def host_waits(pending):
    if state["running"] or state["paused"] or threading.current_thread() is not threading.main_thread(): return   # (the mock's own)
    deadline = time.perf_counter() + 30
    while pending() and time.perf_counter() < deadline:   # (another thread, the CPU device's worker, may be what it waits for)
      run(others)
      if not (lagging() is not None and run(lambda: step(lagging()))): time.sleep(0.001)
  from test.mockgpu.mockgpu import TrackedMemoryView
  saved = [(HCQSignal, "wait", HCQSignal.wait), (TrackedMemoryView, "__getitem__", TrackedMemoryView.__getitem__)]
  spins: dict = {}
  def getitem(mv, index):   # the host reading a signal it read before, unchanged, spins (hcq2's fence, a PYTHON program):
    v = saved[1][2](mv, index)   # the lagging queue runs one packet then
    if not state["running"] and not state["paused"] and isinstance(index, int) and threading.current_thread() is threading.main_thread() \
       and lagging() is not None:
      n = spins.get((id(mv), index), (None, 0))
      spins[(id(mv), index)] = (v, n[1] + 1 if n[0] == v else 0)
      if n[0] == v and n[1] >= 2:
        run(lambda: step(lagging()))
        run(others)
    return v
  TrackedMemoryView.__getitem__ = getitem
  def wait(sig, value, timeout=None):
    host_waits(lambda: sig.value < value)
    return saved[0][2](sig, value, timeout)
  HCQSignal.wait = wait
  try:
    from tinygrad.runtime.support.hcq2 import HCQ2Compiled
    saved.append((HCQ2Compiled, "_wait_signal", HCQ2Compiled._wait_signal))
    def wait2(dev, sig, value, timeout=None):
      host_waits(lambda: sig[0] < value)
      return saved[2][2](dev, sig, value, timeout)
    HCQ2Compiled._wait_signal = wait2
  except ImportError: pass
  # the mock runs where a doorbell or a signal is written: only the main thread's writes run it here (the CPU device's
  # worker thread would run the mock while it waits for it); the main thread's waits run it until they pass
  drv._emulate_execute = lambda: run(others) if threading.current_thread() is threading.main_thread() else None
  def restore():
    for cls, name, orig in saved: setattr(cls, name, orig)
    del drv._emulate_execute
    drv._emulate_execute()   # the lagging queue catches up
  def pause():
    state["paused"] = True
    run(others)
  def resume(): state["paused"] = False
  restore.pause, restore.resume = pause, resume
  return restore
'''

def _want_rows(reads: list) -> str:
  import numpy as np
  rows = []
  for r in reads:
    fmt = r.get("fmt") or "B"
    try: dt = np.dtype(fmt)
    except TypeError: dt = np.dtype("B")
    b = base64.b64decode(r["data"])
    vals = np.frombuffer(b[:len(b) - len(b) % dt.itemsize], dt)
    rows.append(f"  ({r.get('source') or ''!r}, {str(dt)!r}, {vals.tolist()!r}),")
  return "\n".join(rows)

def test_source(title: str, doc: str, body: list, reads: list, mode: str, lag: Optional[dict], run_line: str) -> str:
  """The test file: a docstring, imports, WANT (line, dtype, values per read), program() (the statements), the helpers,
  one test. `mode`: "lag" (race: the queue lags) or "graph" (stale-input: the graph's replays, WANT from JIT=2)."""
  prog = "def program():\n" + textwrap.indent("\n".join(body) or "pass", "  ") + "\n"
  against = "with no lag" if mode == "lag" else "with the graph off (JIT=2)"
  if mode == "lag":
    assert lag is not None
    test = (f'''  @unittest.skipUnless(on_mock(), "needs tinygrad's mock AMD GPU (DEV=MOCKKFD+AMD)")
  def test_lagging_queue(self):
    reads: list = []
    restore = lag_queue({lag["device"]!r}, {lag["engine"]!r}, {lag["index"]})
    stop = record_reads(reads, restore)
    try: program()
    finally:
      restore()
      stop()
    self.check(reads)
''')
  else:
    test = '''  def test_graph_replays(self):
    reads: list = []
    stop = record_reads(reads)
    try: program()
    finally: stop()
    self.check(reads)
'''
  check = '''  def check(self, reads: list):
    for i, (line, dt, want) in enumerate(WANT[:len(reads)]):
      got = reads[i]
      want = np.array(want, dt)
      bad = ~np.isclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-5, atol=1e-6, equal_nan=True) if got.shape == want.shape else None
      if bad is None or bad.any():
        first = int(np.argmax(bad)) if bad is not None else 0
        self.fail(f"read {i + 1} (`{line}`): " + (f"{int(bad.sum())} of {bad.size} values wrong, first at [{first}]: "
                  f"got {got[first]}, want {want[first]}" if bad is not None else f"{got.size} values, want {want.size}"))
    self.assertEqual(len(reads), len(WANT), "the program read back a different number of values")
'''
  return (f'"""{title}\n\n{doc}\n\nStandalone: needs only tinygrad; drop it into tinygrad\'s test/ and run\n  {run_line}"""\n'
          "import gc, sys, threading, time, unittest\nimport numpy as np\nfrom tinygrad import Tensor, Device\nfrom tinygrad.device import Buffer\n"
          "from tinygrad.dtype import _to_np_dtype\n\n"
          f"# what the program reads back, in order: (the line that reads, dtype, values) {against}\n"
          f"WANT = [\n{_want_rows(reads)}\n]\n\n{prog}{_HELPERS}\nclass TestReproduction(unittest.TestCase):\n"
          "  def setUp(self):\n    Tensor.manual_seed(0)\n    np.random.seed(0)\n\n"
          f"{check}\n{test}\nif __name__ == \"__main__\":\n  unittest.main()\n")

# ---------------------------------------------------------------- trying candidates

def _env_line(env: dict) -> str:
  keys = [k for k in ("HCQ2", "HCQ_RUNTIME_DEV", "DEV") if env.get(k)]
  return " ".join(f"{k}={env[k]}" for k in keys)

class _Trials:
  """Candidates of one finding, each written next to the script (its relative imports and paths still work), run once
  for WANT and its test once on the mock."""
  def __init__(self, script: pathlib.Path, args: list, env: dict, mode: str, lag: Optional[dict], progress: Optional[Callable]):
    self.script, self.args, self.env, self.mode, self.lag, self.progress = script, args, env, mode, lag, progress
    self.made = 0
    self.best: Optional[tuple] = None   # (statements, reads, failure) of the last candidate that reproduced

  def test(self, stmts: list) -> bool:
    self.made += 1
    src = "\n".join(stmts) + "\n"
    cand = self.script.with_name(f".hcqdsl_reduce_{os.getpid()}_{self.script.name}")
    try:
      cand.write_text(src)
      runs = Runs(cand, "", self.args, dict(self.env, **({"JIT": "2"} if self.mode == "graph" else {})))
      ref = runs.run()
      if ref.get("failure") or ref.get("rc") or not ref.get("reads"): return False
      text = test_source("candidate", "", stmts, ref["reads"], self.mode, self.lag, "")
      failure = self.run_test(text)
    finally:
      cand.unlink(missing_ok=True)
    if self.progress is not None: self.progress(f"hcqdsl sanitize --reproduce: candidate {self.made} ({len(stmts)} statements): "
                                                f"{'reproduces' if failure else 'does not'}")
    if failure is None: return False
    self.best = (stmts, ref["reads"], failure)
    return True

  def run_test(self, text: str) -> Optional[str]:
    """The first failure line of the test (an assertion about wrong numbers), or None (it passed, or failed otherwise)."""
    with tempfile.TemporaryDirectory(prefix="hcqdsl-reproduce-") as tmp:
      f = pathlib.Path(tmp) / "test_candidate.py"
      f.write_text(text)
      try:   # (in the user's working directory, as the script ran)
        p = subprocess.run([sys.executable, str(f)], capture_output=True, text=True,
                           env=dict(self.env, HCQDEV_WAIT_TIMEOUT_MS=self.env.get("HCQDEV_WAIT_TIMEOUT_MS", "10000")), timeout=1800)
      except subprocess.TimeoutExpired: return None
    m = re.search(r"^AssertionError: (read \d+ .*)$", p.stderr, re.M)
    return m.group(1) if p.returncode != 0 and m is not None else None

def reproduce(s, script, fn: str, args: list, outdir, env: Optional[dict] = None, progress: Optional[Callable] = None,
              budget: int = MAX_TRIALS) -> list:
  """A Reproduction per distinct confirmed finding of Sanitizer `s` (one per lagged queue, one for stale input)."""
  script = pathlib.Path(script)
  out = pathlib.Path(outdir)
  env = dict(os.environ if env is None else env)
  here = str(pathlib.Path(__file__).resolve().parents[2])
  env["PYTHONPATH"] = os.pathsep.join(x for x in env.get("PYTHONPATH", "").split(os.pathsep) + [here] if x)
  done: dict = {}
  res: list = []
  for f in s.findings:
    c = f.confirmation or {}
    if c.get("status") != "confirmed" or f.code not in ("race", "stale-input"): continue
    if fn:
      res.append(Reproduction(None, f.message, why="the script runs as SCRIPT.py:FN: --reproduce takes a script run as __main__"))
      break
    lag = None
    if f.code == "race":
      p = place_of(s.capture, f.commands[1]) if len(f.commands) > 1 else None
      if p is None: continue
      lag = {"device": p["device"], "engine": p["engine"], "index": p["index"]}
    key = json.dumps([f.code, lag])
    if key in done: continue
    done[key] = True
    res.append(_one(s, f, script, args, out, env, "lag" if lag else "graph", lag, progress, budget))
  return res

def _one(s, f, script: pathlib.Path, args: list, out: pathlib.Path, env: dict, mode: str, lag: Optional[dict], progress, budget: int) -> Reproduction:
  t0 = time.perf_counter()
  try: stmts = statements(script.read_text())
  except SyntaxError as e: return Reproduction(None, f.message, why=f"{script}: {e}")
  trials = _Trials(script, args, env, mode, lag, progress)
  if not trials.test(stmts):
    what = f"{lag['device']}'s {lag['engine']} queue lagging" if lag else "TinyJit's graph against JIT=2"
    return Reproduction(None, f.message, (len(stmts), len(stmts)), trials.made,
                        why=f"with {what}, the script reads back the same numbers as without: the order the finding needs is not "
                            "the one a lagging queue makes (--confirm forced it command by command)", seconds=time.perf_counter() - t0)
  ddmin(stmts, trials.test, budget)
  assert trials.best is not None
  for cand in shorter_loops(trials.best[0]):
    if trials.made >= budget: break
    if trials.test(cand): break   # (the smallest count that reproduces)
  stmts_best, reads, failure = trials.best
  name = re.sub(r"\W", "_", script.stem)
  kind = f"{f.code}_{lag['device'].replace(':', '')}_{lag['engine']}{lag['index'] if lag['engine'] == 'copy' else ''}" if lag else f.code
  path = out / f"test_{name}_{kind.replace('-', '_').lower()}.py"
  who = f.commands[1] if lag else f.commands[0]
  title = (f"{f.code}: {f.commands[0].what} and {f.commands[1].what} are not ordered" if lag and len(f.commands) > 1 else
           f"{f.code}: {f.commands[0].what} reads an earlier TinyJit call's input")
  doc = textwrap.fill(
    f"Generated by `hcqdsl sanitize --reproduce` from {script} (confirmed: {(f.confirmation or {}).get('how', '')}). "
    + (f"{lag['device']}'s {lag['engine']} queue, which runs {who.what}, lags" if lag else "The program runs with TinyJit's graph")
    + f"; what the program reads back is compared with what it reads {'with no lag' if lag else 'with the graph off (JIT=2)'}. "
    f"Minimized by delta debugging: {len(stmts)} statements of the script -> {len(stmts_best)}. "
    f"On tinygrad as it is: {failure}.", 116)
  text = test_source(title, doc, stmts_best, reads, mode, lag, f"{_env_line(env)} python -m pytest test/{path.name}")
  out.mkdir(parents=True, exist_ok=True)
  path.write_text(text)
  final = trials.run_test(text)   # the file as written fails the same way
  return Reproduction(str(path), f.message, (len(stmts), len(stmts_best)), trials.made, final or "",
                      "" if final else "the written test did not fail when run again", time.perf_counter() - t0)
