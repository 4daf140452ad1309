"""Sizes and values the machine cannot hold (issue 11, item 4): static `bounds` errors, lazy emulator memory,
`--max-memory`."""
import resource
import pytest
from hcqdsl import parse
from hcqdsl.check import check_text
from hcqdsl.vendors import compile_program
from hcqdsl.diagnostics import HcqError
from hcqdsl.runtime import run
from hcqdsl.cli import main

HDR = "device g0 = AMD:0\n"

def errors(text):
  return [(d.code, d.span.line, d.message) for d in check_text(HDR + text, "t.hcq") if d.severity == "error"]

def test_buffer_beyond_the_address_space_is_bounds():
  text = "buffer a on g0 size 0x10000000000000000\n"
  assert errors(text) == [("bounds", 2, "buffer `a` (18446744073709551616 bytes) does not fit: the buffers in g0 memory "
                           "need 18446744073709551616 bytes, more than the 4398046511104 (4 TiB) the targets address per memory")]
  with pytest.raises(HcqError) as e: compile_program(parse(HDR + text, "t.hcq"))
  assert [d.code for d in e.value.diagnostics] == ["bounds"]

def test_buffers_fit_until_their_sum_does_not():
  assert errors("buffer a on g0 size 2048G\nbuffer b on g0 size 2048G\n") == []
  assert [(c, l) for c, l, _ in errors("buffer a on g0 size 2048G\nbuffer b on g0 size 2048G\nbuffer c on g0 size 1\n")] == [("bounds", 4)]
  assert errors("buffer a on host size 4096G\nbuffer b on g0 size 4096G\n") == []   # host and device memory are separate windows

def test_too_many_devices():
  text = "".join(f"device d{i} = AMD:{i}\n" for i in range(16))
  assert [(d.code, d.span.line) for d in check_text(text, "t.hcq")] == [("bounds", 16)]

@pytest.mark.parametrize("impl,msg", [
  ("fill<u8>(300)", "fill<u8>(300): 300 is outside u8 (0 .. 255)"),
  ("fill<u32>(-1)", "fill<u32>(-1): -1 is outside u32 (0 .. 4294967295)"),
  ("iota<i8>(128)", "iota<i8>(128): 128 is outside i8 (-128 .. 127)"),
  ("scale<f16>(1e6)", "scale<f16>(1000000.0): 1000000.0 is outside f16 (-65504.0 .. 65504.0)"),
  ("spin(-1)", "spin(-1): microseconds are 0 .. 1e9"),
])
def test_builtin_argument_outside_its_dtype(impl, msg):
  assert errors(f"kernel k(out x) = builtin {impl}\n") == [("bounds", 2, msg)]

@pytest.mark.parametrize("impl", ["fill<u8>(255)", "fill<i8>(-128)", "fill<f16>(inf)", "fill<f32>(nan)", "spin(5)",
                                  "fill<u64>(18446744073709551615)"])
def test_builtin_argument_inside_its_dtype(impl):
  assert errors(f"kernel k(out x) = builtin {impl}\n") == []

BIG = HDR + "buffer a on g0 size {size}\nbuffer c on g0 size 64\nkernel f(out x) = builtin fill<u32>(7)\n" \
      "queue q compute on g0 {{\n  exec f(a[0:64])\n  exec f(c)\n}}\nexpect c == u32 [7, 7, 7, 7]\n"

def test_huge_barely_touched_buffer_runs_in_little_memory():
  before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  r = run(BIG.format(size="4G"), max_memory=1 << 40)
  assert r.ok and len(r.memory) == 2   # (reading r.memory["a"] would copy all 4 GiB)
  assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024 < 1 << 30

def test_max_memory_is_a_clear_error(tmp_path, capsys):
  with pytest.raises(HcqError) as e: run(BIG.format(size="64M"), max_memory=32 << 20)
  [d] = e.value.diagnostics
  assert d.code == "bounds" and d.span.line == 2 and "more than the emulator's limit of 33554432 bytes" in d.message
  f = tmp_path / "big.hcq"
  f.write_text(BIG.format(size="64M"))
  assert main(["run", str(f), "--max-memory", "32M"]) == 1
  assert "--max-memory" in capsys.readouterr().out
  assert main(["run", str(f), "--max-memory", "128M"]) == 0
  assert main(["run", str(f), "--max-memory", "lots"]) == 2
