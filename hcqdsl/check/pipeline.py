"""The driver of `hcqdsl check`'s dynamic half: unroll, one happens-before pass, exploration when the program is
outside the fragment where happens-before is exact, then every pass of `passes.PASSES` over what they found. See
docs/check.md."""
from __future__ import annotations
from typing import Optional
import gc
import attrs
import numpy as np
from ..ir import Program
from ..diagnostics import Diagnostic
from .unroll import unroll, Unrolled
from .hb import happens_before, ClockLimit
from .explore import explore
from .findings import Stuck, SignalRace, NonMonotonic, WaitStats
from .passes import word_name, Findings, PASSES, OverflowAnalysis

__all__ = ["analyze", "MAX_STATES", "madvise_hugepage"]

# skeleton states explored before the verdict on a program outside the exact fragment is called incomplete (`check
# --max-states`): about 10 s and 300 MB at most
MAX_STATES = 500_000

def _why(u: Unrolled, v) -> str:
  code, a, b, s = v
  def who(i): return "the host" if i == 0 else u.seqs[i].name
  if code == "poll":   # a store not ordered against the poll changes whether it passes
    return (f"{who(a[0])}'s poll at {u.line(*a)} and {who(b[0])}'s store into {word_name(u, s)} at {u.line(*b)} are not "
            f"ordered: whether the poll passes depends on the interleaving")
  if code == "store-order":
    return f"{who(a[0])} ({u.line(*a)}) and {who(b[0])} ({u.line(*b)}) store into {word_name(u, s)} with no order between them"
  if code == "signal-race":
    return f"{who(a[0])} ({u.line(*a)}) and {who(b[0])} ({u.line(*b)}) write {u.signals[s].name} with no order between them"
  return (f"the write lowering {u.signals[s].name} at {u.line(*a)} in {who(a[0])} is not ordered against its use at "
          f"{u.line(*b)} in {who(b[0])}")

def analyze(program: Program, launches: int = 2, var_values: Optional[dict] = None, max_states: int = MAX_STATES,
            keep: Optional[dict] = None) -> list[Diagnostic]:
  """deadlock, race, signal-race, non-monotonic, overflow (of `var + n`), stale-input, and the warnings
  redundant-wait, unused-signal, visibility — over `launches` launches; launch k binds every var and D.epoch to k unless
  `var_values` pins them (a name -> int, or a list of per-launch ints). `keep`: a dict that gets the unrolled program
  (`unrolled`) and the happens-before pass's trace (`trace`, None outside the exact fragment's pass), for what a caller
  reads of the execution itself (sanitize's frontier: check/frontier.py) or frees later or never (freeing a million
  op tuples takes ~0.13 s at 1M statements: the CLI, which ends with a hard exit, never does)."""
  # the passes allocate millions of small tuples and no cycles: the cyclic GC would rescan them all, again and again.
  # And numpy asks for 2 MB pages for its big arrays: in a process holding a million-statement program the kernel
  # compacts memory to find them (transparent huge pages, defrag=madvise), more system time than the arrays' work
  enabled = gc.isenabled()
  gc.disable()
  huge = madvise_hugepage(False)
  try: return _analyze(program, launches, var_values, max_states, keep)
  finally:
    madvise_hugepage(huge)
    if enabled: gc.enable()

def madvise_hugepage(on: bool) -> bool:
  """numpy's setting (a private function of numpy 2; a no-op where it is missing); returns the previous one."""
  f = getattr(np._core.multiarray, "_set_madvise_hugepage", None) if hasattr(np, "_core") else None
  return f(on) if f is not None else on

def _analyze(program: Program, launches: int, var_values: Optional[dict], max_states: int, keep: Optional[dict]) -> list[Diagnostic]:
  u = unroll(program, launches, var_values)
  if keep is not None: keep["unrolled"] = u
  try: found = _findings(u, max_states, keep)
  except ClockLimit as e:   # sizes the machine cannot hold: a `bounds` error at the first queue, nothing decided
    return OverflowAnalysis().run(u, Findings()) + [Diagnostic("bounds", str(e), program.queues[0].span if program.queues else u.host_span)]
  diags = []
  for p in PASSES:
    out = p.run(u, found)
    diags += [attrs.evolve(d, notes=d.notes + (found.note,)) for d in out] if p.dynamic and found.note else out
  return diags

def _findings(u: Unrolled, max_states: int, keep: Optional[dict] = None) -> Findings:
  """What the passes report: the happens-before pass's, inside the exact fragment; else the explorer's, or, when the
  exploration exceeds `max_states`, the one execution's (an incomplete verdict)."""
  t = happens_before(u)
  if keep is not None: keep["trace"] = t
  stuck = [Stuck(t.done, t.values)] if t.blocked else []
  if t.exact: return Findings(deadlocks=stuck, races=t.races, wstats={k: WaitStats(*v) for k, v in t.wstats.items()}, vis=t.vis_found)
  why = _why(u, t.violations[0])
  e = explore(u, max_states)
  if e.complete:
    return Findings(deadlocks=e.deadlocks, races=e.races, signal_races=[SignalRace(a, b) for _, a, b in e.signal_races.values()],
                    nonmono=[NonMonotonic(w, o, cur, new) for _, w, o, _s, cur, new in e.nonmono.values()],
                    note=f"this program is outside the fragment where happens-before is exact ({why}); "
                         f"the verdict comes from exploring all {e.states} reachable states of its synchronization skeleton")
  return Findings(deadlocks=stuck, races=t.races, signal_races=[SignalRace(a, b) for c, a, b, _ in t.violations if c == "signal-race"],
                  nonmono=[NonMonotonic(a, b, None, None) for c, a, b, _ in t.violations if c == "non-monotonic"], incomplete=True,
                  note=f"this program is outside the fragment where happens-before is exact ({why}), and exploring it "
                       f"exceeded the budget of {max_states} states (`--max-states`): the verdict is incomplete (problems may "
                       f"be missing, and these come from one execution)")
