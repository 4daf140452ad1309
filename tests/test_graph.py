"""`hcqdsl graph`: DOT structure (lanes, signal edges, highlighted diagnostics) and the CLI's outputs."""
import pathlib, re
from hcqdsl.lang.parse import parse_syntax
from hcqdsl import parse
from hcqdsl.check import check
from hcqdsl.graph import to_dot, signal_edges
from hcqdsl.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1] / "programs"

def load(name):
  return parse((ROOT / name).read_text(), f"programs/{name}")

def edges(dot):
  return re.findall(r"^  (n\d+_\d+) -> (n\d+_\d+) \[(.*)\];$", dot, re.M)

def test_signal_edges_follow_the_satisfying_write():
  p = load("tutorial_fixed.hcq")
  e, _, blocked, u = signal_edges(p, launches=2)
  # queue c0 is sequence 1, x0 is 2: `signal filled` (x0 waits, same launch), `signal copied` (c0 waits, next launch)
  assert e == {(1, 2, 2, 0): {(1, 1), (2, 2)}, (2, 2, 1, 0): {(1, 2)}} and not blocked
  dot = to_dot(p, check(p, 2), launches=2)
  labels = {(a, b): attrs for a, b, attrs in edges(dot)}
  assert 'label="filled >= kick"' in labels[("n1_2", "n2_0")]
  assert 'label="copied >= kick - 1 (next launch)"' in labels[("n2_2", "n1_0")] and "dashed" in labels[("n2_2", "n1_0")]
  assert "#d62728" not in dot   # a clean program has nothing red
  assert 'subgraph "cluster_dev_gpu0"' in dot and 'label="c0 (compute)"' in dot and 'label="16: wait copied >= kick - 1"' in dot

def test_deadlock_cycle_is_red():
  p = load("tutorial_deadlock.hcq")
  dot = to_dot(p, check(p, 2), launches=2)
  red = set(re.findall(r'^\s+(n\d+_\d+) \[label="[^"]*", color="#d62728"', dot, re.M))
  assert red == {"n1_0", "n2_0"}   # both blocked waits
  never = {(a, b) for a, b, attrs in edges(dot) if "never" in attrs}
  assert never == {("n2_2", "n1_0"), ("n1_2", "n2_0")}   # each from the write the other wait needs: the cycle

def test_race_pair_and_unsubmitted_queue():
  p = load("race_missing_epoch.hcq")
  dot = to_dot(p, check(p, 2), launches=2)
  assert [attrs for _, _, attrs in edges(dot) if "race on a" in attrs]
  p = load("deadlock_host_submit.hcq")
  dot = to_dot(p, check(p, 2), launches=2)
  assert 'label="host"' in dot and "never submitted" in dot

def test_every_program_draws():
  for path in sorted(ROOT.glob("*.hcq")):
    p, diags = parse_syntax(path.read_text(), path.name)
    ds = check(p, 2)
    if any(d.code in ("syntax", "name") for d in ds): continue
    dot = to_dot(p, ds, launches=2)
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")

def test_cli(tmp_path, capsys):
  f = str(ROOT / "tutorial_deadlock.hcq")
  assert main(["graph", f]) == 0
  assert capsys.readouterr().out.startswith("digraph")
  assert main(["graph", f, "-o", str(tmp_path / "g.dot"), "--launches", "1"]) == 0
  assert (tmp_path / "g.dot").read_text().startswith("digraph")
  assert main(["graph", f, "-o", str(tmp_path / "g.txt")]) == 2
  bad = tmp_path / "bad.hcq"
  bad.write_text("device g = AMD:0\nqueue q compute on g {\n  wait nope >= 1\n}\n")
  assert main(["graph", str(bad)]) == 1
  assert "error[name]" in capsys.readouterr().err

def test_cli_svg(tmp_path):   # through Graphviz `dot` where it is installed, else hcqdsl's own layout
  out = tmp_path / "g.svg"
  assert main(["graph", str(ROOT / "spec_example.hcq"), "-o", str(out)]) == 0
  svg = out.read_text()
  assert "<svg" in svg and "wait done0 &gt;= kick" in svg
