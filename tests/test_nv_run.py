"""`run` on NV devices: the emulator's NV engine executes the pushbuffers and QMDs `compile` builds for NV (docs/nv.md)
— every program of programs/ that NV lowers ends as on AMD (the same buffers and signal values after a time-ordered
run, the expects met under seeds, the deadlocks hanging at their waits), and what only NV does: QMD releases and
dependent launches, timestamps storing 0, one-bit polls."""
from __future__ import annotations
import pathlib
import pytest
from hcqdsl import parse
from hcqdsl.runtime import run
from hcqdsl.header import read_header as header
from program_files import PROGRAMS, NOT_LOWERED, markers
from nv_programs import NV_REFUSED, QMD_CHAIN, to_nv

def _both(path, archs=("sm_89",)):
  text = pathlib.Path(path).read_text()
  return text, parse(text, str(path)), to_nv(parse(text, str(path)), archs)

RUNNABLE = [p for p in PROGRAMS if pathlib.Path(p).stem not in NOT_LOWERED | set(NV_REFUSED)]

@pytest.mark.parametrize("archs", [("sm_89",), ("sm_120", "sm_86")], ids="+".join)
@pytest.mark.parametrize("path", RUNNABLE, ids=lambda x: pathlib.Path(x).stem)
def test_nv_run_ends_as_amd(path, archs):
  text, amd, nv = _both(path, archs)
  launches = header(text).get("launches", 2)
  a, n = run(amd, launches=launches), run(nv, launches=launches)
  assert (a.hang is None, a.fault is None) == (n.hang is None, n.fault is None), (a.summary(), n.summary())
  if a.hang is not None:
    assert n.hang.lines == a.hang.lines and all(b.packet.name == "SEM_ADDR_LO..SEM_EXECUTE" for b in n.hang.blocked if b.queue != "host")
    return
  if {"race", "signal-race", "non-monotonic"} & set(markers(text)): return   # what these end with depends on timing, and NV's differs
  timestamped = {s.signal.name for q in amd.queues for s in q.body if type(s).__name__ == "Timestamp"}
  assert {k: v for k, v in n.signals.items() if k not in timestamped} == {k: v for k, v in a.signals.items() if k not in timestamped}
  assert all(v == 0 for k, v in n.signals.items() if k in timestamped)   # an NV timestamp releases 0 into the value
  assert {b: n.memory[b] for b in n.memory} == {b: a.memory[b] for b in a.memory}
  assert [e.ok for e in n.expects] == [e.ok for e in a.expects]

CLEAN = [p for p in RUNNABLE if not markers(pathlib.Path(p).read_text()) and parse(pathlib.Path(p).read_text(), p).expects]

@pytest.mark.parametrize("path", CLEAN, ids=lambda x: pathlib.Path(x).stem)
def test_nv_clean_programs_meet_their_expects_under_seeds(path):
  text, _, nv = _both(path, ("sm_90",))
  for seed in range(6):
    r = run(nv, launches=header(text).get("launches", 2), seed=seed)
    assert r.ok and r.expects and all(e.ok for e in r.expects), r.summary()

def test_qmd_releases_and_dependent_launches_run():
  r = run(parse(QMD_CHAIN, "q.hcq"), launches=3)
  assert r.ok and all(e.ok for e in r.expects), r.summary()
  assert (r.signals["s"], r.signals["t"], r.signals["u"], r.signals["v"]) == (3, 0, 5, 6)   # t: the timestamp's 0
  c = r.queues["c"].by_name
  assert c["SEND_PCAS_A"] == 3 and c["NON_STALL_INTERRUPT"] == 3 * 2   # one launch by methods per launch; v and t by methods

def test_poll_hangs_until_its_bit():
  src = QMD_CHAIN.replace("  poll flag[0:4] & 0x80 == 0x80\n", "  poll flag[0:4] & 0x100 == 0x100\n")
  r = run(parse(src, "q.hcq"), launches=1)
  c = next(b for b in r.hang.blocked if b.queue == "c")
  assert c.packet.name == "SEM_ADDR_LO..SEM_EXECUTE" and c.line == 22 and "hang: no queue can progress" in str(r.hang)

def test_indirect_is_amds():
  with pytest.raises(ValueError, match="indirect"): run(parse(QMD_CHAIN, "q.hcq"), indirect=True)
