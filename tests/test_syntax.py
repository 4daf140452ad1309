import pathlib
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from cli_run import cli
import hcqdsl
from hcqdsl import parse, format, HcqError
from hcqdsl.lang.parse import parse_syntax
from hcqdsl import parse_with_diagnostics
from hcqdsl.diagnostics import render_text
import hcqdsl.lang.scan
from strategies import programs

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROGRAMS = sorted((ROOT / "programs").glob("*.hcq"))

def lark_only(text, file="<input>"):
  """The grammar's result, with the fast path switched off."""
  orig = hcqdsl.lang.scan.scan
  hcqdsl.lang.scan.scan = lambda t, f, clean=False: None
  try: return parse_syntax(text, file)
  finally: hcqdsl.lang.scan.scan = orig

def errors(text, file="t.hcq"):
  _, diags = parse_with_diagnostics(text, file)
  return [f"{d.span.line}:{d.span.column}: {d.code}: {d.message}" for d in diags]

# ---- round trips

@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(programs())
def test_format_parse_round_trip(prog):
  text = format(prog)
  back, diags = parse_syntax(text, "<input>")
  assert not [d for d in diags if d.code == "syntax"], render_text(diags, {"<input>": text})
  assert back == prog
  assert format(back) == text                      # a fixed point
  assert back.end_comments == prog.end_comments     # comments survive, though equality ignores them
  assert [getattr(d, "comments", ()) for d in back.decls] == [getattr(d, "comments", ()) for d in prog.decls]

def test_fast_path_takes_formatted_programs():
  text = format(parse((ROOT / "programs" / "spec_example.hcq").read_text()))
  assert hcqdsl.lang.scan.scan(text, "x") is not None

@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_programs_parse_and_are_formatted(path):
  text = path.read_text()
  prog, diags = parse_syntax(text, str(path))
  assert prog is not None and not [d for d in diags if d.code == "syntax"]
  assert format(prog) == text, f"run: hcqdsl fmt {path.relative_to(ROOT)}"

def test_layout_does_not_matter():
  a = parse("device g = AMD:0\nsignal s on g\nqueue q compute on g {\n  wait s >= 1; signal s = 2\n}\n")
  b = parse("device   g=AMD:0 # x\n\n\nsignal s on g;queue q compute on g { wait s>=1\nsignal s=2 }")
  assert a == b

def test_spans_point_at_the_statement():
  p = parse("device g = AMD:0\nsignal s on g\nqueue q compute on g {\n    wait s >= 0x10\n}\n", "x.hcq")
  w = p.queues[0].body[0]
  assert (w.span.file, w.span.line, w.span.column, w.span.end_line, w.span.end_column) == ("x.hcq", 4, 5, 4, 19)
  assert w.value.offset == 16

def test_sizes_and_numbers():
  p = parse("device g = AMD:0\nbuffer a on g size 64K\nbuffer b on g size 0x1_000\nbuffer c on host size 1M\n"
            "queue x copy on g {\n  copy a[1K:2K] <- b[:1_024]\n}\n")
  assert [b.size for b in p.buffers] == [65536, 4096, 1 << 20]
  c = p.queues[0].body[0]
  assert (c.dst.start, c.dst.end, c.src.start, c.src.end) == (1024, 2048, None, 1024)
  assert p.buffers[2].device is None

def test_implicit_names():
  p = parse("device g = AMD:0\nqueue q compute on g {\n  epoch\n  signal g.timeline = g.epoch + 1\n}\n")
  assert "g.timeline" in [s.name for s in p.signals] and "g.epoch" in p.vars

def test_kernel_implementations():
  p = parse('kernel k(out a, in b) = builtin scale<f32>(2.5) c """\nvoid k(float *a, float *b) { a[0] = b[0]; }\n""" amd "k.co"\n')
  k = p.kernels[0]
  assert (k.impl.builtin, k.impl.dtype, k.impl.args, k.impl.amd_code) == ("scale", "f32", (2.5,), "k.co")
  assert "a[0] = b[0]" in k.impl.c_source
  assert [(x.mode, x.name) for x in k.params] == [("out", "a"), ("in", "b")]

def test_data_and_expect():
  p = parse("device g = AMD:0\nbuffer a on g size 16 = f32 [1.5, -2, inf, nan]\nexpect a[0:8] ~= f32 [1.5, -2.0]\n")
  assert p.buffers[0].init.values[:2] == (1.5, -2.0)
  assert p.expects[0].approx and p.expects[0].target.end == 8

def test_comments_survive_formatting():
  text = ("# top\ndevice g = AMD:0  # the gpu\n\nsignal s on g\n\nqueue q compute on g {  # hdr\n  # lead\n  wait s >= 1  # E: deadlock\n"
          "  # tail\n}  # end\n\n# eof\n")
  assert format(parse(text)) == text

# ---- diagnostics, tested exactly

def test_syntax_error_in_words():
  text = "device g = AMD:0\nsignal s on g\nqueue q compute on g {\n  wait s 1\n}\n"
  with pytest.raises(HcqError) as e: parse(text, "p.hcq")
  assert str(e.value) == ("p.hcq:4:10: error[syntax]: expected `>=` after the signal name, found `1`\n"
                          "      wait s 1\n"
                          "             ^\n")

@pytest.mark.parametrize("text,expected", [
  ("device g = AMD:0\nqueue q compute on g {\n  signal\n}\n", ["3:9: syntax: expected a name after `signal`, found end of line"]),
  ("device g = AMD:0\nbuffer a on g\n", ["2:14: syntax: expected `size` after the device name, found end of line"]),
  ("device g = AMD:0\nqueue q compute on g {\n  exec k(a\n}\n", ["3:11: syntax: expected `)` or `,` after the argument, found end of line"]),
  ("var x $\n", ["1:7: syntax: unexpected character `$`"]),
  ("device g = AMD:0\nsignal s on g = 1K\n", ["2:17: syntax: a size suffix (`K`) is only allowed on sizes and byte ranges"]),
  ("device g = AMD:0\nsignal s on g = 4294967296\n", ["2:17: overflow: initial value 4294967296 is outside 32 bits"]),
  ("var copy\n", ["1:5: syntax: `copy` is a keyword and cannot be used as a name"]),
  ("device g = AMD:0\nqueue q compute on g {\n  wait s >= 1\n  wait t >= 2\n  bad\n}\n",
   ["5:3: syntax: expected `}` or a statement (`wait`, `signal`, `exec`, `copy`, ...), found `bad`"]),
])
def test_syntax_errors(text, expected):
  assert errors(text)[:len(expected)] == expected

def test_several_syntax_errors_per_run():
  text = "device g = AMD:0\nsignal s on g\nqueue q compute on g {\n  wait s 1\n  signal s 2\n  wait s >= 1\n}\n"
  assert [e.split(":")[0] for e in errors(text)] == ["4", "5"]

def test_name_errors():
  text = ("device g = AMD:0\ndevice g = AMD:1\nbuffer a on g size 16\nsignal s on nowhere\nkernel k(out x)\n"
          "queue c copy on g {\n  exec k(a)\n  wait a >= 1\n}\nqueue d compute on g {\n  exec k(a, a)\n  copy a <- a\n  wait s >= zz\n}\n"
          "host {\n  submit c, c, zz\n}\n")
  assert errors(text) == [
    "2:1: name: `g` is already declared as a device at line 1",
    "4:13: name: unknown device `nowhere`",
    "7:3: name: `exec` on copy queue `c`: kernels run on compute queues",
    "8:8: name: `a` is a buffer, not a signal",
    "11:3: name: kernel `k` takes 1 argument, 2 given",
    "12:3: name: `copy` on compute queue `d`: copies run on copy queues",
    "13:13: name: unknown var `zz`",
    "16:13: name: queue `c` is already submitted at line 16",
    "16:16: name: unknown queue `zz`",
  ]

def test_bounds_errors():
  text = ("device g = AMD:0\nbuffer a on g size 16\nbuffer b on g size 32\nqueue x copy on g {\n  copy a <- b\n"
          "  copy a[0:8] <- b[8:24]\n  copy a[8:4] <- b[0:4]\n  copy a[0:32] <- b\n}\n")
  assert errors(text) == [
    "5:3: bounds: copy of unequal lengths: `a` is 16 bytes, `b` is 32",
    "6:3: bounds: copy of unequal lengths: `a[0:8]` is 8 bytes, `b[8:24]` is 16",
    "7:3: bounds: copy of unequal lengths: `a[8:4]` is -4 bytes, `b[0:4]` is 4",
    "7:8: bounds: range `a[8:4]` ends before it starts",
    "8:8: bounds: range `a[0:32]` is outside buffer `a` (16 bytes)",
  ]

def test_statement_in_the_wrong_block():
  text = "device g = AMD:0\nkernel k()\nqueue q compute on g {\n  submit\n}\nhost {\n  exec k()\n  epoch\n}\n"
  assert errors(text) == ["4:3: syntax: `submit` is a host statement; queues cannot submit",
                          "7:3: syntax: `exec` is not allowed in a host block (host accepts wait, signal, submit and `write B = T [..], ...`)",
                          "8:3: syntax: `epoch` is not allowed in a host block (host accepts wait, signal, submit and `write B = T [..], ...`)"]

# ---- never a traceback

_ALPHABET = st.sampled_from(list("abcdegkqsuwxz019_ \t\n#;:.,=<>-+[](){}\"~@\\") +
                            ["wait ", "signal ", "exec ", "copy ", "queue ", "device ", "host", "{", "}", "\n", "K", "0x"])

@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ALPHABET, max_size=60).map("".join))
def test_random_text_never_raises(text):
  prog, diags = parse_with_diagnostics(text, "r.hcq")
  render_text(diags, {"r.hcq": text})
  assert prog is not None or diags

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.data())
def test_mutated_programs_never_raise(prog, data):
  text = format(prog)
  i = data.draw(st.integers(0, len(text)))
  j = data.draw(st.integers(i, min(len(text), i + 8)))
  junk = data.draw(st.text(alphabet=st.characters(codec="utf-8"), max_size=4))
  mutated = text[:i] + junk + text[j:]
  prog2, diags = parse_with_diagnostics(mutated, "m.hcq")
  render_text(diags, {"m.hcq": mutated})
  hcqdsl.check_text(mutated, "m.hcq") if prog2 is not None and not diags else None

# ---- the CLI


def test_cli_exit_codes(tmp_path):
  good = tmp_path / "g.hcq"
  good.write_text("device g = AMD:0\n")
  bad = tmp_path / "b.hcq"
  bad.write_text("device g = AMD:0\nvar g\n")
  assert cli("parse", str(good)).returncode == 0
  r = cli("check", str(bad))
  assert r.returncode == 1 and "b.hcq:2:1: error[name]: `g` is already declared as a device at line 1" in r.stdout
  r = cli("check", str(tmp_path / "missing.hcq"))
  assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr
  assert cli("check", "--bogus", str(good)).returncode == 2

def test_cli_fmt(tmp_path):
  f = tmp_path / "a.hcq"
  f.write_text("device   g = AMD:0   # gpu\n")
  r = cli("fmt", "--check", str(f))
  assert r.returncode == 1 and "would reformat" in r.stderr
  r = cli("fmt", "--diff", str(f))
  assert r.returncode == 0 and "+device g = AMD:0  # gpu" in r.stdout and f.read_text() == "device   g = AMD:0   # gpu\n"
  assert cli("fmt", str(f)).returncode == 0 and f.read_text() == "device g = AMD:0  # gpu\n"
  assert cli("fmt", "--check", str(f)).returncode == 0

def test_cli_parse_json(tmp_path):
  import json
  f = tmp_path / "a.hcq"
  f.write_text("device g = AMD:0\nsignal s on g = 3\n")
  out = json.loads(cli("parse", "--json", str(f)).stdout)
  assert out["decls"][1] == {"kind": "Signal", "name": "s", "device": {"kind": "Ref", "name": "g"}, "init": 3,
                             "span": {"line": 2, "column": 1, "end_line": 2, "end_column": 18}}

def test_cli_json_diagnostics(tmp_path):
  import json
  f = tmp_path / "a.hcq"
  f.write_text("device g = AMD:0\nqueue q compute on g {\n  wait nope >= 1\n}\n")
  d = json.loads(cli("check", "--format", "json", str(f)).stdout)["diagnostics"][0]
  assert {k: d[k] for k in ("code", "severity", "file", "line", "column", "message")} == \
    {"code": "name", "severity": "error", "file": str(f), "line": 3, "column": 8, "message": "unknown signal `nope`"}

# ---- line ends and control characters (issue 11)

MAC = "device g = AMD:0\rsignal s on g  # c\rqueue q compute on g {\r  wait s >= 1\r}\r"

@pytest.mark.parametrize("nl", ["\n", "\r\n", "\r"])
def test_line_ends(nl):
  text = MAC.replace("\r", nl)
  prog, diags = parse_syntax(text, "m.hcq")
  assert not diags and [s.span.line for s in prog.queues[0].body] == [4]
  assert [(d.code, d.span.line, d.span.column) for d in hcqdsl.check_text(text, "m.hcq")] == [("deadlock", 4, 3)]
  from hcqdsl.lang.parse import lark_parser
  assert lark_parser().parse(text) is not None   # the grammar alone takes every line end too

@pytest.mark.parametrize("ch", ["\f", "\v", "\x00", "\x1b", "\x7f", "\x85", "\u2028", "\u2029"])
def test_control_characters_are_syntax_errors(ch):
  text = f"device g = AMD:0\nsignal s on g\nqueue q compute on g {{\n  wait s >= 1{ch}\n}}\n"
  assert errors(text) == [f"4:14: syntax: control character U+{ord(ch):04X} is not allowed in a program (only tab and line ends)"]
  assert errors(text.replace("\n", "\r\n")) == errors(text)

def test_control_characters_and_other_syntax_errors():
  assert errors("device g = AMD:0\x0c\nvar 9\n") == [
    "1:17: syntax: control character U+000C is not allowed in a program (only tab and line ends)",
    "2:5: syntax: expected a name after `var`, found `9`"]

def test_control_character_check_equals_its_class():
  # has_control looks for each character with `in`; the regex class is what it stands for (`\r` is a line end)
  from hcqdsl.lang.lexical import has_control, CONTROL
  hits = 0
  for c in [*range(0x3000), 0xfeff, 0x10000]:
    t = "queue q\n\t" + chr(c) + " x"
    assert has_control(t) == bool(CONTROL.search(t)), hex(c)
    hits += has_control(t)
  assert hits == 64 and not has_control("ascii\ttext\r\n") and not has_control("é\n")
