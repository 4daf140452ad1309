"""A block body stored as columns (hcqdsl/lang/rows.py): the parser's fast path reads a body into rows of ints, which
`Queue.body` builds into the nodes when first read, and which the static checks and unroll read as they are. These
hold that nothing a user sees depends on it: the nodes are the same objects however they are reached, the program
equals, hashes, evolves and pickles as the tuple it stands for, and the checker's column readings (static checks,
unroll's lowering) give what the statement-by-statement code gives, on random programs of every kind of statement."""
import pickle
import attrs
import pytest
from hypothesis import given, settings, HealthCheck, strategies as st
import hcqdsl.lang.scan
from hcqdsl import check, parse
from hcqdsl.ir import Queue, Host, Wait, stored_body
from hcqdsl.lang.parse import parse_syntax
from hcqdsl.lang.rows import Rows
from hcqdsl.check import unroll as unroll_module
from hcqdsl.check.unroll import unroll
from check_gen import programs as check_programs
from strategies import programs as any_programs
from layouts import layouts

BIG = ("device g = AMD:0\nbuffer a on g size 64K\nbuffer h on host size 64\nsignal s on g\nsignal t on g\nvar k\n"
       "kernel one(in x)\nkernel two(out x, in y)\nqueue c compute on g {\n" +
       "".join(f"  wait t >= {i}\n  exec two(a[{8 * i}:{8 * i + 4}], h[0:4])\n  signal s = k + {i}\n  barrier\n  exec one(a[{8 * i}:{8 * i + 4}])\n"
               f"  exec two(a[{8 * i + 4}:{8 * i + 8}], h) grid ({i + 1}, 1, 1)\n  epoch\n" for i in range(200)) + "}\nqueue x copy on g {\n" +
       "".join(f"  copy a[{32768 + 8 * i}:{32776 + 8 * i}] <- h[:8]\n  signal t = {i}\n" for i in range(200)) + "}\n")

def scanned(text):
  prog, diags = parse_syntax(text, "t.hcq")
  assert prog is not None and not diags
  return prog

def test_a_big_body_is_stored_as_rows_and_built_once():
  prog = scanned(BIG)
  for q in prog.queues:
    rows = stored_body(q)
    assert type(rows) is Rows and rows.columns and len(rows) == len(q.body)
  q = prog.queues[0]
  rows = stored_body(q)
  some = [rows[i] for i in (5, 0, 1399, 5, -1)]   # built one by one, before the body
  assert some[0] is some[3] and some[2] is some[4]
  body = q.body
  assert body is q.body and type(body) is tuple
  assert [body[i] for i in (5, 0, 1399, 5, -1)] == some and all(a is b for a, b in zip([body[i] for i in (5, 0, 1399, 5, -1)], some))
  assert all(rows[i] is body[i] for i in range(len(body)))
  with pytest.raises(IndexError): rows[len(body)]

def test_rows_are_the_grammars_program():
  # the nodes built from the columns are the grammar's, spans included (tests/test_scan.py does this on every layout)
  from hcqdsl.lang.dump import program_to_json
  assert program_to_json(scanned(BIG)) == program_to_json(_lark(BIG))

def _lark(text):
  orig = hcqdsl.lang.scan.scan
  hcqdsl.lang.scan.scan = lambda t, f, clean=False: None
  try: return parse_syntax(text, "t.hcq")[0]
  finally: hcqdsl.lang.scan.scan = orig

def _odd(text: str) -> str:
  """BIG's bodies with every 7th line tab-indented, every 11th indented deeper, every 13th with trailing blanks and
  a blank (or blanks-only) line before every 17th: the rows' lines are not their row numbers."""
  out = []
  for i, line in enumerate(text.split("\n")):
    if line.startswith("  "):
      if i % 17 == 0: out.append("   " if i % 2 else "")
      if i % 7 == 0: line = "\t" + line[2:]
      elif i % 11 == 0: line = "      " + line[2:]
      if i % 13 == 0: line += " \t "
    out.append(line)
  return "\n".join(out)

@pytest.mark.parametrize("layout", ["fmt", "odd"])
def test_a_rows_span_is_the_grammars(layout, monkeypatch):
  # the column rows keep no span (rows.Spans finds it from the row's line when its node is built): each row built
  # alone, in an order that crosses the parser's chunks, and every row built with the body, has the grammar's span
  text = BIG if layout == "fmt" else _odd(BIG)
  monkeypatch.setattr(hcqdsl.lang.scan, "CHUNK", 2048)   # (many chunks in a small body)
  prog, want = scanned(text), _lark(text)
  for q, w in zip(prog.queues, want.queues):
    rows = stored_body(q)
    assert type(rows) is Rows and len(rows.spans.chunks) > 4
    order = sorted(range(len(rows)), key=lambda i: (i * 7919) % len(rows))
    assert [rows[i].span for i in order] == [w.body[i].span for i in order]
  again = scanned(text)
  assert [s.span for q in again.queues for s in q.body] == [s.span for q in want.queues for s in q.body]

def test_a_block_of_rows_behaves_as_its_tuple():
  a, b = scanned(BIG), scanned(BIG)
  qa, qb = a.queues[0], b.queues[0]
  assert type(stored_body(qb)) is Rows
  plain = attrs.evolve(qa, body=tuple(qa.body))
  assert type(stored_body(plain)) is tuple
  assert qb == plain and hash(qb) == hash(plain) and repr(qb) == repr(plain)
  assert pickle.loads(pickle.dumps(scanned(BIG).queues[0])) == plain
  assert attrs.evolve(scanned(BIG).queues[0], name="z") == attrs.evolve(plain, name="z")
  with pytest.raises(attrs.exceptions.FrozenInstanceError): qa.body = ()

def test_a_tuple_body_is_read_into_rows_once():
  prog = parse(BIG, "t.hcq")
  plain = attrs.evolve(prog, decls=tuple(attrs.evolve(d, body=tuple(d.body)) if isinstance(d, (Queue, Host)) else d for d in prog.decls))
  q = plain.queues[0]
  body = q.body
  rows = Rows.of(q)
  assert rows.columns and Rows.of(q) is rows and stored_body(q) is rows
  assert q.body is body and all(rows[i] is body[i] for i in range(len(body)))

def _tuples(prog):
  """The program with every body stored as its tuple (read into columns by Rows.from_nodes when checked)."""
  return attrs.evolve(prog, decls=tuple(attrs.evolve(d, body=tuple(d.body)) if isinstance(d, (Queue, Host)) else d for d in prog.decls))

def _lowered(u):
  """What unroll made, its numpy columns (made with the ops from the columns, else read from the ops) included."""
  sync = u.sync_columns()
  acc = u.access_table()
  return ([list(s.ops) for s in u.seqs], [b.name for b in u.buffers], u.pinned, u.idle, [s.gate for s in u.seqs],
          [s.where_kind(0, 1, 2, 3, 4, 5, 6).tolist() for s in u.seqs], [s.where_kind(2).tolist() for s in u.seqs],
          None if sync is None else (sync[0].tolist(), [[c.tolist() for c in x] for x in sync[1]]),
          [getattr(acc, f).tolist() for f in ("seq", "idx", "sub", "rid", "mode", "buf", "role", "pin")])

seen = {"programs": 0, "columns": 0}

@settings(max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(check_programs(symbolic=True), check_programs(polls=True, symbolic=True), check_programs(max_body=12)), st.integers(1, 3))
def test_columns_lower_and_check_as_the_statements(text, launches):
  prog = scanned(text)
  loop = unroll_module._Lowering.lower_column
  try:
    unroll_module._Lowering.lower_column = lambda self, *a: None   # every statement through `lower`
    by_loop = _lowered(unroll(scanned(text), launches))
  finally: unroll_module._Lowering.lower_column = loop
  one = unroll(scanned(text), launches)
  assert [[s.ops[i] for i in range(len(s.ops))] for s in one.seqs] == by_loop[0], text   # made one by one
  assert _lowered(unroll(prog, launches)) == by_loop, text
  assert _lowered(unroll(_tuples(scanned(text)), launches)) == by_loop, text
  assert check(prog, launches) == check(_tuples(scanned(text)), launches), text
  seen["programs"] += 1
  seen["columns"] += any(type(stored_body(q)) is Rows for q in prog.queues)

def test_columns_compared():
  # runs after the property test in this module: programs with column rows were compared
  assert seen["programs"] == 150 and seen["columns"] >= 100, seen

@settings(max_examples=100, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_programs(), st.data())
def test_every_layout_checks_as_its_tuple(prog, data):
  text = data.draw(layouts(prog))[0]
  fast = parse_syntax(text, "t.hcq")[0]
  assert fast is not None
  assert check(fast, 2) == check(_tuples(parse_syntax(text, "t.hcq")[0]), 2), text

def test_big_program_checks_as_its_tuple():
  found = check(scanned(BIG), 1)
  assert found == check(_tuples(scanned(BIG)), 1) and {d.code for d in found} == {"redundant-wait", "unused-signal"}
  assert [type(s) for s in scanned(BIG).queues[0].body[:2]] == [Wait, type(scanned(BIG).queues[0].body[1])]
