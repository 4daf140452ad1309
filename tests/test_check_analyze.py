"""`hcqdsl check`'s dynamic analyses, validation-suite style: each case is a small program and the exact set of codes
it must produce (a positive and a negative of every rule), plus exact message texts for the key reports."""
import os, re
import pytest
from hcqdsl import parse
from hcqdsl.check import check_text
from hcqdsl.check.pipeline import analyze
from hcqdsl.diagnostics import render_text

HDR = "device gpu0 = AMD:0 gfx1100\ndevice gpu1 = AMD:1 gfx1100\nbuffer a on gpu0 size 4K\nbuffer b on gpu1 size 4K\n" \
      "signal s0 on gpu0\nsignal s1 on gpu0\nvar kick\nkernel fill(out dst)\nkernel use(in src)\nkernel upd(inout x)\n"

def codes(body: str, launches: int = 2, arch: str = "gfx1100", **kw) -> set:
  return {d.code for d in diags(body, launches, arch, **kw)}

def diags(body: str, launches: int = 2, arch: str = "gfx1100", **kw):
  return [d for d in analyze(parse(HDR.replace("gfx1100", arch) + body, "t.hcq"), launches, **kw) if d.severity != "note"]

# gpu1's kernel reads `a` (bringing it into gpu1's L2), signals; gpu0 overwrites it; gpu1 waits and reads it again
ROUND_TRIP = ("queue c1 compute on gpu1 {\n exec use(a)\n signal s1 = 1\n wait s0 >= 1\n{inv} exec use(a)\n}\n"
              "queue c0 compute on gpu0 {\n wait s1 >= 1\n exec fill(a)\n signal s0 = 1\n}\n")

# (name, program body, expected codes[, launches[, arch of both devices]])
CASES = [
  # deadlock
  ("cycle", "queue c0 compute on gpu0 {\n wait s1 >= 1\n signal s0 = 1\n}\nqueue c1 compute on gpu0 {\n wait s0 >= 1\n signal s1 = 1\n}\n",
   {"deadlock"}),
  ("cycle_broken", "queue c0 compute on gpu0 {\n signal s0 = 1\n wait s1 >= 1\n}\nqueue c1 compute on gpu0 {\n wait s0 >= 1\n signal s1 = 1\n}\n",
   set()),
  ("unwritten", "queue c0 compute on gpu0 {\n wait s0 >= 1\n}\n", {"deadlock"}),
  ("unwritten_init_ok", "queue c0 compute on gpu0 {\n wait s0 >= 0\n}\n", {"redundant-wait"}),
  ("self_wait", "queue c0 compute on gpu0 {\n wait s0 >= kick\n signal s0 = kick\n}\n", {"deadlock"}),
  ("host_before_submit", "queue c0 compute on gpu0 {\n signal s0 = kick\n}\nhost {\n wait s0 >= kick\n submit c0\n}\n", {"deadlock"}),
  ("host_after_submit", "queue c0 compute on gpu0 {\n signal s0 = kick\n}\nhost {\n submit c0\n wait s0 >= kick\n}\n", set()),
  ("second_launch_only", "queue c0 compute on gpu0 {\n wait s0 >= 2\n}\nhost {\n signal s0 = kick\n}\n", set()),
  ("value_not_reached", "queue c0 compute on gpu0 {\n signal s0 = 1\n}\nqueue c1 compute on gpu0 {\n wait s0 >= kick\n}\n",
   {"deadlock"}),
  # race
  ("no_epoch", "queue c0 compute on gpu0 {\n exec fill(a)\n signal s0 = kick\n}\nqueue c1 compute on gpu0 {\n wait s0 >= kick\n exec use(a)\n}\n",
   {"race"}),
  ("no_epoch_one_launch",
   "queue c0 compute on gpu0 {\n exec fill(a)\n signal s0 = kick\n}\nqueue c1 compute on gpu0 {\n wait s0 >= kick\n exec use(a)\n}\n",
   set(), 1),
  ("epoch_finalizer", "queue c0 compute on gpu0 {\n epoch\n exec fill(a)\n signal s0 = kick\n}\nqueue c1 compute on gpu0 {\n epoch\n"
   " wait s0 >= kick\n exec use(a)\n signal gpu0.timeline = gpu0.epoch\n}\n", set()),
  ("read_read", "queue c0 compute on gpu0 {\n exec use(a)\n}\nqueue c1 compute on gpu0 {\n exec use(a)\n}\n", set()),
  ("write_read", "queue c0 compute on gpu0 {\n exec fill(a)\n}\nqueue c1 compute on gpu0 {\n exec use(a)\n}\n", {"race"}),
  ("inout_read", "queue c0 compute on gpu0 {\n exec upd(a)\n}\nqueue c1 compute on gpu0 {\n exec use(a)\n}\n", {"race"}),
  ("disjoint", "queue c0 compute on gpu0 {\n exec fill(a[0:2K])\n}\nqueue c1 compute on gpu0 {\n exec fill(a[2K:])\n}\n", set()),
  ("overlap", "queue c0 compute on gpu0 {\n exec fill(a[0:2K])\n}\nqueue c1 compute on gpu0 {\n exec fill(a[2K-1:])\n}\n".replace("2K-1", "2047"),
   {"race"}),
  ("wide_after_disjoint", "queue c0 compute on gpu0 {\n exec fill(a[0:1K])\n exec fill(a[2K:3K])\n}\nqueue c1 compute on gpu0 {\n"
   " exec use(a[512:2560])\n}\n", {"race"}),
  ("copy_src_dst", "queue x0 copy on gpu0 {\n copy a[0:1K] <- a[1K:2K]\n}\nqueue x1 copy on gpu0 {\n copy a[2K:3K] <- a[1K:2K]\n}\n", set()),
  ("copy_dst_src", "queue x0 copy on gpu0 {\n copy a[0:1K] <- a[1K:2K]\n}\nqueue x1 copy on gpu0 {\n copy a[2K:3K] <- a[0:1K]\n}\n",
   {"race"}),
  ("same_queue", "queue c0 compute on gpu0 {\n exec fill(a)\n exec use(a)\n}\n", set()),
  # signal-race / non-monotonic (outside the fragment: decided by exploration)
  ("two_writers", "queue c0 compute on gpu0 {\n signal s0 = 1\n}\nqueue c1 compute on gpu0 {\n signal s0 = 1\n}\nhost {\n wait s0 >= 1\n}\n",
   {"signal-race"}),
  ("two_writers_ordered", "queue c0 compute on gpu0 {\n signal s0 = 1\n}\nqueue c1 compute on gpu0 {\n wait s0 >= 1\n signal s0 = 2\n}\n"
   "host {\n wait s0 >= 2\n}\n", set(), 1),
  ("lower_under_wait", "queue c0 compute on gpu0 {\n signal s0 = 2\n signal s0 = 1\n}\nqueue c1 compute on gpu0 {\n wait s0 >= 1\n}\n",
   {"non-monotonic"}),
  ("lower_ordered", "queue c0 compute on gpu0 {\n signal s0 = 2\n signal s0 = 1\n signal s1 = 1\n}\nqueue c1 compute on gpu0 {\n"
   " wait s1 >= 1\n wait s0 >= 1\n}\n", {"redundant-wait"}, 1),
  ("hcqgraph_resets", "queue c0 compute on gpu0 {\n epoch\n wait s1 >= kick\n signal s0 = 1\n}\nqueue f0 compute on gpu0 {\n"
   " wait s1 >= kick\n wait s0 >= 1\n signal gpu0.timeline = gpu0.epoch\n}\nhost {\n wait gpu0.timeline >= gpu0.epoch - 1\n"
   " submit\n signal s0 = 0\n signal s1 = kick\n}\n", set()),
  ("hcqgraph_reset_first", "queue c0 compute on gpu0 {\n wait s1 >= kick\n signal s0 = 1\n}\nqueue f0 compute on gpu0 {\n"
   " wait s1 >= kick\n wait s0 >= 1\n signal gpu0.timeline = gpu0.epoch\n}\nhost {\n signal s0 = 0\n"
   " wait gpu0.timeline >= gpu0.epoch - 1\n submit\n signal s1 = kick\n}\n", {"deadlock", "signal-race", "non-monotonic"}),
  # overflow
  ("negative", "queue c0 compute on gpu0 {\n signal s0 = kick - 5\n}\nhost {\n wait s0 >= kick\n}\n", {"overflow"}),
  ("in_range", "queue c0 compute on gpu0 {\n signal s0 = kick - 1\n}\nhost {\n wait s0 >= kick - 1\n}\n", set()),
  ("too_big", "queue c0 compute on gpu0 {\n signal s0 = kick + 4294967295\n}\nhost {\n wait s0 >= 1\n}\n", {"overflow", "deadlock"}, 1),
  # launch 2 writes 2**32, which the 32-bit packet writes as 0: also a lowering write under the host's wait
  ("too_big_wraps", "queue c0 compute on gpu0 {\n signal s0 = kick + 4294967294\n}\nhost {\n wait s0 >= 1\n}\n",
   {"overflow", "non-monotonic", "deadlock"}),
  # warnings
  ("redundant", "queue c0 compute on gpu0 {\n signal s0 = kick\n}\nqueue c1 compute on gpu0 {\n wait s0 >= kick\n wait s0 >= kick\n}\n",
   {"redundant-wait"}),
  ("transitive", "queue c0 compute on gpu0 {\n signal s0 = kick\n}\nqueue c1 compute on gpu0 {\n wait s0 >= kick\n signal s1 = kick\n}\n"
   "queue c2 compute on gpu0 {\n wait s1 >= kick\n wait s0 >= kick\n}\n", {"redundant-wait"}),
  ("unused", "queue c0 compute on gpu0 {\n signal s0 = 1\n}\n", {"unused-signal"}),
  ("timeline_unwaited", "queue c0 compute on gpu0 {\n signal gpu0.timeline = gpu0.epoch\n}\n", set()),
  # visibility (docs/check.md, cache semantics): a kernel on gpu1 reads `a`, hands over to gpu0's writer, reads it back
  ("visibility_l2_gfx942", ROUND_TRIP.replace("{inv}", ""), {"visibility"}, 1, "gfx942"),
  ("visibility_l2_gfx942_barrier", ROUND_TRIP.replace("{inv}", " barrier\n"), set(), 1, "gfx942"),
  ("visibility_l2_gfx942_timestamp", ROUND_TRIP.replace("{inv}", " timestamp s1\n"), set(), 1, "gfx942"),
  ("visibility_l2_gfx1100_signal_invalidates", ROUND_TRIP.replace("{inv}", ""), set(), 1),
  ("visibility_l2_gfx1201_signal_invalidates", ROUND_TRIP.replace("{inv}", ""), set(), 1, "gfx1201"),
  ("visibility_l2_gfx942_first_read", "queue c0 compute on gpu0 {\n exec fill(a)\n signal s0 = 1\n}\nqueue c1 compute on gpu1 {\n"
   " wait s0 >= 1\n exec use(a)\n}\n", set(), 1, "gfx942"),
  ("visibility_hdp", "buffer w on gpu0 size 8 rewritten = u32 [1], u32 [2]\nqueue c0 compute on gpu0 {\n exec use(w)\n}\n", {"visibility"}, 1),
  ("visibility_hdp_barrier", "buffer w on gpu0 size 8 rewritten = u32 [1], u32 [2]\nqueue c0 compute on gpu0 {\n barrier\n"
   " exec use(w)\n}\n", set(), 1),
  ("visibility_hdp_host_memory", "buffer w on host size 8 rewritten = u32 [1], u32 [2]\nqueue c0 compute on gpu0 {\n exec use(w)\n}\n", set(), 1),
  ("visibility_hdp_timestamp_is_no_flush", "buffer w on gpu0 size 8 rewritten = u32 [1], u32 [2]\nqueue c0 compute on gpu0 {\n"
   " timestamp s0\n exec use(w)\n}\n", {"visibility"}, 1),
  ("same_device_no_barrier", "queue c0 compute on gpu0 {\n exec fill(a)\n signal s0 = 1\n}\nqueue c1 compute on gpu0 {\n wait s0 >= 1\n"
   " exec use(a)\n}\n", set(), 1),
]

@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_codes(case):
  name, body, want = case[:3]
  launches = case[3] if len(case) > 3 else 2
  arch = case[4] if len(case) > 4 else "gfx1100"
  assert codes(body, launches, arch) == want, render_text(diags(body, launches, arch))

def test_var_values_pin():
  body = "queue c0 compute on gpu0 {\n signal s0 = kick - 5\n}\nhost {\n wait s0 >= kick - 5\n}\n"
  assert "overflow" in codes(body)
  assert codes(body, var_values={"kick": 10}) == set()   # 5 in both launches
  assert codes(body, var_values={"kick": [10, 11]}) == set()
  assert codes(body, var_values={"kick": [10, 4]}) == {"overflow"}   # -1 in launch 2: written as 2**32-1

def test_deadlock_cycle_message():
  text = ("device gpu0 = AMD:0\nsignal s0 on gpu0\nsignal s1 on gpu0\n"
          "queue c0 compute on gpu0 {\n  wait s1 >= 1\n  signal s0 = 1\n}\n"
          "queue c1 compute on gpu0 {\n  wait s0 >= 1\n  signal s1 = 1\n}\n")
  out = render_text(list(check_text(text, "dl.hcq")), {})
  assert out == (  # once per cycle, at its first member, with an edit that breaks it
    "dl.hcq:5:3: error[deadlock]: c0 waits forever for s1 >= 1 (launch 1); s1 is stuck at 0; c1 would write s1 at line 10 "
    "(launch 1) but is itself blocked\n"
    "  dl.hcq:5:3: c0 waits for s1 >= 1 (launch 1), which c1 writes only at line 10\n"
    "  dl.hcq:9:3: c1 waits for s0 >= 1 (launch 1), which c0 writes only at line 6\n"
    "  note: cycle of waits: c0 -> c1 -> c0\n"
    "  note: fix: the cycle breaks with c1's `signal s1 = 1` (line 10) moved above its `wait s0 >= 1` (line 9)\n")

def test_deadlock_cycle_once_with_the_host_behind_it():
  text = ("device gpu0 = AMD:0\nsignal s0 on gpu0\nsignal s1 on gpu0\nvar kick\n"
          "queue c0 compute on gpu0 {\n  wait s1 >= kick\n  signal s0 = kick\n}\n"
          "queue c1 compute on gpu0 {\n  wait s0 >= kick\n  signal s1 = kick\n}\nhost {\n  submit\n  wait s1 >= kick\n}\n")
  [d] = check_text(text, "dl.hcq")
  assert [(r.span.line, r.message) for r in d.related] == [
    (6, "c0 waits for s1 >= 1 (launch 1), which c1 writes only at line 11"),
    (10, "c1 waits for s0 >= 1 (launch 1), which c0 writes only at line 7"),
    (15, "the host also waits forever for s1 >= 1 (launch 1), behind this deadlock")]
  assert d.notes == ("cycle of waits: c0 -> c1 -> c0",
                     "fix: either edit breaks the cycle: c0's `wait s1 >= kick` (line 6) waiting for "
                     "`s1 >= kick - 1` instead (what s1 already holds, the previous launch's value); or c1's "
                     "`signal s1 = kick` (line 11) moved above its `wait s0 >= kick` (line 10)")

def test_deadlock_through_submit_message():
  text = ("device gpu0 = AMD:0\nsignal done on gpu0\nvar kick\nqueue c0 compute on gpu0 {\n  signal done = kick\n}\n"
          "host {\n  wait done >= kick\n  submit c0\n}\n")
  [d] = check_text(text, "h.hcq")
  assert d.message == ("the host waits forever for done >= 1 (launch 1); done is stuck at 0; c0 would write done at line 5 "
                       "(launch 1) but is itself blocked")
  assert [(r.span.line, r.message) for r in d.related] == [
    (8, "the host waits for done >= 1 (launch 1), which c0 writes only at line 5"),
    (5, "c0 is not submitted for launch 1 until the host runs its submit at line 9")]
  assert d.extra == {"launch": 1, "queue": "the host", "signal": "done", "needed": 1, "value": 0}

def test_deadlock_unwritten_message():
  [d] = diags("queue c0 compute on gpu0 {\n wait s0 >= kick\n}\n")
  assert d.message == "c0 waits forever for s0 >= 1 (launch 1); s0 is stuck at 0, and nothing writes s0"

def test_epoch_without_finalizer():
  [d] = diags("queue c0 compute on gpu0 {\n epoch\n exec fill(a)\n}\n")
  assert (d.code, d.span.line, d.extra["launch"]) == ("deadlock", 12, 2)
  assert d.message == ("c0 waits forever for gpu0.timeline >= 1 (launch 2); gpu0.timeline is stuck at 0, and nothing "
                       "writes gpu0.timeline")
  assert "finalizer" in d.notes[0]
  assert codes("queue c0 compute on gpu0 {\n epoch\n exec fill(a)\n}\n", 1) == set()

def test_race_message_and_extra():
  [d] = diags("queue c0 compute on gpu0 {\n exec fill(a)\n signal s0 = kick\n}\nqueue c1 compute on gpu0 {\n wait s0 >= kick\n"
              " exec use(a[0:256])\n}\n")
  assert d.code == "race" and d.span.line == 12
  assert d.message == ("c0 writes a[0:4096] at line 12 (launch 2) and c1 reads a[0:256] at line 17 (launch 1) with no "
                       "happens-before order between them")
  assert [(r.span.line, r.message) for r in d.related] == [(17, "c1 reads a[0:256] here (launch 1)")]
  assert d.notes == ("c1 writes no signal after line 17: add one there, and a wait on it in c0 before line 12",)
  assert d.extra["launch"] == 2 and d.extra["queue"] == "c0" and d.extra["buffer"] == "a" and d.extra["range"] == [0, 4096]
  assert d.extra["other"] == {"launch": 1, "queue": "c1", "range": [0, 256], "line": 17, "mode": "reads"}
  assert d.extra["line"] == 12 and d.extra["mode"] == "writes"

def test_race_hint_names_existing_signal():
  [d] = [d for d in diags("queue c0 compute on gpu0 {\n exec fill(a)\n signal s0 = kick\n}\nqueue c1 compute on gpu0 {\n"
                          " exec use(a)\n}\n", 1) if d.code == "race"]
  assert d.notes == ("add `wait s0 >= kick` in c1 before line 16 (c0 signals it at line 13, after its access)",)

def test_race_reported_once_across_launches():
  ds = diags("queue c0 compute on gpu0 {\n exec fill(a)\n}\nqueue c1 compute on gpu0 {\n exec fill(a)\n}\n", 3)
  assert [(d.code, d.extra["launch"]) for d in ds] == [("race", 1)]

def test_outside_fragment_note():
  ds = diags("queue c0 compute on gpu0 {\n signal s0 = 1\n}\nqueue c1 compute on gpu0 {\n signal s0 = 1\n}\nhost {\n wait s0 >= 1\n}\n")
  [d] = ds
  assert d.code == "signal-race"
  assert "outside the fragment where happens-before is exact" in d.notes[-1] and "reachable states" in d.notes[-1]

def test_budget_exceeded_is_incomplete():
  # unordered writers (outside the fragment) and enough independent queues that exploration cannot finish
  qs = "".join(f"queue q{n} compute on gpu0 {{\n signal s0 = 1\n" + " barrier\n exec use(a)\n" * 3 + "}\n" for n in range(6))
  ds = analyze(parse(HDR + qs + "host {\n wait s0 >= 1\n}\n", "t.hcq"), 2, max_states=500)
  assert any(d.code == "incomplete" and d.severity == "note" for d in ds)
  assert "signal-race" in {d.code for d in ds}
  assert all("incomplete" in d.notes[-1] for d in ds if d.code == "signal-race")

def test_epoch_span_and_overflow_at_epoch():
  ds = diags("queue c0 compute on gpu0 {\n epoch\n}\n", var_values={"gpu0.epoch": 0})
  # epoch - 1 = -1, which the wait packet compares as 2**32-1: reported at the epoch statement, and it never holds
  assert sorted((d.code, d.span.line) for d in ds) == [("deadlock", 12), ("overflow", 12)]

# the scenario files in programs/ written for the checker: `# E: code` / `# W: code` on the reported line
MINE = ["deadlock_cycle", "deadlock_unwritten", "deadlock_host_submit", "race_missing_epoch", "race_fixed_epoch",
        "race_overlapping_ranges", "ranges_disjoint", "signal_race", "non_monotonic_lower", "hcqgraph_resets",
        "overflow_var", "redundant_wait", "unused_signal", "visibility_no_barrier", "visibility_barrier"]
ROOT = os.path.join(os.path.dirname(__file__), "..", "programs")

@pytest.mark.parametrize("name", MINE)
def test_program_markers(name):
  path = os.path.join(ROOT, name + ".hcq")
  text = open(path).read()
  want = {(n + 1, m.group(1), m.group(2)) for n, line in enumerate(text.splitlines())
          for m in re.finditer(r"#\s*([EW]):\s*([\w-]+)", line)}
  ds = check_text(text, path)
  got = {(d.span.line, "E" if d.severity == "error" else "W", d.code) for d in ds if d.severity in ("error", "warning")}
  assert got == want, render_text(ds, {path: text})

def test_racy_program_stays_fast_and_bounded():
  # 3 unsynchronized queues, 400 writes each to one buffer: every pair races; each statement reports at most
  # RACE_CAP partners, at most 1000 pairs are listed, then one summary
  body = "".join(f"queue q{n} compute on gpu0 {{\n" + " exec upd(a)\n" * 400 + "}\n" for n in range(3))
  ds = diags(body)
  races = [d for d in ds if d.code == "race"]
  assert len(races) == 1001 and races[-1].span is None and "more racing pairs" in races[-1].message

def test_shared_read_only_buffer_is_free():
  body = "".join(f"queue q{n} compute on gpu0 {{\n" + " exec use(a)\n" * 2000 + "}\n" for n in range(4))
  assert diags(body) == []

def test_incomplete_verdict_never_exits_0(tmp_path, capsys):
  # a cut-short exploration exits 1 whatever it reports, and the summary says `incomplete`
  from hcqdsl.cli import main
  qs = "".join(f"queue q{n} compute on gpu0 {{\n signal s0 = 1\n}}\n" for n in range(2))
  f = tmp_path / "inc.hcq"
  f.write_text(HDR + qs + "host {\n wait s0 >= 1\n}\n")
  assert main(["check", str(f), "--max-states", "2"]) == 1
  out = capsys.readouterr().out
  assert "note[incomplete]" in out and out.rstrip().endswith(", incomplete (raise --max-states)")
  assert main(["check", str(f)]) == 1   # complete: the signal-race
  assert not capsys.readouterr().out.rstrip().endswith("incomplete")
  assert main(["check", str(f), "--max-states", "0"]) == 2

def test_analyze_restores_numpy_hugepage_setting():
  import numpy as np
  if not hasattr(getattr(np, "_core", None), "multiarray"): pytest.skip("numpy 1.x: no hugepage setting to restore")
  from hcqdsl.check.pipeline import madvise_hugepage
  from hcqdsl import parse
  prog = parse("device d = AMD:0\nsignal s on d\nqueue q compute on d {\n  signal s = 1\n}\n", "t.hcq")
  for before in (True, False):
    madvise_hugepage(before)
    analyze(prog)
    assert madvise_hugepage(True) == before
