"""`hcqdsl emit SCRIPT.py[:FN]`: a program from a tinygrad schedule or TinyJit replay."""
from __future__ import annotations
import argparse, pathlib, sys
from ..tinygrad.env import EmitError
from ..tinygrad.script import run_function, script_error, ScriptFailed
from ..tinygrad.schedule import MAX_VALUES
from ..tinygrad.emit import schedule_returned
from ..tinygrad.realizes import Realizes
from ..tinygrad.planners import PLANNERS, program
from ..tinygrad.amdcode import attach_amd_code
from ..tinygrad.jit import is_jit_spec, replay
from ..lang.sidecar import INLINE_MAX


def add_args(p: argparse.ArgumentParser):
  p.add_argument("script", metavar="SCRIPT.py[:FUNCTION]", help="a script whose function (default `main`) returns tensors")
  p.add_argument("-o", "--output", metavar="OUT.hcq", help="write here (default: stdout)")
  p.add_argument("--devices", type=int, help="passed to the function's `devices` parameter; the schedule may use at most N")
  p.add_argument("--planner", choices=PLANNERS, default="hcqdsl", help="who places waits and signals: hcqdsl (default) or tinygrad's HCQGraph")
  p.add_argument("--max-values", type=int, default=MAX_VALUES, help=f"largest output with an `expect` (default {MAX_VALUES})")
  p.add_argument("--amd-code", action="store_true", help="also compile gfx1100 code objects with tinygrad (needs libllvm19)")
  p.add_argument("--inline-max", type=lambda v: None if v == "all" else int(v), default=INLINE_MAX, metavar="N|all",
                 help=f"with -o: buffer contents and expects of more than N values go to OUT.safetensors, referenced from "
                      f"the text (default {INLINE_MAX}; `all`: everything in the text)")

def run(a) -> int:
  from ..lang.format import format_program
  from ..lang.sidecar import move_out
  from ..files import write_atomic
  from .util import UsageError, check_output
  out = pathlib.Path(a.output) if a.output else None
  target = out.absolute() if out else None   # resolved before the script runs: it may change the working directory
  code_dir = target.parent if target else pathlib.Path(".").absolute()
  if a.max_values < 0: raise UsageError(f"--max-values must be at least 0, not {a.max_values}")
  if a.inline_max is not None and a.inline_max < 0: raise UsageError(f"--inline-max must be at least 0 (or `all`), not {a.inline_max}")
  if out is not None:
    check_output(out, "-o", a.script.partition(":")[0])
    check_output(out.with_suffix(".safetensors"), "-o (its OUT.safetensors)", a.script.partition(":")[0])
  try:
    ran = Realizes()   # FN runs once: what it realizes itself is recorded as it runs
    tensors = run_function(a.script, a.devices, ran)
    if is_jit_spec(tensors):  # FN() returned (jit_fn, calls): TinyJit's semantics, one launch per call from call 2
      ran = Realizes()   # (what FN realized before it returned is call 1's state, not the replay's)
      try: prog, s = replay(tensors[0], tensors[1], planner=a.planner, max_values=a.max_values, title=a.script)
      except EmitError: raise
      except BaseException as e: raise script_error(e, a.script, "tinygrad could not capture or run the JIT calls") from None
    else:
      try: s = schedule_returned(tensors, ran, a.max_values)
      except EmitError: raise
      except BaseException as e: raise script_error(e, a.script, "tinygrad could not schedule or run the tensors") from None
      prog = program(s, a.planner, f"{a.script}")
    if a.devices is not None and len(s.devices) > a.devices:
      raise EmitError(f"the schedule uses {len(s.devices)} devices, more than --devices {a.devices}")
    if a.amd_code: prog = attach_amd_code(prog, s, code_dir)
  except ScriptFailed as e:   # the script ran and failed: its own line, exit 1 (as capture and sanitize say it)
    sys.stderr.write(f"hcqdsl: error: {e}\n")
    return e.rc
  except EmitError as e: raise UsageError(str(e))
  try:
    if target is not None and a.inline_max is not None:   # big contents and expects go to OUT.safetensors
      prog = move_out(prog, str(target.with_suffix(".safetensors")), target.with_suffix(".safetensors").name, a.inline_max)
    text = format_program(prog)
    if target is not None:   # atomically (the old file whole if it fails), named as the user spelled it
      try: write_atomic(str(target), text)
      except OSError as e: raise UsageError(f"{out}: {e.strerror or e}") from None
    else: sys.stdout.write(text)
  except OSError as e:
    spelled = {str(target): out, str(target and target.with_suffix(".safetensors")): out and out.with_suffix(".safetensors")}
    raise UsageError(f"{spelled.get(str(e.filename)) or e.filename or out}: {e.strerror or e}")
  return 0
