"""`hcqdsl check FILES`: deadlocks, races and signal-ordering errors, as text, JSON or SARIF."""
from __future__ import annotations
import gc, sys
from typing import Optional
from operator import attrgetter
from ..header import read_header
from ..diagnostics import render_text, render_json, render_sarif, has_errors, summary, Diagnostic
from .util import UsageError, read_source, launches_of, launches_arg, parse_vars, check_vars, add_var_arg, check_output

MAX_PER_CODE = 20  # warnings of one code printed in full (text)

def add_args(p) -> None:
  p.add_argument("files", nargs="*", help=".hcq programs to check")
  p.add_argument("--explain", metavar="CODE", help="what a diagnostic code means, an example, and how to fix it")
  p.add_argument("--launches", type=int, help="consecutive launches to analyse (default: the file's `# hcq: launches=N`, else 2)")
  add_var_arg(p)
  p.add_argument("--format", choices=("text", "json", "sarif"), default="text",
                 help="text (default: capped per code, then a summary line), or every diagnostic as JSON or SARIF 2.1.0")
  p.add_argument("--max-diagnostics", type=int, default=MAX_PER_CODE, metavar="N",
                 help=f"text: print the first N warnings of each code in full, then count the rest (default {MAX_PER_CODE}; 0 shows all)")
  p.add_argument("--witness", metavar="W.json",
                 help="write, for each race and deadlock, the interleaving that exhibits it (`hcqdsl run FILE --replay W.json` runs it)")
  from ..check.pipeline import MAX_STATES
  p.add_argument("--max-states", type=int, default=MAX_STATES, metavar="N",
                 help=f"skeleton states to explore outside the happens-before fragment before the verdict is "
                      f"incomplete (exit 1; default {MAX_STATES})")

def run(a) -> int:
  # the IR of a big program is millions of acyclic objects: the cyclic GC would rescan them over and over
  enabled = gc.isenabled()
  gc.disable()
  try: return _check(a)
  finally:
    if enabled: gc.enable()

def _check(a) -> int:
  from ..check import check_source
  if a.explain is not None:
    from ..diagnostics import RULES, explain, did_you_mean
    if a.explain not in RULES:
      raise UsageError(f"--explain: `{a.explain}` is no diagnostic code{did_you_mean(a.explain, RULES)} (codes: {', '.join(RULES)})")
    sys.stdout.write(explain(a.explain))
    return 0
  if not a.files: raise UsageError("check takes one or more .hcq programs (or --explain CODE)")
  var_values = parse_vars(a.var)
  launches_arg(a.launches)
  if a.max_diagnostics < 0: raise UsageError("--max-diagnostics must be at least 0")
  if a.max_states < 1: raise UsageError("--max-states must be at least 1")
  if a.witness and len(a.files) != 1: raise UsageError("--witness takes one program (a witness file is for one program)")
  if a.witness: check_output(a.witness, "--witness", a.files[0])
  diags: list[Diagnostic] = []
  sources: dict[str, str] = {}
  queues: Optional[int] = 0   # None: some program was not analysed (the summary names no queue count)
  launches: set[int] = set()
  a.kept = []   # the programs live on until main's hard exit: freeing a big one object by object takes ~0.3 s
  a.unrolled = []   # and the analyses' unrolled programs (~0.13 s to free at 1M statements)
  for path in a.files:
    sources[path] = text = read_source(path)
    launches.add(n := launches_of(text, path, a.launches))
    prog, d = check_source(text, path, n, var_values, pre=lambda p: check_vars(var_values, p, path), max_states=a.max_states,
                           keep=a.unrolled)
    diags += d
    a.kept.append((prog, d))
    # the summary's "over N launches, Q queues" only when the analyses ran (no syntax or name errors stopped them)
    ran = prog is not None and not any(x.code in ("syntax", "name") and x.severity == "error" for x in d)
    queues = queues + len(prog.queues) if ran and prog is not None and queues is not None else None
  if a.witness:
    import json
    from ..check.witness import witnesses
    prog = a.kept[0][0]
    w = witnesses(prog, diags, max(launches), var_values, file=a.files[0])
    try:   # (closed here: a full disk's error comes at the close, and is not lost)
      with open(a.witness, "w") as f: f.write(json.dumps(w, indent=1) + "\n")
    except OSError as e: raise UsageError(f"{a.witness}: {e.strerror or e}")
    sys.stderr.write(f"wrote {a.witness}: {len(w['witnesses'])} witness{'es' * (len(w['witnesses']) != 1)} "
                     f"(replay with `hcqdsl run {a.files[0]} --replay {a.witness}`)\n")
  if a.format == "json": print(render_json(diags))
  elif a.format == "sarif": print(render_sarif(diags))
  else:
    sys.stdout.write(render_text(diags, sources, a.max_diagnostics))
    line = summary(diags, max(launches) if queues is not None and launches else None, queues)
    unlifted = sum(read_header(sources[f]).get("unlifted", 0) for f in a.files if "unlifted=" in sources[f])
    print(line + (f"; NOT CHECKED: {unlifted:,} captured step{'s' * (unlifted != 1)} the lift left out (its `# note:` lines; "
                  f"`hcqdsl lift --whole` lifts every step)" if unlifted else ""))
  # a verdict cut short by --max-states is not a pass
  return 1 if has_errors(diags) or "incomplete" in map(attrgetter("code"), diags) else 0
