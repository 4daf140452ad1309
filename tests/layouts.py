"""Hypothesis: the same program written in any layout — `;` between declarations and statements, several statements
or a whole block on a line, random spacing and tabs between tokens, blank lines, comments on their own lines and at
line ends — for holding the parser's fast path equal to the grammar."""
from __future__ import annotations
import re
from hypothesis import strategies as st
from hcqdsl.ir import Queue, Host
from hcqdsl.lang.format import format_stmt, format_decl

# tokens of formatted text: strings, signed numbers (`-2.5e-05`), names and numbers, two-character operators, the rest
_TOK = re.compile(r'"""[\s\S]*?"""|"(?:[^"\\\n]|\\.)*"|-?[0-9][0-9_.]*(?:[eE][+-]?[0-9]+)?[KMG]?|[A-Za-z0-9_.]+|<-|>=|==|~=|\S')
_WORD = re.compile(r"[A-Za-z0-9_\"]")

def respace(text: str, draw) -> str:
  """`text` with random spaces and tabs between its tokens (at least one between two words)."""
  toks = _TOK.findall(text)
  out = [toks[0]]
  for a, b in zip(toks, toks[1:]):
    need = _WORD.match(a[-1]) and _WORD.match(b[0])
    out.append(draw(st.sampled_from([" ", "\t", "  "] if need else ["", " ", "\t", "  "])) + b)
  return "".join(out)

@st.composite
def layouts(draw, prog) -> tuple[str, set]:
  """(text, the layout features it uses) for `prog`."""
  used: set = set()
  spaced = draw(st.booleans())
  def fmt(text):
    if spaced and draw(st.booleans()):
      used.add("spacing")
      return respace(text, draw)
    return text
  out: list = []
  def own_line(comments):
    if comments and draw(st.booleans()):
      used.add("comments")
      out.append("\n" + "\n".join(comments) + "\n")
  def trail(node_comment, sep_choices):
    """A separator after a node; a comment at the node's line end forces a new line after it."""
    if node_comment and draw(st.booleans()):
      used.add("comments")
      out.append(draw(st.sampled_from(["  ", " ", "", ";  ", "; "])) + node_comment + "\n")
    else:
      sep = draw(st.sampled_from(sep_choices))
      if ";" in sep: used.add(";")
      out.append(sep)
  for d in prog.decls:
    own_line(d.comments)
    if isinstance(d, (Queue, Host)):
      head = f"queue {d.name} {d.engine} on {d.device.name}" if isinstance(d, Queue) else "host"
      out.append(fmt(head) + draw(st.sampled_from([" {", "{", "\t{"])))
      one_line = draw(st.booleans())
      if one_line and d.body: used.add("block on a line")
      inner = ["; ", ";", " ; "] if one_line else ["\n  ", ";\n  ", "\n\n  ", "; ", "\n\t"]
      trail(d.comment if not one_line else None, inner)
      for i, s in enumerate(d.body):
        if not one_line: own_line(s.comments)
        out.append(fmt(format_stmt(s)))
        last = i == len(d.body) - 1
        trail(s.comment if not one_line else None, [" ", "\n", "; ", ";\n"] if last else inner)
        if not last and "\n" not in out[-1]: used.add("statements on a line")
      if not one_line: own_line(d.end_comments)
      out.append("}")
      trail(d.end_comment, ["\n", ";", "; ", "\n\n", ";\n"])
    else:
      text = format_decl(d)
      if '"' in text: used.add("strings")
      if text.startswith("buffer") and " = " in text: used.add("data lists")
      if text.startswith("expect"): used.add("expect")
      out.append(fmt(text))
      trail(d.comment, ["\n", ";", "; ", "\n\n", ";\n", " ;"])
  own_line(prog.end_comments)
  text = "".join(out)
  if draw(st.booleans()): text = "\n" + text
  return text, used
