import importlib, os, subprocess, sys
import hcqdsl

def test_every_public_name_resolves():
  for name in hcqdsl.__all__: assert getattr(hcqdsl, name) is not None, name

def test_emit_is_callable_and_still_the_module():
  mod = importlib.import_module("hcqdsl.tinygrad.emit")
  assert hcqdsl.emit is mod and callable(hcqdsl.emit) and callable(hcqdsl.emit_jit) and hcqdsl.emit_jit is mod.emit_jit

def test_pipeline_through_the_api():
  prog = hcqdsl.parse((__import__("pathlib").Path(__file__).parents[1] / "programs" / "run_pipeline.hcq").read_text())
  assert not [d for d in hcqdsl.check(prog) if d.severity == "error"]
  img = hcqdsl.compile_program(prog, "gfx1201")
  assert "DISPATCH_DIRECT" in hcqdsl.disasm_image(img)
  res = hcqdsl.run(prog, launches=2, seed=3)
  assert res.ok and all(e.ok for e in res.expects)
  assert hcqdsl.to_dot(prog).startswith("digraph")

def test_emit_through_the_package():
  from tinygrad import Tensor
  prog = hcqdsl.emit(Tensor([1.0, 2.0, 3.0]) * 2)
  assert prog.kernels and prog.expects and not [d for d in hcqdsl.check(prog) if d.severity == "error"]

# a process as a user starts it: no DEV, no CC, tinygrad's cache empty (so its CPU device compiles its queue workers).
# Importing every module of the package leaves the environment alone; `hcqdsl.emit(Tensor(...))` still works, because
# looking `emit` up on the package sets tinygrad up before Python builds the tensor argument.
FRESH = """
import os, pkgutil, importlib, hcqdsl
before = dict(os.environ)
for m in pkgutil.walk_packages(hcqdsl.__path__, "hcqdsl."):
  if m.name != "hcqdsl.__main__": importlib.import_module(m.name)
assert dict(os.environ) == before, sorted(set(os.environ.items()) ^ set(before.items()))
from tinygrad import Tensor
prog = hcqdsl.emit(Tensor([1.0, 2.0, 3.0]) * 2)
print(os.environ["DEV"], [e.data.values.tolist() for e in prog.expects])
"""

def test_emit_in_a_fresh_process(tmp_path):
  env = {k: v for k, v in os.environ.items() if k not in ("DEV", "CC")}
  env.update(XDG_CACHE_HOME=str(tmp_path / "cache"), HCQDSL_CACHE=str(tmp_path / "hcqdsl"))
  r = subprocess.run([sys.executable, "-c", FRESH], env=env, capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, r.stderr[-2000:]
  assert r.stdout == "CPU [[2.0, 4.0, 6.0]]\n"
