"""The static checks' fast path for clean queue bodies (static.StaticCheck._clean_body) never hides a problem: on
random programs full of bad names, ranges, values and misplaced statements, the checks report exactly what the
statement-by-statement checks report."""
from hypothesis import given, settings, HealthCheck, strategies as st
from hcqdsl.syntax import parse_syntax
from hcqdsl.static import StaticCheck

HEAD = ("device g = AMD:0\nbuffer a on g size 64\nbuffer h on host size 16\nsignal s on g\nvar k\n"
        "kernel one(in x)\nkernel two(out x, in y)\n")
STMTS = ["wait s >= 1", "wait s >= k", "wait s >= k - 1", "wait t >= 1", "wait a >= 1", "wait s >= kk",
         "signal s = 4294967295", "signal s = 4294967296", "signal g.timeline = g.epoch", "wait s >= g.epoch",
         "exec one(a)", "exec one(a[0:64])", "exec one(a[0:65])", "exec one(a[8:8])", "exec one(b)", "exec two(a)",
         "exec two(a[0:8], h[8:16]) grid (1, 1, 1) block (64, 1, 1)", "exec one(a) grid (0, 1, 1)", "exec nope(a)",
         "copy h <- a[0:16]", "copy h <- a", "copy h[0:8] <- a[8:16]", "copy h[4:2] <- a[0:2]", "copy x <- a",
         "barrier", "epoch", "timestamp s", "timestamp q"]

CLEAN = ["wait s >= 1", "wait s >= k", "signal s = 2", "signal g.timeline = g.epoch", "barrier", "epoch", "timestamp s"]

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

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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
