"""One statement per line (ruff E702, as tinygrad lints): `a; b` becomes two lines, `if c: a; b` a block.
Used once to bring the tree to the lint; kept so a branch merged after it can be brought the same way:
`python .ci/split_semicolons.py FILE...` rewrites the files in place."""
import io, sys, tokenize

COMPOUND = {"if", "elif", "else", "for", "while", "with", "def", "try", "except", "finally", "class", "async"}

def split(src: str) -> str:
  lines = src.splitlines(keepends=True)
  offs = [0]
  for ln in lines: offs.append(offs[-1] + len(ln))
  def pos(rc): return offs[rc[0] - 1] + rc[1]
  edits, cur = [], []
  for tok in tokenize.generate_tokens(io.StringIO(src).readline):
    if tok.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.NL) or (not cur and tok.type == tokenize.COMMENT): continue
    if tok.type != tokenize.NEWLINE:
      cur.append(tok)
      continue
    toks, cur = cur, []
    depth, semis, colon = 0, [], None
    for i, t in enumerate(toks):
      if t.type == tokenize.OP and t.string in "([{": depth += 1
      elif t.type == tokenize.OP and t.string in ")]}": depth -= 1
      elif depth == 0 and t.type == tokenize.OP and t.string == ";": semis.append(i)
      elif depth == 0 and t.type == tokenize.OP and t.string == ":" and colon is None and toks[0].string in COMPOUND: colon = i
    if not semis: continue
    comment = toks[-1].string if toks[-1].type == tokenize.COMMENT else None
    body = toks[:-1] if comment else toks
    indent = " " * toks[0].start[1]
    def text(a, b, body=body): return src[pos(body[a].start):pos(body[b].end)]
    out, start = [], 0
    if colon is not None:
      out.append(indent + text(0, colon))
      start, indent = colon + 1, indent + "  "
    for s in semis + [len(body)]:
      if s > start: out.append(indent + text(start, s - 1))
      start = s + 1
    if comment: out[0 if colon is not None else -1] += "  " + comment
    edits.append((toks[0].start[0], toks[-1].end[0], "".join(o + "\n" for o in out)))
  for a, b, new in reversed(edits): lines[a - 1:b] = [new]
  return "".join(lines)

if __name__ == "__main__":
  for f in sys.argv[1:]:
    src = open(f).read()
    new = split(src)
    if new != src: open(f, "w").write(new)
