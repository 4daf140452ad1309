"""Indirect submission (tinygrad's bound path): resident command-buffer copies patched in place, an INDIRECT_BUFFER
and a fence per launch on the ring. It runs every program exactly as ring submission does, and with launches that
overlap it never patches a copy whose packets an engine may still read."""
import pathlib
import pytest
import hcqdsl
import hcqdsl.runtime as rt
from hcqdsl.runtime import submit as submit_mod
from hcqdsl.runtime.submit import COPIES

ROOT = pathlib.Path(__file__).resolve().parents[1]

def _runnable(path) -> bool:
  try:
    hcqdsl.parse(path.read_text(), str(path))
    return True
  except hcqdsl.HcqError: return False   # the programs that show name and syntax errors do not run

PROGRAMS = [p for p in sorted((ROOT / "programs").glob("*.hcq")) if _runnable(p)]

@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_indirect_runs_programs_as_the_ring_does(path):
  ring = rt.run(path.read_text(), launches=3, seed=1, filename=str(path))
  ind = rt.run(path.read_text(), launches=3, seed=1, filename=str(path), indirect=True)
  assert ind.ok == ring.ok and ind.signals == ring.signals and ind.memory == ring.memory
  assert (ind.hang is None) == (ring.hang is None) and (ind.fault is None) == (ring.fault is None)
  if ring.fault is not None: assert ind.fault.line == ring.fault.line and ind.fault.launch == ring.fault.launch

OVERLAP = """device g = AMD:0 gfx1100
buffer a on g size 64
buffer b on g size 64
signal go on host
signal seen on g
signal moved on g
var k
queue c compute on g {
  wait go >= k
  signal seen = k
}
queue x copy on g {
  wait seen >= k
  copy b <- a
  signal moved = k
}
host {
  submit
  signal go = k
}
"""

def test_overlapping_launches_never_patch_a_copy_in_use(monkeypatch):
  """The host never waits, so it runs up to COPIES launches ahead of the engines; at every patch, no engine is inside
  the copy and no INDIRECT_BUFFER to it is still unread on a ring (its fence has passed)."""
  seen = {"patches": 0, "while another launch ran": 0}
  orig = submit_mod.Indirect.patch
  engines: list = []
  def patch(self, j, vals):
    for e in engines:
      assert all(base != self.addrs[j] for base, *_ in e.ib), "patching a command buffer an engine is executing"
      if e.busy(): seen["while another launch ran"] += 1
    assert self.launch[j] == 0 or int(self.fence_now[0]) >= self.launch[j], "patching before the fence of its last launch"
    seen["patches"] += 1
    return orig(self, j, vals)
  monkeypatch.setattr(submit_mod.Indirect, "patch", patch)
  from hcqdsl.runtime import emulator
  real_run = emulator.Emulator.run
  def run(self, host, locator=None):
    engines[:] = self.engines
    return real_run(self, host, locator)
  monkeypatch.setattr(emulator.Emulator, "run", run)
  n = 40
  for seed in range(4):
    r = rt.run(OVERLAP, launches=n, seed=seed, indirect=True)
    assert r.ok and r.signals["seen"] == n and r.signals["moved"] == n, r.summary()
  assert seen["patches"] == 4 * 2 * n and seen["while another launch ran"] > n, seen

def test_a_copy_is_reused_only_after_its_fence(monkeypatch):
  """Launch k waits for what the host writes COPIES launches later, when it would need launch k's copy again: the host
  blocks on the copy (a hang reported at its submit), never patches it."""
  text = OVERLAP.replace("  wait go >= k\n", "  wait go >= k + %d\n" % COPIES)
  r = rt.run(text, launches=12, seed=0, indirect=True)
  assert not r.ok and r.hang is not None
  host = [b for b in r.hang.blocked if b.queue == "host"]
  assert host and host[0].stmt == "submit c" and host[0].reason == "command buffer in use", r.hang

def test_patched_dwords_are_the_changed_sites():
  """Per launch, a queue rewrites only the patch sites of the vars that changed since its copy last ran: every site on
  a copy's first use, then only those of `k` (`fixed` keeps its value)."""
  from hcqdsl.vendors import compile_program
  from hcqdsl.runtime.emulator import Emulator
  from hcqdsl.runtime.submit import Submitter
  text = OVERLAP.replace("var k", "var k\nvar fixed").replace("  signal seen = k\n", "  signal seen = k\n  signal seen = fixed\n")
  img = compile_program(hcqdsl.parse(text, "t.hcq"), "gfx1100")
  emu = Emulator(seed=0)
  sub = Submitter(img, emu, {"fixed": 7}, indirect=True)
  emu.run(sub.host(10), locator=sub)
  for qs in sub.queues.values():
    per_var = {v: sum(p.var == v for p in qs.qi.patches) for v in img.vars}
    first, then = sum(per_var.values()), sum(n for v, n in per_var.items() if v != "fixed")
    assert qs.patched == [first] * COPIES + [then] * (10 - COPIES) and then < first or qs.name == "x", (qs.name, qs.patched, per_var)

def test_cli_runs_indirect(tmp_path):
  import subprocess, sys
  f = tmp_path / "o.hcq"
  f.write_text(OVERLAP)
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "run", str(f), "--launches", "9", "--indirect"], capture_output=True, text=True)
  assert r.returncode == 0, r.stdout + r.stderr
  assert "seen=9" in r.stdout and "INDIRECT_BUFFER 9" in r.stdout and "INDIRECT 9" in r.stdout, r.stdout
