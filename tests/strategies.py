"""Hypothesis strategies for whole .hcq programs (as IR), well-formed enough to format and parse back."""
from __future__ import annotations
from hypothesis import strategies as st
from hcqdsl.ir import (Ref, Expr, Slice, Data, Param, Impl, Device, Buffer, Signal, Var, Kernel, Wait, SignalWrite, Exec,
                       Copy, Write, Poll, Barrier, Timestamp, Epoch, Submit, Queue, Host, Expect, Program, KEYWORDS, U32_MAX)

_SOFT = {"timeline", "builtin", "c", "amd", "inf", "nan", "AMD"}
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(lambda s: s not in KEYWORDS and s not in _SOFT)
comment = st.from_regex(r"#[ -~]{0,20}", fullmatch=True).map(str.rstrip)
comments = st.lists(comment, max_size=2).map(tuple)
u32 = st.integers(0, U32_MAX)

def exprs(vars_):
  const = st.builds(Expr, st.none(), u32)
  if not vars_: return const
  return st.one_of(const, st.builds(Expr, st.sampled_from(vars_).map(Ref), st.integers(-9, 9)))

def slices(bufs):
  def mk(name, a, b, ranged): return Slice(Ref(name), a if ranged else None, b if ranged else None, ranged)
  return st.builds(mk, st.sampled_from(bufs), st.none() | st.integers(0, 1 << 20), st.none() | st.integers(0, 1 << 20), st.booleans())

def data():
  ints = st.tuples(st.sampled_from(["u8", "u32", "i32", "u64"]), st.lists(st.integers(0, 255), max_size=5))
  floats = st.tuples(st.just("f32"), st.lists(st.floats(allow_nan=False, width=32), max_size=5))
  return st.one_of(ints, floats).map(lambda t: Data(t[0], tuple(t[1])))

@st.composite
def programs(draw):
  ndev = draw(st.integers(1, 3))
  pool = draw(st.lists(names, min_size=8 + ndev, max_size=14, unique=True))
  devs, rest = pool[:ndev], pool[ndev:]
  bufs, sigs, vars_, kern = rest[0:2], rest[2:4], rest[4:5], rest[5]
  qnames = rest[6:8]
  def cm(): return dict(comments=draw(comments), comment=draw(st.none() | comment))
  decls = [Device(d, "AMD", i, draw(st.none() | st.sampled_from(["gfx942", "gfx1100", "gfx1201"])), **cm()) for i, d in enumerate(devs)]
  def buffer(b):
    dev, size = draw(st.none() | st.sampled_from(devs).map(Ref)), draw(st.integers(1, 1 << 30))
    per = draw(st.sampled_from([None, None, "rebound", "rewritten"]))
    if per is None: return Buffer(b, dev, size, draw(st.none() | data()), **cm())
    return Buffer(b, dev, size, None, per, tuple(draw(st.lists(data(), min_size=1, max_size=3))), **cm())
  decls += [buffer(b) for b in bufs]
  decls += [Signal(s, draw(st.none() | st.sampled_from(devs).map(Ref)), draw(st.integers(0, 5)), **cm()) for s in sigs]
  decls += [Var(v, draw(st.none() | st.lists(u32, max_size=4).map(tuple)), **cm()) for v in vars_]
  nparams = draw(st.integers(0, 3))
  nscalars = draw(st.integers(0, 2))
  pnames = draw(st.lists(names, min_size=nparams + nscalars, max_size=nparams + nscalars, unique=True))
  impl = draw(st.none() | st.builds(Impl, builtin=st.sampled_from(["add", "fill"]), dtype=st.none() | st.just("f32"),
                                    args=st.lists(st.integers(0, 9) | st.floats(-2, 2), max_size=2).map(tuple),
                                    # strings first: hypothesis leans to a one_of's first branch
                                    c_source=st.just("void k(float *a) {\n  a[0] = 1;\n}") | st.none(),
                                    amd_code=st.just("k.co") | st.none()))
  params = [Param(draw(st.sampled_from(["in", "out", "inout"])), p) for p in pnames[:nparams]]
  params += [Param(draw(st.sampled_from(["i32", "u32"])), p) for p in pnames[nparams:]]
  decls.append(Kernel(kern, tuple(params), impl, **cm()))
  sigrefs = st.sampled_from(sigs + [f"{d}.timeline" for d in devs]).map(Ref)
  allvars = vars_ + [f"{d}.epoch" for d in devs]
  dim = st.integers(1, 64) | st.builds(Expr, st.sampled_from(allvars).map(Ref), st.integers(-3, 3))
  dims = st.none() | st.tuples(dim, st.integers(1, 4), dim)
  def args(a, v): return tuple(a) + tuple(v)
  stmt = st.one_of(
    st.builds(lambda s, e, c: Wait(s, e, **c), sigrefs, exprs(allvars), st.just(None).map(lambda _: cm())),
    st.builds(lambda s, e, c: SignalWrite(s, e, **c), sigrefs, exprs(allvars), st.just(None).map(lambda _: cm())),
    st.builds(lambda a, v, g, b: Exec(Ref(kern), args(a, v), g, b), st.lists(slices(bufs), min_size=nparams, max_size=nparams),
              st.lists(exprs(allvars), min_size=nscalars, max_size=nscalars), dims, dims),
    st.builds(Copy, slices(bufs), slices(bufs)),
    st.builds(Barrier), st.builds(Timestamp, sigrefs), st.builds(Epoch),
    st.builds(Write, slices(bufs), exprs(allvars)), st.builds(Poll, slices(bufs), st.integers(0, U32_MAX), exprs(allvars)))
  for q in qnames:
    decls.append(Queue(q, draw(st.sampled_from(["compute", "copy"])), Ref(draw(st.sampled_from(devs))),
                       tuple(draw(st.lists(stmt, max_size=6))), **cm(), end_comments=draw(comments),
                       end_comment=draw(st.none() | comment)))
  if draw(st.booleans()):
    hstmt = st.one_of(st.builds(Wait, sigrefs, exprs(allvars)), st.builds(SignalWrite, sigrefs, exprs(allvars)),
                      st.builds(Submit, st.lists(st.sampled_from(qnames).map(Ref), max_size=2, unique=True).map(tuple)))
    decls.append(Host(tuple(draw(st.lists(hstmt, max_size=4))), **cm()))
  if draw(st.booleans()):
    decls.append(Expect(draw(slices(bufs)), draw(data()), draw(st.booleans()), **cm()))
  order = draw(st.permutations(range(len(decls))))
  return Program(tuple(decls[i] for i in order), end_comments=draw(comments))
