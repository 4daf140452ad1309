"""`hcqdsl sanitize SCRIPT.py[:FN] [ARGS...]`: run a tinygrad script, check what its AMD runtime submits, and report
races and deadlocks with the kernel names and the script's lines of both commands (docs/sanitize.md). The findings
are printed whatever the script did — a script is sanitized *because* it fails —, followed by its own error."""
from __future__ import annotations
import json, os, sys, time
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
                      (("--quiet", "-q"), dict(action="store_true", help="no progress lines on stderr"))])
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
  s = Sanitizer(every_call=a.every_call, progress=progress, keep=a.keep)
  rc, err = run_script(script, fn, args, s)
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
    confirm(s, script, fn, args, progress=progress, keep=a.keep, limit=LIMIT if a.confirm_limit is None else a.confirm_limit)
  repros = None
  if a.reproduce is not None and s.findings and s.failure is None:
    from ..tinygrad.reproduce import reproduce
    repros = reproduce(s, script, fn, args, a.reproduce, progress=progress)
  if a.format == "json":
    out = json.loads(s.to_json())
    if repros is not None: out["reproductions"] = [r.to_json() for r in repros]
    sys.stdout.write(json.dumps(out) + "\n")
  else:
    sys.stdout.write(s.report() + "\n")
    for r in repros or []:
      sys.stdout.write(f"reproduction: {r.path} ({r.statements[1]} of the script's {r.statements[0]} statements, {r.trials} candidates, "
                       f"{r.seconds:.0f} s): fails on this tinygrad: {r.failure}\n" if r.path and r.failure else
                       f"reproduction: none for `{r.finding[:80]}`: {r.why}\n")
  if s.hang is not None: err = f"hcqdsl: error: {script}: tinygrad gave up waiting for the GPU at {s.hang.where()} (the hang above)"
  if err: sys.stderr.write(err + "\n")
  if s.hang is not None:   # tinygrad's devices are hung: its finalizers would each wait for the GPU again (and print tracebacks)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)
  if s.findings or s.hang is not None or rc: return 1
  return 1 if a.strict and s.incomplete else 0
