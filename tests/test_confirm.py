"""`hcqdsl sanitize --confirm` (hcqdsl/tinygrad/confirm.py): each finding's witness order forced on tinygrad's mock GPU
in another run of the script, and what the script reads back compared. Every status on the mock: a dropped wait
confirmed (classic HCQGraph, BUG=dep), a real stale copy confirmed (tinygrad 0.14's missed input replacement), hcq2's
unordered cross-device copy confirmed, a race on a dead value not-observed with why, the mock NV GPU not-tried, a
correct script with no finding and no run. Without the mock: how two recordings compare, and how the reasons read."""
from __future__ import annotations
import base64, re, json, types
import numpy as np
import pytest
from mock_gpu import needs_mock, hcqdsl as run_hcqdsl, report, WORKLOADS, NV

USER_LINE = f"{WORKLOADS / 'multi_device.py'}:20"

def _statuses(rep: dict) -> list: return [f["confirmation"]["status"] for f in rep["findings"]]

@needs_mock
def test_a_dropped_wait_is_confirmed():
  # HCQGraph's copy queue without its wait for the kernel that writes its source: the copy reads the previous call's
  r = run_hcqdsl("sanitize", "--confirm", "--confirm-limit", "1", "--format", "json", WORKLOADS / "buggy_graph.py", BUG="dep")
  assert r.returncode == 1, r.stderr
  rep = report(r)
  # (one report per bug: the dropped wait's race in every replay is one finding, with the calls it was seen in)
  assert _statuses(rep) == ["confirmed"] + ["not-tried"] * (len(rep["findings"]) - 1) and len(rep["findings"]) == 2
  c = rep["findings"][0]["confirmation"]
  d = c["differences"][0]
  assert d["what"].startswith(f"read 2, float[2, 8] on AMD:1 at {USER_LINE} (`out = step(Tensor(xn).realize()).numpy()`)")
  assert (d["values"], d["total"], d["index"]) == (8, 16, [0, 4]) and float(d["want"]) == 5.0 and float(d["got"]) != 5.0
  # (queues by the names the report's lifted program gives them: `comp_gpu0`, or `comp_gpu0_6` for a ring's 6th submission)
  assert re.match(r"comp_gpu0(_\d+)?'s `exec E_4_4\(", c["how"]) and re.search(r"held until copy0_gpu0(_\d+)?'s `copy ", c["how"]), c["how"]
  assert rep["findings"][1]["confirmation"] == {"status": "not-tried", "why": "--confirm tries the first 1 races (a run of the script each)"}
  # what the memory is, and whose code should order the two (tinygrad/memnames.py)
  (mem,) = rep["findings"][0]["memory"]
  assert mem["what"].startswith("a float buffer of 16 elements on AMD, a view at byte 0 of a memory planner's arena, allocated at ")
  assert rep["findings"][0]["what_to_do"].startswith("tinygrad's HCQGraph (runtime/graph/hcq.py) built both commands for a TinyJit replay: "
                                                     "`_resolve_deps` gives each queue its waits")
  assert re.search(r"it should have made copy0_gpu0(_\d+)? \(copy on AMD\) wait for comp_gpu0(_\d+)? "
                   r"\(kernel E_4_4\(out float\[16\], in float\[16\]\) on AMD\)$", rep["findings"][0]["what_to_do"])
  r = run_hcqdsl("sanitize", "--confirm", "--confirm-limit", "1", WORKLOADS / "buggy_graph.py", BUG="dep")
  assert re.search(r"  confirmed: comp_gpu0(_\d+)?'s `exec E_4_4\(", r.stdout) and ": 8 of 16 values differ, first at [0, 4]: " in r.stdout
  assert r.stdout.splitlines()[-1].endswith("; --confirm: 1 confirmed, 1 not-tried")

@needs_mock
def test_a_stale_jit_copy_is_confirmed():
  # docs/findings/stale-jit-copy.md: the graph's copy reads call 1's input; with the graph off (JIT=2) every call is right
  r = run_hcqdsl("sanitize", "--confirm", "--format", "json", WORKLOADS / "stale_copy.py")
  rep = report(r)
  assert [f["code"] for f in rep["findings"]] == ["stale-input"] and _statuses(rep) == ["confirmed"]
  diffs = rep["findings"][0]["confirmation"]["differences"]
  assert [(d["values"], d["total"], d["got"], d["want"]) for d in diffs] == [(8, 8, "101.0", f"{k}01.0") for k in (2, 3, 4)]
  assert all(d["what"].startswith(f"read {k}, float[8] on AMD:1 at {WORKLOADS / 'stale_copy.py'}:32") for d, k in zip(diffs, (3, 4, 5)))

@needs_mock
@pytest.mark.slow   # (40 s: the dead-value case below is the same race, in the default tier)
def test_hcq2_unordered_copy_is_confirmed():
  # docs/findings/hcq2-cross-device-reuse.md's assign case: device 1 reads t, device 0's copy queue then writes t
  r = run_hcqdsl("sanitize", "--confirm", "--confirm-limit", "1", "--format", "json", WORKLOADS / "hcq2_assign.py", hcq2=True)
  rep = report(r)
  assert _statuses(rep) == ["confirmed"]   # (the race in each call is one finding: one report per bug)
  d = rep["findings"][0]["confirmation"]["differences"][0]
  assert d["what"].startswith(f"read 2, float[16] on AMD:1 at {WORKLOADS / 'hcq2_assign.py'}:16")
  assert (d["values"], d["total"], d["got"], d["want"]) == (16, 16, "5.0", "3.0")   # call 1 reads t's next value (2 * 2 + 1)

@needs_mock
def test_a_race_on_a_dead_value_is_not_observed():
  # the same race, the result of the racing kernel never read: the witness order runs and nothing differs, and why
  r = run_hcqdsl("sanitize", "--confirm", "--confirm-limit", "1", "--format", "json", WORKLOADS / "hcq2_assign.py", hcq2=True, READ="0")
  rep = report(r)
  assert r.returncode == 1 and _statuses(rep) == ["not-observed"]   # (its occurrences in each call: one finding)
  c = rep["findings"][0]["confirmation"]
  assert re.match(r"comp_gpu1(_\d+)?'s `exec E_4_4\(", c["how"]) and re.search(r" held until copy0_gpu0(_\d+)?'s `copy ", c["how"]), c["how"]
  assert re.match(r"what comp_gpu1(_\d+)?'s racing command wrote \(b_", c["why"]) and \
    re.search(r" is overwritten by comp_gpu1(_\d+)?'s `exec E_4_4\(", c["why"]), c["why"]
  assert c["why"].endswith("before anything reads it")
  f = rep["findings"][0]
  line, src = f"{WORKLOADS / 'hcq2_assign.py'}:10", "t = Tensor(np.zeros(16, np.float32), device=d1).contiguous().realize()"
  assert f["memory"][0]["what"] == (f"a float buffer of 16 elements on AMD:1, allocated at {line} (`{src}`); "
                                    f"held by the tensor `{src}` (float[16]) made at {line}")
  assert f["what_to_do"].startswith("tinygrad's hcq2 planner (runtime/support/hcq2.py) built both: `_finalize_batch` orders")

@needs_mock
def test_a_correct_script_has_nothing_to_confirm():
  r = run_hcqdsl("sanitize", "--confirm", WORKLOADS / "multi_device.py")
  assert r.returncode == 0 and r.stdout.splitlines()[-1].startswith("ok: 0 errors") and "--confirm" not in r.stdout + r.stderr

@needs_mock
def test_the_mock_nv_gpu_is_not_tried():
  r = run_hcqdsl("sanitize", "--confirm", "--format", "json", WORKLOADS / "buggy_graph.py", BUG="dep", **NV)
  rep = report(r)
  assert rep["findings"] and set(_statuses(rep)) == {"not-tried"} and "--confirm: run" not in r.stderr
  assert rep["findings"][0]["confirmation"]["why"].startswith("tinygrad's mock NV GPU runs no kernels")

def test_usage():
  from cli_run import cli
  assert cli("sanitize", "--confirm-limit", "2", str(WORKLOADS / "multi_device.py")).returncode == 2

# ---- without the mock

def _rec(reads=(), final=()) -> dict:
  def e(vals, line, **more):
    a = np.asarray(vals, np.float32)
    return {"file": "s.py", "line": line, "source": "x.numpy()", "shape": list(a.shape), "dtype": "float", "fmt": "f", "device": "AMD:1",
            "data": base64.b64encode(a.tobytes()).decode(), **more}
  return {"reads": [e(v, 3) for v in reads], "final": [e(v, 7, shard=i, shards=2, tensor_shape=["4"]) for i, v in enumerate(final)]}

def test_compare_names_the_output_the_values_and_the_index():
  from hcqdsl.tinygrad.readback import compare
  want = _rec([[[1, 2], [3, 4]], [5]], [[0, 0], [1, 1]])
  assert compare(want, want) == []
  got = _rec([[[1, 2], [3, 9]], [5]], [[0, 0], [1, 7]])
  d1, d2 = compare(got, want)
  assert d1.what == "read 1, float[2, 2] on AMD:1 at s.py:3 (`x.numpy()`)"
  assert (d1.values, d1.total, d1.index, d1.got, d1.want) == (1, 4, [1, 1], "9.0", "4.0")
  assert d2.what == "the tensor created at s.py:7 (`x.numpy()`) (float[4], shard 1 of 2 on AMD:1) when the program ended" and d2.index == [1]
  nan = _rec([[float("nan")]])
  assert compare(nan, nan) == []                                   # bit for bit: the same NaN is the same
  assert compare(_rec([[1], [2]]), _rec([[1]]))[0].what == "the number of reads (2 against 1)"

def test_a_confirmation_reads_as_lines():
  from hcqdsl.tinygrad.confirmation import describe
  c = {"status": "confirmed", "how": "A held until B had run", "got_as": "in the witness's order", "want_as": "in the program's order",
       "differences": [{"what": "read 2", "values": 8, "total": 16, "index": [0, 4], "got": "1.5", "want": "5.0"}]}
  assert describe(c) == ["  confirmed: A held until B had run, and the numbers differ:",
                         "    read 2: 8 of 16 values differ, first at [0, 4]: 1.5 in the witness's order, 5.0 in the program's order"]
  assert describe({"status": "not-observed", "how": "A held", "why": "w"}) == ["  not observed: A held, and every output matched: w"]
  assert describe({"status": "not-tried", "why": "w"}) == ["  not tried: w"]

def test_why_a_value_is_unseen_is_read_off_the_lifted_program():
  import hcqdsl
  from hcqdsl.tinygrad.confirm import why_unseen
  from hcqdsl.tinygrad.sanitize import Command, Finding
  text = """device g0 = AMD:0 gfx1100
buffer t on g0 size 64
buffer y on g0 size 64
buffer src on g0 size 64
buffer res on g0 size 64
kernel k(out o, in i)
queue c0 compute on g0 {
  exec k(y, t)  # @10
}
queue x0 copy on g0 {
  copy t <- src  # @20
}
queue c1 compute on g0 {
  exec k(y, src)  # @30
}
queue x1 copy on g0 {
  copy res <- y  # @40
}
host {
  submit c0
  submit x0
  submit c1
  submit x1
}
"""
  s = types.SimpleNamespace(program=hcqdsl.parse(text, "p.hcq"), text=text)
  f = Finding("race", "", [Command("copy t <- src", "x0", "AMD", "", [], ring="copy0_gpu0", offset=20),
                           Command("exec k(y, t)", "c0", "AMD", "", [], ring="comp_gpu0", offset=10)])
  assert why_unseen(s, f) == "what c0's racing command wrote (y[0:64]) is overwritten by c1's `exec k(y, src)` before anything reads it"
  s2 = types.SimpleNamespace(program=hcqdsl.parse(text.replace("exec k(y, src)", "exec k(res, src)"), "p.hcq"),
                             text=text.replace("exec k(y, src)", "exec k(res, src)"))
  assert why_unseen(s2, f) is None   # x1 copies `out` out: it is read

def test_whose_code_builds_the_missing_order():
  from hcqdsl.tinygrad.memnames import MemoryNames
  from hcqdsl.tinygrad.sanitize import Command, Finding
  cap = types.SimpleNamespace(path_kind="hcq", host=[{"op": "submit", "queue": "comp_gpu0", "start": 0, "length": 10},
                                                    {"op": "submit", "queue": "copy0_gpu0", "start": 0, "length": 10}], steps=lambda: 2)
  f = Finding("race", "", [Command("copy a <- b", "copy0_gpu0", "AMD", "copy (a <- b)", [], ring="copy0_gpu0", offset=3),
                           Command("exec k(b)", "comp_gpu0", "AMD", "kernel k(out float[4])", [], ring="comp_gpu0", offset=4)])
  names = MemoryNames(cap)
  assert names.whose(f).startswith("tinygrad's eager path submitted them") and names.whose(f).endswith(
    "copy0_gpu0 (copy on AMD) should wait for comp_gpu0 (kernel k(out float[4]) on AMD)")
  names.graph_windows.append((1, 2))   # the copy was submitted inside an HCQGraph call
  assert names.whose(f).startswith("tinygrad's HCQGraph (runtime/graph/hcq.py)")
  cap.path_kind = "hcq2"
  assert names.whose(f).startswith("tinygrad's hcq2 planner")
  assert names.whose(Finding("deadlock", "", f.commands)) is None

# ---- --reproduce (tinygrad/reproduce.py)

def test_delta_debugging_finds_a_one_minimal_subset():
  from hcqdsl.tinygrad.reproduce import ddmin
  calls = []
  def needs(items):   # the failure needs 3 and 7 together
    calls.append(list(items))
    return 3 in items and 7 in items
  got, made = ddmin(list(range(10)), needs, 100)
  assert got == [3, 7] and made == len(calls) and made < 30
  assert ddmin(list(range(10)), needs, 2)[1] == 2   # the budget holds

def test_the_script_as_statements_and_shorter_loops():
  from hcqdsl.tinygrad.reproduce import statements, shorter_loops
  src = '"""doc"""\nimport numpy as np\n\n@deco\ndef f(x):\n  return x\n\nif __name__ == "__main__":\n  for i in range(3):\n    print(f(i))\n'
  st = statements(src)
  assert st == ["import numpy as np", "@deco\ndef f(x):\n  return x", "for i in range(3):\n  print(f(i))"]
  assert [c[2].splitlines()[0] for c in shorter_loops(st)] == ["for i in range(1):", "for i in range(2):"]

def test_a_reproduction_is_a_standalone_tinygrad_test():
  import ast
  from hcqdsl.tinygrad.reproduce import test_source
  reads = [{"source": "print(out.numpy())", "fmt": "f", "data": base64.b64encode(np.arange(4, dtype=np.float32).tobytes()).decode()}]
  text = test_source("race: a and b", "doc", ["from tinygrad import Tensor", "out = Tensor([1.0]).realize()"], reads, "lag",
                     {"device": "AMD:1", "engine": "compute", "index": 0}, "DEV=MOCKKFD+AMD python -m pytest test/t.py")
  tree = ast.parse(text)
  imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
              for a in (n.names if isinstance(n, ast.Import) else [ast.alias(n.module or "")])}
  assert imported <= {"gc", "sys", "threading", "time", "unittest", "numpy", "tinygrad", "test"}, imported   # only tinygrad (and its mock)
  assert "WANT = [\n  ('print(out.numpy())', 'float32', [0.0, 1.0, 2.0, 3.0]),\n]" in text
  assert "restore = lag_queue('AMD:1', 'compute', 0)" in text and text.rstrip().endswith("unittest.main()")

@needs_mock
@pytest.mark.slow   # (about 2 minutes: the sanitized run, its confirmation, 24 candidates of two runs each)
def test_a_reproduction_fails_unpatched_and_passes_patched(tmp_path):
  import subprocess, sys
  from mock_gpu import env, ROOT
  r = run_hcqdsl("sanitize", "--reproduce", tmp_path, "--confirm-limit", "1", "--format", "json", WORKLOADS / "hcq2_assign.py", hcq2=True)
  (rep,) = report(r)["reproductions"]
  assert rep["failure"].startswith("read 2 (`if read: print(out.numpy()[:4])    # 2 * it + 1`): 16 of 16 values wrong, first at [0]: ")
  assert rep["failure"].endswith("got 5.0, want 3.0")
  assert rep["statements"][1] < rep["statements"][0]
  test = rep["path"]
  def run(*patch):
    return subprocess.run([sys.executable, str(ROOT / "tests" / "upstream" / "patched.py"), *patch, test], capture_output=True, text=True,
                          env=env(hcq2=True), timeout=600)
  unpatched, patched = run(), run("--patch", str(ROOT / "docs" / "findings" / "hcq2-cross-device-reuse.patch"))
  assert unpatched.returncode == 1 and "AssertionError: read 2" in unpatched.stderr, unpatched.stderr[-2000:]
  assert patched.returncode == 0, patched.stderr[-2000:]

@needs_mock
def test_a_kernel_reading_part_of_its_argument_is_no_race(tmp_path):
  # fuzz's false positive (docs/fuzz.md): device 0's kernel reads the first rows of x's copy in an arena hcq2 reuses
  # for the gather; the capture records how much of each argument a kernel touches (`extent`), the lift reads no more
  r = run_hcqdsl("sanitize", "--keep", tmp_path, WORKLOADS / "fuzz_gather.py", hcq2=True)
  assert r.returncode == 0 and r.stdout.splitlines()[-1].startswith("ok: 0 errors"), r.stdout[-3000:]
  man = json.loads((tmp_path / "capture.json").read_text())
  extents = [p.get("extent") for k in man["kernels"] for p in k["params"] if p.get("name") is None]
  assert any(e is not None for e in extents) and all(e is None or e > 0 for e in extents)
