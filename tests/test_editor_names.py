"""What the language server answers with, without the protocol (hcqdsl/editor/): names found where the IR says they
are used, quick fixes that are the checker's own edits (the text after the edit parses to `apply_edit`'s program) and
that remove their diagnostic, and a statement's listing that is the part of `hcqdsl disasm` its source map names."""
import os, pathlib, subprocess, sys
import attrs
import pytest
from hcqdsl import parse
from hcqdsl.check import check_source, parse_with_diagnostics
from hcqdsl.check.causes import apply_edit
from hcqdsl.ir import AMD_ARCHS, NV_ARCHS, Device
from hcqdsl.editor.names import Names, Pos, refs
from hcqdsl.editor.fixes import fixes, edit_changes
from hcqdsl.editor.hover import hover_name, hover_statement
from hcqdsl.vendors import compile_program, disasm_statement, BACKENDS
from hcqdsl.ir import vendor_of

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROGRAMS = sorted((ROOT / "programs").glob("*.hcq"))

def apply(text: str, changes) -> str:
  """`changes` (TextChange, 0-based line and character) made to `text`, as an editor applies a WorkspaceEdit."""
  lines = text.split("\n")
  starts = [0]
  for ln in lines: starts.append(starts[-1] + len(ln) + 1)
  for c in sorted(changes, key=lambda c: (c.range.start.line, c.range.start.column), reverse=True):
    a = starts[c.range.start.line] + c.range.start.column
    b = starts[c.range.end.line] + c.range.end.column
    text = text[:a] + c.new_text + text[b:]
  return text

def _parsed(path):
  text = path.read_text()
  prog, diags = parse_with_diagnostics(text, str(path))
  if prog is None or any(d.code in ("syntax", "name") for d in diags): return None, None
  return prog, Names(prog, text)

def test_every_name_the_ir_uses_is_found_in_the_text():
  """For every program of programs/: each name a declaration or statement refers to (per the IR) is found in its
  text as often as the IR says, and the declaration of each is found on its declaring line."""
  compared = 0
  for path in PROGRAMS:
    prog, names = _parsed(path)
    if prog is None: continue
    for d in prog.decls:
      for node in (d, *getattr(d, "body", ())):
        found = [o.name for o in names.occurrences(node) if not o.definition]
        wanted = refs(node)
        assert sorted(n for n in found if n in wanted) == sorted(wanted), (path.name, node.span, found, wanted)
        assert all(any(w.startswith(n + ".") for w in wanted) for n in found if n not in wanted)   # D of D.timeline
        compared += len(wanted)
    for name, decl in names.decls.items():
      occ = names.declaration(name)
      assert occ is not None and occ.range.start.line == (decl.span.line - 1), (path.name, name)
  assert compared > 900, compared

def test_references_and_the_name_under_the_cursor():
  text = (ROOT / "programs/timeline_finalizer.hcq").read_text()
  prog = parse(text, "t.hcq")
  names = Names(prog, text)
  lines = text.split("\n")
  def at(line1, word, nth=1):
    col = -1
    for _ in range(nth): col = lines[line1 - 1].index(word, col + 1)
    return names.at(Pos(line1 - 1, col + 1))
  assert at(34, "gpu.timeline").name == "gpu" and at(34, "timeline").name == "gpu.timeline"
  assert names.declaration("gpu.timeline").range.start == Pos(2, 7)    # the device's name
  refs_gpu = names.references("gpu")
  assert refs_gpu[0].definition and sum(o.definition for o in refs_gpu) == 1
  assert [o.range.start.line + 1 for o in refs_gpu if not o.definition] == [6, 7, 8, 10, 11, 17, 23, 30, 34, 34, 38, 38]
  assert [o.range.start.line + 1 for o in names.references("kick", include_declaration=False)] == [20, 25, 27, 32, 33]
  assert at(19, "copy") is None and at(19, "weights").name == "weights"   # a keyword is no name

def _fix_cases():
  for path in PROGRAMS:
    text = path.read_text()
    prog, diags = check_source(text, str(path), 2)
    if prog is None: continue
    for d in diags: yield path, text, prog, d

def test_quick_fixes_remove_their_diagnostic_and_add_no_error():
  """Every quick fix offered on programs/ (the checker's edit, an ignore comment, an unused ignore taken out): after
  it, its diagnostic is gone and no error is new."""
  counts = {"checker": 0, "ignore": 0, "unused": 0}
  for path, text, prog, d in _fix_cases():
    names = Names(prog, text)
    for f in fixes(names, d):
      after = check_source(apply(text, f.changes), str(path), 2)[1]
      key = lambda x: (x.code, x.span.line if x.span else None)  # noqa: E731
      assert key(d) not in {key(x) for x in after}, (path.name, d, f)
      before_errs = {(x.code, x.message) for x in check_source(text, str(path), 2)[1] if x.severity == "error"}
      new = {(x.code, x.message) for x in after if x.severity == "error"} - before_errs
      assert not {c for c, _ in new} - {d.code}, (path.name, f.title, new)
      counts["checker" if f.preferred else "unused" if d.code == "unused-ignore" else "ignore"] += 1
  assert counts["checker"] >= 5 and counts["ignore"] >= 20, counts

def test_the_checkers_fix_as_text_is_its_edit_of_the_ir():
  """The text edit of a `Diagnostic.fix` parses to the program check/causes.py's `apply_edit` makes of the IR (the
  edit `hcqdsl check --fix` makes): statements inserted before one, at a block's start, in a block with `;`, at its
  end, replaced, and a host block made where there was none."""
  cases = 0
  for path, text, prog, d in _fix_cases():
    if d.fix is None: continue
    assert parse(apply(text, edit_changes(Names(prog, text), d.fix)), "x") == apply_edit(prog, d.fix)
    cases += 1
  src = ("device g = AMD:0 gfx1100\nsignal s on g\nqueue q compute on g { signal s = 1; signal s = 2 }\n"
         "queue r compute on g {\n  signal s = 3\n}\n")
  prog = parse(src, "x")
  from hcqdsl.diagnostics import Edit
  from hcqdsl.ir import Wait, Ref, Expr
  w = (Wait(Ref("s"), Expr(None, 1)),)
  for edit in [Edit("q", 1, w, ""), Edit("q", 2, w, ""), Edit("r", 0, w, ""), Edit("r", 1, w, ""), Edit("r", 0, w, "", replace=True),
               Edit("host", 0, w, "")]:
    new = apply(src, edit_changes(Names(prog, src), edit))
    assert parse(new, "x") == apply_edit(prog, edit), (edit, new)
    cases += 1
  assert cases >= 10

def test_ignore_fix_joins_an_existing_ignore_comment():
  src = ("device g = AMD:0 gfx1100\nsignal s on g\nqueue a compute on g {\n  signal s = 1  # hcq: ignore[visibility]\n}\n"
         "queue b compute on g {\n  signal s = 2\n}\nhost {\n  wait s >= 1\n}\n")
  prog, diags = check_source(src, "x.hcq", 2)
  names = Names(prog, src)
  race = next(d for d in diags if d.code == "non-monotonic" and d.span.line == 4)
  [ign] = [f for f in fixes(names, race) if not f.preferred]
  assert apply(src, ign.changes).split("\n")[3] == "  signal s = 1  # hcq: ignore[visibility, non-monotonic]"
  unused = next(d for d in diags if d.code == "unused-ignore")
  [rm] = fixes(names, unused)
  assert apply(src, rm.changes).split("\n")[3] == "  signal s = 1"

def test_hover_of_a_signal_a_buffer_and_a_statement():
  text = (ROOT / "programs/race_missing_epoch.hcq").read_text()
  prog = parse(text, "r.hcq")
  names = Names(prog, text)
  h = hover_name(names, "done")
  assert "**writers** (1):\n- `c0` line 15: `signal done = kick`" in h and "**waiters** (1):\n- `c1` line 19: `wait done >= kick`" in h
  h = hover_name(names, "a")
  assert "- `c0` line 14: writes `a[0:4K]`: `exec fill(a)`" in h and "- `c1` line 20: reads `a[0:4K]`: `exec use(a)`" in h
  img = compile_program(prog)
  h = hover_statement(names, prog.queues[0].body[1], img)
  assert "RELEASE_MEM" in h and "addr                               0x100000000000 (done)" in h and "patched per launch = kick" in h
  assert hover_statement(names, prog.queues[0].body[1], None, "why").endswith("no packets to show: why")

@pytest.mark.parametrize("arch", AMD_ARCHS + NV_ARCHS)
def test_statement_listing_is_the_queue_listing_its_source_map_names(arch):
  """vendors.disasm_statement over a queue's statements, in order, is the queue's listing (`hcqdsl disasm`): for NV
  the method groups in order, each QMD after its exec's methods."""
  compared = 0
  for path in PROGRAMS:
    prog, _ = _parsed(path)
    if prog is None or not prog.queues: continue
    if vendor_of(arch) == "NV" and any(k.impl is not None and k.impl.amd_code for k in prog.kernels): continue
    prog = attrs.evolve(prog, decls=tuple(attrs.evolve(d, vendor=vendor_of(arch), arch=arch) if type(d) is Device else d for d in prog.decls))
    try: img = compile_program(prog)
    except Exception: continue   # (what a target refuses: compile's own tests hold those)
    for q in img.queues:
      whole = BACKENDS[vendor_of(q.arch)].disasm_queue(img, q)
      parts = [disasm_statement(img, q.name, i) for i in range(len(q.stmts))]
      methods = [ln for p in parts for ln in p if not ln.startswith("  QMD") and not (ln.startswith("          ") and _in_qmd(p, ln))]
      if vendor_of(arch) == "AMD": assert sum(parts, []) == whole, (path.name, q.name)
      else:
        assert sorted(sum(parts, [])) == sorted(whole), (path.name, q.name)
        assert methods == whole[:len(methods)]
      compared += len(parts)
  assert compared > 200, compared

def _in_qmd(part: list, line: str) -> bool:
  """Whether `line` of a statement's listing is in its QMD (after the `  QMD` line)."""
  q = next((i for i, x in enumerate(part) if x.startswith("  QMD")), None)
  return q is not None and part.index(line) > q

def test_lsp_without_pygls_says_how_to_install_it():
  code = "import sys; sys.modules['pygls'] = None\nfrom hcqdsl.cli import main\nsys.exit(main(['lsp']))"
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
  assert (r.returncode, r.stdout) == (2, "")
  assert r.stderr == 'hcqdsl: error: the language server needs pygls, which is not installed: pip install "hcqdsl[lsp]"\n'
