"""Text → IR, the one entry (`parse_syntax`): line ends and control characters made uniform, then the fast path
(scan.py), else the lark grammar (grammar.py, imported only then: a program the fast path reads never loads lark);
both give the same Program. `hcqdsl.parse` adds the static checks (hcqdsl/check)."""
from __future__ import annotations
from typing import Optional
import attrs
from ..ir import Span, Program
from ..diagnostics import Diagnostic
from .lexical import LINE_END, CONTROL, has_control, control_positions, is_binary

__all__ = ["parse_syntax", "lark_parser"]

def lark_parser():
  """The grammar's lark parser (grammar.lark_parser), built once."""
  from .grammar import lark_parser as parser
  return parser()

def _control_chars(text: str, file: str) -> list[Diagnostic]:
  return [Diagnostic("syntax", f"control character U+{ord(ch):04X} is not allowed in a program (only tab and line ends)",
                     Span(file, line, col, line, col + 1)) for line, col, ch in control_positions(text)]

def parse_syntax(text: str, file: str = "<input>") -> tuple[Optional[Program], list[Diagnostic]]:
  """Both parse paths (the scan.py fast path, the lark grammar) see `\n` line ends only: `\r\n` and a lone `\r` are
  turned into `\n` first (columns do not move), a leading byte order mark (U+FEFF) into a blank; any other control character is a
  `syntax` error at its position. A file that is not text at all (lexical.is_binary) is one `syntax` error at 1:1."""
  if is_binary(text):
    return None, [Diagnostic("syntax", "not a text file: a program is text, and this has NUL bytes or is mostly control "
                             "characters (a compiled image? `hcqdsl disasm` and `hcqdsl lift` read those)", Span(file, 1, 1, 1, 2))]
  norm = LINE_END.sub("\n", text) if "\r" in text else text
  if norm[:1] == "\ufeff": norm = " " + norm[1:]   # a UTF-8 byte order mark: a blank (columns do not move)
  prog, diags = _parse_normalized(norm, file)
  if prog is not None and norm is not text: prog = attrs.evolve(prog, source=text)   # the file as written
  return prog, diags

def _parse_normalized(text: str, file: str) -> tuple[Optional[Program], list[Diagnostic]]:
  if has_control(text):
    bad = _control_chars(text, file)
    _, more = _parse_normalized(CONTROL.sub(" ", text), file)   # the other syntax errors too, positions unchanged
    return None, sorted(bad + [d for d in more if d.code == "syntax"], key=lambda d: (d.span.line, d.span.column) if d.span else (0, 0))
  from .scan import scan
  prog = scan(text, file, clean=True)   # (_has_control said so)
  if prog is not None: return prog, []
  from .grammar import parse_grammar
  return parse_grammar(text, file)
