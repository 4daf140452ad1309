"""A bounded fuzz run per entry point that reads untrusted input (tests/fuzz.py; bigger runs: `python tests/fuzz.py
--n 20000`, figures in docs/reliability.md). Seeded, so a failure reproduces."""
import pytest
from fuzz import FUZZERS, edit_metadata
from hcqdsl.target.image import Image
from hcqdsl.cli import main

N = {"text": 300, "images": 600, "raw dwords": 600, "rings": 300, "manifests": 600, "witnesses": 491}

@pytest.mark.parametrize("entry", list(FUZZERS))
def test_fuzz_entry_point(entry):
  n, fails = FUZZERS[entry](N[entry], seed=0)
  assert n == N[entry] and fails == []   # (witnesses: every mutant of the witness files, whatever N)

def _image(meta_edit):
  from hcqdsl import parse
  from hcqdsl.vendors import compile_program
  b = compile_program(parse("device g = AMD:0\nsignal s on g\nqueue q compute on g {\n  signal s = 1\n}\n", "t.hcq")).to_bytes()
  return edit_metadata(b, meta_edit)

@pytest.mark.parametrize("edit,msg", [
  (lambda m: m.update(target="gfx992"), "target is 'gfx992', not one of gfx1100, gfx1201, gfx942, sm_120, sm_86, sm_89, sm_90"),
  (lambda m: m["queues"][0].update(stmts=[[0, 99, 1, 1, 1, 1, "x"]]), "queues[0].stmts[0][1] is 99, not an integer in 0..8"),
  (lambda m: m["queues"][0]["patches"].append([1000, None, 0, "u32"]), "queues[0].patches[0][0] is 1000, not an integer in 0..7"),
  (lambda m: m.update(signals=[]), "signals is [], not an object"),
  (lambda m: m["regions"][0].pop("addr"), "regions[0] has no `addr`"),
])
def test_bad_image_metadata_is_one_line_exit_2(tmp_path, capsys, edit, msg):
  b = _image(edit)
  with pytest.raises(ValueError) as e: Image.from_bytes(b)
  assert str(e.value) == "corrupt image metadata: " + msg
  f = tmp_path / "bad.hcqimg"
  f.write_bytes(b)
  assert main(["disasm", str(f)]) == 2
  err = capsys.readouterr().err
  assert err == f"hcqdsl: error: {f}: corrupt image metadata: {msg}\n"
