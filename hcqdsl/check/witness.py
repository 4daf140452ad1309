"""Witnesses: for each race and deadlock `check` reports, the interleaving that exhibits it, as JSON that
`hcqdsl run FILE --replay W.json` (hcqdsl.runtime.replays) executes on the emulator.

A race's witness is an order the program does not forbid: the access that comes later in the program (later launch,
then later line) runs to its end before the earlier one starts; everything else runs in the emulator's time order.
A deadlock's witness names the waits that block forever (`blocked`); any schedule that reaches them hangs."""
from __future__ import annotations
from typing import Optional
from ..ir import Program
from ..diagnostics import Diagnostic

__all__ = ["witnesses", "FORMAT"]

FORMAT = "hcqdsl-witness"

def _who(q: str) -> str: return "host" if q == "the host" else q

def _one(d: Diagnostic) -> Optional[dict]:
  at = {"line": d.span.line, "column": d.span.column} if d.span else None
  x = d.extra
  if d.code == "race" and "other" in x:
    o = x["other"]
    return {"code": "race", "at": at, "message": d.message, "buffer": x["buffer"],
            "first": {"queue": _who(x["queue"]), "launch": x["launch"], "line": x.get("line"), "mode": x.get("mode"),
                      "range": x["range"]},
            "then": {"queue": _who(o["queue"]), "launch": o["launch"], "line": o.get("line"), "mode": o.get("mode"),
                     "range": o["range"]}}
  if d.code == "deadlock" and "queue" in x:
    return {"code": "deadlock", "at": at, "message": d.message,
            "blocked": [{"queue": _who(x["queue"]), "launch": x["launch"], "line": d.span.line if d.span else None,
                         "signal": x["signal"], "needed": x["needed"]}]}
  return None

def witnesses(program: Program, diags, launches: int, var_values: Optional[dict] = None) -> dict:
  """The witness file for `diags` (check's diagnostics of `program` over `launches` launches)."""
  return {"format": FORMAT, "version": 1, "file": program.file, "launches": launches, "var_values": dict(var_values or {}),
          "witnesses": [w for d in diags if (w := _one(d)) is not None]}
