"""hcqdsl: a language and toolchain for the hardware command queues of AMD and NVIDIA GPUs.

    prog = hcqdsl.parse(text, filename="x.hcq")   # raises hcqdsl.HcqError with diagnostics
    hcqdsl.format(prog)                           # canonical text
    hcqdsl.check(prog, launches=2)                # list of Diagnostic
    hcqdsl.apply_fixes(text, hcqdsl.check_text(text))   # the text with the diagnostics' fixes (hcqdsl.fix_text: check --fix)
    img = hcqdsl.compile_program(prog, "gfx942")  # command buffers (AMD: PM4/SDMA, NV: pushbuffers), patches, memory plan
    hcqdsl.disasm_image(img); hcqdsl.as_hcq(img)  # the listing; the queues lifted back (either vendor, by each device)
    hcqdsl.run(prog, launches=3, seed=1)          # the built-in emulator (AMD and NV queues)
    hcqdsl.replay(prog, hcqdsl.witnesses(prog, hcqdsl.check(prog), 2))   # check's races and hangs, seen happen
    hcqdsl.explore(prog, 50, launches=2)          # 50 schedules: check's witnesses, then PCT (`run --schedules 50`)
    hcqdsl.emit(*tensors)                         # a Program from a tinygrad schedule
    hcqdsl.to_dot(prog)                           # the picture
    hcqdsl.lift_file("dump.json")                 # a Program from an image or a raw dump manifest (docs/lift.md)
    with hcqdsl.capture("run.json"): ...          # record what tinygrad submits to AMD queues, as a manifest
    with hcqdsl.sanitize() as s: ...              # ... and check it: s.findings, s.report() (docs/sanitize.md)
    hcqdsl.sanitize_script("train.py", confirm_findings=True)   # ... a script, each finding's witness forced on the mock
"""
__version__ = "0.1.0"   # the one place (pyproject.toml reads it; `--version` and SARIF print it)

from .ir import *  # noqa: F401,F403  (the IR classes are part of the API)
from .ir import __all__ as _ir_all
from .diagnostics import Diagnostic, Related, HcqError, TextEdit, render_text, render_json, render_sarif
from .lang.format import format_program as format  # noqa: A004  (the API's name, `hcqdsl.format(prog)`)
from .check import parse, parse_file, parse_with_diagnostics, check, check_text

# stages that pull in numpy, the AMD tables or tinygrad load on first use: name -> module
_LAZY = {"compile_program": "vendors", "Image": "target.image", "disasm_image": "vendors", "as_hcq": "lift.image",
         "run": "runtime", "run_schedules": "runtime", "explore": "runtime", "replay": "runtime", "witnesses": "check.witness",
         "RunResult": "runtime", "to_dot": "graph",
         "emit_jit": "tinygrad.emit",
         "lift_image": "lift.image", "lift_manifest": "lift.manifest", "load_manifest": "lift.manifest",
         "lift_file": "lift.manifest", "Capture": "tinygrad.capture",
         "sanitize": "tinygrad.sanitize", "Sanitizer": "tinygrad.sanitize", "sanitize_script": "tinygrad.confirm",
         "apply_fixes": "check.fixes", "fix_text": "check.fixes", "text_edits": "check.fixes", "FixResult": "check.fixes"}
_MODULES = {"emit": "tinygrad.emit", "capture": "tinygrad.capture"}  # callable modules: `hcqdsl.emit(*tensors)`, `hcqdsl.capture(path)`

_TINYGRAD = ("emit", "emit_jit")  # the user builds tensors next: tinygrad's CPU device and compiler are set up first

def __getattr__(name: str):
  import importlib
  if name in _TINYGRAD: importlib.import_module(".tinygrad.env", __name__).prepare()
  if name in _MODULES: return importlib.import_module(f".{_MODULES[name]}", __name__)
  if name in _LAZY: return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
  raise AttributeError(f"module 'hcqdsl' has no attribute {name!r}")

__all__ = list(_ir_all) + ["Diagnostic", "Related", "HcqError", "TextEdit", "render_text", "render_json", "render_sarif",
                           "parse", "parse_file", "format", "parse_with_diagnostics", "check", "check_text"] + list(_MODULES) + list(_LAZY)
