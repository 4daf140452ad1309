"""`hcqdsl emit SCRIPT.py[:FN]`: a program from a tinygrad schedule or TinyJit replay."""
from __future__ import annotations
import argparse, pathlib, sys
from ..tinygrad.env import EmitError
from ..tinygrad.script import load_function, call_script, script_error
from ..tinygrad.schedule import MAX_VALUES
from ..tinygrad.emit import schedule_returned
from ..tinygrad.planners import PLANNERS, program
from ..tinygrad.amdcode import attach_amd_code


def add_args(p: argparse.ArgumentParser):
  p.add_argument("script", metavar="SCRIPT.py[:FUNCTION]", help="a script whose function (default `main`) returns tensors")
  p.add_argument("-o", "--output", metavar="OUT.hcq", help="write here (default: stdout)")
  p.add_argument("--devices", type=int, help="passed to the function's `devices` parameter; the schedule may use at most N")
  p.add_argument("--planner", choices=PLANNERS, default="hcqdsl", help="who places waits and signals: hcqdsl (default) or tinygrad's HCQGraph")
  p.add_argument("--max-values", type=int, default=MAX_VALUES, help=f"largest output with an `expect` (default {MAX_VALUES})")
  p.add_argument("--amd-code", action="store_true", help="also compile gfx1100 code objects with tinygrad (needs libllvm19)")

def run(a) -> int:
  from ..lang.format import format_program
  from .util import UsageError
  try:
    fn = load_function(a.script)
    try: tensors = call_script(fn, a.devices)
    except Exception as e: raise script_error(e, a.script) from None
    from ..tinygrad.jit import is_jit_spec, emit_jit as replay
    if is_jit_spec(tensors):  # FN() returned (jit_fn, calls): one launch per call
      if a.amd_code: raise EmitError("--amd-code does not take a TinyJit replay yet")
      try: prog = replay(*tensors, planner=a.planner, max_values=a.max_values, title=a.script)
      except EmitError: raise
      except Exception as e: raise script_error(e, a.script, "tinygrad could not capture or run the JIT calls") from None
      text = format_program(prog)
      if a.output: pathlib.Path(a.output).write_text(text)
      else: sys.stdout.write(text)
      return 0
    try: s = schedule_returned(tensors, lambda: call_script(fn, a.devices), a.max_values)
    except EmitError: raise
    except Exception as e: raise script_error(e, a.script, "tinygrad could not schedule or run the tensors") from None
    if a.devices is not None and len(s.devices) > a.devices:
      raise EmitError(f"the schedule uses {len(s.devices)} devices, more than --devices {a.devices}")
    prog = program(s, a.planner, f"{a.script}")
    if a.amd_code:
      prog = attach_amd_code(prog, s, pathlib.Path(a.output).parent if a.output else pathlib.Path("."))
  except EmitError as e: raise UsageError(str(e))
  text = format_program(prog)
  if a.output: pathlib.Path(a.output).write_text(text)
  else: sys.stdout.write(text)
  return 0
