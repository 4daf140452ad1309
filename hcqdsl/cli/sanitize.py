"""`hcqdsl sanitize SCRIPT.py[:FN] [ARGS...]`: run a tinygrad script, check what its AMD runtime submits, and report
races and deadlocks with the kernel names and the script's lines of both commands (docs/sanitize.md). The findings
are printed whatever the script did — a script is sanitized *because* it fails —, followed by its own error."""
from __future__ import annotations
import json, os, sys, time
from typing import Optional
from ..tinygrad.script import run_script
from .capture import NO_DEVICE
from .util import add_script_args, script_of, UsageError

def add_args(p) -> None:
  p.add_argument("--explain", metavar="CODE", help="what a finding's code means in tinygrad's generated commands, and whose it is")
  add_script_args(p, [(("--format",), dict(choices=("text", "json"), default="text", help="the report: text (default) or one JSON object")),
                      (("--strict",), dict(action="store_true",
                                           help="exit 1 when anything captured was not checked (default: a warning on the summary line)")),
                      (("--every-call",), dict(action="store_true", help="check after every tinygrad call that submits (default: when the "
                                                                         "submissions have doubled since the last check, and at the end)")),
                      (("--keep",), dict(metavar="DIR",
                                         help="write the lifted program the findings quote to DIR/sanitized.hcq and the run's capture to "
                                              "DIR/capture.json")),
                      (("--confirm",), dict(action="store_true", help="run the script again on tinygrad's mock GPU with each finding's "
                                            "witness order forced and compare what it reads back: confirmed, not-observed or not-tried")),
                      (("--reproduce",), dict(metavar="DIR", help="for each confirmed finding, write a standalone tinygrad unittest "
                                              "to DIR that fails with the wrong numbers, minimized (implies --confirm)")),
                      (("--confirm-limit",), dict(type=int, default=None, metavar="N",
                                                  help="--confirm: the races tried (a run of the script each; default 8)")),
                      (("--quiet", "-q"), dict(action="store_true", help="no progress lines on stderr")),
                      (("--warnings", "-v"), dict(action="store_true", dest="verbose",
                                                  help="list every warning (default: per kind, its count and first places)")),
                      (("--stats",), dict(action="store_true", help="print hcqdsl's own CPU time per submission (inside its hooks), "
                                                                       "the checks made and the most steps kept live, on stderr"))])
  next(x for x in p._actions if x.dest == "script").nargs = "?"   # `hcqdsl sanitize --explain CODE` takes no script

def run(a) -> int:
  from ..tinygrad.sanitize import Sanitizer, advice
  if a.explain is not None:   # (the script is then ignored)
    from ..diagnostics import CODES, did_you_mean
    if a.explain not in CODES: raise UsageError(f"--explain: `{a.explain}` is no diagnostic code{did_you_mean(a.explain, CODES)}")
    sys.stdout.write(f"{a.explain}: {advice(a.explain)}\n")
    return 0
  if a.script is None: raise UsageError("sanitize takes SCRIPT.py[:FN] (or --explain CODE)")
  script, fn, args = script_of(a)
  a.confirm = a.confirm or a.reproduce is not None
  if a.confirm_limit is not None and (a.confirm_limit < 0 or not a.confirm): raise UsageError("--confirm-limit N (N >= 0) goes with --confirm")
  t0 = time.perf_counter()
  def progress(line: str) -> None:   # long runs only: a short script's report comes before anyone waits for it
    if not a.quiet and time.perf_counter() - t0 > 5: sys.stderr.write(line + "\n")
  # --keep resolved before the script runs: it may change the working directory
  s = Sanitizer(every_call=a.every_call, progress=progress, keep=os.path.abspath(a.keep) if a.keep is not None else None,
                retain=a.confirm or a.reproduce is not None)   # (what --confirm and --reproduce read: the run's streams)
  script_prints = StdoutToStderr(a.format == "json")
  with script_prints: return run_script(script, fn, args, s, lambda rc, err: report(a, (script, fn, args), s, rc, err, script_prints, progress))

def report(a, run_of: tuple, s, rc: int, err, script_prints: StdoutToStderr, progress) -> int:
  """The report once the script ended (also when it called os._exit), and the exit code; `run_of`: (script, function,
  arguments), as --confirm and --reproduce run it again."""
  script_prints.restore()
  script, fn, args = run_of
  for w in s.capture.warnings(): sys.stderr.write(f"hcqdsl: warning: {w}\n")
  if rc == 3 and s.failure is None:   # hcqdsl's own failure while recording: nothing trustworthy to report
    sys.stderr.write(err + "\n")
    return 3
  if s.failure is not None:
    sys.stderr.write(f"hcqdsl: internal error (not in {script}): {type(s.failure).__name__}: {s.failure}\n")
    if err: sys.stderr.write(err + "\n")
    return 3
  if not s.checked and s.hang is None:
    if err:
      sys.stderr.write(err + "\n")
      return rc
    sys.stderr.write(f"hcqdsl: error: {script}: {NO_DEVICE}\n")
    return 2
  if a.confirm and s.findings and s.failure is None:
    from ..tinygrad.confirm import confirm, LIMIT
    confirm(s, script, fn, args, progress=progress, keep=s.keep, limit=LIMIT if a.confirm_limit is None else a.confirm_limit)
  repros = None
  if a.reproduce is not None and s.findings and s.failure is None:
    from ..tinygrad.reproduce import reproduce
    repros = reproduce(s, script, fn, args, a.reproduce, progress=progress)
  if a.format == "json":
    out = json.loads(s.to_json())
    if repros is not None: out["reproductions"] = [r.to_json() for r in repros]
    sys.stdout.write(json.dumps(out) + "\n")
  else:
    sys.stdout.write(s.report(a.verbose) + "\n")
    for r in repros or []:
      sys.stdout.write(f"reproduction: {r.path} ({r.statements[1]} of the script's {r.statements[0]} statements, {r.trials} candidates, "
                       f"{r.seconds:.0f} s): fails on this tinygrad: {r.failure}\n" if r.path and r.failure else
                       f"reproduction: none for `{r.finding[:80]}`: {r.why}\n")
  if a.stats: sys.stderr.write(s.stats_line() + "\n")
  if s.hang is not None: err = f"hcqdsl: error: {script}: tinygrad gave up waiting for the GPU at {s.hang.where()} (the hang above)"
  if err: sys.stderr.write(err + "\n")
  if s.hang is not None:   # tinygrad's devices are hung: its finalizers would each wait for the GPU again (and print tracebacks)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)
  if s.findings or s.hang is not None or rc: return 1
  return 1 if a.strict and s.incomplete else 0

class StdoutToStderr:
  """While the script runs, what it prints (Python's and C's writes to file descriptor 1) goes to stderr: `--format json`
  prints one object on stdout, and a tool reading it must not find the script's prints mixed in. `restore` puts file
  descriptor 1 back (the report, also from inside the script's os._exit); leaving the block does too."""
  def __init__(self, on: bool):
    self.on = on
    self.saved: Optional[int] = None
  def __enter__(self):
    if self.on:
      sys.stdout.flush()
      self.saved = os.dup(1)
      os.dup2(2, 1)
    return self
  def restore(self) -> None:
    if self.saved is None: return
    try: sys.stdout.flush()
    except (OSError, ValueError): pass
    os.dup2(self.saved, 1)
    os.close(self.saved)
    self.saved = None
  def __exit__(self, *exc) -> None: self.restore()
