"""What each statement does to a device's caches, per target: the cache actions of the packets `hcqdsl compile`
emits for it (tinygrad's own packets; hcqdsl/amd/pm4.py, docs/amd.md), read from AMD's packet definitions (tinygrad's
generated `pm4_nv`/`pm4_soc15` headers; Mesa's ac/radv cache-flush code for what the bits mean). docs/check.md
("Cache semantics of the packets") has the table and the sources; tests/test_check_caches.py decodes the compiled
packets and holds this module equal to their bits on every target.

The `visibility` analysis (hb.py) reads three facts from here:

* a compute `exec` opens with ACQUIRE_MEM invalidating the near caches (vector L0/L1, GL1, scalar) but not L2: on every
  target a kernel never reads a stale near-cache line, only (maybe) a stale L2 line;
* which compute statements invalidate the device's L2: `barrier` and `timestamp` (an ACQUIRE_MEM of every cache) on
  every target, and `signal` (RELEASE_MEM with GL2_INV) on gfx1100/gfx1201 only — on gfx942 its RELEASE_MEM writes L2
  back (TC_WB + TC_NC) without invalidating it;
* only `barrier` flushes the HDP (the host data path: the host's writes to a device's memory through the PCIe BAR).

Copy queues (SDMA) cache nothing: COPY_LINEAR reads and writes memory, and FENCE has no cache action. So only a compute
queue's read can be stale, and only through its device's L2 (or, for the host's writes, the HDP).

NV devices (docs/nv.md, "Memory model") read nothing stale through the packets: there is no HDP (the host's writes
reach device memory through BAR1 and the memory side of L2), every QMD invalidates the SM's L1, texture and constant
caches before its grid runs (invalidate_shader_data_cache, ..., constant_buffer_invalidate_0: NVProgram's template),
and L2 is each device's point of coherence — its copy engines and its peers' writes (NVLink/PCIe P2P) go through it.
What a semaphore release makes visible is everything before it (RELEASE_WFI: the queue's work drained; a QMD's
release once its grid's writes are out, CWD_MEMBAR_TYPE L1_SYSMEMBAR)."""
from __future__ import annotations
from ..ir import AMD_ARCHS, NV_ARCHS

__all__ = ["SIGNAL_INVALIDATES_L2", "L2_INVALIDATING", "HDP_FLUSHING", "EXEC_INVALIDATES", "STALE_READS"]

# whether a compute read on a device of the arch can see stale bytes through its caches (the `visibility` analysis)
STALE_READS = {**{a: True for a in AMD_ARCHS}, **{a: False for a in NV_ARCHS}}

# compute `signal` = RELEASE_MEM CACHE_FLUSH_AND_INV_TS_EVENT at end of pipe with tinygrad's cache flags:
# gfx10+ GCR GLV_INV | GL1_INV | GL2_INV | GLM_WB | GLM_INV | GL2_WB | SEQ; gfx9 EOP_TC_WB_ACTION_EN | EOP_TC_NC_ACTION_EN
# (Mesa: "WB = write-back, NC = apply to non-coherent MTYPEs": an L2 write-back; invalidating L2 takes TC_ACTION_ENA)
SIGNAL_INVALIDATES_L2 = {"gfx942": False, "gfx1100": True, "gfx1201": True}
assert set(SIGNAL_INVALIDATES_L2) == set(AMD_ARCHS)

# compute statements whose packets invalidate (and write back) the device's whole L2, on every target: `barrier`
# (HDP flush, then ACQUIRE_MEM of every cache) and `timestamp` (RELEASE_MEM drain, clock write, ACQUIRE_MEM of every cache)
L2_INVALIDATING = ("barrier", "timestamp")
# compute statements that flush the HDP (WAIT_REG_MEM write-wait-write on BIF_BX_PF0_GPU_HDP_FLUSH_REQ/DONE)
HDP_FLUSHING = ("barrier",)
# the caches `exec`'s ACQUIRE_MEM (tinygrad's acquire_mem(gli=0, gl2=0)) invalidates before each dispatch
EXEC_INVALIDATES = {"gfx942": ("vector L1", "scalar cache"), "gfx1100": ("GLV", "GL1", "GLK", "GLM"),
                    "gfx1201": ("GLV", "GL1", "GLK", "GLM")}
