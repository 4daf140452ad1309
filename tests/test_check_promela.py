"""SPIN's verdict on the Promela translation (hcqdsl.check.promela) agrees with `check` on deadlock."""
import pathlib, shutil
import pytest
from hcqdsl import parse
from hcqdsl.check import check
from hcqdsl.check.promela import to_promela, spin_verify

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGRAMS = ["deadlock_cycle", "deadlock_cycle_fixed", "deadlock_host_submit", "deadlock_host_submit_fixed",
            "deadlock_unwritten", "deadlock_unwritten_fixed", "tutorial_deadlock", "tutorial_fixed", "run_deadlock",
            "run_pipeline", "hcqgraph_resets", "ring_exchange_4dev", "spec_example", "rdma_poll", "deadlock_poll_undone"]

def test_translation_shape():
  prog = parse((ROOT / "programs" / "deadlock_host_submit.hcq").read_text(), "deadlock_host_submit.hcq")
  m = to_promela(prog, launches=2)
  assert "proctype host()" in m and "proctype q1_c0()" in m
  assert "(sig[0] >= 1);" in m and "go[0] = 1;" in m and "  go[1];" in m

needs_spin = pytest.mark.skipif(shutil.which("spin") is None or shutil.which("gcc") is None,
                                reason="optional extra: the Promela comparison needs SPIN and gcc (apt-get install spin gcc)")

@needs_spin
@pytest.mark.parametrize("name", PROGRAMS)
def test_spin_agrees_on_deadlock(name):
  path = ROOT / "programs" / f"{name}.hcq"
  prog = parse(path.read_text(), path.name)
  ours = any(d.code == "deadlock" for d in check(prog, launches=2))
  res = spin_verify(to_promela(prog, launches=2), timeout=120)
  assert not res["timeout"] and res["deadlock"] is not None, res
  assert res["deadlock"] == ours, (name, res.get("output", "")[-1500:])
