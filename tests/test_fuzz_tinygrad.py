"""`hcqdsl fuzz` (hcqdsl/tinygrad/fuzz.py): its programs are tinygrad 0.14 programs as users write them, the same text
for the same seed, valid on tinygrad's CPU device; findings group by cause; the command's summary line and JSON."""
from __future__ import annotations
import ast, json, os, subprocess, sys
import pytest
from hcqdsl.tinygrad.fuzz import generate, cause_of, summary, ProgramResult
from mock_gpu import needs_mock, hcqdsl as run_hcqdsl

def test_programs_are_seeded_and_reproducible():
  a = [generate(3, i) for i in range(20)]
  assert a == [generate(3, i) for i in range(20)] and len(set(a)) == 20 and a != [generate(4, i) for i in range(20)]
  for text in a:
    tree = ast.parse(text)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert {"Tensor", "devs", "step", "W"} <= names
  joined = "\n".join(a)
  for feature in ("@TinyJit", ".shard(devs, axis=0)", ".shard(devs, axis=1)", ".to(devs)", "@ W", ".realize()", "gc.collect()",
                  "S.assign(S + z)", ".sum(axis=1", "x[1:]"):
    assert feature in joined, feature

@needs_mock   # (tinygrad's CPU device compiles with clang, as the mock GPU does)
@pytest.mark.slow   # (8 programs: 35 s)
def test_programs_run_on_tinygrads_cpu_device(tmp_path):
  # the generator's programs are valid tinygrad (on CPU:0..3): count the ones tinygrad itself rejects
  ran, failed = 0, []
  for i in range(8):
    f = tmp_path / f"p{i}.py"
    f.write_text(generate(5, i))
    p = subprocess.run([sys.executable, str(f)], capture_output=True, text=True, env={**os.environ, "DEV": "CPU"}, timeout=300)
    ran += 1
    if p.returncode: failed.append((i, p.stderr.strip().splitlines()[-1]))
  assert ran == 8 and len(failed) <= 3, failed   # (tinygrad 0.14 fails some sharded assigns: docs/fuzz.md)

def test_findings_group_by_cause():
  f = {"code": "race", "what_to_do": "tinygrad's HCQGraph (runtime/graph/hcq.py) built both ...",
       "commands": [{"what": "copy (a <- b)", "device": "AMD"}, {"what": "kernel E_4(out float[4])", "device": "AMD:1"}]}
  assert cause_of(f) == "race: HCQGraph._resolve_deps: copy/kernel across devices"
  g = dict(f, what_to_do="tinygrad's hcq2 planner ...", commands=[{"what": "kernel k", "device": "AMD:1"}, {"what": "copy x", "device": "AMD:1"}])
  assert cause_of(g) == "race: hcq2 _finalize_batch: copy/kernel on one device"
  assert cause_of({"code": "stale-input", "commands": [{"what": "exec k(...)", "device": "gpu1"}]}) == \
    "stale-input: TinyJit input replacement: exec on one device"
  rs = [ProgramResult(0, "classic", "p0.py", False, [{"code": "race", "cause": "c", "status": "confirmed", "message": ""}], True, None, 1.0),
        ProgramResult(0, "hcq2", "p0.py", True, [], True, None, 1.0),
        ProgramResult(1, "classic", "p1.py", False, [{"code": "race", "cause": "c", "status": "not-observed", "message": ""}], True, None, 1.0),
        ProgramResult(2, "classic", "p2.py", False, [], None, "RuntimeError", 1.0)]
  sm = summary(rs)
  assert (sm["programs"], sm["findings"], sm["confirmed"], sm["errors"], sm["unconfirmed_where_right"]) == (4, 2, 1, 1, 1)
  assert sm["causes"]["c"] == {"findings": 2, "confirmed": 1, "not-observed": 1, "not-tried": 0, "programs": 2}

@needs_mock
@pytest.mark.slow   # (a program sanitized, confirmed and compared with the CPU device on the mock: about a minute)
def test_a_campaign_from_the_cli(tmp_path):
  r = run_hcqdsl("fuzz", "--programs", "1", "--seed", "1", "--paths", "classic", "--out", tmp_path, "--format", "json")
  assert r.returncode == 0, r.stderr
  out = json.loads(r.stdout.strip().splitlines()[-1])
  assert out["summary"].startswith("1 programs, ") and out["programs"] == 1 and len(out["results"]) == 1
  res = out["results"][0]
  assert res["path"] == "classic" and (tmp_path / "results.jsonl").is_file() and (tmp_path / "prog_1_0.py").read_text() == generate(1, 0)
  assert all(f["status"] in ("confirmed", "not-observed", "not-tried") for f in res["findings"])
  # no wrong numbers unreported: where tinygrad computes wrong (seed 1's program 0 is stale-jit-copy's tensor-parallel
  # case, docs/fuzz.md) a finding is confirmed; where it computes right, nothing is
  assert (res["right"] is False) == any(f["status"] == "confirmed" for f in res["findings"]) and res["right"] is not None, res

def test_fuzz_usage():
  from cli_run import cli
  assert cli("fuzz", "--paths", "cuda").returncode == 2 and cli("fuzz", "--programs", "0").returncode == 2
