"""A small IR-level executor for emitted programs (tests only): kernels' C compiled with the host C compiler and called
through ctypes, commands atomic, the queues and the host interleaved at random (seeded). Stands in for
hcqdsl.runtime.run where that is not available; it shares no code with emit."""
from __future__ import annotations
import ctypes, hashlib, os, random, subprocess, tempfile
import numpy as np
from hcqdsl.ir import Program, Wait, SignalWrite, Exec, Copy, Epoch, Submit, DTYPES

_LIBS: dict = {}
CC = os.environ.get("CC", "cc")

def _lib(src: str):
  key = hashlib.sha256(src.encode()).hexdigest()[:16]
  if key not in _LIBS:
    d = tempfile.mkdtemp(prefix="hcq_sim_")
    c, so = os.path.join(d, "k.c"), os.path.join(d, "k.so")
    open(c, "w").write(src)
    subprocess.run([CC, "-shared", "-fPIC", "-O1", "-w", "-o", so, c, "-lm"], check=True)
    _LIBS[key] = ctypes.CDLL(so)
  return _LIBS[key]

def run(prog: Program, seed: int = 0, launches: int = 1) -> dict:
  """Run `launches` launches; returns buffer name -> uint8 array. Raises on deadlock."""
  rng = random.Random(seed)
  mem = {}
  for b in prog.buffers:
    a = np.zeros(b.size, np.uint8)
    if b.init is not None:
      raw = np.array(b.init.values, dtype=np.dtype(DTYPES[b.init.dtype][0])).view(np.uint8)
      a[:len(raw)] = raw
    mem[b.name] = a
  kern = {k.name: (k, getattr(_lib(k.impl.c_source), k.name)) for k in prog.kernels if k.impl and k.impl.c_source}
  sig = {s.name: s.init for s in prog.signals}
  qdev = {q.name: q.device.name for q in prog.queues}
  def val(e, env): return e.eval(env)
  def ptr(sl):
    b = mem[sl.buffer.name]
    st, _ = sl.bounds(len(b))
    return ctypes.c_void_p(b.ctypes.data + st)
  host = list(prog.host.body) if prog.host else []
  seqs = []  # [name, steps, pos, launch, gate]
  for k in range(1, launches + 1):
    env = {v: k for v in prog.vars}
    submitted = set(x.name for s in host for x in (s.queues if isinstance(s, Submit) else ()))
    bare = any(isinstance(s, Submit) and not s.queues for s in host)
    hsteps = []
    for s in host:
      if isinstance(s, Submit):
        names = [x.name for x in s.queues] if s.queues else [q.name for q in prog.queues if q.name not in submitted]
        hsteps.append(("submit", names, k))
      else: hsteps.append((s, env))
    pre = [] if bare else [q.name for q in prog.queues if q.name not in submitted]
    seqs.append(["host", ([("submit", pre, k)] if pre else []) + hsteps, 0, k])
    for q in prog.queues: seqs.append([q.name, [(s, env) for s in q.body], 0, k])
  open_q = set()   # (queue, launch) submitted
  done = {}        # (queue, launch) finished
  def ready(sq):
    name, steps, pos, k = sq
    if pos >= len(steps): return False
    if name == "host":
      if any(s[0] == "host" and s[3] < k and s[2] < len(s[1]) for s in seqs): return False
    else:
      if (name, k) not in open_q: return False
      if k > 1 and not done.get((name, k - 1)): return False
    st = steps[pos]
    if isinstance(st[0], (Wait, Epoch)):
      s, env = st
      if isinstance(s, Epoch):
        d = qdev[name]
        return sig[f"{d}.timeline"] >= env[f"{d}.epoch"] - 1
      return sig[s.signal.name] >= val(s.value, env)
    return True
  while True:
    live = [s for s in seqs if s[2] < len(s[1])]
    if not live: break
    cand = [s for s in live if ready(s)]
    if not cand: raise RuntimeError(f"deadlock: {[(s[0], s[3], s[2]) for s in live]}")
    sq = rng.choice(cand)
    st = sq[1][sq[2]]
    sq[2] += 1
    if sq[2] == len(sq[1]) and sq[0] != "host": done[(sq[0], sq[3])] = True
    if st[0] == "submit":
      for n in st[1]: open_q.add((n, st[2]))
      continue
    s, env = st
    if isinstance(s, SignalWrite): sig[s.signal.name] = val(s.value, env)
    elif isinstance(s, Exec):
      _, fn = kern[s.kernel.name]
      fn(*[ptr(a) for a in s.args])
    elif isinstance(s, Copy):
      d, sr = mem[s.dst.buffer.name], mem[s.src.buffer.name]
      (a, b), (c, e) = s.dst.bounds(len(d)), s.src.bounds(len(sr))
      d[a:b] = sr[c:e].copy()
  for sq in seqs:
    if sq[0] != "host" and sq[2] == len(sq[1]): done[(sq[0], sq[3])] = True
  return mem

def expects_ok(prog: Program, mem: dict) -> list:
  """The expect lines that do not hold (empty: all good)."""
  bad = []
  for e in prog.expects:
    b = mem[e.target.buffer.name]
    st, en = e.target.bounds(len(b))
    got = b[st:en].view(np.dtype(DTYPES[e.data.dtype][0]))
    want = np.array(e.data.values, dtype=got.dtype)
    ok = np.allclose(got, want, rtol=1e-4, atol=1e-5, equal_nan=True) if e.approx else np.array_equal(got, want)
    if not ok: bad.append((e.target.buffer.name, got[:8], want[:8]))
  return bad
