"""hcqdsl/lang/lexical.py: the words both parse paths and the formatter share, read and written one way."""
import re, threading
import pytest
from hypothesis import given, settings, strategies as st
import hcqdsl.lang.scan
from hcqdsl.lang import lexical
from hcqdsl.lang.lexical import int_text, int_value, size_text, range_text, quote, unquote, comments, is_binary
from hcqdsl.lang.parse import parse_syntax, lark_parser

def test_the_grammar_reads_lexicals_terminals():
  terms = {t.name: t.pattern.value for t in lark_parser().terminals}
  # (lark writes the `\n` of a /regex/ as the character itself)
  for name, rx in lexical.TERMINALS.items(): assert terms[name.split(".")[0]].replace("\n", "\\n") == rx, name

@pytest.mark.parametrize("text, value, suffix", [("4096", 4096, None), ("4_096", 4096, None), ("0x1_0", 16, None),
                         ("0X10", 16, None), ("4K", 4096, "K"), ("0x10K", 16 << 10, "K"), ("3M", 3 << 20, "M"),
                         ("2G", 2 << 30, "G"), ("8589934592G", 1 << 63, "G")])
def test_integers(text, value, suffix):
  assert int_text(text) == (value, suffix) and int_value(text) == value

def test_a_number_that_is_not_one_is_an_error_in_both_readers():
  with pytest.raises(ValueError): int_text("0x_")
  assert parse_syntax("device g = AMD:0\nbuffer b on g size 0x_\n")[1][0].message == "`0x_` is not a number"

@given(st.integers(0, 1 << 64))
def test_sizes_read_back(v):
  t = size_text(v)
  assert int_value(t) == v and re.fullmatch(lexical.SIZED, t)

def test_size_and_range_text():
  assert [size_text(v) for v in (0, 1, 1024, 1536, 1 << 20, 3 << 30, 1 << 40)] == ["0", "1", "1K", "1536", "1M", "3G", "1024G"]
  assert range_text(None, 4096) == "[:4K]" and range_text(256, None) == "[256:]" and range_text(0, 100) == "[0:100]"

@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",), max_codepoint=0x2100)))
def test_strings_read_back(s):
  q = quote(s)
  assert re.fullmatch(lexical.STRING, q) and unquote(q) == s

def test_quoting():
  assert quote('a"b\\c\td') == '"a\\"b\\\\c\\td"'
  assert quote("int x;\nint y;") == '"""int x;\nint y;"""'
  assert quote('x\n"') == '"x\\n\\""'            # a `"` at the end would close a triple-quoted string early
  assert quote("x\r\ny") == '"x\\r\\ny"'         # reading turns a `\r\n` into `\n`: escaped instead
  assert unquote('"\\q\\n"') == "\\q\n"            # an unknown escape is kept as written

def test_comments_outside_strings():
  text = 'kernel k() = c "a # not a comment"  # one\n# two "quoted"\nx = """\n# three is in a string\n""" # four'
  assert [c for _, c in comments(text)] == ["# one", '# two "quoted"', "# four"]

def test_binary_files():
  assert is_binary("\x7fELF\x02\x01\x01\0\0") and is_binary("".join(map(chr, range(32))) * 10)
  assert not is_binary("device g = AMD:0\n") and not is_binary("a\x0cb" + "x" * 100) and not is_binary("a\0b" + "x" * 100)

def test_parsing_is_reentrant():
  # two threads parse through the grammar (the fast path declines), each its own comments: no state is shared
  texts = [f"device g = AMD:0  # device {i}\nsignal s on g  # signal {i}\n" * 20 for i in range(2)]
  expect = [[d.comment for d in parse_syntax(t)[0].decls] for t in texts]
  orig, bad = hcqdsl.lang.scan.scan, []
  hcqdsl.lang.scan.scan = lambda t, f, clean=False: None
  def work(i):
    for _ in range(30):
      got = [d.comment for d in parse_syntax(texts[i])[0].decls]
      if got != expect[i]: bad.append(i)
  try:
    ts = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in ts: t.start()
    for t in ts: t.join()
  finally: hcqdsl.lang.scan.scan = orig
  assert not bad and expect[0][0] == "# device 0" and expect[1][-1] == "# signal 1"
