"""Translate a Program, unrolled over N launches, to Promela for the SPIN model checker: a second opinion on
`deadlock`, and the yardstick `benchmarks/check_scaling.py` measures `check` against. See docs/check.md.

The model follows the reference semantics (docs/language.md, "Reference semantics") step for step:
- one proctype per queue and one for the host, each the sequence's steps for launch 1, then launch 2, ...;
- `wait S >= v` is the expression statement `(sig[S] >= v)`: Promela blocks an expression until it is true;
- `signal S = v` is one assignment `sig[S] = v` (atomic: every Promela statement is);
- `submit` sets one flag per queue and launch (`go[...] = 1`, all flags of one submit in one `atomic`), and each
  queue's launch-k steps start with the guard `go[...]`: the launch is not about to run until the host submitted it;
- `poll w[o:o+4] & m == v` is the guard `((word[x] & m) == v)` on the word's 32-bit value, and a `write` (or the
  host's rewrite of a `rewritten` buffer) storing into polled words one assignment of the bytes it stores;
- `exec`, `copy`, other `write`s, `barrier`, `timestamp` are left out: they never block and write no signal or polled
  word, so they change no deadlock verdict (the model decides deadlock only, not races).
A deadlock is a state where some process is not at its end and none can move: SPIN's "invalid end state".

Signal values: the packets compare 32-bit unsigned values, Promela's `int` is signed 32-bit (and `unsigned` bit fields
stop at 31 bits). Every value of a signal in the unrolled program is known (vars are bound per launch), so each
signal's values — its initial value, every value written, every value waited for, all taken mod 2**32 as the packets
see them — are replaced by their rank among that signal's distinct values. Ranks keep `>=` exactly and are small,
so `sig` is a `short`/`int` array with no sign or overflow issue, and the state vector stays small.
"""
from __future__ import annotations
import os, re, shutil, signal, subprocess, tempfile, time
from typing import Any, Optional
from ..ir import Program
from .unroll import unroll, WAIT, WRITE, SUBMIT, POLL, ACCESS

__all__ = ["to_promela", "spin_verify"]

def to_promela(program: Program, launches: int = 2, var_values: Optional[dict] = None) -> str:
  u = unroll(program, launches, var_values)
  seqs, N = u.seqs, launches
  nsig = len(u.signals)
  # each signal's distinct 32-bit values, ranked
  vals = [{v} for v in u.sig_init]
  for s in seqs:
    for op in s.ops:
      if op[0] in (WAIT, WRITE):
        for k in range(1, N + 1): vals[op[1]].add(u.value(op, k, s.index == 0))
  rank = [{v: r for r, v in enumerate(sorted(vs))} for vs in vals]
  width = max((len(vs) for vs in vals), default=1)
  typ = "byte" if width <= 255 else "short" if width <= 32767 else "int"
  Q = len(seqs) - 1
  def go(q: int, k: int) -> int: return (q - 1) * N + (k - 1)   # flag of queue sequence q, launch k (1-based)
  out = [f"/* {program.file or 'program'}: {Q} queues + host, {N} launches; signal values are ranks (see hcqdsl.check.promela) */"]
  for s in range(nsig): out.append(f"/* sig[{s}] = {u.signals[s].name} */")
  out.append(f"{typ} sig[{max(nsig, 1)}];")
  if Q: out.append(f"bool go[{Q * N}];")
  # the polled words hold their 32-bit values (as C ints: bitwise, so two's complement literals)
  def i32(v: int) -> int: return v - (1 << 32) if v >= 1 << 31 else v
  if u.polls: out.append(f"int word[{len(u.cell_init)}];")
  def body(i):
    lines = []
    s = seqs[i]
    for k in range(1, N + 1):
      if k in s.off: continue   # (a `launches` clause: the queue is not in launch k)
      if i: lines.append(f"  go[{go(i, k)}];")
      for idx, op in enumerate(s.ops):
        if s.partial and s.absent(idx, k): continue
        kind = op[0]
        if kind == WAIT: lines.append(f"  (sig[{op[1]}] >= {rank[op[1]][u.value(op, k, i == 0)]});")
        elif kind == WRITE: lines.append(f"  sig[{op[1]}] = {rank[op[1]][u.value(op, k)]};")
        elif kind == POLL:
          lines.append(f"  ((word[{u.slot(op[1], op[5], k)}] & {i32(op[4])}) == {i32(u.value(op, k))});")
        elif kind == ACCESS and len(op) > 2:   # a store into polled words: one atomic step, like the packet
          sets = [f"word[{u.slot(c, pin, k)}] = (word[{u.slot(c, pin, k)}] & {i32(keep)}) | {i32(bits[k - 1])}" for c, pin, keep, bits in op[2]]
          lines.append(f"  atomic {{ {'; '.join(sets)} }};" if len(sets) > 1 else f"  {sets[0]};")
        elif kind == SUBMIT and (qs := [q for q in op[1] if u.gate_pos(q, k) == (k - 1) * len(s.ops) + idx + 1]):
          flags = "; ".join(f"go[{go(q, k)}] = 1" for q in qs)
          lines.append(f"  atomic {{ {flags} }};" if len(qs) > 1 else f"  {flags};")
    if not lines: lines.append("  skip;")
    return lines
  names = []
  for i, s in enumerate(seqs):
    name = "host" if i == 0 else f"q{i}_{''.join(c if c.isalnum() else '_' for c in s.name)}"
    names.append(name)
    out.append(f"proctype {name}() {{")
    out += body(i)
    out.append("}")
  out.append("init {")
  out.append("  atomic {")
  out += [f"    sig[{s}] = {rank[s][v]};" for s, v in enumerate(u.sig_init) if rank[s][v]]
  out += [f"    word[{x}] = {i32(v)};" for x, v in enumerate(u.cell_init) if v]
  out += [f"    run {n}();" for n in names]
  out.append("  }")
  out.append("}")
  return "\n".join(out) + "\n"

def spin_verify(model: str, timeout: float = 60.0, depth: Optional[int] = None, memlim_mb: int = 1024) -> dict:
  """Run SPIN on a model from `to_promela`: `spin -a`, `gcc -O2 -DSAFETY -DCOLLAPSE -DMEMLIM=...`, `./pan -m<depth>`, each
  under what is left of `timeout` seconds. Returns {"deadlock": bool, or None when SPIN gave no verdict (timeout, or
  the search hit the memory bound with no error found), "errors", "states", "timeout", "complete", "memlim",
  "t_spin", "t_gcc", "t_pan", "total"} (times in seconds)."""
  if depth is None: depth = model.count("\n") + 1000   # every step is one line: no run is deeper
  if shutil.which("spin") is None or shutil.which("gcc") is None: raise RuntimeError("spin and gcc are needed")
  res: dict[str, Any] = {"deadlock": None, "errors": None, "states": None, "timeout": False, "complete": False, "memlim": False,
                         "t_spin": 0.0, "t_gcc": 0.0, "t_pan": 0.0}
  start = time.perf_counter()
  with tempfile.TemporaryDirectory(prefix="hcq-spin-") as d:
    with open(os.path.join(d, "model.pml"), "w") as f: f.write(model)
    steps = [("t_spin", ["spin", "-a", "model.pml"]),
             ("t_gcc", ["gcc", "-O2", "-w", "-DSAFETY", "-DCOLLAPSE", f"-DMEMLIM={memlim_mb}", "-o", "pan", "pan.c"]),
             ("t_pan", ["./pan", f"-m{depth}"])]
    out = ""
    for key, cmd in steps:
      left = timeout - (time.perf_counter() - start)
      t0 = time.perf_counter()
      # its own process group, so a timeout also ends what it started (gcc's cc1 outlives a killed gcc driver)
      proc = subprocess.Popen(cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
      try:
        stdout, stderr = proc.communicate(timeout=max(left, 0.01))
      except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        res[key] = time.perf_counter() - t0
        res["timeout"] = True
        break
      except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
      res[key] = time.perf_counter() - t0
      if proc.returncode != 0 and key != "t_pan": raise RuntimeError(f"{cmd[0]} failed: {stdout[-2000:]}{stderr[-2000:]}")
      out = stdout
  res["total"] = time.perf_counter() - start
  if not res["timeout"]:
    m = re.search(r"errors: (\d+)", out)
    if m is None: raise RuntimeError(f"no verdict from pan: {out[-2000:]}")
    res["errors"] = int(m.group(1))
    st = re.search(r"(\d+) states, stored", out)
    res["states"] = int(st.group(1)) if st else None
    # an error found is a verdict; no error is one only if the search completed (not cut by memory or depth)
    res["complete"] = "Search not completed" not in out and "max search depth too small" not in out
    res["memlim"] = "MEMLIM bound" in out or "out of memory" in out.lower()
    if res["errors"]: res["deadlock"] = "invalid end state" in out
    elif res["complete"]: res["deadlock"] = False
    res["output"] = out
  return res
