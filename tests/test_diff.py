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
  (tmp_path / "a.hcq").write_text(a)
  (tmp_path / "b.hcq").write_text(b)
  rc, out, _ = run(capsys, "diff", tmp_path / "a.hcq", tmp_path / "b.hcq", "--launches", "1", "--json")
  assert rc == 1 and json.loads(out)["differences"] == [
    {"what": "command", "name": "q", "a": None, "b": "barrier", "launch": 1, "a_line": None, "b_line": 6}]

def test_bad_input(capsys, tmp_path):
  (tmp_path / "bad.hcq").write_text("device g = AMD:0\nqueue q compute on g {\n  wait nope >= 1\n}\n")
  rc, out, err = run(capsys, "diff", tmp_path / "bad.hcq", ROOT / "spec_example.hcq")
  assert rc == 2 and "error[name]: unknown signal `nope`" in out and "has errors" in err
  rc, _, err = run(capsys, "diff", tmp_path / "missing.hcq", ROOT / "spec_example.hcq")
  assert rc == 2 and err == f"hcqdsl: error: {tmp_path / 'missing.hcq'}: no such file\n"

def test_match_pairs_names_by_use(capsys, tmp_path):
  """--match: devices by index, buffers by where the aligned execs and copies use them; only those commands compared,
  copies from or to host memory left out; a rebound buffer read at launch 1's memory is the one change per launch."""
  a = ("device g0 = AMD:0\ndevice g1 = AMD:1\nbuffer in0 on g0 size 64 rebound = u8 [1], u8 [2], u8 [3]\n"
       "buffer mid on g1 size 32\nbuffer res on g1 size 32\nsignal s on g1\nkernel add1(out o, in i)\n"
       "queue x copy on g0 {\n  copy mid <- in0[0:32]\n  signal s = 1\n}\n"
       "queue c compute on g1 {\n  wait s >= 1\n  exec add1(res, mid)\n}\n")
  b = ("device gpu0 = AMD:0\ndevice gpu1 = AMD:1\nbuffer stage on host size 64 rebound = u8 [1], u8 [2], u8 [3]\n"
       "buffer in_7f00 on gpu0 size 64 rebound = u8 [1], u8 [2], u8 [3]\nbuffer b_9000 on gpu1 size 256\n"
       "buffer b_a000 on gpu1 size 32\nbuffer b_host on host size 32\nsignal t on gpu1\nsignal u on gpu0\nkernel add1(out a0, in a1)\n"
       "queue up copy on gpu0 {\n  copy in_7f00 <- stage\n  signal u = launch\n}\n"
       "queue copy0 copy on gpu0 {\n  wait u >= launch\n  copy b_9000[0:32] <- in_7f00@1[0:32]\n  signal t = launch\n}\n"
       "queue comp compute on gpu1 {\n  wait t >= launch\n  exec add1(b_a000, b_9000[0:32]) block (2, 1, 1)\n}\n"
       "queue down copy on gpu1 {\n  copy b_host <- b_a000\n}\nvar launch\n")
  (tmp_path / "a.hcq").write_text(a)
  (tmp_path / "b.hcq").write_text(b)
  got = diff_programs(parse(a, "a.hcq"), parse(b, "b.hcq"), 3, match=True)
  assert got == [Change("command", "g0 copy", "copy mid[0:32] <- in0@2[0:32]", "copy mid[0:32] <- in0@1[0:32]", 2, 9, 17),
                 Change("command", "g0 copy", "copy mid[0:32] <- in0@3[0:32]", "copy mid[0:32] <- in0@1[0:32]", 3, 9, 17)]
  assert diff_programs(parse(a, "a.hcq"), parse(a.replace("mid", "m2"), "c.hcq"), 3, match=True) == []
  rc, out, _ = run(capsys, "diff", "--match", tmp_path / "a.hcq", tmp_path / "b.hcq", "--launches", "3")
  assert rc == 1 and out.endswith("2 differences: 0 in declarations, 2 in commands over 2 launches\n")
  # a buffer the commands pair with one of another kind (rebound against plain) is a declaration change
  got = diff_programs(parse(a, "a.hcq"), parse(b.replace("buffer in_7f00 on gpu0 size 64 rebound = u8 [1], u8 [2], u8 [3]",
                                                         "buffer in_7f00 on gpu0 size 64").replace("in_7f00@1", "in_7f00"), "b.hcq"), 1, match=True)
  assert got == [Change("buffer", "in0", "buffer in0 rebound", "buffer in_7f00 plain", None, 3, 4),
                 Change("command", "g0 copy", "copy mid[0:32] <- in0@1[0:32]", "copy mid[0:32] <- in0[0:32]", 1, 9, 17)]
