"""What the default lift of a capture finds, against `--whole` and `--folded-only` of the same capture (docs/lift.md,
"The default lift: every step"): every finding of either must be one of the default lift's. Findings are compared by
the capture steps their statements stand for — a queue statement by its submission's step and its place among the
submission's statements (every lift lifts a submission to the same statements), a host statement by its steps —
mapped onto the default lift's statements (a statement of the repeated launches stands for one step per launch: the same statement).

  python tests/lift_verdicts.py CAPTURE.json ...    # a table: per capture, per code, the findings of each lift, and
                                                    # those of --whole and --folded-only the default lift misses
"""
from __future__ import annotations
import collections, pathlib, re, sys, tempfile
import hcqdsl
from hcqdsl.ir import Queue, Host
from hcqdsl.header import read_header
from hcqdsl.lift.manifest import lift_file

CODES = ("deadlock", "race", "signal-race", "non-monotonic", "stale-input", "visibility")
_LAUNCH = re.compile(r"\(launch (\d+)\)")

def lifted(manifest, mode: str, where: pathlib.Path):
  """(program, its diagnostics over its launches, the lift's trace) of one lift: `default`, `whole` or `folded`."""
  trace: dict = {}
  kw = {"whole": {"whole": True}, "folded": {"folded_only": True}}.get(mode, {})
  where.mkdir(parents=True, exist_ok=True)
  text = hcqdsl.format(lift_file(str(manifest), str(where / f"{mode}.hcq"), trace=trace, **kw))
  prog = hcqdsl.parse(text, str(where / f"{mode}.hcq"))
  return prog, hcqdsl.check(prog, read_header(text).get("launches", 1)), trace

def _statements(prog) -> dict:
  """line -> ("queue", name, index, statement) | ("host", block, index, statement)."""
  out, hosts = {}, 0
  for d in prog.decls:
    if isinstance(d, Queue):
      for i, st in enumerate(d.body): out[st.span.line] = ("queue", d.name, i, st)
    elif isinstance(d, Host):
      for i, st in enumerate(d.body): out[st.span.line] = ("host", hosts, i, st)
      hosts += 1
  return out

class Steps:
  """A lift's statements as capture steps, per launch: `of(line, launch)` -> what the statement stands for in it.
  `default`: the default lift's trace, for a --folded-only lift (its queues are the default lift's repeated launches,
  launch k of them the default lift's launch k + 1 when it has a launch before them)."""
  def __init__(self, prog, trace: dict, default: dict = None):
    self.stmts, self.trace = _statements(prog), trace
    if "instances" in trace: self.queues, self.host = trace["instances"], trace["host_instances"]
    elif default is not None:
      shift = min((min(v) for q, v in default.get("instances", {}).items() if q in trace["queues"]), default=1) - 1
      if "instances" not in default: default = {"instances": {q: {1: [st, a]} for q, [(_, _, st, a)] in default["queues"].items()},
                                                "host_instances": [[{1: x} for x in default["host"]]]}
      self.queues = {q: {k - shift: v for k, v in default["instances"][q].items()} for q in trace["queues"]}
      self.host = [next(({k - shift: v for k, v in x.items()} for x in [b[0]] if shift + 1 in x) and
                        [{k - shift: v for k, v in x.items()} for x in b] for b in default["host_instances"] if b and shift + 1 in b[0])]
    else:   # (--whole: one launch)
      self.queues = {q: {1: [step, start]} for q, [(_, _, step, start)] in trace["queues"].items()}
      self.host = [[{1: steps} for steps in trace["host"]]]
  def of(self, line: int, launch: int):
    kind, name, i, st = self.stmts[line]
    if kind == "host": return ("host", tuple(self.host[name][i][launch]))
    return ("queue", self.queues[name][launch][0], i)   # (every lift lifts a submission to the same statements)
  def template(self) -> dict:
    """what a statement stands for in any launch -> (its line, that launch)."""
    out = {}
    for line, (kind, name, i, st) in self.stmts.items():
      launches = self.host[name][i] if kind == "host" else self.queues.get(name, {})
      for k in launches: out[self.of(line, k)] = (line, k)
    return out

def findings(diags, steps: Steps, codes=CODES) -> list:
  """(code, main statement, the statements it names) of each finding, each statement as what it stands for."""
  out = []
  for d in diags:
    if d.code not in codes or d.span is None or d.span.line not in steps.stmts: continue
    main = steps.of(d.span.line, d.extra.get("launch", 1))
    named = {main}
    for r in d.related:
      m = _LAUNCH.search(r.message)
      if r.span is not None and r.span.line in steps.stmts and m: named.add(steps.of(r.span.line, int(m.group(1))))
    out.append((d.code, main, frozenset(named)))
  return out

def missed(theirs: list, ours: list, ours_template: dict) -> tuple:
  """(their findings none of ours is, those of them past our first deadlock): a finding is matched by one of the same
  code whose statements (as the default lift's statements, whatever the launch) include the main statement's, and for
  a race or signal race both. A finding whose statements all run in launches after one where ours deadlocks is in no
  execution of ours: a ring runs its submissions in order (the default lift's repeated launches keep each ring's one
  queue), while --whole makes every submission a queue of its own."""
  def line(x):
    return ours_template.get(x, (("unmapped", x), 0))[0]
  mine = collections.defaultdict(list)
  for code, main, named in ours: mine[code].append({line(x) for x in named | {main}})
  stuck = min((ours_template[main][1] for code, main, _ in ours if code == "deadlock" and main in ours_template), default=None)
  out, after = [], []
  for code, main, named in theirs:
    want = {line(x) for x in (named if code in ("race", "signal-race") else {main})}
    if any(want <= got for got in mine[code]): continue
    if stuck is not None and all(x in ours_template and ours_template[x][1] > stuck for x in named): after.append((code, main, named))
    else: out.append((code, main, named))
  return out, after

def compare(manifest) -> dict:
  """Per lift, the findings per code; and the findings of `whole` and `folded` the default lift misses."""
  with tempfile.TemporaryDirectory() as d:
    got = {mode: lifted(manifest, mode, pathlib.Path(d)) for mode in ("default", "whole", "folded")}
  steps = {mode: Steps(prog, trace, got["default"][2] if mode == "folded" else None) for mode, (prog, _, trace) in got.items()}
  found = {mode: findings(got[mode][1], steps[mode]) for mode in got}
  template = steps["default"].template()
  both = {mode: missed(found[mode], found["default"], template) for mode in ("whole", "folded")}
  before = missed(found["whole"], found["folded"], steps["folded"].template())   # (what the folded lift, the old default, missed)
  return {"counts": {mode: collections.Counter(c for c, _, _ in f) for mode, f in found.items()},
          "missed": {mode: x[0] for mode, x in both.items()}, "after_deadlock": {mode: x[1] for mode, x in both.items()},
          "folded_missed": before[0] + before[1]}

def main(argv) -> int:
  bad = 0
  print("| capture | " + " | ".join(CODES) + " | missed (whole, folded) | whole's after a deadlock | whole's the folded lift misses |")
  print("| --- | " + " | ".join("---" for _ in CODES) + " | --- | --- | --- |")
  for m in argv:
    r = compare(m)
    cells = [" / ".join(str(r["counts"][mode][c]) for mode in ("default", "whole", "folded")) for c in CODES]
    miss = (len(r["missed"]["whole"]), len(r["missed"]["folded"]))
    bad += sum(miss)
    print(f"| {pathlib.Path(m).stem} | " + " | ".join(cells) + f" | {miss[0]}, {miss[1]} | {len(r['after_deadlock']['whole'])} | "
          f"{len(r['folded_missed'])} |", flush=True)
    for mode in ("whole", "folded"):
      for x in r["missed"][mode][:5]: print(f"  missed ({mode}): {x}")
  return 1 if bad else 0

if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
