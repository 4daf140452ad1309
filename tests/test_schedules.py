"""`hcqdsl run --schedules K` finds what `check` reports (runtime/schedules.py): the witnesses of check's races and
deadlocks steer schedules, PCT (Burckhardt et al., ASPLOS 2010) picks the rest, and a schedule fails when one of
check's races happened in it. Uniformly random seeds missed a newcomer's race 50 times out of 50."""
import pathlib, subprocess, sys
import pytest
import hcqdsl
from hcqdsl.header import read_header
from hcqdsl.runtime import run, run_schedules, explore, run_pct
from hcqdsl.runtime.schedules import PCT

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "programs"
NEWCOMER = PROGRAMS / "newcomer_three_queues.hcq"

def cli(*args):
  p = subprocess.run([sys.executable, "-m", "hcqdsl", *args], capture_output=True, text=True, cwd=ROOT)
  return p.returncode, p.stdout, p.stderr

def test_uniform_seeds_miss_the_newcomers_race():
  # the issue's observation, kept as the reason for PCT: the copy must wait out stage 2's three kernels to see `a` cleared
  prog = hcqdsl.parse(NEWCOMER.read_text(), NEWCOMER.name)
  results, races = run_schedules(prog, range(50))
  assert len(results) == 50 and all(r.ok for r in results) and not races

def test_the_newcomers_race_does_not_pass_50_schedules():
  rc, out, err = cli("run", str(NEWCOMER), "--schedules", "50")
  assert rc == 1
  lines = out.splitlines()
  assert lines[0] == "schedule 2 (check's witness of the race at line 31) failed:"
  assert "  expect line 34: `result` element 0: got 0.0, expected 1.0 (16 of 16 differ)" in lines
  assert any(x.startswith("  check's race at line 31 happened: stage2's `exec clear(a)` (line 31, launch 1) ran before "
                          "saver's `copy result <- a` (line 23, launch 1)") for x in lines)
  assert lines[-1].startswith(f"{NEWCOMER}: 50 schedules (the time-ordered one, 1 steered by check's witnesses, 48 PCT), ")
  assert "PCT over 4 actors and " in out and "a given bug of depth 1: each of 16 schedules hits it with probability >= 1/4" in out
  assert "has 1 check error (race)" in err

def test_pct_alone_finds_the_newcomers_race_in_the_data():
  # no witness, no race observed: only the expect (what the program reads back) tells
  e = explore(NEWCOMER.read_text(), 50, steer=False, observe=False, filename=NEWCOMER.name)
  bad = e.failed
  assert len(e.schedules) == 50 and {s.kind for s in e.schedules} == {"time-ordered", "pct"}
  assert bad and all(s.kind == "pct" and not s.happened for s in bad)
  assert all(any("expected 1.0" in r for r in s.reasons()) for s in bad)
  # each failing PCT schedule runs alone, the same way, from its seed and depth (`run --pct SEED --depth D`)
  s = bad[0]
  alone = run_pct(NEWCOMER.read_text(), s.seed, s.depth, filename=NEWCOMER.name)
  assert not alone.ok and [x.message for x in alone.expects] == [x.message for x in s.result.expects]
  rc, out, _ = cli("run", str(NEWCOMER), "--pct", str(s.seed), "--depth", str(s.depth), "--no-check")
  assert rc == 1 and f"emulated in PCT seed {s.seed}, depth {s.depth}" in out and out.rstrip().endswith("FAILED")

def _racy_programs():
  out = []
  for p in sorted(PROGRAMS.glob("*.hcq")):
    text = p.read_text()
    try: prog = hcqdsl.parse(text, p.name)
    except hcqdsl.HcqError: continue
    n = read_header(text).get("launches", 2)   # check's default, as run --schedules takes it
    if any(d.code == "race" and d.severity == "error" for d in hcqdsl.check(prog, n)): out.append((p, prog, n))
  return out

def test_every_racy_program_fails_some_schedule():
  compared = 0
  for p, prog, n in _racy_programs():
    steered = explore(prog, 4, launches=n, filename=p.name)
    assert any(s.kind == "witness" for s in steered.failed), f"{p.name}: no witness schedule failed"
    pct = explore(prog, 50, steer=False, launches=n, filename=p.name)   # PCT alone, check's races observed
    assert any(s.kind == "pct" and s.happened for s in pct.failed), f"{p.name}: no PCT schedule saw check's race"
    compared += 1
  assert compared == 7   # host_staging_refill_no_wait, jit_decode/jit_rewritten_no_host_wait, race_missing_epoch,
                         # race_overlapping_ranges, run_race, newcomer_three_queues

def test_a_clean_program_passes_its_schedules():
  rc, out, _ = cli("run", str(PROGRAMS / "run_pipeline.hcq"), "--launches", "3", "--schedules", "20")
  assert rc == 0 and out.splitlines()[-1] == f"{PROGRAMS / 'run_pipeline.hcq'}: 20 schedules (the time-ordered one, 19 PCT), 20 ok, 0 failed"

def test_a_rewritten_buffers_race_replays():
  # the host's rewrite before launch 2's submit (check's `implicit submit`) against launch 1's read: was "not reproduced"
  prog = hcqdsl.parse((PROGRAMS / "jit_rewritten_no_host_wait.hcq").read_text(), "j.hcq")
  (r,) = hcqdsl.replay(prog, hcqdsl.witnesses(prog, hcqdsl.check(prog, 2), 2))
  assert r.happened and r.lines[-1] == ("  the race happened: c0 line 12 reads 03 00 00 00 04 00 00 00 here and "
                                        "01 00 00 00 02 00 00 00 in the program's order")

class _Actor:
  def __init__(self, index): self.index = index

def test_pct_is_the_papers_algorithm():
  actors = [_Actor(i) for i in range(5)]
  for seed in range(20):
    for d in (1, 2, 3):
      p = PCT(seed, d, 5, 100)
      assert sorted(p.priority.values()) == list(range(d, d + 5))   # initial priorities d..d+n-1
      assert len(p.changes) == d - 1 and sorted(p.changes.values()) == list(range(1, d))
      assert all(1 <= k <= 100 for k in p.changes)
      top = p.pick(actors)
      assert p.priority[top.index] == d + 4
      for step in range(1, 101):
        a = p.pick(actors)
        p.ran(a)
        if step in p.changes: assert p.priority[a.index] == p.changes[step] < d   # demoted below every initial priority
      assert p.hit_bound() == pytest.approx(1 / (5 * 100 ** (d - 1)))

def test_same_seed_same_schedule():
  text = NEWCOMER.read_text()
  a, b = run_pct(text, 7, 2, filename="n.hcq"), run_pct(text, 7, 2, filename="n.hcq")
  assert a.memory["result"] == b.memory["result"] and a.time_us == b.time_us

def test_usage_errors():
  f = str(NEWCOMER)
  assert cli("run", f, "--depth", "2")[0] == 2
  assert cli("run", f, "--schedules", "5", "--depth", "0")[0] == 2
  assert cli("run", f, "--pct", "1", "--seed", "1")[0] == 2
  with pytest.raises(ValueError): explore(NEWCOMER.read_text(), 0)
  assert run(NEWCOMER.read_text()).ok   # the time-ordered schedule is fine: that is why the race hides
