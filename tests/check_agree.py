"""Two agreements the check property tests assert on a program (shared by test_check_hb, test_check_oracle and
test_launches): the direct execution equals the loop's, and happens-before equals the skeleton explorer."""
from __future__ import annotations
import numpy as np
from hcqdsl import parse
from hcqdsl.check.unroll import unroll
from hcqdsl.check.hb import happens_before, execute_direct, execute_loop
from hcqdsl.check.explore import explore
from hcqdsl.check.passes import deadlock_diags, Findings, DeadlockAnalysis, RaceAnalysis
from hcqdsl.check.findings import Stuck

def same_execution(u, text) -> bool:
  """The direct execution, when it takes the program, equals the loop's: the same outcome and the same clock rows
  (numbered differently: compared by the step from which each holds). True when it took it."""
  d, l = execute_direct(u), execute_loop(u)
  if d is None: return False
  for f in ("done", "values", "blocked", "violations", "wstats", "vc"): assert getattr(d, f) == getattr(l, f), (f, text)
  od, ol = np.argsort(d.held, kind="stable"), np.argsort(l.held, kind="stable")
  assert (d.held[od] == l.held[ol]).all() and (d.clock[od] == l.clock[ol]).all(), text
  return True

def _lines(diags): return {(d.code, d.span.line) for d in diags}

def compare_hb_explorer(text: str, launches: int, max_states: int = 60_000):
  """Symbolic programs (outside tests/reference.py's language): the happens-before pass against the skeleton
  explorer inside the fragment. None if exploration was cut short."""
  u = unroll(parse(text, "gen.hcq"), launches)
  t = happens_before(u)
  e = explore(u, max_states)
  if not e.complete: return None
  if t.exact:
    fast_dl = {key for key, _, _ in deadlock_diags(u, t.done, t.values)} if t.blocked else set()
    slow_dl = {key for s in e.deadlocks for key, _, _ in deadlock_diags(u, s.done, s.values)}
    assert (fast_dl, set(t.races)) == (slow_dl, set(e.races)), text
    assert not e.signal_races and not e.nonmono, text
    fast = Findings(deadlocks=[Stuck(t.done, t.values)] if t.blocked else [], races=t.races)
    slow = Findings(deadlocks=e.deadlocks, races=e.races)
    fast, slow = ([d for p in (DeadlockAnalysis(), RaceAnalysis()) for d in p.run(u, f)] for f in (fast, slow))
    assert _lines(fast) == _lines(slow), text
  return t.exact
