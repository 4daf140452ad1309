"""`run --trace`: the Trace Event Format's rules (what Perfetto's JSON importer and chrome://tracing require) on the
trace of every program in programs/ that runs, and what a reader of the trace should find in it."""
import json, pathlib
from collections import defaultdict
from hcqdsl.check import parse_with_diagnostics
from hcqdsl.diagnostics import has_errors
from hcqdsl.runtime import run
from hcqdsl.cli import main

PROGRAMS = sorted((pathlib.Path(__file__).parent.parent / "programs").glob("*.hcq"))
PHASES = {"X", "M", "s", "f", "C", "i"}
METADATA = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}

def validate(trace: dict) -> dict:
  """Assert the trace-event rules; returns counts by phase."""
  json.dumps(trace, allow_nan=False)   # plain JSON: no NaN or infinity
  assert set(trace) >= {"traceEvents"} and trace.get("displayTimeUnit", "ms") in ("ms", "ns")
  ev, count = trace["traceEvents"], defaultdict(int)
  named_p, named_t, used, slices, flows = set(), set(), set(), defaultdict(list), defaultdict(list)
  for e in ev:
    ph = e["ph"]
    count[ph] += 1
    assert ph in PHASES, e
    assert type(e["pid"]) is int and type(e.get("tid", 0)) is int and isinstance(e["name"], str), e
    if ph == "M":
      assert e["name"] in METADATA and isinstance(e["args"], dict), e
      if e["name"] == "process_name":
        assert isinstance(e["args"]["name"], str)
        named_p.add(e["pid"])
      if e["name"] == "thread_name":
        assert isinstance(e["args"]["name"], str)
        named_t.add((e["pid"], e["tid"]))
      continue
    assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
    if ph == "X":
      assert isinstance(e["dur"], (int, float)) and e["dur"] > 0, e
      slices[e["pid"], e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
      used.add((e["pid"], e["tid"]))
    elif ph in "sf":
      assert e["cat"] and "id" in e, e
      flows[e["cat"], e["id"]].append(e)
      used.add((e["pid"], e["tid"]))
    elif ph == "C": assert e["args"] and all(isinstance(v, (int, float)) for v in e["args"].values()), e
    elif ph == "i": assert e.get("s", "t") in ("g", "p", "t"), e
  for pid, tid in used: assert pid in named_p and (pid, tid) in named_t, (pid, tid)
  for key, pair in flows.items():
    assert sorted(x["ph"] for x in pair) == ["f", "s"], key     # one start, one end per id
    s, f = sorted(pair, key=lambda x: x["ph"] == "f")
    assert s["ts"] <= f["ts"], (s, f)                           # never backwards in time
    for x in (s, f):                                            # each end inside a slice of its track (binding)
      assert any(a <= x["ts"] <= b for a, b in slices[x["pid"], x["tid"]]), x
    assert f.get("bp") == "e"
  return count

def runnable():
  out = []
  for p in PROGRAMS:
    prog, diags = parse_with_diagnostics(p.read_text(), str(p))
    if prog is not None and not has_errors(diags): out.append((p, prog))
  return out

def test_every_program_traces_to_the_format():
  progs, totals = runnable(), defaultdict(int)
  for path, prog in progs:
    r = run(prog, launches=2, trace=True, kernel_timeout=None)
    for ph, n in validate(r.trace).items(): totals[ph] += n
  # most of programs/ runs, and the traces have every kind of event
  # (the others have syntax, name, bounds or overflow errors: nothing to run)
  assert len(progs) >= 45 and len(progs) >= len(PROGRAMS) - 11, len(progs)
  assert all(totals[ph] > 50 for ph in PHASES), totals

def test_trace_names_processes_threads_and_links_writes_to_waits(tmp_path):
  out = tmp_path / "t.json"
  assert main(["run", "programs/run_pipeline.hcq", "--launches", "2", "--trace", str(out)]) == 0
  ev = json.loads(out.read_text())["traceEvents"]
  names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["name"] == "thread_name"}
  procs = {e["pid"]: e["args"]["name"] for e in ev if e["name"] == "process_name"}
  assert sorted(procs.values()) == ["gpu0", "host"]
  assert {procs[p] + "/" + q for (p, _), q in names.items()} >= {"host/host", "gpu0/c0"}
  launches = [e["name"] for e in ev if e["ph"] == "i" and e["s"] == "g"]
  assert launches == ["launch 1", "launch 2"]
  assert any(e["ph"] == "i" and e["name"].startswith("submit") for e in ev)
  counters = {e["name"] for e in ev if e["ph"] == "C"}
  assert "signal ready" in counters and "signal gpu0.timeline" in counters
  assert sum(e["ph"] == "s" for e in ev) == sum(e["ph"] == "f" for e in ev) > 4

def test_a_hangs_trace_shows_the_blocked_waits(tmp_path):
  """Each queue (or the host) blocked in a hang is a `blocked` slice on its track up to the hang, named by its
  statement, with what it waits for and what could release it (issue 37: before, a hang's trace ended at the last
  packet that ran, and the waits that never passed were not in it)."""
  out = tmp_path / "t.json"
  assert main(["run", "programs/run_deadlock.hcq", "--trace", str(out), "--no-check"]) == 1
  trace = json.loads(out.read_text())
  validate(trace)
  ev = trace["traceEvents"]
  names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["name"] == "thread_name"}
  blocked = {names[e["pid"], e["tid"]]: e for e in ev if e.get("cat") == "hang" and e["ph"] == "X"}
  assert {q: (e["name"], e["args"]["waits"], e["args"]["line"]) for q, e in blocked.items()} == {
    "q0": ("blocked: wait t >= 1", "waits t >= 1, value now 0", 8), "q1": ("blocked: wait s >= 1", "waits s >= 1, value now 0", 13)}
  assert blocked["q0"]["args"]["release"] == "could be released by q1's `signal t = 1` at line 14 (q1 is blocked at line 13)"
  hang = next(e for e in ev if e["ph"] == "i" and e["name"] == "hang")
  assert all(e["ts"] <= hang["ts"] < e["ts"] + e["dur"] for e in blocked.values())
  # a host blocked in a wait that times out: its slice is on the host's track
  r = run(parse_with_diagnostics(pathlib.Path("programs/host_wait_64bit.hcq").read_text(), "h.hcq")[0], launches=1, trace=True)
  assert r.hang is not None and [e["name"] for e in r.trace["traceEvents"] if e.get("cat") == "hang" and e["ph"] == "X"] == \
         [f"blocked: {r.hang.blocked[0].stmt}"]
