"""Highlighting generated from the grammar, so it cannot drift: the keywords are the word terminals of grammar.lark
(the string terminals and the `word(?![A-Za-z0-9_])` ones the contextual lexer uses), sorted by where the grammar
puts them — the first word of a declaration, of a statement, or any other — and the number, string and comment
patterns are lexical.py's. Data types, vendors and archs are names in the grammar and constants of ir.py.

`textmate()` is a TextMate grammar (`.tmLanguage.json`: VS Code, GitHub's linguist, Sublime, most editors), `vim()`
a Vim syntax file; `python tools/highlight.py` writes both under editors/, and tests/test_editor_highlight.py
compares the committed files with what these functions give."""
from __future__ import annotations
import json, re
from ..ir import DTYPES, TARGETS, VENDORS
from ..lang.lexical import DIGITS, FLOAT
from ..lang.parse import lark_parser

__all__ = ["keywords", "textmate", "vim", "SCOPE", "FILES"]

SCOPE = "source.hcq"
# where editors/ keeps each generated file, and the function that makes it
FILES = {"vscode/syntaxes/hcq.tmLanguage.json": "textmate", "vim/syntax/hcq.vim": "vim"}

_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BOUNDARY = "(?![A-Za-z0-9_])"
_DECL, _STMT = "_decl", "_stmt"

def _words(pattern) -> list[str]:
  """The words a keyword terminal matches: a string terminal's text; a regex terminal written as alternatives of
  words (`(?:compute|copy)(?![A-Za-z0-9_])`, `[iu]32...`) expanded."""
  if pattern.type == "str": return [pattern.value] if _WORDS.fullmatch(pattern.value) else []
  body = pattern.value
  if not body.endswith(_BOUNDARY): return []
  body = body[:-len(_BOUNDARY)]
  if body.startswith("(?:") and body.endswith(")"): body = body[3:-1]
  out = []
  for alt in body.split("|"):
    m = re.fullmatch(r"\[([a-z]+)\]([a-z0-9_]+)", alt)   # a class of first letters: [iu]32
    if m: out += [c + m.group(2) for c in m.group(1)]
    elif _WORDS.fullmatch(alt): out.append(alt)
  return out

def keywords() -> dict[str, list[str]]:
  """{"declaration": words that begin a declaration, "statement": ... a statement, "other": every other keyword,
  "before_string": the keywords the grammar always follows with a string (`c "..."`, `amd "k.co"`, `from "w.st"`:
  highlighted only there, as `c` is a common name), "member": the words after a dot (`D.timeline`, `D.epoch`)},
  each sorted; a word in two (`signal`, `copy`) is in the first."""
  p = lark_parser()
  terms = {t.name: _words(t.pattern) for t in p.terminals}
  rules: dict[str, list] = {}
  after: dict[str, set] = {}
  before: dict[str, set] = {}
  for r in p.rules:
    names: list = [s.name for s in r.expansion]
    rules.setdefault(r.origin.name, []).append(names)
    for a, b in zip(names, names[1:] + [None]): after.setdefault(a, set()).add(b)
    for a, b in zip([None, *names], names): before.setdefault(b, set()).add(a)
  def first_words(group: str) -> set[str]:
    return {w for (rule,) in rules[group] for exp in rules[rule] if exp for w in terms.get(exp[0], ())}
  decl = first_words(_DECL)
  stmt = first_words(_STMT) - decl
  before_string = {w for t, ws in terms.items() if after.get(t) == {"STRING"} for w in ws}
  member = {w for t, ws in terms.items() if "DOT" in before.get(t, ()) for w in ws}
  only_member = {w for t, ws in terms.items() if before.get(t) == {"DOT"} for w in ws}
  other = {w for ws in terms.values() for w in ws} - decl - stmt - before_string - only_member
  return {"declaration": sorted(decl), "statement": sorted(stmt), "other": sorted(other), "before_string": sorted(before_string),
          "member": sorted(member)}

def _vim_rx(python_rx: str) -> str:
  """A lexical.py regex (groups `(?:`, classes, `?+*|`: nothing else) in Vim's very-magic syntax."""
  assert "(?<" not in python_rx and "(?=" not in python_rx and "(?!" not in python_rx, python_rx
  return python_rx.replace("(?:", "%(")

def _alt(words) -> str: return "|".join(sorted(words, key=lambda w: (-len(w), w)))
def _word_rx(words) -> str: return rf"(?<![A-Za-z0-9_.])(?:{_alt(words)}){_BOUNDARY}"

def textmate() -> str:
  """The TextMate grammar as JSON text (sorted keys, two-space indent, a final newline)."""
  kw = keywords()
  number = rf"(?<![A-Za-z0-9_.])(?:{FLOAT}|(?:{DIGITS})[KMG]?){_BOUNDARY}"
  patterns = [
    {"name": "comment.line.number-sign.hcq", "begin": "#", "end": "$",
     "patterns": [{"name": "keyword.other.directive.hcq", "match": r"\bhcq:.*$"}]},
    {"name": "string.quoted.triple.hcq", "begin": '"""', "end": '"""'},
    {"name": "string.quoted.double.hcq", "begin": '"', "end": '"|$',
     "patterns": [{"name": "constant.character.escape.hcq", "match": r"\\."}]},
    {"name": "storage.type.declaration.hcq", "match": _word_rx(kw["declaration"])},
    {"name": "keyword.control.statement.hcq", "match": _word_rx(kw["statement"])},
    {"name": "keyword.other.hcq", "match": _word_rx(kw["other"])},
    {"name": "keyword.other.hcq", "match": _word_rx(kw["before_string"]) + '(?=[ \t]*")'},
    {"name": "support.type.dtype.hcq", "match": _word_rx(DTYPES)},
    {"name": "constant.language.target.hcq", "match": _word_rx(list(VENDORS) + list(TARGETS))},
    {"name": "variable.language.implicit.hcq", "match": rf"(?<=\.)(?:{_alt(kw['member'])}){_BOUNDARY}"},
    {"name": "constant.numeric.hcq", "match": number},
    {"name": "keyword.operator.hcq", "match": r">=|==|~=|<-|[=&+\-@:]"},
  ]
  g = {"$schema": "https://raw.githubusercontent.com/martinring/tmlanguage/master/tmlanguage.json",
       "name": "hcq", "scopeName": SCOPE, "fileTypes": ["hcq"],
       "comment": "generated by tools/highlight.py from hcqdsl's grammar (hcqdsl/editor/highlight.py): do not edit",
       "patterns": patterns}
  return json.dumps(g, indent=2, sort_keys=True) + "\n"

def vim() -> str:
  """A Vim syntax file (`syntax/hcq.vim`)."""
  kw = keywords()
  def words(group: str, ws) -> str: return f"syntax keyword {group} {' '.join(sorted(ws))}"
  lines = [
    '" Vim syntax file for hcqdsl programs (.hcq)',
    '" generated by tools/highlight.py from hcqdsl\'s grammar (hcqdsl/editor/highlight.py): do not edit',
    'if exists("b:current_syntax") | finish | endif',
    "syntax iskeyword @,48-57,_",
    words("hcqDeclaration", kw["declaration"]),
    words("hcqStatement", kw["statement"]),
    words("hcqKeyword", kw["other"]),
    rf'syntax match hcqKeyword /\v<%({"|".join(kw["before_string"])})>\ze[ \t]*"/',
    words("hcqType", DTYPES),
    words("hcqTarget", list(VENDORS) + list(TARGETS)),
    rf"syntax match hcqImplicit /\v\.%({'|'.join(kw['member'])})>/",   # (starting at the dot: before the keyword `epoch`)
    rf"syntax match hcqNumber /\v<%({_vim_rx(FLOAT)}|%({_vim_rx(DIGITS)})[KMG]?)>/",
    r'syntax region hcqString start=/"""/ end=/"""/',
    r'syntax region hcqString start=/"/ skip=/\\./ end=/"\|$/ oneline',
    r"syntax match hcqDirective /hcq:.*$/ contained",
    r"syntax match hcqComment /#.*$/ contains=hcqDirective",
    r"syntax match hcqOperator />=\|==\|\~=\|<-\|[=&+\-@:]/",
    "highlight default link hcqDeclaration Structure",
    "highlight default link hcqStatement Statement",
    "highlight default link hcqKeyword Keyword",
    "highlight default link hcqType Type",
    "highlight default link hcqTarget Constant",
    "highlight default link hcqImplicit Identifier",
    "highlight default link hcqNumber Number",
    "highlight default link hcqString String",
    "highlight default link hcqComment Comment",
    "highlight default link hcqDirective PreProc",
    "highlight default link hcqOperator Operator",
    'let b:current_syntax = "hcq"',
  ]
  return "\n".join(lines) + "\n"
