"""The host's `write B[o:e] = T [..], ...` (one list of bytes per launch, stored at that point of the host block: tinygrad's
hcq2 CPU device refilling its host staging buffer between two copies of one launch) through every layer: the parser
and formatter, the static checks (exact messages), check (a refill with no host wait after the copy that read the old
bytes is a race), compile + run (the emulator stores each launch's bytes), and the image's lift."""
import pathlib, struct
import hcqdsl
from hcqdsl.ir import HostWrite, Slice, Ref, Data
from hcqdsl.vendors import compile_program
from hcqdsl.lift.image import lift_image

PROGRAMS = pathlib.Path(__file__).resolve().parents[1] / "programs"
PROG = (PROGRAMS / "host_staging_refill.hcq").read_text()

def line(text: str, start: str) -> int: return next(i for i, ln in enumerate(text.split("\n"), 1) if ln.strip().startswith(start))
FIRST, GUARD, SECOND = line(PROG, "write stage ="), line(PROG, "wait xin"), line(PROG, "write stage[0:8]")

def errors(text: str) -> list:
  _, d = hcqdsl.parse_with_diagnostics(text, "h.hcq")
  return [str(x).splitlines()[0] for x in d]

def test_parse_and_format():
  p = hcqdsl.parse(PROG, "h.hcq")
  w = [s for s in p.host.body if isinstance(s, HostWrite)]
  assert w[1] == HostWrite(Slice(Ref("stage"), 0, 8, True), (Data("f32", (9.0, 10.0)), Data("f32", (11.0, 12.0)), Data("f32", (17.0, 18.0))))
  assert hcqdsl.format(p) == PROG and hcqdsl.parse(hcqdsl.format(p), "h.hcq") == p
  assert p.listed_launches == (3, "stage")

def test_static_errors():
  assert errors(PROG.replace("write stage[0:8] = f32 [9.0, 10.0]", "write stage[0:4] = f32 [9.0, 10.0]")) == [
    f"h.hcq:{SECOND}:{col}: error[bounds]: 2 f32 values are 8 bytes, more than the 4 bytes of `stage[0:4]`" for col in (22, 39, 57)]
  assert errors(PROG.replace("  copy x <- stage\n", "  copy x <- stage\n  write stage = u32 [1], u32 [2]\n")) == [
    f"h.hcq:{line(PROG, 'copy x <- stage') + 1}:3: error[syntax]: `write B = T [..], ...` (bytes per launch) is a host statement; a queue's `write` "
    f"stores one value"]
  assert errors(PROG.replace("write stage = f32 [1.0, 2.0, 3.0, 4.0], f32 [5.0, 6.0, 7.0, 8.0], f32 [13.0, 14.0, 15.0, 16.0]",
                             "write stage[0:4] = 7")) == [
    f"h.hcq:{FIRST}:3: error[syntax]: `write` is not allowed in a host block (host accepts wait, signal, submit and `write B = T [..], ...`)"]
  assert errors(PROG.replace("write stage[0:8]", "write nope[0:8]")) == [f"h.hcq:{SECOND}:9: error[name]: unknown buffer `nope`"]
  d = hcqdsl.check(hcqdsl.parse(PROG, "h.hcq"), 4)
  assert [str(x).splitlines()[0] for x in d if x.severity == "error"][:1] == [
    f"h.hcq:{FIRST}:3: error[bounds]: the host's write of `stage` lists bytes for 3 launches, fewer than the 4 launches asked for"]

def test_check_orders_the_refill():
  assert [d for d in hcqdsl.check(hcqdsl.parse(PROG, "h.hcq"), 2) if d.severity == "error"] == []
  racy_text = "\n".join(ln for i, ln in enumerate(PROG.split("\n"), 1) if i != GUARD)
  racy, copy = hcqdsl.parse(racy_text, "r.hcq"), line(PROG, "copy x <- stage")
  d = next(d for d in hcqdsl.check(racy, 2) if d.code == "race" and f"at line {SECOND - 1} " in d.message)
  assert d.code == "race" and d.message.startswith(f"the host writes stage[0:8] at line {SECOND - 1} (launch 1) and cx reads stage[0:16] at line "
                                                   f"{copy}")
  assert f"add `wait xin >= launch` in the host before line {SECOND - 1} (cx signals it at line {copy + 1}, after its access)" in str(d), str(d)

def test_run_and_lift_image():
  p = hcqdsl.parse(PROG, "h.hcq")
  r = hcqdsl.run(p, launches=3)
  assert r.ok and r.buffer("y", "f32").tolist() == [17, 18, 15, 16] and r.buffer("x", "f32").tolist() == [13, 14, 15, 16]
  img = compile_program(p)
  [w1, w2] = [h for h in img.host if h["op"] == "write"]
  assert (w1["size"], w2["size"], w2["data"]) == (16, 8, [struct.pack("<2f", 9, 10), struct.pack("<2f", 11, 12), struct.pack("<2f", 17, 18)])
  back = lift_image(img)
  assert [s for s in back.host.body if isinstance(s, HostWrite)][1] == \
    HostWrite(Slice(Ref("stage"), 0, 8, True), (Data("f32", (9.0, 10.0)), Data("f32", (11.0, 12.0)), Data("f32", (17.0, 18.0))))
  def drop_lines(host): return [{k: v for k, v in h.items() if k != "line"} for h in host]
  assert hcqdsl.run(back, launches=3).ok and drop_lines(compile_program(back).host) == drop_lines(img.host)

POLLED = """device g = AMD:0 gfx1100
buffer flag on host size 4
signal done on g
var launch
queue c compute on g {
  poll flag[0:4] == launch
  signal done = launch
}
host {
  submit
  write flag[0:4] = u32 [1], u32 [2]
  wait done >= launch
}
"""

def test_a_poll_released_by_the_hosts_write():
  """The host's `write` is a store `check` knows the bytes of: a `poll` it satisfies passes, one it never satisfies is the
  deadlock `run` also hangs at."""
  assert [d for d in hcqdsl.check(hcqdsl.parse(POLLED, "p.hcq"), 2) if d.severity == "error"] == []
  assert hcqdsl.run(hcqdsl.parse(POLLED, "p.hcq"), launches=2).ok
  stuck = hcqdsl.parse(POLLED.replace("u32 [1], u32 [2]", "u32 [1], u32 [5]"), "p.hcq")
  [d] = [d for d in hcqdsl.check(stuck, 2) if d.severity == "error"]
  assert d.code == "deadlock" and "flag[0:4] is stuck at 0x5" in d.message and d.span.line == 6, str(d)
  assert hcqdsl.run(stuck, launches=2).hang is not None
