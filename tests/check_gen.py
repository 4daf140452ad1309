"""Random small .hcq programs for the check property tests (hypothesis strategies)."""
from __future__ import annotations
from hypothesis import strategies as st

SLICES = ["", "[0:32]", "[32:64]", "[16:48]"]
EXPRS = ["0", "1", "2", "kick", "kick + 1", "kick - 1", "kick - 2"]   # kick - 2 overflows in launch 1

# polls and the writes that satisfy (or undo) them, on two words of each buffer; values in their masks, or a var's
POLLS = ["& 1 == 1", "& 1 == 0", "== kick", "& 3 == 1", "== 0"]
POLL_WORDS = ["[60:64]", "[56:60]"]
STORES = [("[60:64]", "1"), ("[60:64]", "0"), ("[60:64]", "kick"), ("[56:64]", "kick"), ("[56:60]", "1"), ("[56:64]", "3")]

@st.composite
def programs(draw, max_queues: int = 4, max_body: int = 4, symbolic: bool = False, max_host: int = 4, padding: int = 0,
             polls: bool = False, clauses: int = 0):
  """Program text: 1-2 devices, 2-4 queues, 1-3 signals, 1-2 buffers of 64 bytes, sometimes a host block with waits,
  resets and submits. Biased towards statements that make waits satisfiable, so all verdicts show up. `symbolic`:
  also listed var values, rebound and rewritten buffers, and a kernel taking a var as a scalar argument (its kernel
  arguments are patched by the host at each submit). `padding`: up to that many extra queues of only accesses (up to 4
  each) to the shared buffers: many racing accesses, which never block. `polls`: also `poll`s on compute queues and
  `write`s into the polled words, and buffers whose data sets a polled word. One statement per line (the oracle keys
  verdicts by line). `clauses`: `launches` clauses within launches 1..clauses on some queues, and the host block
  sometimes split in two blocks with clauses of their own."""
  def clause() -> str:
    if not clauses or draw(st.integers(0, 2)) == 0: return ""
    first = draw(st.integers(1, clauses))
    last = draw(st.sampled_from([first, None] + list(range(first, clauses + 1))))
    return f" launches {first}" + ("" if last == first else f"..{'' if last is None else last}")
  ndev = draw(st.integers(1, 2))
  nq = draw(st.integers(2, max_queues))
  nsig = draw(st.integers(1, 3))
  nbuf = draw(st.integers(1, 2))
  out = [f"device gpu{d} = AMD:{d}" for d in range(ndev)]
  per = ["", "", " rebound = u8 [1], u8 [2], u8 [3]", " rewritten = u8 [1], u8 [2], u8 [3]"] if symbolic else [""]
  if polls:   # data that sets a polled word; with `symbolic`, also per-launch memory and contents that set it or not
    def word(w): return "u32 [" + ", ".join(["0"] * 15 + [w]) + "]"
    per = ["", "", " = " + word("1")]
    if symbolic: per += [" rebound = " + ", ".join(map(word, "101")), " rewritten = " + ", ".join(map(word, "011"))]
  out += [f"buffer b{n} on gpu{draw(st.integers(0, ndev - 1))} size 64{draw(st.sampled_from(per))}" for n in range(nbuf)]
  out += [f"signal s{n} on gpu0" for n in range(nsig)]
  kick = "var kick"
  if symbolic and draw(st.booleans()): kick += " = [" + ", ".join(str(draw(st.integers(0, 3))) for _ in range(3)) + "]"
  out += [kick, "kernel rd(in x)", "kernel wr(out x)", "kernel rw(inout x)", "kernel sc(inout x, i32 n)"]
  sigs = [f"s{n}" for n in range(nsig)] + [f"gpu{d}.timeline" for d in range(ndev)]
  qnames = [f"q{n}" for n in range(nq)]
  for n in range(nq):
    dev = draw(st.integers(0, ndev - 1))
    copyq = draw(st.integers(0, 4)) == 0
    body = []
    for _ in range(draw(st.integers(1, max_body))):
      kind = draw(st.sampled_from(["wait", "signal", "signal", "access", "access", "epoch", "barrier"]
                                  + (["poll", "poll", "store", "store"] if polls else [])))
      if kind == "poll" and not copyq:
        body.append(f"poll b{draw(st.integers(0, nbuf - 1))}{draw(st.sampled_from(POLL_WORDS))} {draw(st.sampled_from(POLLS))}")
      elif kind in ("store", "poll"):
        w, v = draw(st.sampled_from(STORES))
        body.append(f"write b{draw(st.integers(0, nbuf - 1))}{w} = {v}")
      elif kind == "wait": body.append(f"wait {draw(st.sampled_from(sigs))} >= {draw(st.sampled_from(EXPRS))}")
      elif kind == "signal":
        s = draw(st.sampled_from(sigs + [f"gpu{dev}.timeline"]))
        body.append(f"signal {s} = {draw(st.sampled_from(EXPRS if not s.endswith('timeline') else ['gpu%d.epoch' % dev] + EXPRS))}")
      elif kind == "access":
        b = f"b{draw(st.integers(0, nbuf - 1))}"
        if copyq:
          b2 = f"b{draw(st.integers(0, nbuf - 1))}"
          s1 = draw(st.sampled_from(["[0:32]", "[32:64]"]))
          s2 = draw(st.sampled_from(["[0:32]", "[32:64]"]))
          body.append(f"copy {b}{s1} <- {b2}{s2}")
        elif symbolic and draw(st.integers(0, 3)) == 0: body.append(f"exec sc({b}{draw(st.sampled_from(SLICES))}, kick)")
        else: body.append(f"exec {draw(st.sampled_from(['rd', 'wr', 'rw']))}({b}{draw(st.sampled_from(SLICES))})")
      elif kind == "epoch": body.append("epoch")
      else: body.append("barrier")
    out.append(f"queue q{n} {'copy' if copyq else 'compute'} on gpu{dev}{clause()} {{\n  " + "\n  ".join(body) + "\n}")
  for n in range(draw(st.integers(0, padding))):
    body = [f"exec {draw(st.sampled_from(['rd', 'wr', 'rw']))}(b{draw(st.integers(0, nbuf - 1))}{draw(st.sampled_from(SLICES))})"
            for _ in range(draw(st.integers(1, 4)))]
    qnames.append(f"pad{n}")
    out.append(f"queue pad{n} compute on gpu0 {{\n  " + "\n  ".join(body) + "\n}")
  if draw(st.booleans()):
    hb, named = [], set()
    for _ in range(draw(st.integers(1, max_host))):
      kind = draw(st.sampled_from(["wait", "reset", "signal", "submit", "submit"]))
      if kind == "wait": hb.append(f"wait {draw(st.sampled_from(sigs))} >= {draw(st.sampled_from(EXPRS))}")
      elif kind == "reset": hb.append(f"signal {draw(st.sampled_from(sigs[:nsig]))} = 0")
      elif kind == "signal": hb.append(f"signal {draw(st.sampled_from(sigs[:nsig]))} = {draw(st.sampled_from(EXPRS))}")
      else:
        left = [q for q in qnames if q not in named]
        pick = draw(st.lists(st.sampled_from(left), max_size=2, unique=True)) if left else []
        named |= set(pick)
        hb.append("submit " + ", ".join(pick) if pick else "submit")
    cut = draw(st.integers(0, len(hb))) if clauses and draw(st.booleans()) else None
    if cut is None: out.append(f"host{clause()} {{\n  " + "\n  ".join(hb) + "\n}")
    else: out += [f"host{clause()} {{\n  " + "\n  ".join(part) + "\n}" for part in (hb[:cut], hb[cut:])]
  return "\n".join(out) + "\n"
