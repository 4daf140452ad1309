"""`hcqdsl diff`: launch by launch, what differs between two programs (hcqdsl/check/diff.py, hcqdsl/cli/diff.py)."""
import json, pathlib
from hcqdsl import parse, format
from hcqdsl.check.diff import diff_programs, Change
from hcqdsl.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1] / "programs"

def run(capsys, *args):
  rc = main([str(a) for a in args])
  out = capsys.readouterr()
  return rc, out.out, out.err

def test_stale_copy_against_its_fix(capsys):
  rc, out, _ = run(capsys, "diff", ROOT / "stale_input_copy_fixed.hcq", ROOT / "stale_input_copy.hcq")
  a, b = ROOT / "stale_input_copy_fixed.hcq", ROOT / "stale_input_copy.hcq"
  assert rc == 1 and out == (f"--- {a}\n+++ {b}\n@@ launch 2, queue x1\n- copy b[0:32] <- a@2[0:32]    ({a}:18)\n"
                             f"+ copy b[0:32] <- a@1[0:32]    ({b}:19)\n@@ launch 3, queue x1\n"
                             f"- copy b[0:32] <- a@3[0:32]    ({a}:18)\n+ copy b[0:32] <- a@1[0:32]    ({b}:19)\n"
                             "2 differences: 0 in declarations, 2 in commands over 2 launches\n")

def test_every_program_equals_itself_and_its_formatted_text():
  n = 0
  from hcqdsl.check import parse_with_diagnostics
  for f in sorted(ROOT.glob("*.hcq")):
    p, diags = parse_with_diagnostics(f.read_text(), str(f))
    if p is None or any(d.code in ("syntax", "name") for d in diags): continue   # the programs that show those errors
    assert diff_programs(p, p, 3) == [] and diff_programs(p, parse_with_diagnostics(format(p), "fmt.hcq")[0], 3) == [], f
    n += 1
  assert n >= 50

def test_declarations_queues_and_values():
  base = ("device g = AMD:0\nbuffer x on g size 64\nsignal s on g\nvar k\nkernel f(out a)\n"
          "queue q compute on g {\n  exec f(x)\n  signal s = k\n}\n")
  other = base.replace("size 64", "size 128").replace("signal s = k", "signal s = k + 1").replace(
    "}\n", "}\nqueue c copy on g {\n  wait s >= k\n}\n")
  got = diff_programs(parse(base, "a.hcq"), parse(other, "b.hcq"), 2)
  assert got == [Change("buffer", "x", "buffer x on g size 64", "buffer x on g size 128", None, 2, 2),
                 Change("command", "q", "exec f(x[0:64])", "exec f(x[0:128])", 1, 7, 7),
                 Change("command", "q", "signal s = 1", "signal s = 2", 1, 8, 8),
                 Change("command", "q", "exec f(x[0:64])", "exec f(x[0:128])", 2, 7, 7),
                 Change("command", "q", "signal s = 2", "signal s = 3", 2, 8, 8),
                 Change("queue", "c", None, "queue c copy on g", None, None, 10)]

def test_inserted_command_is_aligned(capsys, tmp_path):
  a = "device g = AMD:0\nbuffer x on g size 64\nkernel f(out a)\nqueue q compute on g {\n  exec f(x)\n  exec f(x)\n}\n"
  b = a.replace("  exec f(x)\n  exec f(x)\n", "  exec f(x)\n  barrier\n  exec f(x)\n")
  (tmp_path / "a.hcq").write_text(a); (tmp_path / "b.hcq").write_text(b)
  rc, out, _ = run(capsys, "diff", tmp_path / "a.hcq", tmp_path / "b.hcq", "--launches", "1", "--json")
  assert rc == 1 and json.loads(out)["differences"] == [
    {"what": "command", "name": "q", "a": None, "b": "barrier", "launch": 1, "a_line": None, "b_line": 6}]

def test_bad_input(capsys, tmp_path):
  (tmp_path / "bad.hcq").write_text("device g = AMD:0\nqueue q compute on g {\n  wait nope >= 1\n}\n")
  rc, out, err = run(capsys, "diff", tmp_path / "bad.hcq", ROOT / "spec_example.hcq")
  assert rc == 2 and "error[name]: unknown signal `nope`" in out and "has errors" in err
  rc, _, err = run(capsys, "diff", tmp_path / "missing.hcq", ROOT / "spec_example.hcq")
  assert rc == 2 and err == f"hcqdsl: error: {tmp_path / 'missing.hcq'}: no such file\n"
