"""hcqdsl.tinygrad.capture() on tinygrad's own AMDComputeQueue / AMDCopyQueue, submitted through tinygrad's own _submit onto
stand-in rings (tests/amd_standin.py; no GPU): an HCQGraph-shaped two-device schedule over several launches."""
from __future__ import annotations
import json, subprocess, sys, textwrap
import pytest
from tinygrad.runtime.support.hcq import HCQSignal
import hcqdsl
from hcqdsl.tinygrad.capture import Capture
from hcqdsl.lift.manifest import lift_manifest, load_manifest
from hcqdsl import parse
from hcqdsl.lang.format import format_program
from amd_standin import Arena, AMDComputeQueue
from capture_util import hcqgraph

def _lift(man: dict) -> hcqdsl.Program:
  return parse(format_program(lift_manifest(load_manifest(man))), "captured.hcq")

def test_capture_lifts_to_hcqgraph_program():
  with Capture() as cap: hcqgraph(Arena())
  man = cap.manifest()
  assert [q["name"] for q in man["queues"]] == ["comp_gpu0", "copy0_gpu1", "comp_gpu1"]
  assert sum(h["op"] == "submit" for h in man["host"]) == 9
  text = format_program(lift_manifest(load_manifest(json.loads(json.dumps(man)))))
  prog = parse(text, "captured.hcq")
  assert text.startswith("# hcq: launches=3\n")
  # the timeline waits are recognised as `epoch`, the kick as `launch`, the timeline writes as `D.epoch`
  q0 = next(q for q in prog.queues if q.name == "comp_gpu0")
  assert [hcqdsl.lang.format.format_stmt(s) for s in q0.body][:2] == ["epoch", f"wait {q0.body[1].signal.name} >= launch"]
  assert hcqdsl.lang.format.format_stmt(q0.body[-1]) == "signal gpu0.timeline = gpu0.epoch"
  kinds = [type(s).__name__ for q in prog.queues for s in q.body]
  assert kinds.count("Exec") == 2 and kinds.count("Copy") == 1 and kinds.count("Barrier") == 1
  host = [hcqdsl.lang.format.format_stmt(s) for s in prog.host.body]
  assert host[:3] == ["wait gpu0.timeline >= gpu0.epoch - 1", "wait gpu1.timeline >= gpu1.epoch - 1",
                      "submit comp_gpu0, copy0_gpu1, comp_gpu1"]
  assert host[-1].endswith("= launch")
  errors = [d for d in hcqdsl.check(prog, 3) if d.severity == "error"]
  assert errors == []

def test_capture_catches_missing_wait():
  with Capture() as cap: hcqgraph(Arena(), drop_wait=True)
  prog = _lift(cap.manifest())
  diags = hcqdsl.check(prog, 3)
  races = [d for d in diags if d.code == "race"]
  assert races, diags
  # the race is between the producer kernel on gpu0 and the copy that reads its output on gpu1
  msg = races[0].message
  assert "comp_gpu0" in msg and "copy0_gpu1" in msg

def test_capture_does_not_change_submissions():
  """Same schedule twice on the same memory, with and without the recorder: rings, indirect buffers, kernargs and
  signals end up byte-identical; and the recorder's dwords are what the rings (or their indirect buffers) hold."""
  arena = Arena()
  hcqgraph(arena)
  plain = bytes(arena.mem)
  arena.reset()
  with Capture() as cap: d0, d1 = hcqgraph(arena)
  assert bytes(arena.mem) == plain
  ring = d1.sdma_queue(0)
  got = ring.ring[0:ring.put_value // 4]
  recorded = next(q for q in cap.manifest()["queues"] if q["name"] == "copy0_gpu1")
  assert got == [int(w, 16) for w in recorded["dwords"].split()]
  assert AMDComputeQueue._submit.__name__ == "_submit" and HCQSignal.value.fset.__name__ == "value"  # unwrapped again

def test_capture_unbound_queues_and_gfx1201():
  with Capture() as cap: hcqgraph(Arena(), launches=2, archs=("gfx1201", "gfx1201"), bind=False)
  prog = _lift(cap.manifest())
  assert [d.arch for d in prog.devices] == ["gfx1201", "gfx1201"]
  assert [d for d in hcqdsl.check(prog, 2) if d.severity == "error"] == []

def test_capture_is_not_reentrant():
  with Capture():
    with pytest.raises(RuntimeError, match="already recording"):
      with Capture(): pass

def test_capture_cli(tmp_path):
  script = tmp_path / "sched.py"
  script.write_text(textwrap.dedent(f"""
    import sys; sys.path.insert(0, {str(pathlib_tests())!r})
    from capture_util import hcqgraph
    from amd_standin import Arena
    def main(): hcqgraph(Arena(), launches=2)
    if __name__ == "__main__": main()
    """))
  out = tmp_path / "m.json"
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "capture", "-o", str(out), f"{script}:main"], capture_output=True, text=True)
  assert r.returncode == 0, r.stderr
  assert r.stderr == f"wrote {out}: 6 submissions on 3 queues, 15 host steps\n"
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "lift", str(out), "-o", str(tmp_path / "m.hcq")], capture_output=True, text=True)
  assert r.returncode == 0, r.stderr
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "check", str(tmp_path / "m.hcq")], capture_output=True, text=True)
  assert r.returncode == 0, r.stdout
  # a failing script: its own error, no traceback, and what was captured so far is still written
  bad = tmp_path / "bad.py"
  bad.write_text("import sys\nraise ValueError(f'no GPU here {sys.argv[1:]}')\n")
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "capture", "-o", str(tmp_path / "b.json"), str(bad), "--", "-x", "y"], capture_output=True,
                     text=True)
  assert r.returncode == 1
  assert r.stderr.splitlines()[0] == f"hcqdsl: error: {bad}:2: ValueError: no GPU here ['-x', 'y']"
  assert json.loads((tmp_path / "b.json").read_text())["queues"] == []
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "capture", str(tmp_path / "nope.py")], capture_output=True, text=True)
  assert (r.returncode, r.stderr) == (2, f"hcqdsl: error: {tmp_path / 'nope.py'}: no such file\n")

def pathlib_tests():
  import pathlib
  return pathlib.Path(__file__).parent

def test_capture_api_writes_manifest(tmp_path):
  with hcqdsl.tinygrad.capture(tmp_path / "m.json") as cap: hcqgraph(Arena(), launches=2)
  assert json.loads((tmp_path / "m.json").read_text()) == json.loads(json.dumps(cap.manifest()))
  prog = hcqdsl.lift_file(tmp_path / "m.json")
  assert len(prog.queues) == 3 and prog.host is not None

def test_capture_without_repeating_launches():
  """A submission after the graph's launches: the steps that repeat are the launches; the default lift lifts the rest
  as a last launch of its own (`launches 3`), `folded_only` leaves it out with a note; with nothing that repeats (one
  launch) the lift is one launch of every step, and it still checks clean."""
  arena = Arena()
  with Capture() as cap:
    d0, d1 = hcqgraph(arena, launches=2)
    s = HCQSignal(arena.alloc(16), 0)
    AMDComputeQueue(d0).wait(d0.timeline_signal, 2).signal(s, 1).submit(d0)
    s.wait(0)
  text = format_program(lift_manifest(load_manifest(cap.manifest()), folded_only=True))
  assert text.startswith("# hcq: launches=2\n") and "after the last repeated launch are not lifted" in text
  assert [d for d in hcqdsl.check(parse(text, "c.hcq"), 2) if d.severity == "error"] == []
  text = format_program(lift_manifest(load_manifest(cap.manifest())))
  prog = parse(text, "c.hcq")
  assert text.startswith("# hcq: launches=3\n") and "not lifted" not in text
  assert [q.launches for q in prog.queues] == [(1, 2)] * 3 + [(3, 3)] and [h.launches for h in prog.hosts] == [(1, 2), (3, 3)]
  assert [str(st) for st in prog.queues[-1].body][-1].startswith("SignalWrite")   # the submission after the launches
  assert [d for d in hcqdsl.check(prog, 3) if d.severity == "error"] == []
  with Capture() as cap: hcqgraph(Arena(), launches=1)
  text = format_program(lift_manifest(load_manifest(cap.manifest())))
  assert "# note: the host's steps do not repeat" in text and text.startswith("# hcq: launches=1\n")
  prog = parse(text, "c.hcq")
  assert [d for d in hcqdsl.check(prog, 1) if d.severity == "error"] == []

def test_capture_without_amd_device(tmp_path):
  """A script that never submits to an AMD queue: one error naming the mock GPU or a GPU, exit 2 (capture and
  sanitize); hcqdsl's own failure is not reported as the script's line."""
  script = tmp_path / "cpu.py"
  script.write_text("x = 1 + 1\n")
  for cmd in ("capture", "sanitize"):
    r = subprocess.run([sys.executable, "-m", "hcqdsl", cmd, *(["-o", str(tmp_path / "m.json")] if cmd == "capture" else []), str(script)],
                       capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines()[-1] == (f"hcqdsl: error: {script}: no AMD or NV queue was submitted to: run the script on tinygrad's "
                                         "AMD or NV runtime — an AMD or NVIDIA GPU, or tinygrad's mock GPUs (DEV=MOCKKFD+AMD, DEV=MOCK+NV) "
                                         "with a tinygrad checkout on PYTHONPATH (docs/lift.md, docs/nv.md)")

def test_capture_internal_error_is_not_the_script_line(tmp_path, monkeypatch):
  from hcqdsl.cli.capture import run_script
  monkeypatch.setattr(Capture, "_register_alloc", Capture.read)  # a broken recorder: the wrong arguments inside hcqdsl
  script = tmp_path / "buf.py"
  script.write_text("from tinygrad.runtime.support.hcq import HCQBuffer\nHCQBuffer(0x1000, 16)\n")
  rc, err = run_script(script, "", [], Capture())
  assert rc == 3 and err.startswith(f"hcqdsl: internal error (not in {script}): TypeError: ") and " at tinygrad/capture.py:" in err
  script.write_text("from tinygrad.runtime.support.hcq import HCQBuffer\nHCQBuffer(0x1000, 16).offset(1, 2).cpu_view()\n")
  monkeypatch.undo()
  assert run_script(script, "", [], Capture()) == (1, f"hcqdsl: error: {script}:2: AssertionError: buffer has no cpu_view")

def test_manifest_version_and_truncation(tmp_path):
  from hcqdsl.lift.manifest import ManifestError
  with Capture() as cap: hcqgraph(Arena(), launches=2)
  man = cap.manifest()
  p = tmp_path / "m.json"
  p.write_text(json.dumps({**man, "version": 7}))
  with pytest.raises(ManifestError, match=r"^.*m.json: version: this hcqdsl reads manifest versions 1 and 2, got 7$"): hcqdsl.lift_file(p)
  text = json.dumps(man)
  p.write_text(text[:len(text) // 2])
  with pytest.raises(ManifestError, match=r"m.json:1:\d+: invalid JSON: "): hcqdsl.lift_file(p)

def test_mock_tier_skip_names_how_to_enable(monkeypatch, tmp_path):
  import mock_gpu
  monkeypatch.setattr(mock_gpu, "ROOT", tmp_path / "repo")
  monkeypatch.delenv("TINYGRAD_REPO", raising=False)
  assert mock_gpu.unavailable() == ("tinygrad's mock GPU not found: set TINYGRAD_REPO to a tinygrad checkout (its test/mockgpu "
                                    "and extra/ are the mock GPU), or put one at ../shared/peers/tinygrad; the mock needs "
                                    "`apt-get install clang libllvm19`")

def test_cli_lift_every_step_by_default(tmp_path):
  """`hcqdsl lift` of a capture with a step after its repeated launches: every step by default (nothing left out,
  `--strict` is content), `--folded-only` leaves that step out and says so (`--strict`: exit 1), `--whole` and
  `--folded-only` do not go together."""
  arena = Arena()
  with hcqdsl.tinygrad.capture(tmp_path / "m.json"):
    d0, d1 = hcqgraph(arena, launches=2)
    s = HCQSignal(arena.alloc(16), 0)
    AMDComputeQueue(d0).wait(d0.timeline_signal, 2).signal(s, 1).submit(d0)
    s.wait(0)
  def lift(*args):
    return subprocess.run([sys.executable, "-m", "hcqdsl", "lift", "--strict", str(tmp_path / "m.json"), *args], capture_output=True, text=True)
  r = lift("-o", str(tmp_path / "l.hcq"))
  assert r.returncode == 0 and r.stderr == f"wrote {tmp_path / 'l.hcq'}: 4 queues\n", r.stderr
  text = (tmp_path / "l.hcq").read_text()
  assert text.startswith("# hcq: launches=3\n") and "queue comp_gpu0_2 compute on gpu0 launches 3 {" in text
  r = lift("--folded-only")
  assert r.returncode == 1 and r.stdout.startswith("# hcq: launches=2\n# hcq: unlifted=2\n")
  assert r.stderr.startswith("hcqdsl: error: not lifted, so no check sees it: steps 23..24 (after the last repeated launch) (the "
                             "default lift and `--whole` lift every step)"), r.stderr
  r = lift("--whole", "--folded-only")
  assert r.returncode == 2 and "--folded-only: not allowed with argument --whole" in r.stderr, r.stderr

def test_an_extent_is_recorded_only_below_the_arguments_bytes():
  """tinygrad's vmax of an index it cannot bound came out as 2**33 + 12 for a 1,152-byte argument (the mock NV
  capture's manifests were then refused): such an extent, or one at or past the bytes, says nothing and is dropped."""
  from hcqdsl.tinygrad.capture import useful_extent
  assert [useful_extent(e, 1152) for e in (384, 1151, 1152, 8589934604, 0, None)] == [True, True, False, False, False, False]
  assert useful_extent(384, None) and not useful_extent(1 << 32, None)
