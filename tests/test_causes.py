"""Root causes first (check/causes.py): consequences grouped under the cause whose checked fix removes them, fix notes
at the line where the edit goes, and no statement with an error and a warning that contradicts it."""
import json, pathlib
from cli_run import cli
import hcqdsl
from hcqdsl.check import check_text, parse
from hcqdsl.check.causes import apply_edit

PROGRAMS = pathlib.Path(__file__).parent.parent / "programs"
RESETS = (PROGRAMS / "hcqgraph_resets.hcq").read_text()
# HCQGraph without the host's waits for the previous launch: it resets the queue signals while that launch uses them
NO_WAIT = "".join(l for l in RESETS.splitlines(True) if "wait gpu0.timeline >= gpu0.epoch - 1" not in l
                  and "wait gpu1.timeline >= gpu1.epoch - 1" not in l)


def test_the_first_thing_printed_is_the_cause_and_its_fix(tmp_path):
  f = tmp_path / "g.hcq"
  f.write_text(NO_WAIT)
  rc, out, _ = cli("check", str(f))
  lines = out.split("\n")
  assert rc == 1 and lines[0].startswith(f"{f}:52:3: error[non-monotonic]: the host lowers sig_c0 from 1 to 0 at line 52")
  assert lines[3] == "  root cause: the host resets sig_c0 and sig_x1 without waiting for the previous launch, which may still use them"
  assert lines[4] == ("  fix: add `wait gpu0.timeline >= gpu0.epoch - 1` and `wait gpu1.timeline >= gpu1.epoch - 1` to the host "
                      "before line 52 (checked: with it, this error and the 6 below are gone)")
  assert "  6 consequences of this cause:" in lines
  assert out.count("error[") == 7 and out.count("\n    /") == 6 and out.endswith("failed: 7 errors, 0 warnings over 2 launches, 4 queues\n")

def test_the_fix_as_written_makes_the_program_check_clean():
  text = NO_WAIT.split("\n")
  assert text[51] == "  signal sig_c0 = 0"            # line 52: where the fix note says the edit goes
  fixed = "\n".join(text[:51] + ["  wait gpu0.timeline >= gpu0.epoch - 1", "  wait gpu1.timeline >= gpu1.epoch - 1"] + text[51:])
  assert check_text(fixed, "g.hcq") == []
  root = next(d for d in check_text(NO_WAIT, "g.hcq") if d.fix is not None and "root_cause" in d.extra)
  assert hcqdsl.check(apply_edit(parse(NO_WAIT, "g.hcq"), root.fix)) == []

def test_json_and_sarif_keep_every_diagnostic_linked_by_cause(tmp_path):
  f = tmp_path / "g.hcq"
  f.write_text(NO_WAIT)
  ds = json.loads(cli("check", str(f), "--format", "json")[1])["diagnostics"]
  root = next(d for d in ds if "root_cause" in d)
  assert len(ds) == 7 and root["cause_of"] == 6 and "cause" not in root
  assert [d["cause"] for d in ds if "cause" in d] == [{"code": "non-monotonic", "file": str(f), "line": 52, "column": 3}] * 6
  sarif = json.loads(cli("check", str(f), "--format", "sarif")[1])
  res = sarif["runs"][0]["results"]
  assert len(res) == 7 and sum("cause" in r.get("properties", {}) for r in res) == 6

def test_a_race_fix_for_the_implicit_submit_goes_inside_the_host_block():
  text = ("device gpu0 = AMD:0 gfx1100\nbuffer a on gpu0 size 4K\nsignal produced on gpu0\nvar kick\n"
          "kernel k(out a, u32 n)\n\nqueue c0 compute on gpu0 {\n  exec k(a, kick)\n  signal produced = kick\n}\n\n"
          "host {\n  signal produced = 0\n}\n")
  race = next(d for d in check_text(text, "k.hcq") if d.code == "race")
  assert race.span.line == 12   # the host block, whose implicit submit patches the kernel arguments
  assert race.message.startswith("the host writes the kernel arguments of `exec k` (c0 line 8) when it submits c0 "
                                 "(implicitly, before its first statement) (launch 2) and c0 reads")
  assert race.notes[0] == ("add `wait produced >= kick - 1` in the host at the start of its block, before line 13 (its "
                           "submit is implicit) (c0 signals it at line 9, after its access)")

def test_no_error_and_contradicting_warning_on_one_statement():
  ov = check_text("device gpu0 = AMD:0 gfx1100\nsignal s on gpu0\nqueue c0 compute on gpu0 {\n  wait s >= 4294967296\n}\n", "o.hcq")
  assert [(d.code, d.severity) for d in ov] == [("overflow", "error")]
  for p in sorted(PROGRAMS.glob("*.hcq")):
    ds = check_text(p.read_text(), str(p))
    errs = {d.span.line for d in ds if d.severity == "error" and d.code in ("deadlock", "overflow") and d.span}
    assert not [d for d in ds if d.code == "redundant-wait" and d.span.line in errs], p

def test_every_program_groups_only_what_its_fix_removes():
  # over programs/: each consequence's root exists, and a root's fix applied leaves none of its consequences
  roots = 0
  for p in sorted(PROGRAMS.glob("*.hcq")):
    ds = check_text(p.read_text(), str(p))
    by_key = {d.key(): d for d in ds}
    for d in ds:
      if d.cause is None: continue
      root = by_key[d.cause]
      after = {(x.code, x.span.line, x.span.column) for x in hcqdsl.check(apply_edit(parse(p.read_text(), str(p)), root.fix))}
      assert (d.code, d.span.line, d.span.column) not in after, (p, d)
    roots += sum("root_cause" in d.extra for d in ds)
  assert roots >= 1
