"""Fixes users can apply: a diagnostic's `fix` (an `Edit` of the program: a wait added, a wait's value changed, the
host waiting for the previous launch) as edits of the file's text (`TextEdit`s: what `check --fix` writes, JSON's
`fixes` and SARIF's `fixes` carry, and an editor applies), and those edits applied.

    new_text = hcqdsl.apply_fixes(text, hcqdsl.check_text(text))   # every fix at once
    result = hcqdsl.fix_text(text, launches=2)                      # check, fix, check again until clean (`check --fix`)

Text outside the edits is kept byte for byte (comments, spacing, hex spellings): an inserted statement takes the
indentation of the line it goes before, a replaced statement keeps whatever follows it on its line."""
from __future__ import annotations
from typing import Optional, Sequence
import attrs
from ..ir import Program, split_lines
from ..diagnostics import Diagnostic, Edit, TextEdit, edit_block

__all__ = ["text_edits", "apply_text_edits", "apply_fixes", "fix_text", "FixResult", "MAX_ROUNDS"]

MAX_ROUNDS = 16   # check --fix: check, apply, check again at most this many times (each round's fixes remove an error)

def _stmt_text(stmts) -> list[str]:
  from ..lang.format import format_stmt
  return [format_stmt(s) for s in stmts]

def _block(program: Program, name: str): return edit_block(program, name)

def text_edits(program: Program, edit: Edit) -> list[TextEdit]:
  """`edit` as edits of the text `program` was parsed from (`program.source`); [] when it cannot be placed (a block
  or statement with no span)."""
  lines = split_lines(program.source or "")
  block = _block(program, edit.block)
  new = _stmt_text(edit.stmts)
  if block is None:   # a host block for a program that has none: at the end of the file
    if edit.block != "host": return []
    end = len(lines)
    lead = "" if lines[-1] == "" else "\n"
    body = "".join(f"  {s}\n" for s in new)
    return [TextEdit(end, len(lines[-1]) + 1, end, len(lines[-1]) + 1, f"{lead}\nhost {{\n{body}}}\n")]
  if edit.replace:
    sp = block.body[edit.index].span if edit.index < len(block.body) else None
    if sp is None or len(new) != 1: return []
    return [TextEdit(sp.line, sp.column, sp.end_line, sp.end_column, new[0])]
  if edit.index < len(block.body):   # before a statement
    sp = block.body[edit.index].span
    if sp is None: return []
    ln, col = sp.line, sp.column
  else:                              # at the end: before the block's `}`
    if block.span is None: return []
    ln, col = block.span.end_line, block.span.end_column - 1
  line = lines[ln - 1] if 0 < ln <= len(lines) else ""
  before = line[:col - 1]
  if before.strip() == "":           # the statement (or `}`) starts its line: whole lines, with its indentation
    indent = before if edit.index < len(block.body) else _indent(block, lines)
    return [TextEdit(ln, 1, ln, 1, "".join(f"{indent}{s}\n" for s in new))]
  if edit.index < len(block.body): return [TextEdit(ln, col, ln, col, "".join(f"{s}; " for s in new))]
  return [TextEdit(ln, col, ln, col, "".join(f"; {s}" for s in new) + " ")]   # `{ wait s >= 1 }` on one line

def _indent(block, lines: list[str]) -> str:
  """The indentation of the block's statements (its last one's line), else two spaces more than its header's."""
  for st in reversed(block.body):
    if st.span is not None and 0 < st.span.line <= len(lines):
      line = lines[st.span.line - 1]
      if line[:st.span.column - 1].strip() == "": return line[:st.span.column - 1]
  head = lines[block.span.line - 1] if block.span is not None and 0 < block.span.line <= len(lines) else ""
  return head[:len(head) - len(head.lstrip())] + "  "

def apply_text_edits(text: str, edits: Sequence[TextEdit]) -> str:
  """`text` with `edits` made (positions are the original text's; an edit overlapping an earlier one is left out;
  insertions at one place go in the order given). Line ends: `\\n`, `\\r\\n` and a lone `\\r` count as the
  language counts them."""
  starts, pos = [0], 0
  for piece in _line_pieces(text):   # the offset where each line starts
    pos += len(piece)
    starts.append(pos)
  def offset(line: int, col: int) -> int:
    if line > len(starts) - 1: return len(text)
    return min(starts[line - 1] + col - 1, starts[line] if line < len(starts) else len(text))
  spans = sorted(((offset(e.line, e.column), offset(e.end_line, e.end_column), n, e.text) for n, e in enumerate(edits)),
                 key=lambda x: (x[0], x[2]))
  out, at = [], 0
  for lo, hi, _, new in spans:
    if lo < at: continue   # overlaps an edit already made
    out += [text[at:lo], new]
    at = hi
  return "".join(out) + text[at:]

def _line_pieces(text: str) -> list[str]:
  """The text cut after each line end (`\\n`, `\\r\\n`, a lone `\\r`)."""
  out, i = [], 0
  while i < len(text):
    j = min((k for k in (text.find("\n", i), text.find("\r", i)) if k >= 0), default=-1)
    if j < 0: break
    j += 2 if text.startswith("\r\n", j) else 1
    out.append(text[i:j])
    i = j
  out.append(text[i:])
  return out

def _program(text: str, filename: str) -> Optional[Program]:
  from ..lang.parse import parse_syntax
  return parse_syntax(text, filename)[0]

def fixable(diagnostics: Sequence[Diagnostic]) -> list[Diagnostic]:
  """The diagnostics whose fix to apply: those with one that follow from no other's (a consequence goes with its
  root's fix), each distinct edit once."""
  seen, out = set(), []
  for d in diagnostics:
    if d.fix is None or d.cause is not None: continue
    key = (d.fix.block, d.fix.index, d.fix.replace, tuple(_stmt_text(d.fix.stmts)))
    if key not in seen:
      seen.add(key)
      out.append(d)
  return out

def apply_fixes(text: str, diagnostics: Sequence[Diagnostic], filename: str = "<input>") -> str:
  """`text` with the fixes of `diagnostics` (what `check` reported for it) applied at once: each distinct edit once, a
  consequence's left to its root cause's. The text is unchanged when none has a fix."""
  ds = fixable(diagnostics)
  if not ds: return text
  prog = _program(text, filename)
  if prog is None: return text
  return apply_text_edits(text, [e for d in ds if d.fix is not None for e in text_edits(prog, d.fix)])

@attrs.frozen
class FixResult:
  """What `fix_text` did: the text after the fixes, the fixes applied (their words, in order), and what `check`
  reports for the new text."""
  text: str
  applied: tuple
  diagnostics: tuple

def fix_text(text: str, filename: str = "<input>", launches: int = 2, var_values: Optional[dict] = None,
             max_states: Optional[int] = None, check=None, diagnostics: Optional[Sequence[Diagnostic]] = None) -> FixResult:
  """`check --fix`: check `text`, apply one fix per block (the first reported there: fixes of one block may make each
  other redundant), check again, and so on while fixes remove errors (at most MAX_ROUNDS rounds). A round after which
  the program has no fewer errors is undone, and fixing stops there: a fix never leaves more errors than it found.
  `check(text) -> diagnostics` replaces `check_text` (the CLI's, with its `--var` checks); `diagnostics`: what it
  reports for `text`, when already known."""
  from . import check_text
  run = check if check is not None else lambda t: check_text(t, filename, launches, var_values, max_states=max_states)
  diags, applied = list(run(text) if diagnostics is None else diagnostics), []
  for _ in range(MAX_ROUNDS):
    per_block: dict = {}
    for d in fixable(diags):
      if d.fix is not None: per_block.setdefault(d.fix.block, d)
    if not per_block: break
    new = apply_fixes(text, list(per_block.values()), filename)
    if new == text: break
    after = list(run(new))
    if _errors(after) >= _errors(diags): break
    text, diags = new, after
    applied += [d.fix.text for d in per_block.values()]
  return FixResult(text, tuple(applied), tuple(diags))

def _errors(diags) -> int: return sum(d.severity == "error" for d in diags)
