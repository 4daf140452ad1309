"""`hcqdsl parse|fmt|check|compile|disasm|run|emit|lift|capture|sanitize|graph|diff|fuzz`. Exit codes: 0 clean, 1 diagnostics with errors (or a failed
run, or differences from `diff`), 2 unusable invocation (missing file, bad flag), 3 an internal error (a bug: one line, no traceback).

The conventions of ruff, mypy and rustc (README, "CLI conventions"): options are never abbreviated (`--launch` is not
`--launches`), an unknown option is reported with its subcommand's usage, `check -` reads standard input and `check DIR`
every .hcq under DIR, every command that reports takes `--format text|json` (check also `sarif`)."""
from __future__ import annotations
import argparse, importlib, os, sys
from typing import Optional
from .util import UsageError

__all__ = ["main", "build_parser", "COMMANDS"]

# subcommand -> its help line; each is the module hcqdsl.cli.NAME with `add_args(parser)` and `run(args) -> exit code`
COMMANDS = {
  "parse": "parse a program and print its IR as an indented tree",
  "fmt": "format programs in place (like black)",
  "check": "find deadlocks, races and signal-ordering errors",
  "compile": "compile to AMD (PM4/SDMA) or NVIDIA (pushbuffer methods, QMDs) command buffers",
  "disasm": "disassemble AMD or NVIDIA command buffers",
  "run": "run a program on the built-in emulator of AMD and NVIDIA queues",
  "emit": "emit .hcq from a tinygrad schedule",
  "lift": "lift an image or a raw dump (manifest) to a checkable .hcq program",
  "capture": "run a tinygrad script and record what it submits as a manifest",
  "sanitize": "run a tinygrad script and report the races and deadlocks of what it submits",
  "graph": "draw a program's queues and signals (DOT/SVG)",
  "diff": "launch by launch, what differs between two programs (e.g. emitted vs captured)",
  "lsp": "the language server for editors (stdio; needs pygls: pip install \"hcqdsl[lsp]\")",
  "fuzz": "random multi-device tinygrad programs on the mock GPU: sanitized, confirmed, grouped by cause",
}

def build_parser(command: Optional[str] = None) -> argparse.ArgumentParser:
  """The whole CLI. With `command`, only that subcommand's module is imported (the others pull in numpy, the AMD
  tables or tinygrad) and the rest are listed without their arguments, so `hcqdsl check` does not pay for them."""
  ap = argparse.ArgumentParser(prog="hcqdsl", allow_abbrev=False,
                               description="A language and toolchain for the hardware command queues of AMD and NVIDIA GPUs.")
  from .. import __version__
  ap.add_argument("--version", action="version", version=f"hcqdsl {__version__}")
  sub = ap.add_subparsers(dest="command", metavar="COMMAND")
  sub.required = True
  for name, helptext in COMMANDS.items():
    p = sub.add_parser(name, help=helptext, description=helptext[:1].upper() + helptext[1:] + ".", allow_abbrev=False)
    if command is not None and command != name: continue
    mod = importlib.import_module(f"{__name__}.{name}")
    mod.add_args(p)
    p.set_defaults(run=mod.run)
  return ap

def subparser(ap: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
  """The parser of subcommand `name`."""
  action = next(x for x in ap._actions if isinstance(x, argparse._SubParsersAction))
  return action.choices[name]

def unrecognized(p: argparse.ArgumentParser, extra: list[str]) -> None:
  """Exit 2 with the subcommand's usage and what it did not take: an unknown option by itself (with the closest of the
  subcommand's own), else the extra arguments (`hcqdsl run: error: unrecognized option --launch (did you mean
  `--launches`?)`)."""
  from ..diagnostics import did_you_mean
  opts = [x.split("=", 1)[0] for x in extra if x.startswith("-") and x != "-"]
  if opts:
    known = [s for act in p._actions for s in act.option_strings]
    p.error(f"unrecognized option{'s' * (len(opts) > 1)} {' '.join(opts)}{did_you_mean(opts[0], known)}")
  p.error(f"unrecognized arguments: {' '.join(extra)}")

def main(argv: Optional[list[str]] = None) -> int:
  from_shell = argv is None
  argv = sys.argv[1:] if argv is None else list(argv)
  for stream in (sys.stdout, sys.stderr):   # a locale that cannot encode a source's text (LC_ALL=C): escaped, not a crash
    if hasattr(stream, "reconfigure") and (stream.encoding or "").lower().replace("-", "") != "utf8": stream.reconfigure(errors="backslashreplace")
  command = next((x for x in argv if not x.startswith("-")), None)
  ap = build_parser(command)
  from .util import mark_script_dashes
  a, extra = ap.parse_known_args(mark_script_dashes(argv, command))
  if extra: unrecognized(subparser(ap, a.command), extra)
  try: rc = a.run(a)
  except UsageError as e:
    sys.stderr.write(f"hcqdsl: error{f'[{e.code}]' if e.code else ''}: {e}\n")
    return 2
  except KeyboardInterrupt: return 130
  except BrokenPipeError: return 0
  except Exception as e:
    # a bug of ours: one line naming it rather than a traceback (HCQDSL_TRACEBACK=1 shows the traceback)
    if os.environ.get("HCQDSL_TRACEBACK"): raise
    sys.stderr.write(f"hcqdsl: internal error: {type(e).__name__}: {e} (please report it with the input; "
                     f"HCQDSL_TRACEBACK=1 shows where)\n")
    return 3
  if from_shell and a.command == "check":
    # like mypy's hard_exit: freeing a million-statement program object by object takes a second; the process ends
    # here anyway (the files check writes, --fix and --witness, are written and closed by now; its output is flushed)
    try:
      sys.stdout.flush()
      sys.stderr.flush()
    except BrokenPipeError: pass
    os._exit(rc)
  return rc

if __name__ == "__main__": sys.exit(main())
