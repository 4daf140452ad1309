import importlib
import hcqdsl

def test_every_public_name_resolves():
  for name in hcqdsl.__all__: assert getattr(hcqdsl, name) is not None, name

def test_emit_is_callable_and_still_the_module():
  mod = importlib.import_module("hcqdsl.tinygrad.emit")
  assert hcqdsl.tinygrad.emit is mod and callable(hcqdsl.tinygrad.emit) and callable(mod.emit_jit)

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
  prog = hcqdsl.tinygrad.emit(Tensor([1.0, 2.0, 3.0]) * 2)
  assert prog.kernels and prog.expects and not [d for d in hcqdsl.check(prog) if d.severity == "error"]
