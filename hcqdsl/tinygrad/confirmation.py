"""What `sanitize --confirm` says of a finding (tinygrad/confirm.py decides it): its statuses and its lines under the
finding in the report. Apart from confirm.py so the sanitizer's report (sanitize.py) can print it without importing
what runs the script again."""
from __future__ import annotations

__all__ = ["describe", "STATUSES"]

STATUSES = ("confirmed", "not-observed", "not-tried")

def describe(c: dict) -> list:
  """A confirmation as the report's lines, under its finding."""
  st = c.get("status")
  if st == "confirmed":
    out = [f"  confirmed: {c.get('how', 'the witness order ran')}, and the numbers differ:"]
    for d in c.get("differences", [])[:4]:
      idx = f"[{', '.join(map(str, d['index']))}]" if d.get("index") else ""
      out.append(f"    {d['what']}: {d['values']} of {d['total']} values differ, first at {idx or 'the start'}: "
                 f"{d['got']} {c.get('got_as', 'in the witness order')}, {d['want']} {c.get('want_as', 'in the program order')}")
    if len(c.get("differences", [])) > 4: out.append(f"    ... and {len(c['differences']) - 4} more outputs differ")
    if c.get("error"): out.append(f"    the script's own result: {c['error']}")
    return out
  if st == "not-observed":
    return [f"  not observed: {c.get('how', 'the witness order ran')}, and every output matched" + (f": {c['why']}" if c.get("why") else "")]
  return [f"  not tried: {c.get('why', '')}"]
