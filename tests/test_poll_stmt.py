"""`poll` (tinygrad's HWQueue.poll_bit) through every layer: both parse paths, the formatter, the static checks with
their exact messages, check (a poll orders what follows it after the `write` that satisfies it; one nothing satisfies
is a deadlock), run on the emulator, and a capture of tinygrad's own AMDComputeQueue.poll_bit satisfied by its
AMDCopyQueue.write (stand-in devices), lifted, checked and run. Encodings: tests/test_amd_encode.py; generated
programs with polls against the reference semantics: tests/test_check_oracle.py."""
import json
from tinygrad.runtime.support.hcq import CLikeArgsState
import hcqdsl
from hcqdsl.ir import Poll, Slice, Ref, Expr, U32_MAX
from hcqdsl.lang.scan import scan
from hcqdsl.lang.format import format_stmt
from hcqdsl.tinygrad.capture import Capture
from hcqdsl.lift.manifest import lift_manifest, load_manifest
from amd_standin import Arena, StandinHCQDevice, AMDComputeQueue, AMDCopyQueue
from capture_util import named_program

PROG = """device gpu = AMD:0 gfx1100
buffer poll on gpu size 64
buffer data on gpu size 256
signal done on gpu
var k
kernel wr(out x)
kernel rd(in x)
queue nic compute on gpu {
  exec wr(data)
  write poll[60:64] = 0x01000000
}
queue c compute on gpu {
  poll poll[60:64] & 0x01000000 == 0x01000000
  exec rd(data)
  poll poll[0:4] == k
  signal done = k
}
queue w copy on gpu {
  write poll[0:4] = k
}
host {
  wait done >= k
}
"""

def _diags(text: str, launches: int = 1) -> list:
  return [str(d).splitlines()[0] for d in hcqdsl.check(hcqdsl.parse(text, "p.hcq"), launches) if d.severity == "error"]

def test_parse_format_scan():
  p = hcqdsl.parse(PROG, "p.hcq")
  c = p.queues[1].body
  assert c[0] == Poll(Slice(Ref("poll"), 60, 64, True), 0x01000000, Expr(None, 0x01000000))   # `poll` is also a name
  assert c[2] == Poll(Slice(Ref("poll"), 0, 4, True), U32_MAX, Expr(Ref("k"), 0))             # no mask: every bit
  assert [format_stmt(s) for s in (c[0], c[2])] == ["poll poll[60:64] & 16777216 == 16777216", "poll poll[0:4] == k"]
  assert hcqdsl.parse(hcqdsl.format(p), "p.hcq") == p and hcqdsl.format(p).count("poll poll[60:64] & 0x01000000 == 0x01000000") == 1
  assert scan(PROG, "p.hcq") == p
  assert scan("device g = AMD:0\nbuffer b on g size 8\nqueue q compute on g { poll b[4:8]&3==1; poll b[0:4] == 7 }\n", "s.hcq") == \
    hcqdsl.parse("device g = AMD:0\nbuffer b on g size 8\nqueue q compute on g { poll b[4:8]&3==1; poll b[0:4] == 7 }\n", "s.hcq")

def test_static_errors():
  def errs(old, new):
    _, d = hcqdsl.parse_with_diagnostics(PROG.replace(old, new, 1), "p.hcq")
    return [str(x).splitlines()[0] for x in d]
  assert errs("poll[60:64] & 0x01000000 == 0x01000000", "poll[60:64] & 0x01000000 == 0x03000000") == [
    "p.hcq:13:36: error[deadlock]: `poll` can never pass: 0x3000000 has bits outside the mask 0x1000000 "
    "(`(word & 0x1000000) == 0x3000000` is never true)"]
  assert errs("poll poll[60:64] &", "poll poll[58:62] &") == [
    "p.hcq:13:8: error[bounds]: `poll` reads one aligned 32-bit word (4 bytes at a multiple of 4), not `poll[58:62]` (4 bytes at 58)"]
  assert errs("poll poll[0:4] == k", "poll poll[0:8] == k") == [
    "p.hcq:15:8: error[bounds]: `poll` reads one aligned 32-bit word (4 bytes at a multiple of 4), not `poll[0:8]` (8 bytes at 0)"]
  assert errs("& 0x01000000 ==", "& 0x101000000 ==") == [
    "p.hcq:13:3: error[overflow]: mask 4311744512 (0x101000000) is outside 32 bits (a poll compares one 32-bit word)"]
  assert errs("  write poll[0:4] = k\n", "  poll poll[0:4] == k\n") == [
    "p.hcq:19:3: error[name]: `poll` on copy queue `w`: a masked poll runs on compute queues (tinygrad's AMDCopyQueue has no poll_bit)"]
  assert errs("  wait done >= k\n", "  poll poll[0:4] == 1\n") == [
    "p.hcq:22:3: error[syntax]: `poll` is not allowed in a host block (host accepts wait, signal, submit and `write B = T [..], ...`)"]
  assert errs("poll poll[0:4] == k", "poll pol[0:4] == k") == ["p.hcq:15:8: error[name]: unknown buffer `pol` (did you mean `poll`?)"]

def test_check_orders_after_the_satisfying_write():
  assert _diags(PROG) == []
  # launch 2's poll finds launch 1's value: it passes at once, and nothing orders launch 2's rd after its wr
  assert _diags(PROG, 2) == ["p.hcq:14:3: error[race]: c reads data[0:256] at line 14 (launch 2) and nic writes data[0:256] at line 9 "
                             "(launch 2) with no happens-before order between them"]
  # the phase bit alternating per launch (ops_rdma's completion-queue entries) orders every launch
  phased = PROG.replace("var k", "var k\nvar phase = [0x01000000, 0, 0x01000000]").replace(
    "write poll[60:64] = 0x01000000", "write poll[60:64] = phase").replace("& 0x01000000 == 0x01000000", "& 0x01000000 == phase")
  for launches in (1, 2, 3): assert _diags(phased, launches) == [], launches
  # without the poll nothing orders rd after wr: a race
  assert _diags(PROG.replace("  poll poll[60:64] & 0x01000000 == 0x01000000\n", "")) == [
    "p.hcq:13:3: error[race]: c reads data[0:256] at line 13 (launch 1) and nic writes data[0:256] at line 9 (launch 1) with no happens-before "
    "order between them"]
  # the poll reads its word: a kernel writing it unordered races with it
  assert _diags(PROG.replace("exec wr(data)", "exec wr(poll)")) == [
    "p.hcq:13:3: error[race]: c reads poll[60:64] at line 13 (launch 1) and nic writes poll[0:64] at line 9 (launch 1) with no happens-before order "
    "between them",
    "p.hcq:19:3: error[race]: w writes poll[0:4] at line 19 (launch 1) and nic writes poll[0:64] at line 9 (launch 1) with no happens-before order "
    "between them"]

def test_check_deadlocks():
  # nothing stores a value that passes it: the poll's own deadlock, the host behind it
  text = PROG.replace("write poll[60:64] = 0x01000000", "write poll[60:64] = 0x02000000")
  [d] = [d for d in hcqdsl.check(hcqdsl.parse(text, "p.hcq"), 1) if d.code == "deadlock"]
  assert str(d).splitlines()[0] == ("p.hcq:13:3: error[deadlock]: c polls forever for poll[60:64] & 0x1000000 == 0x1000000 "
                                    "(launch 1); poll[60:64] is stuck at 0x2000000, and no store left in the checked launches makes it so")
  assert [r.message for r in d.related] == ["the host also waits forever for done >= 1 (launch 1), behind this deadlock"]
  assert (d.extra["signal"], d.extra["mask"], d.extra["needed"], d.extra["value"]) == ("poll[60:64]", 0x01000000, 0x01000000, 0x02000000)
  assert _diags(PROG.replace("  write poll[60:64] = 0x01000000\n", ""))[0] == (
    "p.hcq:12:3: error[deadlock]: c polls forever for poll[60:64] & 0x1000000 == 0x1000000 (launch 1); "
    "poll[60:64] is stuck at 0x0, and no `write` stores into poll[60:64]")
  # a later store undoes the value: some interleaving runs both stores before the poll looks, so it can deadlock
  undo = PROG.replace("write poll[60:64] = 0x01000000", "write poll[60:64] = 0x01000000\n  write poll[60:64] = 0")
  assert _diags(undo)[0].startswith("p.hcq:14:3: error[deadlock]: c polls forever for poll[60:64] & 0x1000000 == 0x1000000")
  # the word's initial contents satisfy it: no store needed (u32 data: word 15 is bytes 60..63)
  data = PROG.replace("buffer poll on gpu size 64", "buffer poll on gpu size 64 = u32 [" + "0, " * 15 + "0x01000000]") \
             .replace("  write poll[60:64] = 0x01000000\n", "")
  assert _diags(data) == ["p.hcq:13:3: error[race]: c reads data[0:256] at line 13 (launch 1) and nic writes data[0:256] at line 9 (launch 1) "
                          "with no happens-before order between them"]
  # a var's value outside the mask in some launch never passes: found by exploration, in that launch
  assert any(d.startswith("p.hcq:15:3: error[deadlock]: c polls forever for poll[0:4] & 0x1 == 0x2 (launch 2)")
             for d in _diags(PROG.replace("poll poll[0:4] == k", "poll poll[0:4] & 1 == k"), 2))

def test_run():
  r = hcqdsl.run(hcqdsl.parse(PROG, "p.hcq"), launches=2)
  assert r.ok and bytes(r.memory["poll"][:4]) == (2).to_bytes(4, "little")
  r = hcqdsl.run(hcqdsl.parse(PROG.replace("write poll[60:64] = 0x01000000", "write poll[60:64] = 0x02000000"), "p.hcq"),
                 launches=1)
  assert not r.ok and r.hang is not None
  [b] = [b for b in r.hang.blocked if b.queue == "c"]
  assert str(b).splitlines() == ["c (gpu) [ring offset 0x0 WAIT_REG_MEM]: polls poll+0x3c & 0x1000000 == 0x1000000, value now 0x2000000",
                                 "      at line 13: `poll poll[60:64] & 16777216 == 16777216` (launch 1)",
                                 "      could be released by nic's `write poll[60:64] = 33554432` at line 10 (nic did not store a value that passes "
                                 "it)"]

def rdma_like(arena: Arena, bit: int = 1 << 24):
  """ops_rdma's shape on one device: the copy queue lands the data and then writes the completion word (as a NIC
  does its completion-queue entry's phase bit); the compute queue polls the bit (poll_bit), then runs the kernel that
  reads the data and ends with the timeline write; the host waits for it."""
  d = StandinHCQDevice("gfx1100", 0, arena)
  src, dst, cq = arena.alloc(0x1000), arena.alloc(0x1000), arena.alloc(64)
  p = named_program(d, 0x7000_0000_0100, "consume")
  args = CLikeArgsState(arena.alloc(64), p, (dst,))
  copy = AMDCopyQueue(d, max_copy_size=d.max_copy_size).copy(dst, src, 0x1000).write(cq.offset(60, 4), bit)
  comp = AMDComputeQueue(d).poll_bit(cq.offset(60, 4), 1 << 24, mask=1 << 24).exec(p, args, (4, 1, 1), (64, 1, 1)) \
    .signal(d.timeline_signal, d.timeline_value)
  comp.submit(d)
  copy.submit(d)
  d.timeline_signal.wait(0)
  return d

def test_capture_of_tinygrads_poll_bit():
  with Capture() as cap: rdma_like(Arena())
  m = json.loads(json.dumps(cap.manifest()))
  prog = hcqdsl.parse(hcqdsl.format(lift_manifest(load_manifest(m))), "captured.hcq")
  polls = [(q.name, s) for q in prog.queues for s in q.body if isinstance(s, Poll)]
  assert len(polls) == 1 and polls[0][1].mask == 1 << 24 and polls[0][1].value == Expr(None, 1 << 24)
  assert polls[0][1].src.end - polls[0][1].src.start == 4
  stores = [format_stmt(s) for q in prog.queues for s in q.body if type(s).__name__ == "Write"]
  assert stores == [f"write {polls[0][1].src.buffer.name}[{polls[0][1].src.start}:{polls[0][1].src.end}] = 16777216"]
  assert not any(ln.lstrip().startswith("# @") and "cannot lift" in ln for ln in hcqdsl.format(prog).splitlines())
  assert [d for d in hcqdsl.check(prog, 1) if d.severity == "error"] == []
  assert hcqdsl.run(prog, launches=1).ok
  # the copy queue writes the other phase: the poll never passes, a deadlock at the lifted poll; run hangs there
  with Capture() as cap: rdma_like(Arena(), bit=0)
  prog = hcqdsl.parse(hcqdsl.format(lift_manifest(load_manifest(cap.manifest()))), "captured.hcq")
  [d] = [d for d in hcqdsl.check(prog, 1) if d.code == "deadlock"]
  assert d.message.startswith(f"{polls[0][0]} polls forever for ") and "& 0x1000000 == 0x1000000" in d.message
  r = hcqdsl.run(prog, launches=1)
  assert r.hang is not None and any("polls " in str(b) for b in r.hang.blocked)

def test_lift_keeps_what_no_poll_says():
  """A poll_bit on a signal's memory (no buffer: no `poll` names it) and an SDMA masked POLL_REGMEM (tinygrad's copy
  queue has no poll_bit) stay comments saying why; a full-mask `==` on a buffer word is a `poll` without `& MASK`."""
  from amd_standin import StandinDevice, buf, signal, compute_queue
  from hcqdsl.amd import sdma
  d = StandinDevice("gfx1100")
  c = compute_queue(d)
  c.poll_bit(buf(0x20000), 1, mask=1).poll_bit(buf(0x10000), 7, mask=U32_MAX).signal(signal(0x20000), 1)
  e = sdma.encoder("gfx1100")   # tinygrad has no copy-queue poll_bit: a POLL_REGMEM made `==` by hand
  out = []
  e.wait(out, 0x10004, 1)
  out[0] = out[0] & ~(0x7 << 28) | (3 << 28)   # POLL_REGMEM's function field (bits 28..30): `==`
  out[4] = 1                                  # mask
  m = {"format": "hcqdsl-manifest", "version": 1, "buffers": [{"addr": 0x10000, "size": 16, "device": "gpu0"}],
       "queues": [{"name": "c", "device": "gpu0", "target": "gfx1100", "engine": "compute", "dwords": [v & U32_MAX for v in c._q]},
                  {"name": "x", "device": "gpu0", "target": "gfx1100", "engine": "copy", "dwords": out}]}
  body = [ln.strip() for ln in hcqdsl.format(lift_manifest(load_manifest(m))).splitlines() if ln.startswith("  ")]
  assert body[0].startswith("# @0: WAIT_REG_MEM: cannot lift (masked poll (mask 0x1) of signal s_20000: a `poll` reads a "
                            "buffer's word, and a `wait` compares `>=`): c0053c00 00000013 00020000")   # and its dwords
  assert body[1:3] == ["poll b_10000[0:4] == 7  # @7", "signal s_20000 = 1  # @14"]
  assert body[3].startswith("# @0: POLL_REGMEM: cannot lift (masked poll (function 3, mask 0x1) of 0x10004: a `wait` compares "
                            "`>=` with every bit, and a `poll` (`==`) runs on compute queues only")

REBOUND = """device gpu = AMD:0 gfx1100
buffer x on gpu size 16 rebound = u32 [1], u32 [0], u32 [1]
buffer d on gpu size 16
kernel wr(out a)
kernel rd(in a)
queue p compute on gpu {
  exec wr(d)
  write x[0:4] = 1
}
queue c compute on gpu {
  poll x[0:4] & 1 == 1
  poll x@3[0:4] == 1
  exec rd(d)
}
"""

def test_rebound_words():
  """A rebound buffer's word is each launch's own memory (its data per launch); `x@3` is launch 3's in every launch.
  Launch 1's and 3's data already pass both polls, so nothing orders rd after wr there; the image round-trips
  (the address patched per launch for `x`, launch 3's fixed for `x@3`)."""
  from round_trip import image_round_trip
  assert _diags(REBOUND, 1) == ["p.hcq:13:3: error[race]: c reads d[0:16] at line 13 (launch 1) and p writes d[0:16] at line 7 "
                                "(launch 1) with no happens-before order between them"]
  image_round_trip(hcqdsl.parse(REBOUND, "p.hcq"))
  r = hcqdsl.run(hcqdsl.parse(REBOUND, "p.hcq"), launches=3)
  assert r.hang is None and r.fault is None

def test_compile_and_disasm():
  """A poll is tinygrad's poll_bit packet (byte-exact: tests/test_amd_encode.py); disasm names its function and mask."""
  from hcqdsl.vendors import compile_program
  from hcqdsl.vendors import disasm_image
  img = compile_program(hcqdsl.parse(PROG, "p.hcq"))
  c = img.queue("c")
  assert c.dwords[:7] == [c.dwords[0], 0x13, *(lambda a: (a & U32_MAX, a >> 32))(img.buffers["poll"][0] + 60), 0x01000000, 0x01000000, 4]
  text = disasm_image(img)
  at = text.index("WAIT_REG_MEM  ; p.hcq:13  poll poll[60:64] & 16777216 == 16777216")
  fields = text[at:].splitlines()[1:9]
  assert [ln.split()[:2] for ln in fields][:1] == [["function", "3"]] and "(==)" in fields[0]
  assert any(ln.split()[:2] == ["mask", "0x1000000"] for ln in fields)
  assert "dword +4: patched per launch = k" in text[text.index("poll poll[0:4] == k"):]

def rdma_pairs(n: int) -> str:
  """n copies of programs/rdma_poll.hcq's NIC/consumer pair, each on its own completion word, and a finalizer."""
  out = ["device gpu = AMD:0 gfx1100", "buffer src on gpu size 64", "kernel add(out c, in a, in b)"]
  for k in range(n):
    out += [f"buffer dst{k} on gpu size 64", f"buffer res{k} on gpu size 64", f"buffer cq{k} on gpu size 64", f"signal s{k} on gpu",
            f"queue nic{k} copy on gpu {{\n  epoch\n  copy dst{k} <- src\n  write cq{k}[60:64] = 0x01000000\n}}",
            f"queue comp{k} compute on gpu {{\n  epoch\n  poll cq{k}[60:64] & 0x01000000 == 0x01000000\n  write cq{k}[60:64] = 0\n"
            f"  exec add(res{k}, dst{k}, dst{k})\n  signal s{k} = gpu.epoch\n}}"]
  out.append("queue fin compute on gpu {\n" + "".join(f"  wait s{k} >= gpu.epoch\n" for k in range(n)) + "  signal gpu.timeline = gpu.epoch\n}")
  out.append("host {\n  wait gpu.timeline >= gpu.epoch - 1\n}")
  return "\n".join(out) + "\n"

def test_check_polls_at_size():
  """Polls whose stores are ordered against them are decided by the one happens-before execution, as waits are: 401
  queues over 16 launches (no exploration could enumerate their interleavings) are exact and clean; a pair without
  its poll races, a pair whose NIC stores the wrong bit deadlocks at its poll, each at its line and launch."""
  from hcqdsl.check.unroll import unroll
  from hcqdsl.check.hb import happens_before
  prog = hcqdsl.parse(rdma_pairs(200), "big.hcq")
  assert happens_before(unroll(prog, 16)).exact and _diags(rdma_pairs(200), 16) == []
  text = rdma_pairs(200).replace("  poll cq7[60:64] & 0x01000000 == 0x01000000\n", "") \
                        .replace("write cq9[60:64] = 0x01000000", "write cq9[60:64] = 0x02000000")
  assert happens_before(unroll(hcqdsl.parse(text, "big.hcq"), 16)).exact
  assert _diags(text, 16) == [
    "p.hcq:127:3: error[race]: comp7 writes cq7[60:64] at line 127 (launch 1) and nic7 writes cq7[60:64] at line 123 (launch 1) with no "
    "happens-before order between them",
    "p.hcq:128:3: error[race]: comp7 reads dst7[0:64] at line 128 (launch 1) and nic7 writes dst7[0:64] at line 122 (launch 1) with no "
    "happens-before order between them",
    "p.hcq:158:3: error[deadlock]: comp9 polls forever for cq9[60:64] & 0x1000000 == 0x1000000 (launch 1); cq9[60:64] is stuck at 0x2000000, and no "
    "store left in the checked launches makes it so"]
