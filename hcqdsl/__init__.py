"""hcqdsl: a language and toolchain for AMD hardware command queues.

    prog = hcqdsl.parse(text, filename="x.hcq")   # raises hcqdsl.HcqError with diagnostics
    hcqdsl.format(prog)                           # canonical text
    hcqdsl.check(prog, launches=2)                # list of Diagnostic
"""
from .ir import *  # noqa: F401,F403  (the IR classes are part of the API)
from .ir import __all__ as _ir_all
from .diagnostics import Diagnostic, Related, HcqError, render_text, render_json, render_sarif
from .syntax import parse, parse_file, format_program as format, parse_with_diagnostics
from .check import check, check_text

__version__ = "0.1.0"
__all__ = list(_ir_all) + ["Diagnostic", "Related", "HcqError", "render_text", "render_json", "render_sarif",
                           "parse", "parse_file", "format", "parse_with_diagnostics", "check", "check_text"]
