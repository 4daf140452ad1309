"""hcqdsl emit: tinygrad workloads (examples/tinygrad) -> .hcq that checks clean, compiles for every target, and
reproduces tinygrad's numbers under random interleavings; every wait the hcqdsl planner emits is needed."""
import os, pathlib, subprocess, sys
import attrs, pytest
import numpy as np
os.environ.setdefault("DEV", "CPU")
from hcqdsl.ir import Wait, Queue
from hcqdsl import parse
from hcqdsl.lang.format import format_program
from hcqdsl.check import check
from hcqdsl.vendors import compile_program
from hcqdsl import emit as E
from hcqdsl.tinygrad.amdcode import amd_code_unavailable
sys.path.insert(0, str(pathlib.Path(__file__).parent))
import emit_sim
from emitted import EX, SCHEDULES, PLANNERS, scheduled

ROOT = pathlib.Path(__file__).resolve().parent.parent

def cases():
  return [pytest.param(w, p, marks=[pytest.mark.slow] if slow else [], id=f"{w}-{p}")
          for w, (_, slow) in SCHEDULES.items() for p in PLANNERS]

def errors(prog): return [d for d in check(prog, launches=2) if d.severity == "error"]

@pytest.mark.parametrize("name,planner", cases())
def test_checks_clean_and_compiles(name, planner):
  prog, text = scheduled(name, planner)
  assert not errors(prog), "\n".join(f"{d.code}: {d.message}" for d in errors(prog))
  assert format_program(prog) == text  # emitted text is already formatted
  for target in ("gfx942", "gfx1100", "gfx1201"): compile_program(prog, target)
  if planner == "hcqdsl":  # the hcqdsl planner is clean of warnings too (no redundant waits, barriers where needed)
    assert not check(prog, launches=2), [d.message for d in check(prog, launches=2)]

@pytest.mark.parametrize("name,planner", cases())
def test_reproduces_tinygrad(name, planner):
  prog, _ = scheduled(name, planner)
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
  prog, _ = scheduled(name, planner)
  run = _runtime()
  for seed in range(10):
    res = run(prog, seed=seed)
    assert res.hang is None and res.fault is None, f"seed {seed}: {res.hang or res.fault}"
    # the runtime's own `expect` verdicts (`~=` is numpy.allclose with its defaults): C kernels are compiled with
    # tinygrad's CPU flags (-march=native: the same FMA contractions), so tinygrad's values hold without extra slack
    assert len(res.expects) == len(prog.expects), f"seed {seed}"
    assert all(e.ok for e in res.expects), f"seed {seed}: " + "; ".join(f"line {e.line}: {e.message}" for e in res.expects if not e.ok)

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
  prog, _ = scheduled(name, planner)
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

SCRIPT_ERRORS = [  # (script text, function, exit code, exact stderr): the script's failure is 1, a script that cannot
                   # be loaded or returns no tensors 2 (issue 31: as capture and sanitize say it)
  ("from tinygrad import Tensor\ndef main():\n  a = Tensor.ones(4)\n  return a.reshape(3)\n", "main", 1,
   "hcqdsl: error: bad.py:4: the script failed: ValueError: size mismatch, can't reshape ((4,)) -> ((3,))"),
  ("def main():\n  return 1 / 0\n", "main", 1, "hcqdsl: error: bad.py:2: the script failed: ZeroDivisionError: division by zero"),
  ("import nonexistent_module_xyz\n", "main", 1,
   "hcqdsl: error: bad.py:1: importing the script failed: ModuleNotFoundError: No module named 'nonexistent_module_xyz'"),
  ("def main():\n  return 1\n", "other", 2, "hcqdsl: error: bad.py: no function `other`"),
  ("def main():\n  return 1\n", "main", 2, "hcqdsl: error: the function must return tensors, got int `1`"),
  ("import sys\ndef main():\n  sys.exit(5)\n", "main", 1, "hcqdsl: error: bad.py:3: the script exited with status 5"),
  ("def main(:\n", "main", 2, "hcqdsl: error: bad.py:1:10: not a Python script: SyntaxError: invalid syntax"),
]

@pytest.mark.parametrize("text,fn,rc,want", SCRIPT_ERRORS, ids=["tinygrad", "python", "import", "missing", "not-tensors", "exit", "syntax"])
def test_cli_emit_script_errors_are_one_line(tmp_path, text, fn, rc, want):
  (tmp_path / "bad.py").write_text(text)
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "emit", f"bad.py:{fn}"], capture_output=True, text=True, cwd=tmp_path)
  assert (r.returncode, r.stdout, r.stderr.strip()) == (rc, "", want)

def test_api_emit_jit():
  from tinygrad import Tensor
  def f(x): return (x * 2 + 1).sum()
  prog = E.emit_jit(f, Tensor(np.arange(8, dtype=np.float32)))
  assert prog.expects and prog.expects[0].data.values == (64.0,)
  assert any(b.init is not None for b in prog.buffers)
  assert not errors(prog)

def test_comments_name_tinygrad_kernels():
  _, text = scheduled("matmul_sum", "hcqdsl")
  assert "exec r_8_8_8(" in text and "# r_8_8_8" in text and "kernel r_8_8_8(out data0, in data1, in data2)" in text

# ---- --amd-code: real gfx1100 code objects through tinygrad's AMD LLVM backend


def _tinygrad_amd_program(lib: bytes, name: str, va: int):
  """tinygrad's own AMDProgram for `lib`, its code placed at `va`, on the stand-in device (no GPU: allocation, copy-in
  and scratch setup are stubs)."""
  import itertools, types
  from tinygrad.runtime.ops_amd import AMDProgram
  from tinygrad.device import TinyELF
  from tinygrad.helpers import Target
  from amd_standin import StandinDevice
  d = StandinDevice("gfx1100", scratch_addr=0, tmpring_size=0)
  d.allocator = types.SimpleNamespace(alloc=lambda size, spec: types.SimpleNamespace(va_addr=va, size=size),
                                      _copyin=lambda dst, src: None, free=lambda *a: None)
  d.synchronize, d._ensure_has_local_memory = (lambda: None), (lambda n: None)
  d.iface, d.device, d.prof_prg_counter = types.SimpleNamespace(props={"lds_size_in_kb": 64}), "AMD", itertools.count()
  return d, AMDProgram(d, TinyELF(lib, name, Target("AMD", "AMDLLVM", "gfx1100"), ()))

@pytest.mark.parametrize("name", ["matmul_sum", "mlp_train"])
def test_amd_code_objects(name, tmp_path):
  """`--amd-code`: real ELF code objects next to the .hcq; compile loads each one's kernel descriptor, and the dispatch
  packets are exactly what tinygrad's AMDComputeQueue.exec builds for its own AMDProgram of the same bytes."""
  if why := amd_code_unavailable(): pytest.skip(f"optional extra: {why}")
  from hcqdsl.amd.codeobj import from_elf
  from hcqdsl.amd.targets import get_target
  from amd_standin import compute_queue, args_state
  spec, _ = SCHEDULES[name]
  out = tmp_path / f"{name}.hcq"
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "emit", f"{EX}/{spec}", "-o", str(out), "--amd-code"],
                     capture_output=True, text=True, cwd=ROOT, env={**os.environ, "DEV": "CPU"})
  assert r.returncode == 0, r.stderr
  prog = parse(out.read_text(), str(out))
  assert prog.kernels and all(k.impl.amd_code == f"{k.name}.co" and k.impl.c_source for k in prog.kernels)
  img = compile_program(prog, "gfx1100")
  t = get_target("gfx1100")
  assert all(not k["synthetic"] for k in img.kernels)
  for k in img.kernels:
    lib = (tmp_path / f"{k['name']}.co").read_bytes()
    assert lib[:4] == b"\x7fELF"
    co = from_elf(t, lib)
    assert k["prog_addr"] == k["code_addr"] + co.entry_offset and k["kd_addr"] == k["code_addr"] + co.kd_offset
    _, tp = _tinygrad_amd_program(lib, k["name"], k["code_addr"])
    assert (co.rsrc1, co.rsrc2, co.rsrc3, co.wave32) == (tp.rsrc1, tp.rsrc2, tp.rsrc3, tp.wave32)
    assert (k["prog_addr"], co.kernarg_size, co.group_segment_size, co.private_segment_size) == \
           (tp.prog_addr, tp.kernargs_segment_size, tp.group_segment_size, tp.private_segment_size)
    assert co.rsrc1 & (1 << 20)  # gfx11: PRIV set like tinygrad's CWSR workaround
  # every exec's packets == tinygrad's exec of its AMDProgram (same addresses, dims from tinygrad's AMD lowering)
  q = prog.queues[0]
  qi = img.queue(q.name)
  kargs = iter(r for r in img.regions if r.kind == "kernargs" and r.name.startswith(q.name + "."))
  n = 0
  for i, st in enumerate(q.body):
    if type(st).__name__ != "Exec": continue
    k = next(k for k in img.kernels if k["name"] == st.kernel.name)
    d, tp = _tinygrad_amd_program((tmp_path / f"{k['name']}.co").read_bytes(), k["name"], k["code_addr"])
    tq = compute_queue(d)
    tq.exec(tp, args_state(next(kargs).addr), st.grid, st.block)
    off, ln = qi.stmts[i].offset, qi.stmts[i].length
    assert qi.dwords[off:off + ln] == [x & 0xFFFFFFFF for x in tq._q], st.kernel.name
    assert st.grid and st.block  # tinygrad's AMD launch dims, written out
    n += 1
  assert n == len(q.body) - sum(type(s).__name__ != "Exec" for s in q.body)
  # the emulator runs the fresh code objects' machine code (rdna3.py), and the program's own expects hold
  from hcqdsl.runtime import run
  res = run(prog, seed=0)
  assert res.hang is None and res.fault is None and res.expects and all(e.ok for e in res.expects)

# ---- functions tinygrad users write (issue 23)

SCRIPTS = '''
import numpy as np
from tinygrad import Tensor, nn
def batchnorm():   # num_batches_tracked from a numpy scalar, as loading weights leaves it: a constant, not memory
  bn = nn.BatchNorm(4)
  bn.num_batches_tracked = Tensor(np.array(0, dtype=np.int32))
  return bn(Tensor(np.arange(32, dtype=np.float32).reshape(2, 4, 2, 2))), bn.num_batches_tracked
def realizes_its_own():   # as examples/gpt2.py's forward: the result is realized inside
  return (Tensor(np.arange(8, dtype=np.float32)) * 2).realize()
X = Tensor([1.0, 2.0]).realize()
def already_realized(): return X
'''

def _cli_emit(tmp_path, fn):
  (tmp_path / "s.py").write_text(SCRIPTS)
  out = tmp_path / f"{fn}.hcq"
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "emit", f"{tmp_path}/s.py:{fn}", "-o", str(out)], capture_output=True,
                     text=True, env={**os.environ, "DEV": "CPU"})
  return r, out

@pytest.mark.parametrize("fn,values", [("batchnorm", None), ("realizes_its_own", [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0])])
def test_functions_users_write_emit_and_run(tmp_path, fn, values):
  r, out = _cli_emit(tmp_path, fn)
  assert r.returncode == 0, r.stderr
  prog = parse(out.read_text(), str(out))
  assert prog.expects and not errors(prog)
  from hcqdsl.runtime import run
  res = run(prog, launches=1)
  assert res.ok and all(e.ok for e in res.expects)
  if values: assert list(prog.expects[0].data.values) == values

def test_already_realized_is_a_clear_error(tmp_path):
  r, out = _cli_emit(tmp_path, "already_realized")
  assert r.returncode == 2 and r.stderr == ("hcqdsl: error: the function returned tensors that are already realized, and realized "
                                            "nothing while it ran: nothing to emit (return the computation that makes them)\n")
  assert not out.exists()
