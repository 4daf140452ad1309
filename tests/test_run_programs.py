"""Every program in programs/: clean ones with expects run to their expected data under >= 20 seeds, deadlocking ones
hang naming the waits `check` names, racy ones show differing final memory across PCT schedules."""
import pathlib
import pytest
from hcqdsl import parse
from hcqdsl.runtime import run, explore
from hcqdsl.check import check_text
from hcqdsl.header import read_header as header
from program_files import markers

PROGRAMS = sorted((pathlib.Path(__file__).parent.parent / "programs").glob("*.hcq"))
def load(path):
  text = path.read_text()
  return text, parse(text, str(path)), header(text), markers(text)

CLEAN = [p for p in PROGRAMS if not markers(p.read_text()) and parse(p.read_text(), str(p)).expects]
DEADLOCK = [p for p in PROGRAMS if "deadlock" in markers(p.read_text())]
# races show in data only where the racing kernels compute something: programs with a `# hcq:` run header
RACY = [p for p in PROGRAMS if "race" in markers(p.read_text()) and header(p.read_text())]

def test_programs_found():
  assert CLEAN and DEADLOCK and RACY

@pytest.mark.parametrize("path", CLEAN, ids=lambda p: p.name)
def test_clean_program_runs_to_expected_data(path):
  text, prog, h, _ = load(path)
  launches = h.get("launches", 2)
  for seed in [None, *range(max(20, h.get("seeds", 20)))]:
    r = run(prog, launches=launches, seed=seed)
    assert r.ok, f"seed {seed}:\n{r.summary()}"
    assert r.expects and all(e.ok for e in r.expects)

def _named(diags) -> set:
  """Every line the deadlock diagnostics name: where each is reported and the waits of its cycle."""
  return {d.span.line for d in diags} | {r.span.line for d in diags for r in d.related if r.span is not None}

@pytest.mark.parametrize("path", DEADLOCK, ids=lambda p: p.name)
def test_deadlock_program_hangs_naming_checks_waits(path):
  text, prog, h, marks = load(path)
  launches = h.get("launches", 2)  # check's default
  diags = [d for d in check_text(text, str(path), launches) if d.code == "deadlock"]
  named = _named(diags)
  hung = 0
  for seed in [None, *range(20)]:
    r = run(prog, launches=launches, seed=seed)
    assert r.fault is None
    if r.hang is None: continue  # a deadlock in *some* execution: this schedule escaped it
    hung += 1
    assert not r.ok and "hang: no queue can progress" in str(r.hang)
    assert r.hang.lines <= named  # a cycle is one diagnostic: its other waits are its related locations
    for b in r.hang.blocked:
      assert b.signal and b.needed is not None and b.now is not None and b.stmt and b.line
      assert b.now < b.needed
      if b.queue != "host": assert b.packet is not None and b.packet.name in ("WAIT_REG_MEM", "POLL_REGMEM")
  assert hung, "no schedule hung"

def test_run_deadlock_names_exactly_checks_waits():
  path = next(p for p in DEADLOCK if p.name == "run_deadlock.hcq")
  text, prog, h, marks = load(path)
  r = run(prog, launches=2)
  diags = [d for d in check_text(text, str(path)) if d.code == "deadlock"]
  assert marks["deadlock"] == {d.span.line for d in diags} == {8}   # the cycle, once, at its first wait
  assert r.hang.lines == _named(diags) == {8, 13}
  assert {b.signal for b in r.hang.blocked} == {"s", "t"}

@pytest.mark.parametrize("path", RACY, ids=lambda p: p.name)
def test_racy_program_differs_across_schedules(path):
  # PCT alone (no witness of check's, no race observed): the final memory differs between schedules
  text, prog, h, marks = load(path)
  e = explore(prog, max(20, h.get("seeds", 20)), steer=False, observe=False, launches=h.get("launches", 1))
  assert all(s.result.hang is None and s.result.fault is None for s in e.schedules)
  assert e.differences, "no schedule witnessed the race"
  assert len(e.differences[0].values) >= 2 and "differs between schedules" in str(e.differences[0])
