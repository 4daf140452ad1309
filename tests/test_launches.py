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
