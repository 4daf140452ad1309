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
from .jit import emit_jit as replay_jit, capture, returned_tensors

__all__ = ["emit", "emit_jit", "EmitError", "schedule_returned"]

def schedule_returned(tensors, again, max_values: int = MAX_VALUES):
  """The Schedule of the tensors a function returned. A function that realizes its own tensors (examples/gpt2.py's
  `forward` ends in `.realize()`) leaves nothing to schedule: then `again()` (the function called once more) runs under
  TinyJit's capture hook, and the schedule is everything it realizes, from the state the first call left."""
  s = schedule(*tensors, max_values=max_values)
  if s.cmds: return s
  try: linear, var_vals, ret, origins = capture(again, ())
  except EmitError:
    raise EmitError("the function returned tensors that are already realized, and calling it again realizes nothing: "
                    "nothing to emit (return the computation that makes them)") from None
  return schedule(*returned_tensors(ret), max_values=max_values, linear_vars=(linear, var_vals), origins=origins)

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
  s = schedule_returned(returned_tensors(fn(*args, **kwargs)), lambda: fn(*args, **kwargs), max_values)
  return program(s, planner, getattr(fn, "__name__", ""))

class _CallableModule(types.ModuleType):
  """`hcqdsl.emit(*tensors)` is the API the issue names, and `hcqdsl.emit` is also this module: calling the module
  calls `emit`, so neither spelling shadows the other."""
  def __call__(self, *tensors, **kw): return emit(*tensors, **kw)

sys.modules[__name__].__class__ = _CallableModule
