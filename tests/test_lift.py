"""hcqdsl lift: images and dump manifests back to .hcq; the round-trip property; hang triage; bad input."""
from __future__ import annotations
import glob, json, pathlib
import pytest
from hypothesis import given, settings, HealthCheck
from cli_run import cli
import hcqdsl
from hcqdsl.vendors import compile_program
from hcqdsl.lift.image import lift_image
from hcqdsl.lift.manifest import lift_manifest, load_manifest, lift_file, ManifestError
from hcqdsl import parse, parse_with_diagnostics
from hcqdsl.lang.format import format_program
from hcqdsl.diagnostics import render_text
import check_gen
from lift_util import manifest_from_image, HANG, hang_manifest
from round_trip import codes, image_round_trip

ROOT = pathlib.Path(__file__).resolve().parent.parent

def _compilable():
  out = []
  for f in sorted(glob.glob(str(ROOT / "programs" / "*.hcq"))):
    prog, diags = parse_with_diagnostics(pathlib.Path(f).read_text(), f)
    if prog is None or any(d.severity == "error" and d.code in ("syntax", "name", "bounds", "overflow") for d in diags): continue
    out.append(f)
  return out

PROGRAMS = _compilable()

def test_every_compilable_program_is_covered():
  assert len(PROGRAMS) >= 40

@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: pathlib.Path(p).stem)
def test_image_round_trip(path):
  """check(lift(compile(p))) reports the same codes at the same statements as check(p); compile(lift(compile(p)))
  gives the same dwords and patches."""
  image_round_trip(hcqdsl.parse_file(path))

def test_image_round_trip_generated():
  seen = []
  @settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
  @given(check_gen.programs())
  def one(text):
    image_round_trip(parse(text, "gen.hcq"))
    seen.append(1)
  one()
  assert len(seen) >= 60

def test_image_round_trip_generated_with_polls():
  """Generated programs with `poll`s (function `==` under a mask) and the `write`s into their words: the image lift
  gives them back byte-exact."""
  seen = {"programs": 0, "polls": 0}
  @settings(max_examples=60, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
  @given(check_gen.programs(polls=True))
  def one(text):
    p = parse(text, "gen.hcq")
    image_round_trip(p)
    seen["programs"] += 1
    seen["polls"] += sum(type(s).__name__ == "Poll" for q in p.queues for s in q.body)
  one()
  assert seen["programs"] == 60 and seen["polls"] >= 30, seen

def test_image_round_trip_generated_any_layout():
  """tests/strategies.py: up to 3 devices and archs, inits, expects, comments, declarations in any order (the host
  block between queues). Programs with static errors or missing code objects do not compile; the rest are all compared."""
  import strategies
  seen = {"compared": 0, "invalid": 0}
  @settings(max_examples=200, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
  @given(strategies.programs())
  def one(p):
    p, diags = parse_with_diagnostics(format_program(p), "g.hcq")
    if p is None or any(d.severity == "error" for d in diags):
      seen["invalid"] += 1
      return
    try: compile_program(p)
    except hcqdsl.HcqError:  # `amd "k.co"` kernels whose file does not exist
      seen["invalid"] += 1
      return
    image_round_trip(p)
    seen["compared"] += 1
  one()
  assert seen["compared"] >= 40, seen

def test_image_lift_inits_of_buffers_smaller_than_a_word():
  # the bytes as u32 words would run past a 1-, 3- or 6-byte buffer (a bounds error): they stay bytes
  text = ("device g = AMD:0\nbuffer e on host size 1 rebound = u8 [1], u8 [2]\nbuffer f on g size 6 = u8 [1, 2, 3, 4, 5]\n"
          "buffer r on host size 3 rewritten = u8 [1], u8 [2, 3]\nkernel k(in x)\n"
          "queue q compute on g {\n  exec k(e)\n  exec k(f)\n  exec k(r)\n}\n")
  lifted = format_program(lift_image(compile_program(parse(text, "t.hcq"))))
  assert ("buffer e on host size 1 rebound = u8 [1], u8 [2]\n" in lifted and "buffer f on g size 6 = u8 [1, 2, 3, 4, 5]\n" in lifted
          and "buffer r on host size 3 rewritten = u8 [1], u8 [2, 3]\n" in lifted), lifted
  def codes(t, f): return sorted(d.code for d in hcqdsl.check(parse(t, f)))
  # the rewrite races, as written; the kernel reads what the host wrote with no barrier (the HDP flush) after it
  assert codes(lifted, "l.hcq") == codes(text, "t.hcq") == ["race", "race", "visibility"]

def test_image_lift_keeps_kernels_inits_and_expects():
  lifted = image_round_trip(hcqdsl.parse_file(ROOT / "programs" / "run_pipeline.hcq"))
  r = hcqdsl.run(lifted, launches=2)
  assert r.ok, r.summary()
  text = format_program(lift_image(compile_program(parse(
    "device g = AMD:0 gfx942\nbuffer a on g size 16 = u32 [1, 2]\nsignal s on host = 7\nvar v\n"
    "kernel k(in x) = builtin fill<f32>(2.5)\nqueue q compute on g {\n  exec k(a[4:8]) grid (2, 1, 1)\n  signal s = v + 3\n}\n"
    "expect a[0:8] == u32 [1, 2]\n", "t.hcq"))))
  assert text == ("# lifted from t.hcq (gfx1100) by hcqdsl lift\ndevice g = AMD:0 gfx942\n\nbuffer a on g size 16 = u32 [1, 2]\n\n"
                  "signal s on host = 7\n\nvar v\n\nkernel k(in x) = builtin fill<f32>(2.5)\n\nqueue q compute on g {\n"
                  "  exec k(a[4:8]) grid (2, 1, 1)\n  signal s = v + 3\n}\n\nexpect a[0:8] == u32 [1, 2]\n")

# ---- raw dumps

RANGED_EXEC = {"copy_pipeline", "ranges_disjoint"}  # kernels given byte ranges: a pointer does not say where they end
# `x@k`: a raw dump has no regions, so launch 1's memory of a rebound buffer lifts as a plain buffer (no stale-input)
LAUNCH_MEMORY = {"stale_input_copy"}

@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: pathlib.Path(p).stem)
def test_manifest_round_trip(path):
  """Dwords only (the form capture records: two launches of submissions and host steps, kernarg blocks, buffers,
  parameter modes): the lifted program gets the same codes at the same statements — a kernel given a byte range is
  widened to the buffer's end, so there check may only find more."""
  prog = hcqdsl.parse_file(path)
  img = compile_program(prog)
  text = format_program(lift_manifest(load_manifest(manifest_from_image(img, 2))))
  lifted = parse(text, "raw.hcq")
  # the lifted statements carry their dword offsets: map them to the original statements through the source map
  back = {}
  for q, lq in zip(img.queues, lifted.queues):
    at = {s.offset: i for i, s in enumerate(q.stmts) if s.length}
    for i, s in enumerate(lq.body): back[("stmt", q.name, i)] = ("stmt", q.name, at[int(s.comment.split("@")[1])])
  def norm(cs): return sorted((back.get(k, k), c) for k, c, _ in cs if not k or k[0] == "stmt")
  want, got = norm(codes(prog)), norm(codes(lifted))
  if pathlib.Path(path).stem in RANGED_EXEC: assert set(want) <= set(got)
  elif pathlib.Path(path).stem in LAUNCH_MEMORY: assert set(got) < set(want) and {c for _, c in set(want) - set(got)} == {"stale-input"}
  else: assert want == got
  if any(q.mem_patches for q in img.queues) or img.rewrites or any(h["op"] == "write" for h in img.host):
    return   # the host's writes to kernargs/buffers are CPU work, no ring dword: a raw dump has neither them nor a race at them
  assert [d.code for d in hcqdsl.check(prog, 2) if d.span and d.span.line in {s.span.line for s in (prog.host.body if prog.host else ())}] == \
         [d.code for d in hcqdsl.check(lifted, 2) if d.span and d.span.line in {s.span.line for s in (lifted.host.body if lifted.host else ())}]

# ---- hang triage

TRIAGE = """\
# hcq: launches=1
# lifted from <manifest> by hcqdsl lift (the work left at the dump: signals start at their snapshot values)
device gpu0 = AMD:0 gfx1100

signal s_100000000000 on host = 26
signal s_100000000010 on host = 26

queue q0 compute on gpu0 {
  # ran @0: wait s_100000000000 >= 1
  # ran @7: signal s_100000000010 = 26
  # stopped here (read_ptr 15, write_ptr 30)
  # stuck: waits for s_100000000000 >= 27, which holds 26; released only by q1 `signal s_100000000000 = 27` @6
  wait s_100000000000 >= 27  # @15
  signal s_100000000010 = 27  # @22
}

queue q1 copy on gpu0 {
  # stopped here (read_ptr 0, write_ptr 10)
  # stuck: waits for s_100000000010 >= 27, which holds 26; released only by q0 `signal s_100000000010 = 27` @22
  wait s_100000000010 >= 27  # @0
  signal s_100000000000 = 27  # @6
}
"""

def test_triage_marks_where_queues_stopped():
  assert format_program(lift_manifest(load_manifest(hang_manifest()))) == TRIAGE
  # the CP's read pointer runs ahead of the wait it executes: a wait just before it that the snapshot does not
  # satisfy is still the one it is stuck at
  assert format_program(lift_manifest(load_manifest(hang_manifest(q0_read=22)))) == TRIAGE.replace("read_ptr 15", "read_ptr 22")

def test_triage_check_and_run_name_the_stuck_wait():
  text = format_program(lift_manifest(load_manifest(hang_manifest())))
  out = render_text(hcqdsl.check_text(text, "t.hcq", 1), {})
  assert out.splitlines()[0] == ("t.hcq:13:3: error[deadlock]: q0 waits forever for s_100000000000 >= 27 (launch 1); "
                                 "s_100000000000 is stuck at 26; q1 would write s_100000000000 at line 21 (launch 1) but is itself blocked")
  assert "note: cycle of waits: q0 -> q1 -> q0" in out and "q1 waits for s_100000000010 >= 27 (launch 1)" in out
  r = hcqdsl.run(text)
  assert r.hang is not None and [(b.queue, b.signal, b.needed, b.now) for b in r.hang.blocked] == \
    [("q0", "s_100000000000", 27, 26), ("q1", "s_100000000010", 27, 26)]

def test_triage_nothing_can_release():
  text = format_program(lift_manifest(load_manifest(hang_manifest(q1=False))))
  assert "# stuck: waits for s_100000000000 >= 27, which holds 26; no pending write brings it there: nothing can release it" in text
  [d] = [d for d in hcqdsl.check_text(text, "t.hcq", 1) if d.severity == "error"]
  assert d.message == "q0 waits forever for s_100000000000 >= 27 (launch 1); s_100000000000 is stuck at 26, and nothing writes s_100000000000"

def test_triage_released_by_snapshot_is_no_hang():
  text = format_program(lift_manifest(load_manifest(hang_manifest(a=27))))
  assert "# stuck" not in text.split("queue q1")[0]
  assert [d.code for d in hcqdsl.check_text(text, "t.hcq", 1)] == ["redundant-wait"]  # a >= 27 holds already

def test_ring_wrap():
  """Pending dwords that run past the ring's end continue at its start (packets may straddle the end)."""
  img = compile_program(parse(HANG, "h.hcq"))
  dw = img.queues[0].dwords  # 30 dwords
  ring = [0] * 32
  start = 20  # the ring index where the stream begins; the second and third packets straddle the end
  for i, x in enumerate(dw): ring[(start + i) % 32] = x
  m = {"format": "hcqdsl-manifest", "version": 1,
       "queues": [{"device": "gpu0", "target": "gfx1100", "engine": "compute", "dwords": ring, "start": 52, "read_ptr": 52, "write_ptr": 82}]}
  body = [hcqdsl.lang.format.format_stmt(s) for s in lift_manifest(load_manifest(m)).queues[0].body]
  assert body == ["wait s_100000000000 >= 1", "signal s_100000000010 = 26", "wait s_100000000000 >= 27", "signal s_100000000010 = 27"]
  # ring indices instead of counters: the write pointer is below the read pointer after wrapping
  m["queues"][0].update(start=20, read_ptr=20, write_ptr=18)
  assert [hcqdsl.lang.format.format_stmt(s) for s in lift_manifest(load_manifest(m)).queues[0].body] == body

# ---- bad input: an error naming the field, or a packet kept as a comment with its offset

def test_truncated_and_unknown_packets_are_comments():
  img = compile_program(parse(HANG, "h.hcq"))
  dw = list(img.queues[0].dwords)
  m = {"format": "hcqdsl-manifest", "version": 1,
       "queues": [{"device": "gpu0", "target": "gfx1100", "engine": "compute", "dwords": dw[:7] + [0xC0001700,
                                                                                                   5] + dw[7:18]}]}  # 0x17: an opcode no header names
  q = lift_manifest(load_manifest(m)).queues[0]
  assert [hcqdsl.lang.format.format_stmt(s) for s in q.body] == ["wait s_100000000000 >= 1", "signal s_100000000010 = 26"]
  assert q.body[1].comments == ("# @7: UNKNOWN_0x17: cannot lift (unknown PM4 opcode 0x17): c0001700 00000005",)
  assert q.end_comments == ("# @17: RAW: cannot lift (truncated: WAIT_REG_MEM needs 6 body dwords, 2 left): c0053c00 00000015 00000000",)
  # the program is still checkable (nothing writes `a`: the one wait deadlocks)
  assert [d.code for d in hcqdsl.check(parse(format_program(lift_manifest(load_manifest(m))), "x.hcq"), 1)] == ["deadlock", "unused-signal"]

def test_sdma_unknown_op_is_a_comment():
  m = {"format": "hcqdsl-manifest", "version": 1,
       "queues": [{"device": "g", "target": "gfx942", "engine": "sdma", "dwords": "000000ee 00000000"}]}
  q = lift_manifest(load_manifest(m)).queues[0]
  assert q.body == () and q.end_comments == ("# @0: UNKNOWN_238_0: cannot lift (unknown SDMA op 238 sub-op 0): 000000ee",)

BAD = [
  ({}, "m.json: format: missing"),
  ({"format": "x"}, 'm.json: format: expected "hcqdsl-manifest", got "x"'),
  ({"format": "hcqdsl-manifest", "version": 3}, "m.json: version: this hcqdsl reads manifest versions 1 and 2, got 3"),
  ({"format": "hcqdsl-manifest", "version": "one"}, "m.json: version: expected an integer (or a \"0x...\" string), got 'one'"),
  ({"format": "hcqdsl-manifest", "version": 1}, "m.json: queues: missing"),
  ({"format": "hcqdsl-manifest", "version": 1, "queues": {}}, "m.json: queues: expected a list, got dict"),
  ({"format": "hcqdsl-manifest", "version": 1, "queues": [3]}, "m.json: queues[0]: expected an object, got int"),
  ({"format": "hcqdsl-manifest", "version": 1, "queues": [{"device": "g", "target": "gfx9", "engine": "compute", "dwords": []}]},
   "m.json: queues[0].target: unknown target `gfx9` (one of gfx942, gfx1100, gfx1201, sm_86, sm_89, sm_90, sm_120)"),
  ({"format": "hcqdsl-manifest", "version": 1, "queues": [{"device": "g", "target": "gfx942", "engine": 3, "dwords": []}]},
   "m.json: queues[0].engine: expected a non-empty string, got 3"),
  ({"format": "hcqdsl-manifest", "version": 1, "queues": [{"device": "g", "target": "gfx942", "engine": "dma", "dwords": []}]},
   "m.json: queues[0].engine: expected compute (pm4) or copy (sdma), got `dma`"),
  ({"format": "hcqdsl-manifest", "version": 1, "queues": [{"device": "g", "target": "gfx942", "engine": "copy"}]},
   "m.json: queues[0].dwords: missing (give `dwords`: hex text or a list of integers, or `file`)"),
  ({"format": "hcqdsl-manifest", "version": 1, "queues": [{"device": "g", "target": "gfx942", "engine": "copy", "dwords": [1, -2]}]},
   "m.json: queues[0].dwords[1]: expected a 32-bit unsigned integer, got -2"),
  ({"format": "hcqdsl-manifest", "version": 1, "queues": [{"device": "g", "target": "gfx942", "engine": "copy", "dwords": "zz"}]},
   "m.json: queues[0].dwords: expected hex dwords: 1:1: `zz` is not a hex dword"),
  ({"format": "hcqdsl-manifest", "version": 1, "queues": [{"device": "g", "target": "gfx942", "engine": "copy", "dwords": [0], "read_ptr": 5}]},
   "m.json: queues[0].read_ptr: 5 is past the 1 dwords given (give write_ptr for a ring)"),
  ({"format": "hcqdsl-manifest", "version": 1, "queues": [{"device": "g", "target": "gfx942", "engine": "copy", "dwords": [0, 0], "start": 0,
                                                           "write_ptr": 9}]},
   "m.json: queues[0].write_ptr: 9 dwords between start/read_ptr and write_ptr, but the ring holds 2"),
  ({"format": "hcqdsl-manifest", "version": 1, "queues": [{"device": "g-1", "target": "gfx942", "engine": "copy", "dwords": []}]},
   "m.json: queues[0].device: `g-1` is not an identifier ([A-Za-z_][A-Za-z0-9_]*)"),
  ({"format": "hcqdsl-manifest", "version": 1, "queues": [{"device": "g", "target": "gfx942", "engine": "copy", "dwords": []}],
    "signals": [{"addr": "0x10", "value": 2**32}]}, "m.json: signals[0].value: 4294967296 is not a 32-bit signal value"),
  ({"format": "hcqdsl-manifest", "version": 1, "queues": [{"device": "g", "target": "gfx942", "engine": "copy", "dwords": []}],
    "signals": [{"addr": 16}]}, "m.json: signals[0].value: missing"),
  ({"format": "hcqdsl-manifest", "version": 1, "queues": [{"device": "g", "target": "gfx942", "engine": "copy", "dwords": []}],
    "host": [{"op": "submit", "queue": "q", "start": 0, "length": 1}]}, "m.json: host[0].queue: unknown queue `q`"),
  ({"format": "hcqdsl-manifest", "version": 1, "queues": [{"name": "q", "device": "g", "target": "gfx942", "engine": "copy", "dwords": []}],
    "host": [{"op": "submit", "queue": "q", "start": 0, "length": 1}]}, "m.json: host[0].length: dwords 0..1 are past the 0 dwords of `q`"),
  ({"format": "hcqdsl-manifest", "version": 1, "queues": [{"device": "g", "target": "gfx942", "engine": "copy", "dwords": []}],
    "host": [{"op": "jump"}]}, "m.json: host[0].op: expected submit, signal or wait, got `jump`"),
  ({"format": "hcqdsl-manifest", "version": 2, "queues": [{"device": "g", "target": "gfx942", "engine": "copy", "dwords": []}],
    "host": [{"op": "jump"}]}, "m.json: host[0].op: expected submit, signal, wait or write, got `jump`"),
  ({"format": "hcqdsl-manifest", "version": 2, "queues": [{"device": "g", "target": "gfx942", "engine": "copy", "dwords": []}],
    "host": [{"op": "write", "addr": "0x1000"}]}, "m.json: host[0].hex: missing"),
  ({"format": "hcqdsl-manifest", "version": 1, "queues": [{"device": "g", "target": "gfx942", "engine": "copy", "dwords": []}],
    "host": [{"op": "write", "addr": "0x1000", "hex": "00"}]}, "m.json: host[0].op: expected submit, signal or wait, got `write`"),
  ({"format": "hcqdsl-manifest", "version": 1, "queues": [{"device": "g", "target": "gfx942", "engine": "copy", "dwords": []}],
    "kernels": [{"prog_addr": 1, "params": ["rw"]}]}, "m.json: kernels[0].params[0]: expected in, out or inout, got \"rw\""),
]

@pytest.mark.parametrize("m,msg", BAD, ids=range(len(BAD)))
def test_bad_manifest(m, msg):
  with pytest.raises(ManifestError) as e: load_manifest(m, "m.json")
  assert str(e.value) == msg


def test_cli_errors(tmp_path):
  bad = tmp_path / "bad.json"
  bad.write_text('{"format": "hcqdsl-manifest",\n "version": 1,,}')
  r = cli("lift", bad)
  assert (r.returncode, r.stdout, r.stderr) == (
    1, "", f"hcqdsl: error: {bad}:2:15: invalid JSON: Expecting property name enclosed in double quotes\n")
  bad.write_text(json.dumps(BAD[10][0]))
  r = cli("lift", bad)
  assert (r.returncode, r.stderr) == (1, f"hcqdsl: error: {bad}: {BAD[10][1][len('m.json: '):]}\n")
  (tmp_path / "raw.hex").write_text("c0053c00 00000015\n")
  r = cli("lift", tmp_path / "raw.hex")
  assert (r.returncode, r.stderr) == (1, f"hcqdsl: error: {tmp_path / 'raw.hex'}: neither an image (.hcqimg) nor a manifest (JSON); "
                                         "raw dwords need a manifest (docs/lift.md)\n")
  r = cli("lift", tmp_path / "none.json")
  assert (r.returncode, r.stderr) == (2, f"hcqdsl: error: {tmp_path / 'none.json'}: no such file\n")   # as every command
  img = compile_program(parse(HANG, "h.hcq")).to_bytes()
  (tmp_path / "t.hcqimg").write_bytes(img[:40])
  r = cli("lift", tmp_path / "t.hcqimg")
  assert r.returncode == 1 and r.stderr.startswith(f"hcqdsl: error: {tmp_path / 't.hcqimg'}: ") and "Traceback" not in r.stderr

def test_cli_lift_then_check(tmp_path):
  (tmp_path / "m.json").write_text(json.dumps(hang_manifest()))
  dump = tmp_path / "q1.bin"  # a dword file next to the manifest, little-endian binary
  img = compile_program(parse(HANG, "h.hcq"))
  dump.write_bytes(b"".join(x.to_bytes(4, "little") for x in img.queues[1].dwords))
  m = hang_manifest()
  m["queues"][1].pop("dwords")
  m["queues"][1]["file"] = "q1.bin"
  (tmp_path / "m.json").write_text(json.dumps(m))
  r = cli("lift", tmp_path / "m.json", "-o", tmp_path / "m.hcq")
  assert (r.returncode, r.stderr) == (0, f"wrote {tmp_path / 'm.hcq'}: 2 queues\n")
  assert (tmp_path / "m.hcq").read_text() == TRIAGE.replace("<manifest>", str(tmp_path / "m.json"))
  r = cli("check", tmp_path / "m.hcq")  # launches=1 from the header
  assert r.returncode == 1 and r.stdout.endswith("failed: 1 error, 0 warnings over 1 launch, 2 queues\n")
  r = cli("compile", ROOT / "programs" / "spec_example.hcq", "-o", tmp_path / "s.hcqimg")
  r = cli("lift", tmp_path / "s.hcqimg")
  assert r.returncode == 0 and r.stdout.startswith("# lifted from ") and "queue x1 copy on gpu1 {\n  epoch\n" in r.stdout

def test_names_from_the_manifest_stay_valid():
  """Given names that are keywords or taken fall back to address names; one kernel on two devices is one `kernel`."""
  src = ("device g0 = AMD:0\ndevice g1 = AMD:1\nbuffer a on g0 size 64\nbuffer b on g1 size 64\nkernel k(out x)\n"
         "queue q0 compute on g0 {\n  exec k(a)\n}\nqueue q1 compute on g1 {\n  exec k(b)\n}\n")
  img = compile_program(parse(src, "n.hcq"))
  m = manifest_from_image(img, 1)
  for k in m["kernels"]: k["name"] = "E_4"
  m["buffers"][0]["name"], m["buffers"][1]["name"] = "copy", "q0"
  text = format_program(lift_manifest(load_manifest(m)))
  prog = parse(text, "n2.hcq")
  assert [k.name for k in prog.kernels] == ["E_4"]
  assert [b.name for b in prog.buffers] == [f"b_{img.buffers['a'][0]:x}", f"b_{img.buffers['b'][0]:x}"]
  assert [hcqdsl.lang.format.format_stmt(q.body[0]) for q in prog.queues] == [f"exec E_4(b_{img.buffers[n][0]:x})" for n in "ab"]
  assert hcqdsl.check(prog, 1) == []

def test_corrupt_image_metadata_is_an_error(tmp_path):
  from fuzz import edit_metadata
  b = compile_program(parse(HANG, "h.hcq")).to_bytes()
  (tmp_path / "bad.hcqimg").write_bytes(edit_metadata(b, lambda m: m["queues"][0].update(arch="gfx9")))
  with pytest.raises(ManifestError) as e: lift_file(tmp_path / "bad.hcqimg")
  assert str(e.value) == (f"{tmp_path / 'bad.hcqimg'}: corrupt image metadata: queues[0].arch is 'gfx9', "
                          "not one of gfx1100, gfx1201, gfx942, sm_120, sm_86, sm_89, sm_90")
  (tmp_path / "bad2.hcqimg").write_bytes(edit_metadata(b, lambda m: m.update(host=[{"op": "submit"}])))
  with pytest.raises(ManifestError) as e: lift_file(tmp_path / "bad2.hcqimg")
  assert str(e.value) == f"{tmp_path / 'bad2.hcqimg'}: corrupt image metadata: host[0] has no `line`"

def test_an_image_that_does_not_fit_the_schema_is_not_written():
  img = compile_program(parse(HANG, "h.hcq"))
  img.queues[0].arch = "gfx9"
  with pytest.raises(ValueError) as e: img.to_bytes()
  assert str(e.value) == "cannot write image metadata: queues[0].arch is 'gfx9', not one of gfx1100, gfx1201, gfx942, sm_120, sm_86, sm_89, sm_90"

def test_triage_of_an_emulator_hang():
  """The emulator plays the GPU that hung: its rings (launch 1's dwords), where each blocked queue stopped and the
  signal values at the hang make the dump; the lift of it has the stuck waits where the emulator stopped, and check
  names them with the values the emulator saw."""
  src = ("device gpu0 = AMD:0 gfx942\nsignal a on gpu0\nsignal b on gpu0\nsignal c on gpu0\n"
         "queue q0 compute on gpu0 {\n  signal c = 5\n  wait b >= 1\n  signal a = 1\n}\n"
         "queue q1 copy on gpu0 {\n  wait c >= 5\n  signal c = 6\n  wait a >= 1\n  signal b = 1\n}\n")
  prog = parse(src, "e.hcq")
  img = compile_program(prog)
  r = hcqdsl.run(prog)
  assert r.hang is not None
  stopped = {b.queue: b.ring_offset // 4 for b in r.hang.blocked}
  m = {"format": "hcqdsl-manifest", "version": 1,
       "queues": [{"name": q.name, "device": q.device, "target": q.arch, "engine": q.engine, "dwords": img.patched(q, img.env(1)),
                   "read_ptr": stopped.get(q.name, len(q.dwords))} for q in img.queues],
       "signals": [{"addr": img.signals[n], "value": v} for n, v in r.signals.items()]}
  text = format_program(lift_manifest(load_manifest(m)))
  sa, sb = f"s_{img.signals['a']:x}", f"s_{img.signals['b']:x}"
  assert f"# stuck: waits for {sb} >= 1, which holds 0; released only by q1 `signal {sb} = 1` @16" in text
  assert f"# stuck: waits for {sa} >= 1, which holds 0; released only by q0 `signal {sa} = 1` @15" in text
  assert "# ran @0: signal s_" in text and "# ran @6: signal s_" in text  # both queues got past their first writes
  [d] = hcqdsl.check_text(text, "e2.hcq", 1)  # one report per cycle, its hops as related locations
  assert (d.code, d.extra["queue"], d.extra["signal"], d.extra["needed"], d.extra["value"]) == ("deadlock", "q0", sb, 1, 0)
  assert [r.message for r in d.related] == [f"q0 waits for {sb} >= 1 (launch 1), which q1 writes only at line 24",
                                            f"q1 waits for {sa} >= 1 (launch 1), which q0 writes only at line 15"]

def test_kernarg_block_shorter_than_params():
  img = compile_program(parse("device g = AMD:0\nbuffer a on g size 64\nkernel k(out x)\nqueue q compute on g {\n  exec k(a)\n}\n", "k.hcq"))
  m = manifest_from_image(img, 1)
  m["kernels"][0]["params"] = ["out", "in"]  # the block holds one pointer only
  prog = parse(format_program(lift_manifest(load_manifest(m))), "k2.hcq")
  assert [(k.name, [p.mode for p in k.params]) for k in prog.kernels] == [(f"k_{img.kernels[0]['prog_addr']:x}", ["out"])]
  assert hcqdsl.check(prog, 1) == []

def test_ring_without_pointers_keeps_straddling_packets_as_comments():
  """The same wrapped ring without pointers: read from index 0, the packet cut by the ring's end is a truncated packet
  at its offset, and the tail of the one that started at the end is unknown dwords at offset 0 — comments, no crash."""
  img = compile_program(parse(HANG, "h.hcq"))
  ring = [0] * 32
  for i, x in enumerate(img.queues[0].dwords): ring[(20 + i) % 32] = x
  m = {"format": "hcqdsl-manifest", "version": 1, "queues": [{"device": "gpu0", "target": "gfx1100", "engine": "compute", "dwords": ring}]}
  q = lift_manifest(load_manifest(m)).queues[0]
  comments = [c for s in q.body for c in s.comments] + list(q.end_comments)
  assert comments and all(c.startswith("# @") for c in comments)
  assert comments == [
    "# @0: 3 x RAW: cannot lift (type-0 packet header (only type-3 packets are used on compute queues)): 0000001a 00000000 00000000",
    "# @18: 2 x RAW: cannot lift (type-0 packet header (only type-3 packets are used on compute queues)): 00000000 00000000",
    "# @27: RAW: cannot lift (truncated: RELEASE_MEM needs 7 body dwords, 4 left): c0064900 0070f514 20000000 00000010 00001000"]
  assert [hcqdsl.lang.format.format_stmt(s) for s in q.body] == \
    ["wait s_100000000000 >= 27", "signal s_100000000010 = 27", "wait s_100000000000 >= 1"]

def test_docs_describe_the_manifest():
  """docs/lift.md lists the manifest's keys as lift/schema.py's MANIFEST declares them (describe())."""
  from hcqdsl.lift.schema import describe
  assert describe() in (pathlib.Path(__file__).resolve().parents[1] / "docs" / "lift.md").read_text()

def test_capture_writes_what_the_declaration_reads():
  """encode (the writer) and load_manifest (the reader) meet in MANIFEST: a record written is read back."""
  from hcqdsl.lift.schema import MANIFEST_KIND, MANIFEST_VERSION, encode
  m = encode({"format": MANIFEST_KIND, "version": MANIFEST_VERSION,
                               "devices": [{"name": "gpu0", "index": 0, "arch": "gfx1100", "_dev": 1}],
                               "queues": [{"name": "q", "device": "gpu0", "target": "gfx1100", "engine": "compute", "dwords": [0xc0001000, 0]}],
                               "signals": [{"addr": 1 << 40, "value": 5}], "memory": [{"addr": 0x1000, "hex": b"\x01\x02", "step": 0}],
                               "host": [{"op": "submit", "queue": "q", "start": 0, "length": 2, "signals": {1 << 40: 5}},
                                        {"op": "write", "addr": 0x1000, "hex": b"\x03", "staged": True}]})
  assert m["devices"] == [{"name": "gpu0", "index": 0, "arch": "gfx1100"}] and m["signals"] == [{"addr": "0x10000000000", "value": 5}]
  assert m["queues"][0]["dwords"] == "c0001000 00000000" and m["host"][0]["signals"] == {"0x10000000000": 5}
  r = load_manifest(m)
  assert r.queues[0].dwords == [0xc0001000, 0] and r.signals[1 << 40]["value"] == 5 and r.steps == [(0x1000, b"\x01\x02", 0), (0x1000, b"\x03", 2)]
  assert r.host[1] == {"op": "write", "addr": 0x1000, "data": b"\x03", "size": 1, "staged": True}

def test_a_repeat_without_a_dispatch_is_no_launch():
  """Two identical uploads in a row then the kernels (a plain realize of two inputs) repeat a copy, not a launch: folded
  on them, the lift was 2 launches of one copy with the kernels left out (issue 37: 0 execs, a warning); a launch of a
  TinyJit's graph dispatches, so a repetition must."""
  from hcqdsl.lift.steps import period
  up, wait = ("submit", "copy0_gpu0", (("COPY_LINEAR", 64),)), ("wait", 0x1000, False)
  shapes = [up, wait, up, wait, ("submit", "comp_gpu0", (("DISPATCH_DIRECT", 0x7000),)), ("submit", "comp_gpu0", (("DISPATCH_DIRECT", 0x8000),))]
  assert period(shapes) == (0, 2, 2)
  assert period(shapes, launching={4, 5}) is None
  graph = [up, ("submit", "comp_gpu0", (("DISPATCH_DIRECT", 0x7000),)), wait] * 3
  assert period(graph, launching={1, 4, 7}) == (0, 3, 3)
