"""The language's data files (`f32 from "m.safetensors" ["w"]`) and expect tolerances (`~= ... rtol R atol A`):
read by the grammar (the fast path declines them), formatted back as written, checked with a clear error each, and
compared by the runtime as numpy.allclose with those tolerances."""
import numpy as np
import pytest
import hcqdsl.lang.scan
from hcqdsl import parse, format
from hcqdsl.check import parse_with_diagnostics
from hcqdsl.lang.sidecar import write_tensors, read_tensor, move_out, SidecarError
from hcqdsl.runtime import run

PROG = '''device g = AMD:0

buffer a on g size 16 = f32 from "d.safetensors" ["a"]
buffer b on g size 16
buffer t on g size 8 rebound = i32 from "d.safetensors" ["t@1"], i32 [5, 6]

kernel k(out b, in a) = builtin scale<f32>(2.0)

queue q compute on g {
  exec k(b, a)
}

expect b ~= f32 [0.0, 2.0, 4.0, 6.00001] rtol 1e-05
expect b ~= f32 from "d.safetensors" ["expect@2"] rtol 1e-07 atol 0.0
'''

@pytest.fixture
def prog_dir(tmp_path):
  write_tensors(str(tmp_path / "d.safetensors"), {"a": ("f32", np.arange(4, dtype=np.float32)), "t@1": ("i32", np.array([3, 4], np.int32)),
                                                  "expect@2": ("f32", np.array([0, 2, 4, 6], np.float32))})
  (tmp_path / "p.hcq").write_text(PROG)
  return tmp_path

def test_round_trip_and_values(prog_dir):
  f = str(prog_dir / "p.hcq")
  p = parse(PROG, f)
  assert format(p) == PROG and parse(format(p), f) == p
  a = p.buffers[0].init
  assert a.source == ("d.safetensors", "a") and list(a.values) == [0.0, 1.0, 2.0, 3.0]
  assert [list(d.values) for d in p.buffers[2].launch_inits] == [[3, 4], [5, 6]]
  assert [(e.rtol, e.atol) for e in p.expects] == [(1e-5, None), (1e-7, 0.0)]
  assert hcqdsl.lang.scan.scan(PROG, f) is None   # the grammar reads data references and tolerances

def test_the_runtime_takes_the_tolerances(prog_dir):
  res = run(parse(PROG, str(prog_dir / "p.hcq")), launches=1)
  assert [e.ok for e in res.expects] == [True, True]
  tight = PROG.replace("6.00001] rtol 1e-05", "6.00001] rtol 1e-07 atol 0.0")
  res = run(parse(tight, str(prog_dir / "p.hcq")), launches=1)
  assert [e.ok for e in res.expects] == [False, True]

@pytest.mark.parametrize("edit,message", [
  (('["a"]', '["zz"]'), "`{d}/d.safetensors` has no tensor `zz` (it has 3: a, t@1, expect@2)"),
  (('f32 from "d.safetensors" ["a"]', 'i32 from "d.safetensors" ["a"]'), "tensor `a` in `{d}/d.safetensors` is F32, not I32 (i32)"),
  (('"d.safetensors" ["a"]', '"nope.safetensors" ["a"]'), "cannot read data file `{d}/nope.safetensors`: No such file or directory"),
  (("6.00001] rtol 1e-05", "6.00001] rtol 1e-05 rtol 1e-4"), "`rtol` is given twice"),
  (("6.00001] rtol 1e-05", "6.00001] rtol -1.0"), "`rtol` is a tolerance: at least 0 and finite"),
  (("expect b ~= f32 [0.0", "expect b == f32 [0.0"), "`rtol` takes `~=` (an `==` expect compares exactly)"),
])
def test_errors(prog_dir, edit, message):
  prog, diags = parse_with_diagnostics(PROG.replace(*edit), str(prog_dir / "p.hcq"))
  assert [d.message for d in diags if d.severity == "error"] == [message.format(d=prog_dir)]

def test_not_a_safetensors_file(tmp_path):
  (tmp_path / "x.safetensors").write_bytes(b"\xff" * 16)
  with pytest.raises(SidecarError, match="is not a safetensors file"): read_tensor(str(tmp_path / "x.safetensors"), "a", "f32")

def test_tinygrad_reads_what_move_out_writes(tmp_path):
  from tinygrad.nn.state import safe_load
  p = parse("device g = AMD:0\nbuffer a on g size 8K = f32 [" + ", ".join(map(str, range(2048))) + "]\nbuffer s on g size 8 = f32 [1.5, 2.5]\n",
            "m.hcq")
  moved = move_out(p, str(tmp_path / "m.safetensors"), "m.safetensors", 16)
  assert moved.buffers[0].init.source == ("m.safetensors", "a") and moved.buffers[1].init.source is None
  assert safe_load(str(tmp_path / "m.safetensors"))["a"].numpy().tolist() == list(map(float, range(2048)))
  (tmp_path / "m.hcq").write_text(format(moved))
  assert parse((tmp_path / "m.hcq").read_text(), str(tmp_path / "m.hcq")) == p
