"""`hcqdsl fuzz`: random multi-device tinygrad programs on tinygrad's mock GPU, each sanitized and its findings
confirmed, failing ones shrunk, findings grouped by cause (hcqdsl/tinygrad/fuzz.py, docs/fuzz.md)."""
from __future__ import annotations
import json, pathlib, sys, time
from .util import UsageError

def add_args(p) -> None:
  p.add_argument("--programs", type=int, default=20, metavar="N", help="programs to generate (default 20)")
  p.add_argument("--seed", type=int, default=0, metavar="S", help="the campaign's seed: program k of seed S is always the same text")
  p.add_argument("--time", type=float, default=3600.0, metavar="T", help="seconds: no new program starts after T (default 3600)")
  p.add_argument("--paths", default="classic,hcq2", help="tinygrad's paths, comma-separated: classic, hcq2, nv (default classic,hcq2)")
  p.add_argument("--out", default="fuzz-out", metavar="DIR", help="where the programs, results.jsonl and reproductions go (default fuzz-out)")
  p.add_argument("--no-confirm", action="store_true", help="sanitize only (no --confirm runs)")
  p.add_argument("--shrink", action="store_true", help="shrink the first program of each confirmed cause to a reproduction")
  p.add_argument("--format", choices=("text", "json"), default="text", help="the summary: text (default) or one JSON object")
  p.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")

def run(a) -> int:
  from ..tinygrad.fuzz import Campaign, PATHS, summary, shrink
  paths = [x.strip() for x in a.paths.split(",") if x.strip()]
  if not paths or any(x not in PATHS for x in paths): raise UsageError(f"--paths takes {', '.join(PATHS)} (comma-separated), not `{a.paths}`")
  if a.programs < 1: raise UsageError("--programs must be at least 1")
  if not a.time > 0: raise UsageError("--time must be a positive number of seconds")
  def progress(line: str) -> None:
    if not a.quiet: sys.stderr.write(line + "\n")
  t0 = time.perf_counter()
  c = Campaign(a.seed, a.programs, a.time, paths, pathlib.Path(a.out), progress=progress, confirm=not a.no_confirm)
  results = c.run()
  sm = summary(results)
  sm["seconds"] = round(time.perf_counter() - t0, 1)
  sm["shrunk"] = shrink(results, pathlib.Path(a.out), c.env_of, progress) if a.shrink else {}
  line = (f"{sm['programs']} programs, {sm['findings']} findings ({sm['confirmed']} confirmed, {len(sm['causes'])} distinct causes)")
  if a.format == "json":
    sys.stdout.write(json.dumps(dict(sm, summary=line, results=[r.to_json() for r in results])) + "\n")
    return 0
  for cause, x in sorted(sm["causes"].items()):
    sys.stdout.write(f"  {cause}: {x['findings']} findings in {x['programs']} runs, {x['confirmed']} confirmed, "
                     f"{x.get('not-observed', 0)} not observed, {x.get('not-tried', 0)} not tried\n")
  for cause, x in sm["shrunk"].items():
    size = f" ({x['statements'][0]} -> {x['statements'][1]} statements)" if x["statements"] else ""
    sys.stdout.write(f"  shrunk `{cause}`: {x['test'] or x['why']}{size}\n")
  sys.stdout.write(f"  {sm['errors']} runs failed (tinygrad's own errors or invalid programs), {sm['wrong']} computed wrong numbers on the mock, "
                   f"{sm['unconfirmed_where_right']} had an unconfirmed finding where tinygrad computed right\n")
  sys.stdout.write(line + f" in {sm['seconds']:.0f} s\n")
  return 0
