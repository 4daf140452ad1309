"""The parser's fast path (hcqdsl/lang/scan.py) against the grammar: on programs of every layout it takes them and builds
the identical IR, spans and comments included; on anything it takes, the grammar agrees."""
import collections
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
import hcqdsl.lang.scan
from hcqdsl import format
from hcqdsl.lang.parse import parse_syntax
from hcqdsl.lang.dump import program_to_json
from strategies import programs
from layouts import layouts

def lark_only(text, file="f.hcq"):
  orig = hcqdsl.lang.scan.scan
  hcqdsl.lang.scan.scan = lambda t, f, clean=False: None
  try: return parse_syntax(text, file)
  finally: hcqdsl.lang.scan.scan = orig

def same(text):
  """The fast path's program, after checking it is the grammar's (None if the fast path gave up)."""
  fast = hcqdsl.lang.scan.scan(text, "f.hcq")
  if fast is None: return None
  slow, diags = lark_only(text)
  assert slow is not None and not diags, text
  assert program_to_json(fast) == program_to_json(slow), text   # spans and comments included
  assert fast.source == slow.source == text
  return fast

def test_fast_path_equals_the_grammar_on_every_layout():
  seen: collections.Counter = collections.Counter()
  # 200: Hypothesis also draws the literals of every loaded module, so which examples come depends on what else the
  # run imported; 200 keeps each feature's floor of 10 with room (one run of 100 drew 8 with strings)
  @settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None, derandomize=True, database=None)
  @given(programs(), st.data())
  def check(prog, data):
    text, used = data.draw(layouts(prog))
    assert same(text) is not None, f"the fast path gave up on:\n{text}"
    seen["compared"] += 1
    seen.update(used)
    seen["polls"] += sum(type(s).__name__ == "Poll" for q in prog.queues for s in q.body)   # the newest statement, exercised
  check()
  assert seen["compared"] == 200, seen
  for feature in (";", "statements on a line", "block on a line", "data lists", "strings", "expect", "comments", "spacing", "polls"):
    assert seen[feature] >= 10, (feature, seen)

def test_fast_path_takes_only_what_the_grammar_takes():
  """Mutated programs: whatever the fast path still takes, the grammar takes too and reads the same."""
  seen: collections.Counter = collections.Counter()
  @settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow], deadline=None, derandomize=True, database=None)
  @given(programs(), st.data())
  def check(prog, data):
    text, _ = data.draw(layouts(prog))
    i = data.draw(st.integers(0, len(text)))
    j = data.draw(st.integers(i, min(len(text), i + 3)))
    junk = "".join(data.draw(st.lists(st.sampled_from(list(' \t\n;{}#"=[],-.0x_K&') + ["wait ", "poll ", "inf", "\r\n", "\r"]), max_size=3)))
    seen["taken" if same(text[:i] + junk + text[j:]) is not None else "given up"] += 1
  check()
  assert seen["taken"] + seen["given up"] == 100 and seen["taken"] >= 20 and seen["given up"] >= 10, seen

@pytest.mark.parametrize("text", [
  "device g = AMD:0; signal s on g; queue q compute on g { wait s >= 1; signal s = 2 }  # end\n",
  "device g = AMD:0\nqueue q compute on g {  # head\n  barrier; epoch  # two\n  # last\n}  # closed\n# eof\n",
  "device g = AMD:0;  # dev\n;;\n  ;  # dropped: nothing ends on this line\nvar v\n",
  'kernel k(out a, in b) = builtin scale<f32>(2.5, -1, inf) c """\nvoid k() { a[0] = b[0]; } # no comment\n""" amd "k.co"  # c\nvar x\n',
  'kernel k() = c "a;b{}#\\"x\\n"; var y\n',
  "device g = AMD:0\nbuffer b on g size 16 = f32 [1.5, -2, inf, nan, -nan, 1e-05, 3.,]\nexpect b[0:8] ~= f32 [1.5, -2.0]; expect b == u8 []\n",
  "device g = AMD:0\r\nsignal s on g\r\nhost { wait s >= 1; submit }\r\n",
  "host {}\nhost{\n}\n",
  "# a; b\nvar x  # c; d\n  # e;\n",
  # symbolic launches (issue 12): var lists, scalar parameters and arguments, launch dims over vars, per-launch buffers
  "device g = AMD:0\nvar v = [1, 2,]; var w = []\nbuffer x on g size 4 rebound = i32 [1], i32 [- 2],\n"
  "buffer h on host size 8 rewritten=f32[1.5],f32[- inf]\nbuffer z on g size 4 rebound\nkernel k(in x, u32 n, i32 m)\n"
  "queue q compute on g { exec k(x, g.epoch - 1, v) grid (v + 1, 2, g.epoch) block(4,w,1); exec k(x, 7, w + 2) }\n",
  # what `lift` writes (issue 30): a code buffer, the host's write of per-launch bytes, expects with tolerances
  'device g = AMD:0\nbuffer c on g size 4K\nbuffer b on g size 64\nkernel k(in a, in kernargs) = amd "k.co" code c\n'
  "host { write b[0:8] = u32 [1, 2], u32 [3, 4]; write b[8:12]=f32[1.5] }\n"
  "expect b[0:8] ~= f32 [1.5, -2.0] rtol 0.001 atol 1e-06\nexpect b ~= f32 [1.0] atol 0.5; expect b ~= f32 [2.0] rtol 1\n",
])
def test_layouts_the_fast_path_takes(text):
  assert same(text) is not None

@pytest.mark.parametrize("text", [
  "device g = AMD:0\nqueue q compute on g { wait s >= 1 } var x\n",      # no separator after `}`
  "device g = AMD:0 var x\n",
  "queue q compute on g\n{\n}\n",
  "device g = AMD:0\nbuffer b on g size 16 = u8 [256]\n",                 # overflow: the grammar reports it
  "device g = AMD:0\nbuffer b on g size 16 = f32 [-0]\n",                 # the grammar negates the int 0
  "device g = AMD:0\nbuffer b on g size 16 = u8 [,]\n",
  "kernel k() = c \"x\" c \"y\"\n",                                       # two C sources: the grammar reports it
  "device g = AMD:0\rvar x\n",                                            # a lone `\r`
  "var x\x0c\n",
])
def test_the_fast_path_gives_up(text):
  assert hcqdsl.lang.scan.scan(text, "f.hcq") is None

def test_a_million_values():
  text = "device g = AMD:0\nbuffer b on g size 4M = u32 [" + ", ".join(map(str, range(1_000_000))) + "]\n"
  p = hcqdsl.lang.scan.scan(text, "f.hcq")
  assert p is not None and p.buffers[0].init.values[-1] == 999_999 and len(p.buffers[0].init.values) == 1_000_000

def test_formatted_programs_take_the_fast_path():
  seen = [0]
  @settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
  @given(programs())
  def check(prog):
    assert same(format(prog)) is not None
    seen[0] += 1
  check()
  assert seen[0] == 60

# ---- the block path: a block whose header starts a line, its body read by one regex (scan.Scanner.read_block)

def block_path(text):
  """(the fast path's program, checked against the grammar's; how many blocks the block path read)."""
  seen = [0]
  orig = hcqdsl.lang.scan.Scanner.read_block
  def bulk(self, *a):
    r = orig(self, *a)
    seen[0] += r is not None
    return r
  hcqdsl.lang.scan.Scanner.read_block = bulk
  try: return same(text), seen[0]
  finally: hcqdsl.lang.scan.Scanner.read_block = orig

_DECLS = "device g = AMD:0\nsignal s on g\nbuffer a on g size 64\nbuffer b on g size 64\nvar v\nkernel k(inout a, u32 n)\n"

@pytest.mark.parametrize("body,blocks", [
  ("queue q compute on g {\n\twait s >= 1\t\n\n  signal s = v + 2  \n}\n", 1),               # tabs, blanks, trailing blanks
  ("queue q compute on g { wait s >= 1\n  barrier }\n", 1),                                  # statements on the `{` and `}` lines
  ("queue q compute on g {  # head\n  # own\n  wait s >= 1  # tail\n  epoch;  # after a `;`\n  ; # dropped\n"
   "  # end\n}  # closed\n# eof\n", 1),
  ("queue q compute on g { ;  # the header's\n}\n", 1),
  ("queue q compute on g { barrier;  # the barrier's\n  barrier ;; epoch;\n}\n", 1),
  ("queue q compute on g {\r\n  wait s >= 1\r\n}\r\n", 1),                                   # CRLF
  ("host {\n  wait s >= 1; submit\n}\nhost {}\nhost{\n}\n", 3),
  ("queue q compute on g {\n  exec k(a, v) grid (v + 1, 2, 1) block (4, 1, 1)\n  exec k(a, v)\n  exec k(a[0:4], g.epoch - 1)\n"
   "  exec k(a[0:4], 7,)\n  exec k ( a [ 0 : 4 ] , 7 )\n  exec k(a[0x10:1K], v)\n}\n", 1),   # values, dims, spacing, a bare var
  ("queue c copy on g {\n  copy a <- b\n  copy a[0:4]<-b[4:8]\n  copy a [0 : 4] <- b[ 4:8 ]\n  copy a[:4] <- b[60:]\n  timestamp s\n}\n", 1),
  ("queue q compute on g {\n  barrier\n}; var w\n", 0),                                     # more after `}`: line by line
  ("var w; queue q compute on g {\n  barrier\n}\n", 0),                                      # not at a line start
])
def test_block_path_equals_the_grammar(body, blocks):
  prog, n = block_path(_DECLS + body)
  assert prog is not None and n == blocks

@pytest.mark.parametrize("body", [
  "queue q compute on g {\n  wait s >= 1K\n}\n",        # a size suffix on a value: the grammar reports it
  "queue q compute on g {\n  wait copy >= 1\n}\n",      # a keyword as a name
  "queue q compute on g {\n  copy a[0:4] <- 5\n}\n",
  "queue q compute on g {\n  exec k(a,, 1)\n}\n",
  "queue q compute on g {\n  exec k((a))\n}\n",
  "queue q compute on g {\n  barrier\n",                 # never closed
  'queue q compute on g {\n  barrier "x"\n}\n',
])
def test_block_path_gives_up(body):
  assert hcqdsl.lang.scan.scan(_DECLS + body, "f.hcq") is None

def test_block_path_in_small_chunks_and_caches(monkeypatch):
  """Chunks of a few rows and caches of a few texts: the boundaries of both, on every layout."""
  monkeypatch.setattr(hcqdsl.lang.scan, "CHUNK", 40)
  monkeypatch.setattr(hcqdsl.lang.scan, "_CACHE", 4)
  seen = [0]
  @settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
  @given(programs(), st.data())
  def check(prog, data):
    text, _ = data.draw(layouts(prog))
    assert same(text) is not None, f"the fast path gave up on:\n{text}"
    seen[0] += 1
  check()
  assert seen[0] == 60

def test_fast_constructors_build_the_attrs_objects():
  from hcqdsl.ir import Span, Wait, Ref, Expr
  import attrs
  make_span = hcqdsl.lang.scan.fast_constructor(Span, "file line column end_line end_column")
  span = make_span("f", 1, 2, 3, 4)
  assert type(span) is Span and span == Span("f", 1, 2, 3, 4) and attrs.astuple(span) == ("f", 1, 2, 3, 4)
  make_wait = hcqdsl.lang.scan.fast_constructor(Wait, "signal value span comments comment", at=True)
  w = make_wait("f", 1, 2, 4, Ref("s"), Expr(None, 1), ("# c",), "# d")   # with its one-line span
  assert type(w) is Wait and type(w.span) is Span and attrs.astuple(w.span) == ("f", 1, 2, 1, 4)
  assert (w.signal, w.value, w.comments, w.comment) == (Ref("s"), Expr(None, 1), ("# c",), "# d")
  with pytest.raises(attrs.exceptions.FrozenInstanceError): w.signal = Ref("t")

# ---- the column path: clean chunks of a block body (no `#` or `;`) read a column at a time (scan.Scanner.read_columns)

def counting_columns(monkeypatch):
  """[chunks the column path read, chunks it declined] as the scanner runs."""
  seen = [0, 0]
  orig = hcqdsl.lang.scan.Scanner.read_columns
  def columns(self, seg, ln, pending=()):
    r = orig(self, seg, ln, pending)
    seen[r is None] += 1
    return r
  monkeypatch.setattr(hcqdsl.lang.scan.Scanner, "read_columns", columns)
  return seen

def test_column_path_equals_the_grammar(monkeypatch):
  """fmt's layout and the others, in chunks of a few lines and caches of a few texts: the column path reads many of
  them and the programs are the grammar's."""
  seen = counting_columns(monkeypatch)
  monkeypatch.setattr(hcqdsl.lang.scan, "CHUNK", 40)
  monkeypatch.setattr(hcqdsl.lang.scan, "_CACHE", 8)
  took = [0, 0]
  @settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None, derandomize=True, database=None)
  @given(programs(), st.data())
  def check(prog, data):
    text = format(prog) if data.draw(st.booleans()) else data.draw(layouts(prog))[0]
    before = seen[0]
    assert same(text) is not None, f"the fast path gave up on:\n{text}"
    took[seen[0] > before] += 1
  check()
  # derandomized, yet Hypothesis also draws the literals of every project module loaded (its "local constants"), so the
  # examples move as the code grows and with what the session imported: a quarter of them, not one run's count
  assert 4 * took[1] >= sum(took) and seen[0] >= 50, (took, seen)

_CLEAN = "".join(f"  wait s >= {i}\n  signal s = v + {i}\n  exec k(a[{i}:{i + 4}], b) grid ({i + 1}, 1, 1)\n  barrier\n"
                 f"  exec k(a, b[{i}:], 3)\n  copy a[{i}:{i + 8}] <- b[:{i + 8}]\n  epoch\n  timestamp s\n" for i in range(12))

@pytest.mark.parametrize("body", [
  _CLEAN,                                                                       # fmt's layout
  _CLEAN.replace("  wait", "\twait").replace("epoch\n", "epoch  \n"),           # mixed indentation, trailing blanks
  _CLEAN.replace("  barrier\n", "\n  barrier\n\n"),                              # blank lines
  _CLEAN.replace("  barrier\n", "  # a comment for the next statement\n  barrier\n", 1),   # a dirty chunk between clean ones
  _CLEAN.replace("  epoch\n", "  barrier; epoch  # two\n", 2),
  _CLEAN.replace("wait s >= 3\n", "wait  s >=  3\n").replace("a[5:9], b", "a [ 5 : 9 ] ,b"),   # spacing: `read_statement` reads it
  _CLEAN.replace("exec k(a, b[2:], 3)", "exec k(a, b[0x2:1K], g.epoch - 1, 7,)"),  # values, a trailing comma
  _CLEAN + "  submit q\n  wait s.timeline >= g.epoch + 1\n",
])
@pytest.mark.parametrize("chunk", [40, 97, 1 << 18])
def test_column_path_chunks(monkeypatch, body, chunk):
  seen = counting_columns(monkeypatch)
  monkeypatch.setattr(hcqdsl.lang.scan, "CHUNK", chunk)
  # the second block's texts are all cached (a chunk of mostly new ones is left to the rows)
  text = _DECLS + "device h = AMD:1\nqueue q compute on g {\n" + body + "}\nqueue r compute on h {\n" + body + "}\n"
  prog, n = block_path(text)
  clean = "#" not in body and ";" not in body
  assert prog is not None and n == 2 and seen[0] >= (clean or chunk < len(body)), seen   # one dirty chunk: none

def test_column_path_misses_read_once(monkeypatch):
  """New heads are read by `read_statement` once each (the values fmt writes are read together); the rest of the chunk
  is found in the caches."""
  reads = []
  orig = hcqdsl.lang.scan.Scanner.read_statement
  monkeypatch.setattr(hcqdsl.lang.scan.Scanner, "read_statement", lambda self, kw, body, *a: reads.append(body) or orig(self, kw, body, *a))
  body = "".join(f"  wait s >= {i % 3}\n  signal s = {i % 3}\n  exec k(a[0:{i}], b)\n" for i in range(50))
  seen = counting_columns(monkeypatch)
  assert same(_DECLS + "queue q compute on g {\n" + body + "}\n") is not None and seen == [1, 0]
  assert sorted(reads) == sorted(["wait s >= 0", "signal s = 0", "exec k(a[0:0], b)"]), reads

def test_column_path_declined_chunks_read_row_by_row(monkeypatch):
  """The column path declining (None) every other chunk: the row loop reads those, the lines and comments line up."""
  monkeypatch.setattr(hcqdsl.lang.scan, "CHUNK", 60)
  orig, calls = hcqdsl.lang.scan.Scanner.read_columns, [0]
  def columns(self, seg, ln, pending=()):
    calls[0] += 1
    return None if calls[0] % 2 else orig(self, seg, ln, pending)
  monkeypatch.setattr(hcqdsl.lang.scan.Scanner, "read_columns", columns)
  prog, n = block_path(_DECLS + "queue q compute on g {  # head\n  # own\n" + _CLEAN + "  # end\n}\n")
  assert prog is not None and n == 1 and calls[0] >= 10

@pytest.mark.parametrize("bad", ["  wait s >= 1K\n", "  exec k(a) (b)\n", "  copy a <- 5\n", "  exec k((a))\n", "  barrier x\n",
                                 "  wait copy >= 1\n", "  signal s = 4294967296\n"])
def test_column_path_gives_up_as_the_grammar(monkeypatch, bad):
  seen = counting_columns(monkeypatch)
  text = _DECLS + "queue q compute on g {\n" + _CLEAN + bad + _CLEAN + "}\n"
  assert hcqdsl.lang.scan.scan(text, "f.hcq") is None and seen[1] >= 1
