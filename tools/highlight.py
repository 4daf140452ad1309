"""Writes the highlighting generated from hcqdsl's grammar (hcqdsl/editor/highlight.py) into editors/: the TextMate
grammar of the VS Code extension and the Vim syntax file. Run it after changing grammar.lark, lexical.py or ir.py's
dtypes and archs; tests/test_editor_highlight.py fails until the committed files are what it writes.

    python tools/highlight.py          # rewrite them
    python tools/highlight.py --check  # exit 1 naming each file that differs
"""
from __future__ import annotations
import pathlib, sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hcqdsl.editor import highlight  # noqa: E402

def main(argv: list[str]) -> int:
  check, stale = "--check" in argv, []
  for rel, fn in highlight.FILES.items():
    path, text = ROOT / "editors" / rel, getattr(highlight, fn)()
    if path.exists() and path.read_text() == text: continue
    stale.append(str(path.relative_to(ROOT)))
    if not check:
      path.parent.mkdir(parents=True, exist_ok=True)
      path.write_text(text)
  for s in stale: print(f"{'differs' if check else 'wrote'}: {s}")
  return 1 if check and stale else 0

if __name__ == "__main__": sys.exit(main(sys.argv[1:]))
