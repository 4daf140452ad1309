"""What a user's function realizes while it runs, recorded as tinygrad runs it, so that `hcqdsl emit` calls the
function once (docs/emit.md, "The function runs once").

A function that realizes its own results (examples/gpt2.py's `forward` ends in `.realize()`) returns tensors with
nothing left to schedule: what it computed is in the schedules its realizes ran. `Realizes` is active while the
function runs. Every realize inside it (`Tensor.realize`, `.numpy()`, `.item()`, ...) hands its schedule to the recorder
first — through tinygrad's own capture hook (`engine.realize.capturing`, as a TinyJit capture does), so the schedule is
the one a TinyJit would capture, before memory planning — which compiles it as tinygrad would, runs its uploads from
host memory, copies the contents of every buffer it reads before anything written so far, and hands the rest back to
tinygrad to run. So the function's side effects happen once, and what it computed runs once; the recorded calls, the
contents before each was run and the results the function left are the schedule (`schedule(..., ran=realizes)`)."""
from __future__ import annotations
from typing import Any, Optional
from .env import EmitError, tinygrad
from .data import buffer_bytes

__all__ = ["Realizes"]

class _Handover:
  """Stands in tinygrad's `capturing` list for one realize: tinygrad hands it the schedule instead of planning it."""
  def __init__(self): self.linear, self.var_vals = None, {}
  def add_linear(self, linear, var_vals):
    self.linear, self.var_vals = linear, dict(var_vals)

class Realizes:
  """`with Realizes() as r: out = fn()`: the realizes `fn` ran, in order. `r.calls`: tinygrad's compiled calls (uploads
  from host memory left out: they ran first and their results are contents), `r.ast_of`: a kernel call's
  device-independent AST by id(call), `r.origins`: the user's line of each call, `r.inits`: id(base Buffer) -> (the
  Buffer, its bytes before the first call that read it ran) for buffers read before written, `r.var_vals`: each
  realize's variable values. `r.missed`: realizes tinygrad ran without handing them over (a TinyJit of the function's
  own capturing, or CAPTURING=0)."""
  def __init__(self):
    self.calls: list = []
    self.ast_of: dict = {}
    self.origins: list = []
    self.var_vals: list = []
    self.inits: dict = {}
    self.missed = 0
    self._state: dict = {}   # id(base) -> written so far
    self._orig: Any = None

  def __enter__(self) -> "Realizes":
    tinygrad()
    import tinygrad.tensor as tensor
    self._orig = tensor.create_linear_with_vars
    tensor.create_linear_with_vars = self._create   # tensor.py calls it by the name it imported (Tensor.linear_with_vars)
    return self

  def __exit__(self, *exc):
    import tinygrad.tensor as tensor
    tensor.create_linear_with_vars = self._orig
    return False

  def _create(self, big_sink):
    from tinygrad.engine.realize import capturing
    from tinygrad.uop.ops import Ops, UOp
    if capturing: return self._orig(big_sink)   # a TinyJit of the function's own is capturing: the schedule is its
    grab = _Handover()
    capturing.append(grab)
    try: ret = self._orig(big_sink)
    finally: capturing.remove(grab)
    if grab.linear is None:   # (CAPTURING=0: tinygrad planned and returned it)
      self.missed += 1
      return ret
    from .jit import user_line
    rest = self._prepare(grab.linear, user_line())
    self.var_vals.append(ret[1])
    return UOp(Ops.LINEAR, src=tuple(rest)), ret[1]

  def _prepare(self, linear, origin: Optional[str]) -> list:
    """Compile, run the uploads, copy what the rest reads first; the rest, recorded and returned to run."""
    from tinygrad.uop.ops import Ops, UOp
    from tinygrad.engine.realize import run_linear
    from .schedule import compile_schedule
    calls, ast_of, uploads, _ = compile_schedule(linear)
    if uploads: run_linear(UOp(Ops.LINEAR, src=tuple(uploads)), jit=True)
    for c in calls: self._read_first(c)
    self.calls += calls
    self.ast_of.update(ast_of)
    self.origins += [origin] * len(calls)
    return calls

  def _read_first(self, c) -> None:
    """Copy the buffers call `c` reads that no earlier call wrote and nothing copied yet (schedule.py's read-first)."""
    from tinygrad.device import MultiBuffer
    from tinygrad.engine.realize import get_call_arg_uops, get_call_outs_ins
    args, (outs, ins) = get_call_arg_uops(c), get_call_outs_ins(c)
    for i, u in enumerate(args):
      b = u.buffer
      for lane in (b.bufs if isinstance(b, MultiBuffer) else [b]):
        base, key = lane.base, id(lane.base)
        if i in ins and not self._state.get(key) and key not in self.inits and base.is_allocated():
          self.inits[key] = (base, buffer_bytes(base))
        if i in outs: self._state[key] = True

  def merged_vars(self) -> dict:
    """The variable values of every realize, one value per variable (else an EmitError: one launch binds each once)."""
    out: dict = {}
    for vv in self.var_vals:
      for k, v in vv.items():
        if out.get(k, v) != v:
          raise EmitError(f"variable `{k}` is bound to {out[k]} and {v} in one call: the function realizes twice with other "
                          f"values (return the computation of one step, or a TinyJit with its calls: docs/emit.md)")
        out[k] = v
    return out
