"""Chrome / Perfetto trace JSON of an emulator run: one process per device (plus the host), one track per queue, one
span per command (consecutive packets of one statement instance merged), flow arrows from each signal write to the
waits it satisfied. Times are emulated microseconds."""
from __future__ import annotations

def chrome_trace(emu) -> dict:
  ev, spans, index = [], [], {}   # index: raw event -> merged span
  for i, (q, dev, launch, key, text, t0, t1, pkt, line) in enumerate(emu.events):
    last = spans[-1] if spans else None
    tail = next((s for s in reversed(spans[-8:]) if s["q"] == q), None)
    if q != "host" and tail is not None and tail["key"] == (launch, key) and key is not None and abs(tail["t1"] - t0) < 1e-9:
      tail["t1"] = t1; tail["pkts"].append(pkt); index[i] = tail
      continue
    s = {"q": q, "dev": dev, "key": (launch, key), "text": text, "t0": t0, "t1": t1, "pkts": [pkt], "line": line,
         "launch": launch, "id": len(spans)}
    spans.append(s); index[i] = s
  pids = {}
  for s in spans:
    pid = pids.setdefault(s["dev"] or "host", len(pids) + 1)
    args = {"packets": " ".join(s["pkts"]), "launch": s["launch"]}
    if s["line"]: args["line"] = s["line"]
    ev.append({"name": s["text"], "ph": "X", "ts": s["t0"], "dur": max(s["t1"] - s["t0"], 0.001), "pid": pid,
               "tid": s["q"], "cat": "command", "args": args})
  for n, (src, dst, _) in enumerate(emu.flows):
    a, b = index.get(src), index.get(dst)
    if a is None or b is None: continue
    ev.append({"name": "signal", "cat": "signal", "ph": "s", "id": n, "ts": a["t1"] - 0.0005, "pid": pids[a["dev"] or "host"], "tid": a["q"]})
    ev.append({"name": "signal", "cat": "signal", "ph": "f", "bp": "e", "id": n, "ts": b["t0"] + 0.0005, "pid": pids[b["dev"] or "host"], "tid": b["q"]})
  for name, pid in pids.items():
    ev.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}})
  return {"traceEvents": ev, "displayTimeUnit": "ns"}
