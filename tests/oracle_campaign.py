"""The oracle campaign: `check` against the reference semantics (tests/reference.py) on many generated programs,
comparing each error's lines and launches (test_check_oracle.agree), collecting every disagreement instead of
stopping at the first. The slow tests run it derandomized or with a fixed seed; from the command line it draws
programs with any seed and prints the figures docs/reliability.md records:

  python tests/oracle_campaign.py --launches 3 --n 1500 --seed 31 [--polls] [--size max_body=3] [--save DIR]
"""
from __future__ import annotations
import argparse, collections, pathlib, sys, time
from hypothesis import given, settings, seed as hseed, HealthCheck
from hcqdsl import parse
from hcqdsl.check import check
from hcqdsl.check.unroll import unroll
from hcqdsl.check.hb import happens_before
from check_gen import programs
from reference import verdicts, from_diagnostics

# per launch count: generator sizes that keep the literal explorer's state space small (it has no reduction)
SIZES = {1: dict(max_queues=4, max_body=4, max_host=4, padding=2), 2: dict(max_queues=3, max_body=3, max_host=3, padding=2),
         3: dict(max_queues=3, max_body=2, max_host=3, padding=1), 4: dict(max_queues=3, max_body=2, max_host=2, padding=1)}
POLL_SIZES = {1: dict(max_queues=3, max_body=4, max_host=3, padding=1, polls=True),
              2: dict(max_queues=3, max_body=3, max_host=2, padding=1, polls=True),
              3: dict(max_queues=3, max_body=2, max_host=2, polls=True),
              4: dict(max_queues=3, max_body=2, max_host=2, polls=True)}

CODES = ("deadlock", "race", "signal-race", "non-monotonic", "overflow")

def agree(got: dict, want: dict, why=()) -> None:
  """`check`'s reports (from_diagnostics) against the reference's verdicts, on each error's lines and launches: the
  same set of errors, each at the first launch where it shows, and every (line, launch) a report names (a race's
  two accesses, a deadlock's related waits, a lowering write's uses) an instance the reference semantics have."""
  assert got["incomplete"] == 0, why
  for code in CODES:
    if code == "deadlock":   # every blocked wait line; the first launch of those reported as a cause
      assert got[code].keys() == want[code].keys(), (code, *why)
      assert all(k is None or k == want[code][line] for line, k in got[code].items()), (code, *why)
      assert all(got["deadlock@"][line] <= want["deadlock@"][line] for line in got[code]), (code, "launches", *why)
    elif code == "non-monotonic":
      assert got[code] == want[code], (code, *why)
      for line, (k, uses) in got["non-monotonic@"].items():
        first, every = want["non-monotonic@"][line]
        assert k == first and uses <= every, (code, "launches", line, *why)
    else:
      assert got[code] == want[code], (code, *why)
      if code in ("race", "signal-race"):
        assert all(got[code + "@"][key] in want[code + "@"][key] for key in got[code]), (code, "launches", *why)

class Stats:
  """What one campaign compared: programs (and distinct ones), how many check decided by happens-before alone
  (`exact`) or by exploration, how many errors of each code the reference has (all compared, with their launches),
  the polls seen (programs with one, decided by happens-before alone, with a poll deadlocking, with a race on a polled
  word or a write), and every disagreement (program text, the assertion)."""
  def __init__(self):
    self.programs, self.distinct, self.exact, self.explored = 0, set(), 0, 0
    self.errors: collections.Counter = collections.Counter()
    self.polls = collections.Counter()    # programs with a poll; a poll deadlocks; a race on a polled word or a write
    self.disagreements: list = []
  def row(self) -> str:
    return (f"{self.programs} ({len(self.distinct)}) | {self.exact} | {self.explored} | "
            f"{sum(self.errors.values())} | {len(self.disagreements)}")

def compare_one(text: str, launches: int, stats: Stats) -> None:
  prog = parse(text, "gen.hcq")
  want = verdicts(prog, launches)
  diags = check(prog, launches)
  got = from_diagnostics(diags)
  stats.programs += 1
  stats.distinct.add(text)
  for code in CODES: stats.errors[code] += len(want[code])
  exact_before = stats.exact
  if happens_before(unroll(prog, launches)).exact: stats.exact += 1
  else: stats.explored += 1
  if "  poll " in text:
    lines = text.split("\n")
    def stmt(n): return lines[n - 1].lstrip() if n is not None else ""
    stats.polls["poll"] += 1
    stats.polls["exact"] += stats.exact - exact_before   # decided by happens-before alone
    stats.polls["deadlock"] += any(stmt(n).startswith("poll ") for n in got["deadlock"])
    stats.polls["race"] += any(stmt(n).startswith(("poll ", "write ")) for key in got["race"] for n in key[0])
  try: agree(got, want, (launches,))
  except AssertionError as e: stats.disagreements.append((text, str(e).split("\n")[0][:300]))

def campaign(n: int, launches: int, polls: bool = False, seed=None, **sizes) -> Stats:
  """`n` generated programs at `launches`; derandomized when `seed` is None (the same programs every run). `sizes`
  override the generator's (check_gen.programs) for this launch count."""
  stats = Stats()
  sizes = {**(POLL_SIZES if polls else SIZES)[launches], **sizes}
  @settings(max_examples=n, deadline=None, database=None, derandomize=seed is None, suppress_health_check=list(HealthCheck))
  @given(programs(**sizes))
  def one(text): compare_one(text, launches, stats)
  if seed is not None: one = hseed(seed)(one)
  one()
  return stats

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--launches", type=int, nargs="+", default=[2, 3, 4])
  ap.add_argument("--n", type=int, default=1500)
  ap.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: derandomized)")
  ap.add_argument("--polls", action="store_true")
  ap.add_argument("--save", type=pathlib.Path, help="write each disagreeing program here")
  ap.add_argument("--size", action="append", default=[], metavar="KEY=N",
                  help="a generator size for every launch count (max_queues=4, max_body=3, ...)")
  a = ap.parse_args(argv)
  sizes = {k: int(v) for k, v in (x.split("=") for x in a.size)}
  bad = 0
  for k in a.launches:
    t = time.time()
    s = campaign(a.n, k, a.polls, a.seed, **sizes)
    print(f"| {k} | {s.row()} | {dict(s.errors)} | {dict(s.polls)} | {time.time() - t:.0f} s", flush=True)
    for n, (text, why) in enumerate(s.disagreements):
      print(f"  disagreement {n}: {why}")
      if a.save:
        a.save.mkdir(parents=True, exist_ok=True)
        (a.save / f"l{k}_s{a.seed}_{n}.hcq").write_text(text)
    bad += len(s.disagreements)
  return 1 if bad else 0

if __name__ == "__main__":
  sys.path.insert(0, str(pathlib.Path(__file__).parent))
  sys.exit(main())
