"""Chrome / Perfetto trace JSON (the Trace Event Format) of an emulator run. Times are emulated microseconds.

- one process per device (pid 1, 2, ... in the order the run first uses them) and one for the host, each named by a
  `process_name` metadata event; one thread per queue (tid = the queue's engine index) and one for the host, named by
  `thread_name`: every pid and tid is an integer, as Perfetto's JSON importer expects;
- an `X` slice per command (consecutive packets of one statement instance merged; args: packets, launch, line);
- a flow arrow (`s` -> `f`, category `signal`) from each signal write to each wait it released: it starts inside the
  write's slice at the moment of the write and ends inside the wait's slice at its end (binding point `e`), so it
  never runs backwards in time;
- a counter track (`C`) per signal, on its device's process, with the value after every write;
- instant markers (`i`): a global one where each launch starts, one on the host's track per submit;
- a hang: a `blocked` slice on each blocked queue's track (and the host's), from the moment it stopped to the hang
  (at least `BLOCKED_MIN_US`, so a wait that blocked last still shows), named by the statement, with what it waits
  for, the value it read and which statement could release it; and a global `hang` marker."""
from __future__ import annotations
from typing import Any

__all__ = ["chrome_trace"]

_EPS = 1e-4   # how far inside a slice a flow point sits (slices are at least 0.001 µs long)
BLOCKED_MIN_US = 1.0   # the shortest a hang's blocked slice is drawn

def _spans(events) -> tuple[list[dict], dict]:
  """The raw events merged into slices (consecutive packets of one statement instance on one queue), and raw index ->
  slice."""
  spans: list[dict] = []
  index: dict = {}
  for i, e in enumerate(events):   # emulator.TraceEvent
    q, key = e.queue, (e.launch, e.key)
    tail = next((s for s in reversed(spans[-8:]) if s["q"] == q), None)
    if q != "host" and tail is not None and tail["key"] == key and e.key is not None and abs(tail["t1"] - e.t0) < 1e-9:
      tail["t1"] = e.t1
      tail["pkts"].append(e.packet)
      index[i] = tail
      continue
    s = {"q": q, "dev": e.device, "key": key, "text": e.text, "t0": e.t0, "t1": max(e.t1, e.t0 + 0.001), "pkts": [e.packet],
         "line": e.line, "launch": e.launch}
    spans.append(s)
    index[i] = s
  return spans, index

def _blocked(emu, thread, pids: dict) -> list:
  """A hang's blocked waits as slices on their tracks (runtime/reports.py's Blocked), and the global `hang` marker."""
  clocks = {e.name: (e.clock, e.device) for e in emu.engines}
  if emu.host_actor is not None: clocks["host"] = (emu.host_actor.clock, None)
  end = max([c for c, _ in clocks.values()] + [0.0])
  ev: list = []
  for b in emu.hang.blocked:
    t0, dev = clocks.get(b.queue, (end, b.device))
    pid, tid = thread(b.queue, dev)
    args = {"waits": str(b).split(": ", 1)[1].split("\n")[0], "reason": b.reason}
    if b.line: args.update(line=b.line, launch=b.launch)
    if b.release: args["release"] = b.release
    ev.append({"name": f"blocked: {b.stmt or (b.packet.name if b.packet else 'wait')}", "cat": "hang", "ph": "X", "ts": t0,
               "dur": max(end - t0, 0.0) + BLOCKED_MIN_US, "pid": pid, "tid": tid, "args": args})
  ev.append({"name": "hang", "cat": "hang", "ph": "i", "s": "g", "ts": end, "pid": pids.setdefault("host", len(pids) + 1), "tid": 1})
  return ev

def chrome_trace(emu) -> dict[str, Any]:
  spans, index = _spans(emu.events)
  pids: dict = {}     # device name ("host" for the host) -> pid
  tids: dict = {}     # queue name -> (pid, tid)
  def thread(q: str, dev) -> tuple:
    if q not in tids:
      pid = pids.setdefault(dev or "host", len(pids) + 1)
      tids[q] = (pid, 1 if q == "host" else next(e.index for e in emu.engines if e.name == q) + 1)
    return tids[q]
  for e in emu.engines: thread(e.name, e.device)
  ev: list = []
  launches: dict = {}
  for s in spans:
    pid, tid = thread(s["q"], s["dev"])
    args = {"packets": " ".join(s["pkts"]), "launch": s["launch"]}
    if s["line"]: args["line"] = s["line"]
    ev.append({"name": s["text"], "cat": "command", "ph": "X", "ts": s["t0"], "dur": s["t1"] - s["t0"], "pid": pid,
               "tid": tid, "args": args})
    if s["q"] == "host":
      if s["launch"] is not None and s["launch"] not in launches: launches[s["launch"]] = s["t0"]
      if s["text"].startswith("submit"):
        ev.append({"name": s["text"], "cat": "submit", "ph": "i", "s": "t", "ts": s["t0"], "pid": pid, "tid": tid})
  if getattr(emu, "hang", None) is not None: ev += _blocked(emu, thread, pids)
  for k, t in sorted(launches.items()):
    ev.append({"name": f"launch {k}", "cat": "launch", "ph": "i", "s": "g", "ts": t, "pid": pids["host"], "tid": 1})
  for n, f in enumerate(emu.flows):   # emulator.Flow
    a, b = index.get(f.write), index.get(f.wait)
    if a is None or b is None: continue
    at = min(max(emu.events[f.write].t1, a["t0"] + _EPS), a["t1"] - _EPS)   # the write's moment, inside its slice
    end = b["t1"] - _EPS
    if end < at: continue   # (a release that is not before the wait's end: no arrow rather than one backwards)
    (pa, ta), (pb, tb) = thread(a["q"], a["dev"]), thread(b["q"], b["dev"])
    ev.append({"name": "signal", "cat": "signal", "ph": "s", "id": n, "ts": at, "pid": pa, "tid": ta})
    ev.append({"name": "signal", "cat": "signal", "ph": "f", "bp": "e", "id": n, "ts": end, "pid": pb, "tid": tb})
  for w in emu.signal_log:   # emulator.SignalWritten
    name = emu.namer(w.addr) or f"{w.addr:#x}"
    try: dev = emu.mem.find(w.addr, 4).device
    except Exception: dev = None   # (a signal write the emulator already faulted on)
    pid = pids.setdefault(dev or "host", len(pids) + 1)
    ev.append({"name": f"signal {name}", "cat": "signal", "ph": "C", "ts": w.time, "pid": pid, "args": {"value": w.value}})
  for name, pid in pids.items():
    ev.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}})
    ev.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
  for q, (pid, tid) in tids.items():
    ev.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": q}})
    ev.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
  return {"traceEvents": ev, "displayTimeUnit": "ns"}
