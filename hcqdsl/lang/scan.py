"""The parser's fast path for the whole language: every layout (one statement a line, `;`, whole blocks on a line),
data lists, strings, `expect` and comments anywhere. It builds exactly the IR — spans and comments included — that
the lark grammar builds, and gives up (returns None) on anything it does not recognise, which the grammar then
parses and diagnoses: the grammar stays the language's definition and the only source of syntax errors.

Lines are split at `\\n` and `\\r\\n` only. A queue or host block whose header starts a line is read by the block
path (`Scanner.read_block`): one `findall` of `_ROW` over its body cuts it into rows — a statement's words loosely, its
comment, the `;` or newline ending it — and each row's fields are looked up in caches of checked texts (signals,
values, slices, argument lists, launch dimensions); a text not seen yet goes through the statement regexes once. The
slices new to a chunk of rows are cut by one regex over them all and built by C-level maps. A chunk of whole lines with
no `#` or `;` (at most one statement a line) is read a column at a time instead (`Scanner.read_columns`): its lines grouped
by kind, each group's fields cut by `str.partition` and looked up in the caches and its nodes built by one `map`; a
text not cached is read by the statement regexes once, and anything they reject sends the chunk to the rows.
Anything else in a body, or a block the block path does not take (a header after a `;`, more after its `}`), is read
line by line: a line without `;`, braces or strings is matched whole by one regex (the layout `fmt` prints); any other
line is cut into pieces at top-level `;`, `{` and `}` (strings and the comment kept whole) and each piece is matched by
the same regexes. Data lists are validated by one regex over the whole list and converted by C-level `map(int|float)`.
`tests/test_scan.py` holds the fast path equal to the grammar on programs of every layout.
"""
from __future__ import annotations
import collections, gc, itertools, math, operator, re
from itertools import repeat
import attrs
from typing import Optional
from ..ir import (HostWrite, Span, Ref, Expr, Slice, Data, Param, Impl, Device, Buffer, Signal, Var, Kernel, Wait, SignalWrite,
                 Exec, Copy, Write, Poll, Barrier, Timestamp, Epoch, Submit, Queue, Host, Expect, Program, DTYPES, KEYWORDS, U32_MAX,
                 resolve_var_args)
from .lexical import NAME, DIGITS, SIZED, STRING, int_value as _int, unquote as _unquote, has_control
from . import rows
from .rows import RowsBuilder, Pool, fast_constructor

__all__ = ["scan", "fast_constructor", "Scanner", "CHUNK"]

_W = r"[ \t]*"
_NAME = NAME
_NUM = rf"(?:{DIGITS})(?![A-Za-z0-9_.])"      # no size suffix: those lines take the grammar
_SNUM = rf"{SIZED}(?![A-Za-z0-9_.])"
_EXPR = rf"(?P<e>(?P<n>{_NUM})|(?P<v>{_NAME}(?:\.epoch)?)(?:{_W}(?P<op>[+-]){_W}(?P<k>{_NUM}))?)"
_SIG = rf"(?P<s>{_NAME}(?:\.timeline)?)(?![A-Za-z0-9_.])"
_P = rf"(?:inout|in|out|i32|u32)[ \t]+{_NAME}"
_STRING = STRING
_SLICE_RX = rf"{_NAME}(?:{_W}\[{_W}(?:{_SNUM})?{_W}:{_W}(?:{_SNUM})?{_W}\])?"
_SLICE = re.compile(rf"({_NAME})(?:{_W}\[{_W}({_SNUM})?{_W}:{_W}({_SNUM})?{_W}\])?")
_DATA = rf"(?P<dt>{_NAME}){_W}\[(?P<vals>[^\]]*)\]"           # a data list; its values are checked by _VALUES
_STMT = {
  "wait": re.compile(rf"wait[ \t]+{_SIG}{_W}>={_W}{_EXPR}{_W}$"),
  "signal": re.compile(rf"signal[ \t]+{_SIG}{_W}={_W}{_EXPR}{_W}$"),
  "timestamp": re.compile(rf"timestamp[ \t]+{_SIG}{_W}$"),
  "barrier": re.compile(rf"barrier{_W}$"),
  "epoch": re.compile(rf"epoch{_W}$"),
}
_EXEC = re.compile(rf"exec[ \t]+({_NAME}){_W}\(([^()]*)\)")
_DX = rf"(?:{_NUM}|{_NAME}(?:\.epoch)?(?:{_W}[+-]{_W}{_NUM})?)"   # a launch dimension: a number or an expression
_DIM = re.compile(rf"{_W}(grid|block){_W}\({_W}({_DX}){_W},{_W}({_DX}){_W},{_W}({_DX}){_W}\)")
_DIMX = re.compile(rf"(?:(?P<n>{_NUM})|(?P<v>{_NAME}(?:\.epoch)?)(?:{_W}(?P<op>[+-]){_W}(?P<k>{_NUM}))?)$")
# an exec argument that is a value: a number, `name + n`, `name - n`, `D.epoch [+- n]` (a bare name is a slice)
_ARGX = re.compile(rf"{_W}(?:(?P<n>{_NUM})|(?P<v>{_NAME})(?P<ep>\.epoch)?(?:{_W}(?P<op>[+-]){_W}(?P<k>{_NUM}))?){_W}$")
_PER_LAUNCH = re.compile(rf"buffer[ \t]+({_NAME})[ \t]+on[ \t]+({_NAME})[ \t]+size[ \t]+({_SNUM})[ \t]+(rebound|rewritten)"
                         rf"(?:{_W}=(?P<rest>.*))?$")
_TOL = re.compile(r"(rtol|atol)[ \t]+([0-9][0-9.eE+-]*)")
_FLOAT_TOL = re.compile(r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?")
_DATA_ONE = re.compile(rf"{_W}(?P<dt>{_NAME}){_W}\[(?P<vals>[^\]]*)\]")
_DATA_SEP = re.compile(rf"{_W}(?:,|$)")
_MINUS_WS = re.compile(r"-[ \t]+")
_UVALS = re.compile(r"[ \t]*(?:(?:0|[1-9][0-9]*)[ \t]*(?:,[ \t]*(?:0|[1-9][0-9]*)[ \t]*)*(?:,[ \t]*)?)?")
_COPY = re.compile(r"copy[ \t]+")
_WRITE = re.compile(r"write[ \t]+")
_WRITE_EQ = re.compile(rf"{_W}={_W}{_EXPR}{_W}$")
_HOST_WRITE_EQ = re.compile(rf"{_W}=(?={_W}{_NAME}{_W}\[)")   # `= T [..], ...`: the host's write
_POLL = re.compile(r"poll[ \t]+")
_POLL_TAIL = re.compile(rf"{_W}(?:&{_W}(?P<mask>{_NUM}){_W})?=={_W}{_EXPR}{_W}$")
_ARROW = re.compile(rf"{_W}<-{_W}")
_SUBMIT = re.compile(rf"submit(?:[ \t]+({_NAME}(?:{_W},{_W}{_NAME})*))?{_W}$")
_QUEUE = re.compile(rf"queue[ \t]+({_NAME})[ \t]+(compute|copy)[ \t]+on[ \t]+({_NAME}){_W}(\{{{_W})?$")
_HOST = re.compile(rf"host{_W}(\{{{_W})?$")
_DECL = {
  "device": re.compile(rf"device[ \t]+({_NAME}){_W}={_W}({_NAME}){_W}:{_W}({_NUM})(?:[ \t]+({_NAME}))?{_W}$"),
  "buffer": re.compile(rf"buffer[ \t]+({_NAME})[ \t]+on[ \t]+({_NAME})[ \t]+size[ \t]+({_SNUM})(?:{_W}={_W}{_DATA})?{_W}$"),
  "signal": re.compile(rf"signal[ \t]+({_NAME})[ \t]+on[ \t]+({_NAME})(?:{_W}={_W}({_NUM}))?{_W}$"),
  "var": re.compile(rf"var[ \t]+({_NAME})(?:{_W}={_W}\[(?P<vals>[^\]]*)\])?{_W}$"),
  "kernel": re.compile(rf"kernel[ \t]+({_NAME}){_W}\(((?:{_W}{_P}(?:{_W},{_W}{_P})*(?:{_W},)?)?){_W}\)(?:{_W}=(?P<impl>.+))?$", re.S),
  "expect": re.compile(rf"expect[ \t]+(?P<t>{_SLICE_RX}){_W}(?P<op>==|~=){_W}{_DATA}(?P<tol>(?:[ \t]+(?:rtol|atol)[ \t]+[0-9][0-9.eE+-]*)*){_W}$"),
}
_PARAM = re.compile(rf"(inout|in|out|i32|u32)[ \t]+({_NAME})")
_IMPL = re.compile(rf"""{_W}(?:(?P<b>builtin)[ \t]+(?P<bn>{_NAME})(?:{_W}<{_W}(?P<dt>{_NAME}){_W}>)?(?:{_W}\((?P<args>[^()]*)\))?"""
                   rf"""|(?P<k>c|amd){_W}(?P<s>{_STRING})(?:{_W}code[ \t]+(?P<cb>{_NAME}))?)""")
_ARG = re.compile(rf"{_W}(-?){_W}(?:(?P<f>[0-9]+(?:\.[0-9]*(?:[eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+))|(?P<i>0|[1-9][0-9]{{0,19}})|(?P<n>inf|nan)){_W}$")
# data values without the grammar's rarer spellings (underscores, hex, leading zeros, `-0` in a float list, which the
# grammar reads as the int 0): those take the grammar. Possessive quantifiers: no backtracking state over 1M values.
_IV = r"-?+(?:0|[1-9][0-9]{0,19}+)"
_E = r"(?:[eE][+-]?+[0-9]++)"
_FV = rf"(?:0(?:\.[0-9]*+)?+{_E}?+|-0(?:\.[0-9]*+{_E}?+|{_E})|-?+(?:[1-9][0-9]*+(?:\.[0-9]*+)?+{_E}?+|inf|nan))"
_VALUES = {k: re.compile(rf"[ \t]*+(?:{v}[ \t]*+(?:,[ \t]*+{v}[ \t]*+)*+(?:,[ \t]*+)?)?")
           for k, v in (("i", _IV), ("f", _FV), ("i18", r"-?+(?:0|[1-9][0-9]{0,17}+)"))}
# one piece of a line that is not matched whole: code and strings up to a top-level `;` `{` `}`, the comment, the newline
_LEX = re.compile(rf'((?:[^;{{}}"#\n]+|{_STRING})+)|([;{{}}])|(#[^\n]*)|(\n)|(")')
_SEPS = re.compile(r"([;{}])")

# ---- the block path: a queue or host block whose header starts a line, its body read row by row by one regex
_HEADER = re.compile(rf"[ \t]*((?:queue[ \t]+({_NAME})[ \t]+(compute|copy)[ \t]+on[ \t]+({_NAME})|host){_W})\{{")
# a block body ends at the first `{`, `}` or `"` outside comments (only a `}` ends it well)
_REGION = re.compile(r'(?:[^{}"#]++|#[^\n]*+)*+')
_AFTER = re.compile(r"[ \t]*+(#[^\n]*)?(?:\n|\Z)")           # what may follow a block's `}` on its line
_E = r"[^;#\n]*[^;#\n \t]"   # text up to the next `;`, `#` or line end, without its trailing blanks
# one row of a body: `keyword a sep b` (a statement's words, cut loosely: the fields are checked through the caches
# below, each distinct text once), any other text (`read_statement` reads it), the comment, and the `;` or newline ending the
# row. Every position of a body starts a row, so `findall` tiles it; the row ending at the body's end has terminator ''.
_ROW = re.compile(rf"([ \t]*+)(?:(([a-z]++)(?:[ \t]++([^ \t<>=(;#\n]++)(?:[ \t]*+(>=|=|<-|\()[ \t]*+|[ \t]++(?=[^;#\n \t])|)"
                  rf"({_E}|)|))|({_E}|))([ \t]*+)(#[^\n]*+|)([;\n]|\Z)")
_SNUM1 = r"(?:0[xX][0-9A-Fa-f_]++|[0-9][0-9_]*+)[KMG]?+(?![A-Za-z0-9_.])"   # _SNUM, possessive for sre's speed
_SLICE_ONE = re.compile(rf"([A-Za-z_][A-Za-z0-9_]*+)(?:{_W}\[{_W}({_SNUM1}|){_W}:{_W}({_SNUM1}|){_W}\]|)")   # _SLICE, ditto
# the slices of a chunk's new copies and execs, one a line: a slice, else (name '') anything
_SLICE_LINES = re.compile(rf"^(?:([A-Za-z_][A-Za-z0-9_]*+)(?:{_W}\[{_W}({_SNUM1}|){_W}:{_W}({_SNUM1}|){_W}\]|)$|.*+$)", re.M)
# the usual slice, `name[lo:hi]` cut into its three texts (checked by the caches, `_SNUM_TEXT`, `_NAME_TEXT`), else a row of ''
_SLICE_PARTS = re.compile(r"^(?:([^\[\n.]++)\[([^:\n]*+):([^\]\n]*+)\]|.*+)$", re.M)
_SNUM_TEXT = re.compile(_SNUM1)
_NAME_TEXT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*+")
_NO_DIMS = (None, None)
CHUNK = 1 << 18   # characters of body per findall: the rows of a 1M-statement block never all exist at once
_CACHE = 1 << 16   # entries kept per cache of texts: past that a program's texts seldom repeat, and big dicts are slow

_span = fast_constructor(Span, "file line column end_line end_column")
_wait = fast_constructor(Wait, "signal value span comments comment", at=True)
_signal = fast_constructor(SignalWrite, "signal value span comments comment", at=True)
_exec_node = fast_constructor(Exec, "kernel args grid block span comments comment")
_copy = fast_constructor(Copy, "dst src span comments comment")
_slice_node = fast_constructor(Slice, "buffer start end ranged launch")
_barrier = fast_constructor(Barrier, "span comments comment", at=True)
_epoch = fast_constructor(Epoch, "span comments comment", at=True)
_exec_at = fast_constructor(Exec, "kernel args grid block span comments comment", at=True)
_copy_at = fast_constructor(Copy, "dst src span comments comment", at=True)
# the column path's kinds of rows, told apart by a statement's third character (its keyword's, when it is one)
_KIND = {"i": "wait", "g": "signal", "e": "exec", "p": "copy", "r": "barrier", "o": "epoch"}
_BIG = 1 << 62   # a slice bound an int column holds
_VALUE = re.compile(rf"(0|[1-9][0-9]*)|({_NAME}(?:\.epoch)?)(?: ([+-]) (0|[1-9][0-9]*))?")   # (fmt's spacing)
_BOUNDS = re.compile(rf"({_SNUM1}|):({_SNUM1}|)\]")   # a slice's text after its `[`, no blanks
_KIND_CODE = {"wait": rows.WAIT, "signal": rows.SIGNAL, "exec": rows.EXEC, "copy": rows.COPY, "barrier": rows.BARRIER, "epoch": rows.EPOCH}
_BUT_LAST = slice(None, -1)

class _GiveUp(Exception): pass

@attrs.define
class _RowState:
  """Where `read_block`'s row loop is, between chunks of rows."""
  ln: int                   # the line being read
  col: int                  # the column the next row starts at
  seen: bool = False        # a statement ended on this line (a comment after it is its)
  first: bool = True        # still on the header's line (a comment there is the header's)
  pending: tuple = ()       # own-line comments before the next statement
  header_comment: Optional[str] = None
  later: list = attrs.field(factory=list)   # the copies and execs waiting for `_later`

@attrs.define
class _OpenBlock:
  """A queue or host block read line by line, from its header to its `}`."""
  kind: str                 # queue | host
  name: Optional[str]       # a queue's name, engine and device (None for the host)
  engine: Optional[str]
  device: Optional[Ref]
  span: Span                # the header's
  comment: Optional[str]    # the header line's comment
  comments: tuple           # the own-line comments before the header
  body: list = attrs.field(factory=list)   # the statements read so far

def _split(vals: str) -> list:
  parts = vals.split(",")
  if not parts[-1].strip(" \t"): parts.pop()   # a trailing comma, or no values
  return parts

def scan(text: str, file: str, clean: bool = False) -> Optional[Program]:
  """`clean`: the caller has made sure `text` has no control characters (parse.parse_syntax has, before it calls);
  otherwise a text with one is left to the grammar, which reports it."""
  src = text
  if not clean and has_control(text): return None
  if "\r" in text:
    # a lone `\r` (whitespace to the grammar today; a line end once both paths agree on it), or a `\r\n` that a
    # multi-line string would keep: the grammar reads the file
    if '"""' in text or "\r" in text.replace("\r\n", ""): return None
    src = text.replace("\r\n", "\n")
  enabled = gc.isenabled()
  gc.disable()  # millions of small immutable objects and no cycles: the collector would only re-scan them
  try: return Scanner(file).run(src, text)
  except (_GiveUp, ValueError): return None
  finally:
    if enabled: gc.enable()

def _layout(seg: str, n: int) -> tuple:
  """(lead, at, w, rows, cols, stops) of read_columns' `n` lines: with each line the same `w` blanks then a statement
  (`fmt`'s layout; a blank line only when w is 0) the rows are the lines without those blanks (lead "", at 0, no cols or stops: a
  span is found from its row's text); else as `_columns` finds them."""
  first = seg[:seg.find("\n")]
  w = len(first) - len(first.lstrip(" \t"))
  rows = seg[w:-1].split("\n" + seg[:w]) if first[w:] else []
  if len(rows) == n and " \n" not in seg and "\t\n" not in seg: return "", 0, w, rows, None, None
  lines = seg.split("\n")
  lines.pop()
  lead, at, rows, cols, stops = _columns(seg, lines)
  return lead, at, w, rows, cols, stops

def _columns(seg: str, lines: list) -> tuple:
  """(lead, w, rows, cols, stops) of read_columns' lines: with every line the same blanks then a statement (`fmt`'s
  layout) the rows are the lines, their statements at column w + 1 after `lead`; else each row is its line stripped
  (lead "", w 0), with its first and past-the-end columns."""
  n, blanks, add = len(lines), repeat(" \t"), operator.add
  w = len(lines[0]) - len(lines[0].lstrip(" \t"))
  lead = lines[0][:w]
  if (not seg.startswith((lead + " ", lead + "\t", lead + "\n")) and seg.count("\n" + lead) >= n - 1 and " \n" not in seg
      and "\t\n" not in seg and "\n" + lead + " " not in seg and "\n" + lead + "\t" not in seg and "\n" + lead + "\n" not in seg):
    return lead, w, lines, [w + 1] * n, list(map(add, map(len, lines), repeat(1)))
  rows = list(map(str.lstrip, lines, blanks))
  if " \n" in seg or "\t\n" in seg:                # blanks end some line: not in its statement's span
    cols = list(map(add, map(operator.sub, map(len, lines), map(len, rows)), repeat(1)))
    rows = list(map(str.rstrip, rows, blanks))
    return "", 0, rows, cols, list(map(add, cols, map(len, rows)))
  stops = list(map(add, map(len, lines), repeat(1)))
  return "", 0, rows, list(map(operator.sub, stops, map(len, rows))), stops

def _without(rows: list, fields: dict, bad: list, runs: bool) -> tuple:
  """`rows` and their `fields` without the rows at the positions `bad`; with `runs`, the slices are runs of `y` (an
  exec's argument count) per row, else two per row (a copy's)."""
  keep = [True] * len(rows)
  for i in bad: keep[i] = False
  out = {k: list(itertools.compress(v, keep)) for k, v in fields.items() if k in ("x", "y", "z")}
  if "buf" in fields:
    per = [v for n, k in zip(fields["y"] if runs else repeat(2, len(rows)), keep) for v in repeat(k, n)]
    out.update({k: list(itertools.compress(fields[k], per)) for k in ("buf", "lo", "hi", "ranged")})
  return list(itertools.compress(rows, keep)), out

def _firsts(texts, found):
  """The first row of each distinct text in `texts` not `found` (found[i] None)."""
  miss = list(itertools.compress(range(len(found)), map(operator.is_, found, repeat(None))))
  return dict(zip(map(texts.__getitem__, reversed(miss)), reversed(miss))).values()

def _tokens(raw: str, src: str, lpos: int) -> tuple:
  """([(kind, text, offset)], the text the offsets are into, where the line starts in it): kind 1 code, 2 `;` `{` `}`,
  3 the comment."""
  toks = []
  if '"' not in raw:
    hp = raw.find("#")
    pos = 0
    for i, t in enumerate(_SEPS.split(raw if hp < 0 else raw[:hp])):
      toks.append(((i & 1) + 1, t, pos))
      pos += len(t)
    if hp >= 0: toks.append((3, raw[hp:], hp))
    return toks, raw, 0
  if '"""' in raw:    # a string may run on: read from the whole text
    text, pos = src, lpos
  else: text, pos = raw, 0
  line_start = pos
  while True:
    m = _LEX.match(text, pos)
    if m is None: break
    g = m.lastindex
    assert g is not None   # (every alternative of _LEX is a group)
    if g == 5: raise _GiveUp
    if g == 4: break
    toks.append((g, m.group(), pos))
    pos = m.end()
  return toks, text, line_start

class Scanner:
  """One file's fast parse: `read_block` (a block's rows by one regex), `read_columns` (a clean chunk a column at a
  time), `read_statement` (one statement's text); each returns None to hand its text to the next slower path."""
  def __init__(self, file: str):
    self.file = file
    self.refs: dict = {}     # sub-nodes are values: one object per distinct text, shared by every statement
    self.exprs: dict = {}
    self.slices: dict = {}
    self.args: dict = {}
    self.decls: list = []
    self.pending: list = []  # own-line comments waiting for the node they precede
    self.block: Optional[_OpenBlock] = None   # the block being read line by line
    self.dims: dict = {}
    self.ints: dict = {}
    self.bare: set = set()   # names written as a whole buffer (a var's name among them: `resolve_var_args` has work)
    self.sigs: dict = {}     # checked fields of statements by their text: a wait's or signal's signal,
    self.names: dict = {}    # an exec's kernel
    self.heads: dict = {}    # the column path's: a statement's text up to its `>=`, `=` or `(` -> its signal or kernel (pool ids)
    self.pool = Pool()       # the column path's names and launch dimensions, by number
    self.vals: dict = {}     # a wait's or signal's value text -> (var: pool id or -1, offset)
    self.snames: dict = {}   # a slice's buffer name text -> pool id
    self.bounds: dict = {}   # a slice's text after its `[` -> (start, end), -1 when missing
    self.dim_ids: dict = {}  # launch dimensions' text -> their pool number

  def _ref(self, s: str) -> Ref:
    r = self.refs.get(s)
    if r is None:
      if s.partition(".")[0] in KEYWORDS: raise _GiveUp
      r = self.refs[s] = Ref(s)
    return r

  def _name(self, s: str) -> str:
    if s in KEYWORDS: raise _GiveUp
    return s

  def run(self, src: str, text: str) -> Program:
    n = len(src)
    pos, ln = 0, 1              # the line being read and where it starts
    while pos <= n:
      if self.block is None and (m := _HEADER.match(src, pos)) is not None:
        r = self.read_block(src, pos, ln, m)
        if r is not None:
          pos, ln = r
          continue
      nl = src.find("\n", pos)
      if nl < 0: nl = n
      last = self._line(src[pos:nl], ln, src, pos)
      while ln < last:          # a string ran on over more lines
        nl = src.find("\n", nl + 1)
        if nl < 0: nl = n
        ln += 1
      pos, ln = nl + 1, ln + 1
    if self.block is not None: raise _GiveUp
    prog = Program(tuple(self.decls), file=self.file, end_comments=tuple(self.pending), source=text)
    return resolve_var_args(prog) if any(type(d) is Var and d.name in self.bare for d in self.decls) else prog

  def _line(self, raw, ln, src, lpos) -> int:
    """One line (starting at src[lpos]) read on its own; returns the last line read."""
    if ";" in raw and '"' not in raw and "{" not in raw and "}" not in raw: return self._semicolons(raw, ln)
    f, block = self.file, self.block
    hp = raw.find("#")
    if hp < 0: code, comment = raw, None
    else: code, comment = raw[:hp], raw[hp:].rstrip()
    body = code.strip(" \t")
    if not body:
      if comment is not None: self.pending.append(comment)
      return ln
    col = code.find(body[0]) + 1
    end = col + len(body)
    kw = body.partition(" ")[0]
    if "\t" in kw: kw = kw.partition("\t")[0]
    pending = self.pending
    if ";" in body: return self._pieces(raw, ln, src, lpos)
    try:
      if block is not None:
        if body == "}":
          self._close(ln, end, comment)
          return ln
        if pending:
          block.body.append(self.read_statement(kw, body, Span(f, ln, col, ln, end), tuple(pending), comment))
          self.pending = []
        else: block.body.append(self.read_statement(kw, body, Span(f, ln, col, ln, end), (), comment))
        return ln
      if kw == "queue" or kw[:4] == "host":
        self._open(kw, body, Span(f, ln, col, ln, end), comment, True)
        return ln
      node = self._decl(kw, body, Span(f, ln, col, ln, end))
      if pending or comment is not None:
        node = attrs.evolve(node, comments=tuple(pending), comment=comment)
        self.pending = []
      self.decls.append(node)
      return ln
    except _GiveUp:
      return self._pieces(raw, ln, src, lpos)

  def read_block(self, src, pos, ln, h):
    """A queue or host block whose header `h` starts the line at `pos`, read to its `}` by `_ROW` over the body.
    Returns where the next line starts (offset, line), or None to read the block line by line instead (a `{` or `"`
    in the body, a `}` followed by more than a comment); nothing is kept from a None."""
    start = h.end()
    end = src.find("}", start)   # the body ends at the first `{`, `}` or `"` outside comments: with no `#`, `{` or `"` before
    if end < 0 or "#" in (body := src[start:end]) or "{" in body or '"' in body:   # the first `}`, found by C searches
      region = _REGION.match(src, start)
      assert region is not None   # (it matches the empty string)
      end = region.end()
    if end >= len(src) or src[end] != "}": return None
    f, rb = self.file, RowsBuilder(self.file, self.pool)
    out: list = []
    hl, hcol = ln, h.start(1) - pos + 1
    st = _RowState(ln, start - pos + 1)
    try:
      if h.group(2) is not None: name, engine, dev = self._name(h.group(2)), h.group(3), self._ref(h.group(4))
      p = start
      while True:
        q = end if end - p <= CHUNK else (src.rfind("\n", p, p + CHUNK) + 1 or end)
        if st.first: q = src.find("\n", p, q) + 1 or q      # the header's line alone: the row loop reads it
        elif (r := src.rfind("\n", p, q) + 1) > p and "#" not in (seg := src[p:r]) and ";" not in seg:
          chunk = self.read_columns(seg, st.ln, st.pending)    # whole lines, one statement at most on each
          if chunk is not None:
            rb.add_nodes(out)
            out = []
            rows, cols, node_rows, nodes, line_of = chunk
            rb.add_chunk(rows, cols, node_rows, nodes, (st.ln, src, p, r, line_of))
            if rows: st.pending = ()
            st.ln += seg.count("\n")
            p = r
        self._rows(src, p, q, out, st)
        if st.later:
          self._later(out, st.later)
          st.later = []
        if q == end: break
        p = q
    except (_GiveUp, ValueError): return None
    a = _AFTER.match(src, end + 1)
    if a is None: return None
    ln, pend, hcomment = st.ln, st.pending, st.header_comment
    rb.add_nodes(out)
    body = rb.finish()
    span = Span(f, hl, hcol, ln, end - src.rfind("\n", 0, end) + 1)
    ec = a.group(1).rstrip() if a.group(1) else None
    node: Queue | Host
    if h.group(2) is not None:
      node = Queue(name, engine, dev, body, span=span, comments=tuple(self.pending), comment=hcomment,
                   end_comments=pend, end_comment=ec)
    else: node = Host(body, span=span, comments=tuple(self.pending), comment=hcomment, end_comments=pend, end_comment=ec)
    self.decls.append(node)
    self.pending = []
    return a.end(), ln + 1

  def _rows(self, src, p, q, out, st):
    """read_block's rows of src[p:q] into `out` (None where `_later` will put a copy or exec), `st` its state."""
    f, append = self.file, out.append
    sigs, names, exprs, slices, args_of, dims_of = self.sigs, self.names, self.exprs, self.slices, self.args, self.dims
    stmt, span_ = self.read_statement, _span
    ln, c0, seen, first, pend, hcomment, later = st.ln, st.col, st.seen, st.first, st.pending, st.header_comment, st.later
    for lead, body, kw, a, sep, b, other, tw, cm, term in _ROW.findall(src, p, q):
      if body:
        col = c0 + len(lead)
        stop = col + len(body)
        c = cm.rstrip() if cm else None
        # the common statements from their cached fields; anything else, or a field not seen yet: `read_statement`
        if kw == "wait":
          x, e = sigs.get(a), exprs.get(b)
          if x is None or e is None or sep != ">=": node = stmt(kw, body, span_(f, ln, col, ln, stop), pend, c)
          else: node = _wait(f, ln, col, stop, x, e, pend, c)
        elif kw == "signal":
          x, e = sigs.get(a), exprs.get(b)
          if x is None or e is None or sep != "=": node = stmt(kw, body, span_(f, ln, col, ln, stop), pend, c)
          else: node = _signal(f, ln, col, stop, x, e, pend, c)
        elif kw == "barrier" and not a: node = _barrier(f, ln, col, stop, pend, c)
        elif kw == "epoch" and not a: node = _epoch(f, ln, col, stop, pend, c)
        elif kw == "exec":
          span = span_(f, ln, col, ln, stop)
          x = names.get(a)
          at, _, dt = b.partition(")")
          if x is None or sep != "(" or "(" in at: node = stmt(kw, body, span, pend, c)
          else:
            if dt:
              xd = dims_of.get(dt)
              if xd is None: xd = self._dims(dt)
            else: xd = _NO_DIMS
            xa = args_of.get(at)
            if xa is None:
              later.append([len(out), at, x, xd, span, pend, c, body])
              node = None
            else: node = _exec_node(x, xa, xd[0], xd[1], span, pend, c)
        elif kw == "copy" and sep == "<-":
          span = span_(f, ln, col, ln, stop)
          x, y = slices.get(a), slices.get(b)
          if x is None or y is None:
            later.append([len(out), None, a, b, span, pend, c, body])
            node = None
          else: node = _copy(x, y, span, pend, c)
        else: node = stmt(kw, body, span_(f, ln, col, ln, stop), pend, c)
        append(node)
        pend = ()
        seen = True
      elif other:
        col = c0 + len(lead)
        kw = other.partition(" ")[0]
        if "\t" in kw: kw = kw.partition("\t")[0]
        append(stmt(kw, other, Span(f, ln, col, ln, col + len(other)), pend, cm.rstrip() if cm else None))
        pend = ()
        seen = True
      elif cm:   # a comment after the last `;` of a line, or on a line of its own
        if seen:                                       # `a;  # c`: the last statement's
          if out[-1] is None: later[-1][6] = cm.rstrip()
          else: out[-1] = attrs.evolve(out[-1], comment=cm.rstrip())
        elif first: hcomment = cm.rstrip()             # `{  # c`: the header's
        elif c0 == 1: pend += (cm.rstrip(),)           # an own-line comment: the next statement's
        # else `  ;  # c`: nothing ends on its line, the grammar drops it
      if term == "\n":
        ln += 1
        c0 = 1
        seen = first = False
      elif term: c0 += len(lead) + len(body) + len(other) + len(tw) + 1
      else: break
    st.ln, st.col, st.seen, st.first, st.pending, st.header_comment, st.later = ln, c0, seen, first, pend, hcomment, later

  def _later(self, out, later):
    """The copies and execs of a chunk whose slices or argument lists were new: their slices cut by one regex over
    them all, then the nodes in their places in `out`. An entry: [index, argument text (None: a copy), kernel | dst,
    dims | src, span, comments, comment, body]."""
    slices, args_of = self.slices, self.args
    need: dict[str, None] = {}   # the new slice texts, in order
    for e in later:
      if e[1] is None:
        if e[2] not in slices: need[e[2]] = None
        if e[3] not in slices: need[e[3]] = None
      elif e[1] not in args_of:
        pieces = e[1].split(",")
        if len(pieces) > 1 and not pieces[-1].strip(" \t"): pieces.pop()   # a trailing comma
        if len(pieces) == 1 and not pieces[0].strip(" \t"): pieces = []
        ts = [t.strip(" \t") for t in pieces]
        if "" in ts: raise _GiveUp
        for t in ts:
          if t not in slices: need[t] = None
        e[1] = (e[1], ts)
    if need: need = dict(zip(need, self._cut(list(need))))
    for i, at, x, y, span, pend, c, body in later:
      if at is None:
        sx, sy = need.get(x) or slices.get(x), need.get(y) or slices.get(y)
        out[i] = _copy(sx, sy, span, pend, c) if sx is not None and sy is not None else self.read_statement("copy", body, span, pend, c)
      else:
        xa = args_of.get(at) if type(at) is str else None
        if xa is None:
          at, ts = at
          xa = args_of.get(at)
          if xa is None:
            xa = tuple([need.get(t) or slices.get(t) or self._arg_value(t) for t in ts])
            if len(args_of) < _CACHE: args_of[at] = xa
        out[i] = _exec_node(x, xa, y[0], y[1], span, pend, c)

  def _cut(self, texts: list) -> list:
    """The slices written `texts` (none of them cached), in order, None for a text that is no slice. The usual
    `name[lo:hi]` is cut by `str.partition`, its name and bounds found among the names and bound texts read before;
    the others by one regex over them all. The slices are built by C-level maps."""
    refs, ints, got = self.refs, self.ints, None
    names, los, his = zip(*_SLICE_PARTS.findall("\n".join(texts)))   # (one row per text: texts hold no newline)
    if "" not in names:            # all `name[lo:hi]` (a ref with a `.`, `d.epoch`, is no buffer)
      new = set(los).union(his).difference(ints)
      if new and all(map(_SNUM_TEXT.fullmatch, new)):   # bounds not read yet, each a plain number: learned here
        for v in new: ints[v] = _int(v)
      for v in set(names).difference(refs):
        if _NAME_TEXT.fullmatch(v): self._ref(v)
      try: got = list(map(_slice_node, map(refs.__getitem__, names), map(ints.__getitem__, los), map(ints.__getitem__, his),
                          repeat(True), repeat(None)))
      except KeyError: pass    # a name or bound that is none, or written with blanks: the regex
    if got is None:
      parts = _SLICE_LINES.findall("\n".join(texts))
      if len(parts) != len(texts): raise _GiveUp
      names, los, his = zip(*parts)
      if "" in names:              # not all slices: value arguments (or a bad copy: `read_statement` tells)
        got = [self._slice_text(t) if name else None for t, (name, _, _) in zip(texts, parts)]
      else:                        # the usual case, at C speed but for the constructor
        for v in set(los).union(his).difference(ints): ints[v] = _int(v) if v else None
        for v in set(names).difference(refs): self._ref(v)
        ranged = list(map(operator.contains, texts, repeat("[")))
        if not all(ranged): self.bare.update(itertools.compress(names, map(operator.not_, ranged)))
        got = list(map(_slice_node, map(refs.__getitem__, names), map(ints.__getitem__, los), map(ints.__getitem__, his), ranged,
                       repeat(None)))
    if len(self.slices) < _CACHE: self.slices.update(zip(texts, got))   # (a None: no slice, looked up as missing)
    return got

  def _slices(self, texts: list) -> list:
    """The slices written `texts`, in order (None: not a slice), the uncached ones cut together."""
    got = list(map(self.slices.get, texts))
    if not all(got):
      miss = list(itertools.compress(range(len(got)), map(operator.not_, got)))
      any(map(got.__setitem__, miss, self._cut(list(map(texts.__getitem__, miss)))))
    return got

  def _arglists(self, texts) -> list:
    """The argument lists written `texts` (an exec's text between its parentheses), in order; the uncached ones built
    together when all their arguments are slices, else one by one (`_exec_args`, which gives up on a bad one)."""
    args_of = self.args
    got = list(map(args_of.get, texts))
    if None not in got: return got
    miss = list(itertools.compress(range(len(got)), map(operator.is_, got, repeat(None))))
    new = list(map(texts.__getitem__, miss))
    pieces, made = list(map(str.strip, ",".join(new).split(","), repeat(" \t"))), None
    if "" not in pieces:           # no empty list, trailing comma or empty argument
      values = self._slices(pieces)
      if all(values):              # all slices
        it = iter(values)
        made = list(map(tuple, map(itertools.islice, repeat(it), map(operator.add, map(str.count, new, repeat(",")), repeat(1)))))
        if len(args_of) < _CACHE: args_of.update(zip(new, made))
    any(map(got.__setitem__, miss, made or map(self._exec_args, new)))
    return got

  def read_columns(self, seg, ln, pending=()):
    """The statements of `seg`, whole lines of a block body (the first is line `ln`) without `#` or `;`: one statement
    at most a line, so the lines are read a column at a time. The lines are grouped by their kind (`_KIND`), each
    kind's fields cut by `str.partition` over the group and looked up in the caches of checked texts (a signal, kernel
    or value not seen yet read once by `read_statement`; slices cut together by `_slice_ints`): its rows become a
    column of ints (rows.Column), no node or span built. A row that is not its kind's usual text is read by
    `read_statement` into a node row; so is the first row when own-line comments (`pending`) come before it. Returns
    the chunk for RowsBuilder.add_chunk: (rows, [(kind, rows, fields)], node rows, nodes, each row's line in `seg` or
    None when row i is on line i); None (a `read_statement` gave up) to read `seg` row by row."""
    n, f = seg.count("\n"), self.file
    lead, at, w, rows_of, cols, stops = _layout(seg, n)
    groups: collections.defaultdict[str, list[int]] = collections.defaultdict(list)   # a row's third letter (_KIND) -> its rows
    # (typeshed: operator.getitem of a str and a slice is a Sequence[str], not the str it is)
    any(map(list.append, map(groups.__getitem__, map(operator.getitem, rows_of, repeat(slice(at + 2, at + 3)))), range(n)))  # type: ignore[arg-type]
    heads, slow, made, pool = self.heads, [], {}, self.pool
    done: dict = {}          # the rows `read_statement` read

    def read(i):
      """Row `i` by `read_statement`; its head and fields go to the caches, so the rows like it are found there."""
      if i in done: return done[i]
      body = rows_of[i][at:]
      if cols is None:   # (a row of fmt's layout, or with more blanks before it)
        c0 = w + 1 + len(body) - len(body := body.lstrip(" \t"))
        span = _span(f, ln + i, c0, ln + i, c0 + len(body))
      else:
        assert stops is not None
        span = _span(f, ln + i, cols[i], ln + i, stops[i])
      word = body.partition(" ")[0].partition("\t")[0]
      node = done[i] = self.read_statement(word, body, span, (), None)
      if type(node) is Wait:
        h, sep, _ = body.partition(" >= ")
        x = node.signal
      elif type(node) is SignalWrite:
        h, sep, _ = body.partition(" = ")
        x = node.signal
      elif type(node) is Exec:
        h, sep, _ = body.partition("(")
        x = node.kernel
      else: return node
      if sep and len(heads) < _CACHE: heads[lead + h] = pool.id(x.name)   # (with the lead when the rows are whole lines)
      return node

    def learn(first, rows) -> bool:
      """The rows `first` (indices into `rows`) read by `read_statement`, so the rows like them are found in the caches; False
      when they are most of `rows` (mostly new texts, or odd spacing: the row loop reads them as cheaply)."""
      if len(first) > len(rows) // 4 + 8: return False
      for i in sorted(first): read(rows[i])
      return True

    # (row numbers skip blank lines)
    num = list(itertools.accumulate(map(bool, rows_of))) if "" in groups else None
    number = (lambda xs: map(operator.sub, map(num.__getitem__, xs), repeat(1))) if num is not None else (lambda xs: xs)
    top = next((i for i in range(n) if rows_of[i]), None) if pending else None   # the row the comments go to
    chunk = []
    try:
      for key, rows in groups.items():
        kind = _KIND.get(key)
        if kind is None:
          slow += rows
          continue
        if (got := self._column_fields(kind, list(map(rows_of.__getitem__, rows)), rows, lead, at, learn)) is None: return None
        fields, bad = got
        if top is not None and rows[0] == top: bad = [0, *(bad or ())]
        if bad:
          slow += map(rows.__getitem__, bad)
          rows, fields = _without(rows, fields, bad, kind == "exec")
          if not rows: continue
        chunk.append((_KIND_CODE[kind], list(number(rows)), fields))
      for i in slow:
        if rows_of[i]: made[i] = read(i)   # (else a blank line)
    except (_GiveUp, ValueError): return None
    if top is not None: made[top] = attrs.evolve(made[top], comments=pending)
    done_at = sorted(made)
    line_of = [i for i in range(n) if rows_of[i]] if num is not None else None
    return num[-1] if num is not None else n, chunk, list(number(done_at)), list(map(made.__getitem__, done_at)), line_of

  def _column_fields(self, kind, bs, rows, lead, w, learn):
    """(the ints of one kind's rows `bs`, {field: list} as rows.Column holds them; the indices of those that are not
    its usual text), or None to read the whole segment row by row (`learn` refused)."""
    heads, count = self.heads, itertools.count
    if kind == "wait" or kind == "signal":
      hs, _, vs = zip(*map(str.partition, bs, repeat(" >= " if kind == "wait" else " = ")))
      xs, es = list(map(heads.get, hs)), list(map(self.vals.get, vs))
      if None in xs or None in es:     # a new head or value: plain numbers at once, the others one row each, then all found
        self._value_texts([v for v, e in zip(vs, es) if e is None])
        es = list(map(self.vals.get, vs))
        if not learn({*_firsts(hs, xs), *_firsts(vs, es)}, rows): return None
        xs, es = list(map(heads.get, hs)), list(map(self.vals.get, vs))
      bad = (None in xs or None in es) and [i for i, x, e in zip(count(), xs, es) if x is None or e is None]
      if bad: es = [e or (0, 0) for e in es]
      var, off = zip(*es) if es else ((), ())
      return {"x": xs, "y": var, "z": off}, bad
    if kind == "exec":         # `exec k(args) dims`, the arguments all slices
      hs, s1, rest = zip(*map(str.partition, bs, repeat("(")))
      ats, s2, dts = zip(*map(str.partition, rest, repeat(")")))
      ks = list(map(heads.get, hs))
      if None in ks:
        if not learn(_firsts(hs, ks), rows): return None
        ks = list(map(heads.get, hs))
      argc = list(map(operator.add, map(str.count, ats, repeat(",")), repeat(1)))
      buf, lo, hi, rng = self._slice_ints(list(map(str.strip, ",".join(ats).split(","), repeat(" \t"))))
      ok = list(map(operator.ne, buf, repeat(-1)))
      good = list(map(all, map(itertools.islice, repeat(iter(ok)), argc)))   # every argument a slice
      bad = not (None not in ks and all(s1) and all(s2) and all(good)) and [
        i for i, k, a, b, g in zip(count(), ks, s1, s2, good) if k is None or not a or not b or not g]
      dims = [-1] * len(bs)
      if any(dts):
        dim_ids = self.dim_ids
        for t in set(dts).difference(dim_ids):
          dim_ids[t] = len(self.pool.dims)
          self.pool.dims.append(self._dims(t) if t else (None, None))
        dims = list(map(dim_ids.__getitem__, dts))
      return {"x": ks, "y": argc, "z": dims, "buf": buf, "lo": lo, "hi": hi, "ranged": rng}, bad
    if kind == "copy":         # `copy dst <- src`
      hs, s1, srcs = zip(*map(str.partition, bs, repeat(" <- ")))
      texts = list(map(operator.getitem, hs, repeat(slice(w + 5, None))))
      texts[len(texts):] = srcs
      buf, lo, hi, rng = self._slice_ints(texts)
      m = len(hs)
      ok = list(map(str.startswith, hs, repeat(lead + "copy ")))
      bad = not (all(ok) and all(s1) and -1 not in buf) and [
        i for i, o, a, x, y in zip(count(), ok, s1, buf, buf[m:]) if not o or not a or x == -1 or y == -1]
      order = [j for i in range(m) for j in (i, m + i)]   # (destination, source) per row
      return {f: list(map(v.__getitem__, order)) for f, v in (("buf", buf), ("lo", lo), ("hi", hi), ("ranged", rng))}, bad
    # a barrier or an epoch: the keyword alone
    bad = bs.count(lead + kind) != len(bs) and [i for i, b in enumerate(bs) if b != lead + kind]
    return {}, bad

  def _value_texts(self, texts) -> None:
    """Values written as fmt writes them (`12`, `k`, `k + 1`, `g.epoch - 1`), cached as (var in the pool or -1,
    offset); the others are left to `read_statement`."""
    vals, pool = self.vals, self.pool
    for t in set(texts):
      if t in vals or (m := _VALUE.fullmatch(t)) is None: continue
      n, v, op, k = m.groups()
      off = int(n if n is not None else k or 0)
      if off <= U32_MAX: vals[t] = (-1, off) if v is None else (pool.id(self._ref(v).name), -off if op == "-" else off)

  def _slice_ints(self, texts: list) -> tuple:
    """The slices written `texts` as four lists of ints (buffer name in the pool, start, end: -1 when missing; ranged:
    written with brackets), buffer -1 for a text that is no slice or needs more than ints (`x@k`, a bound past 2**62).
    The usual `name[lo:hi]` is cut at its `[`: the name and the `lo:hi]` are found among the texts read before (a
    program's byte ranges repeat from buffer to buffer), a new one read by `_BOUNDS`; the rest by `_slice_general`."""
    names, bounds = self.snames, self.bounds
    nm, _, rest = zip(*map(str.partition, texts, repeat("["))) if texts else ((), (), ())
    buf, lohi = list(map(names.get, nm, repeat(-1))), list(map(bounds.get, rest))
    if -1 in buf:
      for v in set(nm).difference(names):
        if _NAME_TEXT.fullmatch(v): names[v] = self.pool.id(self._ref(v).name)
      buf = list(map(names.get, nm, repeat(-1)))
    if None in lohi:
      for t in set(rest).difference(bounds):
        if len(bounds) < _CACHE and (m := _BOUNDS.fullmatch(t)) is not None:
          lo, hi = (-1 if not x else self.ints[x] if x in self.ints else self._int(x) for x in m.groups())
          if lo < _BIG and hi < _BIG: bounds[t] = (lo, hi)
      lohi = list(map(bounds.get, rest))
    rng = [1] * len(texts)
    if -1 in buf or None in lohi:   # a bare name, blanks, a bound past int64: the general regex
      lohi = [x or (-1, -1) for x in lohi]
      for i in [i for i, b, x, r in zip(itertools.count(), buf, lohi, rest) if b == -1 or (x == (-1, -1) and r != ":]")]:
        buf[i], a, b, rng[i] = self._slice_general(texts[i])
        lohi[i] = (a, b)
    lo, hi = zip(*lohi) if lohi else ((), ())
    return buf, lo, hi, rng

  def _slice_general(self, t: str) -> tuple:
    m = _SLICE_ONE.fullmatch(t)
    if m is None: return -1, -1, -1, 0
    name, a, b = m.groups()
    a = -1 if not a else self.ints[a] if a in self.ints else self._int(a)
    b = -1 if not b else self.ints[b] if b in self.ints else self._int(b)
    if a >= _BIG or b >= _BIG: return -1, -1, -1, 0
    if "[" not in t: self.bare.add(name)
    return self.pool.id(self._ref(name).name), a, b, int("[" in t)

  # ---- blocks
  def _open(self, kw, body, span, comment, brace):
    m = (_QUEUE if kw == "queue" else _HOST).match(body)
    if m is None or (m.group(m.re.groups) is not None) != brace: raise _GiveUp
    if kw == "queue": self.block = _OpenBlock("queue", self._name(m.group(1)), m.group(2), self._ref(m.group(3)), span, comment, tuple(self.pending))
    else: self.block = _OpenBlock("host", None, None, None, span, comment, tuple(self.pending))
    self.pending = []

  def _close(self, ln, end, comment):
    assert self.block is not None   # (a block is open)
    b = self.block
    span = Span(self.file, b.span.line, b.span.column, ln, end)
    node: Queue | Host
    if b.kind == "queue":
      assert b.name is not None and b.engine is not None and b.device is not None   # (a queue's header names them)
      node = Queue(b.name, b.engine, b.device, tuple(b.body), span=span, comments=b.comments, comment=b.comment,
                   end_comments=tuple(self.pending), end_comment=comment)
    else: node = Host(tuple(b.body), span=span, comments=b.comments, comment=b.comment, end_comments=tuple(self.pending),
                      end_comment=comment)
    self.decls.append(node)
    self.pending = []
    self.block = None

  # ---- a line that is not one whole declaration or statement
  def _semicolons(self, raw, ln) -> int:
    """A line of declarations or statements separated by `;` (no braces, no strings)."""
    hp = raw.find("#")
    code, comment = (raw, None) if hp < 0 else (raw[:hp], raw[hp:].rstrip())
    parts = code.split(";")
    target = -1   # the comment goes to the last node on the line
    if comment is not None:
      target = next((i for i in range(len(parts) - 1, -1, -1) if parts[i].strip(" \t")), -1)
      if target < 0 and not code.strip(" \t"): self.pending.append(comment)   # a comment line (with a `;` in it)
    f, block, pos, stmt = self.file, self.block, 0, self.read_statement
    body_list = block.body if block is not None else None
    for i, part in enumerate(parts):
      body = part.strip(" \t")
      if body:
        start = pos + part.find(body[0]) + 1
        kw = body.partition(" ")[0]
        if "\t" in kw: kw = kw.partition("\t")[0]
        c = comment if i == target else None
        pending = self.pending
        if body_list is not None:
          body_list.append(stmt(kw, body, Span(f, ln, start, ln, start + len(body)), tuple(pending) if pending else (), c))
        else:
          span = Span(f, ln, start, ln, start + len(body))
          node = self._decl(kw, body, span)
          if pending or c is not None: node = attrs.evolve(node, comments=tuple(pending), comment=c)
          self.decls.append(node)
        if pending: self.pending = []
      pos += len(part) + 1
    return ln

  def _pieces(self, raw, ln, src, lpos) -> int:
    """Cut the line (and the lines a string carries on to) into pieces at `;`, `{` and `}` and read each piece.
    Returns the last line read."""
    toks, text, line_start = _tokens(raw, src, lpos)
    comment, target = None, -1
    if toks and toks[-1][0] == 3: comment, target = self._comment_target(toks, text, line_start)
    f, cur_ln, cur_ls = self.file, ln, line_start
    need_sep = False       # after `}`: the next declaration needs a `;` or a new line first
    header = None          # a queue or host header read, its `{` not yet
    block = self.block
    for i, (g, piece, s) in enumerate(toks):
      c = comment if i == target else None
      if g == 2:
        if piece == ";":
          if header is not None: raise _GiveUp
          need_sep = False
        elif piece == "{":
          if header is None: raise _GiveUp
          kw, body, span = header
          self._open(kw, body, span, c, False)
          header = None
          block = self.block
        else:
          if block is None or header is not None or need_sep: raise _GiveUp
          self._close(cur_ln, s - cur_ls + 2, c)
          need_sep = True
          block = None
        continue
      body = piece.strip(" \t")
      if not body: continue
      if need_sep or header is not None: raise _GiveUp
      start = s + piece.find(body[0])
      sl, sc = cur_ln, start - cur_ls + 1
      if "\n" in piece:
        cur_ln += piece.count("\n")
        cur_ls = text.rfind("\n", s, s + len(piece)) + 1
      span = Span(f, sl, sc, cur_ln, start + len(body) - cur_ls + 1)
      kw = body.partition(" ")[0]
      if "\t" in kw: kw = kw.partition("\t")[0]
      pending = self.pending
      if block is not None:
        block.body.append(self.read_statement(kw, body, span, tuple(pending) if pending else (), c))
        if pending: self.pending = []
      elif kw == "queue" or kw == "host":
        header = (kw, body, span)
      else:
        node = self._decl(kw, body, span)
        if pending or c is not None: node = attrs.evolve(node, comments=tuple(pending), comment=c)
        self.decls.append(node)
        self.pending = []
    if header is not None: raise _GiveUp
    return cur_ln

  def _comment_target(self, toks: list, text: str, line_start: int) -> tuple:
    """Pop the line's comment: (its text, the index of the last node ending on its line before it, else -1: a line of
    `;`s, whose comment goes nowhere, or a comment alone on its line, kept pending for the next node)."""
    _, t, s = toks.pop()
    comment, target = t.rstrip(), -1
    cls = text.rfind("\n", line_start, s) + 1 or line_start
    for i in range(len(toks) - 1, -1, -1):   # (`s` ends as the offset of the last node looked at, as the test below wants)
      g, t, s = toks[i]
      if s + len(t) <= cls: break
      if (g == 2 and t == ";") or (g == 1 and not t.strip(" \t")): continue
      target = i
      break
    if target < 0 and not text[cls:s].strip(" \t"): self.pending.append(comment)
    return comment, target

  # ---- declarations
  def _decl(self, kw, body, span):
    rx = _DECL.get(kw)
    m = rx.match(body) if rx is not None else None
    if m is None:
      if kw == "buffer" and (m := _PER_LAUNCH.match(body)) is not None: return self._per_launch(m, body, span)
      raise _GiveUp
    if kw == "device":
      arch = m.group(4)
      if arch is not None: self._name(arch)
      return Device(self._name(m.group(1)), self._name(m.group(2)), _int(m.group(3)), arch, span=span)
    if kw == "buffer":
      data = self._data(m, span) if m.group("dt") is not None else None
      return Buffer(self._name(m.group(1)), None if m.group(2) == "host" else self._ref(m.group(2)), _int(m.group(3)),
                    data, span=span)
    if kw == "signal":
      init = _int(m.group(3)) if m.group(3) else 0
      if init > U32_MAX: raise _GiveUp
      return Signal(self._name(m.group(1)), None if m.group(2) == "host" else self._ref(m.group(2)), init, span=span)
    if kw == "var":
      if m.group("vals") is None: return Var(self._name(m.group(1)), span=span)
      if _UVALS.fullmatch(m.group("vals")) is None: raise _GiveUp
      values = tuple(map(int, _split(m.group("vals"))))
      if values and max(values) > U32_MAX: raise _GiveUp   # the grammar reports the overflow
      return Var(self._name(m.group(1)), values, span=span)
    if kw == "expect":
      target, end = self._slice(m.group("t"), 0)
      if end != len(m.group("t")): raise _GiveUp
      data = self._data(m, span)
      tol: dict = {}
      for k, v in _TOL.findall(m.group("tol") or ""):   # `rtol 1e-3 atol 1e-6`: anything unusual is the grammar's to report
        if k in tol or m.group("op") != "~=" or not _FLOAT_TOL.fullmatch(v): raise _GiveUp
        tol[k] = float(v)
      return Expect(target, data, m.group("op") == "~=", tol.get("rtol"), tol.get("atol"), span=span)
    params = tuple(Param(p.group(1), self._name(p.group(2))) for p in _PARAM.finditer(m.group(2)))
    impl = None
    if m.group("impl") is not None:
      impl = self._impl(body, m.start("impl"), span)
      isp = impl.span
      assert isp is not None   # (_impl gives the Impl its span)
      span = Span(span.file, span.line, span.column, isp.end_line, isp.end_column)
    return Kernel(self._name(m.group(1)), params, impl, span=span)

  def _data_lists(self, body: str, pos: int, span) -> tuple:
    """`T [..], T [..], ...` from body[pos:] to its end: one data list per launch."""
    out = []
    while True:
      d = _DATA_ONE.match(body, pos)
      if d is None: raise _GiveUp
      out.append(self._data(d, span))
      e = _DATA_SEP.match(body, d.end())
      if e is None: raise _GiveUp
      pos = e.end()
      if pos >= len(body) or not body[pos:].strip(" \t"): return tuple(out)

  def _per_launch(self, m, body, span) -> Buffer:
    """`buffer b on g size N rebound|rewritten [= T [..], T [..], ...]`: one data list per launch."""
    pos = m.start("rest")
    return Buffer(self._name(m.group(1)), None if m.group(2) == "host" else self._ref(m.group(2)), _int(m.group(3)), None,
                  m.group(4), self._data_lists(body, pos, span) if pos >= 0 else (), span=span)

  def _data(self, m, span) -> Data:
    """The data list of a buffer or expect: validated by one regex over the whole list, converted at C speed."""
    dtype, vals = m.group("dt", "vals")
    if "- " in vals or "-\t" in vals: vals = _MINUS_WS.sub("-", vals)   # `- inf`, `- 5`: the grammar's MINUS then a value
    if dtype not in DTYPES: raise _GiveUp
    if dtype[0] == "f":
      if _VALUES["f"].fullmatch(vals) is None: raise _GiveUp
      values = tuple(map(float, _split(vals)))
      if values.count(math.inf) + values.count(-math.inf) != vals.count("inf"): raise _GiveUp  # 1e999: the grammar
    else:
      if len(vals) > 8192 and _VALUES["i18"].fullmatch(vals):   # at most 18 digits each: int64 parses them exactly
        import numpy as np
        body = vals.rstrip(" \t").rstrip(",")
        values = tuple(np.fromstring(body, dtype=np.int64, sep=",").tolist())
        if len(values) != body.count(",") + 1: raise _GiveUp
      elif _VALUES["i"].fullmatch(vals): values = tuple(map(int, _split(vals)))
      else: raise _GiveUp
      if values:
        bits = DTYPES[dtype][1] * 8
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dtype[0] == "i" else (0, (1 << bits) - 1)
        if min(values) < lo or max(values) > hi: raise _GiveUp   # the grammar reports the overflow
    return Data(dtype, values, span=Span(span.file, span.line, span.column + m.start("dt"), span.line, span.column + m.end("vals") + 1))

  def _impl(self, body, pos, span) -> Impl:
    """`= builtin name<dtype>(args) c "..." amd "..."`: each kind at most once (else the grammar reports it)."""
    fields: dict = {}
    first = last = None
    while pos < len(body):
      m = _IMPL.match(body, pos)
      if m is None:
        if body[pos:].strip(" \t"): raise _GiveUp
        break
      at = m.start("b") if m.group("b") else m.start("k")
      first = at if first is None else first
      last, pos = m.end(), m.end()
      if m.group("b"):
        if "builtin" in fields: raise _GiveUp
        fields["builtin"] = self._name(m.group("bn"))
        if m.group("dt"): fields["dtype"] = self._name(m.group("dt"))
        if m.group("args") is not None:
          args = self._values(m.group("args"))
          if args: fields["args"] = args
      else:
        key = "c_source" if m.group("k") == "c" else "amd_code"
        if key in fields or (m.group("cb") and key != "amd_code"): raise _GiveUp
        fields[key] = _unquote(m.group("s"))
        if m.group("cb"): fields["code"] = self._name(m.group("cb"))
    if first is None: raise _GiveUp
    return Impl(**fields, span=Span(span.file, *self._at(body, first, span), *self._at(body, last, span)))

  @staticmethod
  def _at(body, i, span):
    """The line and column of body[i], body starting at the span's start."""
    nl = body.count("\n", 0, i)
    if not nl: return span.line, span.column + i
    return span.line + nl, i - body.rfind("\n", 0, i)

  @staticmethod
  def _values(text) -> tuple:
    pieces = text.split(",")
    if len(pieces) > 1 and not pieces[-1].strip(" \t"): pieces.pop()
    if len(pieces) == 1 and not pieces[0].strip(" \t"): return ()
    out = []
    for p in pieces:
      m = _ARG.match(p)
      if m is None: raise _GiveUp
      v = float(m.group("f")) if m.group("f") else int(m.group("i")) if m.group("i") else float(m.group("n"))
      out.append(-v if m.group(1) else v)
    return tuple(out)

  # ---- statements
  def read_statement(self, kw, body, span, cs, c):
    rx = _STMT.get(kw)
    if rx is not None:
      m = rx.match(body)
      if m is None: raise _GiveUp
      if kw == "barrier": return Barrier(span=span, comments=cs, comment=c)
      if kw == "epoch": return Epoch(span=span, comments=cs, comment=c)
      sig = self.sigs[m.group("s")] = self._ref(m.group("s"))
      if kw == "timestamp": return Timestamp(sig, span=span, comments=cs, comment=c)
      e = self.exprs.get(m.group("e"))
      if e is None:
        n, vn, op, k = m.group("n", "v", "op", "k")
        if n is not None: e = Expr(None, _int(n))
        else: e = Expr(self._ref(vn), 0 if k is None else _int(k) * (1 if op == "+" else -1))
        if abs(e.offset) > U32_MAX: raise _GiveUp
        self.exprs[m.group("e")] = e
        self.vals[m.group("e")] = (-1 if e.var is None else self.pool.id(e.var.name), e.offset)
      return (Wait if kw == "wait" else SignalWrite)(sig, e, span=span, comments=cs, comment=c)
    if kw == "exec": return self._exec(body, span, cs, c)
    if kw == "copy":
      m = _COPY.match(body)
      if m is None: raise _GiveUp
      dst, pos = self._slice(body, m.end())
      a = _ARROW.match(body, pos)
      if a is None: raise _GiveUp
      src, pos = self._slice(body, a.end())
      if pos != len(body): raise _GiveUp
      return Copy(dst, src, span=span, comments=cs, comment=c)
    if kw == "write":
      m = _WRITE.match(body)
      if m is None: raise _GiveUp
      dst, pos = self._slice(body, m.end())
      m = _WRITE_EQ.match(body, pos)
      if m is None:   # the host's `write B[..] = T [..], T [..]`: one data list per launch
        eq = _HOST_WRITE_EQ.match(body, pos)
        if eq is None: raise _GiveUp
        return HostWrite(dst, self._data_lists(body, eq.end(), span), span=span, comments=cs, comment=c)
      n, vn, op, k = m.group("n", "v", "op", "k")
      e = Expr(None, _int(n)) if n is not None else Expr(self._ref(vn), 0 if k is None else _int(k) * (1 if op == "+" else -1))
      if abs(e.offset) > U32_MAX: raise _GiveUp
      return Write(dst, e, span=span, comments=cs, comment=c)
    if kw == "poll":
      m = _POLL.match(body)
      if m is None: raise _GiveUp
      src, pos = self._slice(body, m.end())
      m = _POLL_TAIL.match(body, pos)
      if m is None: raise _GiveUp
      n, vn, op, k, mask = m.group("n", "v", "op", "k", "mask")
      e = Expr(None, _int(n)) if n is not None else Expr(self._ref(vn), 0 if k is None else _int(k) * (1 if op == "+" else -1))
      mask = U32_MAX if mask is None else _int(mask)
      if abs(e.offset) > U32_MAX or mask > U32_MAX: raise _GiveUp
      return Poll(src, mask, e, span=span, comments=cs, comment=c)
    if kw == "submit":
      m = _SUBMIT.match(body)
      if m is None: raise _GiveUp
      return Submit(tuple(self._ref(q) for q in re.findall(_NAME, m.group(1) or "")), span=span, comments=cs, comment=c)
    raise _GiveUp

  def _slice(self, body, pos):
    m = _SLICE.match(body, pos)
    if m is None: raise _GiveUp
    t = m.group()
    return self.slices.get(t) or self._slice_of(t, m), m.end()

  def _slice_of(self, t, m) -> Slice:
    """The slice `t` that `_SLICE` matched as `m`, interned by its text."""
    name, a, b = m.group(1, 2, 3)
    ints = self.ints
    if a is not None: a = ints[a] if a in ints else self._int(a)
    if b is not None: b = ints[b] if b in ints else self._int(b)
    if "[" not in t: self.bare.add(name)
    s = _slice_node(self.refs.get(name) or self._ref(name), a, b, "[" in t, None)
    if len(self.slices) < _CACHE: self.slices[t] = s
    return s

  def _slice_text(self, t) -> Optional[Slice]:
    """The slice written `t` (no blanks around it), interned; None if `t` is no slice."""
    m = _SLICE_ONE.fullmatch(t)
    if m is None: return None
    name, a, b = m.groups()
    ints = self.ints
    if a: a = ints[a] if a in ints else self._int(a)
    else: a = None
    if b: b = ints[b] if b in ints else self._int(b)
    else: b = None
    if "[" not in t: self.bare.add(name)
    s = _slice_node(self.refs.get(name) or self._ref(name), a, b, "[" in t, None)
    if len(self.slices) < _CACHE: self.slices[t] = s
    return s

  def _int(self, s) -> int:
    v = self.ints[s] = _int(s)
    return v

  def _arg_value(self, piece) -> Expr:
    """A scalar argument: what the grammar's `arg_expr` reads (a bare name stays a slice)."""
    m = _ARGX.match(piece)
    if m is None or (m.group("v") is not None and m.group("ep") is None and m.group("op") is None): raise _GiveUp
    if m.group("n") is not None: e = Expr(None, _int(m.group("n")))
    else:
      k = 0 if m.group("k") is None else _int(m.group("k")) * (1 if m.group("op") == "+" else -1)
      e = Expr(self._ref(m.group("v") + (m.group("ep") or "")), k)
    if abs(e.offset) > U32_MAX: raise _GiveUp
    return e

  def _dim(self, text):
    m = _DIMX.match(text)
    if m is None: raise _GiveUp
    if m.group("n") is not None: return _int(m.group("n"))
    k = 0 if m.group("k") is None else _int(m.group("k")) * (1 if m.group("op") == "+" else -1)
    if abs(k) > U32_MAX: raise _GiveUp
    return Expr(self._ref(m.group("v")), k)

  def _exec(self, body, span, cs, c):
    m = _EXEC.match(body)
    if m is None: raise _GiveUp
    kernel = self.names[m.group(1)] = self._ref(m.group(1))
    args = self.args.get(m.group(2))
    if args is None: args = self._exec_args(m.group(2))
    grid, block = self._dims(body[m.end():]) if m.end() < len(body) else (None, None)
    return Exec(kernel, args, grid, block, span=span, comments=cs, comment=c)

  def _exec_args(self, argtext) -> tuple:
    """The arguments of an exec, interned by their text."""
    pieces = argtext.split(",")
    if len(pieces) > 1 and not pieces[-1].strip(" \t"): pieces.pop()   # a trailing comma
    if len(pieces) == 1 and not pieces[0].strip(" \t"): pieces = []
    args, slices = [], self.slices
    for piece in pieces:
      t = piece.strip(" \t")
      if not t: raise _GiveUp
      # a buffer (a bare name too: `resolve_var_args` turns a var's into a value), else a value
      a = slices.get(t) or self._slice_text(t)
      args.append(self._arg_value(piece) if a is None else a)
    got = tuple(args)
    if len(self.args) < _CACHE: self.args[argtext] = got
    return got

  def _dims(self, text) -> tuple:
    """`grid (x, y, z) block (x, y, z)` (either, both, block not first): (grid, block), interned by their text."""
    pos, n = 0, len(text)
    dims = {}
    while pos < n:
      d = _DIM.match(text, pos)
      if d is None or d.group(1) in dims or (d.group(1) == "grid" and "block" in dims): raise _GiveUp
      dims[d.group(1)] = tuple(self._dim(d.group(j)) for j in (2, 3, 4))
      pos = d.end()
    r = self.dims[text] = (dims.get("grid"), dims.get("block"))
    return r
