"""`hcqdsl lsp` driven over stdio by pytest-lsp's client, as an editor drives it: diagnostics as `check` gives them
(related locations, launch numbers) on open and as a file is edited into an error and out of it, debounced; hover,
definition, references, symbols, quick fixes (applied, then checked again) and formatting (= `hcqdsl fmt`)."""
import asyncio, os, pathlib, subprocess, sys
import pytest
import pytest_lsp
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from hcqdsl.check import check_text
from hcqdsl.diagnostics import render_json

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "programs"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
DELAY = 0.5   # the server's debounce (a burst of edits sent back to back is far inside it)
# one server for the module (its documents are distinct files, or opened anew)
pytestmark = pytest.mark.asyncio(loop_scope="module")

def _client() -> LanguageClient:
  """pytest-lsp's test client, also keeping every diagnostics notification: (uri, version, diagnostics)."""
  from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features, default_converter
  c = LanguageClient(converter_factory=default_converter)
  c.published, c.since = [], {}   # since: where the notifications of a document's latest opening start
  def publish(ls, params: T.PublishDiagnosticsParams):   # (`ls`: pygls passes the client by that name)
    ls.diagnostics[params.uri] = params.diagnostics
    ls.published.append((params.uri, params.version, list(params.diagnostics)))
  register_lsp_features(c, {**DEFAULT_CLIENT_FEATURES, T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish})
  return c

@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "hcqdsl", "lsp", "--delay", str(DELAY)], server_env=ENV,
                                              client_factory=_client), scope="module")
async def client(lsp_client: LanguageClient):
  await lsp_client.initialize_session(T.InitializeParams(capabilities=client_capabilities("visual-studio-code")))
  yield
  await lsp_client.shutdown_session()

async def diagnostics_of(client: LanguageClient, uri: str, version: int, timeout: float = 30) -> list:
  """The diagnostics the server publishes for `version` of `uri` (waiting for them)."""
  for _ in range(int(timeout / 0.02)):
    got = [d for u, v, d in client.published[client.since.get(uri, 0):] if u == uri and v == version]
    if got: return got[-1]
    await asyncio.sleep(0.02)
  raise TimeoutError(f"no diagnostics for version {version} of {uri} in {timeout} s (got {[(u, v) for u, v, _ in client.published]})")

def open_doc(client: LanguageClient, path: pathlib.Path, text=None) -> str:
  uri = path.resolve().as_uri()
  client.since[uri] = len(client.published)
  client.text_document_did_open(T.DidOpenTextDocumentParams(
    text_document=T.TextDocumentItem(uri=uri, language_id="hcq", version=1, text=path.read_text() if text is None else text)))
  return uri

def change(client: LanguageClient, uri: str, version: int, text: str) -> None:
  client.text_document_did_change(T.DidChangeTextDocumentParams(
    text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=version),
    content_changes=[T.TextDocumentContentChangeWholeDocument(text=text)]))

def doc(uri: str) -> T.TextDocumentIdentifier: return T.TextDocumentIdentifier(uri=uri)

def apply_edits(text: str, edits) -> str:
  lines = text.split("\n")
  starts = [0]
  for ln in lines: starts.append(starts[-1] + len(ln) + 1)
  for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
    a = starts[e.range.start.line] + e.range.start.character
    b = starts[e.range.end.line] + e.range.end.character
    text = text[:a] + e.new_text + text[b:]
  return text

async def test_diagnostics_are_checks_with_related_locations_and_launches(client: LanguageClient):
  path = PROGRAMS / "race_missing_epoch.hcq"
  uri = open_doc(client, path)
  [d] = await diagnostics_of(client, uri, 1)
  [want] = check_text(path.read_text(), str(path.resolve()))
  assert (d.code, d.severity, d.source) == ("race", T.DiagnosticSeverity.Error, "hcqdsl")
  assert (d.range.start.line, d.range.start.character, d.range.end.character) == (want.span.line - 1, want.span.column - 1, want.span.end_column - 1)
  assert d.message.split("\n") == [want.message] + [f"note: {n}" for n in want.notes]
  assert "(launch 2)" in d.message and "(launch 1)" in d.message
  [rel] = d.related_information
  assert rel.location.uri == uri and rel.location.range.start.line == 19 and rel.message == "c1 reads a[0:4096] here (launch 1)"
  assert d.code_description.href.endswith("docs/check.md#race-error")

async def test_a_file_edited_into_an_error_and_out_of_it(client: LanguageClient):
  path = PROGRAMS / "race_fixed_epoch.hcq"
  good = path.read_text()
  uri = open_doc(client, path)
  assert await diagnostics_of(client, uri, 1) == []
  racy = good.replace("  epoch\n", "", 1)
  typo = good.replace("  epoch\n", "  epohc\n", 1)
  change(client, uri, 2, racy)
  assert [d.code for d in await diagnostics_of(client, uri, 2)] == [d.code for d in check_text(racy, "x")] == ["race"]
  change(client, uri, 3, typo)
  [syntax] = await diagnostics_of(client, uri, 3)
  assert syntax.code == "syntax" and "epohc" in syntax.message
  change(client, uri, 4, good)
  assert await diagnostics_of(client, uri, 4) == []

async def test_a_burst_of_edits_is_checked_once(client: LanguageClient):
  """Edits closer together than the delay are checked once, as the last of them."""
  path = PROGRAMS / "race_fixed_epoch.hcq"
  good = path.read_text()
  uri = open_doc(client, path)
  await diagnostics_of(client, uri, 1)
  n = len(client.published)
  racy = good.replace("  epoch\n", "", 1)
  for v in range(2, 12): change(client, uri, v, racy if v % 2 else good)   # ends on v 11: racy
  assert [d.code for d in await diagnostics_of(client, uri, 11)] == ["race"]
  await asyncio.sleep(2 * DELAY)
  assert [v for u, v, _ in client.published[n:] if u == uri] == [11]

async def test_hover_says_writers_waiters_accesses_and_the_packets(client: LanguageClient, tmp_path):
  path = PROGRAMS / "race_missing_epoch.hcq"
  uri = open_doc(client, path)
  async def hover(line, col):
    h = await client.text_document_hover_async(T.HoverParams(text_document=doc(uri), position=T.Position(line=line, character=col)))
    return h.contents.value if h is not None else None
  sig = await hover(18, 8)   # `done` in `wait done >= kick`
  assert "**writers** (1):\n- `c0` line 15: `signal done = kick`" in sig and "**waiters** (1):\n- `c1` line 19: `wait done >= kick`" in sig
  buf = await hover(13, 12)  # `a` in `exec fill(a)`
  assert "- `c0` line 14: writes `a[0:4K]`" in buf and "- `c1` line 20: reads `a[0:4K]`" in buf
  stmt = await hover(14, 3)  # `signal done = kick`: what it compiles to
  img = tmp_path / "r.img"
  subprocess.run([sys.executable, "-m", "hcqdsl", "compile", str(path), "-o", str(img), "--no-check"], check=True, env=ENV, capture_output=True)
  listing = subprocess.run([sys.executable, "-m", "hcqdsl", "disasm", str(img)], check=True, env=ENV, capture_output=True, text=True).stdout
  words = stmt.split("```\n", 2)[2].rsplit("\n```", 1)[0]
  assert "RELEASE_MEM" in words and "patched per launch = kick" in words
  # the packets `hcqdsl disasm` lists for the statement, as they are (the file named as compile was given it)
  assert words.replace(str(path.resolve()), str(path)) in listing
  assert await hover(0, 3) is None   # a comment

async def test_hover_on_nv_and_copy_queues(client: LanguageClient, tmp_path):
  src = (PROGRAMS / "copy_pipeline.hcq").read_text()
  p = tmp_path / "nv.hcq"
  p.write_text(src)
  uri = open_doc(client, p)
  lines = src.split("\n")
  at = next(i for i, ln in enumerate(lines) if ln.strip().startswith("copy "))
  h = await client.text_document_hover_async(T.HoverParams(text_document=doc(uri), position=T.Position(line=at, character=3)))
  assert "sdma" in h.contents.value and "COPY_LINEAR" in h.contents.value
  nv = "device g = NV:0 sm_89\nbuffer a on g size 4K\nsignal s on g\nkernel k(out a)\nqueue q compute on g {\n  exec k(a)\n  signal s = 1\n}\n"
  p2 = tmp_path / "nv2.hcq"
  p2.write_text(nv)
  uri = open_doc(client, p2)
  h = await client.text_document_hover_async(T.HoverParams(text_document=doc(uri), position=T.Position(line=5, character=3)))
  assert "sm_89" in h.contents.value and "QMD v3" in h.contents.value and "program" in h.contents.value

async def test_definition_and_references_of_every_kind_of_name(client: LanguageClient):
  path = PROGRAMS / "timeline_finalizer.hcq"
  text = path.read_text()
  lines = text.split("\n")
  uri = open_doc(client, path)
  def pos(line1, word):
    return T.Position(line=line1 - 1, character=lines[line1 - 1].index(word) + 1)
  cases = {   # (a use of the name) -> the line of its declaration
    (34, "gpu.timeline"): 3, (34, "timeline"): 3, (19, "weights"): 5, (20, "loaded"): 10, (20, "kick"): 13,
    (26, "layer"): 15, (17, "gpu"): 3, (34, "epoch"): 3}
  for (line1, word), decl in cases.items():
    loc = await client.text_document_definition_async(T.DefinitionParams(text_document=doc(uri), position=pos(line1, word)))
    assert loc.uri == uri and loc.range.start.line == decl - 1, (line1, word, loc)
  refs = await client.text_document_references_async(T.ReferenceParams(
    text_document=doc(uri), position=pos(20, "loaded"), context=T.ReferenceContext(include_declaration=True)))
  assert [r.range.start.line + 1 for r in refs] == [10, 20, 25, 32]
  queues = [i + 1 for i, ln in enumerate(lines) if ln.startswith("queue ")]
  submit = next((i + 1 for i, ln in enumerate(lines) if ln.strip().startswith("submit")), None)
  if submit is not None:
    name = lines[submit - 1].split()[1].rstrip(",")
    refs = await client.text_document_references_async(T.ReferenceParams(
      text_document=doc(uri), position=pos(submit, name), context=T.ReferenceContext(include_declaration=True)))
    assert refs[0].range.start.line + 1 in queues

async def test_document_symbols_are_the_declarations_queues_and_host(client: LanguageClient):
  uri = open_doc(client, PROGRAMS / "jit_decode.hcq")
  syms = await client.text_document_document_symbol_async(T.DocumentSymbolParams(text_document=doc(uri)))
  kinds = {s.name: s.kind for s in syms}
  assert kinds["host"] == T.SymbolKind.Namespace and T.SymbolKind.Class in kinds.values() and T.SymbolKind.Module in kinds.values()
  q = next(s for s in syms if s.kind == T.SymbolKind.Class)
  assert q.detail.startswith(("compute on", "copy on")) and "statement" in q.detail

async def test_symbols_say_a_blocks_launches(tmp_path, client: LanguageClient):
  """Blocks with a `launches` clause (several host blocks among them): each is a symbol, its launches in the detail,
  and the program checks clean over the launches its header asks for."""
  text = ("# hcq: launches=3\ndevice g = AMD:0\nsignal s on g\nqueue w0 compute on g launches 1 {\n  signal s = 1\n}\n"
          "queue w1 compute on g launches 2.. {\n  wait s >= 1\n}\nhost launches 1 {\n  submit w0\n}\nhost launches 2.. {\n  submit w1\n}\n")
  path = tmp_path / "clauses.hcq"
  path.write_text(text)
  uri = open_doc(client, path)
  assert [d for d in await diagnostics_of(client, uri, 1) if d.severity == T.DiagnosticSeverity.Error] == []
  syms = await client.text_document_document_symbol_async(T.DocumentSymbolParams(text_document=doc(uri)))
  assert [(s.name, s.detail) for s in syms if s.kind in (T.SymbolKind.Class, T.SymbolKind.Namespace)] == [
    ("w0", "compute on g, 1 statement, launches 1"), ("w1", "compute on g, 1 statement, launches 2.."),
    ("host", "1 statements, launches 1"), ("host", "1 statements, launches 2..")]

async def test_quick_fixes_are_the_checkers_fix_and_the_ignore_comment(client: LanguageClient):
  path = PROGRAMS / "jit_rewritten_no_host_wait.hcq"
  text = path.read_text()
  uri = open_doc(client, path)
  diags = await diagnostics_of(client, uri, 1)
  race = next(d for d in diags if d.code == "race")
  actions = await client.text_document_code_action_async(T.CodeActionParams(
    text_document=doc(uri), range=race.range, context=T.CodeActionContext(diagnostics=[race])))
  fix = next(a for a in actions if a.is_preferred)
  assert fix.title.startswith("Fix: add `wait g0.timeline >= g0.epoch - 1` in the host")
  fixed = apply_edits(text, fix.edit.changes[uri])
  assert [d for d in check_text(fixed, "x") if d.severity == "error"] == []
  ignore = next(a for a in actions if "hcq: ignore[race]" in a.title)
  silenced = apply_edits(text, ignore.edit.changes[uri])
  assert "race" not in render_json(check_text(silenced, "x")) and "hcq: ignore[race]" in silenced

async def test_formatting_is_fmt(client: LanguageClient, tmp_path):
  messy = "device g=AMD:0  gfx1100\nsignal s on g\nqueue q compute on g { signal s = 0x10 ;signal s=2 }\nhost {\n wait s>=2\n}\n"
  p = tmp_path / "m.hcq"
  p.write_text(messy)
  uri = open_doc(client, p)
  [edit] = await client.text_document_formatting_async(T.DocumentFormattingParams(
    text_document=doc(uri), options=T.FormattingOptions(tab_size=2, insert_spaces=True)))
  subprocess.run([sys.executable, "-m", "hcqdsl", "fmt", str(p)], check=True, env=ENV, capture_output=True)
  assert apply_edits(messy, [edit]) == p.read_text() != messy
  bad = tmp_path / "bad.hcq"
  uri = open_doc(client, bad, "device g = AMD:0\nqueue q compute on g {\n  wiat s >= 1\n}\n")
  got = await client.text_document_formatting_async(T.DocumentFormattingParams(
    text_document=doc(uri), options=T.FormattingOptions(tab_size=2, insert_spaces=True)))
  assert got is None
  await asyncio.sleep(0.2)
  assert any("cannot format" in m.message and "3:3" in m.message for m in client.messages)

async def test_answers_while_typing_map_lines_of_the_last_parse(client: LanguageClient, tmp_path):
  """Requests that come while edits are unparsed are answered from the last parse with its lines mapped through the
  edits (lines added above, a line edited), and what is on an edited line from a parse of the text now."""
  src = (PROGRAMS / "timeline_finalizer.hcq").read_text()
  p = tmp_path / "t.hcq"
  p.write_text(src)
  uri = open_doc(client, p)
  await diagnostics_of(client, uri, 1)
  lines = src.split("\n")
  use = next(i for i, ln in enumerate(lines) if ln.strip() == "signal loaded = kick")
  decl = next(i for i, ln in enumerate(lines) if ln.startswith("signal loaded"))
  def edit(version, line, text, end=None):
    rng = T.Range(start=T.Position(line=line, character=0), end=T.Position(line=line if end is None else end, character=0))
    client.text_document_did_change(T.DidChangeTextDocumentParams(
      text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=version),
      content_changes=[T.TextDocumentContentChangePartial(range=rng, text=text)]))
  edit(2, 0, "# one\n# two\n")                       # two lines above everything
  edit(3, use + 2, "  signal loaded = kick + 1\n", use + 3)   # the use itself rewritten
  loc = await client.text_document_definition_async(T.DefinitionParams(
    text_document=doc(uri), position=T.Position(line=use + 2, character=lines[use].index("loaded") + 1)))
  assert loc.range.start.line == decl + 2
  refs = await client.text_document_references_async(T.ReferenceParams(
    text_document=doc(uri), position=T.Position(line=decl + 2, character=8), context=T.ReferenceContext(include_declaration=True)))
  want = [i + 2 for i, ln in enumerate(lines) if "loaded" in ln and not ln.startswith("#")]
  assert [r.range.start.line for r in refs] == want
