"""A diagnostic's fixes as text edits, for an editor's quick fixes: the checker's own edit (`Diagnostic.fix`, an
`Edit` of IR statements: the same edit `hcqdsl check --fix` makes), a `# hcq: ignore[CODE]` comment at the end of
the statement or declaration the diagnostic is on (docs/check.md, suppressing a diagnostic), and for an
`unused-ignore` warning the stale code taken out of its comment. Statements are written as `hcqdsl fmt` writes them
(lang/format.py), at the indentation of the block's statements."""
from __future__ import annotations
import re
from typing import Optional
import attrs
from ..ir import Queue, Host
from ..diagnostics import Diagnostic, Edit
from ..lang.format import format_stmt
from .names import Names, Pos, Range

__all__ = ["TextChange", "Fix", "fixes", "edit_changes", "SUPPRESSIBLE"]

@attrs.frozen
class TextChange:
  range: Range
  new_text: str

@attrs.frozen
class Fix:
  """A quick fix: its title and the changes that make it; `preferred` for the checker's own edit."""
  title: str
  changes: tuple
  preferred: bool = False

# codes a `# hcq: ignore[...]` can silence (check.check drops them at its end; syntax and name errors stop the
# analyses before it, and unused-ignore is about the comments themselves)
SUPPRESSIBLE = frozenset({"deadlock", "race", "signal-race", "non-monotonic", "overflow", "bounds", "redundant-wait",
                          "unused-signal", "visibility", "stale-input"})
_INDENT = "  "
_IGNORE = re.compile(r"(\bhcq:[ \t]*ignore\[)([^\]]*)(\])")

def _line_indent(line: str) -> str: return line[:len(line) - len(line.lstrip(" \t"))]

def _block(names: Names, block: str):
  for d in names.program.decls:
    if (type(d) is Queue and d.name == block) or (type(d) is Host and block == "host"): return d
  return None

def edit_changes(names: Names, edit: Edit) -> Optional[list[TextChange]]:
  """`edit` as text changes of the text `names` was built from; None when the text has no such block or statement."""
  texts = [format_stmt(s) for s in edit.stmts]
  d = _block(names, edit.block)
  if d is None:
    if edit.block != "host": return None
    end = Pos(len(names.lines) - 1, len(names.lines[-1]))
    lead = "" if names.text.endswith("\n") or not names.text else "\n"
    body = "".join(f"{_INDENT}{t}\n" for t in texts)
    return [TextChange(Range(end, end), f"{lead}\nhost {{\n{body}}}\n")]
  if edit.index < len(d.body):
    s = d.body[edit.index].span
    start, end = Pos(s.line - 1, s.column - 1), Pos(s.end_line - 1, s.end_column - 1)
    line = names.lines[s.line - 1]
    indent = _line_indent(line)
    if edit.replace: return [TextChange(Range(start, end), f"\n{indent}".join(texts))]
    if line[:s.column - 1].strip() == "":   # the statement begins its line: whole lines before it
      at = Pos(s.line - 1, 0)
      return [TextChange(Range(at, at), "".join(f"{indent}{t}\n" for t in texts))]
    return [TextChange(Range(start, start), "".join(f"{t}; " for t in texts))]
  # at the block's end, before its `}`
  s = d.span
  close = Pos(s.end_line - 1, s.end_column - 2)
  line = names.lines[close.line]
  indent = _line_indent(names.lines[d.body[-1].span.line - 1]) if d.body else _line_indent(line) + _INDENT
  if line[:close.column].strip() == "":
    at = Pos(close.line, 0)
    return [TextChange(Range(at, at), "".join(f"{indent}{t}\n" for t in texts))]
  return [TextChange(Range(close, close), "".join(f"\n{indent}{t}" for t in texts) + "\n")]

def _owner(names: Names, span):
  """The statement (else declaration) a diagnostic's span begins in, the innermost."""
  node = names.node_at(Pos(span.line - 1, span.column - 1))
  return node if node is not None and node.span.line <= span.line <= node.span.end_line else None

def _ignore(names: Names, d: Diagnostic) -> Optional[Fix]:
  """`# hcq: ignore[CODE]` at the end of the statement the diagnostic is on (the code added to an ignore comment
  already there)."""
  if d.span is None or d.code not in SUPPRESSIBLE: return None
  node = _owner(names, d.span)
  if node is None or type(node) in (Queue, Host): return None
  line_no = node.span.end_line - 1
  line = names.lines[line_no]
  title = f"Ignore `{d.code}` on this line (# hcq: ignore[{d.code}])"
  if node.comment:
    at = line.find(node.comment, node.span.end_column - 1)
    if at >= 0 and (m := _IGNORE.search(node.comment)):
      codes = [c.strip() for c in m.group(2).split(",") if c.strip()]
      if d.code in codes: return None
      lo = at + m.start(2)
      return Fix(title, (TextChange(Range(Pos(line_no, lo), Pos(line_no, at + m.end(2))), ", ".join([*codes, d.code])),))
    if at >= 0:
      end = Pos(line_no, at + len(node.comment))
      return Fix(title, (TextChange(Range(end, end), f"  hcq: ignore[{d.code}]"),))
  end = Pos(line_no, len(line.rstrip(" \t")))
  return Fix(title, (TextChange(Range(end, end), f"  # hcq: ignore[{d.code}]"),))

def _unused(names: Names, d: Diagnostic) -> Optional[Fix]:
  """An unused `# hcq: ignore[CODE]`: the code taken out of the comment (the whole comment when it was the only one)."""
  if d.span is None: return None
  m = re.search(r"ignore\[(.*)\]", d.message.split("`")[1]) if d.message.count("`") >= 2 else None
  if m is None: return None
  code = m.group(1)
  ln, lo = d.span.line - 1, d.span.column - 1
  line = names.lines[ln]
  comment = line[lo:]
  cm = _IGNORE.search(comment)
  if cm is None: return None
  codes = [c.strip() for c in cm.group(2).split(",") if c.strip()]
  title = f"Remove the unused `ignore[{code}]`"
  if codes == [code]:
    rest = (comment[:cm.start(1)] + comment[cm.end(3):]).rstrip()
    if rest.strip() in ("#", ""):   # nothing else in the comment: the comment goes, with the spaces before it
      start = len(line[:lo].rstrip(" \t"))
      return Fix(title, (TextChange(Range(Pos(ln, start), Pos(ln, len(line))), ""),))
    return Fix(title, (TextChange(Range(Pos(ln, lo + cm.start(1)), Pos(ln, lo + cm.end(3))), ""),))
  kept = ", ".join(c for c in codes if c != code)
  return Fix(title, (TextChange(Range(Pos(ln, lo + cm.start(2)), Pos(ln, lo + cm.end(2))), kept),))

def fixes(names: Names, d: Diagnostic) -> list[Fix]:
  """The quick fixes of diagnostic `d` of the text `names` was built from: the checker's edit first (preferred),
  then the ignore comment (or, for `unused-ignore`, its removal)."""
  out = []
  if d.fix is not None and (changes := edit_changes(names, d.fix)) is not None:
    out.append(Fix(f"Fix: {d.fix.text}", tuple(changes), True))
  if d.code == "unused-ignore":
    if (u := _unused(names, d)) is not None: out.append(u)
  elif (i := _ignore(names, d)) is not None: out.append(i)
  return out
