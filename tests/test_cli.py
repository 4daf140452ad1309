"""The CLI says what happened, the same way in every subcommand: summary lines, capped reports, `--var` errors,
check errors from compile/run, and a description for every argument."""
import argparse, json, pathlib
import pytest
from cli_run import cli
from hcqdsl.cli import build_parser, COMMANDS
from hcqdsl.diagnostics import Diagnostic, render_text, split_lines, printable
import hcqdsl.diagnostics as diagnostics_mod
from hcqdsl.ir import Span

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "programs"


# ---- check's text report: capped per code, a summary line counting everything

def vis_program(n: int) -> str:
  """n reads of what the host wrote to device memory, with no barrier (the HDP flush): n `visibility` warnings."""
  out = ["device g0 = AMD:0", f"buffer a on g0 size {64 * n} rewritten = u8 [1]", "kernel rd(in x)", "queue r compute on g0 {"]
  out += [f"  exec rd(a[{64 * i}:{64 * (i + 1)}])" for i in range(n)]
  out += ["}"]
  return "\n".join(out) + "\n"

def test_clean_check_prints_a_summary(capsys):
  rc, out, err = cli("check", PROGRAMS / "tutorial_fixed.hcq", "--launches", "3")
  assert (rc, out, err) == (0, "ok: 0 errors, 0 warnings over 3 launches, 2 queues\n", "")

def test_failed_check_summary(capsys):
  rc, out, _ = cli("check", PROGRAMS / "deadlock_cycle.hcq")
  assert rc == 1 and out.splitlines()[-1] == "failed: 1 error, 0 warnings over 2 launches, 2 queues"

def test_check_summary_says_what_a_lift_left_out(tmp_path, capsys):
  """A lifted capture whose header says steps were left out (`# hcq: unlifted=N`): `ok` is not the whole story."""
  f = tmp_path / "lifted.hcq"
  f.write_text("# hcq: launches=2 unlifted=35\n" + (PROGRAMS / "tutorial_fixed.hcq").read_text())
  rc, out, _ = cli("check", f)
  last = out.splitlines()[-1]
  assert rc == 0 and last.startswith("ok: 0 errors, 0 warnings over ") and last.endswith(
    "queues; NOT CHECKED: 35 captured steps the lift left out (its `# note:` lines; `hcqdsl lift` without `--folded-only` lifts every step)"), last

def test_syntax_error_summary_counts_no_queues(tmp_path, capsys):
  f = tmp_path / "bad.hcq"
  f.write_text("device g = AMD:0\nqueue q compute on g {\n  barrier\n")
  rc, out, _ = cli("check", f)
  assert rc == 1 and out.splitlines()[-1] == "failed: 1 error, 0 warnings"

def test_text_caps_warnings_per_code(tmp_path, capsys):
  f = tmp_path / "vis.hcq"
  f.write_text(vis_program(30))
  rc, out, _ = cli("check", f, "--max-diagnostics", "4", "--launches", "1")
  lines = out.splitlines()
  assert rc == 0 and sum(": warning[visibility]: " in x for x in lines) == 4
  assert lines[-2:] == ["... and 26 more visibility warnings (--max-diagnostics 0 shows all)",
                        "ok: 0 errors, 30 warnings over 1 launch, 1 queue"]
  rc, out, _ = cli("check", f, "--max-diagnostics", "0", "--launches", "1")
  assert sum(": warning[visibility]: " in x for x in out.splitlines()) == 30 and "more visibility" not in out
  rc, out, _ = cli("check", f, "--launches", "1")  # default: 20 of each code
  assert sum(": warning[visibility]: " in x for x in out.splitlines()) == 20
  assert "... and 10 more visibility warnings (--max-diagnostics 0 shows all)" in out
  rc, out, _ = cli("check", f, "--format", "json", "--max-diagnostics", "1", "--launches", "1")  # JSON and SARIF stay complete
  assert len(json.loads(out)["diagnostics"]) == 30
  rc, out, _ = cli("check", f, "--format", "sarif", "--max-diagnostics", "1", "--launches", "1")
  assert len(json.loads(out)["runs"][0]["results"]) == 30

def test_errors_are_never_capped():
  ds = [Diagnostic("race", f"r{i}", None) for i in range(5)] + [Diagnostic("visibility", "v", None, "warning")] * 3
  out = render_text(ds, {}, max_per_code=2)
  assert out.count("error[race]") == 5 and out.count("warning[visibility]") == 2
  assert out.endswith("... and 1 more visibility warning (--max-diagnostics 0 shows all)\n")

def test_render_splits_each_source_once(monkeypatch):
  calls = []
  real = diagnostics_mod.head_lines
  monkeypatch.setattr(diagnostics_mod, "head_lines", lambda t, n: calls.append(n) or real(t, n))
  src = "\n".join(f"wait s >= {i}" for i in range(1000)) + "\n"
  ds = [Diagnostic("visibility", "v", Span("p.hcq", i, 1, i, 5), "warning") for i in range(1, 1001)]
  out = render_text(ds, {"p.hcq": src, "unused.hcq": src})
  assert calls == [1000] and out.count("\n    wait s >= ") == 1000
  # capped: split only as far as the last line shown
  out = render_text(ds[::-1] + [Diagnostic("race", "r", Span("p.hcq", 5, 1, 5, 2))], {"p.hcq": src}, max_per_code=3)
  assert calls == [1000, 1000] and out.count("\n    wait s >= ") == 4
  calls.clear()
  out = render_text(ds, {"p.hcq": src}, max_per_code=3)
  assert calls == [3] and out.splitlines()[1::3] == ["    wait s >= 0", "    wait s >= 1", "    wait s >= 2"]

def test_head_lines():
  for text in ("a\nb\r\nc\rd\n", "a\nb\nc\n", "a\nb", "", "\n\n\n"):
    full = split_lines(text)
    for n in range(0, 6):
      head = diagnostics_mod.head_lines(text, n)
      assert head[:n] == full[:n] and (len(head) >= n + 1 or head == full), (text, n)

# ---- source lines: split only at \n, \r\n and a lone \r; unprintable characters escaped in excerpts

def test_split_lines():
  assert split_lines("a\nb\r\nc\rd\x0ce\x0bf\x1cg\x85h\u2028i\u2029j\n") == \
    ["a", "b", "c", "d\x0ce\x0bf\x1cg\x85h\u2028i\u2029j", ""]
  assert split_lines("") == [""] and split_lines("x") == ["x"] and split_lines("\r\r\n") == ["", "", ""]

def test_markers_count_lines_as_the_language_does():
  from hcqdsl.pytest_plugin import parse_markers
  # a form feed inside a comment is not a line break: the marker is on line 2
  assert [(m.line, m.code) for m in parse_markers("# page\x0cbreak\nwait s >= 1  # E: deadlock\n")] == [(2, "deadlock")]

def test_printable():
  assert printable("  wait s >= 1") == ("  wait s >= 1", None)
  assert printable("a\x0cb\tc\u2028") == ("a\\x0cb c\\u2028", [0, 1, 5, 6, 7, 8, 14])

def test_excerpt_quotes_the_named_line_with_escapes():
  src = "device g = AMD:0\x0c # form feed\nqueue q compute on g {\n\x0b wait s >= 1\n}\n"
  d = Diagnostic("name", "unknown signal `s`", Span("p.hcq", 3, 7, 3, 8))
  assert render_text([d], {"p.hcq": src}) == ("p.hcq:3:7: error[name]: unknown signal `s`\n"
                                              "    \\x0b wait s >= 1\n"
                                              "             ^\n")
  d = Diagnostic("syntax", "x", Span("p.hcq", 2, 1, 2, 6))   # line 2 is the queue line, not text after the \x0c
  assert render_text([d], {"p.hcq": src}).splitlines()[1] == "    queue q compute on g {"

# ---- --var: one error everywhere; 32-bit values only

@pytest.mark.parametrize("cmd", ["check", "graph", "run", "compile"])
def test_unknown_var_is_the_same_error_everywhere(cmd, capsys, tmp_path):
  f = PROGRAMS / "tutorial_fixed.hcq"
  extra = ["--hex"] if cmd == "compile" else []
  rc, out, err = cli(cmd, f, "--var", "kik=1", *extra)
  assert rc == 2 and out == ""
  assert err == f"hcqdsl: error[name]: --var: `kik` is not a var of {f} (did you mean `kick`?) (vars: kick, gpu0.epoch)\n"

@pytest.mark.parametrize("cmd", ["check", "graph", "run", "compile"])
@pytest.mark.parametrize("value", ["9223372036854775808", "4294967296", "-1"])
def test_var_outside_32_bits_is_an_overflow_error(cmd, value, capsys):
  rc, out, err = cli(cmd, PROGRAMS / "tutorial_fixed.hcq", "--var", f"kick={value}")
  assert rc == 2 and out == ""
  assert err == f"hcqdsl: error[overflow]: --var kick={value}: {value} is outside 32 bits (values are 0 .. 4294967295)\n"

def test_var_pins_compile_hex(capsys):
  rc, a, _ = cli("compile", PROGRAMS / "tutorial_fixed.hcq", "--hex")
  rc2, b, _ = cli("compile", PROGRAMS / "tutorial_fixed.hcq", "--hex", "--var", "kick=4294967295")
  assert rc == rc2 == 0 and a != b and "ffffffff" in b

# ---- compile and run say when the program has check errors

def test_compile_and_run_report_check_errors(capsys, tmp_path):
  f = PROGRAMS / "tutorial_deadlock.hcq"
  line = (f"hcqdsl: warning: {f} has 1 check error (deadlock); run `hcqdsl check {f}` (--no-check silences this)\n")
  rc, _, err = cli("compile", f, "-o", tmp_path / "d.hcqimg")
  assert rc == 0 and err.startswith(line)
  rc, _, err = cli("compile", f, "-o", tmp_path / "d.hcqimg", "--no-check")
  assert rc == 0 and "check error" not in err
  rc, out, err = cli("run", f)
  assert rc == 1 and err == line
  rc, out, err = cli("run", f, "--no-check")
  assert rc == 1 and err == ""
  rc, _, err = cli("compile", PROGRAMS / "tutorial_fixed.hcq", "-o", tmp_path / "f.hcqimg")
  assert rc == 0 and "check error" not in err

# ---- readable parse output; hung queues shown blocked

def test_parse_prints_an_indented_tree(capsys):
  rc, out, _ = cli("parse", PROGRAMS / "deadlock_cycle.hcq")
  assert rc == 0 and out.splitlines()[:6] == [
    f"Program {PROGRAMS / 'deadlock_cycle.hcq'}: 5 declarations",
    "  Device name='gpu0' vendor='AMD' index=0 arch='gfx1100'  @2:1",
    "  Signal name='ready0' device=gpu0 init=0  @4:1",
    "  Signal name='ready1' device=gpu0 init=0  @5:1",
    "  Queue name='c0' engine='compute' device=gpu0  @7:1",
    "    Wait signal=ready1 value=1  @8:3"]
  rc, out, _ = cli("parse", PROGRAMS / "deadlock_cycle.hcq", "--json")
  assert rc == 0 and json.loads(out)["kind"] == "Program" and out.count("\n") > 10

def test_run_shows_hung_queues_blocked_at_their_wait(capsys):
  rc, out, _ = cli("run", PROGRAMS / "tutorial_deadlock.hcq", "--no-check")
  assert rc == 1
  assert "  c0 (compute on gpu0): 0 packets, blocked since 1.0 us at line 16: `wait copied >= kick` (launch 1)  []" in out
  assert "done at" not in out

# ---- every argument of every subcommand has a description

def test_every_argument_has_help():
  ap = build_parser()
  subs = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
  seen = 0
  for name, p in [("", ap)] + list(subs.choices.items()):
    for act in p._actions:
      if isinstance(act, (argparse._HelpAction, argparse._SubParsersAction)): continue
      assert act.help and act.help != argparse.SUPPRESS, f"hcqdsl {name}: {act.dest} has no help"
      seen += 1
  assert set(subs.choices) == set(COMMANDS) and len(COMMANDS) == 14 and seen >= 35
  assert all(c.help for c in subs._choices_actions)

# ---- diagnostics like a good compiler (exact messages)

from hcqdsl.check import check_text

def msgs(text):
  return [(d.span.line, d.span.column, d.code, d.message) for d in check_text(text, "p.hcq")]

def test_did_you_mean():
  text = ("device gpu0 = AMD:0\nsignal ready on gpu0\nvar kick\nqueue c0 compute on gpu0 {\n  wait raedy >= kik\n"
          "  signal gpu.timeline = 1\n  signal zzz = 1\n}\n")
  assert msgs(text) == [(5, 8, "name", "unknown signal `raedy` (did you mean `ready`?)"),
                        (5, 17, "name", "unknown var `kik` (did you mean `kick`?)"),
                        (6, 10, "name", "unknown device `gpu` in `gpu.timeline` (did you mean `gpu0`?)"),
                        (7, 10, "name", "unknown signal `zzz`")]

def test_missing_brace_points_at_the_open_brace():
  text = "device g = AMD:0\nsignal s on g\nqueue c0 compute on g {\n  signal s = 1\n\nqueue c1 compute on g {\n  wait s >= 1\n}\n"
  [d] = check_text(text, "p.hcq")
  assert (d.span.line, d.span.column, d.message) == (3, 23, "this `{` is never closed: a `}` is missing before `queue` at line 6")
  assert [(r.span.line, r.span.column, r.message) for r in d.related] == [(6, 1, "`queue` starts the next declaration here")]
  [d] = check_text("device g = AMD:0\nhost {\n  submit\n", "p.hcq")
  assert (d.span.line, d.span.column, d.message, d.related) == (2, 6, "this `{` is never closed: a `}` is missing before the end of the file", ())

def test_keyword_as_a_name_is_one_error():
  text = "device g = AMD:0\nsignal wait on g\nqueue c0 compute on g {\n  signal wait = 1\n}\nhost {\n  wait wait >= 1\n}\n"
  assert msgs(text) == [(2, 8, "syntax", "`wait` is a keyword and cannot be used as a name")]

def test_header_reader_equals_reading_every_line():
  # read_header looks only at the lines around each `hcq:`; reading every line with the header regex is its definition
  import random, re
  from hcqdsl.header import read_header, header_launches, HeaderError
  line_rx = re.compile(r"[ \t]*#[ \t]*hcq:(.*)")
  def every_line(t):
    opts = {}
    for n, line in enumerate(t.split("\n"), 1):
      if (m := line_rx.fullmatch(line)) is None: continue
      for item in m.group(1).split():
        key, eq, val = item.partition("=")
        if key not in ("launches", "seeds") or not eq or not val.isdigit() or int(val) < 1: return "error"
        opts[key] = int(val)
    return opts
  def reader(t):
    try: return read_header(t)
    except HeaderError: return "error"
  atoms = ["#", " ", "\n", "hcq:", "launches=", "seeds=", "3", "0", "x", "\t", "# hcq: launches=2\n", "##", "queue q {\n"]
  rng, found, errors = random.Random(13), 0, 0
  for _ in range(20000):
    t = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 12)))
    assert reader(t) == every_line(t), repr(t)
    found += every_line(t) not in ("error", {})
    errors += every_line(t) == "error"
  assert found > 1000 and errors > 100
  assert header_launches("queue q compute on d {\n}\n#\n  # hcq: seeds=2 launches=4\n") == 4
  with pytest.raises(HeaderError, match=r"^line 2: `launches=x`: launches takes an integer$"): read_header("\n# hcq: launches=x\n")
