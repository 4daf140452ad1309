"""`hcqdsl parse|fmt|check|compile|disasm|run|emit|graph`. Exit codes: 0 clean, 1 diagnostics with errors (or a failed
run), 2 unusable invocation (missing file, bad flag)."""
from __future__ import annotations
import argparse, difflib, json, sys, pathlib
from typing import Optional
from .diagnostics import render_text, render_json, render_sarif, has_errors, Diagnostic

__all__ = ["main"]

class UsageError(Exception):
  """Unusable invocation: printed as `hcqdsl: error: ...`, exit 2."""

def read_source(path: str) -> str:
  p = pathlib.Path(path)
  if not p.is_file(): raise UsageError(f"{path}: no such file" if not p.exists() else f"{path}: not a file")
  try: return p.read_bytes().decode("utf-8", errors="replace")
  except OSError as e: raise UsageError(f"{path}: {e.strerror}")

def parse_vars(items) -> dict:
  out = {}
  for it in items or ():
    name, eq, val = it.partition("=")
    try:
      if not eq or not name: raise ValueError
      out[name.strip()] = int(val.replace("_", ""), 0)
    except ValueError: raise UsageError(f"--var takes name=value with an integer value, got `{it}`")
  return out

# ---- subcommands

def cmd_parse(a) -> int:
  from .syntax import parse_with_diagnostics
  from .dump import program_to_json
  text = read_source(a.file)
  prog, diags = parse_with_diagnostics(text, a.file)
  if diags: sys.stderr.write(render_text(diags, {a.file: text}))
  if prog is None or has_errors(diags): return 1
  print(json.dumps(program_to_json(prog), indent=2 if a.json else None) if a.json else repr(prog))
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
  from .check import check_text
  var_values = parse_vars(a.var)
  if a.launches < 1: raise UsageError("--launches must be at least 1")
  diags: list[Diagnostic] = []
  sources = {}
  for path in a.files:
    sources[path] = text = read_source(path)
    diags += check_text(text, path, a.launches, var_values)
  if a.format == "json": print(render_json(diags))
  elif a.format == "sarif": print(render_sarif(diags))
  else:
    sys.stdout.write(render_text(diags, sources))
    errs = sum(d.severity == "error" for d in diags)
    warns = sum(d.severity == "warning" for d in diags)
    if diags: print(f"{errs} error{'s' * (errs != 1)}, {warns} warning{'s' * (warns != 1)}")
  return 1 if has_errors(diags) else 0

def build_parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(prog="hcqdsl", description="A language and toolchain for AMD hardware command queues.")
  from . import __version__
  ap.add_argument("--version", action="version", version=f"hcqdsl {__version__}")
  sub = ap.add_subparsers(dest="command", metavar="COMMAND")
  sub.required = True
  p = sub.add_parser("parse", help="parse a program and print its IR")
  p.add_argument("file"); p.add_argument("--json", action="store_true", help="print the IR as JSON")
  p.set_defaults(run=cmd_parse)
  p = sub.add_parser("fmt", help="format programs in place (like black)")
  p.add_argument("files", nargs="+")
  p.add_argument("--check", action="store_true", help="exit 1 if a file would change; write nothing")
  p.add_argument("--diff", action="store_true", help="print a diff instead of writing")
  p.set_defaults(run=cmd_fmt)
  p = sub.add_parser("check", help="find deadlocks, races and signal-ordering errors")
  p.add_argument("files", nargs="+")
  p.add_argument("--launches", type=int, default=2, help="consecutive launches to analyse (default 2)")
  p.add_argument("--var", action="append", metavar="NAME=VALUE", help="pin a var (or D.epoch) in every launch")
  p.add_argument("--format", choices=("text", "json", "sarif"), default="text")
  p.set_defaults(run=cmd_check)
  import importlib
  for name, module, helptext in (("compile", "compile", "compile to AMD command buffers"),
                                 ("disasm", "disasm", "disassemble command buffers"),
                                 ("run", "runtime.cli", "run a program on the built-in AMD emulator"),
                                 ("emit", "emit", "emit .hcq from a tinygrad schedule"),
                                 ("graph", "graph", "draw a program's queues and signals (DOT/SVG)")):
    mod = importlib.import_module(f"hcqdsl.{module}")
    p = sub.add_parser(name, help=helptext)
    getattr(mod, f"add_{name}_args")(p)
    p.set_defaults(run=getattr(mod, f"cli_{name}"))
  return ap

def main(argv: Optional[list] = None) -> int:
  ap = build_parser()
  a = ap.parse_args(argv)
  try: return a.run(a)
  except UsageError as e:
    sys.stderr.write(f"hcqdsl: error: {e}\n")
    return 2
  except KeyboardInterrupt: return 130
  except BrokenPipeError: return 0

if __name__ == "__main__": sys.exit(main())
