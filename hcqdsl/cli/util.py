"""What every subcommand shares: usage errors, reading a source file and its `# hcq:` header, and `--var NAME=VALUE`."""
from __future__ import annotations
import argparse, pathlib
import attrs
from ..ir import U32_MAX, MAX_LAUNCHES
from ..diagnostics import did_you_mean
from ..header import read_header, HeaderError

__all__ = ["UsageError", "read_source", "launches_of", "launches_arg", "check_output", "write_output", "writable_output", "add_format_arg",
           "output_format", "add_script_args", "script_of", "precheck_launches",
           "parse_vars", "check_vars", "did_you_mean", "add_var_arg", "add_no_check_arg",
           "warn_check_errors"]

class UsageError(Exception):
  """Unusable invocation: printed as `hcqdsl: error: ...` (`hcqdsl: error[code]: ...` with a code), exit 2."""
  def __init__(self, message: str, code: str = ""):
    super().__init__(message)
    self.code = code

def read_bytes(path: str) -> bytes:
  """A file's bytes; a missing file, a directory or a device is a usage error."""
  p = pathlib.Path(path)
  if not p.is_file(): raise UsageError(f"{path}: no such file" if not p.exists() else f"{path}: not a file")
  try: return p.read_bytes()
  except OSError as e: raise UsageError(f"{path}: {e.strerror}")

def read_source(path: str) -> str:
  return read_bytes(path).decode("utf-8", errors="replace")

def launches_of(text: str, path: str, given=None, default: int = 2) -> int:
  """`--launches` if given, else the file's `# hcq: launches=N`, else `default`; a bad header is a usage error."""
  if given is not None: return launches_arg(given)
  try: return read_header(text).get("launches", default)
  except HeaderError as e: raise UsageError(f"{path}:{e.line}:1: bad `# hcq:` header: {str(e).split(': ', 1)[1]}") from None

def check_output(out, flag: str, *inputs) -> None:
  """An output path that names an input would overwrite it: a usage error (the input is kept). An output whose
  directory is missing or not writable is one too, before any work is done."""
  from ..files import same_file
  if out is None: return
  for i in inputs:
    if i is not None and same_file(str(out), str(i)):
      raise UsageError(f"{flag} {out} is the input {i}: writing it would overwrite the input; give another file")
  writable_output(out, flag)

def writable_output(out, flag: str) -> None:
  """A usage error when `out` cannot be written (`-o missing/dir/x.hcq`), said before the work whose result it is."""
  from ..files import check_writable
  try: check_writable(str(out))
  except OSError as e: raise UsageError(f"{flag} {out}: {e.strerror}{f' ({e.filename})' if e.filename and str(e.filename) != str(out) else ''}")

def write_output(path, data) -> None:
  """Write an output atomically (hcqdsl/files.py: the old file stays whole when the write fails); a failure is a
  usage error naming the file (exit 2)."""
  from ..files import write_atomic
  try: write_atomic(str(path), data)
  except OSError as e: raise UsageError(f"{path}: {e.strerror or e}")

def launches_arg(n):
  """`--launches N` as given (None: not given); outside 1 .. MAX_LAUNCHES a usage error (check unrolls every launch,
  run emulates each: 2**63 would never end)."""
  if n is not None and n < 1: raise UsageError("--launches must be at least 1")
  if n is not None and n > MAX_LAUNCHES: raise UsageError(f"--launches must be at most {MAX_LAUNCHES}, not {n}")
  return n

def precheck_launches(text: str, path: str, launches: int = 1) -> int:
  """The launches `compile` and `run` check before they proceed: the file's `# hcq: launches=N`, else `launches` but at
  least 2 (a race between consecutive launches needs two)."""
  return launches_of(text, path, None, max(launches, 2))

def parse_vars(items) -> dict[str, int]:
  """`--var name=value` items -> {name: value}; a value outside 0 .. 2**32-1 is an `overflow` error (never wrapped)."""
  out: dict[str, int] = {}
  for it in items or ():
    name, eq, val = it.partition("=")
    try:
      if not eq or not name.strip(): raise ValueError
      v = int(val.strip().replace("_", ""), 0)
    except ValueError: raise UsageError(f"--var takes name=value with an integer value, got `{it}`")
    if not 0 <= v <= U32_MAX:
      raise UsageError(f"--var {it.strip()}: {v} is outside 32 bits (values are 0 .. {U32_MAX})", "overflow")
    if name.strip() in out:
      raise UsageError(f"--var {name.strip()} is given twice ({out[name.strip()]} and {v}): give each var once")
    out[name.strip()] = v
  return out

def check_vars(var_values: dict[str, int], program, file: str) -> None:
  """Every `--var` must name a var (or D.epoch) of the program: the same error in check, graph, run and compile."""
  from ..check import unknown_var
  if (why := unknown_var(attrs.evolve(program, file=file), var_values)) is not None: raise UsageError(f"--var: {why}", "name")

def add_format_arg(p, what: str, choices=("text", "json"), json_alias: bool = False) -> None:
  """`--format text|json` (and `sarif` where a command has it): every command that reports takes the same option.
  `json_alias`: the old `--json` flag still works, deprecated (a warning says so)."""
  p.add_argument("--format", choices=choices, default="text", help=f"{what}: {', '.join(choices[:-1])} or {choices[-1]} (default text)")
  if json_alias: p.add_argument("--json", action="store_true", help="deprecated: the same as --format json")

def output_format(a) -> str:
  """The `--format` asked for (`--json`, deprecated, is `--format json`, with a warning on stderr)."""
  import sys
  if getattr(a, "json", False):
    sys.stderr.write("hcqdsl: warning: --json is deprecated: use --format json\n")
    if a.format not in ("text", "json"): raise UsageError(f"--json and --format {a.format} disagree: give --format alone")
    return "json"
  return a.format

def add_var_arg(p) -> None:
  p.add_argument("--var", action="append", metavar="NAME=VALUE",
                 help="pin a var (or D.epoch) to VALUE (0 .. 2**32-1) in every launch; repeatable")

def add_no_check_arg(p) -> None:
  p.add_argument("--no-check", action="store_true",
                 help="do not run `hcqdsl check`'s analyses first (nor print the line saying the program has check errors)")

def warn_check_errors(program, file: str, launches: int = 2, var_values=None, out=None) -> int:
  """For `compile` and `run`: one stderr line when `check` over `launches` (precheck_launches) finds errors in the
  program (they still proceed).
  Returns the number of errors."""
  import sys
  from ..check import check
  errs = [d for d in check(program, launches, var_values) if d.severity == "error"]
  if errs:
    codes = ", ".join(sorted({d.code for d in errs}))
    (out or sys.stderr).write(f"hcqdsl: warning: {file} has {len(errs):,} check error{'s' * (len(errs) != 1)} ({codes}); "
                              f"run `hcqdsl check {file}` (--no-check silences this)\n")
  return len(errs)

def add_script_args(p, first=()) -> None:
  """SCRIPT.py[:FN] and the script's own arguments (capture, sanitize); `first`: (flag args, kwargs) of the command's
  own options. They are recognized before SCRIPT and after it up to `--`; everything after `--` is the script's."""
  p.add_argument("script", help="SCRIPT.py (run as __main__) or SCRIPT.py:FN (import it, then call FN())")
  for args, kw in first: p.add_argument(*args, **kw)
  p.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments (sys.argv[1:]): after SCRIPT this command's own options "
                                                         "are still recognized up to `--`; everything after `--` is the script's")
  p.set_defaults(script_options=tuple(first), command_name=p.prog.split()[-1])

# the `--` after SCRIPT, kept as a word for script_of (argparse would drop it, and where it drops it differs by version)
SCRIPT_DASHES = "\0--"
SCRIPT_COMMANDS = ("capture", "sanitize")

def mark_script_dashes(argv: list, command) -> list:
  """`argv` with the first `--` after a script command's first argument marked as SCRIPT_DASHES."""
  if command not in SCRIPT_COMMANDS or "--" not in argv: return argv
  i = argv.index(command) + 1
  at = next((j for j in range(i + 1, len(argv)) if argv[j] == "--"), None)
  return argv if at is None else argv[:at] + [SCRIPT_DASHES] + argv[at + 1:]

class _OwnOptions(argparse.ArgumentParser):
  """The command's own options, read again from the words after SCRIPT: a bad value is a usage error, not an exit."""
  def error(self, message: str): raise UsageError(message)

def _negative_number(w: str) -> bool: return w[:1] == "-" and w[1:2].isdigit()

def script_of(a) -> tuple[pathlib.Path, str, list[str]]:
  """(script path, function name or '', the script's argv[1:]) from add_script_args' arguments; a missing file is a usage
  error. The words after SCRIPT up to `--` may hold the command's own options (`hcqdsl sanitize train.py --format json`):
  they are the command's, the other words the script's; an option that is not the command's is a usage error (the
  script's own options go after `--`), never handed to the script silently."""
  from ..tinygrad.script import split_script
  if a.script == SCRIPT_DASHES: raise UsageError("SCRIPT comes before `--` (everything after `--` is the script's)")
  path, fn = split_script(a.script)
  if not pathlib.Path(path).is_file(): raise UsageError(f"{path}: no such file")
  words = list(a.args)
  if words[:1] == ["--"]: words = words[1:]   # (an API caller's namespace, not marked)
  cut = SCRIPT_DASHES if SCRIPT_DASHES in words else None
  head, tail = (words[:words.index(cut)], words[words.index(cut) + 1:]) if cut else (words, [])
  own = _OwnOptions(prog=f"hcqdsl {getattr(a, 'command_name', '')}", add_help=False, allow_abbrev=False)
  for args, kw in getattr(a, "script_options", ()): own.add_argument(*args, **{**kw, "default": argparse.SUPPRESS})
  ns, rest = own.parse_known_args(head)
  for k, v in vars(ns).items(): setattr(a, k, v)
  if (bad := next((w for w in rest if w[:1] == "-" and w != "-" and not _negative_number(w)), None)) is not None:
    cmd = getattr(a, "command_name", "")
    raise UsageError(f"{bad}: not an option of `hcqdsl {cmd}`; the script's own options go after `--` "
                     f"(hcqdsl {cmd} {a.script} -- {bad} ...)")
  return pathlib.Path(path), fn, rest + tail
