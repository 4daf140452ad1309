"""TinyJit replay (issue 12): `hcqdsl emit SCRIPT.py:FN` with FN() -> (jit_fn, calls) emits one launch per call. Each
workload checks clean over its N launches, its run on the emulator matches tinygrad's own TinyJit after N calls (several
data seeds and schedules), and removing any wait that is not reported redundant makes check fail."""
import importlib.util, os, pathlib, subprocess, sys
import attrs, pytest
import numpy as np
os.environ.setdefault("DEV", "CPU")
from hcqdsl.ir import Wait, Exec, Expr
from hcqdsl import parse
from hcqdsl.lang.format import format_program
from hcqdsl.check import check
from hcqdsl.vendors import compile_program
from hcqdsl.tinygrad.env import EmitError
from hcqdsl.tinygrad.jit import emit_jit
from hcqdsl.runtime import run
from emitted import EX, JITS, jit_module, jit_emitted

ROOT = pathlib.Path(__file__).resolve().parent.parent
def errors(prog, launches): return [d for d in check(prog, launches=launches) if d.severity == "error"]

CASES = [pytest.param(n, p, id=f"{n}-{p}") for n in JITS for p in ("hcqdsl", "tinygrad")]

@pytest.mark.parametrize("name,planner", CASES)
def test_checks_clean_and_compiles(name, planner):
  prog, n = jit_emitted(name, 0, planner), JITS[name][2]
  assert not errors(prog, n), [d.message for d in errors(prog, n)]
  if planner == "hcqdsl":  # no diagnostics at all: no wait the host's waits for the previous launch already imply
    assert not check(prog, launches=n), [d.message for d in check(prog, launches=n)]
  img = compile_program(prog)
  assert img.listed_launches == n
  # the image's patch table holds per-launch kernel-argument patches (vars, rebound addresses)
  assert any(q.mem_patches for q in img.queues)

def _output(prog):
  return next(b.name for b in prog.buffers if b.name.startswith("out"))

@pytest.mark.parametrize("name,seed", [pytest.param(n, s, id=f"{n}-seed{s}") for n in JITS for s in (0, 1)] +
                         [pytest.param(n, s, id=f"{n}-seed{s}", marks=pytest.mark.slow) for n in JITS for s in (2, 3)])
def test_run_matches_tinygrad_jit(name, seed):
  """N launches on the emulator = tinygrad's TinyJit after N calls (its own JIT, fresh state, the same data)."""
  prog, n = jit_emitted(name, seed), JITS[name][2]
  want = jit_module(name).reference(seed)
  for sched in (None, 0, 1, 2):
    res = run(prog, launches=n, seed=sched)
    assert res.ok, res.summary()
    assert len(res.expects) == len(prog.expects) >= 1
    got = res.buffer(_output(prog), "f32")[:want.size]
    np.testing.assert_allclose(got, want.reshape(-1), rtol=1e-5, atol=1e-6)
    # per launch the submitter rewrites only dwords whose value changed: some launch patches something, none all
    assert any(sum(q.patched[1:]) for q in res.queues.values())

def _without(prog, where, idx: int):
  def cut(d): return attrs.evolve(d, body=d.body[:idx] + d.body[idx + 1:])
  return attrs.evolve(prog, decls=tuple(cut(d) if d is where else d for d in prog.decls))

@pytest.mark.parametrize("name,planner", CASES)
def test_removing_a_needed_wait_is_an_error(name, planner):
  """Mutation test, as for one-launch emits (test_emit.py): the host's waits for the previous launch are needed (the
  host patches kernel arguments the previous launch reads; without them check reports the race), and so is each of the
  hcqdsl planner's data waits. Finalizer and timeline waits are the launch protocol, kept where this program's data
  would not need them; tinygrad's plan keeps waits later waits imply, but some queue wait of a multi-queue plan is
  needed."""
  prog, n = jit_emitted(name, 0, planner), JITS[name][2]
  def needed(blk, i): return bool(errors(_without(prog, blk, i), n))
  host = prog.host
  hw = [i for i, st in enumerate(host.body) if isinstance(st, Wait)]
  # with two devices, one device's wait can imply the other's (its queues wait for the other device's work)
  assert hw and any(needed(host, i) for i in hw)
  no_host_waits = attrs.evolve(host, body=tuple(st for st in host.body if not isinstance(st, Wait)))
  assert errors(attrs.evolve(prog, decls=tuple(no_host_waits if d is host else d for d in prog.decls)), n)
  res = [(q, i, st) for q in prog.queues for i, st in enumerate(q.body) if isinstance(st, Wait)]
  if planner == "hcqdsl":
    data = [(q, i, st) for q, i, st in res if (st.comment or "").startswith("# data")]
    for q, i, st in data: assert needed(q, i), f"{q.name}: `wait {st.signal.name} >= {st.value}` is not needed"
    assert data or len(prog.queues) == 1
  elif len(prog.queues) > 1: assert any(needed(q, i) for q, i, _ in res)

def test_decode_program_shape():
  prog = jit_emitted("decode")
  names = {v.name: v.values for v in prog.decls if type(v).__name__ == "Var"}
  assert names == {"start_pos": (1, 2, 3, 4, 5)}   # call 1 (start_pos 0) ran eagerly
  assert [b.per_launch for b in prog.buffers if b.per_launch] == ["rebound"]   # the new token, every call
  kernels = {k.name: k for k in prog.kernels}
  scalar_kernels = [k for k in kernels.values() if any(p.scalar for p in k.params)]
  assert scalar_kernels and all(p.mode == "i32" for k in scalar_kernels for p in k.params if p.scalar)
  execs = [st for q in prog.queues for st in q.body if isinstance(st, Exec)]
  assert all(any(isinstance(a, Expr) and a.var.name == "start_pos" for a in st.args) for st in execs
             if any(p.scalar for p in kernels[st.kernel.name].params))

def test_var_batch_has_a_rewritten_buffer():
  prog = jit_emitted("var_batch")
  kinds = sorted(b.per_launch for b in prog.buffers if b.per_launch)
  assert kinds == ["rebound", "rewritten"]

def test_cli_emit_and_launch_limit(tmp_path):
  out = tmp_path / "d.hcq"
  env = {**os.environ, "DEV": "CPU"}
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "emit", f"{EX}/jit_decode.py", "-o", str(out)],
                     capture_output=True, text=True, cwd=ROOT, env=env)
  assert r.returncode == 0, r.stderr
  assert out.read_text().startswith("# hcq: launches=5\n")
  # check, run and graph take the file's launch count
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "check", str(out)], capture_output=True, text=True)
  assert r.returncode == 0 and "over 5 launches" in r.stdout, r.stdout
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "run", str(out)], capture_output=True, text=True)
  assert r.returncode == 0 and r.stdout.rstrip().endswith("ok") and "warning" not in r.stderr, r.stdout + r.stderr
  # a var list shorter than --launches: one clear error each, no traceback
  for cmd in ("run", "check"):
    r = subprocess.run([sys.executable, "-m", "hcqdsl", cmd, "--launches", "8", str(out)], capture_output=True, text=True)
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr
    assert "error[bounds]: var `start_pos` lists 5 values, fewer than the 8 launches asked for" in r.stdout
    assert "rebound buffer `in0` lists contents for 5 launches, fewer than the 8 launches asked for" in r.stdout

def test_api():
  import hcqdsl
  mod = jit_module("decode")
  prog = hcqdsl.emit_jit(*mod.main(0, 3))
  assert {v.name: v.values for v in prog.decls if type(v).__name__ == "Var"} == {"start_pos": (1, 2)}

# ---- bad input: one clear error each

def _jit(fn):
  from tinygrad import TinyJit
  return TinyJit(fn)

def test_nothing_realized():
  from tinygrad import Tensor
  with pytest.raises(EmitError, match=r"^call 2: the JIT function realized nothing"):
    emit_jit(_jit(lambda x: x), [(Tensor.ones(4).realize(),), (Tensor.ones(4).realize(),)])

def test_one_call():
  from tinygrad import Tensor
  with pytest.raises(EmitError, match=r"^one call: TinyJit runs call 1 eagerly and captures its graph at call 2, so a replay "
                                      r"needs at least 2 calls \(the launches are calls 2..N\)$"):
    emit_jit(_jit(lambda x: x + 1), [(Tensor.ones(4).realize(),)])

def test_returned_tensors_are_realized_as_tinyjit_does():
  """TinyJit realizes what the function returns: `lambda x: x + 1` needs no .realize() of its own."""
  from tinygrad import Tensor
  prog = emit_jit(_jit(lambda x: x * 2), [(Tensor([1.0, 2.0]).realize(),), (Tensor([3.0, 4.0]).realize(),)])
  res = run(parse(format_program(prog), "r.hcq"), launches=1)
  assert res.ok and list(res.buffer(_output(prog), "f32")[:2]) == [6.0, 8.0]

def test_a_graph_that_changes_names_the_first_difference():
  from tinygrad import Tensor
  n = [0]
  def f(x):
    n[0] += 1
    return (x * n[0]).realize()    # a Python number baked into the kernel
  with pytest.raises(EmitError, match=r"^call 3 is not the graph TinyJit captured at call 2: command 1 \(E_4\) runs other code than "
                                      r"in the captured graph: a Python value that changes between calls \(not a Tensor or a bound "
                                      r"Variable\) is baked into the kernel"):
    emit_jit(f, [(Tensor.ones(4).realize(),)] * 3)
  state = {}
  def g(x):
    if len(state) == 1: state["b"] = (x + 1).realize()   # realized in call 2 only
    state.setdefault("a", 1)
    return (x * 2).realize()
  with pytest.raises(EmitError, match=r"^call 3 is not the graph TinyJit captured at call 2: it runs 1 commands, the captured graph 2 "
                                      r"\(the first missing one: `exec E_4\(buf0, in0\)`, E_4\): the function realizes something in "
                                      r"some calls only"):
    emit_jit(g, [(Tensor.ones(4).realize(),)] * 3)

def test_state_created_by_call_1():
  """Lazily created state (a cache made on the first call, as examples/gpt2.py does) is call 1's effect: the program's
  initial memory; the launches are calls 2..N and end where tinygrad's TinyJit ends."""
  from tinygrad import Tensor, TinyJit
  def make():
    state = {}
    @TinyJit
    def step(x):
      if "acc" not in state: state["acc"] = Tensor.zeros(4).contiguous().realize()
      state["acc"].assign(state["acc"] + x).realize()
      return (state["acc"] * 2).realize()
    return step, [(Tensor(np.full(4, k, np.float32)).realize(),) for k in range(1, 5)]
  jit, calls = make()
  for c in calls: want = jit(*c).numpy()
  prog = parse(format_program(emit_jit(*make())), "s.hcq")
  acc = next(b for b in prog.buffers if b.init is not None and not b.per_launch)
  assert list(acc.init.values) == [1.0] * 4    # call 1 added 1
  res = run(prog, launches=3)
  assert res.ok and list(res.buffer(_output(prog), "f32")[:4]) == list(want) == [20.0] * 4

def test_shapes_differ():
  from tinygrad import Tensor
  f = _jit(lambda x: (x + 1).realize())
  with pytest.raises(EmitError, match=r"^call 2: argument 0 is a tensor \(\(8,\), 'float', 'CPU'\), call 1's is a tensor "
                                      r"\(\(4,\), 'float', 'CPU'\): a TinyJit replays one shape"):
    emit_jit(f, [(Tensor.ones(4).realize(),), (Tensor.ones(8).realize(),)])

def test_variable_out_of_range():
  from tinygrad import Tensor, Variable
  v = Variable("n", 1, 4)
  b = v.bind(2)   # Variable.bind refuses 9: build its bound value by hand
  store = b.src[1]
  bad = b.replace(src=(b.src[0], store.replace(src=(store.src[0], store.src[1].replace(arg=9)))))
  f = _jit(lambda x, n: (x[0:n] + 1).sum().realize())
  with pytest.raises(EmitError, match=r"^call 2: variable `n` = 9 is outside its range 1\.\.4$"):
    emit_jit(f, [(Tensor.ones(4).realize(), v.bind(2)), (Tensor.ones(4).realize(), bad)])

def test_no_calls():
  with pytest.raises(EmitError, match="no calls to replay"):
    emit_jit(_jit(lambda x: x), [])

def test_host_only_call():
  from tinygrad import Tensor
  f = _jit(lambda x: Tensor(np.ones(4, np.float32) * 3).realize())
  with pytest.raises(EmitError, match=r"^call 2 runs nothing on a device \(only uploads from host memory\): nothing to replay$"):
    emit_jit(f, [(Tensor.ones(4).realize(),)] * 2)

def test_cli_bad_input_is_one_line(tmp_path):
  s = tmp_path / "bad.py"
  s.write_text("from tinygrad import Tensor, TinyJit\n"
               "def main():\n  return TinyJit(lambda x: x), [(Tensor.ones(4).realize(),)] * 2\n")
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "emit", str(s)], capture_output=True, text=True, env={**os.environ, "DEV": "CPU"})
  assert r.returncode == 2 and r.stderr == ("hcqdsl: error: call 2: the JIT function realized nothing: a TinyJit captures "
                                            "only the schedules its function realizes\n")

def test_plain_emit_with_a_bound_variable():
  """One launch of a schedule with a bound Variable: `var n = [value]`, and the kernels take it as a scalar."""
  from tinygrad import Tensor, Variable
  from hcqdsl import emit
  x = Tensor(np.arange(8, dtype=np.float32)).realize()
  n = Variable("n", 1, 8)
  prog = emit((x[0:n.bind(5)] * 2).sum().reshape(1))
  assert {v.name: v.values for v in prog.decls if type(v).__name__ == "Var"} == {"n": (5,)}
  assert any(p.scalar for k in prog.kernels for p in k.params)
  prog = parse(format_program(prog), "e.hcq")
  assert errors(prog, 1) == []
  res = run(prog, launches=1)
  assert res.ok and res.buffer(_output(prog), "f32")[0] == 20.0

def test_data_file(tmp_path):
  """Contents above --inline-max go to OUT.safetensors next to the program (tinygrad's safe_load reads it back), the
  text references them, and the program checks and runs to the same numbers from another directory."""
  out = tmp_path / "d.hcq"
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "emit", f"{EX}/jit_decode.py", "-o", str(out), "--inline-max", "16"],
                     capture_output=True, text=True, cwd=ROOT, env={**os.environ, "DEV": "CPU"})
  assert r.returncode == 0, r.stderr
  text = out.read_text()
  refs = [l for l in text.splitlines() if ' from "d.safetensors" [' in l]
  assert len(refs) >= 3 and all(l.count(",") < 5 * 16 for l in text.splitlines() if l.startswith("buffer"))
  from tinygrad.nn.state import safe_load
  st = safe_load(str(tmp_path / "d.safetensors"))
  full = parse(format_program(jit_emitted("decode")), "full.hcq")
  for b in full.buffers:
    if b.init is not None and len(b.init.values) > 16:
      np.testing.assert_array_equal(st[b.name].numpy(), np.asarray(b.init.values))
  moved = tmp_path / "elsewhere"
  moved.mkdir()
  for f in ("d.hcq", "d.safetensors"): (moved / f).write_bytes((tmp_path / f).read_bytes())
  for cmd in ("check", "run"):
    r = subprocess.run([sys.executable, "-m", "hcqdsl", cmd, "elsewhere/d.hcq"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
  (moved / "d.safetensors").unlink()
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "check", "elsewhere/d.hcq"], capture_output=True, text=True, cwd=tmp_path)
  assert r.returncode == 1 and "error[name]: cannot read data file `elsewhere/d.safetensors`: No such file or directory" in r.stdout

def test_gpt2_style_decode():
  """examples/tinygrad/gpt2_decode.py: KV caches created by call 1 (as tinygrad's examples/gpt2.py), greedy decoding
  with the token read back between calls. check and run with the file's own launch count; the last token is
  tinygrad's TinyJit's."""
  spec = importlib.util.spec_from_file_location("_gpt2_decode", EX / "gpt2_decode.py")
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  want = mod.reference(0)
  text = format_program(emit_jit(*mod.main(0)))
  prog = parse(text, "g.hcq")
  n = __import__("hcqdsl.header", fromlist=["header_launches"]).header_launches(text)
  assert n == len(want) - 1 == 5
  assert {v.name: v.values for v in prog.decls if type(v).__name__ == "Var"} == {"start_pos": (1, 2, 3, 4, 5)}
  assert errors(prog, n) == []
  res = run(prog, launches=n)
  assert res.ok and all(e.ok for e in res.expects)
  assert list(prog.expects[0].data.values) == [want[-1]]
  # the tokens fed back are tinygrad's: launch k's input is the token call k decoded
  tok = next(b for b in prog.buffers if b.per_launch == "rebound")
  assert [int(d.values[0]) for d in tok.launch_inits] == want[:-1]

def test_provenance_is_quoted_by_check():
  """Each exec and copy of a replay carries the user's line that realized it (its comment, `Node.origin`), and a race
  check finds on it names that line."""
  prog = jit_emitted("two_device")
  cmds = [st for q in prog.queues for st in q.body if type(st).__name__ in ("Exec", "Copy")]
  assert {st.origin for st in cmds} == {"jit_two_device.py:18: acc.assign(acc + a * 2 + partial).realize()",
                                        "jit_two_device.py:19: return (acc * 1).realize()"}
  q, i = next((q, i) for q in prog.queues for i, st in enumerate(q.body) if isinstance(st, Wait) and "# data" in (st.comment or ""))
  races = [d for d in check(_without(prog, q, i), launches=5) if d.code == "race"]
  assert races and "(from jit_two_device.py:1" in races[0].message

def _example(name):
  spec = importlib.util.spec_from_file_location(f"_ex_{name}", EX / f"{name}.py")
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod

@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_cnn_batchnorm_adam_data_parallel(seed):
  """examples/tinygrad/cnn_train.py (as beautiful_mnist_multigpu): Adam's and BatchNorm's state created by call 1,
  the batch drawn inside the JIT, 2 devices. check and run with the file's launch count; the loss after the last call
  is tinygrad's TinyJit's, on both devices."""
  mod = _example("cnn_train")
  want = float(mod.reference(seed, 3))
  text = format_program(emit_jit(*mod.main(seed, 3)))
  assert text.startswith("# hcq: launches=2\n")
  prog = parse(text, "cnn.hcq")
  assert len(prog.devices) == 2 and any(type(st).__name__ == "Copy" for q in prog.queues for st in q.body)
  assert not check(prog, launches=2), [d.message for d in check(prog, launches=2)]
  res = run(prog, launches=2)
  assert res.ok and len(res.expects) == 2 and all(e.ok for e in res.expects)
  assert [e.data.values[0] for e in prog.expects] == pytest.approx([want] * 2, rel=1e-6)

def test_decode_amd_code_on_the_rdna3_executor(tmp_path):
  """examples/tinygrad/jit_decode.py emitted with --amd-code (a replay with a Variable: scalar kernel arguments, a
  launch dimension over start_pos) and run on the RDNA3 executor."""
  from hcqdsl.tinygrad.amdcode import amd_code_unavailable
  if why := amd_code_unavailable(): pytest.skip(f"optional extra: {why}")
  out = tmp_path / "d.hcq"
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "emit", f"{EX}/jit_decode.py", "-o", str(out), "--amd-code"],
                     capture_output=True, text=True, cwd=ROOT, env={**os.environ, "DEV": "CPU"})
  assert r.returncode == 0, r.stderr
  prog = parse(out.read_text(), str(out))
  execs = [st for q in prog.queues for st in q.body if isinstance(st, Exec)]
  assert all(k.impl.amd_code for k in prog.kernels) and any(isinstance(g, Expr) for st in execs for g in st.grid)
  assert not [k for k in compile_program(prog, "gfx1100").kernels if k["synthetic"]]
  res = run(prog, launches=5, kernels="amd")
  assert res.ok and all(e.ok for e in res.expects), res.summary()

@pytest.mark.slow
def test_cnn_train_step_on_machine_code(tmp_path):
  """cnn_train.py with --amd-code on the RDNA3 executor: tinygrad's AMD kernels sum in other orders than its C, and
  the tolerances emit writes (tolerance.py) hold on both paths for every expect."""
  from hcqdsl.tinygrad.amdcode import amd_code_unavailable
  if why := amd_code_unavailable(): pytest.skip(f"optional extra: {why}")
  out = tmp_path / "t.hcq"
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "emit", f"{EX}/cnn_train.py", "-o", str(out), "--amd-code"],
                     capture_output=True, text=True, cwd=ROOT, env={**os.environ, "DEV": "CPU"})
  assert r.returncode == 0, r.stderr
  prog = parse(out.read_text(), str(out))
  assert all(e.rtol is not None for e in prog.expects)
  for kernels in ("amd", "c"):
    res = run(prog, launches=3, kernels=kernels)
    assert res.ok and len(res.expects) == 2 and all(e.ok for e in res.expects), (kernels, res.summary())
