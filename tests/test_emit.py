"""hcqdsl emit: tinygrad workloads (examples/tinygrad) -> .hcq that checks clean, compiles for every target, and
reproduces tinygrad's numbers under random interleavings; every wait the hcqdsl planner emits is needed."""
import os, pathlib, subprocess, sys
import attrs, pytest
import numpy as np
os.environ.setdefault("DEV", "CPU")
from hcqdsl.ir import Wait, Epoch, Queue
from hcqdsl.syntax import parse, format_program
from hcqdsl.check import check
from hcqdsl.compile import compile_program
from hcqdsl import emit as E
sys.path.insert(0, str(pathlib.Path(__file__).parent))
import emit_sim

ROOT = pathlib.Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "tinygrad"
# name: (script:function, slow)
WORKLOADS = {
  "matmul_sum": ("matmul_sum.py:main", False),
  "mlp_train": ("mlp_train.py:main", False),
  "conv": ("conv.py:main", False),
  "shard2": ("shard_matmul.py:main", False),
  "shard4": ("shard_matmul.py:four", True),
  "shard8": ("shard_matmul.py:eight", True),
  "allreduce": ("allreduce.py:main", False),
  "copy_chain": ("copy_chain.py:main", False),
}
PLANNERS = ("hcqdsl", "tinygrad")
_sched: dict = {}

def emitted(name: str, planner: str):
  """(program parsed back from its text, the text); tinygrad schedules each workload once."""
  if name not in _sched:
    spec, _ = WORKLOADS[name]
    fn = E.load_function(str(EX / spec))
    _sched[name] = E.schedule(*E.call_script(fn))
  text = format_program(E.program(_sched[name], planner, name))
  return parse(text, f"{name}.{planner}.hcq"), text

def cases():
  return [pytest.param(w, p, marks=[pytest.mark.slow] if slow else [], id=f"{w}-{p}")
          for w, (_, slow) in WORKLOADS.items() for p in PLANNERS]

def errors(prog): return [d for d in check(prog, launches=2) if d.severity == "error"]

@pytest.mark.parametrize("name,planner", cases())
def test_checks_clean_and_compiles(name, planner):
  prog, text = emitted(name, planner)
  assert not errors(prog), "\n".join(f"{d.code}: {d.message}" for d in errors(prog))
  assert format_program(prog) == text  # emitted text is already formatted
  for target in ("gfx942", "gfx1100", "gfx1201"): compile_program(prog, target)
  if planner == "hcqdsl":  # the hcqdsl planner is clean of warnings too (no redundant waits, barriers where needed)
    assert not check(prog, launches=2), [d.message for d in check(prog, launches=2)]

@pytest.mark.parametrize("name,planner", cases())
def test_reproduces_tinygrad(name, planner):
  prog, _ = emitted(name, planner)
  assert prog.expects
  for seed in range(10):
    mem = emit_sim.run(prog, seed)
    assert not emit_sim.expects_ok(prog, mem), f"seed {seed}"
  emit_sim.run(prog, 0, launches=3)  # consecutive launches do not deadlock

def _runtime():
  try: from hcqdsl.runtime import run
  except ImportError: return None
  return run

@pytest.mark.skipif(_runtime() is None, reason="hcqdsl.runtime.run is not there yet")
@pytest.mark.parametrize("name,planner", cases())
def test_runtime_matches_tinygrad(name, planner):
  """The emulator runs the compiled packets; the program's `expect` lines hold tinygrad's values."""
  prog, _ = emitted(name, planner)
  run = _runtime()
  for seed in range(10):
    res = run(prog, seed=seed)
    assert res.hang is None and res.fault is None, f"seed {seed}: {res.hang or res.fault}"
    # tinygrad compiles its CPU kernels with -march=native (FMA), the emulator without: allow a few ulps beyond
    # allclose's defaults, which `~=` uses
    mem = {k: np.frombuffer(bytes(v), np.uint8) for k, v in res.memory.items()}
    assert not emit_sim.expects_ok(prog, mem), f"seed {seed}"

def _without(prog, qname: str, idx: int):
  decls = tuple(attrs.evolve(d, body=d.body[:idx] + d.body[idx + 1:]) if isinstance(d, Queue) and d.name == qname else d
                for d in prog.decls)
  return attrs.evolve(prog, decls=decls)

def needed_waits(prog):
  """(queue, index, needed) for every `wait`: needed when removing it alone makes check report an error."""
  return [(q.name, i, bool(errors(_without(prog, q.name, i)))) for q in prog.queues for i, st in enumerate(q.body)
          if isinstance(st, Wait)]

@pytest.mark.parametrize("name,planner", cases())
def test_removing_a_needed_wait_is_an_error(name, planner):
  """Mutation test. The hcqdsl planner's data waits are each needed: removing any one of them is a race (or worse).
  Its `epoch`, `wait E.timeline` and finalizer waits are the launch protocol (the device is done when its timeline says
  so), kept even where this program's data would not need them. tinygrad's plan also keeps waits that later waits
  imply; every multi-queue plan has waits whose removal check catches."""
  prog, _ = emitted(name, planner)
  res = needed_waits(prog)
  if planner == "hcqdsl":
    for qn, i, needed in res:
      st = next(q for q in prog.queues if q.name == qn).body[i]
      if (st.comment or "").startswith("# data"): assert needed, f"{qn}: `wait {st.signal.name} >= {st.value}` is not needed"
  if len(prog.queues) > 1 and any(not (st.comment or "").startswith("# finalizer") for q in prog.queues for st in q.body
                                  if isinstance(st, Wait) and not st.signal.name.endswith(".timeline")):
    assert any(n for *_, n in res)

def test_cli_emit(tmp_path):
  out = tmp_path / "s.hcq"
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "emit", f"{EX}/shard_matmul.py:main", "--devices", "2", "-o", str(out),
                      "--planner", "tinygrad"], capture_output=True, text=True, cwd=ROOT, env={**os.environ, "DEV": "CPU"})
  assert r.returncode == 0, r.stderr
  assert "device g1 = AMD:1" in out.read_text()
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "check", str(out)], capture_output=True, text=True, cwd=ROOT)
  assert r.returncode == 0, r.stdout
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "emit", f"{EX}/shard_matmul.py:four", "--devices", "2"],
                     capture_output=True, text=True, cwd=ROOT, env={**os.environ, "DEV": "CPU"})
  assert r.returncode == 2 and "more than --devices 2" in r.stderr

def test_api_emit_jit():
  from tinygrad import Tensor
  import numpy as np
  def f(x): return (x * 2 + 1).sum()
  prog = E.emit_jit(f, Tensor(np.arange(8, dtype=np.float32)))
  assert prog.expects and prog.expects[0].data.values == (64.0,)
  assert any(b.init is not None for b in prog.buffers)
  assert not errors(prog)

def test_comments_name_tinygrad_kernels():
  _, text = emitted("matmul_sum", "hcqdsl")
  assert "exec r_8_8_8(" in text and "# r_8_8_8" in text and "kernel r_8_8_8(out data0, in data1, in data2)" in text
