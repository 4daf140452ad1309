"""Witness replay: `check --witness` writes the interleaving of each race and deadlock, `run --replay` runs exactly that
order on the emulator and shows what each access saw and left (or the hang); also `hcqdsl.witnesses` / `hcqdsl.replay`."""
import json, pathlib
from conftest import cli
import hcqdsl

PROGRAMS = pathlib.Path(__file__).parent.parent / "programs"
# the README's pipeline, shortened, with x1's `wait done0 >= kick` deleted: its copy may read `a` before fill writes it
RACY = """device gpu0 = AMD:0 gfx1100
buffer a on gpu0 size 64
buffer b on gpu0 size 64
signal done0 on gpu0
var kick
kernel fill(out dst) = builtin fill<u32>(7)
queue c0 compute on gpu0 {
  exec fill(a)
  signal done0 = kick
}
queue x1 copy on gpu0 {
  copy b <- a
}
host {
  wait done0 >= kick
}
"""
ZEROS = "00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 ..."
SEVENS = "07 00 00 00 07 00 00 00 07 00 00 00 07 00 00 00 ..."


def test_check_writes_the_witness_and_run_replays_the_race(tmp_path):
  f, w = tmp_path / "r.hcq", tmp_path / "w.json"
  f.write_text(RACY)
  rc, _, err = cli("check", str(f), "--launches", "1", "--witness", str(w))
  assert rc == 1 and err == f"wrote {w}: 1 witness (replay with `hcqdsl run {f} --replay {w}`)\n"
  wit = json.loads(w.read_text())["witnesses"]
  assert [(x["code"], x["first"]["queue"], x["first"]["line"], x["then"]["queue"], x["then"]["line"]) for x in wit] == [
    ("race", "x1", 12, "c0", 8)]
  rc, out, _ = cli("run", str(f), "--replay", str(w))
  assert rc == 1 and out.split("\n") == [
    "race at line 12: x1's `copy b <- a` (line 12, launch 1) before c0's `exec fill(a)` (line 8, launch 1): replayed",
    f"  1. x1 line 12 read a[0:64] = {ZEROS}",
    f"  2. c0 line 8 left a[0:64] = {SEVENS}",
    f"  in the program's order (line 8 first): c0 line 8 left a[0:64] = {SEVENS}; x1 line 12 read a[0:64] = {SEVENS}",
    f"  the race happened: x1 line 12 reads {ZEROS} here and {SEVENS} in the program's order",
    f"{f}: 1 witness replayed, 1 seen happening", ""]

def test_a_write_write_race_lands_in_the_witness_order():
  text = (PROGRAMS / "run_race.hcq").read_text()
  prog = hcqdsl.parse(text, "run_race.hcq")
  (r,) = hcqdsl.replay(prog, hcqdsl.witnesses(prog, hcqdsl.check(prog, 1), 1))
  assert r.happened and r.lines[-1] == ("  the race happened: a[0:16] ends 01 00 00 00 01 00 00 00 01 00 00 00 01 00 00 00 "
                                        "here and 02 00 00 00 02 00 00 00 02 00 00 00 02 00 00 00 in the program's order")
  assert r.result.buffer("a", "u32").tolist() == [1, 1, 1, 1]   # q1 ran first, q0's write landed last

def test_a_cross_launch_race_is_replayed():
  # launch 2's producer runs before launch 1's consumer reads (`race_missing_epoch`): an order no seed needs to find
  text = (PROGRAMS / "race_missing_epoch.hcq").read_text().replace("kernel fill(out dst)", "kernel fill(out dst) = builtin iota<u32>")
  prog = hcqdsl.parse(text, "m.hcq")
  (r,) = hcqdsl.replay(prog, hcqdsl.witnesses(prog, hcqdsl.check(prog, 2), 2))
  assert r.happened and r.lines[0] == ("race at line 14: c0's `exec fill(a)` (line 14, launch 2) before c1's "
                                       "`exec use(a)` (line 20, launch 1): replayed")

def test_a_deadlock_is_replayed_as_the_hang(tmp_path):
  f, w = tmp_path / "d.hcq", tmp_path / "w.json"
  f.write_text((PROGRAMS / "run_deadlock.hcq").read_text())
  assert cli("check", str(f), "--witness", str(w))[0] == 1
  rc, out, _ = cli("run", str(f), "--replay", str(w))
  lines = out.split("\n")
  assert rc == 1 and lines[0] == "deadlock at line 8: replayed in time order" and lines[1] == "hang: no queue can progress"
  assert "at line 8: `wait t >= 1` (launch 1)" in out

def test_an_order_the_emulator_cannot_run_is_not_reproduced():
  prog = hcqdsl.parse(RACY, "r.hcq")
  w = hcqdsl.witnesses(prog, hcqdsl.check(prog, 1), 1)
  x = w["witnesses"][0]
  # ask for c0's `signal done0` (line 9) before the host's wait for it: the host cannot pass its wait first
  x["first"], x["then"] = dict(x["then"], queue="host", line=15, launch=1), dict(x["first"], queue="c0", line=9)
  (r,) = hcqdsl.replay(prog, w)
  assert not r.happened and r.lines[0].endswith("not reproduced: the emulator cannot run that order (the held queue was the only one left)")

def test_a_clean_program_has_no_witness_and_bad_files_are_usage_errors(tmp_path):
  f, w = tmp_path / "c.hcq", tmp_path / "w.json"
  f.write_text((PROGRAMS / "run_pipeline.hcq").read_text())
  assert cli("check", str(f), "--witness", str(w))[0] == 0 and json.loads(w.read_text())["witnesses"] == []
  assert cli("run", str(f), "--replay", str(w))[:2] == (0, f"{f}: 0 witnesses replayed, 0 seen happening\n")
  w.write_text("[1, 2]")
  assert cli("run", str(f), "--replay", str(w)) == (2, "", f"hcqdsl: error: {w}: not a witness file (write one with "
                                                          f"`hcqdsl check FILE --witness {w}`)\n")
  assert cli("check", str(f), str(f), "--witness", str(w))[2] == "hcqdsl: error: --witness takes one program (a witness file is for one program)\n"
