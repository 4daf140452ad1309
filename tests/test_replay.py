"""Witness replay: `check --witness` writes the interleaving of each race and deadlock, `run --replay` runs exactly that
order on the emulator and shows what each access saw and left (or the hang); also `hcqdsl.witnesses` / `hcqdsl.replay`."""
import json, pathlib
import attrs
from hypothesis import given, settings, HealthCheck, strategies as st
from cli_run import cli
from check_gen import programs
import hcqdsl
from hcqdsl.check.witness import read_witness, describe

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

# ---- the witness format: WITNESS (check/witness.py) writes and reads every witness check finds

# the host patches `n` (launch k: k) into the kernel arguments at each implicit submit, with nothing ordering launch 2's
# patch after launch 1's exec
KERNARGS = """device gpu0 = AMD:0 gfx1100
buffer act on gpu0 size 64
var n
kernel produce(out dst, u32 n) = builtin fill<u32>(7)
queue c0 compute on gpu0 {
  exec produce(act, n)
}
"""

def test_a_race_on_kernel_arguments_replays(tmp_path):
  f, w = tmp_path / "k.hcq", tmp_path / "w.json"
  f.write_text(KERNARGS)
  assert cli("check", str(f), "--witness", str(w))[0] == 1
  (x,) = json.loads(w.read_text())["witnesses"]
  assert (x["buffer"], x["first"]["queue"], x["first"]["launch"], x["then"]["queue"], x["then"]["launch"]) == (
    "the kernel arguments of `exec produce` (c0 line 6)", "host", 2, "c0", 1)
  rc, out, err = cli("run", str(f), "--replay", str(w))
  ka = "the kernel arguments of `exec produce` (c0 line 6)[8:12]"   # the patched `n` in the exec's block
  assert (rc, err) == (1, "") and out.split("\n") == [
    "race at line 5: host's implicit submit (launch 2) before c0's `exec produce(act, n)` (line 6, launch 1): replayed",
    f"  1. host's implicit submit left {ka} = 02 00 00 00",
    f"  2. c0 line 6 read {ka} = 02 00 00 00",
    f"  in the program's order (line 6 first): c0 line 6 read {ka} = 01 00 00 00; host's implicit submit left {ka} = 02 00 00 00",
    "  the race happened: c0 line 6 reads 02 00 00 00 here and 01 00 00 00 in the program's order",
    f"{f}: 1 witness replayed, 1 seen happening", ""]

def test_a_race_on_kernel_arguments_replays_through_the_api():
  # the host's `submit` of launch 2 patches `pos` (launch 1: 0, launch 2: 1) and x's address while launch 1's execs read
  text = (PROGRAMS / "jit_decode_no_host_wait.hcq").read_text()
  prog = hcqdsl.parse(text, "j.hcq")
  put, red = hcqdsl.replay(prog, hcqdsl.witnesses(prog, hcqdsl.check(prog, 2), 2))
  assert put.happened and red.happened
  assert red.lines[-1] == "  the race happened: c0 line 22 reads 02 00 00 00 here and 01 00 00 00 in the program's order"
  assert put.lines[-1].startswith("  the race happened: c0 line 21 reads 00 30 00 00 00 10 00 00 01 00 00 00 here and ")

def test_a_deadlock_at_a_poll_replays():
  text = (PROGRAMS / "deadlock_poll_undone.hcq").read_text()
  prog = hcqdsl.parse(text, "p.hcq")
  w = hcqdsl.witnesses(prog, hcqdsl.check(prog, 1), 1)
  assert [b["signal"] for x in w["witnesses"] for b in x["blocked"]] == ["cq[60:64]"]   # the polled word
  (r,) = hcqdsl.replay(prog, w)
  assert r.happened and "at line 23: `poll cq[60:64] & 16777216 == 16777216` (launch 1)" in str(r)

def _read_back(prog, w: dict, kinds: dict) -> None:
  """`w` reads back through WITNESS into records equal to it; each witness counted by its kind."""
  assert attrs.asdict(read_witness(json.loads(json.dumps(w)), prog)) == w
  for x in w["witnesses"]:
    kind = x["code"] + (" on kernel arguments" if x.get("buffer", "").startswith("the kernel arguments of") else
                        " at a poll" if any("[" in b["signal"] for b in x.get("blocked", ())) else "")
    kinds[kind] = kinds.get(kind, 0) + 1

def test_every_witness_of_the_programs_reads_back():
  kinds: dict = {}
  for path in sorted(PROGRAMS.glob("*.hcq")):
    try: prog = hcqdsl.parse(path.read_text(), path.name)
    except hcqdsl.HcqError: continue   # the programs showing parse and bounds errors have no launches to witness
    for n in (1, 2, 3): _read_back(prog, hcqdsl.witnesses(prog, hcqdsl.check(prog, n), n), kinds)
  assert kinds == {"race": 24, "race on kernel arguments": 4, "deadlock": 18, "deadlock at a poll": 3}   # (newcomer_three_queues: 9)

def test_every_witness_of_generated_programs_reads_back():
  kinds: dict = {}
  @settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None)
  @given(st.data())
  def each(data):
    text = data.draw(programs(symbolic=data.draw(st.booleans()), polls=data.draw(st.booleans())))
    prog = hcqdsl.parse(text, "g.hcq")
    for n in (1, 2, 3): _read_back(prog, hcqdsl.witnesses(prog, hcqdsl.check(prog, n), n), kinds)
  each()
  assert set(kinds) == {"race", "race on kernel arguments", "deadlock", "deadlock at a poll"}, kinds
  assert sum(kinds.values()) > 500, kinds

def test_docs_describe_the_witness_format():
  """docs/check.md lists the witness file as WITNESS declares it (hcqdsl.check.witness.describe())."""
  assert describe() in (PROGRAMS.parent / "docs" / "check.md").read_text()
