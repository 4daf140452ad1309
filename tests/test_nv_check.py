"""`check` on NV devices (docs/nv.md, "Memory model"): no `visibility` findings (no HDP; every QMD invalidates the SM's
caches; L2 is the point of coherence), a `timestamp` is a release of 0 into its signal, and NV's refusals in NV terms."""
from __future__ import annotations
import pathlib
import pytest
from hcqdsl.check import check_text

ROOT = pathlib.Path(__file__).resolve().parent.parent

def nv(text: str, arch: str = "sm_89") -> str:
  import re
  return re.sub(r"AMD:(\d+)(?: gfx\w+)?", lambda m: f"NV:{m.group(1)} {arch}", text)

@pytest.mark.parametrize("name", ["visibility_no_barrier", "peer_read_barrier", "visibility_barrier"])
def test_no_visibility_on_nv(name):
  text = (ROOT / "programs" / f"{name}.hcq").read_text()
  amd = [d.code for d in check_text(text, f"{name}.hcq")]
  got = [d.code for d in check_text(nv(text), f"{name}.hcq")]
  assert "visibility" not in got and [c for c in amd if c != "visibility"] == got

def test_timestamp_is_a_release_of_zero_on_nv():
  src = """device g = {d}
signal s on g
queue c compute on g {{
  signal s = 1
  timestamp s
}}
queue d compute on g {{
  wait s >= 1
}}
"""
  assert check_text(src.format(d="AMD:0 gfx1100"), "t.hcq") == []
  codes = {d.code: d for d in check_text(src.format(d="NV:0 sm_89"), "t.hcq")}
  assert {"non-monotonic", "deadlock"} <= set(codes)
  assert any("NVCommandQueue.timestamp is signal(s, 0)" in n for n in codes["non-monotonic"].notes)

def test_profiling_timestamps_clean_on_nv():
  text = (ROOT / "programs" / "profiling_timestamps.hcq").read_text()
  assert check_text(nv(text), "p.hcq") == check_text(text, "p.hcq") == []

def test_device_kinds_and_archs():
  def bad(t): return [d.message for d in check_text(t + "queue q compute on g {\n  barrier\n}\n", "t.hcq")]
  assert bad("device g = NV:0 sm_120\n") == []
  assert bad("device g = NV:0\n") == []
  assert bad("device g = NV:0 gfx1100\n") == ["unknown NV architecture `gfx1100` (one of sm_86, sm_89, sm_90, sm_120)"]
  assert bad("device g = AMD:0 sm_89\n") == ["unknown AMD architecture `sm_89` (one of gfx942, gfx1100, gfx1201)"]
  assert bad("device g = NVV:0\n") == ["unknown device kind `NVV` (one of `AMD`, `NV`) (did you mean `NV`?)"]

def test_nv_buffers_fit_40_bits():
  msgs = [d.message for d in check_text("device g = NV:0\nbuffer a on g size 16G\nbuffer b on g size 16G\n", "t.hcq")]
  assert msgs and "an NV device's 40-bit window holds" in msgs[0] and "24 GiB" in msgs[0]
  assert check_text("device g = AMD:0\nbuffer a on g size 16G\nbuffer b on g size 16G\n", "t.hcq") == []
  msgs = [d.message for d in check_text("device g = NV:0\nbuffer h on host size 400G\nbuffer i on host size 100G\n", "t.hcq")]
  assert msgs and "below the NV devices' windows" in msgs[0]

def test_poll_on_nv_copy_queue_names_nvcopyqueue():
  msgs = [d.message for d in check_text("device g = NV:0\nbuffer b on g size 64\nqueue x copy on g {\n  poll b[0:4] & 1 == 1\n}\n", "t.hcq")]
  assert any("NVCopyQueue has no poll_bit" in m for m in msgs)
