"""The LSP features of `hcqdsl lsp` (`serve`): diagnostics as you type (`check`'s, in a worker process, `delay`
seconds after the last edit), hover, go to definition, find references, document symbols, quick fixes and formatting
(= `hcqdsl fmt`), registered on editor/server.py's server."""
from __future__ import annotations
import asyncio
from typing import Optional
from lsprotocol import types as T
from ..ir import Device, Buffer, Signal, Var, Kernel, Queue, Host, split_lines
from .names import Pos, KINDS
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
    ls.schedule(params.text_document.uri, ls.delay)

  @ls.feature(T.TEXT_DOCUMENT_DID_SAVE)
  def did_save(ls: HcqServer, params: T.DidSaveTextDocumentParams):
    ls.schedule(params.text_document.uri, 0)

  @ls.feature(T.TEXT_DOCUMENT_DID_CLOSE)
  def did_close(ls: HcqServer, params: T.DidCloseTextDocumentParams):
    doc = ls.docs.pop(params.text_document.uri, None)
    if doc is not None and doc.timer is not None: doc.timer.cancel()
    ls.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))

  @ls.feature(T.SHUTDOWN)
  async def shutdown(ls: HcqServer, params):
    await ls.checker.close()

def _navigation(ls: HcqServer) -> None:
  @ls.feature(T.TEXT_DOCUMENT_HOVER)
  async def hover(ls: HcqServer, params: T.HoverParams) -> Optional[T.Hover]:
    from .hover import hover_name, hover_statement
    uri = params.text_document.uri
    parsed = await ls.parsed(uri)
    if parsed.names is None: return None
    names, pos = parsed.names, _server_pos(ls, uri, params.position)
    occ = names.at(pos)
    if occ is not None: text, where = hover_name(names, occ.name, parsed.target), occ.range
    else:
      node = names.node_at(pos)
      if node is None or type(node) in KINDS or type(node) is Host: return None
      img, err = await ls.image(uri, parsed)
      text, where = hover_statement(names, node, img, err), None
    if text is None: return None
    rng = ls.range(names.lines, where) if where is not None else None
    return T.Hover(contents=T.MarkupContent(kind=T.MarkupKind.Markdown, value=text), range=rng)

  @ls.feature(T.TEXT_DOCUMENT_DEFINITION)
  async def definition(ls: HcqServer, params: T.DefinitionParams) -> Optional[T.Location]:
    uri = params.text_document.uri
    parsed = await ls.parsed(uri)
    if parsed.names is None: return None
    occ = parsed.names.at(_server_pos(ls, uri, params.position))
    decl = parsed.names.declaration(occ.name) if occ is not None else None
    return T.Location(uri=uri, range=ls.range(parsed.names.lines, decl.range)) if decl is not None else None

  @ls.feature(T.TEXT_DOCUMENT_REFERENCES)
  async def references(ls: HcqServer, params: T.ReferenceParams) -> Optional[list[T.Location]]:
    uri = params.text_document.uri
    parsed = await ls.parsed(uri)
    if parsed.names is None: return None
    names = parsed.names
    occ = names.at(_server_pos(ls, uri, params.position))
    if occ is None: return None
    found = await asyncio.get_running_loop().run_in_executor(None, names.references, occ.name, params.context.include_declaration)
    return [T.Location(uri=uri, range=ls.range(names.lines, o.range)) for o in found]

  @ls.feature(T.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
  async def symbols(ls: HcqServer, params: T.DocumentSymbolParams) -> Optional[list[T.DocumentSymbol]]:
    uri = params.text_document.uri
    parsed = await ls.parsed(uri)
    if parsed.names is None: return None
    return _symbols(ls, parsed.names)

def _symbols(ls: HcqServer, names) -> list[T.DocumentSymbol]:
  from ..lang.format import format_decl
  out = []
  for d in names.program.decls:
    kind = _SYMBOL.get(type(d))
    if kind is None or d.span is None: continue
    s = d.span
    full = ls.range(names.lines, (Pos(s.line - 1, s.column - 1), Pos(s.end_line - 1, s.end_column - 1)))
    if type(d) is Host: name, detail, sel = "host", f"{len(d.body)} statements", full
    else:
      occ = next((o for o in names.occurrences(d) if o.definition), None)
      sel = ls.range(names.lines, occ.range) if occ is not None else full
      name = d.name
      detail = (f"{d.engine} on {d.device.name}, {len(d.body)} statement{'s' * (len(d.body) != 1)}" if type(d) is Queue
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
      if (diag.range.end.line, diag.range.end.character) < (want.start.line, want.start.character) or \
         (diag.range.start.line, diag.range.start.character) > (want.end.line, want.end.character): continue
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
