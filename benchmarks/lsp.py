"""How `hcqdsl lsp` keeps up with a big program, as an editor drives it (pytest-lsp's client over stdio, wall time
from this process): check_scaling.py's `--cli` program (16 queues on 8 devices; cross-device reads without barriers,
so ~1.5% of statements draw a `redundant-wait` warning), at each size:

- open: `didOpen` until its diagnostics are published; beside it, `hcqdsl check FILE` end to end (the anchor: the
  same check from the shell);
- typing: one incremental edit every TYPE_GAP seconds (a character typed into a statement's value and taken out
  again), TYPED of them, and during them hover, definition and document-symbol requests: their latencies (the
  server must answer while it parses and checks); then the time from the last keystroke to its diagnostics
  (the debounce delay included);
- after it: hover on a name, definition, references of a buffer (a scan of the program), document symbols, hover on
  a statement (the first compiles the program: its packets; the second reuses the image), a code action, formatting.

Usage: python benchmarks/lsp.py [sizes...]   (default 10000 100000)
"""
from __future__ import annotations
import asyncio, os, statistics, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from lsprotocol import types as T   # noqa: E402
from pytest_lsp import client_capabilities   # noqa: E402
from check_scaling import cli_text   # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
ENV = {**os.environ, "PYTHONPATH": ROOT}
TYPED, TYPE_GAP = 20, 0.1   # keystrokes, seconds apart (a steady typist)

async def timed(coro) -> tuple:
  t0 = time.perf_counter()
  r = await coro
  return r, time.perf_counter() - t0

async def diagnostics(c, uri: str, version: int) -> list:
  while True:
    got = [d for u, v, d in c.published if u == uri and v == version]
    if got: return got[-1]
    await asyncio.sleep(0.005)

def client():
  from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features, LanguageClient, default_converter
  c = LanguageClient(converter_factory=default_converter)
  c.published = []
  def publish(ls, params):
    ls.published.append((params.uri, params.version, list(params.diagnostics)))
  register_lsp_features(c, {**DEFAULT_CLIENT_FEATURES, T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish})
  return c

def doc(uri): return T.TextDocumentIdentifier(uri=uri)

async def session(path: str, text: str) -> dict:
  c = client()
  await c.start_io(sys.executable, "-m", "hcqdsl", "lsp", env=ENV)
  await c.initialize_session(T.InitializeParams(capabilities=client_capabilities("visual-studio-code")))
  uri = "file://" + path
  lines = text.split("\n")
  out: dict = {}
  t0 = time.perf_counter()
  c.text_document_did_open(T.DidOpenTextDocumentParams(T.TextDocumentItem(uri=uri, language_id="hcq", version=1, text=text)))
  d = await diagnostics(c, uri, 1)
  out["open"] = (time.perf_counter() - t0, len(d))
  # a statement `  signal sig_... = N` in the middle of the program: its value is typed into
  mid = next(i for i in range(len(lines) // 2, len(lines)) if lines[i].startswith("  signal "))
  name_line = next(i for i in range(mid, len(lines)) if lines[i].startswith("  wait "))
  name_pos = T.Position(line=name_line, character=lines[name_line].index("sig_") + 2)
  col = len(lines[mid])
  waits = {"hover": [], "definition": [], "symbols": []}
  for k in range(TYPED):
    v = k + 2
    typed = k % 2 == 0   # type a digit, then take it out
    rng = T.Range(start=T.Position(line=mid, character=col), end=T.Position(line=mid, character=col if typed else col + 1))
    c.text_document_did_change(T.DidChangeTextDocumentParams(T.VersionedTextDocumentIdentifier(uri=uri, version=v),
                               [T.TextDocumentContentChangePartial(range=rng, text="7" if typed else "")]))
    t_last = time.perf_counter()
    which = ("hover", "definition", "symbols")[k % 3]
    if which == "hover": _, dt = await timed(c.text_document_hover_async(T.HoverParams(doc(uri), name_pos)))
    elif which == "definition": _, dt = await timed(c.text_document_definition_async(T.DefinitionParams(doc(uri), name_pos)))
    else: _, dt = await timed(c.text_document_document_symbol_async(T.DocumentSymbolParams(doc(uri))))
    waits[which].append(dt)
    await asyncio.sleep(max(0.0, TYPE_GAP - (time.perf_counter() - t_last)))
  await diagnostics(c, uri, TYPED + 1)
  out["last keystroke to diagnostics"] = time.perf_counter() - t_last
  out["during typing"] = {k: (statistics.median(v), max(v)) for k, v in waits.items()}
  after = {}
  _, after["hover (name)"] = await timed(c.text_document_hover_async(T.HoverParams(doc(uri), name_pos)))
  _, after["definition"] = await timed(c.text_document_definition_async(T.DefinitionParams(doc(uri), name_pos)))
  refs, after["references"] = await timed(c.text_document_references_async(T.ReferenceParams(
    context=T.ReferenceContext(include_declaration=True), text_document=doc(uri), position=name_pos)))
  _, after["document symbols"] = await timed(c.text_document_document_symbol_async(T.DocumentSymbolParams(doc(uri))))
  stmt = T.Position(line=mid, character=3)
  _, after["hover (statement, compiles)"] = await timed(c.text_document_hover_async(T.HoverParams(doc(uri), stmt)))
  _, after["hover (statement, again)"] = await timed(c.text_document_hover_async(T.HoverParams(doc(uri), stmt)))
  _, after["code action"] = await timed(c.text_document_code_action_async(T.CodeActionParams(
    doc(uri), T.Range(start=T.Position(line=mid, character=0), end=T.Position(line=mid, character=5)), T.CodeActionContext(diagnostics=[]))))
  _, after["formatting"] = await timed(c.text_document_formatting_async(T.DocumentFormattingParams(doc(uri), T.FormattingOptions(2, True))))
  out["after"] = after
  out["references found"] = len(refs or ())
  await c.shutdown_session()
  await c.stop()
  return out

def cli_check(path: str) -> float:
  t0 = time.perf_counter()
  subprocess.run([sys.executable, "-m", "hcqdsl", "check", path], capture_output=True, env=ENV)
  return time.perf_counter() - t0

def main(sizes) -> None:
  print(f"load average {os.getloadavg()[0]:.2f}; wall seconds; {TYPED} keystrokes {TYPE_GAP} s apart")
  tmp = tempfile.mkdtemp(prefix="lsp_bench_")
  for n in sizes:
    path = os.path.join(tmp, f"p{n}.hcq")
    text = cli_text(n)
    with open(path, "w") as f: f.write(text)
    stmts = sum(1 for line in text.split("\n") if line.startswith("  "))
    cli = min(cli_check(path) for _ in range(2))
    r = asyncio.run(session(path, text))
    print(f"\n{stmts:,} statements ({len(text) / 1e6:.1f} MB): `hcqdsl check` {cli:.2f} s (best of 2)")
    print(f"  open -> diagnostics: {r['open'][0]:.2f} s ({r['open'][1]:,} diagnostics)")
    print(f"  last keystroke -> its diagnostics: {r['last keystroke to diagnostics']:.2f} s (debounce 0.3 s included)")
    for k, (med, mx) in r["during typing"].items(): print(f"  {k} while typing: median {med * 1e3:.0f} ms, max {mx * 1e3:.0f} ms")
    for k, v in r["after"].items(): print(f"  {k}: {v * 1e3:.0f} ms")
    print(f"  (references found: {r['references found']:,})")

if __name__ == "__main__": main([int(x) for x in sys.argv[1:]] or [10_000, 100_000])
