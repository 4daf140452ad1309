"""Text → IR by the lark grammar (LALR), with source spans and comments: what `parse.parse_syntax` falls back to when
the fast path (scan.py) does not take a text — the language's definition and the only source of `syntax` errors, each
described from the parser's state, with recovery (a bad line blanked and the text parsed again). Loaded on first use:
a program the fast path reads never imports lark."""
from __future__ import annotations
import bisect, pathlib
from typing import Any, Optional
import attrs
from lark import Lark, Transformer, Token, Tree
from lark.exceptions import UnexpectedInput, UnexpectedCharacters, UnexpectedEOF, VisitError
from ..ir import (timeline_of, epoch_of, Span, Ref, Expr, Slice, Data, Param, Impl, Device, Buffer, Signal, Var, Kernel, Wait, SignalWrite,
                 Exec, Copy, Write, HostWrite, Poll, Barrier, Timestamp, Epoch, Submit, Queue, Host, Expect, Program, DTYPES, U32_MAX,
                 KEYWORDS, resolve_var_args)
from ..diagnostics import Diagnostic, Related, did_you_mean
from .lexical import TERMINALS, int_text, unquote, comments

__all__ = ["parse_grammar", "lark_parser"]

def _tok_span(t: Token, file: str) -> Span: return Span(file, t.line or 0, t.column or 0, t.end_line or 0, t.end_column or 0)  # (lexed tokens: set)

def _pos(d: Diagnostic) -> tuple[int, int]: return (d.span.line, d.span.column) if d.span else (0, 0)

def _span(items, file: str) -> Span:
  first, last = items[0], items[-1]
  a = first.span if not isinstance(first, Token) else _tok_span(first, file)
  b = last.span if not isinstance(last, Token) else _tok_span(last, file)
  return Span(file, a.line, a.column, b.end_line, b.end_column)

class _Build(Transformer):
  """Parse tree → IR, run over the tree the LALR parser built (the tree is kept, not transformed inline, because a
  syntax error is described from the parser's value stack of tokens and subtrees: `_describe`). Problems that are
  syntax in the user's eyes but not in the grammar's (a size suffix on a signal value, a float in a u32 list) are
  collected, not raised. One instance per parse: parsing is reentrant."""
  def __init__(self, file: str):
    super().__init__()
    self.file = file
    self.diags: list[Diagnostic] = []
    self.lbraces: dict = {}

  def _err(self, code, msg, span): self.diags.append(Diagnostic(code, msg, span))

  def _int(self, t: Token, sized=False) -> int:
    try: v, suffix = int_text(t.value)
    except ValueError:
      self._err("syntax", f"`{t.value}` is not a number", _tok_span(t, self.file))
      return 0
    if suffix and not sized:
      self._err("syntax", f"a size suffix (`{suffix}`) is only allowed on sizes and byte ranges", _tok_span(t, self.file))
    return v

  # ---- declarations
  def start(self, c): return [x for x in c if not isinstance(x, Token)]
  def place(self, c):
    return _Val(None if c[0].type == "HOST" else Ref(c[0].value), _tok_span(c[0], self.file))
  def device(self, c):
    arch = c[6].value if len(c) > 6 else None
    return Device(c[1].value, c[3].value, self._int(c[5]), arch, span=_span(c, self.file))
  def buffer(self, c):
    return Buffer(c[1].value, c[3].v, self._int(c[5], sized=True), c[7] if len(c) > 7 else None, span=_span(c, self.file))
  def buffer_per_launch(self, c):
    inits = tuple(x for x in c if isinstance(x, Data))
    return Buffer(c[1].value, c[3].v, self._int(c[5], sized=True), None, c[6].value, inits, span=_span(c, self.file))
  def signal_decl(self, c):
    init = self._int(c[5]) if len(c) > 5 else 0
    return Signal(c[1].value, c[3].v, init, span=_span(c, self.file))
  def var_decl(self, c):
    if len(c) == 2: return Var(c[1].value, span=_span(c, self.file))
    vals = []
    for t in c[4:]:
      if t.type != "NUMBER": continue
      v = self._int(t)
      if v > U32_MAX: self._err("overflow", f"{v} does not fit 32 bits (0 .. {U32_MAX})", _tok_span(t, self.file))
      vals.append(v)
    return Var(c[1].value, tuple(vals), span=_span(c, self.file))
  def param(self, c): return _Val(Param(c[0].value, c[1].value), _span(c, self.file))
  def param_scalar(self, c):
    return _Val(Param(c[0].value, c[1].value), _span(c, self.file))
  def kernel(self, c):
    params = tuple(x.v for x in c if isinstance(x, _Val))
    impls = [x for x in c if isinstance(x, Impl)]
    impl = None
    if impls:
      fields: dict = {}
      for i in impls:
        for k, v in attrs.asdict(i, recurse=False).items():
          if k == "span" or v in (None, ()): continue
          if k in fields or (k in ("dtype", "args") and "builtin" in fields and i.builtin is None):
            self._err("syntax", "a kernel has at most one implementation of each kind (builtin, c, amd)", i.span)
          fields[k] = v
      impl = Impl(**fields, span=_span(impls, self.file))
    return Kernel(c[1].value, params, impl, span=_span(c, self.file))
  def impl_builtin(self, c):
    dtype = next((c[i + 1].value for i, x in enumerate(c) if isinstance(x, Token) and x.type == "LT"), None)
    args = tuple(x.v for x in c if isinstance(x, _Val))
    return Impl(builtin=c[1].value, dtype=dtype, args=args, span=_span(c, self.file))
  def impl_c(self, c): return Impl(c_source=unquote(c[1].value), span=_span(c, self.file))
  def impl_amd(self, c): return Impl(amd_code=unquote(c[1].value), code=c[3].value if len(c) > 3 else None, span=_span(c, self.file))
  def value(self, c):
    t = c[-1]
    neg = len(c) == 2
    if t.type == "NAME":
      if t.value not in ("inf", "nan"): self._err("syntax", f"expected a number, found `{t.value}`", _tok_span(t, self.file))
      v = float(t.value) if t.value in ("inf", "nan") else 0
    elif t.type == "FLOAT": v = float(t.value.replace("_", ""))
    else: v = self._int(t)
    return _Val(-v if neg else v, _span(c, self.file), isinstance(v, float))
  def data(self, c):
    dtype = c[0].value
    vals = [x for x in c if isinstance(x, _Val)]
    span = _span(c, self.file)
    if dtype not in DTYPES:
      self._err("name", f"unknown dtype `{dtype}` (one of {', '.join(DTYPES)})", _tok_span(c[0], self.file))
      return Data("u8", (), span=span)
    out = []
    for v in vals:
      if dtype[0] == "f": out.append(float(v.v))
      elif v.is_float:
        self._err("syntax", f"`{dtype}` values are integers", v.span)
        out.append(0)
      else:
        bits = DTYPES[dtype][1] * 8
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dtype[0] == "i" else (0, (1 << bits) - 1)
        if not lo <= v.v <= hi: self._err("overflow", f"{v.v} does not fit {dtype} ({lo} .. {hi})", v.span)
        out.append(v.v)
    return Data(dtype, tuple(out), span=span)
  def data_file(self, c):
    """`f32 from "m.safetensors" ["w"]`: the file is found next to the program (relative to its directory)."""
    from .sidecar import read_tensor, SidecarError
    dtype, path, key, span = c[0].value, unquote(c[2].value), unquote(c[4].value), _span(c, self.file)
    if dtype not in DTYPES:
      self._err("name", f"unknown dtype `{dtype}` (one of {', '.join(DTYPES)})", _tok_span(c[0], self.file))
      return Data("u8", (), span=span)
    base = pathlib.Path(self.file).parent if not self.file.startswith("<") else pathlib.Path(".")
    try: values = read_tensor(str(base / path), key, dtype)
    except SidecarError as e:
      self._err("name", str(e), span)
      values = ()
    return Data(dtype, values, span=span, source=(path, key))
  def tolerance(self, c): return _Val((c[0].value, float(c[1].v)), _span(c, self.file))
  def queue(self, c):
    body, lb, launches = self._body(c)
    span = _span(c, self.file)
    self.lbraces[(span.line, span.column)] = lb
    return Queue(c[1].value, c[2].value, Ref(c[4].value), body, launches, span=span)
  def host(self, c):
    body, lb, launches = self._body(c)
    span = _span(c, self.file)
    self.lbraces[(span.line, span.column)] = lb
    return Host(body, launches, span=span)
  def launches(self, c):
    """`launches 3` (3, 3), `launches 2..7` (2, 7), `launches 2..` (2, None): checked by the static check (`bounds`)."""
    first = self._int(c[1])
    return _Val((first, first if len(c) == 2 else self._int(c[3]) if len(c) > 3 else None), _span(c, self.file))
  def _body(self, c):
    lb = next(x for x in c if isinstance(x, Token) and x.type == "LBRACE")
    launches = next((x.v for x in c if isinstance(x, _Val)), None)
    return tuple(x for x in c if not isinstance(x, (Token, _Val))), (lb.line, lb.column), launches
  def expect(self, c):
    tol: dict = {}
    for t in c[4:]:
      (k, v), sp = t.v, t.span
      if k in tol: self._err("syntax", f"`{k}` is given twice", sp)
      elif c[2].type != "APPROX": self._err("syntax", f"`{k}` takes `~=` (an `==` expect compares exactly)", sp)
      elif not 0 <= v < float("inf"): self._err("syntax", f"`{k}` is a tolerance: at least 0 and finite", sp)
      tol[k] = v
    return Expect(c[1].v, c[3], c[2].type == "APPROX", tol.get("rtol"), tol.get("atol"), span=_span(c, self.file))

  # ---- statements
  def sigref(self, c):
    name = c[0].value if len(c) == 1 else timeline_of(c[0].value)
    return _Val(Ref(name), _span(c, self.file))
  def varref(self, c):
    name = c[0].value if len(c) == 1 else epoch_of(c[0].value)
    return _Val(Ref(name), _span(c, self.file))
  def expr_const(self, c): return _Val(Expr(None, self._int(c[0])), _span(c, self.file))
  def expr_var(self, c): return _Val(Expr(c[0].v, 0), _span(c, self.file))
  def expr_add(self, c): return _Val(Expr(c[0].v, self._int(c[2])), _span(c, self.file))
  def expr_sub(self, c): return _Val(Expr(c[0].v, -self._int(c[2])), _span(c, self.file))
  def arg_op(self, c):
    n = self._int(c[2])
    return _Val(Expr(Ref(c[0].value), n if c[1].type == "PLUS" else -n), _span(c, self.file))
  def arg_epoch(self, c):
    n = self._int(c[4]) if len(c) > 4 else 0
    return _Val(Expr(Ref(epoch_of(c[0].value)), -n if len(c) > 4 and c[3].type == "MINUS" else n), _span(c, self.file))
  def wait(self, c): return Wait(c[1].v, c[3].v, span=_span(c, self.file))
  def signal(self, c): return SignalWrite(c[1].v, c[3].v, span=_span(c, self.file))
  def dim3(self, c):
    dims = [x.v.offset if x.v.var is None else x.v for x in c if isinstance(x, _Val)]
    if len(dims) > 3: self._err("syntax", "grid and block take at most 3 dimensions", _span(c, self.file))
    return _Val(tuple((dims + [1, 1])[:3]), _span(c, self.file), False)
  def exec(self, c):
    args = tuple(x.v for x in c if isinstance(x, _Val) and isinstance(x.v, (Slice, Expr)))
    grid = block = None
    for i, x in enumerate(c):
      if isinstance(x, Token) and x.type == "GRID": grid = c[i + 1].v
      if isinstance(x, Token) and x.type == "BLOCK": block = c[i + 1].v
    return Exec(Ref(c[1].value), args, grid, block, span=_span(c, self.file))
  def copy(self, c): return Copy(c[1].v, c[3].v, span=_span(c, self.file))
  def write(self, c): return Write(c[1].v, c[3].v, span=_span(c, self.file))
  def host_write(self, c): return HostWrite(c[1].v, tuple(x for x in c[3:] if isinstance(x, Data)), span=_span(c, self.file))
  def poll(self, c):
    mask = self._int(c[3]) if c[2].type == "AMP" else U32_MAX
    return Poll(c[1].v, mask, c[-1].v, span=_span(c, self.file))
  def barrier(self, c): return Barrier(span=_span(c, self.file))
  def timestamp(self, c): return Timestamp(c[1].v, span=_span(c, self.file))
  def epoch(self, c): return Epoch(span=_span(c, self.file))
  def submit(self, c):
    qs = tuple(Ref(x.value) for x in c if x.type == "NAME")
    return Submit(qs, span=_span(c, self.file))
  def slice(self, c):
    ref = Ref(c[0].value)
    launch = None
    if len(c) > 1 and c[1].type == "AT":   # `x@k`: a rebound buffer's launch-k memory
      launch, c = self._int(c[2]), [c[0]] + list(c[3:])
      if len(c) == 1: return _Val(Slice(ref, launch=launch), _span([c[0]], self.file))
    if len(c) == 1: return _Val(Slice(ref), _tok_span(c[0], self.file))
    colon = next(i for i, x in enumerate(c) if x.type == "COLON")
    start = self._int(c[2], sized=True) if colon == 3 else None
    end = self._int(c[colon + 1], sized=True) if c[colon + 1].type == "NUMBER" else None
    return _Val(Slice(ref, start, end, True, launch), _span(c, self.file))

@attrs.frozen
class _Val:
  """A parsed value with the position it was written at, for the statement that holds it."""
  v: Any   # an int or float, Expr, Ref, Slice or dims
  span: Span
  is_float: bool = False

# ---- syntax errors in words

_WORDS = {"TOL": "`rtol` or `atol`", "NAME": "a name", "NUMBER": "a number", "FLOAT": "a number", "STRING": "a string", "_NL": "end of line",
          "$END": "end of input", "SEMI": "`;`", "EQ": "`=`", "EQEQ": "`==`", "APPROX": "`~=`", "GE": "`>=`",
          "ARROW": "`<-`", "LT": "`<`", "GT": "`>`", "COLON": "`:`", "AT": "`@`",
          "DOTDOT": "`..`", "LAUNCHES": "`launches`", "COMMA": "`,`", "DOT": "`.`", "PLUS": "`+`",
          "MINUS": "`-`", "LPAR": "`(`", "RPAR": "`)`", "LSQB": "`[`", "RSQB": "`]`", "LBRACE": "`{`",
          "RBRACE": "`}`", "HOST": "`host`", "ENGINE": "`compute` or `copy`", "MODE": "a parameter mode (`in`, `out`, `inout`)",
          "SCALAR": "a scalar type (`i32`, `u32`)", "PERLAUNCH": "`rebound` or `rewritten`",
          "GRID": "`grid`", "BLOCK": "`block`", "WRITE": "`write`", "POLL": "`poll`", "AMP": "`&`", "CODE": "`code`", "COMMENT": "a comment"}
_STMT_KW = {"WAIT", "SIGNAL", "EXEC", "COPY", "WRITE", "POLL", "BARRIER", "TIMESTAMP", "EPOCH", "SUBMIT"}
_DECL_KW = {"DEVICE", "BUFFER", "SIGNAL", "VAR", "KERNEL", "QUEUE", "HOST", "EXPECT"}
# the name that follows a keyword, for "after the signal name"
_ROLE = {"wait": "the signal name", "signal": "the signal name", "timestamp": "the signal name",
         "exec": "the kernel name", "copy": "the buffer name", "write": "the buffer name", "poll": "the buffer name", "device": "the device name",
         "buffer": "the buffer name", "var": "the var name", "kernel": "the kernel name", "queue": "the queue name",
         "on": "the device name", "submit": "the queue name", "expect": "the buffer name", "in": "the parameter name",
         "out": "the parameter name", "inout": "the parameter name", "builtin": "the built-in kernel name"}

_RULE_ROLE = {"param_scalar": "the parameter", "arg_op": "the argument", "arg_epoch": "the argument","place": "the device name",
              "sigref": "the signal name", "varref": "the var name", "expr_const": "the value",
              "expr_var": "the value", "expr_add": "the value", "expr_sub": "the value", "param": "the parameter",
              "impl_builtin": "the implementation", "impl_c": "the implementation", "impl_amd": "the implementation",
              "data": "the values", "dim3": "the dimensions", "value": "the value", "launches": "the launches"}

def _word(term: str) -> str:
  if term in _WORDS: return _WORDS[term]
  return f"`{term.lower()}`" if term.isidentifier() and not term.startswith("_") else term

def _expected(terms, after_separator=False) -> str:
  terms = set(terms) - {"COMMENT"}
  if after_separator: terms -= {"SEMI", "_NL"}
  if {"DOT"} < terms: terms.discard("DOT")  # `s.timeline` is a detail when something else was expected
  if len(terms & _STMT_KW) >= 4: terms = (terms - _STMT_KW) | {"a statement (`wait`, `signal`, `exec`, `copy`, ...)"}
  if len(terms & _DECL_KW) >= 4: terms = (terms - _DECL_KW) | {"a declaration (`device`, `buffer`, `signal`, `queue`, ...)"}
  words = sorted({_word(t) if t.isupper() or t.startswith(("_", "$")) else t for t in terms}, key=lambda w: (w.startswith("a "), w))
  if not words: return "something else"
  return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]

def _describe(stack) -> Optional[str]:
  if not stack: return None
  last = stack[-1]
  if isinstance(last, Token):
    prev = stack[-2] if len(stack) >= 2 and isinstance(stack[-2], Token) else None
    if last.type == "NAME" and prev is not None and prev.value in _ROLE: return _ROLE[prev.value]
    if last.type == "NAME" and prev is not None and prev.type in ("LPAR", "COMMA"): return "the argument"
    if last.type == "_NL": return None
    return f"`{last.value}`"
  if isinstance(last, Tree):
    if last.data == "slice": return "the byte range" if len(last.children) > 1 else "the buffer name"
    return _RULE_ROLE.get(last.data)
  return None

_DECL_ONLY = {"DEVICE", "BUFFER", "VAR", "KERNEL", "QUEUE", "HOST", "EXPECT"}  # keywords that start a declaration only

def _syntax_diag(e: UnexpectedInput, file: str) -> Diagnostic:
  if isinstance(e, UnexpectedCharacters):
    line, col = e.line, e.column
    ch = e.char
    span = Span(file, line, col, line, col + 1)
    if ch == '"': return Diagnostic("syntax", "unterminated string", span)
    return Diagnostic("syntax", f"unexpected character `{ch}`", span)
  tok = getattr(e, "token", None)
  stack = []
  ip = getattr(e, "interactive_parser", None)
  if ip is not None: stack = list(ip.parser_state.value_stack)
  after = _describe(stack)
  try: acc = ip.accepts() if ip is not None else set()
  except Exception: acc = set()  # accepts() replays the parser; the plain expected set is the fallback
  sep = bool(stack) and isinstance(stack[-1], Token) and stack[-1].type in ("_NL", "SEMI")
  want = set(acc or getattr(e, "expected", None) or ())
  if after == "the argument": want -= {"PLUS", "MINUS", "LSQB", "DOT", "AT"}  # `a + 1`, `a[0:4]`, `x@1`: details of an argument
  exp = _expected(want, sep)
  lbrace = next((t for t in reversed(stack) if isinstance(t, Token) and t.type == "LBRACE"), None)
  if lbrace is not None and (tok is None or tok.type == "$END" or tok.type in _DECL_ONLY):
    # a block left open: point at its `{` (where the fix goes is somewhere after it), not at what came next
    related: tuple[Related, ...] = ()
    if tok is None or tok.type == "$END": where = "the end of the file"
    else: where, related = f"`{tok.value}` at line {tok.line}", (Related(f"`{tok.value}` starts the next declaration here", _tok_span(tok, file)),)
    return Diagnostic("syntax", f"this `{{` is never closed: a `}}` is missing before {where}", _tok_span(lbrace, file), related=related)
  if tok is None or tok.type == "$END":
    line, col = (stack[-1].end_line or 0, stack[-1].end_column or 0) if stack and isinstance(stack[-1], Token) else (e.line, e.column)
    return Diagnostic("syntax", f"expected {exp} before the end of the file", Span(file, max(line, 1), max(col, 1), max(line, 1), max(col, 1) + 1))
  span = _tok_span(tok, file)
  if tok.type == "_NL":
    found = "end of line"
    span = Span(file, tok.line, tok.column, tok.line, tok.column + 1)
  else: found = f"`{tok.value}`"
  if tok.type not in ("_NL", "NAME", "NUMBER", "FLOAT", "STRING") and tok.value.isidentifier() and "NAME" in (getattr(e, "expected", None) or ()):
    return Diagnostic("syntax", f"`{tok.value}` is a keyword and cannot be used as a name", span)
  known = tok.type == "NAME" and tok.value in DTYPES   # (a word of the language, just not one allowed here)
  hint = did_you_mean(tok.value, _keywords(acc or getattr(e, "expected", None) or ())) if tok.type == "NAME" and not known else ""
  return Diagnostic("syntax", f"expected {exp}{f' after {after}' if after else ''}, found {found}{hint}", span)

# the words of the terminals that are keywords, for "did you mean `wait`?"
_KEYWORD_TERMS = {"ENGINE": ("compute", "copy"), "MODE": ("in", "out", "inout"), "SCALAR": ("i32", "u32"),
                  "PERLAUNCH": ("rebound", "rewritten"), "HOST": ("host",), "GRID": ("grid",), "BLOCK": ("block",), "WRITE": ("write",),
                  "POLL": ("poll",), "CODE": ("code",), "LAUNCHES": ("launches",),
                  "TOL": ("rtol", "atol")}

def _keywords(terms) -> list:
  return [w for t in terms for w in _KEYWORD_TERMS.get(t, (t.lower(),) if t.lower() in KEYWORDS else ())]

# ---- the parser

_GRAMMAR = (pathlib.Path(__file__).parent / "grammar.lark").read_text() + "".join(
  f"{name}: /{rx}/\n" for name, rx in TERMINALS.items())
_parser: Optional[Lark] = None

def lark_parser() -> Lark:
  """The parser, built once; it keeps no state between parses (comments are found by `lexical.comments`)."""
  global _parser
  if _parser is None:
    _parser = Lark(_GRAMMAR, parser="lalr", lexer="contextual", keep_all_tokens=True, maybe_placeholders=False, cache=False)
  return _parser

@attrs.frozen
class _Comment:
  line: int
  column: int
  value: str

def _comments(text: str) -> list:
  out, line, at = [], 1, 0   # the line of offset `at`
  for pos, value in comments(text):
    line += text.count("\n", at, pos)
    at = pos
    out.append(_Comment(line, pos - text.rfind("\n", 0, pos), value))
  return out

def _parse_once(text: str, file: str):
  b = _Build(file)
  items = b.transform(lark_parser().parse(text))
  return items, b, _comments(text) if "#" in text else []

def parse_grammar(text: str, file: str) -> tuple[Optional[Program], list[Diagnostic]]:
  """`text` (line ends `\\n`, no control characters) parsed by the grammar: the program, or None and its `syntax`
  errors (up to 20, recovering by blanking each bad line)."""
  diags: list[Diagnostic] = []
  lines = text.split("\n")
  work = text
  last_pos = (0, 0)
  for _ in range(20):  # recover from a syntax error by blanking its line and parsing again
    try:
      items, b, found = _parse_once(work, file)
    except UnexpectedInput as e:
      d = _syntax_diag(e, file)
      pos = _pos(d)
      if pos <= last_pos and diags: break
      diags.append(d)
      last_pos = pos
      ln = pos[0]
      if not 1 <= ln <= len(lines) or any(ch in lines[ln - 1] for ch in "{}\"") or isinstance(e, UnexpectedEOF): break
      wl = work.split("\n")
      wl[ln - 1] = ""
      work = "\n".join(wl)
      continue
    except VisitError as e:  # a bug of ours, but still never a traceback on user input
      diags.append(Diagnostic("syntax", f"could not read the program: {e.orig_exc}", Span(file, 1, 1, 1, 2)))
      return None, diags
    if diags: return None, diags
    diags.extend(b.diags)
    prog = resolve_var_args(Program(tuple(items), file=file, source=text))
    if found: prog = _attach_comments(prog, found, lines, b.lbraces)
    return prog, diags
  return None, diags


# ---- comments: found by lexical.comments, attached to the node they precede or end the line of

def _attach_comments(prog: Program, comments: list, lines: list, lbraces: dict) -> Program:
  anchors: list = []     # ((line, col), path, role) for own-line comments
  trailing: dict = {}    # line -> [(end_col, path, role)]
  def trail(line, col, path, role): trailing.setdefault(line, []).append((col, path, role))
  for i, d in enumerate(prog.decls):
    s = d.span
    anchors.append(((s.line, s.column), (i,), "comments"))
    if isinstance(d, (Queue, Host)):
      lb = lbraces.get((s.line, s.column), (s.line, s.column))
      trail(lb[0], lb[1] + 1, (i,), "comment")
      for j, st in enumerate(d.body):
        anchors.append(((st.span.line, st.span.column), (i, j), "comments"))
        trail(st.span.end_line, st.span.end_column, (i, j), "comment")
      anchors.append(((s.end_line, s.end_column - 1), (i,), "end_comments"))
      trail(s.end_line, s.end_column, (i,), "end_comment")
    else: trail(s.end_line, s.end_column, (i,), "comment")
  anchors.sort(key=lambda a: a[0])
  keys = [a[0] for a in anchors]
  edits: dict = {}
  for c in comments:
    text = c.value.rstrip()
    if lines[c.line - 1][:c.column - 1].strip() == "":
      k = bisect.bisect_left(keys, (c.line, c.column))
      if k == len(anchors):
        edits.setdefault((), {}).setdefault("end_comments", []).append(text)
        continue
      _, path, role = anchors[k]
      edits.setdefault(path, {}).setdefault(role, []).append(text)
    else:
      cands = [t for t in trailing.get(c.line, []) if t[0] <= c.column]
      if not cands: continue
      _, path, role = max(cands, key=lambda t: t[0])
      edits.setdefault(path, {})[role] = text
  def fix(node, path):
    e = edits.get(path)
    if not e: return node
    return attrs.evolve(node, **{k: tuple(v) if isinstance(v, list) else v for k, v in e.items()})
  decls = list(prog.decls)
  for i, d in enumerate(decls):
    if isinstance(d, (Queue, Host)) and any(len(p) == 2 and p[0] == i for p in edits):
      d = attrs.evolve(d, body=tuple(fix(st, (i, j)) for j, st in enumerate(d.body)))
    decls[i] = fix(d, (i,))
  out = attrs.evolve(prog, decls=tuple(decls))
  return fix(out, ())
