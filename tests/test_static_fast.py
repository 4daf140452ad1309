"""The static checks' fast path for clean queue bodies (static.StaticCheck._clean_body) never hides a problem: on
random programs full of bad names, ranges, values and misplaced statements, the checks report exactly what the
statement-by-statement checks report."""
from hypothesis import given, settings, HealthCheck, strategies as st
from hcqdsl.lang.parse import parse_syntax
from hcqdsl.check.static import StaticCheck

HEAD = ("device g = AMD:0\nbuffer a on g size 64\nbuffer h on host size 16\nsignal s on g\nvar k\n"
        "kernel one(in x)\nkernel two(out x, in y)\nkernel sc(inout x, i32 n)\n")
STMTS = ["wait s >= 1", "wait s >= k", "wait s >= k - 1", "wait t >= 1", "wait a >= 1", "wait s >= kk",
         "signal s = 4294967295", "signal s = 4294967296", "signal g.timeline = g.epoch", "wait s >= g.epoch",
         "exec one(a)", "exec one(a[0:64])", "exec one(a[0:65])", "exec one(a[8:8])", "exec one(b)", "exec two(a)",
         "exec two(a[0:8], h[8:16]) grid (1, 1, 1) block (64, 1, 1)", "exec one(a) grid (0, 1, 1)", "exec nope(a)",
         "copy h <- a[0:16]", "copy h <- a", "copy h[0:8] <- a[8:16]", "copy h[4:2] <- a[0:2]", "copy x <- a",
         "barrier", "epoch", "timestamp s", "timestamp q",
         "exec sc(a, k)", "exec sc(a, 5)", "exec sc(a, k + 2)", "exec sc(a, 4294967296)", "exec sc(k, a)", "exec sc(a)",
         "exec sc(a, kk)", "exec sc(a, s)", "exec one(a) grid (k, 1, 1)", "exec one(a) grid (kk, 1, 1)",
         "exec one(a) grid (4294967296, 1, 1)", "exec one(a) block (k - 1, 2, 1)", "exec one(a[:64])", "exec one(a[8:])",
         "exec one(a[64:])", "exec one(a[:0])", "copy h[8:] <- a[0:8]", "copy h[8:] <- a[0:16]", "copy h <- h",
         "copy h[0:16] <- a[48:]", "copy a[60:68] <- h[0:8]", "submit", "wait s >= 4294967295", "signal s = k + 7"]

CLEAN = ["wait s >= 1", "wait s >= k", "signal s = 2", "signal g.timeline = g.epoch", "barrier", "epoch", "timestamp s",
         "exec sc(a[0:8], k)", "exec two(a[0:8], h[8:16]) grid (k, 1, 1)", "copy h <- a[16:32]", "copy h[:8] <- a[56:]"]

@st.composite
def programs(draw):
  out = [HEAD]
  for n in range(draw(st.integers(1, 3))):
    body = draw(st.lists(st.one_of(st.sampled_from(CLEAN), st.sampled_from(STMTS)), min_size=1, max_size=6))
    out.append(f"queue q{n} {draw(st.sampled_from(['compute', 'copy']))} on g {{\n" + "".join(f"  {x}\n" for x in body) + "}\n")
  return "".join(out)

class Slow(StaticCheck):
  def _clean_body(self, q): return False

seen = {"clean": 0, "dirty": 0}

@settings(max_examples=300, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_fast_path_agrees(text):
  prog, diags = parse_syntax(text, "f.hcq")
  assert prog is not None and not diags, text
  fast, slow = StaticCheck().run(prog), Slow().run(prog)
  assert fast == slow, text
  seen["dirty" if slow else "clean"] += 1

def test_fast_path_compared_both_kinds():
  # runs after the property test in this module: both clean and erroneous programs were compared
  assert seen["clean"] >= 20 and seen["dirty"] >= 100, seen

def test_fast_path_past_one_chunk():
  # the fast path reads a body in chunks of 4096 statements: a problem in any chunk sends the body to the full checks
  for at in (0, 4095, 4096, 8999):
    body = ["exec sc(a[0:8], k)", "signal s = 2", "wait s >= 1"] * 3000
    body[at] = "exec one(a[0:65])"
    prog, diags = parse_syntax(HEAD + "queue q compute on g {\n" + "".join(f"  {x}\n" for x in body) + "}\n", "f.hcq")
    assert not diags
    fast = StaticCheck().run(prog)
    assert fast == Slow().run(prog) and [(d.code, d.span.line) for d in fast] == [("bounds", HEAD.count("\n") + 2 + at)]

def test_error_spans_in_a_file_with_carriage_returns():
  # the value and range carets find their line as spans count lines (`\r` alone ends one): this used to raise
  for nl in ("\r", "\r\n", "\n"):
    text = nl.join(["device g = AMD:0", "", "buffer a on g size 64", "signal s on g", "kernel one(in x)",
                    "queue q compute on g {", "  wait s >= 99999999999", "  exec one(a[8:99])", "}", ""])
    prog, diags = parse_syntax(text, "f.hcq")
    assert not diags
    assert [(d.code, str(d.span), d.span.end_column) for d in StaticCheck().run(prog)] == \
      [("overflow", "f.hcq:7:13", 24), ("bounds", "f.hcq:8:12", 19)]
