"""The docs match the tool: the README's example and its line numbers, the diagnostic codes in docs/language.md, no
path outside the repository."""
import pathlib, re
from hcqdsl.check import check_text
from hcqdsl.diagnostics import CODES

ROOT = pathlib.Path(__file__).resolve().parents[1]

def test_readme_tour_and_its_race_hint():
  readme = (ROOT / "README.md").read_text()
  prog = re.search(r"## A short tour\n\n```\n(.*?)```", readme, re.S).group(1)
  assert check_text(prog, "tour.hcq") == []
  bad = prog.replace("  wait done0 >= kick\n", "", 1)
  [race] = [d for d in check_text(bad, "tour.hcq") if d.code == "race"]
  hint = race.notes[0].split(" (")[0]
  assert hint == "add `wait done0 >= kick` in x1 before line 19"
  assert f"(`{hint}`)" in readme

def test_language_md_lists_every_diagnostic_code():
  text = (ROOT / "docs" / "language.md").read_text()
  table = re.search(r"\| code \| severity \| found by \| meaning \|\n\| --- .*?\n((?:\|.*\n)+)", text).group(1)
  codes = [re.match(r"\| `([a-z-]+)` \|", row).group(1) for row in table.splitlines()]
  assert sorted(codes) == sorted(CODES) and len(codes) == len(CODES)

def test_docs_name_no_file_outside_the_repository():
  for doc in [ROOT / "README.md", ROOT / "docs" / "language.md"]:
    assert not re.search(r"(?<![\w.])(/work/|/tmp/|shared/|\.\./)", doc.read_text()), doc.name
  for doc in sorted((ROOT / "docs").glob("*.md")):  # the founders' design notes are not part of the repository
    assert "shared/design" not in doc.read_text(), doc.name

def test_architecture_md_names_every_folder_and_only_real_modules():
  text = (ROOT / "docs" / "architecture.md").read_text()
  rows = dict(re.findall(r"^\| `hcqdsl/([\w/]+?)/?`[^|]*\| (.*) \|$", text, re.M))
  folders = {str(d.relative_to(ROOT / "hcqdsl")) for d in (ROOT / "hcqdsl").iterdir() if d.is_dir() and (d / "__init__.py").exists()}
  assert folders <= set(rows), folders - set(rows)
  named = 0
  for folder, what in rows.items():
    base = ROOT / "hcqdsl" / folder
    for f in re.findall(r"`([\w/]+\.(?:py|lark))", what):
      assert (base / f).exists() or (ROOT / "hcqdsl" / f).exists(), f"{folder}: {f}"
      named += 1
  assert named > 30
  for path in re.findall(r"`(\w+/[\w/]*\w+\.py)", text):   # `cli/run.py` in the walk-throughs
    assert (ROOT / "hcqdsl" / path).exists() or (ROOT / path).exists(), path
