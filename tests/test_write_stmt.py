"""`write` (tinygrad's HWQueue.write) through every layer: both parse paths, the formatter, the static checks, check,
the emulator, and the lifts of tinygrad's own packets (its AMDComputeQueue/AMDCopyQueue on a stand-in device), where a
masked poll (poll_bit) becomes a `poll`, not a `wait` it is not. Encodings: tests/test_amd_encode.py."""
import hcqdsl
from hcqdsl.ir import Write, Slice, Ref, Expr
from hcqdsl.lang.scan import scan
from hcqdsl.lift.manifest import lift_manifest, load_manifest
from amd_standin import StandinDevice, buf, signal, compute_queue, copy_queue

PROG = """device gpu = AMD:0 gfx1100
buffer write on gpu size 16
signal done on gpu
var k
queue c compute on gpu {
  write write[0:4] = 0x42
  signal done = k
}
queue x copy on gpu {
  wait done >= k
  write write[8:16] = k + 1
}
"""

def test_parse_format_scan():
  p = hcqdsl.parse(PROG, "w.hcq")
  assert p.queues[0].body[0] == Write(Slice(Ref("write"), 0, 4, True), Expr(None, 0x42))   # `write` is also a name
  assert p.queues[1].body[1] == Write(Slice(Ref("write"), 8, 16, True), Expr(Ref("k"), 1))
  assert hcqdsl.format(p) == PROG.replace("device gpu = AMD:0 gfx1100\n", "device gpu = AMD:0 gfx1100\n\n").replace(
    "size 16\n", "size 16\n\n").replace("on gpu\nvar", "on gpu\n\nvar").replace("var k\n", "var k\n\n").replace("}\nqueue", "}\n\nqueue")
  assert scan(PROG, "w.hcq") == p

def test_static_errors():
  _, d = hcqdsl.parse_with_diagnostics(PROG.replace("write[0:4]", "write[0:6]"), "w.hcq")
  assert [str(x).splitlines()[0] for x in d] == ["w.hcq:6:3: error[bounds]: `write` stores 4 or 8 bytes (a 32- or 64-bit value), not the 6 bytes of "
                                                 "`write[0:6]`"]
  _, d = hcqdsl.parse_with_diagnostics(PROG.replace("  wait done >= k\n", "  wait done >= k\n}\nhost {\n  write write[0:4] = 1\n"), "w.hcq")
  assert any(x.message.startswith("`write` is not allowed in a host block") for x in d), d

def test_check_and_run():
  p = hcqdsl.parse(PROG, "w.hcq")
  assert [d for d in hcqdsl.check(p, 2) if d.severity == "error"] == []
  racy = hcqdsl.parse(PROG.replace("  wait done >= k\n", "").replace("write[8:16]", "write[0:8]"), "r.hcq")
  [d] = [d for d in hcqdsl.check(racy, 1) if d.code == "race"]
  assert d.message.startswith("x writes write[0:8] at line 10 (launch 1) and c writes write[0:4] at line 6")
  r = hcqdsl.run(p, launches=3)
  assert r.ok and bytes(r.memory["write"]) == (0x42).to_bytes(8, "little") + (4).to_bytes(8, "little")

def _lift(queues: list, buffers: list) -> str:
  m = {"format": "hcqdsl-manifest", "version": 1, "queues": queues, "buffers": buffers}
  return hcqdsl.format(lift_manifest(load_manifest(m)))

def test_lift_tinygrads_write_and_poll_bit():
  d = StandinDevice("gfx1100")
  c = compute_queue(d)
  c.write(buf(0x10000), 0x01000000).poll_bit(buf(0x10000), 0x01000000, 0x01000000).write(buf(0x10008), 5, b64=True)
  c.signal(signal(0x20000), 1)
  x = copy_queue(d)
  x.wait(signal(0x20000), 1).write(buf(0x10004), 7).write(buf(0x10008), 9, b64=True)
  text = _lift([{"name": "c", "device": "gpu0", "target": "gfx1100", "engine": "compute", "dwords": [v & 0xFFFFFFFF for v in c._q]},
                {"name": "x", "device": "gpu0", "target": "gfx1100", "engine": "copy", "dwords": [v & 0xFFFFFFFF for v in x._q]}],
               [{"addr": 0x10000, "size": 16, "device": "gpu0"}])
  body = [ln.strip() for ln in text.splitlines() if ln.startswith("  ")]
  assert body[0] == "write b_10000[0:4] = 16777216  # @0"
  assert body[1] == "poll b_10000[0:4] & 16777216 == 16777216  # @8"   # poll_bit: tests/test_poll_stmt.py
  assert body[2:4] == ["write b_10000[8:16] = 5  # @15", "signal s_20000 = 1  # @23"]
  assert body[4:] == ["wait s_20000 >= 1  # @0", "write b_10000[4:8] = 7  # @6", "write b_10000[8:16] = 9  # @11"]
  assert "signal s_10000" not in text   # the polled memory is a buffer's, no signal

CODE = """device gpu = AMD:0 gfx1100
buffer code on gpu size 4K
buffer stage on host size 4K
buffer a on gpu size 64
signal up on gpu
kernel k(out a) = amd "k.co" code code
queue x copy on gpu {
  copy code[0:576] <- stage[0:576]
  signal up = 1
}
queue c compute on gpu {
  wait up >= 1
  exec k(a)
}
"""

def test_kernel_code_buffer():
  """`amd "k.co" code B`: each exec of k reads B, the buffer its code was uploaded to (`code` is a keyword only there)."""
  from reference import verdicts
  p = hcqdsl.parse(CODE, "k.hcq")
  assert p.kernels[0].impl.code == "code" and hcqdsl.parse(hcqdsl.format(p), "k.hcq") == p
  assert [d for d in hcqdsl.check(p, 1) if d.severity == "error"] == []
  q = hcqdsl.parse(CODE.replace("  wait up >= 1\n", ""), "k.hcq")
  [d] = [d for d in hcqdsl.check(q, 1) if d.code == "race"]
  assert d.message == ("c reads code[0:4096] at line 12 (launch 1) and x writes code[0:576] at line 8 (launch 1) "
                       "with no happens-before order between them")
  assert verdicts(q, 1)["race"] == {(frozenset({8, 12}), "code"): 1}
  _, diags = hcqdsl.parse_with_diagnostics(CODE.replace("code code", "code cdoe"), "k.hcq")
  assert [str(x).splitlines()[0] for x in diags] == ["k.hcq:6:35: error[name]: unknown buffer `cdoe` (did you mean `code`?)"]
