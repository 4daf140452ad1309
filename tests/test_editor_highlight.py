"""The highlighting generated from the grammar (hcqdsl/editor/highlight.py): the committed files are what the generator
writes (so they cannot drift from grammar.lark), the TextMate grammar colours every keyword of programs/ as the
grammar reads it, and Vim loads the syntax file and colours a program with it."""
import json, pathlib, re, shutil, subprocess
import pytest
from hcqdsl.editor import highlight
from lark import Token
from hcqdsl.lang.parse import lark_parser
from hcqdsl.lang.lexical import comments

ROOT = pathlib.Path(__file__).resolve().parents[1]

@pytest.mark.parametrize("rel", sorted(highlight.FILES))
def test_committed_file_is_what_the_generator_writes(rel):
  committed = (ROOT / "editors" / rel).read_text()
  assert committed == getattr(highlight, highlight.FILES[rel])(), f"editors/{rel} is stale: run `python tools/highlight.py`"

def test_keywords_are_the_grammars():
  kw = highlight.keywords()
  assert kw["declaration"] == ["buffer", "device", "expect", "host", "kernel", "queue", "signal", "var"]
  assert kw["statement"] == ["barrier", "copy", "epoch", "exec", "poll", "submit", "timestamp", "wait", "write"]
  assert {"compute", "on", "size", "inout", "rebound", "grid", "block", "code", "rtol"} <= set(kw["other"])
  assert kw["before_string"] == ["amd", "c", "from"] and kw["member"] == ["epoch", "timeline"]

def _tokens(grammar: dict, line: str, at: bool = False) -> list:
  """(text, scope) (with `at`: (column, text, scope)) of a line as a TextMate engine reads it: at each position the first pattern that matches there
  (a begin/end pattern runs to its end on the line); Python's re reads these patterns as Oniguruma does."""
  pats = [(re.compile(p.get("match") or p["begin"]), p) for p in grammar["patterns"]]
  out, i = [], 0
  while i < len(line):
    best = None
    for rx, p in pats:
      m = rx.search(line, i)
      if m and m.end() > m.start() and (best is None or m.start() < best[0].start()): best = (m, p)
    if best is None: break
    m, p = best
    end = m.end()
    if "begin" in p:
      e = re.compile(p["end"]).search(line, end)
      end = e.end() if e else len(line)
    out.append((m.start() + 1, line[m.start():end], p["name"]) if at else (line[m.start():end], p["name"]))
    i = end
  return out

def test_textmate_scopes_match_the_lexer_on_every_program():
  """Every keyword token lark's lexer finds in programs/*.hcq is coloured as a keyword, every NUMBER/FLOAT as a number,
  every comment as a comment, and nothing the lexer reads as a NAME is coloured as a keyword (contextual keywords
  aside: `write`, `poll`, ... are keywords only where the grammar says, a name elsewhere)."""
  grammar = json.loads((ROOT / "editors/vscode/syntaxes/hcq.tmLanguage.json").read_text())
  kinds = {"storage.type.declaration.hcq": "kw", "keyword.control.statement.hcq": "kw", "keyword.other.hcq": "kw",
           "variable.language.implicit.hcq": "kw", "constant.numeric.hcq": "num", "comment.line.number-sign.hcq": "comment"}
  words = {w for ws in highlight.keywords().values() for w in ws}
  compared = 0
  for f in sorted((ROOT / "programs").glob("*.hcq")):
    text = f.read_text()
    lines = text.split("\n")
    seen = {}
    for n, line in enumerate(lines, 1):
      for col, tok, scope in _tokens(grammar, line, at=True): seen[(n, col)] = (tok, kinds.get(scope))
    try: tree = lark_parser().parse(text)
    except Exception: continue   # (the syntax-error examples)
    toks = list(tree.scan_values(lambda t: isinstance(t, Token)))   # as the contextual lexer read them
    for off, c in comments(text): toks.append(Token("COMMENT", c, line=text.count("\n", 0, off) + 1, column=off - text.rfind("\n", 0, off)))
    for t in toks:
      if t.type in ("_NL",) or t.value.strip() == "": continue
      got = seen.get((t.line, t.column))
      if t.type in ("NUMBER", "FLOAT"): want = "num"
      elif t.type == "COMMENT": want = "comment"
      elif t.value in words and t.type != "NAME": want = "kw"
      else: continue
      assert got is not None and got[1] == want and got[0] == t.value, (f.name, t.line, t.column, t.value, got)
      compared += 1
  assert compared > 1500, compared

def test_textmate_grammar_colours_a_name_that_looks_like_a_keyword_as_a_name():
  grammar = json.loads((ROOT / "editors/vscode/syntaxes/hcq.tmLanguage.json").read_text())
  toks = dict(_tokens(grammar, "queue c compute on gpu0 {  # hcq: ignore[race]"))
  assert toks == {"queue": "storage.type.declaration.hcq", "compute": "keyword.other.hcq", "on": "keyword.other.hcq",
                  "# hcq: ignore[race]": "comment.line.number-sign.hcq"}
  toks = dict(_tokens(grammar, 'kernel k(in a, u32 n) = c "int x;" amd "k.co"'))
  assert toks["c"] == toks["amd"] == "keyword.other.hcq" and toks['"int x;"'] == "string.quoted.double.hcq"
  assert dict(_tokens(grammar, "  wait gpu0.timeline >= gpu0.epoch - 1"))["timeline"] == "variable.language.implicit.hcq"

def test_vim_loads_the_syntax_file_and_colours_a_program(tmp_path):
  nvim = shutil.which("nvim") or shutil.which("vim")
  if nvim is None: pytest.skip("no nvim or vim on PATH (`apt-get install neovim`)")
  prog = tmp_path / "p.hcq"
  prog.write_text('device g = AMD:0 gfx1100\nqueue c compute on g {\n  wait g.timeline >= 0x10  # hcq: ignore[race]\n}\n')
  probes = [(1, 1), (1, 12), (1, 18), (2, 9), (3, 3), (3, 9), (3, 23), (3, 29), (3, 31)]
  expr = " . ',' . ".join(f"synIDattr(synID({l}, {c}, 1), 'name')" for l, c in probes)
  out = tmp_path / "out.txt"
  r = subprocess.run([nvim, "-u", "NONE", "-i", "NONE", "-n", "-es", "--cmd", f"set rtp^={ROOT / 'editors/vim'}",
                      "-c", "filetype on", "-c", "syntax on", "-c", f"edit {prog}",
                      "-c", f"call writefile([&filetype . ':' . {expr}], '{out}')", "-c", "qa!"],
                     capture_output=True, text=True, timeout=60)
  assert out.exists(), r.stderr
  assert out.read_text().strip() == ("hcq:hcqDeclaration,hcqTarget,hcqTarget,hcqKeyword,hcqStatement,hcqImplicit,hcqNumber,"
                                     "hcqComment,hcqDirective")

def test_vscode_extension_names_the_generated_grammar():
  pkg = json.loads((ROOT / "editors/vscode/package.json").read_text())
  [lang], [gram] = pkg["contributes"]["languages"], pkg["contributes"]["grammars"]
  assert lang["extensions"] == [".hcq"] and gram["language"] == lang["id"] == "hcq" and gram["scopeName"] == highlight.SCOPE
  assert (ROOT / "editors/vscode" / gram["path"]).resolve() == (ROOT / "editors/vscode/syntaxes/hcq.tmLanguage.json")
  assert (ROOT / "editors/vscode" / lang["configuration"]).exists() and (ROOT / "editors/vscode" / pkg["main"]).exists()
  assert pkg["contributes"]["configuration"]["properties"]["hcqdsl.command"]["default"] == ["hcqdsl", "lsp"]
