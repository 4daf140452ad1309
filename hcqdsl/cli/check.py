"""`hcqdsl check FILES`: deadlocks, races and signal-ordering errors, as text, JSON or SARIF; `--fix` applies the
fixes the diagnostics suggest. FILES may be directories (every `.hcq` under them) or `-` (standard input); a file
that cannot be read is reported and the others are still checked (exit 2 at the end, as ruff does)."""
from __future__ import annotations
import gc, pathlib, sys
from typing import Optional
from operator import attrgetter
from ..header import read_header
from ..diagnostics import render_text, render_json, render_sarif, has_errors, summary, Diagnostic
from .util import (UsageError, read_source, launches_of, launches_arg, parse_vars, check_vars, add_var_arg, check_output, write_output,
                   add_format_arg)

MAX_PER_CODE = 20  # warnings of one code printed in full (text)
STDIN = "<stdin>"  # the name standard input's program is reported under (--stdin-filename)

def add_args(p) -> None:
  p.add_argument("files", nargs="*", help=".hcq programs, directories (every .hcq file under them) or - (standard input)")
  p.add_argument("--explain", metavar="CODE", help="what a diagnostic code means, an example, and how to fix it")
  p.add_argument("--launches", type=int, help="consecutive launches to analyse (default: the file's `# hcq: launches=N`, else 2)")
  add_var_arg(p)
  add_format_arg(p, "text (capped per code, then a summary line), or every diagnostic as JSON or SARIF 2.1.0, with the "
                 "edits of each fix", ("text", "json", "sarif"))
  p.add_argument("--fix", action="store_true", help="apply the fixes the diagnostics suggest (a wait added, a wait's value "
                 "changed), rewriting each file (standard input: the fixed text on stdout, the report on stderr), then report "
                 "what is left")
  p.add_argument("--stdin-filename", metavar="NAME", help=f"the name `-` (standard input) is reported under (default {STDIN})")
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

def expand(files: list[str]) -> tuple[list[str], list[str]]:
  """(the programs FILES name — a directory: every `.hcq` under it, sorted, none under a hidden directory; `-`:
  standard input —, warnings for directories holding none)."""
  out, warn = [], []
  for f in files:
    p = pathlib.Path(f)
    if f != "-" and p.is_dir():
      found = sorted(str(x) for x in p.rglob("*.hcq") if x.is_file() and not any(part.startswith(".") for part in x.relative_to(p).parts[:-1]))
      if not found: warn.append(f"hcqdsl: warning: {f}: no .hcq files under it")
      out += found
    else: out.append(f)
  if out.count("-") > 1: raise UsageError("`-` (standard input) is given more than once")
  return out, warn

def _read(path: str, name: str) -> str:
  if path != "-": return read_source(path)
  return sys.stdin.buffer.read().decode("utf-8", errors="replace")

def _check(a) -> int:
  if a.explain is not None:
    from ..diagnostics import RULES, explain, did_you_mean
    if a.explain not in RULES:
      raise UsageError(f"--explain: `{a.explain}` is no diagnostic code{did_you_mean(a.explain, RULES)} (codes: {', '.join(RULES)})")
    sys.stdout.write(explain(a.explain))
    return 0
  if not a.files: raise UsageError("check takes one or more .hcq programs, directories or - (or --explain CODE)")
  var_values = parse_vars(a.var)
  launches_arg(a.launches)
  if a.max_diagnostics < 0: raise UsageError("--max-diagnostics must be at least 0")
  if a.max_states < 1: raise UsageError("--max-states must be at least 1")
  paths, warnings = expand(a.files)
  for line in warnings: sys.stderr.write(line + "\n")
  if a.witness and len(paths) != 1: raise UsageError("--witness takes one program (a witness file is for one program)")
  if a.witness: check_output(a.witness, "--witness", *(p for p in paths if p != "-"))
  name = {p: (a.stdin_filename or STDIN) if p == "-" else p for p in paths}
  diags: list[Diagnostic] = []
  sources: dict[str, str] = {}
  queues: Optional[int] = 0   # None: some program was not analysed (the summary names no queue count)
  launches: set[int] = set()
  unusable = False            # a file that could not be read: exit 2 once the others are checked
  fixed_stdin: Optional[str] = None
  a.kept = []   # the programs live on until main's hard exit: freeing a big one object by object takes ~0.3 s
  a.unrolled = []   # and the analyses' unrolled programs (~0.13 s to free at 1M statements), a dict per file
  for path in paths:
    try: prog, d, text, n = _one(a, path, name[path], var_values)
    except UsageError as e:
      sys.stderr.write(f"hcqdsl: error{f'[{e.code}]' if e.code else ''}: {e}\n")
      unusable = True
      continue
    if a.fix and path == "-": fixed_stdin = text
    sources[name[path]] = text
    launches.add(n)
    diags += d
    a.kept.append((prog, d))
    # the summary's "over N launches, Q queues" only when the analyses ran (no syntax or name errors stopped them)
    ran = prog is not None and not any(x.code in ("syntax", "name") and x.severity == "error" for x in d)
    queues = queues + len(prog.queues) if ran and prog is not None and queues is not None else None
  if not a.kept: return 2   # nothing could be read: the errors above are the report
  if a.witness:
    import json
    from ..check.witness import witnesses
    prog = a.kept[0][0]
    wit = witnesses(prog, diags, max(launches), var_values, file=name[paths[0]])
    write_output(a.witness, json.dumps(wit, indent=1) + "\n")
    sys.stderr.write(f"wrote {a.witness}: {len(wit['witnesses'])} witness{'es' * (len(wit['witnesses']) != 1)} "
                     f"(replay with `hcqdsl run {paths[0]} --replay {a.witness}`)\n")
  out = sys.stdout
  if fixed_stdin is not None:   # the fixed program is stdout's; the report goes to stderr
    sys.stdout.write(fixed_stdin)
    out = sys.stderr
  if a.format in ("json", "sarif"):
    from ..check.fixes import text_edits
    progs = {p.file: p for p, _ in a.kept if p is not None}
    def edits(d: Diagnostic) -> list:
      prog = progs.get(d.span.file) if d.span is not None else None
      return text_edits(prog, d.fix) if prog is not None and d.fix is not None else []
    out.write((render_json(diags, edits) if a.format == "json" else render_sarif(diags, fixes=edits)) + "\n")
  else:
    out.write(render_text(diags, sources, a.max_diagnostics))
    line = summary(diags, max(launches) if queues is not None and launches else None, queues)
    unlifted = sum(read_header(t).get("unlifted", 0) for t in sources.values() if "unlifted=" in t)
    out.write(line + (f"; NOT CHECKED: {unlifted:,} captured step{'s' * (unlifted != 1)} the lift left out (its `# note:` lines; "
                      f"`hcqdsl lift` without `--folded-only` lifts every step)" if unlifted else "") + "\n")
  if unusable: return 2
  # a verdict cut short by --max-states is not a pass
  return 1 if has_errors(diags) or "incomplete" in map(attrgetter("code"), diags) else 0

def kept(a) -> dict:
  """A dict for one analysis's intermediate results, held in `a.unrolled` until the process's hard exit."""
  keep: dict = {}
  a.unrolled.append(keep)
  return keep

def _one(a, path: str, name: str, var_values: dict) -> tuple:
  """Check one program (and fix it with --fix): (program, diagnostics, its text as checked, launches)."""
  from ..check import check_source
  text = _read(path, name)
  n = launches_of(text, name, a.launches)
  def pre(p): check_vars(var_values, p, name)
  prog, d = check_source(text, name, n, var_values, pre=pre, max_states=a.max_states, keep=kept(a))
  if a.fix and prog is not None:
    from ..check.fixes import fix_text, fixable
    if fixable(d):
      res = fix_text(text, name, n, var_values, a.max_states, diagnostics=d,
                     check=lambda t: check_source(t, name, n, var_values, pre=pre, max_states=a.max_states)[1])
      if res.applied:
        if path != "-": write_output(path, res.text)
        for f in res.applied: sys.stderr.write(f"fixed {name}: {f}\n")
        text = res.text
        prog, d = check_source(text, name, n, var_values, pre=pre, max_states=a.max_states, keep=kept(a))
  return prog, d, text, n
