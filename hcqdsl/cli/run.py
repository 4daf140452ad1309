"""`hcqdsl run FILE`: exit 0 when every expect holds, 1 on a failed expect, hang, fault, witnessed race or a program
with errors, 2 on an unusable invocation."""
from __future__ import annotations
import json, sys
from ..ir import TARGETS, MAX_SCHEDULES
from .util import (UsageError, read_source, launches_of, launches_arg, check_output, write_output, precheck_launches, parse_vars, check_vars,
                   add_var_arg, add_no_check_arg, add_format_arg, warn_check_errors)

def add_args(p) -> None:
  p.add_argument("file", help="a .hcq program")
  p.add_argument("--launches", type=int, help="consecutive launches (default: the file's `# hcq: launches=N`, else 1; with --schedules "
                 "2, as check)")
  g = p.add_mutually_exclusive_group()
  g.add_argument("--seed", type=int, help="a random fair interleaving of the queues and the host (default: time order)")
  g.add_argument("--schedules", type=int, metavar="K",
                 help=f"run K schedules (K at most {MAX_SCHEDULES:,}): the time-ordered one, one steered by each witness of check's "
                      "races and deadlocks, the rest by "
                      "PCT (probabilistic concurrency testing); fail on a failed expect, a hang, a race of check's seen happening, or "
                      "final memory that differs")
  g.add_argument("--pct", type=int, metavar="SEED", help="run the one PCT schedule `--schedules` numbers SEED (with --depth)")
  p.add_argument("--depth", type=int, metavar="D", help="PCT: --schedules cycles the bug depth 1..D (default 3); --pct runs depth D "
                 "(d-1 priority-change points; a depth-d bug is hit with probability >= 1/(n k^(d-1)), n actors, k steps)")
  p.add_argument("--trace", metavar="FILE.json", help="write a Chrome/Perfetto trace")
  p.add_argument("--replay", metavar="W.json", help="run the interleavings `hcqdsl check FILE --witness W.json` wrote: "
                 "each race happens (what each access saw and left) or each hang; exit 1 when one does")
  p.add_argument("--target", default="gfx1100", choices=TARGETS,
                 help="arch of devices that do not declare one (default gfx1100; an NV device takes an NV target, else sm_89)")
  add_var_arg(p)
  p.add_argument("--kernels", choices=("amd", "c"), default="auto",
                 help="amd: run kernels' code objects on the RDNA3 executor; c: their C/builtin code "
                      "(default: amd on gfx11 devices, c elsewhere)")
  p.add_argument("--timeout", type=float, default=10.0, help="host wait timeout in emulated seconds (default 10)")
  p.add_argument("--indirect", action="store_true",
                 help="submit each launch as an INDIRECT_BUFFER to resident command-buffer copies patched in place "
                      "(tinygrad's bound path) instead of copying the commands onto the ring")
  add_no_check_arg(p)
  p.add_argument("--kernel-timeout", type=float, default=10.0, metavar="SECONDS",
                 help="wall-clock limit per C kernel call, which runs in a worker process so a crash or a hang is a "
                      "device fault at its exec (default 10; 0: run C kernels in this process, faster and unguarded)")
  add_format_arg(p, "the report: text, or one JSON object (`runs`: each schedule's queues, signals, expects, fault or hang; "
                 "`races`; a program with errors: `diagnostics`)")
  p.add_argument("--max-memory", metavar="SIZE", help="largest memory plan the emulator maps, e.g. 64G (default: this "
                 "machine's RAM; pages are allocated only when touched)")

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

def parse_size(text: str) -> int:
  t = text.strip().upper().removesuffix("B").removesuffix("I")
  try: n = int(float(t[:-1] if t[-1:] in _UNITS else t) * _UNITS[t[-1] if t[-1:] in "KMGT" else ""])
  except (ValueError, IndexError, OverflowError): n = -1   # (nan, inf)
  if n < 0: raise ValueError(f"--max-memory takes a size like 512M or 64G, got `{text}`")
  return n

def run(a) -> int:
  from ..diagnostics import HcqError
  from ..runtime import run as run_program
  launches_arg(a.launches)
  check_output(a.trace, "--trace", a.file, a.replay)
  for flag, v in (("--kernel-timeout", a.kernel_timeout), ("--timeout", a.timeout)):   # (nan and inf too: a wait without end)
    if not 0 <= v < float("inf"): raise UsageError(f"{flag} takes a finite number of seconds, at least 0, not {v}")
  if a.schedules is not None and a.schedules < 1: raise UsageError("--schedules must be at least 1")
  if a.schedules is not None and a.schedules > MAX_SCHEDULES:
    raise UsageError(f"--schedules must be at most {MAX_SCHEDULES:,} (each schedule is a whole run), not {a.schedules}")
  if a.depth is not None and a.depth < 1: raise UsageError("--depth must be at least 1")
  if a.depth is not None and a.schedules is None and a.pct is None: raise UsageError("--depth goes with --schedules or --pct")
  text = read_source(a.file)
  a.launches = launches_of(text, a.file, a.launches, 2 if a.schedules else 1)   # (--schedules: over check's default launches)
  var_values = parse_vars(a.var)
  try: max_memory = parse_size(a.max_memory) if a.max_memory is not None else None
  except ValueError as e: raise UsageError(str(e))
  kw = dict(launches=a.launches, target=a.target, var_values=var_values, filename=a.file, timeout_us=a.timeout * 1e6,
            kernels=a.kernels, indirect=a.indirect, max_memory=max_memory, kernel_timeout=a.kernel_timeout or None)
  try:
    from ..check import parse_with_diagnostics
    from ..diagnostics import has_errors
    prog, diags = parse_with_diagnostics(text, a.file)
    if prog is None or has_errors(diags): return _errors(a, diags, text)
    check_vars(var_values, prog, a.file)
    if a.replay: return _replay(a, prog, kw)
    if a.schedules: return _explore(a, prog, kw, text)
    if a.pct is not None:
      from ..runtime.schedules import run_pct, DEPTH
      results = [run_pct(prog, a.pct, a.depth or DEPTH, trace=bool(a.trace), **kw)]
    else: results = [run_program(prog, seed=a.seed, trace=bool(a.trace), **kw)]
  except HcqError as e:   # the run did not start (a memory plan too big, ...): that error alone, no advice about check
    return _errors(a, e.diagnostics, text)
  sys.stdout.flush()
  if not a.no_check: warn_check_errors(prog, a.file, precheck_launches(text, a.file, a.launches), var_values)
  res = results[0]
  if a.trace and res.trace is not None:
    write_output(a.trace, json.dumps(res.trace))
  if a.format == "json":
    print(json.dumps({"file": a.file, "ok": res.ok, "runs": [res.to_json()], "races": []}, indent=1))
  else: print(res.summary())
  return 0 if res.ok else 1

def _explore(a, prog, kw, text) -> int:
  """`--schedules K`: runtime/schedules.py's explore (the time-ordered schedule, check's witnesses, PCT)."""
  from ..runtime.schedules import explore, DEPTH
  e = explore(prog, a.schedules, a.depth or DEPTH, steer=not a.no_check, observe=not a.no_check, **kw)
  if a.format == "json": print(json.dumps(e.to_json(), indent=1))
  else: sys.stdout.write("\n".join(e.lines()) + "\n")
  if a.trace:   # the time-ordered schedule's
    from ..runtime import run as run_program
    write_output(a.trace, json.dumps(run_program(prog, trace=True, **kw).trace))
  sys.stdout.flush()
  if not a.no_check: warn_check_errors(prog, a.file, precheck_launches(text, a.file, a.launches), kw.get("var_values"))
  return 0 if e.ok else 1

def _errors(a, diags, text: str) -> int:
  """A program that cannot run: its errors (text, or `{"file", "ok": false, "diagnostics"}`), exit 1."""
  from ..diagnostics import render_text, Diagnostic
  if a.format == "json": print(json.dumps({"file": a.file, "ok": False, "diagnostics": [Diagnostic.to_json(d) for d in diags]}, indent=1))
  else: sys.stdout.write(render_text(diags, {a.file: text}))
  return 1

def _replay(a, prog, kw) -> int:
  from ..runtime import replay
  from ..check.witness import load_witness, read_witness
  try: w = read_witness(load_witness(a.replay), prog, a.replay)
  except ValueError as e: raise UsageError(str(e))
  kw = {k: v for k, v in kw.items() if k not in ("launches", "var_values")}   # the witness's
  if a.trace: kw["trace"] = True
  done = replay(prog, w, **kw)
  happened = sum(r.happened for r in done)
  if a.format == "json":
    print(json.dumps({"file": a.file, "happened": happened, "replays": [{"code": r.code, "happened": r.happened, "lines": r.lines}
                                                                        for r in done]}, indent=1))
  else:
    for r in done: print(r)
    print(f"{a.file}: {len(done)} witness{'es' * (len(done) != 1)} replayed, {happened} seen happening")
  if a.trace and done and done[0].result is not None and done[0].result.trace is not None:
    write_output(a.trace, json.dumps(done[0].result.trace))
  return 1 if happened else 0
