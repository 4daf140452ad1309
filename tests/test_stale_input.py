"""`x@k` (a rebound buffer's launch-k memory) and the `stale-input` diagnostic: a command that in launch k reads an
earlier launch's input — tinygrad's HCQGraph missing an input replacement (docs/findings/stale-jit-copy.md)."""
import pathlib
from hcqdsl import parse, format
from hcqdsl.check import check, check_text
from hcqdsl.vendors import compile_program
from hcqdsl.amd.pm4 import decoder as _  # noqa: F401  (the SDMA decoder below is the engine's)
from hcqdsl.amd.sdma import decoder

ROOT = pathlib.Path(__file__).resolve().parents[1] / "programs"
HDR = "device g0 = AMD:0\nbuffer x on g0 size 64 rebound = u32 [1], u32 [2], u32 [3]\nbuffer c on g0 size 64\nkernel rd(in a)\nkernel wr(out a)\n"

def test_syntax_round_trip():
  p = parse(HDR + "queue q compute on g0 {\n  exec rd(x@1[0:32])\n  exec rd(x@2)\n}\n", "t.hcq")
  a, b = p.queues[0].body[0].args[0], p.queues[0].body[1].args[0]
  assert (a.launch, a.start, a.end, b.launch, b.ranged) == (1, 0, 32, 2, False)
  assert "exec rd(x@1[0:32])\n  exec rd(x@2)\n" in format(p) and parse(format(p), "t.hcq") == p

def test_static_errors():
  got = check_text(HDR + "queue q compute on g0 {\n  exec rd(c@1)\n}\n", "t.hcq")
  assert [(d.code, d.message) for d in got] == [("name", "`c@1`: only a rebound buffer has memory per launch (`c` is not rebound)")]
  got = check_text(HDR + "queue q compute on g0 {\n  exec rd(x@4)\n}\n", "t.hcq", launches=1)
  assert [(d.code, d.message) for d in got if d.code == "bounds"] == [("bounds", "`x@4`: `x` lists 3 launches, so its launches are 1 .. 3")]

def test_stale_copy_is_reported_naming_both_launches():
  prog = parse((ROOT / "stale_input_copy.hcq").read_text(), "stale_input_copy.hcq")
  d = [x for x in check(prog, launches=3) if x.code == "stale-input"]
  assert [(x.severity, x.span.line, x.message) for x in d] == [("error", 19,
    "x1 reads a@1[0:32] at line 19 in launch 2: `a` is rebound, so launch 2's input is new memory (a@2), and this reads "
    "launch 1's (an input replacement missed)")]
  assert d[0].extra == {"launch": 2, "queue": "x1", "buffer": "a", "input_launch": 1} and d[0].related[0].span.line == 8
  fixed = parse((ROOT / "stale_input_copy_fixed.hcq").read_text(), "fixed.hcq")
  assert check(fixed, launches=3) == []
  assert not [x for x in check(prog, launches=1) if x.severity == "error"]   # one launch reads its own input

def test_pinned_memory_conflicts_with_that_launch_only():
  def body(w): return HDR + f"queue q0 compute on g0 {{\n  exec rd(x)\n}}\nqueue q1 compute on g0 {{\n  exec wr({w})\n}}\n"
  def races(w, launches):
    return sorted({(d.extra["launch"], d.extra["other"]["launch"]) for d in check(parse(body(w), "t.hcq"), launches)
                   if d.code == "race" and d.extra["buffer"] == "x"})
  assert races("x@1", 1) == [(1, 1)]       # launch 1's memory is what q0 reads in launch 1
  assert races("x@2", 1) == []             # launch 2's memory: nobody reads it in launch 1
  assert races("x@2", 2) == [(2, 1)]       # q0's launch-2 read of x is of x@2, which q1 writes from launch 1 on
  assert races("x", 2) == [(1, 1)]          # plain x: each launch its own memory (one report per pair of statements)

def test_compile_addresses_the_launch_region():
  img = compile_program(parse((ROOT / "stale_input_copy.hcq").read_text(), "s.hcq"))
  (a1,) = [r.addr for r in img.regions if r.name == "a@1"]
  q = next(q for q in img.queues if q.name == "x1")
  (cp,) = [p for p in decoder(q.arch).decode(q.dwords) if p.name == "COPY_LINEAR"]
  assert cp.fields["src_addr"] == a1 and not [p for p in q.patches if p.var == "a.addr"]
