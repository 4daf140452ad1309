"""capture + lift + check + run on tinygrad's real AMD runtime (ops_amd, HCQGraph) on tinygrad's mock GPU: each
workload (tests/mock_workloads, tinygrad's own styles) lifts, checks with no error, and `run` of the lift reproduces
tinygrad's output bytes. Skipped, naming how to enable it, where the mock GPU is not available (tests/mock_gpu.py)."""
from __future__ import annotations
import numpy as np
import pytest
import hcqdsl
from hcqdsl.lift.manifest import lift_file
from mock_gpu import needs_mock, capture, manifest

pytestmark = needs_mock

def _lift_check_run(man, out, tmp_path, min_launches: int):
  prog = lift_file(man, str(tmp_path / "lifted.hcq"))
  text = hcqdsl.format(prog)
  (tmp_path / "lifted.hcq").write_text(text)
  prog = hcqdsl.parse(text, str(tmp_path / "lifted.hcq"))
  launches = int(text.splitlines()[0].split("=")[1])
  assert launches >= min_launches, text[:2000]
  errors = [d for d in hcqdsl.check(prog, launches) if d.severity == "error"]
  assert errors == [], "\n".join(str(d) for d in errors)
  res = hcqdsl.run(prog, launches=launches)
  assert res.ok, res
  assert prog.expects, "the lift carries the outputs as expects"
  # tinygrad's output bytes are what one of the lifted buffers holds after the run
  want = np.load(out).tobytes()
  assert any(want in bytes(res.memory[b.name]) for b in prog.buffers if b.per_launch is None), "tinygrad's output is in no lifted buffer"
  return prog, text

def test_jit_new_inputs(tmp_path):
  man, out = capture("jit_inputs", tmp_path)
  m = manifest(man)
  assert m["version"] == 2 and m["devices"] == [{"name": "gpu0", "index": 0, "arch": "gfx1100", "tinygrad": "AMD"}]
  prog, text = _lift_check_run(man, out, tmp_path, 3)
  # tinygrad's kernel names, new input memory per call (rebound), per-launch values as vars, the mailbox as a comment
  assert {k.name for k in prog.kernels} >= {"E_4_4"} or all(k.name.startswith("E_") for k in prog.kernels), text
  assert any(b.per_launch == "rebound" for b in prog.buffers), text
  assert "KFD interrupt" in text and "mailbox" in text

def test_realize(tmp_path):
  man, out = capture("realize", tmp_path)
  prog, text = _lift_check_run(man, out, tmp_path, 1)
  # each kernel's code upload (AMDProgram copies its ELF into VRAM) is tied to its execs: `amd "E_4_4.co" code b_...`
  codes = {k.name: k.impl.code for k in prog.kernels}
  assert all(codes.values()) and len(set(codes.values())) == len(codes), text[:3000]
  upload = next(q for q in prog.queues for s in q.body if isinstance(s, hcqdsl.ir.Copy) and s.dst.buffer.name == codes["E_4_4"])
  runner = next(q for q in prog.queues for s in q.body if isinstance(s, hcqdsl.ir.Exec) and s.kernel.name == "E_4_4")
  # without the exec's queue waiting for the upload (and the host's synchronous copyin wait), check sees the race
  lines = text.splitlines()
  at = next(i for i, ln in enumerate(lines) if ln.startswith(f"queue {runner.name} "))
  sub = next(i for i, ln in enumerate(lines) if ln.strip() == f"submit {runner.name}")
  pre = sub - 1
  while lines[pre].strip().startswith("write kargs_"): pre -= 1   # (the host fills the kernel arguments, then submits)
  assert lines[at + 1].strip().startswith("wait ") and lines[pre].strip().startswith("wait ")
  broken = hcqdsl.parse("\n".join(ln for i, ln in enumerate(lines) if i not in (at + 1, pre)), "broken.hcq")
  races = [d for d in hcqdsl.check(broken, 1) if d.code == "race" and codes["E_4_4"] in d.message]
  assert races and upload.name in races[0].message and runner.name in races[0].message, [d.message for d in races]

@pytest.mark.slow
def test_multi_device_jit(tmp_path):
  man, out = capture("multi_device", tmp_path)
  prog, text = _lift_check_run(man, out, tmp_path, 2)
  assert [d.name for d in prog.devices] == ["gpu0", "gpu1"] and [d.index for d in prog.devices] == [0, 1]
  assert {b.device.name for b in prog.buffers if b.device} == {"gpu0", "gpu1"}

@pytest.mark.slow
def test_decode_variable(tmp_path):
  man, out = capture("decode", tmp_path)
  prog, text = _lift_check_run(man, out, tmp_path, 2)
  k = next(k for k in prog.kernels if any(p.scalar for p in k.params))
  assert [p.name for p in k.params if p.scalar] == ["start_pos"]

def test_hcq2_realize(tmp_path):
  """tinygrad's hcq2 path (HCQ2=1 HCQ_RUNTIME_DEV=PYTHON): its submitter program writes the rings; recorded there."""
  man, out = capture("realize", tmp_path, hcq2=True)
  assert manifest(man)["producer"]["path"] == "hcq2"
  _lift_check_run(man, out, tmp_path, 1)

def _repeated_host(prog):
  """The host block of the repeated launches (the default lift's `host launches 2..K+1`; the only one without clauses)."""
  return max(prog.hosts, key=lambda h: 0 if h.launches is None else (h.launches[1] or 1 << 16) - h.launches[0])

def _host_writes(prog) -> list: return [s for s in _repeated_host(prog).body if isinstance(s, hcqdsl.ir.HostWrite)]

def _launches(text: str) -> int: return int(text.splitlines()[0].split("=")[1])

@pytest.mark.slow
def test_hcq2_jit_new_inputs(tmp_path):
  """hcq2 copies every input through one staging buffer in host memory: the host's copy of each call's input into it is
  a host `write` with each launch's bytes, so `run` reproduces tinygrad's numbers."""
  man, out = capture("jit_inputs", tmp_path, hcq2=True)
  prog, text = _lift_check_run(man, out, tmp_path, 3)
  # 3 launches of the graph (the default lift: between the steps before and after them); the batch and its finalizer:
  # one ring, in ring order
  assert (2, 4) in {q.launches for q in prog.queues} and "fifo_" in text
  # (the graph's two kernels; the default lift also holds the eager call's steps, whose code tinygrad loaded apart)
  names = {k.name for k in prog.kernels}
  assert {"E_4_4", "E_4_4_2"} <= names and all(n.startswith("E_4_4") for n in names), names
  (w,) = _host_writes(prog)
  assert w.dst.buffer.name in {b.name for b in prog.buffers if b.device is None} and len({d.values for d in w.launch_inits}) == 3, text[:3000]

def _drop_guard_races(prog, text, write, launches: int) -> list:
  """The races `check` reports on the host's `write` once the host statement just before it (the host's wait that
  orders it after the copy that read the buffer's previous bytes) is deleted."""
  body = list(_repeated_host(prog).body)
  guard = body[body.index(write) - 1]
  assert isinstance(guard, hcqdsl.ir.Wait), hcqdsl.format(_repeated_host(prog))
  broken = hcqdsl.parse("\n".join(ln for i, ln in enumerate(text.splitlines(), 1) if i != guard.span.line), "broken.hcq")
  return [d for d in hcqdsl.check(broken, launches) if d.code == "race" and "the host writes" in d.message]

def test_hcq2_two_inputs(tmp_path):
  """hcq2 stages both inputs of a call through the one host staging buffer. The capture records the host's refill (its
  bytes) and the CPU device's wait for the copy that read the first input; the lift says them as host `write`s after
  that `wait`, so `run` reproduces tinygrad's output and `check` orders the refill after the first copy — without the
  wait it is a race between the host's write and that copy."""
  man, out = capture("two_inputs", tmp_path, hcq2=True)
  prog, text = _lift_check_run(man, out, tmp_path, 2)
  writes = _host_writes(prog)
  assert len(writes) == 2 and len({w.dst.buffer.name for w in writes}) == 1, text[-3000:]   # x, then y, into one buffer
  assert all(len({d.values for d in w.launch_inits}) == len(w.launch_inits) for w in writes)  # each call's own bytes
  races = _drop_guard_races(prog, text, writes[1], _launches(text))
  assert races and races[0].related and "copy0_gpu0" in races[0].message and writes[1].dst.buffer.name in races[0].message, races

@pytest.mark.slow
def test_hcq2_train_step(tmp_path):
  """The training step on hcq2: x and y staged through one host buffer in every launch; `run` of the lift ends with
  tinygrad's trained weights."""
  man, out = capture("train_step", tmp_path, hcq2=True)
  prog, text = _lift_check_run(man, out, tmp_path, 2)
  writes = _host_writes(prog)
  assert len(writes) == 2 and {d.nbytes for w in writes for d in w.launch_inits} == {4 * 8 * 4, 4 * 4 * 4}, text[-3000:]
  assert _drop_guard_races(prog, text, writes[1], _launches(text))

def test_hcq2_timestamps(tmp_path):
  """With PROFILE=1 hcq2 brackets every kernel and copy of a batch with two timestamps (`_finalize_batch`: `ts_ins[:1] +
  [call] + ts_ins[1:]`; PM4: one RELEASE_MEM of the GPU clock, SDMA: TIMESTAMP): lifted as `timestamp` statements in
  that place, into the profile buffers tinygrad reads (`ts_...`), and the lift checks and runs."""
  man, out = capture("realize", tmp_path, hcq2=True, PROFILE="1")
  prog, text = _lift_check_run(man, out, tmp_path, 1)
  work = 0
  for q in prog.queues:
    body = [s for s in q.body if not isinstance(s, (hcqdsl.ir.Wait, hcqdsl.ir.SignalWrite, hcqdsl.ir.Barrier))]
    for i, s in enumerate(body):
      if isinstance(s, (hcqdsl.ir.Exec, hcqdsl.ir.Copy)):
        work += 1
        assert isinstance(body[i - 1], hcqdsl.ir.Timestamp) and isinstance(body[i + 1], hcqdsl.ir.Timestamp), hcqdsl.format(q)
  stamps = [s for q in prog.queues for s in q.body if isinstance(s, hcqdsl.ir.Timestamp)]
  assert work == 4 and len(stamps) == 2 * work and len({s.signal.name for s in stamps}) == len(stamps), text   # 2 kernels, 2 copies
  assert all(s.signal.name.startswith("ts_") for s in stamps)
  (tmp_path / "plain").mkdir()   # without PROFILE: none
  plain = lift_file(capture("realize", tmp_path / "plain", hcq2=True)[0], str(tmp_path / "plain" / "n.hcq"))
  assert not any(isinstance(s, hcqdsl.ir.Timestamp) for q in plain.queues for s in q.body)

@pytest.mark.slow
def test_hcq2_multi_device_jit(tmp_path):
  """The two-device TinyJit on hcq2: one batch over both devices (its fences, resets and finalizers per device)."""
  man, out = capture("multi_device", tmp_path, hcq2=True)
  prog, text = _lift_check_run(man, out, tmp_path, 2)
  assert [d.name for d in prog.devices] == ["gpu0", "gpu1"] and {b.device.name for b in prog.buffers if b.device} == {"gpu0", "gpu1"}
  assert any(s.dst.start for q in prog.queues for s in q.body if isinstance(s, hcqdsl.ir.Copy)), text   # tinygrad's byte ranges

def test_hcq2_decode_variable(tmp_path):
  man, out = capture("decode", tmp_path, hcq2=True)
  prog, text = _lift_check_run(man, out, tmp_path, 2)
  k = next(k for k in prog.kernels if any(p.scalar for p in k.params))
  assert [p.name for p in k.params if p.scalar] == ["start_pos"]

@pytest.mark.slow
def test_train_step(tmp_path):
  """A TinyJit'd training step (a two-layer MLP, MSE loss, backward, SGD) on new batches: the captured graph launches
  lift, check clean, and `run` of the lift ends with tinygrad's trained weights in one of its buffers."""
  man, out = capture("train_step", tmp_path)
  prog, text = _lift_check_run(man, out, tmp_path, 2)
  assert len([s for q in prog.queues for s in q.body if isinstance(s, hcqdsl.ir.Exec)]) >= 8, text[:3000]  # forward, backward, update
  assert any(b.per_launch == "rebound" for b in prog.buffers)   # each call's batch

TWO_UPLOADS = '''
import sys
import numpy as np
from tinygrad import Tensor
a = Tensor(np.arange(16, dtype=np.float32)).realize()
b = Tensor(np.arange(16, dtype=np.float32) + 1).realize()
out = ((a * b).contiguous() + 1).numpy()
np.save(sys.argv[1], out)
'''

@pytest.mark.parametrize("nv", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["amd", "nv"])
def test_a_plain_realize_lifts_every_step(tmp_path, nv):
  """A plain realize whose two uploads look alike: the default lift covers every step — both kernels, no step left out
  (issue 37: it folded the two uploads into 2 launches of one copy, 0 execs, and warned)."""
  from mock_gpu import hcqdsl as run_hcqdsl, NV
  (tmp_path / "two.py").write_text(TWO_UPLOADS)
  r = run_hcqdsl("capture", "-o", tmp_path / "m.json", tmp_path / "two.py", tmp_path / "out.npy", **(NV if nv else {}))
  assert r.returncode == 0, r.stderr
  from cli_run import cli
  r = cli("lift", tmp_path / "m.json", "-o", tmp_path / "l.hcq", "--strict")
  assert r.returncode == 0 and "not lifted" not in r.stderr, r.stderr
  text = (tmp_path / "l.hcq").read_text()
  assert text.startswith("# hcq: launches=1\n") and text.count("\n  exec ") == 2, text[:3000]
  prog = hcqdsl.parse(text, str(tmp_path / "l.hcq"))
  assert not [d for d in hcqdsl.check(prog, 1) if d.severity == "error"]
  if not nv:   # (the mock NV GPU runs no kernels: its numbers are zeros)
    res = hcqdsl.run(prog, launches=1)
    assert res.ok and np.load(tmp_path / "out.npy").tobytes() in b"".join(bytes(res.memory[b.name]) for b in prog.buffers)

# the default lift finds what `--whole` (the run as it happened) and `--folded-only` (the repeated launches) find: every
# finding of either is one of its own (tests/lift_verdicts.py: findings compared by the capture steps their statements
# stand for); tinygrad as it is, and with bugs injected (tests/mock_workloads/buggy_*.py)
VERDICTS = [pytest.param("stale_copy", False, {}, {"stale-input"}, id="stale_copy"),
            pytest.param("buggy_graph", False, {"BUG": "dep"}, {"race"}, id="buggy_graph-dep"),
            pytest.param("buggy_graph", False, {"BUG": "barrier"}, {"visibility"}, marks=pytest.mark.slow, id="buggy_graph-barrier"),
            pytest.param("buggy_graph", False, {"BUG": "kick"}, {"deadlock", "race", "signal-race", "non-monotonic"}, marks=pytest.mark.slow,
                         id="buggy_graph-kick"),
            pytest.param("buggy_graph", False, {"BUG": "dep", "DEV": "MOCK+NV"}, {"race"}, marks=pytest.mark.slow, id="buggy_graph-dep-nv"),
            pytest.param("stale_copy", False, {"DEV": "MOCK+NV"}, {"stale-input"}, marks=pytest.mark.slow, id="stale_copy-nv"),
            pytest.param("buggy_hcq2", True, {"BUG": "dep"}, {"race"}, marks=pytest.mark.slow, id="buggy_hcq2-dep"),
            pytest.param("buggy_hcq2", True, {"BUG": "refill", "WORKLOAD": "train_step"}, {"race"}, marks=pytest.mark.slow, id="buggy_hcq2-refill"),
            pytest.param("allreduce", False, {"STALE": "1"}, {"stale-input"}, marks=pytest.mark.slow, id="allreduce-stale")]

@pytest.mark.parametrize("workload,hcq2,env,codes", VERDICTS)
def test_default_lift_finds_what_whole_and_folded_find(tmp_path, workload, hcq2, env, codes):
  from lift_verdicts import compare
  man, _ = capture(workload, tmp_path, hcq2=hcq2, **env)
  r = compare(man)
  assert {c for c, n in r["counts"]["default"].items() if n} == codes, r["counts"]
  assert r["missed"] == {"whole": [], "folded": []}, r["missed"]
  # --whole also reports, after a deadlock, what the ring's later submissions would do: the ring runs them in order,
  # which the default lift keeps and --whole does not (each submission a queue of its own)
  assert not r["after_deadlock"]["whole"] or "deadlock" in codes, r["after_deadlock"]

# what a capture loads and records beside the run (issue 39: an AMD run's capture imported ops_nv and its generated
# headers, ~15 MiB of a sanitized run's resident memory, and recorded every CPU buffer tinygrad's mock GPU allocates
# for the waves it emulates, thousands a second)
CAPTURE_FOOTPRINT = r'''
import sys, json
from tinygrad import Tensor, Device
from tinygrad.device import Buffer
from tinygrad.dtype import dtypes
import hcqdsl
finders = list(sys.meta_path)
with hcqdsl.capture() as cap:
  out = (Tensor([1.0, 2.0, 3.0]) + 1).numpy()
  cpu = Buffer("CPU", 16, dtypes.float32).ensure_allocated()
  cpu_addr = int(cpu._buf.va_addr)
  nv_loaded_inside = "tinygrad.runtime.ops_nv" in sys.modules
print(json.dumps({"nv_loaded": nv_loaded_inside, "finders_restored": sys.meta_path == finders, "out": out.tolist(),
                  "cpu_recorded": cap.find(cpu_addr) is not None, "devices": sorted(d["arch"] for d in cap.devices.values())}))
'''

@pytest.mark.parametrize("hcq2", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["classic", "hcq2"])
def test_an_amd_capture_loads_no_nv_runtime_and_records_no_cpu_buffer(tmp_path, hcq2):
  """An AMD run's capture does not import tinygrad's NV runtime (it is installed when tinygrad imports it: the NV tests
  open their device inside the capture), leaves Python's import finders as they were, and on classic HCQ records no
  buffer of tinygrad's CPU device (no AMD packet reads one; hcq2's submitter runs on a CPU-side device, so there it does)."""
  import json, subprocess, sys
  from mock_gpu import env
  (tmp_path / "s.py").write_text(CAPTURE_FOOTPRINT)
  r = subprocess.run([sys.executable, str(tmp_path / "s.py")], capture_output=True, text=True, env=env(hcq2), timeout=600)
  assert r.returncode == 0, r.stderr[-3000:]
  got = json.loads(r.stdout.strip().splitlines()[-1])
  assert got == {"nv_loaded": False, "finders_restored": True, "out": [2.0, 3.0, 4.0], "cpu_recorded": hcq2, "devices": ["gfx1100"]}, got

def test_an_nv_capture_installs_its_recorder_when_tinygrad_imports_ops_nv(tmp_path):
  """The NV recorder waits for tinygrad to import ops_nv, then records: the device opened inside the capture is there."""
  import json, subprocess, sys
  from mock_gpu import env, NV
  (tmp_path / "s.py").write_text(CAPTURE_FOOTPRINT)
  r = subprocess.run([sys.executable, str(tmp_path / "s.py")], capture_output=True, text=True, env=env(**NV), timeout=600)
  assert r.returncode == 0, r.stderr[-3000:]
  got = json.loads(r.stdout.strip().splitlines()[-1])
  assert got["nv_loaded"] and got["finders_restored"] and got["devices"] and all(a.startswith("sm_") for a in got["devices"]), got
