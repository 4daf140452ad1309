"""`hcqdsl.emit(*tensors)` and `hcqdsl.emit_jit(...)`: the Python API of `hcqdsl emit` (docs/emit.md).

The pipeline: schedule.py (tinygrad schedule -> Schedule) -> planners.py (queues, Program) -> amdcode.py (--amd-code);
jit.py replays a TinyJit call by call. This module is callable: `hcqdsl.emit(*tensors)` calls `emit`."""
from __future__ import annotations
import sys, types
from collections.abc import Iterator
from ..ir import Program
from .env import EmitError, tinygrad
from .schedule import MAX_VALUES, schedule
from .planners import program
from .jit import emit_jit as replay_jit, returned_tensors
from .realizes import Realizes

__all__ = ["emit", "emit_jit", "EmitError", "schedule_returned"]

def schedule_returned(tensors, ran=None, max_values: int = MAX_VALUES):
  """The Schedule of the tensors a function returned, from its one call. A function that realizes its own tensors
  (examples/gpt2.py's `forward` ends in `.realize()`) leaves nothing to schedule: then the schedule is what it realized
  while it ran, recorded by `ran` (a realizes.Realizes active during the call), from the contents before each realize."""
  s = schedule(*tensors, max_values=max_values)
  if s.cmds: return s
  if ran is None or not ran.calls:
    why = (" (its realizes ran inside a TinyJit of its own: return `(jit_fn, calls)` instead)" if ran is not None and ran.missed
           else " (return the computation that makes them)")
    raise EmitError(f"the function returned tensors that are already realized, and realized nothing while it ran: nothing to emit{why}")
  return schedule(*tensors, max_values=max_values, ran=ran)

def emit(*tensors, planner: str = "hcqdsl", max_values: int = MAX_VALUES, title: str = "") -> Program:
  """The .hcq Program that realizes `tensors` the way tinygrad schedules them (runs them once on tinygrad's CPU)."""
  if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)): tensors = tuple(tensors[0])
  return program(schedule(*tensors, max_values=max_values), planner, title)

def emit_jit(fn, *args, planner: str = "hcqdsl", max_values: int = MAX_VALUES, **kwargs) -> Program:
  """`emit_jit(jit_fn, calls)`, calls a list of argument tuples or an iterator (a generator) of them: TinyJit's calls (docs/emit.md "TinyJit replay").
  `emit_jit(fn, *args)`: emit what `fn(*args)` returns (a tensor or a tuple of them), one launch."""
  calls = args[0] if len(args) == 1 and not kwargs else None
  if isinstance(calls, Iterator) or (isinstance(calls, list) and calls and all(isinstance(c, tuple) for c in calls)):
    return replay_jit(fn, args[0], planner=planner, max_values=max_values)
  tinygrad()
  fn = getattr(fn, "fxn", fn)
  with Realizes() as ran: out = fn(*args, **kwargs)   # called once: what it realizes itself is recorded as it runs
  s = schedule_returned(returned_tensors(out), ran, max_values)
  return program(s, planner, getattr(fn, "__name__", ""))

class _CallableModule(types.ModuleType):
  """`hcqdsl.emit(*tensors)` is the API the issue names, and `hcqdsl.emit` is also this module: calling the module
  calls `emit`, so neither spelling shadows the other."""
  def __call__(self, *tensors, **kw): return emit(*tensors, **kw)

sys.modules[__name__].__class__ = _CallableModule
