"""What people know from rustc, ruff and SARIF viewers: `check --explain CODE` (each example really draws its code and
its fixed form does not), per-line `# hcq: ignore[CODE]` with unused ones reported, SARIF rules with full
descriptions and a helpUri whose anchor is a heading of the doc it names."""
import json, pathlib, re
import pytest
from cli_run import cli
from hcqdsl.check import check_text
from hcqdsl.diagnostics import CODES, RULES, render_sarif

DOCS = pathlib.Path(__file__).parent.parent / "docs"


def codes(text: str) -> set: return {d.code for d in check_text(text, "x.hcq")}

def test_every_code_has_a_rule():
  assert set(RULES) == set(CODES)

@pytest.mark.parametrize("code", [c for c in RULES if c != "incomplete"])
def test_each_example_draws_its_code_and_its_fix_does_not(code):
  r = RULES[code]
  assert code in codes(r.example), (code, check_text(r.example, "x.hcq"))
  if r.fixed is not None: assert code not in codes(r.fixed), (code, check_text(r.fixed, "x.hcq"))

def test_explain_prints_meaning_example_and_fix():
  rc, out, _ = cli("check", "--explain", "deadlock")
  assert rc == 0 and out.startswith("deadlock (error): in some execution a queue (or the host) waits forever\n\n")
  assert "Example:\n\n    device g = AMD:0 gfx1100\n" in out and "\nFixed:\n" in out and out.endswith("More: docs/check.md#deadlock-error\n")
  assert cli("check", "--explain", "rase") == (2, "", "hcqdsl: error: --explain: `rase` is no diagnostic code (did you mean "
                                                     f"`race`?) (codes: {', '.join(RULES)})\n")

def _anchors(doc: pathlib.Path) -> set:
  # GitHub's heading slugs: lower case, punctuation but `-` and spaces dropped, spaces to `-`
  return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in re.findall(r"^#+ (.*)$", doc.read_text(), re.M)}

def test_sarif_rules_have_descriptions_and_help_into_the_docs():
  """Each rule's help names the doc section (the project has no public web page: no helpUri, no informationUri)."""
  sarif = json.loads(render_sarif([]))
  rules = sarif["runs"][0]["tool"]["driver"]["rules"]
  assert [r["id"] for r in rules] == list(CODES) and "informationUri" not in sarif["runs"][0]["tool"]["driver"]
  for r in rules:
    assert r["fullDescription"]["text"] and "helpUri" not in r and r["help"]["text"].endswith(f" More: {r['properties']['doc']}")
    doc, anchor = r["properties"]["doc"].removeprefix("docs/").split("#")
    assert anchor in _anchors(DOCS / doc), (r["id"], anchor)

IGNORED = """device g0 = AMD:0 gfx942
device g1 = AMD:1 gfx942
buffer a on g0 size 4K
buffer b on g1 size 4K
signal done on g0
signal used on g1
var kick
kernel fill(out dst)
kernel use(out dst, in src)
queue c0 compute on g0 {
  wait used >= kick - 1
  exec fill(a)
  signal done = kick  # hcq: ignore[race, visibilty]
}
queue c1 compute on g1 {
  wait done >= kick
  exec use(b, a)  # hcq: ignore[visibility]
  signal used = kick
}
"""

def test_suppression_drops_its_codes_on_its_line_and_reports_unused_ones():
  assert "visibility" in codes(IGNORED.replace("  # hcq: ignore[visibility]", ""))
  ds = check_text(IGNORED, "s.hcq")
  assert [(d.code, d.span.line, d.span.column, d.message) for d in ds] == [
    ("unused-ignore", 13, 23, "`# hcq: ignore[race]` suppresses nothing: no race diagnostic on this line"),
    ("unused-ignore", 13, 23, "`# hcq: ignore[visibilty]` suppresses nothing: `visibilty` is no diagnostic code "
                              "(did you mean `visibility`?)")]
  assert all(d.severity == "warning" for d in ds)
