"""Issue 37: the CLI habits users bring from ruff, mypy and rustc, fixes users can apply (`check --fix`, JSON and SARIF
fixes), and one exact-message test per cause of the hostile sweep this helper owns (outputs written whole or not at
all, bounds on what would run for hours, internal errors, a forking C kernel). docs/reliability.md lists them."""
import json, os, pathlib, re, resource, signal, subprocess, sys, time
import pytest
from cli_run import cli, ROOT
import hcqdsl
from hcqdsl.host_cc import find_cc

PROGRAMS = ROOT / "programs"
needs_cc = pytest.mark.skipif(find_cc() is None, reason="no C compiler: apt-get install gcc")

def tour() -> str:
  return re.search(r"## A short tour\n\n```\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)

def proc(*argv, cwd=None, env=None, limit=None, timeout=120):
  """`python -m hcqdsl ARGV` in a fresh interpreter, under RLIMIT_FSIZE `limit` bytes when given."""
  e = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
  pre = (lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))) if limit else None
  return subprocess.run([sys.executable, "-m", "hcqdsl", *map(str, argv)], cwd=cwd, env=e, capture_output=True, text=True,
                        preexec_fn=pre, timeout=timeout)

# ---- item 2: CLI habits

def test_abbreviated_options_are_refused(capsys):
  rc, out, err = cli("run", "--launch", "3", PROGRAMS / "tutorial_fixed.hcq")
  assert rc == 2 and out == "" and err.splitlines()[0].startswith("usage: hcqdsl run ")
  assert err.splitlines()[-1] == "hcqdsl run: error: unrecognized option --launch (did you mean `--launches`?)"

def test_an_unknown_option_gets_the_subcommands_usage():
  rc, _, err = cli("check", "--formt", "json", PROGRAMS / "tutorial_fixed.hcq")
  assert rc == 2 and err.startswith("usage: hcqdsl check ")
  assert err.splitlines()[-1] == "hcqdsl check: error: unrecognized option --formt (did you mean `--format`?)"
  rc, _, err = cli("graph", PROGRAMS / "tutorial_fixed.hcq", "extra.hcq")
  assert rc == 2 and err.splitlines()[-1] == "hcqdsl graph: error: unrecognized arguments: extra.hcq"

def test_top_level_help_names_both_vendors():
  rc, out, _ = cli("--help")
  out = " ".join(out.split())   # (argparse wraps at the terminal's width)
  assert rc == 0 and "AMD and NVIDIA GPUs" in out and "NVIDIA (pushbuffer methods, QMDs)" in out and "built-in AMD emulator" not in out

def test_check_reads_standard_input():
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "check", "-"], input=(PROGRAMS / "deadlock_cycle.hcq").read_text(),
                     capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
  assert r.returncode == 1 and r.stdout.startswith("<stdin>:") and "error[deadlock]" in r.stdout
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "check", "-", "--stdin-filename", "mine.hcq", "--format", "json"],
                     input=(PROGRAMS / "tutorial_fixed.hcq").read_text(), capture_output=True, text=True,
                     env={**os.environ, "PYTHONPATH": str(ROOT)})
  assert (r.returncode, json.loads(r.stdout)) == (0, {"diagnostics": []})

def test_check_a_directory_checks_every_hcq_under_it(tmp_path):
  (tmp_path / "sub").mkdir()
  (tmp_path / ".hidden").mkdir()
  for name, src in (("a.hcq", "tutorial_fixed"), ("sub/b.hcq", "deadlock_cycle"), (".hidden/c.hcq", "deadlock_cycle")):
    (tmp_path / name).write_text((PROGRAMS / f"{src}.hcq").read_text())
  (tmp_path / "notes.txt").write_text("not a program")
  rc, out, _ = cli("check", tmp_path, "--format", "json")
  files = {d["file"] for d in json.loads(out)["diagnostics"]}
  assert rc == 1 and files == {str(tmp_path / "sub" / "b.hcq")}
  rc, out, err = cli("check", tmp_path / "sub" / "..", "--launches", "1")
  assert out.splitlines()[-1] == "failed: 1 error, 1 warning over 1 launch, 4 queues"   # (a.hcq's and b.hcq's queues)
  (tmp_path / "empty").mkdir()
  assert cli("check", tmp_path / "empty") == (2, "", f"hcqdsl: warning: {tmp_path / 'empty'}: no .hcq files under it\n")

def test_a_missing_file_does_not_stop_the_others(tmp_path):
  rc, out, err = cli("check", tmp_path / "nope.hcq", PROGRAMS / "tutorial_fixed.hcq", PROGRAMS / "deadlock_cycle.hcq")
  assert rc == 2 and err == f"hcqdsl: error: {tmp_path / 'nope.hcq'}: no such file\n"
  assert "error[deadlock]" in out and out.splitlines()[-1] == "failed: 1 error, 0 warnings over 3 launches, 4 queues"
  rc, out, err = cli("check", PROGRAMS / "tutorial_fixed.hcq", tmp_path / "nope.hcq", "--format", "sarif")
  assert rc == 2 and json.loads(out)["runs"][0]["results"] == []
  (tmp_path / "ugly.hcq").write_text((PROGRAMS / "tutorial_fixed.hcq").read_text().replace("\n  ", "\n    "))
  assert cli("fmt", tmp_path / "nope.hcq", tmp_path / "ugly.hcq") == (2, "", f"hcqdsl: error: {tmp_path / 'nope.hcq'}: no such file\n"
                                                                          f"reformatted {tmp_path / 'ugly.hcq'}\n"
                                                                          "1 file reformatted, 0 left unchanged\n")

def test_format_json_on_every_command_that_reports(tmp_path, capsys):
  rc, out, _ = cli("run", PROGRAMS / "run_race.hcq", "--format", "json", "--schedules", "3", "--no-check")
  rep = json.loads(out)
  assert rc == 1 and rep["ok"] is False and len(rep["runs"]) == 3 and rep["races"][0]["buffer"] == "a"
  assert [q["name"] for q in rep["runs"][0]["queues"]] == ["q0", "q1"] and rep["runs"][0]["fault"] is None
  rc, out, _ = cli("run", PROGRAMS / "run_deadlock.hcq", "--format", "json", "--no-check")
  assert rc == 1 and json.loads(out)["runs"][0]["hang"]["blocked"][0]["queue"] == "q0"
  rc, out, _ = cli("run", PROGRAMS / "name_unknown_signal.hcq", "--format", "json")
  assert rc == 1 and json.loads(out)["diagnostics"][0]["message"] == "unknown signal `dnoe` (did you mean `done`?)"
  rc, out, _ = cli("parse", PROGRAMS / "tutorial_fixed.hcq", "--format", "json")
  assert rc == 0 and json.loads(out)["kind"] == "Program"
  rc, out, err = cli("parse", PROGRAMS / "tutorial_fixed.hcq", "--json")   # the old flag: deprecated, still works
  assert rc == 0 and json.loads(out)["kind"] == "Program" and err == "hcqdsl: warning: --json is deprecated: use --format json\n"
  rc, out, _ = cli("parse", PROGRAMS / "name_unknown_signal.hcq", "--format", "json")
  assert rc == 1 and json.loads(out)["diagnostics"][0]["code"] == "name"
  rc, out, _ = cli("diff", PROGRAMS / "tutorial_fixed.hcq", PROGRAMS / "tutorial_deadlock.hcq", "--format", "json")
  assert rc == 1 and json.loads(out)["differences"][0]["what"] == "command"
  for cmd in ("check", "parse", "diff", "run", "sanitize"):   # one option, one name
    rc, out, _ = cli(cmd, "--help")
    assert "--format {text,json" in out, cmd

# ---- item 3: fixes users can apply

def test_the_readme_tour_checks_clean_after_fix(tmp_path):
  good = tour()
  f = tmp_path / "tour.hcq"
  f.write_text(good.replace("  wait done0 >= kick\n", "", 1))
  rc, out, err = cli("check", "--fix", f)
  assert (rc, out) == (0, "ok: 0 errors, 0 warnings over 2 launches, 4 queues\n")
  assert err == f"fixed {f}: add `wait done0 >= kick` in x1 before line 19 (c0 signals it at line 15, after its access)\n"
  assert f.read_text() == good   # the wait is back where it was, nothing else touched
  assert cli("check", f) == (0, "ok: 0 errors, 0 warnings over 2 launches, 4 queues\n", "")

def test_fix_from_standard_input_prints_the_fixed_program():
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "check", "--fix", "-"], input=tour().replace("  wait done0 >= kick\n", "", 1),
                     capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
  assert r.returncode == 0 and r.stdout == tour() and r.stderr.endswith("ok: 0 errors, 0 warnings over 2 launches, 4 queues\n")

def test_fix_replaces_a_wait_keeping_its_comment(tmp_path):
  f = tmp_path / "t.hcq"
  f.write_text((PROGRAMS / "tutorial_deadlock.hcq").read_text())
  rc, out, err = cli("check", "--fix", f)
  assert rc == 0 and "  wait copied >= kick - 1  # E: deadlock\n" in f.read_text()
  before, after = (PROGRAMS / "tutorial_deadlock.hcq").read_text().splitlines(), f.read_text().splitlines()
  assert [i for i, (a, b) in enumerate(zip(before, after)) if a != b] == [15] and len(before) == len(after)

def test_apply_fixes_api():
  bad = tour().replace("  wait done0 >= kick\n", "", 1)
  diags = hcqdsl.check_text(bad, "tour.hcq")
  assert hcqdsl.apply_fixes(bad, diags, "tour.hcq") == tour()
  assert hcqdsl.apply_fixes(bad, [], "tour.hcq") == bad
  race = next(d for d in diags if d.code == "race")
  prog = hcqdsl.parse_with_diagnostics(bad, "tour.hcq")[0]
  assert hcqdsl.text_edits(prog, race.fix) == [hcqdsl.TextEdit(19, 1, 19, 1, "  wait done0 >= kick\n")]
  r = hcqdsl.fix_text(bad, "tour.hcq")
  assert r.text == tour() and r.diagnostics == () and len(r.applied) == 1

def test_fixes_in_one_line_blocks_and_a_missing_host_block():
  from hcqdsl.diagnostics import Edit
  from hcqdsl.check.fixes import text_edits, apply_text_edits
  src = "device g = AMD:0\nsignal s on g\nqueue q compute on g { barrier }\nqueue r compute on g {\n}\n"
  prog = hcqdsl.parse(src, "p.hcq")
  w = hcqdsl.Wait(hcqdsl.Ref("s"), hcqdsl.Expr(None, 1))
  for edit, want in [(Edit("q", 0, (w,), ""), "queue q compute on g { wait s >= 1; barrier }\n"),
                     (Edit("q", 1, (w,), ""), "queue q compute on g { barrier ; wait s >= 1 }\n"),
                     (Edit("r", 0, (w,), ""), "queue r compute on g {\n  wait s >= 1\n}\n"),
                     (Edit("host", 0, (w,), ""), "}\n\nhost {\n  wait s >= 1\n}\n")]:
    new = apply_text_edits(src, text_edits(prog, edit))
    assert want in new and hcqdsl.parse(new, "p.hcq"), (edit, new)

# SARIF 2.1.0 (the OASIS schema, sarif-schema-2.1.0.json): the properties each object we write may have, and those it
# must; `propertyBag` takes any
SARIF = {
  "log": ({"$schema", "version", "runs", "inlineExternalProperties", "properties"}, {"version", "runs"}),
  "run": ({"tool", "results", "artifacts", "invocations", "properties", "columnKind", "originalUriBaseIds"}, {"tool"}),
  "tool": ({"driver", "extensions", "properties"}, {"driver"}),
  "toolComponent": ({"name", "version", "semanticVersion", "informationUri", "rules", "fullName", "properties"}, {"name"}),
  "reportingDescriptor": ({"id", "name", "shortDescription", "fullDescription", "help", "helpUri", "properties", "defaultConfiguration"}, {"id"}),
  "multiformatMessageString": ({"text", "markdown", "properties"}, {"text"}),
  "message": ({"text", "markdown", "id", "arguments", "properties"}, set()),
  "result": ({"ruleId", "ruleIndex", "level", "message", "locations", "relatedLocations", "fixes", "properties", "kind"}, {"message"}),
  "location": ({"id", "physicalLocation", "message", "properties"}, set()),
  "physicalLocation": ({"artifactLocation", "region", "contextRegion", "properties"}, set()),
  "artifactLocation": ({"uri", "uriBaseId", "index", "description", "properties"}, set()),
  "region": ({"startLine", "startColumn", "endLine", "endColumn", "charOffset", "charLength", "snippet", "message", "properties"}, set()),
  "fix": ({"description", "artifactChanges", "properties"}, {"artifactChanges"}),
  "artifactChange": ({"artifactLocation", "replacements", "properties"}, {"artifactLocation", "replacements"}),
  "replacement": ({"deletedRegion", "insertedContent", "properties"}, {"deletedRegion"}),
  "artifactContent": ({"text", "binary", "rendered", "properties"}, set()),
}
CHILD = {("log", "runs"): "run", ("run", "tool"): "tool", ("run", "results"): "result", ("tool", "driver"): "toolComponent",
         ("toolComponent", "rules"): "reportingDescriptor", ("reportingDescriptor", "shortDescription"): "multiformatMessageString",
         ("reportingDescriptor", "fullDescription"): "multiformatMessageString", ("reportingDescriptor", "help"): "multiformatMessageString",
         ("result", "message"): "message", ("result", "locations"): "location", ("result", "relatedLocations"): "location",
         ("result", "fixes"): "fix", ("location", "physicalLocation"): "physicalLocation", ("location", "message"): "message",
         ("physicalLocation", "artifactLocation"): "artifactLocation", ("physicalLocation", "region"): "region",
         ("fix", "description"): "message", ("fix", "artifactChanges"): "artifactChange",
         ("artifactChange", "artifactLocation"): "artifactLocation", ("artifactChange", "replacements"): "replacement",
         ("replacement", "deletedRegion"): "region", ("replacement", "insertedContent"): "artifactContent"}

def sarif_problems(obj, kind: str = "log", where: str = "$") -> list:
  allowed, required = SARIF[kind]
  out = [f"{where}: `{k}` is no {kind} property" for k in obj if k not in allowed]
  out += [f"{where}: {kind} needs `{k}`" for k in required - set(obj)]
  if kind == "region":
    out += [f"{where}.{k} < 1" for k in ("startLine", "startColumn", "endLine", "endColumn") if k in obj and obj[k] < 1]
  for k, v in obj.items():
    if (kind, k) not in CHILD: continue
    for n, x in enumerate(v if isinstance(v, list) else [v]): out += sarif_problems(x, CHILD[kind, k], f"{where}.{k}[{n}]")
  return out

def test_json_and_sarif_carry_the_fixes(tmp_path):
  f = tmp_path / "tour.hcq"
  f.write_text(tour().replace("  wait done0 >= kick\n", "", 1))
  rc, out, _ = cli("check", f, "--format", "json")
  race = next(d for d in json.loads(out)["diagnostics"] if d["code"] == "race")
  assert race["fixes"] == [{"message": "add `wait done0 >= kick` in x1 before line 19 (c0 signals it at line 15, after its access)",
                            "edits": [{"content": "  wait done0 >= kick\n", "location": {"line": 19, "column": 1},
                                       "end_location": {"line": 19, "column": 1}}]}]
  rc, out, _ = cli("check", f, "--format", "sarif")
  sarif = json.loads(out)
  assert sarif_problems(sarif) == [] and sarif["version"] == "2.1.0"
  assert "informationUri" not in sarif["runs"][0]["tool"]["driver"]   # the project has no public page to point at
  [res] = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "race"]
  assert res["fixes"] == [{"description": {"text": race["fixes"][0]["message"]},
                           "artifactChanges": [{"artifactLocation": {"uri": str(f)}, "replacements": [
                             {"deletedRegion": {"startLine": 19, "startColumn": 1, "endLine": 19, "endColumn": 1},
                              "insertedContent": {"text": "  wait done0 >= kick\n"}}]}]}]
  for p in sorted(PROGRAMS.glob("*.hcq")):   # every scenario's SARIF has only the schema's names
    rc, out, _ = cli("check", p, "--format", "sarif")
    assert sarif_problems(json.loads(out)) == [], p.name

# ---- item 5, data loss: every output whole or not at all, never over an input

BIG = (PROGRAMS / "run_pipeline.hcq").read_text().replace("\n  ", "\n    ") + "".join(f"# note {i}: é\n" for i in range(1200))

def test_fmt_under_a_file_size_limit_keeps_the_source(tmp_path):
  f = tmp_path / "p.hcq"
  f.write_text(BIG)
  size = f.stat().st_size
  assert size > 16_000
  r = proc("fmt", "p.hcq", cwd=tmp_path, limit=8192)
  assert (r.returncode, r.stderr) == (2, "hcqdsl: error: p.hcq: File too large; the file is left as it was\n"
                                         "0 files reformatted, 0 left unchanged, 1 could not be written\n")
  assert f.read_text() == BIG and os.listdir(tmp_path) == ["p.hcq"]   # no temporary file left either

def test_fmt_in_an_ascii_locale_writes_utf8(tmp_path):
  f = tmp_path / "p.hcq"
  f.write_text(BIG)
  r = proc("fmt", "p.hcq", cwd=tmp_path, env={"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""})
  assert (r.returncode, r.stderr) == (0, "reformatted p.hcq\n1 file reformatted, 0 left unchanged\n")
  assert f.read_text(encoding="utf-8") == hcqdsl.format(hcqdsl.parse(BIG)) and "# note 1199: é" in f.read_text()

def test_an_ascii_locale_prints_non_ascii_diagnostics(tmp_path):
  (tmp_path / "p.hcq").write_text("device g0 = AMD:0\nqueue q compute on g0 {\n  wait é >= 1\n}\n")
  r = proc("check", "p.hcq", cwd=tmp_path, env={"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""})
  assert r.returncode == 1 and "Traceback" not in r.stderr and "internal error" not in r.stderr and "\\xe9" in r.stdout

def test_compile_of_an_image_does_not_overwrite_it(tmp_path):
  img = tmp_path / "p.hcqimg"
  assert cli("compile", PROGRAMS / "run_pipeline.hcq", "-o", img).returncode == 0
  held = img.read_bytes()
  assert cli("compile", img) == (2, "", f"hcqdsl: error: the default output (-o) {img} is the input {img}: writing it would "
                                        "overwrite the input; give another file\n")
  assert img.read_bytes() == held

def test_a_failed_image_write_keeps_the_old_image(tmp_path):
  img = tmp_path / "p.hcqimg"
  assert cli("compile", PROGRAMS / "tutorial_fixed.hcq", "-o", img).returncode == 0
  held = img.read_bytes()
  r = proc("compile", PROGRAMS / "run_pipeline.hcq", "-o", img, "--no-check", limit=512)
  assert (r.returncode, r.stderr) == (2, f"hcqdsl: error: {img}: File too large\n")
  assert img.read_bytes() == held and os.listdir(tmp_path) == ["p.hcqimg"]

def test_write_atomic_keeps_modes_links_and_devices(tmp_path):
  from hcqdsl.files import write_atomic
  f = tmp_path / "x.hcq"
  f.write_text("old")
  f.chmod(0o640)
  write_atomic(f, "new é")
  assert f.read_bytes() == "new é".encode() and (f.stat().st_mode & 0o777) == 0o640
  link = tmp_path / "link.hcq"
  link.symlink_to(f)
  write_atomic(link, "via link")
  assert link.is_symlink() and f.read_text() == "via link"
  write_atomic("/dev/null", "nothing")   # a device is written, never replaced
  assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")

def test_lift_into_a_missing_directory(tmp_path):
  from hcqdsl.tinygrad.capture import Capture
  from amd_standin import Arena
  from capture_util import hcqgraph
  with Capture() as cap: hcqgraph(Arena(), launches=2)
  m = json.loads(json.dumps(cap.manifest()))
  for k in m["kernels"]: k["code"] = "7f454c46" + "00" * 60   # kernels with code objects: lift writes them beside the program
  (tmp_path / "m.json").write_text(json.dumps(m))
  assert cli("lift", tmp_path / "m.json", "-o", tmp_path / "no" / "x.hcq") == \
    (2, "", f"hcqdsl: error: -o {tmp_path / 'no' / 'x.hcq'}: no such directory ({tmp_path / 'no'})\n")
  with pytest.raises(ValueError, match=f"^{re.escape(str(tmp_path / 'no' / 'produce.co'))}: No such file or directory$"):
    hcqdsl.lift_file(tmp_path / "m.json", str(tmp_path / "no" / "x.hcq"))   # the API: the manifest's error, not an OSError
  assert cli("lift", tmp_path / "m.json", "-o", tmp_path / "x.hcq").returncode == 0
  assert (tmp_path / "produce.co").read_bytes()[:4] == b"\x7fELF"

SANITIZE_TEST = "def test_one(): pass\n"

def _pytest(tmp_path, *args):
  return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args], cwd=tmp_path, capture_output=True,
                        text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)

def test_sanitize_json_naming_the_test_file_is_refused(tmp_path):
  (tmp_path / "test_x.py").write_text(SANITIZE_TEST)
  r = _pytest(tmp_path, "--hcq-sanitize-json", "test_x.py", "test_x.py")
  assert r.returncode == 4 and "ERROR: --hcq-sanitize-json test_x.py is the test path test_x.py: writing the report would " \
                                "overwrite it; give another file" in r.stderr
  (tmp_path / "notes.txt").write_text("mine")
  r = _pytest(tmp_path, "--hcq-sanitize-json", "notes.txt", "test_x.py")
  assert r.returncode == 4 and "ERROR: --hcq-sanitize-json notes.txt exists and is not an earlier hcq-sanitize report: writing " \
                                "would overwrite it; give another file" in r.stderr
  assert (tmp_path / "test_x.py").read_text() == SANITIZE_TEST and (tmp_path / "notes.txt").read_text() == "mine"

def test_sanitize_json_unwritable_is_refused_before_the_tests(tmp_path):
  (tmp_path / "test_x.py").write_text("import pathlib\ndef test_one(): pathlib.Path('ran').write_text('1')\n")
  r = _pytest(tmp_path, "--hcq-sanitize-json", "no/such/out.json", "test_x.py")
  assert r.returncode == 4 and "ERROR: --hcq-sanitize-json no/such/out.json: no such directory" in r.stderr
  assert not (tmp_path / "ran").exists()   # refused before any test ran

def test_sanitize_json_results_are_not_lost_when_the_write_fails(tmp_path):
  """The report's directory removed while the tests ran (it was an INTERNALERROR after every test, the results lost)."""
  import shutil, types
  from hcqdsl.pytest_plugin import SanitizePlugin
  (tmp_path / "out").mkdir()
  config = types.SimpleNamespace(invocation_params=types.SimpleNamespace(dir=tmp_path), args=["test_x.py"],
                                 getoption=lambda name, default=None: "out/r.json" if name == "hcq_sanitize_json" else default)
  plugin = SanitizePlugin(config)
  plugin.results = [{"nodeid": "test_x.py::test_one", "outcome": "passed", "submissions": 2, "checks": 1, "findings": [],
                     "warnings": 0, "incomplete": None, "error": None, "duration": 0.1}]
  shutil.rmtree(tmp_path / "out")
  plugin.pytest_sessionfinish(types.SimpleNamespace(config=types.SimpleNamespace()))
  lines: list = []
  plugin.pytest_terminal_summary(types.SimpleNamespace(write_line=lines.append))
  kept = lines[-1].rsplit(" ", 1)[1]
  assert lines == ["hcq-sanitize: 1 test sanitized, 2 submissions checked, 0 findings",
                   f"hcq-sanitize: could not write --hcq-sanitize-json {tmp_path / 'out' / 'r.json'}: No such file or directory; "
                   f"the JSON is in {kept}"]
  assert json.loads(pathlib.Path(kept).read_text())["tests"] == plugin.results
  os.unlink(kept)

# ---- item 5, hangs: bounded, and ended

def test_schedules_and_seeds_are_bounded(tmp_path):
  assert cli("run", PROGRAMS / "run_race.hcq", "--schedules", 10**20) == \
    (2, "", "hcqdsl: error: --schedules must be at most 10,000 (each schedule is a whole run), not 100000000000000000000\n")
  f = tmp_path / "p.hcq"
  f.write_text("# hcq: seeds=100000000000000000000\n" + (PROGRAMS / "tutorial_fixed.hcq").read_text())
  assert cli("check", f) == (2, "", f"hcqdsl: error: {f}:1:1: bad `# hcq:` header: `seeds=100000000000000000000`: seeds must "
                                    "be at most 10,000\n")
  from hcqdsl.header import read_header, HeaderError   # (the one reader: the pytest plugin's scenario files too)
  with pytest.raises(HeaderError, match="^line 1: `seeds=10001`: seeds must be at most 10,000$"): read_header("# hcq: seeds=10001\n")
  assert read_header("# hcq: seeds=10000\n") == {"seeds": 10_000}

def test_duplicate_devices_are_found_in_one_pass(monkeypatch):
  """20,000 devices took 51 s (every device compared with every earlier one); now one dict lookup each."""
  src = "".join(f"device d{i} = AMD:{i % 20_000}\n" for i in range(20_001))
  prog, _ = hcqdsl.parse_with_diagnostics("device a = AMD:0\n", "p.hcq")
  calls = []
  real = type(prog).of
  monkeypatch.setattr(type(prog), "of", lambda self, kind: calls.append(kind) or real(self, kind))
  diags = hcqdsl.check_text(src, "p.hcq")
  assert [str(d) for d in diags if d.code == "name"] == ["p.hcq:20001:1: error[name]: AMD:0 is already device `d0`"]
  assert calls.count(hcqdsl.Device) < 10, calls.count(hcqdsl.Device)

@needs_cc
def test_a_huge_kernel_timeout_runs(tmp_path):
  """--kernel-timeout 1e10 overflowed select (an internal error), whose cleanup then waited for the worker."""
  r = proc("run", PROGRAMS / "run_c_kernel.hcq", "--kernel-timeout", "1e10")
  assert r.returncode == 0 and r.stdout.splitlines()[-1] == "ok", r.stdout + r.stderr

LOOP = """device g0 = AMD:0
buffer a on g0 size 64
kernel spin(out x) = c "void spin(volatile int *x) { for (;;) x[1]++; }"
queue q compute on g0 {
  exec spin(a)
}
"""

def children(pid: int) -> list:
  """The processes whose parent is `pid` (from /proc: no procps needed)."""
  out = []
  for d in os.listdir("/proc"):
    if not d.isdigit(): continue
    try: stat = open(f"/proc/{d}/stat").read()
    except OSError: continue
    if int(stat.rsplit(")", 1)[1].split()[1]) == pid: out.append(int(d))
  return out

@needs_cc
def test_an_interrupted_run_ends_its_looping_kernel(tmp_path):
  (tmp_path / "loop.hcq").write_text(LOOP)
  e = {**os.environ, "PYTHONPATH": str(ROOT)}
  # (SIGINT's default action in the run, whatever the test runner's: a shell starts a background job with it ignored,
  # and the run would inherit that and never see the interrupt)
  p = subprocess.Popen([sys.executable, "-m", "hcqdsl", "run", "loop.hcq", "--kernel-timeout", "1e10"], cwd=tmp_path, env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
  worker = None
  try:
    for _ in range(600):   # the worker process is forked at the first kernel call
      kids = children(p.pid)
      if kids:
        worker = int(kids[0])
        break
      time.sleep(0.05)
    assert worker is not None
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=120)   # (reads its pipes while waiting: a run that writes much must not block on them)
    rc = p.returncode
    left = os.path.exists(f"/proc/{worker}")   # (looked at before the cleanup below)
  finally:   # (a failure here must not leave a looping kernel behind)
    if p.poll() is None: p.kill()
    for pid in [worker] if worker is not None else children(p.pid):
      try: os.kill(pid, signal.SIGKILL)
      except ProcessLookupError: pass
  assert rc == 130 and not left   # the worker killed and reaped by run's own cleanup

# ---- item 5, internal errors

def nv_exec(n: int, arch: str = "sm_89") -> str:
  return (f"device g = NV:0 {arch}\nbuffer a on g size 64\nkernel k({', '.join(f'in b{i}' for i in range(n))})\n"
          f"queue q compute on g {{\n  exec k({', '.join('a' for _ in range(n))})\n}}\n")

def test_an_nv_exec_past_the_qmds_constant_bank_size(tmp_path):
  f = tmp_path / "p.hcq"
  f.write_text(nv_exec(980))
  msg = (f"{f}:5:8: error[bounds]: kernel `k` takes 7,840 bytes of arguments (980 parameters): an NV exec passes at most 7,839 "
         "on sm_89 (constant bank 0's size is a 13-bit field of the QMD)")
  rc, out, _ = cli("check", f)
  assert rc == 1 and out.splitlines()[0] == msg
  rc, _, err = cli("compile", f, "--no-check", "-o", tmp_path / "p.hcqimg")
  assert rc == 1 and err.splitlines()[0] == msg

@pytest.mark.parametrize("arch", ["sm_86", "sm_89", "sm_90", "sm_120"])
def test_the_largest_nv_exec_compiles(arch):
  """ir.NV_KERNARG_MAX is what nv/cubin.py and nv/qmd.py can encode: the largest argument list fits the QMD's field."""
  from hcqdsl.ir import NV_KERNARG_MAX
  from hcqdsl.nv import cubin
  from hcqdsl.nv.targets import get_target
  t, most = get_target(arch), NV_KERNARG_MAX[arch]
  cubin.program_qmd(t, cubin.load(cubin.synthetic(t, "k", most), "k", synthetic=True), 0x1000, 0)   # the most bytes fit the QMD
  with pytest.raises(ValueError, match="does not fit QMD field constant_buffer_size_shifted4_0"):
    cubin.program_qmd(t, cubin.load(cubin.synthetic(t, "k", most + 1), "k", synthetic=True), 0x1000, 0)
  n = most // 8
  assert hcqdsl.compile_program(hcqdsl.parse(nv_exec(n, arch))).queues
  assert hcqdsl.check(hcqdsl.parse(nv_exec(n, arch))) == []
  assert [d.code for d in hcqdsl.check_text(nv_exec(n + 1, arch))] == ["bounds"]

def test_an_nv_method_header_with_count_0(tmp_path):
  f = tmp_path / "nv.txt"
  f.write_text("20000000\n")   # an incrementing method group of no data dwords
  rc, out, err = cli("disasm", "--engine", "nv", "--target", "sm_89", f)
  assert (rc, err) == (0, "") and out.splitlines()[0].split() == ["0", "SET_OBJECT"]

@needs_cc
def test_a_non_ascii_c_kernel_in_an_ascii_locale(tmp_path):
  (tmp_path / "k.hcq").write_text('device g0 = AMD:0\nbuffer a on g0 size 64\nkernel k(out x) = c "/* größe */ void k(int *x) { x[0] = 7; }"\n'
                                  "queue q compute on g0 {\n  exec k(a)\n}\nexpect a[0:4] == i32 [7]\n")
  r = proc("run", "k.hcq", cwd=tmp_path, env={"LC_ALL": "C", "PYTHONUTF8": "0", "HCQDSL_CACHE": str(tmp_path / "cache")})
  assert r.returncode == 0 and r.stdout.splitlines()[-1] == "ok", r.stdout + r.stderr

# ---- item 5, wrong results: a kernel that forks

FORK = """device g0 = AMD:0
buffer a on g0 size 64
kernel f(out x) = c "int fork(void); void f(int *x) { fork(); x[0] += 1; }"
queue q compute on g0 {
  exec f(a)
}
"""

@needs_cc
@pytest.mark.parametrize("timeout", [10.0, None], ids=["worker", "in-process"])
def test_a_forking_kernel_is_a_fault_and_its_child_goes(timeout, tmp_path):
  r = hcqdsl.run(FORK, kernel_timeout=timeout)
  assert r.fault is not None and r.fault.line == 5 and r.fault.message == \
    "kernel `f`: forked a child process: a kernel may not create processes (the child exited at once, inside fork)"
  assert r.buffer("a", "i32")[0] == 1   # run once, by the kernel's own process: the child never came back into it

@needs_cc
def test_a_forking_kernel_leaves_no_process(tmp_path):
  (tmp_path / "f.hcq").write_text(FORK)
  r = proc("run", "f.hcq", cwd=tmp_path, timeout=60)
  assert r.returncode == 1 and r.stdout.count("forked a child process") == 1 and r.stdout.count("f.hcq: 1 launch") == 1

# ---- item 7: the tutorial's picture without Graphviz

def test_graph_svg_without_graphviz(tmp_path, monkeypatch):
  import shutil
  monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
  out = tmp_path / "deadlock.svg"
  assert cli("graph", PROGRAMS / "tutorial_deadlock.hcq", "-o", out) == (0, "", "")
  svg = out.read_text()
  assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg"') and svg.rstrip().endswith("</svg>")
  import xml.etree.ElementTree as ET
  texts = [t.text for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")]
  for want in ("c0 (compute)", "x0 (copy)", "16: wait copied >= kick", "24: signal copied = kick",
               "needs copied >= 1 (launch 1): never", "gpu0 (AMD:0 gfx1100)"):
    assert want in texts, want
  assert svg.count('stroke="#d62728"') >= 4   # both waits and both never-arrows in check's red
  assert cli("graph", PROGRAMS / "tutorial_deadlock.hcq", "-o", tmp_path / "d.png") == \
    (2, "", f"hcqdsl: error: {tmp_path / 'd.png'}: Graphviz `dot` is not installed (apt-get install graphviz), or write .svg or .dot\n")
