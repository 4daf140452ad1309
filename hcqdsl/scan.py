"""The parser's fast path: a line scanner for programs written one declaration or statement per line (what the
formatter prints and generators emit). It builds exactly the IR — spans and comments included — that the lark
grammar builds, and gives up (returns None) on anything else, which the grammar then parses and diagnoses.
`tests/test_syntax.py` holds the two paths equal on generated programs."""
from __future__ import annotations
import gc, re
import attrs
from typing import Optional
from .ir import (Span, Ref, Expr, Slice, Param, Device, Buffer, Signal, Var, Kernel, Wait, SignalWrite, Exec, Copy,
                 Barrier, Timestamp, Epoch, Submit, Queue, Host, Program, KEYWORDS, U32_MAX)

__all__ = ["scan"]

_W = r"[ \t]*"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_NUM = r"(?:0[xX][0-9A-Fa-f_]+|[0-9][0-9_]*)(?![A-Za-z0-9_.])"      # no size suffix: those lines take the grammar
_SNUM = r"(?:0[xX][0-9A-Fa-f_]+|[0-9][0-9_]*)[KMG]?(?![A-Za-z0-9_.])"
_EXPR = rf"(?P<e>(?P<n>{_NUM})|(?P<v>{_NAME}(?:\.epoch)?)(?:{_W}(?P<op>[+-]){_W}(?P<k>{_NUM}))?)"
_SIG = rf"(?P<s>{_NAME}(?:\.timeline)?)(?![A-Za-z0-9_.])"
_P = rf"(?:inout|in|out)[ \t]+{_NAME}"
_SLICE = re.compile(rf"({_NAME})(?:{_W}\[{_W}({_SNUM})?{_W}:{_W}({_SNUM})?{_W}\])?")
_STMT = {
  "wait": re.compile(rf"wait[ \t]+{_SIG}{_W}>={_W}{_EXPR}{_W}$"),
  "signal": re.compile(rf"signal[ \t]+{_SIG}{_W}={_W}{_EXPR}{_W}$"),
  "timestamp": re.compile(rf"timestamp[ \t]+{_SIG}{_W}$"),
  "barrier": re.compile(rf"barrier{_W}$"),
  "epoch": re.compile(rf"epoch{_W}$"),
}
_EXEC = re.compile(rf"exec[ \t]+({_NAME}){_W}\(([^()]*)\)")
_DIM = re.compile(rf"{_W}(grid|block){_W}\({_W}({_NUM}){_W},{_W}({_NUM}){_W},{_W}({_NUM}){_W}\)")
_COPY = re.compile(rf"copy[ \t]+")
_ARROW = re.compile(rf"{_W}<-{_W}")
_SUBMIT = re.compile(rf"submit(?:[ \t]+({_NAME}(?:{_W},{_W}{_NAME})*))?{_W}$")
_QUEUE = re.compile(rf"queue[ \t]+({_NAME})[ \t]+(compute|copy)[ \t]+on[ \t]+({_NAME}){_W}\{{{_W}$")
_HOST = re.compile(rf"host{_W}\{{{_W}$")
_DECL = {
  "device": re.compile(rf"device[ \t]+({_NAME}){_W}={_W}({_NAME}){_W}:{_W}({_NUM})(?:[ \t]+({_NAME}))?{_W}$"),
  "buffer": re.compile(rf"buffer[ \t]+({_NAME})[ \t]+on[ \t]+({_NAME})[ \t]+size[ \t]+({_SNUM}){_W}$"),
  "signal": re.compile(rf"signal[ \t]+({_NAME})[ \t]+on[ \t]+({_NAME})(?:{_W}={_W}({_NUM}))?{_W}$"),
  "var": re.compile(rf"var[ \t]+({_NAME}){_W}$"),
  "kernel": re.compile(rf"kernel[ \t]+({_NAME}){_W}\(((?:{_W}{_P}(?:{_W},{_W}{_P})*(?:{_W},)?)?){_W}\){_W}$"),
}
_PARAM = re.compile(rf"(inout|in|out)[ \t]+({_NAME})")
_SUF = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

class _GiveUp(Exception): pass

def _int(s: str) -> int:
  s = s.replace("_", "")
  if s[-1] in _SUF: return int(s[:-1], 0) * _SUF[s[-1]]
  return int(s, 0)

def scan(text: str, file: str) -> Optional[Program]:
  if "\r" in text or "\f" in text or "\v" in text or '"' in text or ";" in text: return None
  enabled = gc.isenabled()
  gc.disable()  # millions of small immutable objects and no cycles: the collector would only re-scan them
  try: return _Scan(file).run(text)
  except (_GiveUp, ValueError): return None
  finally:
    if enabled: gc.enable()

class _Scan:
  def __init__(self, file: str):
    self.file = file
    self.refs: dict = {}     # sub-nodes are values: one object per distinct text, shared by every statement
    self.exprs: dict = {}
    self.slices: dict = {}
    self.args: dict = {}

  def _ref(self, s: str) -> Ref:
    r = self.refs.get(s)
    if r is None:
      if s.partition(".")[0] in KEYWORDS: raise _GiveUp
      r = self.refs[s] = Ref(s)
    return r

  def _name(self, s: str) -> str:
    if s in KEYWORDS: raise _GiveUp
    return s

  def run(self, text: str) -> Program:
    f = self.file
    decls: list = []
    pending: list = []          # own-line comments waiting for the node they precede
    block = None                # [header args..., body list] of the open queue/host
    for ln, raw in enumerate(text.split("\n"), 1):
      hp = raw.find("#")
      if hp < 0: code, comment = raw, None
      else: code, comment = raw[:hp], raw[hp:].rstrip(" \t")
      body = code.strip(" \t")
      if not body:
        if comment is not None: pending.append(comment)
        continue
      col = code.find(body[0]) + 1
      end = col + len(body)
      kw = body.partition(" ")[0]
      if block is not None:
        if body == "}":
          kind, name, engine, dev, hs, hcomment, hcomments, stmts = block
          span = Span(f, hs.line, hs.column, ln, end)
          if kind == "queue":
            node = Queue(name, engine, dev, tuple(stmts), span=span, comments=hcomments, comment=hcomment,
                         end_comments=tuple(pending), end_comment=comment)
          else:
            node = Host(tuple(stmts), span=span, comments=hcomments, comment=hcomment, end_comments=tuple(pending),
                        end_comment=comment)
          decls.append(node); pending = []; block = None
          continue
        if pending:
          block[7].append(self._stmt(kw, body, Span(f, ln, col, ln, end), tuple(pending), comment)); pending = []
        else: block[7].append(self._stmt(kw, body, Span(f, ln, col, ln, end), (), comment))
        continue
      if kw == "queue" or kw[:4] == "host":
        m = (_QUEUE if kw == "queue" else _HOST).match(body)
        if m is None: raise _GiveUp
        hs = Span(f, ln, col, ln, end)
        if kw == "queue":
          block = ["queue", self._name(m.group(1)), m.group(2), self._ref(m.group(3)),
                   hs, comment, tuple(pending), []]
        else: block = ["host", None, None, None, hs, comment, tuple(pending), []]
        pending = []
        continue
      node = self._decl(kw, body, Span(f, ln, col, ln, end))
      if pending or comment is not None: node = attrs.evolve(node, comments=tuple(pending), comment=comment); pending = []
      decls.append(node)
    if block is not None: raise _GiveUp
    return Program(tuple(decls), file=f, end_comments=tuple(pending), source=text)

  # ---- declarations
  def _decl(self, kw, body, span):
    rx = _DECL.get(kw)
    m = rx.match(body) if rx is not None else None
    if m is None: raise _GiveUp
    if kw == "device":
      arch = m.group(4)
      if arch is not None: self._name(arch)
      return Device(self._name(m.group(1)), self._name(m.group(2)), _int(m.group(3)), arch, span=span)
    if kw == "buffer":
      return Buffer(self._name(m.group(1)), None if m.group(2) == "host" else self._ref(m.group(2)), _int(m.group(3)), span=span)
    if kw == "signal":
      init = _int(m.group(3)) if m.group(3) else 0
      if init > U32_MAX: raise _GiveUp
      return Signal(self._name(m.group(1)), None if m.group(2) == "host" else self._ref(m.group(2)), init, span=span)
    if kw == "var": return Var(self._name(m.group(1)), span=span)
    params = [Param(p.group(1), self._name(p.group(2))) for p in _PARAM.finditer(m.group(2))]
    return Kernel(self._name(m.group(1)), tuple(params), None, span=span)

  # ---- statements
  def _stmt(self, kw, body, span, cs, c):
    rx = _STMT.get(kw)
    if rx is not None:
      m = rx.match(body)
      if m is None: raise _GiveUp
      if kw == "barrier": return Barrier(span=span, comments=cs, comment=c)
      if kw == "epoch": return Epoch(span=span, comments=cs, comment=c)
      sig = self._ref(m.group("s"))
      if kw == "timestamp": return Timestamp(sig, span=span, comments=cs, comment=c)
      e = self.exprs.get(m.group("e"))
      if e is None:
        n, vn, op, k = m.group("n", "v", "op", "k")
        if n is not None: e = Expr(None, _int(n))
        else: e = Expr(self._ref(vn), 0 if k is None else _int(k) * (1 if op == "+" else -1))
        if abs(e.offset) > U32_MAX: raise _GiveUp
        self.exprs[m.group("e")] = e
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
    if kw == "submit":
      m = _SUBMIT.match(body)
      if m is None: raise _GiveUp
      return Submit(tuple(self._ref(q) for q in re.findall(_NAME, m.group(1) or "")), span=span, comments=cs, comment=c)
    raise _GiveUp

  def _slice(self, body, pos):
    m = _SLICE.match(body, pos)
    if m is None: raise _GiveUp
    s = self.slices.get(m.group())
    if s is None:
      name, a, b = m.group(1, 2, 3)
      s = self.slices[m.group()] = Slice(self._ref(name), None if a is None else _int(a), None if b is None else _int(b),
                                         m.end() != m.end(1))
    return s, m.end()

  def _exec(self, body, span, cs, c):
    m = _EXEC.match(body)
    if m is None: raise _GiveUp
    kernel = self._ref(m.group(1))
    argtext = m.group(2)
    args = self.args.get(argtext)
    if args is None:
      pieces = argtext.split(",")
      if len(pieces) > 1 and not pieces[-1].strip(" \t"): pieces.pop()   # a trailing comma
      if len(pieces) == 1 and not pieces[0].strip(" \t"): pieces = []
      args = []
      for piece in pieces:
        if not piece.strip(" \t"): raise _GiveUp
        sl, end = self._slice(piece, len(piece) - len(piece.lstrip(" \t")))
        if piece[end:].strip(" \t"): raise _GiveUp
        args.append(sl)
      args = self.args[argtext] = tuple(args)
    pos, n = m.end(), len(body)
    dims = {}
    while pos < n:
      d = _DIM.match(body, pos)
      if d is None or d.group(1) in dims or (d.group(1) == "grid" and "block" in dims): raise _GiveUp
      dims[d.group(1)] = (_int(d.group(2)), _int(d.group(3)), _int(d.group(4)))
      pos = d.end()
    return Exec(kernel, args, dims.get("grid"), dims.get("block"), span=span, comments=cs, comment=c)
