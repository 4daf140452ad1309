"""`hcqdsl parse|fmt|check|compile|disasm|run|emit|lift|capture|graph`. Exit codes: 0 clean, 1 diagnostics with errors (or a failed
run), 2 unusable invocation (missing file, bad flag)."""
from __future__ import annotations
import argparse, difflib, gc, json, os, re, sys, pathlib
from operator import attrgetter
from typing import Optional
from .diagnostics import render_text, render_json, render_sarif, has_errors, summary, Diagnostic
from .cliutil import UsageError, read_source, parse_vars, check_vars, add_var_arg

__all__ = ["main", "build_parser"]

MAX_PER_CODE = 20  # warnings of one code printed in full by `check` (text)

_LAUNCHES = re.compile(r"^\s*#\s*hcq:.*\blaunches=([0-9]+)\b", re.M)

def header_launches(text: str) -> int:
  """`# hcq: launches=N` (as the pytest plugin and `hcqdsl lift` write it), else 0."""
  # the regex from the start of each `hcq:` candidate's line only: searching a 30 MB program whole takes 0.3 s
  p = text.find("hcq:")
  while p >= 0:
    k = text.rfind("#", 0, p)
    m = _LAUNCHES.match(text, text.rfind("\n", 0, k) + 1) if k >= 0 else None
    if m: return int(m.group(1)) if int(m.group(1)) >= 1 else 0
    p = text.find("hcq:", p + 4)
  return 0

# ---- subcommands

def cmd_parse(a) -> int:
  from .syntax import parse_with_diagnostics
  from .dump import program_to_json, program_to_tree
  text = read_source(a.file)
  prog, diags = parse_with_diagnostics(text, a.file)
  if diags: sys.stderr.write(render_text(diags, {a.file: text}))
  if prog is None or has_errors(diags): return 1
  sys.stdout.write(json.dumps(program_to_json(prog), indent=2) + "\n" if a.json else program_to_tree(prog))
  return 0

def cmd_fmt(a) -> int:
  from .syntax import parse_syntax, format_program
  rc, changed = 0, 0
  for path in a.files:
    text = read_source(path)
    prog, diags = parse_syntax(text, path)
    if prog is None or any(d.code == "syntax" for d in diags):
      sys.stderr.write(render_text([d for d in diags if d.code == "syntax"], {path: text}))
      sys.stderr.write(f"error: cannot format {path}\n"); rc = 1; continue
    new = format_program(prog)
    if new == text: continue
    changed += 1
    if a.diff:
      sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True), path, path))
    if a.check or a.diff:
      if a.check: sys.stderr.write(f"would reformat {path}\n")
      continue
    pathlib.Path(path).write_text(new)
    sys.stderr.write(f"reformatted {path}\n")
  if a.check and changed: rc = max(rc, 1)
  n = len(a.files) - changed
  sys.stderr.write(f"{changed} file{'s' * (changed != 1)} {'would be ' if a.check or a.diff else ''}reformatted, {n} left unchanged\n")
  return rc

def cmd_check(a) -> int:
  # the IR of a big program is millions of acyclic objects: the cyclic GC would rescan them over and over
  enabled = gc.isenabled()
  gc.disable()
  try: return _check(a)
  finally:
    if enabled: gc.enable()

def _check(a) -> int:
  from .check import check_source
  var_values = parse_vars(a.var)
  if a.launches is not None and a.launches < 1: raise UsageError("--launches must be at least 1")
  if a.max_diagnostics < 0: raise UsageError("--max-diagnostics must be at least 0")
  if a.max_states < 1: raise UsageError("--max-states must be at least 1")
  diags: list[Diagnostic] = []
  sources, queues, launches = {}, 0, set()
  a.kept = []   # the programs live on until main's hard exit: freeing a big one object by object takes ~0.3 s
  for path in a.files:
    sources[path] = text = read_source(path)
    launches.add(n := a.launches or header_launches(text) or 2)
    prog, d = check_source(text, path, n, var_values, pre=lambda p: check_vars(var_values, p, path), max_states=a.max_states)
    diags += d
    a.kept.append((prog, d))
    queues = queues + len(prog.queues) if prog is not None and queues is not None else None
  if a.format == "json": print(render_json(diags))
  elif a.format == "sarif": print(render_sarif(diags))
  else:
    sys.stdout.write(render_text(diags, sources, a.max_diagnostics))
    print(summary(diags, max(launches) if queues is not None and launches else None, queues))
  # a verdict cut short by --max-states is not a pass
  return 1 if has_errors(diags) or "incomplete" in map(attrgetter("code"), diags) else 0

def build_parser(command: Optional[str] = None) -> argparse.ArgumentParser:
  """The whole CLI. With `command`, the other subcommands that live in their own modules (which import numpy,
  the AMD tables or tinygrad) are listed without their arguments, so `hcqdsl check` does not pay for loading them."""
  ap = argparse.ArgumentParser(prog="hcqdsl", description="A language and toolchain for AMD hardware command queues.")
  from . import __version__
  ap.add_argument("--version", action="version", version=f"hcqdsl {__version__}")
  sub = ap.add_subparsers(dest="command", metavar="COMMAND")
  sub.required = True
  p = sub.add_parser("parse", help="parse a program and print its IR as an indented tree")
  p.add_argument("file", help="a .hcq program")
  p.add_argument("--json", action="store_true", help="print the IR as JSON (every node with its kind, fields and span)")
  p.set_defaults(run=cmd_parse)
  p = sub.add_parser("fmt", help="format programs in place (like black)")
  p.add_argument("files", nargs="+", help=".hcq programs to rewrite in canonical form")
  p.add_argument("--check", action="store_true", help="exit 1 if a file would change; write nothing")
  p.add_argument("--diff", action="store_true", help="print a diff instead of writing")
  p.set_defaults(run=cmd_fmt)
  p = sub.add_parser("check", help="find deadlocks, races and signal-ordering errors")
  p.add_argument("files", nargs="+", help=".hcq programs to check")
  p.add_argument("--launches", type=int, help="consecutive launches to analyse (default: the file's `# hcq: launches=N`, else 2)")
  add_var_arg(p)
  p.add_argument("--format", choices=("text", "json", "sarif"), default="text",
                 help="text (default: capped per code, then a summary line), or every diagnostic as JSON or SARIF 2.1.0")
  p.add_argument("--max-diagnostics", type=int, default=MAX_PER_CODE, metavar="N",
                 help=f"text: print the first N warnings of each code in full, then count the rest (default {MAX_PER_CODE}; 0 shows all)")
  from .check.analyze import MAX_STATES
  p.add_argument("--max-states", type=int, default=MAX_STATES, metavar="N",
                 help=f"skeleton states to explore outside the happens-before fragment before the verdict is "
                      f"incomplete (exit 1; default {MAX_STATES})")
  p.set_defaults(run=cmd_check)
  import importlib
  for name, module, helptext in (("compile", "compile", "compile to AMD command buffers"),
                                 ("disasm", "disasm", "disassemble command buffers"),
                                 ("run", "runtime.cli", "run a program on the built-in AMD emulator"),
                                 ("emit", "emit", "emit .hcq from a tinygrad schedule"),
                                 ("lift", "lift", "lift an image or a raw dump (manifest) to a checkable .hcq program"),
                                 ("capture", "capture", "run a tinygrad script and record what it submits as a manifest"),
                                 ("graph", "graph", "draw a program's queues and signals (DOT/SVG)")):
    p = sub.add_parser(name, help=helptext)
    if command is not None and command != name: continue
    mod = importlib.import_module(f"hcqdsl.{module}")
    getattr(mod, f"add_{name}_args")(p)
    p.set_defaults(run=getattr(mod, f"cli_{name}"))
  return ap

def main(argv: Optional[list] = None) -> int:
  from_shell = argv is None
  argv = sys.argv[1:] if from_shell else list(argv)
  ap = build_parser(next((x for x in argv if not x.startswith("-")), None))
  a = ap.parse_args(argv)
  try: rc = a.run(a)
  except UsageError as e:
    sys.stderr.write(f"hcqdsl: error{f'[{e.code}]' if e.code else ''}: {e}\n")
    return 2
  except KeyboardInterrupt: return 130
  except BrokenPipeError: return 0
  if from_shell and a.command == "check":
    # like mypy's hard_exit: freeing a million-statement program object by object takes a second; the process ends
    # here anyway (check writes no files; its output is flushed)
    try: sys.stdout.flush(); sys.stderr.flush()
    except BrokenPipeError: pass
    os._exit(rc)
  return rc

if __name__ == "__main__": sys.exit(main())
