"""The language server (`hcqdsl lsp`, stdio), on pygls: what it holds per document and how it checks and parses
them; its features (editor/features.py) answer from these. docs/editor.md says how to use it.

What runs where: the checking runs in editor/worker.py's process, one job at a time, killed when an edit makes it
stale; the parse that navigation, hover and symbols need runs in a thread of this process, once per version of a
document, and so does the compilation a statement's hover shows (once per version, when first asked)."""
from __future__ import annotations
import asyncio, json, sys
from concurrent.futures import ThreadPoolExecutor
from typing import Optional
from urllib.parse import urlparse, unquote
import attrs
from lsprotocol import types as T
from pygls.lsp.server import LanguageServer
from .. import __version__
from ..header import read_header, HeaderError
from ..ir import split_lines
from .names import Names, Pos
from .analysis import DELAY

__all__ = ["HcqServer", "Checker", "Parsed", "Doc", "uri_path", "DELAY"]


@attrs.define
class Parsed:
  version: int
  names: Optional[Names]   # None: the text does not parse at all (a binary file)
  target: Optional[str]

@attrs.define
class Doc:
  """What the server holds per open document beyond pygls's text: the latest parse, the latest check's diagnostics
  (plain data, editor/analysis.py) and the image a hover compiled."""
  uri: str
  path: str
  parsed: Optional[Parsed] = None
  parsing: Optional[tuple] = None       # (version, future)
  checked: Optional[dict] = None        # {"version": v, "diagnostics": [...]}
  image: Optional[tuple] = None         # (version, Image or None, error or None)
  timer: Optional[asyncio.TimerHandle] = None
  edits: list = attrs.field(factory=list)   # (version, its edits) since the latest parse: HcqServer.record

def uri_path(uri: str) -> str:
  u = urlparse(uri)
  return unquote(u.path) if u.scheme == "file" else uri

class Checker:
  """The worker process and its one job at a time: `check(text, path)` answers the job's result, or None when a newer
  job replaced it (the worker is killed then: a check of a big program is not let run on for a text gone)."""
  def __init__(self):
    self.proc: Optional[asyncio.subprocess.Process] = None
    self.job = 0
    self.lock = asyncio.Lock()

  async def start(self):
    if self.proc is None or self.proc.returncode is not None:
      self.proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "hcqdsl.editor.worker", stdin=asyncio.subprocess.PIPE,
                                                       stdout=asyncio.subprocess.PIPE, limit=1 << 30)
    return self.proc

  def cancel(self):
    if self.proc is not None and self.proc.returncode is None and self.lock.locked():
      self.proc.kill()

  async def check(self, text: str, path: str) -> Optional[dict]:
    self.job += 1
    job = self.job
    self.cancel()   # a running job is stale now
    async with self.lock:
      if job != self.job: return None
      proc = await self.start()
      assert proc.stdin is not None and proc.stdout is not None
      try:
        proc.stdin.write((json.dumps({"id": job, "text": text, "path": path}) + "\n").encode())
        await proc.stdin.drain()
        line = await proc.stdout.readline()
      except (BrokenPipeError, ConnectionResetError): line = b""
      if not line:   # killed for a newer job (or died): the next job starts a new one
        await proc.wait()
        return None
      return json.loads(line)

  async def close(self):
    if self.proc is not None and self.proc.returncode is None:
      self.proc.kill()
      await self.proc.wait()

class HcqServer(LanguageServer):
  def __init__(self, delay: float = DELAY):
    super().__init__("hcqdsl", __version__, text_document_sync_kind=T.TextDocumentSyncKind.Incremental)
    self.delay = delay
    self.docs: dict[str, Doc] = {}
    self.checker = Checker()
    self.parser = ThreadPoolExecutor(1, thread_name_prefix="hcqdsl-parse")

  def doc(self, uri: str) -> Doc:
    if uri not in self.docs: self.docs[uri] = Doc(uri, uri_path(uri))
    return self.docs[uri]

  def text(self, uri: str) -> tuple[int, str]:
    d = self.workspace.get_text_document(uri)
    return d.version or 0, d.source

  # ---- checking
  def schedule(self, uri: str, delay: float) -> None:
    doc = self.doc(uri)
    if doc.timer is not None: doc.timer.cancel()
    doc.timer = asyncio.get_running_loop().call_later(delay, lambda: asyncio.ensure_future(self.check(uri)))

  async def check(self, uri: str) -> None:
    doc = self.doc(uri)
    version, text = self.text(uri)
    result = await self.checker.check(text, doc.path)
    if result is None or uri not in self.docs or self.text(uri)[0] != version: return   # stale
    doc.checked = {"version": version, "diagnostics": result["diagnostics"]}
    lines = text.split("\n") if "\r" not in text else text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    diags = [self.diagnostic(uri, lines, d) for d in result["diagnostics"]]
    self.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=version))
    # then navigation's parse of this text (not alongside the check: on two cores a big program's parse here slows the
    # check as much; a request before this parses for itself)
    asyncio.ensure_future(self.parsed(uri))

  def pos(self, lines: list[str], p) -> T.Position:
    """A [line, column in characters] (or Pos) in the client's units (UTF-16 unless it said otherwise)."""
    line, col = (p.line, p.column) if isinstance(p, Pos) else p
    if line < len(lines) and not lines[line].isascii():
      return self.workspace.position_codec.position_to_client_units(lines, T.Position(line=line, character=col))
    return T.Position(line=line, character=col)

  def range(self, lines: list[str], r) -> T.Range:
    a, b = (r.start, r.end) if hasattr(r, "start") else r
    return T.Range(start=self.pos(lines, a), end=self.pos(lines, b))

  def diagnostic(self, uri: str, lines: list[str], d: dict) -> T.Diagnostic:
    related = [T.DiagnosticRelatedInformation(location=T.Location(uri=uri, range=self.range(lines, r["range"])), message=r["message"])
               for r in d["related"]]
    return T.Diagnostic(range=self.range(lines, d["range"]), message=d["message"], severity=T.DiagnosticSeverity(d["severity"]),
                        code=d["code"], source="hcqdsl", related_information=related or None,
                        code_description=T.CodeDescription(href=d["href"]) if "href" in d else None)

  # ---- the parse navigation and hover use
  def record(self, uri: str, version: int, changes) -> None:
    """The edits of a didChange (its content changes, in order): (first line, last line, lines of the new text), or
    None for the whole text replaced; what maps a line of an older parse to the text now, and back."""
    doc = self.doc(uri)
    marks = []
    for c in changes:
      rng = getattr(c, "range", None)
      marks.append(None if rng is None else (rng.start.line, rng.end.line, len(split_lines(c.text)) - 1))
    doc.edits.append((version, marks))

  def to_parse(self, uri: str, parsed: Parsed, line: int) -> Optional[int]:
    """A line of the text now as a line of `parsed`'s text (None: it was edited since, or the text replaced)."""
    for v, marks in reversed(self.doc(uri).edits):
      if v <= parsed.version: break
      for m in reversed(marks):
        if m is None: return None
        s, e, n = m
        if line > s + n: line -= n - (e - s)
        elif line >= s: return None
    return line

  def to_now(self, uri: str, parsed: Parsed, line: int) -> Optional[int]:
    """A line of `parsed`'s text as a line of the text now (None: edited since)."""
    for v, marks in self.doc(uri).edits:
      if v <= parsed.version: continue
      for m in marks:
        if m is None: return None
        s, e, n = m
        if line > e: line += n - (e - s)
        elif line >= s: return None
    return line

  async def parsed(self, uri: str, fresh: bool = True) -> Parsed:
    """The document parsed: with `fresh`, a parse of the text as of this call (or newer); else the latest parse
    there is (an older text's: `to_parse` and `to_now` map its lines), parsing only when there is none. One parse
    runs at a time; a call that finds one running for an older text waits for it, then starts the next."""
    doc = self.doc(uri)
    want = self.text(uri)[0]
    while True:
      if doc.parsed is not None and (not fresh or doc.parsed.version >= want): return doc.parsed
      if doc.parsing is None:
        version, text = self.text(uri)
        doc.parsing = (version, asyncio.get_running_loop().run_in_executor(self.parser, _parse, text, doc.path, version))
      fut = doc.parsing[1]
      parsed = await asyncio.shield(fut)
      if doc.parsing is not None and doc.parsing[1] is fut: doc.parsing = None
      if doc.parsed is None or parsed.version > doc.parsed.version:
        doc.parsed = parsed
        doc.edits = [(v, m) for v, m in doc.edits if v > parsed.version]

  async def image(self, uri: str, parsed: Parsed) -> tuple:
    """(image, None) of the document's version on its target, or (None, why not)."""
    doc = self.doc(uri)
    if doc.image is None or doc.image[0] != parsed.version:
      img, err = await asyncio.get_running_loop().run_in_executor(None, _compile, parsed)
      doc.image = (parsed.version, img, err)
    return doc.image[1], doc.image[2]

def _parse(text: str, path: str, version: int) -> Parsed:
  from ..lang.parse import parse_syntax
  prog, _ = parse_syntax(text, path)
  try: target = read_header(text).get("target")
  except HeaderError: target = None
  return Parsed(version, Names(prog, text) if prog is not None else None, target)

def _compile(parsed: Parsed) -> tuple:
  from ..diagnostics import HcqError
  from ..vendors import compile_program
  assert parsed.names is not None
  try: return compile_program(parsed.names.program, parsed.target or "gfx1100"), None
  except HcqError as e:
    first = e.diagnostics[0] if e.diagnostics else None
    return None, f"it does not compile ({first.code}: {first.message}, line {first.span.line if first.span else '?'})" if first else str(e)
  except ValueError as e: return None, f"it does not compile: {e}"

