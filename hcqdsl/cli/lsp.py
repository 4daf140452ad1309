"""`hcqdsl lsp`: the language server on stdin and stdout (docs/editor.md). Needs pygls: `pip install "hcqdsl[lsp]"`."""
from __future__ import annotations
from .util import UsageError

INSTALL = 'pip install "hcqdsl[lsp]"'

def add_args(p) -> None:
  from ..editor.analysis import DELAY
  p.add_argument("--stdio", action="store_true", help="talk LSP on stdin/stdout (the default and only transport; editors pass it)")
  p.add_argument("--delay", type=float, default=DELAY, metavar="S",
                 help=f"seconds from the last edit to the check (default {DELAY}; opening or saving a file checks at once)")

def run(a) -> int:
  if a.delay < 0: raise UsageError("--delay must be at least 0")
  try: import pygls, lsprotocol  # noqa: F401
  except ImportError: raise UsageError(f"the language server needs pygls, which is not installed: {INSTALL}") from None
  from ..editor.features import serve
  serve(a.delay).start_io()
  return 0
