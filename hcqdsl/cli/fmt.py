"""`hcqdsl fmt FILES`: rewrite programs in canonical form (like black)."""
from __future__ import annotations
import difflib, sys
from ..diagnostics import render_text
from ..files import write_atomic
from .util import read_bytes, UsageError


def add_args(p) -> None:
  p.add_argument("files", nargs="+", help=".hcq programs to rewrite in canonical form")
  p.add_argument("--check", action="store_true", help="exit 1 if a file would change; write nothing")
  p.add_argument("--diff", action="store_true", help="print a diff instead of writing")

def run(a) -> int:
  from ..check import parse_with_diagnostics
  from ..lang.format import format_program
  rc, changed, unwritten, unread = 0, 0, 0, 0
  for path in a.files:
    try: b = read_bytes(path)
    except UsageError as e:   # a missing file: said, and the others still formatted (exit 2 at the end)
      sys.stderr.write(f"hcqdsl: error: {e}\n")
      unread, rc = unread + 1, 2
      continue
    try: text = b.decode("utf-8")
    except UnicodeDecodeError as e:   # writing the file back would replace its bytes with U+FFFD: left as it is
      line = b.count(b"\n", 0, e.start) + 1
      col = len(b[b.rfind(b"\n", 0, e.start) + 1:e.start].decode("utf-8", errors="replace")) + 1
      sys.stderr.write(f"{path}:{line}:{col}: error: not UTF-8 (byte {b[e.start]:#04x}); a program is UTF-8 text\n")
      sys.stderr.write(f"error: cannot format {path}\n")
      rc = max(rc, 1)
      continue
    # errors of the syntax or the static checks (names, bounds, literals): the file is left as it is
    prog, diags = parse_with_diagnostics(text, path)
    if prog is None or any(d.severity == "error" for d in diags):
      sys.stderr.write(render_text([d for d in diags if d.severity == "error"], {path: text}))
      sys.stderr.write(f"error: cannot format {path}\n")
      rc = max(rc, 1)
      continue
    new = format_program(prog)
    if text.startswith("\ufeff"): new = "\ufeff" + new   # a UTF-8 BOM stays
    if new == text: continue
    changed += 1
    if a.diff:
      sys.stdout.writelines(unified_diff(text.splitlines(True), new.splitlines(True), path))
    if a.check or a.diff:
      if a.check: sys.stderr.write(f"would reformat {path}\n")
      continue
    try: write_atomic(path, new)   # (the old text stays whole when the write fails: a full disk, a size limit)
    except OSError as e:
      sys.stderr.write(f"hcqdsl: error: {path}: {e.strerror or e}; the file is left as it was\n")
      changed, unwritten, rc = changed - 1, unwritten + 1, 2
      continue
    sys.stderr.write(f"reformatted {path}\n")
  if a.check and changed: rc = max(rc, 1)
  n = len(a.files) - changed - unwritten - unread
  sys.stderr.write(f"{changed} file{'s' * (changed != 1)} {'would be ' if a.check or a.diff else ''}reformatted, {n} left unchanged"
                   f"{f', {unwritten} could not be written' if unwritten else ''}\n")
  return rc

DIFFLIB_LINES = 20_000   # difflib's matcher is quadratic here: 200,000 lines took 150 s

def unified_diff(a: list[str], b: list[str], path: str, context: int = 3):
  """A unified diff of `a` into `b`: difflib's for files of up to DIFFLIB_LINES lines together, else one found in linear
  time (equal runs, and each change resynchronised at the nearest equal pair within a window of lines: minimal where
  the changes are sparse, a correct patch everywhere)."""
  if len(a) + len(b) <= DIFFLIB_LINES:
    yield from difflib.unified_diff(a, b, path, path)
    return
  ops = list(_linear_opcodes(a, b))
  yield f"--- {path}\n"
  yield f"+++ {path}\n"
  k = 0
  while k < len(ops):
    if ops[k][0] == "equal":
      k += 1
      continue
    first = last = k   # a hunk: changes separated by at most 2 * context equal lines
    while last + 1 < len(ops):
      nxt = ops[last + 1]
      if nxt[0] != "equal": last += 1
      elif last + 2 < len(ops) and nxt[2] - nxt[1] <= 2 * context: last += 2
      else: break
    i0 = max(ops[first][1] - context, 0)
    j0 = max(ops[first][3] - context, 0)
    i1 = min(ops[last][2] + context, len(a))
    j1 = min(ops[last][4] + context, len(b))
    yield f"@@ -{_range(i0, i1)} +{_range(j0, j1)} @@\n"
    i = i0
    for tag, ai, aj, bi, bj in ops[first:last + 1]:
      if tag == "equal": continue
      for x in a[i:ai]: yield " " + _nl(x)
      for x in a[ai:aj]: yield "-" + _nl(x)
      for x in b[bi:bj]: yield "+" + _nl(x)
      i = aj
    for x in a[i:i1]: yield " " + _nl(x)
    k = last + 1

def _nl(line: str) -> str: return line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"

def _range(lo: int, hi: int) -> str:
  n = hi - lo
  return f"{lo + 1}" if n == 1 else f"{lo + 1 if n else lo},{n}"

def _linear_opcodes(a: list[str], b: list[str], window: int = 64):
  """(tag, a from, a to, b from, b to) covering both: runs of equal lines, and between them the smallest change after
  which the two agree again within `window` lines (else a window of each replaced)."""
  i = j = 0
  n, m = len(a), len(b)
  while i < n or j < m:
    i0, j0 = i, j
    while i < n and j < m and a[i] == b[j]:
      i += 1
      j += 1
    if i > i0: yield ("equal", i0, i, j0, j)
    if i >= n or j >= m:
      if i < n or j < m: yield ("replace", i, n, j, m)
      return
    at: dict = {}
    for dj in range(min(window, m - j)): at.setdefault(b[j + dj], dj)
    best = None
    for di in range(min(window, n - i)):
      if best is not None and di >= best[0] + best[1]: break
      hit = at.get(a[i + di])
      if hit is not None and (best is None or di + hit < best[0] + best[1]): best = (di, hit)
    di, dj = best if best is not None else (min(window, n - i), min(window, m - j))
    yield ("replace", i, i + di, j, j + dj)
    i, j = i + di, j + dj

