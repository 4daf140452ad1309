"""What tinygrad's workloads (examples/tinygrad) emit, once per process and parsed back from their text: the schedules
`hcqdsl emit SCRIPT.py:FN` writes (test_emit) and the TinyJit replays (test_jit); test_image round-trips both."""
import importlib.util, os, pathlib
os.environ.setdefault("DEV", "CPU")
from hcqdsl import parse
from hcqdsl.lang.format import format_program
from hcqdsl.tinygrad.script import load_function, call_script
from hcqdsl.tinygrad.schedule import schedule
from hcqdsl.tinygrad.planners import program
from hcqdsl.tinygrad.jit import emit_jit

__all__ = ["EX", "SCHEDULES", "PLANNERS", "scheduled", "JITS", "jit_module", "jit_emitted"]

EX = pathlib.Path(__file__).resolve().parent.parent / "examples" / "tinygrad"
# name: (script:function, slow)
SCHEDULES = {
  "matmul_sum": ("matmul_sum.py:main", False),
  "mlp_train": ("mlp_train.py:main", False),
  "conv": ("conv.py:main", False),
  "shard2": ("shard_matmul.py:main", False),
  "shard4": ("shard_matmul.py:four", True),
  "shard8": ("shard_matmul.py:eight", True),
  "allreduce": ("allreduce.py:main", False),
  "copy_chain": ("copy_chain.py:main", False),
}
PLANNERS = ("hcqdsl", "tinygrad")
_sched: dict = {}

def scheduled(name: str, planner: str):
  """(program parsed back from its text, the text); tinygrad schedules each workload once."""
  if name not in _sched:
    spec, _ = SCHEDULES[name]
    fn = load_function(str(EX / spec))
    _sched[name] = schedule(*call_script(fn))
  text = format_program(program(_sched[name], planner, name))
  return parse(text, f"{name}.{planner}.hcq"), text

# name: (script, function returning (jit_fn, calls), launches): 6 calls, TinyJit's call 1 eager, calls 2..6 the launches
JITS = {"decode": ("jit_decode.py", "main", 5), "two_device": ("jit_two_device.py", "main", 5),
        "var_batch": ("jit_var_batch.py", "jit_calls", 5)}
_progs: dict = {}

def jit_module(name: str):
  spec = importlib.util.spec_from_file_location(f"_jit_{name}", EX / JITS[name][0])
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod

def jit_emitted(name: str, seed: int = 0, planner: str = "hcqdsl"):
  """The emitted TinyJit replay, parsed back from its text."""
  if (name, seed, planner) not in _progs:
    mod = jit_module(name)
    prog = emit_jit(*getattr(mod, JITS[name][1])(seed), planner=planner, title=name)
    _progs[name, seed, planner] = parse(format_program(prog), f"{name}.{seed}.{planner}.hcq")
  return _progs[name, seed, planner]
