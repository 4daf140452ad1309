"""`check` against the reference semantics (tests/reference.py, a literal full-state explorer independent of
hcqdsl.check) on random programs at 1-4 launches: every code the semantics define, on every example."""
import pytest
from hypothesis import given, settings, HealthCheck, strategies as st
from hcqdsl import parse
from hcqdsl.check import check
from hcqdsl.check.unroll import unroll
from hcqdsl.check.hb import happens_before
from hcqdsl.check.explore import explore
from hcqdsl.check.analyses import deadlock_diags, DeadlockAnalysis, RaceAnalysis
from check_gen import programs
from reference import verdicts, from_diagnostics

CODES = ("deadlock", "race", "signal-race", "non-monotonic", "overflow")
# per launch count: generator sizes that keep the literal explorer's state space small (it has no reduction)
SIZES = {1: dict(max_queues=4, max_body=4, max_host=4, padding=2), 2: dict(max_queues=3, max_body=3, max_host=3, padding=2),
         3: dict(max_queues=3, max_body=2, max_host=3, padding=1), 4: dict(max_queues=3, max_body=2, max_host=2, padding=1)}

def agree(got: dict, want: dict, why=()) -> None:
  """`check`'s reports (from_diagnostics) against the reference's verdicts, on each error's lines and launches: the
  same set of errors, each at the first launch where it shows, and every (line, launch) a report names (a race's
  two accesses, a deadlock's related waits, a lowering write's uses) an instance the reference semantics have."""
  assert got["incomplete"] == 0, why
  for code in CODES:
    if code == "deadlock":   # every blocked wait line; the first launch of those reported as a cause
      assert got[code].keys() == want[code].keys(), (code, *why)
      assert all(k is None or k == want[code][line] for line, k in got[code].items()), (code, *why)
      assert all(got["deadlock@"][line] <= want["deadlock@"][line] for line in got[code]), (code, "launches", *why)
    elif code == "non-monotonic":
      assert got[code] == want[code], (code, *why)
      for line, (k, uses) in got["non-monotonic@"].items():
        first, every = want["non-monotonic@"][line]
        assert k == first and uses <= every, (code, "launches", line, *why)
    else:
      assert got[code] == want[code], (code, *why)
      if code in ("race", "signal-race"):
        assert all(got[code + "@"][key] in want[code + "@"][key] for key in got[code]), (code, "launches", *why)

def compare(text: str, launches: int) -> bool:
  """Asserts `check` and the reference agree on every code, line and launch; returns whether happens-before alone
  was exact."""
  prog = parse(text, "gen.hcq")
  agree(from_diagnostics(check(prog, launches)), verdicts(prog, launches), (launches, text))
  return happens_before(unroll(prog, launches)).exact

def _campaign(n: int, launches: int, sizes: dict, derandomize: bool = False):
  seen, exact = set(), [0, 0]
  @settings(max_examples=n, deadline=None, database=None, derandomize=derandomize, suppress_health_check=list(HealthCheck))
  @given(programs(**sizes))
  def one(text):
    exact[compare(text, launches)] += 1
    seen.add(text)
  one()
  return seen, exact

@pytest.mark.parametrize("launches", [1, 2, 3, 4])
def test_check_matches_reference(launches):
  # derandomized: the same 80 programs each run (the slow campaign below draws new ones)
  seen, (outside, inside) = _campaign(80, launches, SIZES[launches], derandomize=True)
  # every example is compared (no early return); both paths of check (happens-before, skeleton exploration) are hit
  assert len(seen) >= 70 and outside >= 5 and inside >= 5, (len(seen), outside, inside)

@pytest.mark.slow
@pytest.mark.parametrize("launches", [1, 2, 3, 4])
def test_check_matches_reference_many(launches):
  # derandomized so CI is reproducible; a fresh draw (derandomize=False) found the disagreement pinned below
  seen, (outside, inside) = _campaign(1500, launches, SIZES[launches], derandomize=True)
  assert len(seen) >= 1200 and outside >= 100 and inside >= 100, (len(seen), outside, inside)

def test_racing_padding_program_is_exact():
  # issue 11: racing accesses next to unordered signal writes used to exhaust the explorer's budget and drop verdicts
  pad = "".join(f"queue p{n} compute on g0 {{\n" + " exec k(b)\n" * 6 + "}\n" for n in range(3))
  text = ("device g0 = AMD:0\nsignal s on host\nbuffer b on g0 size 256\nkernel k(inout p)\n"
          "queue w copy on g0 {\n signal s = 1\n}\nqueue r copy on g0 {\n wait s >= 1\n}\n" + pad + "host {\n submit\n signal s = 0\n}\n")
  prog = parse(text, "pad.hcq")
  for launches in (2, 3):
    got = from_diagnostics(check(prog, launches))
    want = verdicts(prog, launches, max_states=10**6)
    assert got["incomplete"] == 0
    for code in CODES: assert got[code].keys() == want[code].keys() if code == "deadlock" else got[code] == want[code], code
    assert {c for c in CODES if got[c]} == {"deadlock", "non-monotonic", "race", "signal-race"}

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(1, 3))
def test_analyze_total_on_bigger_programs(data, launches):
  # bigger than a tiny budget: every path (incomplete verdicts included) must still produce diagnostics
  from hcqdsl.check.analyze import analyze
  text = data.draw(programs(max_queues=6, max_body=8))
  ds = analyze(parse(text, "gen.hcq"), launches, max_states=200)
  assert all(d.span is not None or d.code in ("incomplete", "race") for d in ds)
  assert sum(d.code == "incomplete" for d in ds) <= 1

def _lines(diags): return {(d.code, d.span.line) for d in diags}

def compare_hb_explorer(text: str, launches: int, max_states: int = 60_000):
  """Symbolic programs (outside tests/reference.py's language): the happens-before pass against the skeleton
  explorer inside the fragment. None if exploration was cut short."""
  prog = parse(text, "gen.hcq")
  u = unroll(prog, launches)
  t = happens_before(u)
  e = explore(u, max_states)
  if not e.complete: return None
  if t.exact:
    fast_dl = {key for key, _, _ in deadlock_diags(u, t.done, t.values)} if t.blocked else set()
    slow_dl = {key for done, vals in e.deadlocks for key, _, _ in deadlock_diags(u, done, vals)}
    assert (fast_dl, set(t.races)) == (slow_dl, set(e.races)), text
    assert not e.signal_races and not e.nonmono, text
    fast = DeadlockAnalysis().run(u, [(t.done, t.values)] if t.blocked else []) + RaceAnalysis().run(u, t.races)
    slow = DeadlockAnalysis().run(u, e.deadlocks) + RaceAnalysis().run(u, e.races)
    assert _lines(fast) == _lines(slow), text
  return t.exact

def test_hb_matches_explorer_symbolic():
  """Symbolic launches (listed var values, rebound and rewritten buffers, patched kernel arguments) in both the
  one-pass analysis and the exhaustive explorer; most generated programs must be compared, not skipped."""
  seen = {"compared": 0, "total": 0}
  @settings(max_examples=120, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
  @given(st.data(), st.integers(1, 3))
  def each(data, launches):
    text = data.draw(programs(symbolic=True))
    seen["total"] += 1
    if compare_hb_explorer(text, launches) is not None: seen["compared"] += 1
  each()
  assert seen["compared"] >= 0.6 * seen["total"], seen

# ---- polls: the word's data and the `write`s into it decide them; exploration is the verdict, the reference the oracle

POLL_SIZES = {1: dict(max_queues=3, max_body=4, max_host=3, padding=1, polls=True),
              2: dict(max_queues=3, max_body=3, max_host=2, padding=1, polls=True),
              3: dict(max_queues=2, max_body=3, max_host=2, polls=True)}

def _poll_campaign(n: int, launches: int, derandomize: bool) -> tuple:
  seen, counts = set(), {"poll": 0, "deadlock": 0, "race": 0}
  @settings(max_examples=n, deadline=None, database=None, derandomize=derandomize, suppress_health_check=list(HealthCheck))
  @given(programs(**POLL_SIZES[launches]))
  def one(text):
    compare(text, launches)
    seen.add(text)
    if "  poll " in text:
      counts["poll"] += 1
      got = from_diagnostics(check(parse(text, "gen.hcq"), launches))
      lines = text.split("\n")
      polled = lambda n: n is not None and lines[n - 1].lstrip().startswith(("poll ", "write "))
      counts["deadlock"] += any(lines[n - 1].lstrip().startswith("poll ") for n in got["deadlock"])
      counts["race"] += any(polled(n) for key in got["race"] for n in key[0])
  one()
  return seen, counts

@pytest.mark.parametrize("launches", [1, 2, 3])
def test_check_matches_reference_with_polls(launches):
  seen, counts = _poll_campaign(80, launches, derandomize=True)
  # every example compared; a quarter or more have a poll, and polls that deadlock and races on polled words and
  # writes show up
  assert len(seen) >= 70 and counts["poll"] >= 20 and counts["deadlock"] >= 5 and counts["race"] >= 2, (len(seen), counts)

@pytest.mark.slow
@pytest.mark.parametrize("launches", [1, 2, 3])
def test_check_matches_reference_with_polls_many(launches):
  seen, counts = _poll_campaign(800, launches, derandomize=True)
  assert len(seen) >= 700 and counts["poll"] >= 200 and counts["deadlock"] >= 50 and counts["race"] >= 30, (len(seen), counts)

# A wait blocked behind a deadlock whose cycle runs through a queue the host has not submitted: each was missed at
# some launch counts (the first at 3 and 4 launches, found by a fresh draw of the campaign). The cause's report drops
# the wait when the cause is named by the shortest cycle from the wait reached first ({q1, host} from q1) while the
# host's own report names its self-loop ({host}): no report claimed the first, and the analysis skipped a group with
# no report. Causes are now strongly connected components of the wait-for graph, and a cause no report claims is
# reported at its first wait.
BEHIND_AN_UNSUBMITTED_QUEUE = {
  "timeline_lowered": ("device gpu0 = AMD:0\nbuffer b0 on gpu0 size 64\nsignal s0 on gpu0\nvar kick\nkernel rd(in x)\n"
    "kernel wr(out x)\nkernel rw(inout x)\nkernel sc(inout x, i32 n)\nqueue q0 copy on gpu0 {\n  wait s0 >= 0\n}\n"
    "queue q1 copy on gpu0 {\n  signal gpu0.timeline = kick - 2\n  signal s0 = kick + 1\n}\nqueue q2 copy on gpu0 {\n"
    "  epoch\n  wait s0 >= 0\n}\nhost {\n  signal s0 = kick\n  wait s0 >= kick + 1\n}\n"),
  # the same, one launch later: missed at 4 launches only
  "timeline_lowered_later": ("device gpu0 = AMD:0\nsignal s0 on gpu0\nvar kick\nqueue q1 compute on gpu0 {\n"
    "  signal gpu0.timeline = kick - 3\n  signal s0 = kick + 1\n}\nqueue q2 compute on gpu0 {\n  epoch\n}\n"
    "host {\n  signal s0 = kick\n  wait s0 >= kick + 1\n}\n"),
  # the host waits before its submit: missed at every launch count
  "submit_after_wait": ("device gpu0 = AMD:0\nsignal s0 on gpu0\nsignal t on gpu0\nvar kick\nqueue q1 copy on gpu0 {\n"
    "  signal t = kick - 1\n  signal s0 = kick + 1\n}\nqueue q2 copy on gpu0 {\n  wait t >= kick\n}\n"
    "host {\n  signal s0 = kick\n  wait s0 >= kick + 1\n  submit q1\n}\n"),
  # across devices: the waiter on gpu0 needs the next launch of gpu1's queue
  "other_device": ("device gpu0 = AMD:0\ndevice gpu1 = AMD:1\nsignal done on gpu1 = 1\nvar kick\nqueue r compute on gpu1 {\n"
    "  signal gpu1.timeline = kick - 1\n  signal done = kick\n}\nqueue w compute on gpu0 {\n  wait gpu1.timeline >= kick\n}\n"
    "host {\n  wait done >= kick\n  submit r\n  signal done = kick\n}\n"),
}

@pytest.mark.parametrize("launches", [2, 3, 4])
@pytest.mark.parametrize("name", sorted(BEHIND_AN_UNSUBMITTED_QUEUE))
def test_deadlock_behind_an_unsubmitted_queue(name, launches):
  prog = parse(BEHIND_AN_UNSUBMITTED_QUEUE[name], f"{name}.hcq")
  got, want = from_diagnostics(check(prog, launches)), verdicts(prog, launches)
  agree(got, want, (name, launches))
  # the waiter is blocked, at the same launch counts as in the reference, and so is the cause it sits behind
  assert len(want["deadlock"]) == (1 if (name, launches) == ("timeline_lowered_later", 2) else 2), want["deadlock"]
