"""The LSP features of `hcqdsl lsp` (`serve`): diagnostics as you type (`check`'s, in a worker process, `delay`
seconds after the last edit), hover, go to definition, find references, document symbols, quick fixes and formatting
(= `hcqdsl fmt`), registered on editor/server.py's server."""
from __future__ import annotations
import asyncio
from typing import Optional
from lsprotocol import types as T
from ..ir import Device, Buffer, Signal, Var, Kernel, Queue, Host, split_lines, launches_text
from .names import Pos, Range, KINDS
from .server import HcqServer, DELAY

__all__ = ["serve", "register"]

_SYMBOL = {Device: T.SymbolKind.Module, Buffer: T.SymbolKind.Array, Signal: T.SymbolKind.Event, Var: T.SymbolKind.Variable,
           Kernel: T.SymbolKind.Function, Queue: T.SymbolKind.Class, Host: T.SymbolKind.Namespace}

def _lines(ls: HcqServer, uri: str) -> list[str]: return split_lines(ls.text(uri)[1])

def _server_pos(ls: HcqServer, uri: str, p: T.Position) -> Pos:
  lines = _lines(ls, uri)
  if p.line < len(lines) and not lines[p.line].isascii():
    sp = ls.workspace.position_codec.position_from_client_units(lines, p)
    return Pos(sp.line, sp.character)
  return Pos(p.line, p.character)

def serve(delay: float = DELAY) -> HcqServer:
  """The server with its features registered (`.start_io()` runs it on stdin and stdout)."""
  server = HcqServer(delay)
  register(server)
  return server

def register(ls: HcqServer) -> None:
  _sync(ls)
  _navigation(ls)
  _editing(ls)

def _sync(ls: HcqServer) -> None:
  @ls.feature(T.TEXT_DOCUMENT_DID_OPEN)
  def did_open(ls: HcqServer, params: T.DidOpenTextDocumentParams):
    old = ls.docs.pop(params.text_document.uri, None)   # (opened again: versions start over)
    if old is not None and old.timer is not None: old.timer.cancel()
    ls.schedule(params.text_document.uri, 0)

  @ls.feature(T.TEXT_DOCUMENT_DID_CHANGE)
  def did_change(ls: HcqServer, params: T.DidChangeTextDocumentParams):
    ls.record(params.text_document.uri, params.text_document.version, params.content_changes)
    ls.schedule(params.text_document.uri, ls.delay)

  @ls.feature(T.TEXT_DOCUMENT_DID_SAVE)
  def did_save(ls: HcqServer, params: T.DidSaveTextDocumentParams):
    ls.schedule(params.text_document.uri, 0)

  @ls.feature(T.TEXT_DOCUMENT_DID_CLOSE)
  def did_close(ls: HcqServer, params: T.DidCloseTextDocumentParams):
    doc = ls.docs.pop(params.text_document.uri, None)
    if doc is not None and doc.timer is not None: doc.timer.cancel()
    ls.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))

  @ls.feature(T.INITIALIZED)
  async def initialized(ls: HcqServer, params: T.InitializedParams):
    await ls.checker.start()   # the worker's start-up (an interpreter, the checker's imports) before the first file

  @ls.feature(T.SHUTDOWN)
  async def shutdown(ls: HcqServer, params):
    await ls.checker.close()

class _Edited(Exception):
  """What an answer needs is on a line edited since the parse it was computed from."""

async def _answer(ls: HcqServer, uri: str, position: Optional[T.Position], compute):
  """`await compute(parsed, pos, to_client)`: from the latest parse, its lines mapped to the text now (while the
  user types, the parse of a big program is a keystroke or two behind); from a parse of the text now when the
  position, or a range of the answer (`to_client` raises _Edited), is on a line edited since."""
  for fresh in (False, True):
    parsed = await ls.parsed(uri, fresh)
    if parsed.names is None: return None
    pos = Pos(0, 0)
    if position is not None:
      now = _server_pos(ls, uri, position)
      line = ls.to_parse(uri, parsed, now.line)
      if line is None: continue
      pos = Pos(line, now.column)
    def to_client(r, parsed=parsed) -> T.Range:
      a, b = ls.to_now(uri, parsed, r.start.line), ls.to_now(uri, parsed, r.end.line)
      if a is None or b is None: raise _Edited
      got = ls.range(parsed.names.lines, r)
      return T.Range(start=T.Position(line=a, character=got.start.character), end=T.Position(line=b, character=got.end.character))
    try: return await compute(parsed, pos, to_client)
    except _Edited: continue
  return None

def _navigation(ls: HcqServer) -> None:
  @ls.feature(T.TEXT_DOCUMENT_HOVER)
  async def hover(ls: HcqServer, params: T.HoverParams) -> Optional[T.Hover]:
    uri = params.text_document.uri
    async def compute(parsed, pos, to_client):
      from .hover import hover_name, hover_statement
      names = parsed.names
      occ = names.at(pos)
      if occ is not None: text, where = hover_name(names, occ.name, parsed.target), to_client(occ.range)
      else:
        node = names.node_at(pos)
        if node is None or type(node) in KINDS or type(node) is Host: return None
        img, err = await ls.image(uri, parsed)
        text, where = hover_statement(names, node, img, err), None
      return T.Hover(contents=T.MarkupContent(kind=T.MarkupKind.Markdown, value=text), range=where) if text is not None else None
    return await _answer(ls, uri, params.position, compute)

  @ls.feature(T.TEXT_DOCUMENT_DEFINITION)
  async def definition(ls: HcqServer, params: T.DefinitionParams) -> Optional[T.Location]:
    uri = params.text_document.uri
    async def compute(parsed, pos, to_client):
      occ = parsed.names.at(pos)
      decl = parsed.names.declaration(occ.name) if occ is not None else None
      return T.Location(uri=uri, range=to_client(decl.range)) if decl is not None else None
    return await _answer(ls, uri, params.position, compute)

  @ls.feature(T.TEXT_DOCUMENT_REFERENCES)
  async def references(ls: HcqServer, params: T.ReferenceParams) -> Optional[list[T.Location]]:
    uri = params.text_document.uri
    async def compute(parsed, pos, to_client):
      occ = parsed.names.at(pos)
      if occ is None: return None
      found = await asyncio.get_running_loop().run_in_executor(None, parsed.names.references, occ.name, params.context.include_declaration)
      return [T.Location(uri=uri, range=to_client(o.range)) for o in found]
    return await _answer(ls, uri, params.position, compute)

  @ls.feature(T.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
  async def symbols(ls: HcqServer, params: T.DocumentSymbolParams) -> Optional[list[T.DocumentSymbol]]:
    async def compute(parsed, pos, to_client): return _symbols(parsed.names, to_client)
    return await _answer(ls, params.text_document.uri, None, compute)

def _symbols(names, to_client) -> list[T.DocumentSymbol]:
  from ..lang.format import format_decl
  out = []
  for d in names.program.decls:
    kind = _SYMBOL.get(type(d))
    if kind is None or d.span is None: continue
    s = d.span
    full = to_client(Range(Pos(s.line - 1, s.column - 1), Pos(s.end_line - 1, s.end_column - 1)))
    # a block's `launches` clause is in its detail (`launches 2..`): which block runs when, at a glance
    clause = f", launches {launches_text(d.launches)}" if type(d) in (Queue, Host) and d.launches is not None else ""
    if type(d) is Host: name, detail, sel = "host", f"{len(d.body)} statements{clause}", full
    else:
      occ = next((o for o in names.occurrences(d) if o.definition), None)
      sel = to_client(occ.range) if occ is not None else full
      name = d.name
      detail = (f"{d.engine} on {d.device.name}, {len(d.body)} statement{'s' * (len(d.body) != 1)}{clause}" if type(d) is Queue
                else format_decl(d)[:120])
    out.append(T.DocumentSymbol(name=name, kind=kind, range=full, selection_range=sel, detail=detail))
  return out

def _editing(ls: HcqServer) -> None:
  @ls.feature(T.TEXT_DOCUMENT_CODE_ACTION, T.CodeActionOptions(code_action_kinds=[T.CodeActionKind.QuickFix]))
  def code_action(ls: HcqServer, params: T.CodeActionParams) -> Optional[list[T.CodeAction]]:
    uri = params.text_document.uri
    doc = ls.docs.get(uri)
    version, text = ls.text(uri)
    if doc is None or doc.checked is None or doc.checked["version"] != version: return None   # (edits of an older text)
    lines = split_lines(text)
    want = params.range
    out = []
    for d in doc.checked["diagnostics"]:
      diag = ls.diagnostic(uri, lines, d)
      if diag.range.end.line < want.start.line or diag.range.start.line > want.end.line: continue   # (the lines: a cursor on one)
      for f in d.get("fixes", ()):
        edits = [T.TextEdit(range=ls.range(lines, (a, b)), new_text=t) for a, b, t in f["changes"]]
        out.append(T.CodeAction(title=f["title"], kind=T.CodeActionKind.QuickFix, diagnostics=[diag], is_preferred=f["preferred"] or None,
                                edit=T.WorkspaceEdit(changes={uri: edits})))
    return out

  @ls.feature(T.TEXT_DOCUMENT_FORMATTING)
  async def formatting(ls: HcqServer, params: T.DocumentFormattingParams) -> Optional[list[T.TextEdit]]:
    uri = params.text_document.uri
    _, text = ls.text(uri)
    new, err = await asyncio.get_running_loop().run_in_executor(None, _format, text, ls.doc(uri).path)
    if new is None:
      ls.window_show_message(T.ShowMessageParams(type=T.MessageType.Warning, message=err or "cannot format"))
      return None
    if new == text: return []
    lines = split_lines(text)
    end = ls.pos(lines, (len(lines) - 1, len(lines[-1])))
    return [T.TextEdit(range=T.Range(start=T.Position(line=0, character=0), end=end), new_text=new)]

def _format(text: str, path: str) -> tuple[Optional[str], Optional[str]]:
  """`hcqdsl fmt`'s text for `text`, or why it is left as it is (its errors)."""
  from ..check import parse_with_diagnostics
  from ..lang.format import format_program
  prog, diags = parse_with_diagnostics(text, path)
  errs = [d for d in diags if d.severity == "error"]
  if prog is None or errs:
    first = f": {errs[0].span.line}:{errs[0].span.column}: {errs[0].message}" if errs and errs[0].span else ""
    return None, f"hcqdsl fmt: cannot format {path}: {len(errs) or 1} error{'s' * (len(errs) > 1)}{first}"
  new = format_program(prog)
  return ("\ufeff" + new if text.startswith("\ufeff") else new), None
