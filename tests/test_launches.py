"""`launches` clauses (docs/language.md, "Launch ranges"): a queue or host block that takes part in some launches only.
Parsing (the grammar; the fast path leaves such text to it), the canonical form, the static checks' exact messages."""
from __future__ import annotations
import pytest
import hcqdsl
from hcqdsl.lang.parse import parse_syntax
from hcqdsl.lang.format import format_program
from hcqdsl.lang.scan import scan
from hcqdsl.ir import Queue, Host, in_launches

HEAD = "device gpu0 = AMD:0\nsignal s on gpu0\nbuffer b on host size 8\n"

PROGRAM = HEAD + """queue w0 compute on gpu0 launches 1 {
  signal s = 1
}

queue w1 compute on gpu0 launches 2..3 {
  wait s >= 1
}

host launches 1 {
  submit w0
}

host launches 2.. {
  write b[0:4] = u32 [7], u32 [8]
  submit w1
}
"""

def test_parse_and_format_round_trip():
  prog, diags = parse_syntax(PROGRAM, "p.hcq")
  assert diags == [] and prog is not None
  blocks = [d for d in prog.decls if isinstance(d, (Queue, Host))]
  assert [d.launches for d in blocks] == [(1, 1), (2, 3), (1, 1), (2, None)]
  text = format_program(prog)
  again, _ = parse_syntax(text, "p.hcq")
  assert again == prog and format_program(again) == text
  assert "queue w1 compute on gpu0 launches 2..3 {" in text and "host launches 2.. {" in text and "host launches 1 {" in text
  # `launches 3..3` is `launches 3`; `launches` stays a name everywhere else
  prog, _ = parse_syntax(HEAD + "queue launches compute on gpu0 launches 3..3 { signal s = 1 }\n", "p.hcq")
  assert format_program(prog).splitlines()[-3] == "queue launches compute on gpu0 launches 3 {"

def test_fast_path_leaves_clauses_to_the_grammar():
  assert scan(PROGRAM, "p.hcq", clean=True) is None
  assert scan(HEAD + "host {\n  submit\n}\n", "p.hcq", clean=True) is not None   # (no clause: the fast path's)

def test_in_launches():
  assert [in_launches(None, k) for k in (1, 9)] == [True, True]
  assert [in_launches((2, 3), k) for k in (1, 2, 3, 4)] == [False, True, True, False]
  assert [in_launches((2, None), k) for k in (1, 2, 99)] == [False, True, True]

@pytest.mark.parametrize("clause, message", [
  ("launches {", "p.hcq:4:34: error[syntax]: expected a number after `launches`, found `{`"),
  ("launches x {", "p.hcq:4:34: error[syntax]: expected a number after `launches`, found `x`"),
  ("launches 2K {", "p.hcq:4:34: error[syntax]: a size suffix (`K`) is only allowed on sizes and byte ranges"),
  ("launch 2 {", "p.hcq:4:25: error[syntax]: expected `launches` or `{` after the device name, found `launch` (did you mean `launches`?)"),
  ("launches 0 {", "p.hcq:4:25: error[bounds]: `launches 0`: launches are numbered from 1 (there is no launch 0)"),
  ("launches 0..3 {", "p.hcq:4:25: error[bounds]: `launches 0..3`: launches are numbered from 1 (there is no launch 0)"),
  ("launches 5..2 {", "p.hcq:4:25: error[bounds]: `launches 5..2` is empty: it ends before it starts (`launches 2..5`?)"),
  ("launches 2..70000 {", "p.hcq:4:25: error[bounds]: `launches 2..70000`: launch numbers are 1 .. 65536 (the most launches a command "
   "checks or runs)"),
  ("launches 4.. {", "p.hcq:4:25: error[bounds]: queue `q` takes part in launches 4.. only, past the 3 launches asked for: it never "
   "runs (give at least 4 launches)"),
])
def test_range_errors(clause, message):
  text = HEAD + f"queue q compute on gpu0 {clause} signal s = 1 }}\n"
  diags = hcqdsl.check_text(text, "p.hcq", launches=3)
  assert [str(d).splitlines()[0] for d in diags if d.severity == "error"] == [message]

def test_host_block_past_the_launches():
  diags = hcqdsl.check_text(HEAD + "host launches 9 { signal s = 1 }\n", "p.hcq", launches=3)
  assert [str(d).splitlines()[0] for d in diags] == [
    "p.hcq:4:6: error[bounds]: this host block takes part in launches 9 only, past the 3 launches asked for: it never runs "
    "(give at least 9 launches)"]

def test_host_write_lists_its_blocks_launches():
  """A host write lists one entry per launch its block runs in, from the block's first launch."""
  ok = HEAD + "host launches 2..3 { write b[0:4] = u32 [1], u32 [2] }\n"
  assert [d for d in hcqdsl.check_text(ok, "p.hcq", launches=3) if d.severity == "error"] == []
  assert [d for d in hcqdsl.check_text(ok, "p.hcq", launches=5) if d.severity == "error"] == []   # (its range ends at 3)
  short = HEAD + "host launches 2.. { write b[0:4] = u32 [1], u32 [2] }\n"
  assert [str(d).splitlines()[0] for d in hcqdsl.check_text(short, "p.hcq", launches=4)] == [
    "p.hcq:4:21: error[bounds]: the host's write of `b[0:4]` lists bytes for 2 launches, fewer than its block's launches 2..4 in "
    "the 4 asked for"]

def test_several_host_blocks_submit_once_per_launch():
  """Two host blocks may submit one queue in launches they do not share; where they share one, it is submitted twice."""
  q = "queue q compute on gpu0 { signal s = 1 }\n"
  ok = HEAD + q + "host launches 1 { submit q }\nhost launches 2.. { submit q }\n"
  assert [d for d in hcqdsl.check_text(ok, "p.hcq", launches=3) if d.severity == "error"] == []
  bad = HEAD + q + "host launches 1..2 { submit q }\nhost launches 2.. { submit q }\n"
  assert [str(d).splitlines()[0] for d in hcqdsl.check_text(bad, "p.hcq", launches=3)] == [
    "p.hcq:6:28: error[name]: queue `q` is already submitted at line 5 (both run in launch 2)"]
  both = HEAD + q + "host { submit q }\nhost { submit q }\n"
  assert [str(d).splitlines()[0] for d in hcqdsl.check_text(both, "p.hcq", launches=3)] == [
    "p.hcq:6:15: error[name]: queue `q` is already submitted at line 5"]
  # a queue that takes part in neither shared launch: no conflict
  nq = HEAD + "queue q compute on gpu0 launches 1 { signal s = 1 }\nhost launches 1.. { submit q }\nhost launches 2.. { submit q }\n"
  assert [d for d in hcqdsl.check_text(nq, "p.hcq", launches=3) if d.severity == "error"] == []

# ---- check: a block outside its launches is not there (docs/language.md); the reference semantics are the oracle

def test_check_matches_reference_with_clauses():
  """`check` against tests/reference.py (a literal full-state explorer with its own reading of the clauses) on
  generated programs whose queues and host blocks take part in some launches only, the host block sometimes split in
  two: every error at the same lines and first launches, on both of check's paths."""
  from oracle_campaign import campaign
  exact = explored = errors = 0
  for launches, polls in ((2, False), (3, False), (2, True)):
    s = campaign(60, launches, polls=polls, clauses=launches)
    assert not s.disagreements, "\n\n".join(f"{why}\n{text}" for text, why in s.disagreements[:3])
    assert s.programs == 60, s.row()
    exact, explored, errors = exact + s.exact, explored + s.explored, errors + sum(s.errors.values())
  assert exact >= 100 and explored >= 20 and errors >= 200, (exact, explored, errors)   # (measured: 146, 34, 392)

def test_hb_executions_and_explorer_agree_with_clauses():
  """Symbolic programs with clauses (listed vars, rebound and rewritten buffers, patched kernel arguments): the direct
  execution equals the loop wherever it takes a program, and happens-before equals the skeleton explorer."""
  from hypothesis import given, settings, HealthCheck, strategies as st
  from hcqdsl.check.unroll import unroll
  from check_gen import programs
  from check_agree import same_execution, compare_hb_explorer
  seen = {"total": 0, "direct": 0, "explorer": 0, "partial": 0}
  @settings(max_examples=120, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
  @given(st.data(), st.integers(1, 3))
  def each(data, launches):
    text = data.draw(programs(symbolic=True, clauses=launches))
    prog = hcqdsl.parse(text, "gen.hcq")
    seen["total"] += 1
    seen["partial"] += unroll(prog, launches).partial
    seen["direct"] += same_execution(unroll(prog, launches), text)
    seen["explorer"] += compare_hb_explorer(text, launches) is not None
  each()
  assert seen["partial"] >= 0.4 * seen["total"] and seen["direct"] >= 20 and seen["explorer"] >= 0.6 * seen["total"], seen

# ---- compile, run, disasm and lift: each queue's and host step's launches are in the image

RUNS = """device gpu0 = {vendor}:0
signal s on gpu0
buffer b on gpu0 size 64
buffer h on host size 16
kernel k(inout x) = c "void k(unsigned *x) {{ x[0] += 1; }}"
var launch
queue w0 compute on gpu0 launches 1 {{
  exec k(b[0:4])
  signal s = 1
}}
queue w1 compute on gpu0 launches 2.. {{
  wait s >= launch - 1
  exec k(b[4:8])
  signal s = launch
}}
queue c copy on gpu0 launches 3 {{
  wait s >= 3
  copy b[8:24] <- h
}}
host launches 1 {{
  submit w0
  wait s >= 1
}}
host launches 2.. {{
  write h[0:4] = u32 [5], u32 [6]
  submit
  wait s >= launch
}}
host {{
  wait s >= 1
}}
expect b[0:12] == u32 [1, 2, 6]
"""

def test_run_submits_a_block_in_its_launches_only():
  """w0 runs in launch 1 only, w1 in launches 2 and 3 (its exec twice), the copy in launch 3, carrying the host's launch-3
  bytes (its block's second list)."""
  prog = hcqdsl.parse(RUNS.format(vendor="AMD"), "runs.hcq")
  assert [d for d in hcqdsl.check(prog, 3) if d.severity == "error"] == []
  res = hcqdsl.run(prog, launches=3)
  assert res.ok, res.summary()
  import numpy as np
  assert np.frombuffer(bytes(res.memory["b"])[:12], np.uint32).tolist() == [1, 2, 6]
  with pytest.raises(hcqdsl.HcqError, match="queue `c` takes part in launches 3 only, past the 2 launches asked for"):
    hcqdsl.run(prog, launches=2)

@pytest.mark.parametrize("vendor, target", [("AMD", "gfx1100"), ("AMD", "gfx942"), ("NV", "sm_89")])
def test_image_records_launches_and_lifts_back(vendor, target, tmp_path):
  from round_trip import round_trip, image_round_trip
  from hcqdsl.vendors import compile_program, disasm_image
  from hcqdsl.target.image import Image
  prog = hcqdsl.parse(RUNS.format(vendor=vendor).replace(":0\n", f":0 {target}\n", 1), "runs.hcq")
  img = Image.from_bytes(compile_program(prog, target).to_bytes())
  assert [q.launches for q in img.queues] == [(1, 1), (2, None), (3, 3)]
  assert [h.get("launches") for h in img.host] == [(1, 1), (1, 1), (2, None), (2, None), (2, None), None]
  assert "queue w1 compute on gpu0 launches 2.. (" in disasm_image(img)
  if vendor == "NV":   # compile -> bytes -> lift -> compile: the same image
    from round_trip import layout
    from hcqdsl.lift.image import lift_image
    lifted = hcqdsl.parse(format_program(lift_image(img)), "lifted.hcq")
    assert [q.launches for q in lifted.queues] == [(1, 1), (2, None), (3, 3)]
    assert layout(compile_program(lifted, target)) == layout(img)
    return
  again = round_trip(prog, target, tmp_path)   # compile -> bytes -> disasm -> lift -> compile: the same image
  assert [q.launches for q in again.queues] == [(1, 1), (2, None), (3, 3)]
  if target == "gfx1100":   # the lift checks as the program does
    lifted = image_round_trip(prog)
    assert [h.launches for h in lifted.hosts] == [(1, 1), (2, None), None]

def test_images_without_clauses_are_unchanged():
  """A queue or host step without a clause writes no `launches` key: images of programs that use none stay byte for
  byte what they were."""
  from hcqdsl.vendors import compile_program
  prog = hcqdsl.parse(HEAD + "queue q compute on gpu0 { signal s = 1 }\nhost { submit q }\n", "p.hcq")
  assert b'"launches"' not in compile_program(prog).to_bytes()

def test_diff_compares_a_queue_in_its_launches_only():
  from hcqdsl.check.diff import diff_programs, render_changes
  a = hcqdsl.parse(RUNS.format(vendor="AMD"), "a.hcq")
  b = hcqdsl.parse(RUNS.format(vendor="AMD").replace("queue c copy on gpu0 launches 3 {", "queue c copy on gpu0 launches 2..3 {"), "b.hcq")
  text = render_changes(diff_programs(a, b, 3), "a.hcq", "b.hcq")
  assert text.splitlines()[2:6] == ["@@ launch 2, queue c", "+ wait s >= 3    (b.hcq:17)", "@@ launch 2, queue c",
                                    "+ copy b[8:24] <- h[0:16]    (b.hcq:18)"], text
  assert text.splitlines()[-1] == "2 differences: 0 in declarations, 2 in commands over 1 launch"
  # --match: the data commands of the queues in each launch (w1's exec not in launch 3 when its clause ends at 2)
  c = hcqdsl.parse(RUNS.format(vendor="AMD").replace("launches 2.. {\n  wait", "launches 2 {\n  wait"), "c.hcq")
  assert diff_programs(a, a, 3, match=True) == []
  assert [(x.launch, x.a, x.b) for x in diff_programs(a, c, 3, match=True)] == [(3, "exec k(b[4:8])", None)]

def test_graph_runs_a_block_in_its_launches_only():
  """`hcqdsl graph`'s run of the program: a queue outside its launches waits for no submit, and its statements are not
  run there (w1's wait for launch - 1 would block launch 1's picture otherwise)."""
  from hcqdsl.graph import signal_edges
  prog = hcqdsl.parse(RUNS.format(vendor="AMD"), "runs.hcq")
  edges, submits, blocked, _ = signal_edges(prog, 3)
  assert blocked == {} and not any(submits.values()), (blocked, submits)
  # w0's signal is waited for by w1 in launch 2 and the host in launch 1; w1's by c in launch 3 and the host
  assert edges == {(1, 1, 0, 1): {(1, 1)}, (1, 1, 0, 5): {(1, 1), (1, 2), (1, 3)}, (1, 1, 2, 0): {(1, 2)},
                   (2, 2, 0, 4): {(3, 3), (2, 2)}, (2, 2, 3, 0): {(3, 3)}}, edges
