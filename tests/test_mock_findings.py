"""The two tinygrad findings (docs/findings/) on tinygrad's mock GPU: the stale JIT copy reproduced with tinygrad
0.14's HCQGraph and gone with the proposed fix applied by monkeypatch; the `_resolve_deps` chain's race as `check`
reports it on the program `emit --planner tinygrad` derives from the TinyJit (HCQGraph's own schedule). Skipped,
naming how to enable it, where the mock GPU is not available (tests/mock_gpu.py)."""
from __future__ import annotations
import json, subprocess, sys
from mock_gpu import needs_mock, env, WORKLOADS, hcqdsl

pytestmark = needs_mock

def _calls(**extra) -> list:
  r = subprocess.run([sys.executable, str(WORKLOADS / "stale_copy.py"), "5"], capture_output=True, text=True, timeout=600,
                     env=env(**extra))
  assert r.returncode == 0, r.stderr
  return json.loads(r.stdout.strip().splitlines()[-1])

def test_stale_copy_reproduced_and_fixed():
  want = [[100.0 * i + 1, 100.0 * i + 2, 100.0 * i + 3] for i in range(5)]
  got = _calls()
  # calls 0 and 1 run eagerly / are captured; every graph replay copies from call 1's input
  assert got[:2] == want[:2] and got[2:] == [want[1]] * 3, got
  assert _calls(HCQDSL_FIX="1") == want
