"""The checker's cache table (hcqdsl/check/caches.py) against the packets `compile` emits for each statement, decoded,
on every target: which statements invalidate L2, which flush the HDP, what `exec` invalidates before its dispatch."""
import pytest
from hcqdsl.ir import AMD_ARCHS
from hcqdsl.amd.pm4 import encoder, decoder
from hcqdsl.amd.targets import get_target
from hcqdsl.check.caches import SIGNAL_INVALIDATES_L2, L2_INVALIDATING, HDP_FLUSHING, EXEC_INVALIDATES

def packets(arch, stmt):
  e, out = encoder(arch), []
  if stmt == "signal": e.signal(out, 0x1000, 1)
  elif stmt == "barrier": e.barrier(out)
  elif stmt == "timestamp": e.timestamp(out, 0x1008)
  elif stmt == "wait": e.wait(out, 0x1000, 1)
  else: e.exec(out, 0x2000, 0, 0, 0, 0, 0, (0, 0), (1, 1, 1), (1, 1, 1))
  return decoder(arch).decode(out)

def l2_invalidated(arch, p) -> bool:
  """Whether one packet invalidates L2: gfx10+ GL2_INV (RELEASE_MEM's and ACQUIRE_MEM's GCR bits); gfx9 TC_ACTION_ENA
  (ACQUIRE_MEM's CP_COHER_CNTL; RELEASE_MEM's EOP_TC_ACTION_EN — tinygrad sets only TC_WB + TC_NC, a write-back)."""
  h = get_target(arch).pm4
  if arch == "gfx942":
    if p.name == "ACQUIRE_MEM": return bool(p.fields["coher_cntl"] & h.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TC_ACTION_ENA(1))
    if p.name == "RELEASE_MEM": return bool(p.dwords[1] & h.EOP_TC_ACTION_EN)
    return False
  if p.name == "ACQUIRE_MEM": return bool(p.fields["gcr_cntl"] & h.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_INV(1))
  if p.name == "RELEASE_MEM": return bool(p.dwords[1] & h.PACKET3_RELEASE_MEM_GCR_GL2_INV)
  return False

@pytest.mark.parametrize("arch", AMD_ARCHS)
def test_l2_invalidations_are_the_packets(arch):
  got = {s for s in ("signal", "barrier", "timestamp", "wait", "exec") if any(l2_invalidated(arch, p) for p in packets(arch, s))}
  assert got == set(L2_INVALIDATING) | ({"signal"} if SIGNAL_INVALIDATES_L2[arch] else set())

@pytest.mark.parametrize("arch", AMD_ARCHS)
def test_signal_writes_l2_back_everywhere(arch):
  # the writer's side: every compute `signal` writes its device's L2 back before the value lands
  h, (p,) = get_target(arch).pm4, packets(arch, "signal")
  wb = h.EOP_TC_WB_ACTION_EN if arch == "gfx942" else h.PACKET3_RELEASE_MEM_GCR_GL2_WB
  assert p.name == "RELEASE_MEM" and p.dwords[1] & wb

@pytest.mark.parametrize("arch", AMD_ARCHS)
def test_only_barrier_flushes_the_hdp(arch):
  t = get_target(arch)
  def flush(s): return any(p.name == "WAIT_REG_MEM" and p.dwords[2] == t.hdp_flush_req for p in packets(arch, s))
  assert {s for s in ("signal", "barrier", "timestamp", "wait", "exec") if flush(s)} == set(HDP_FLUSHING)

@pytest.mark.parametrize("arch", AMD_ARCHS)
def test_exec_invalidates_the_near_caches_not_l2(arch):
  h, acq = get_target(arch).pm4, packets(arch, "exec")[0]
  assert acq.name == "ACQUIRE_MEM" and not l2_invalidated(arch, acq)
  if arch == "gfx942":
    bits = {"vector L1": h.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TCL1_ACTION_ENA(1),
            "scalar cache": h.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_SH_KCACHE_ACTION_ENA(1)}
    assert {k for k, b in bits.items() if acq.fields["coher_cntl"] & b} == set(EXEC_INVALIDATES[arch])
  else:
    bits = {n: getattr(h, f"PACKET3_ACQUIRE_MEM_GCR_CNTL_{n}_INV")(1) for n in ("GLV", "GL1", "GLK", "GLM", "GLI")}
    assert {k for k, b in bits.items() if acq.fields["gcr_cntl"] & b} == set(EXEC_INVALIDATES[arch])
