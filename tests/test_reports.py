"""Issue 25's smaller items, each with the exact message a user now gets."""
import pytest
from cli_run import cli
import hcqdsl
from hcqdsl.check import check_text
from hcqdsl.diagnostics import Diagnostic
from hcqdsl.ir import Span

HEAD = "device gpu0 = AMD:0 gfx1100\nsignal s on gpu0\nbuffer a on gpu0 size 4K\n"


def first(text: str) -> str:
  d = check_text(text, "t.hcq")[0]
  return f"{d.span.line}:{d.span.column}: {d.code}: {d.message}"

@pytest.mark.parametrize("typo, word", [("wiat s >= 1", "wait"), ("singal s = 1", "signal"), ("barier", "barrier"),
                                        ("exce k(a)", "exec")])
def test_statement_keyword_typos_suggest_the_keyword(typo, word):
  assert first(HEAD + f"queue c0 compute on gpu0 {{\n  {typo}\n}}\n") == (
    f"5:3: syntax: expected `}}` or a statement (`wait`, `signal`, `exec`, `copy`, ...), found `{typo.split()[0]}` "
    f"(did you mean `{word}`?)")

def test_declaration_keyword_typo_suggests_the_keyword():
  assert first("device gpu0 = AMD:0 gfx1100\nbufer a on gpu0 size 4K\n") == (
    "2:1: syntax: expected end of input or a declaration (`device`, `buffer`, `signal`, `queue`, ...), found `bufer` "
    "(did you mean `buffer`?)")

def test_a_keyword_prefix_is_a_name_not_the_keyword():
  assert first(HEAD + "queue c0 computer on gpu0 {\n  signal s = 1\n}\n") == (
    "4:10: syntax: expected `compute` or `copy` after the queue name, found `computer` (did you mean `compute`?)")
  assert first("device g = AMD:0\nkernel k(input x)\n").startswith("2:10: syntax: expected `)`, `,`, a parameter mode")

def test_binary_input_is_one_error(tmp_path):
  f = tmp_path / "x.hcq"
  f.write_bytes(b"\x7fELF\x02\x01\x01\0" + bytes(range(256)) * 12)
  rc, out, _ = cli("check", str(f))
  assert rc == 1 and out.count("error[") == 1 and len(out) < 600, out
  assert out.startswith(f"{f}:1:1: error[syntax]: not a text file: a program is text, and this has NUL bytes or is "
                        f"mostly control characters (a compiled image? `hcqdsl disasm` and `hcqdsl lift` read those)\n")
  assert out.endswith("failed: 1 error, 0 warnings\n")

def test_unknown_device_caret_is_on_the_name():
  rc, out, _ = cli("check", "/dev/null")   # (an empty program checks clean)
  text = HEAD + "queue c0 compute on gpu00 {\n  signal s = 1\n}\n"
  d = check_text(text, "t.hcq")[0]
  assert (d.span.line, d.span.column, d.span.end_column) == (4, 21, 26)
  assert str(d) == ("t.hcq:4:21: error[name]: unknown device `gpu00` (did you mean `gpu0`?)")

def test_no_analysis_summary_when_the_program_has_name_or_syntax_errors(tmp_path):
  f = tmp_path / "k.hcq"
  f.write_text(HEAD + "buffer wait on gpu0 size 4K\nqueue c0 compute on gpu0 {\n  signal s = 1\n}\n")
  rc, out, _ = cli("check", str(f))
  assert rc == 1 and out.endswith("failed: 1 error, 0 warnings\n") and "`wait` is a keyword" in out

def test_lift_of_a_missing_file_is_a_usage_error(tmp_path):
  rc, _, err = cli("lift", str(tmp_path / "nope.hcqimg"))
  assert rc == 2 and err == f"hcqdsl: error: {tmp_path / 'nope.hcqimg'}: no such file\n"

def test_a_var_given_twice_is_refused():
  rc, _, err = cli("check", "programs/jit_decode.hcq", "--var", "pos=3", "--var", "pos=4")
  assert rc == 2 and err == "hcqdsl: error: --var pos is given twice (3 and 4): give each var once\n"

def test_run_that_cannot_start_gives_that_error_only(tmp_path):
  f = tmp_path / "m.hcq"
  f.write_text("device gpu0 = AMD:0 gfx1100\nbuffer a on gpu0 size 1G\nkernel k(out a)\nqueue c0 compute on gpu0 {\n"
               "  exec k(a)\n}\nqueue c1 compute on gpu0 {\n  exec k(a)\n}\n")   # racy, and too big for 1M
  rc, out, err = cli("run", str(f), "--max-memory", "1M")
  assert rc == 1 and err == "" and out.startswith(f"{f}:2:1: error[bounds]: the program's memory plan is")
  rc, out, err = cli("run", str(f))
  assert rc == 0 and err == f"hcqdsl: warning: {f} has 1 check error (race); run `hcqdsl check {f}` (--no-check silences this)\n"

def test_fmt_keeps_hex_literals(tmp_path):
  text = ("device g = AMD:0\n\nbuffer a on g size 0x1000 = u32 [0x42, 7, 0X1_0]\n\nsignal s on g = 0x10\n\n"
          "kernel k(out a) = c \"int x = 0x10;\"\n\nqueue q compute on g {\n  wait s >= 0x42\n  signal s = g.epoch - 0x2\n"
          "  exec k(a[0x10:0x20])\n  exec k(a[16:4096])\n}\n")
  assert hcqdsl.format(hcqdsl.parse(text)) == text.replace("a[16:4096]", "a[16:4K]")
  f = tmp_path / "h.hcq"
  f.write_text(text)
  assert cli("fmt", "--check", str(f))[0] == 1 and cli("fmt", str(f))[0] == 0 and cli("fmt", "--check", str(f))[0] == 0

def test_check_api_refuses_an_unknown_var():
  prog = hcqdsl.parse(open("programs/jit_decode.hcq").read(), "jd.hcq")
  with pytest.raises(ValueError) as e: hcqdsl.check(prog, var_values={"poss": 1})
  assert str(e.value) == "var_values: `poss` is not a var of jd.hcq (did you mean `pos`?) (vars: pos, g0.epoch)"
  from hcqdsl.runtime import run
  with pytest.raises(ValueError): run(prog, var_values={"poss": 1})

def test_str_of_a_diagnostic_is_its_text():
  d = Diagnostic("race", "two writes", Span("f.hcq", 3, 5, 3, 9), notes=("add a wait",))
  assert str(d) == "f.hcq:3:5: error[race]: two writes\n  note: add a wait"

def test_run_summary_says_whose_time_it_is():
  r = hcqdsl.run(open("programs/run_pipeline.hcq").read(), filename="p.hcq")
  assert r.summary().split("\n")[0] == "p.hcq: 1 launch, 21.8 us emulated in the time-ordered schedule"
  r = hcqdsl.run(open("programs/run_pipeline.hcq").read(), filename="p.hcq", seed=3)
  assert r.summary().split("\n")[0].startswith("p.hcq: 1 launch, ") and r.summary().split("\n")[0].endswith(" us emulated in seed 3")

def test_long_lines_are_cut_around_the_caret():
  from hcqdsl.diagnostics import render_text
  line = "a" * 200 + " " * 99 + "hello" + "b" * 400
  out = render_text([Diagnostic("syntax", "x", Span("f", 1, 300, 1, 305))], {"f": line}).split("\n")
  assert len(out[1]) <= 4 + 126 and out[1].startswith("    ...") and out[1].endswith("...")
  assert out[2].index("^") == out[1].index("hello") and out[2].count("~") == 4

def test_docs_do_not_call_sdma_indirect_unsupported():
  from hcqdsl.runtime import run
  text = open("docs/run.md").read()
  assert "SDMA INDIRECT, COPY_DATA and register-space POLL_REGMEM fault as unsupported" not in text
  assert "SDMA INDIRECT runs: `--indirect` submits copy" in text
  r = run(open("programs/run_copy_chain.hcq").read(), launches=2, indirect=True)   # copy queues through SDMA INDIRECT
  assert r.ok and any(q.engine == "copy" and q.by_name.get("INDIRECT") for q in r.queues.values()), r.summary()
