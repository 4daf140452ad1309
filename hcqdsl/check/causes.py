"""Root causes first: errors that follow from one cause are grouped under it. A cause is an error whose fix is a
concrete edit (`Diagnostic.fix`: a wait added, a wait's value changed, the host waiting for the previous launch before
it resets signals); the edit is applied to the program and the program checked again, and every error that is gone
with it is a consequence of that cause. Causes are taken greedily, the edit that removes the most errors first; an
edit that brings a new error is no fix. So a grouping is never a guess: "gone with this fix" was checked.

The root keeps its notes and gains a `root cause` note with the checked fix; each consequence keeps everything and
names its root in `cause` (text prints it once under the root, JSON and SARIF keep all, linked by `cause`)."""
from __future__ import annotations
from typing import Optional
import attrs
from ..ir import Program, Host, Wait
from ..diagnostics import Diagnostic, Edit, edit_block

__all__ = ["RootCauses", "apply_edit"]

DYNAMIC = ("deadlock", "race", "signal-race", "non-monotonic")
MAX_STATEMENTS = 20_000   # re-checking is a whole check per edit: past this the errors are listed as found
MAX_EDITS = 8

def apply_edit(program: Program, edit: Edit) -> Program:
  """The program with `edit` made (a host block made for an edit of a program that has none)."""
  decls, done = list(program.decls), False
  block = edit_block(program, edit.block)
  for n, d in enumerate(decls):
    if d is block and block is not None:
      body = d.body[:edit.index] + edit.stmts + d.body[edit.index + edit.replace:]
      decls[n], done = attrs.evolve(d, body=body), True
  if not done and edit.block == "host": decls.append(Host(edit.stmts))
  return attrs.evolve(program, decls=tuple(decls))

def _key(d: Diagnostic) -> tuple:
  s = d.span
  return (d.code, s.line, s.column) if s is not None else (d.code, None, None)

def _merged(edits: list) -> Optional[Edit]:
  """The host-reset edits of several resets as one: every device's wait, before the first reset."""
  if not edits: return None
  waits: dict[str, Wait] = {}
  for e in sorted(edits, key=lambda e: e.index):
    for st in e.stmts: waits.setdefault(st.signal.name, st)
  first = min(edits, key=lambda e: e.index)
  waits = dict(sorted(waits.items()))
  devs = " and ".join(f"`wait {n} >= {st.value}`" for n, st in waits.items())
  where = first.text.split(" to the host ", 1)[1].split(":", 1)[0]
  return Edit("host", first.index, tuple(waits.values()), f"add {devs} to the host {where}")

class RootCauses:
  def run(self, program: Program, diags: list, recheck) -> list:
    """`recheck(program) -> diagnostics` checks an edited program the way `diags` were found."""
    errs = [d for d in diags if d.severity == "error" and d.code in DYNAMIC]
    if len(errs) < 2 or sum(len(q.body) for q in program.queues) > MAX_STATEMENTS: return diags
    # the candidate edits, each with the error that proposes it (host resets merged into one edit)
    resets = [d for d in errs if d.fix is not None and d.fix.block == "host" and d.code in ("non-monotonic", "signal-race")]
    resets.sort(key=lambda d: d.code != "non-monotonic")   # the lowering write is the reset itself: it is the root
    cands: dict = {}
    if (m := _merged([d.fix for d in resets])) is not None: cands[m.text] = (m, resets[0])
    for d in errs:
      if d.fix is not None and d not in resets: cands.setdefault(d.fix.text, (d.fix, d))
    keys = {_key(d) for d in diags if d.severity == "error"}
    found = []
    for edit, src in list(cands.values())[:MAX_EDITS]:
      try: after = recheck(apply_edit(program, edit))
      except Exception: continue   # an edit the checker cannot take is no fix to show
      left = {_key(d) for d in after if d.severity == "error"}
      if left - keys or _key(src) in left: continue   # a new error, or not even its own: no fix
      gone = [d for d in errs if _key(d) not in left]
      found.append((len(gone), edit, src, gone))
    out = {id(d): d for d in diags}
    taken: set[int] = set()
    for n, edit, src, gone in sorted(found, key=lambda f: -f[0]):
      gone = [d for d in gone if id(d) not in taken]
      if len(gone) < 2: continue
      root = src if id(src) not in taken else gone[0]
      rest = [d for d in gone if d is not root]
      taken.update(id(d) for d in gone)
      if src in resets:
        sigs = sorted({d.extra["signal"] for d in resets if "signal" in d.extra})
        why = (f"the host resets {' and '.join(sigs)} without waiting for the previous launch, which may still use "
               f"{'them' if len(sigs) > 1 else 'it'}")
      else: why = f"this {root.code}: the {len(rest)} error{'s' * (len(rest) != 1)} below follow from it"
      extra = dict(root.extra, cause_of=len(rest), root_cause=why,
                   fix=f"{edit.text} (checked: with it, this error and the {len(rest)} below are gone)")
      out[id(root)] = attrs.evolve(root, notes=tuple(x for x in root.notes if not x.startswith("fix: add")), fix=edit, extra=extra)
      for d in rest: out[id(d)] = attrs.evolve(d, cause=out[id(root)].key())
    return [out[id(d)] for d in diags]
