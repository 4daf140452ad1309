"""Issue 31, items 2-4: bad input never gives a traceback, an internal error (exit 3), a hang or lost data; each error
names the file, line and column where there is one. One test per cause, with the exact message."""
import json, os, random, struct, time
import pytest
from cli_run import cli
import hcqdsl

HUGE = 2**63


SIMPLE = """device gpu = AMD:0 gfx1100
signal s on gpu
var kick = [1, 2]
queue c compute on gpu {
  signal s = kick
}
host {
  wait s >= kick
}
"""

@pytest.fixture
def here(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  return tmp_path

# ---- scripts: emit, capture and sanitize agree (item 2; item 4: a script's sys.exit)

SCRIPTS = [  # (id, script bytes, FN, exit code, emit's message, capture's and sanitize's message)
  ("syntax", b"def main(:\n", "", 2, "bad.py:1:10: not a Python script: SyntaxError: invalid syntax", None),
  ("nul", b"x = 1\0\n", "", 2, "bad.py:1:6: not a Python script: a NUL byte", None),
  ("utf16", "def main(): pass\n".encode("utf-16"), "", 2, "bad.py:1:1: not a Python script: UTF-16 text (Python reads UTF-8)", None),
  ("no-fn", b"x = 1\n", "main", 2, "bad.py: no function `main`", None),
  ("base-exception", b"class Boom(BaseException): pass\nraise Boom('top')\n", "", 1,
   "bad.py:2: importing the script failed: Boom: top", "bad.py:2: Boom: top"),
  ("keyboard-interrupt", b"raise KeyboardInterrupt\n", "", 130,
   "bad.py:1: importing the script failed: KeyboardInterrupt", "bad.py:1: KeyboardInterrupt"),
  ("exit-5", b"import sys\nsys.exit(5)\n", "", 1, "bad.py:2: the script exited with status 5", None),
  ("exit-message", b"import sys\nsys.exit('no GPU')\n", "", 1, "bad.py:2: the script exited: no GPU", None),
  ("exit-in-fn", b"import sys\ndef main():\n  sys.exit(3)\n", "main", 1, "bad.py:3: the script exited with status 3", None),
]

@pytest.mark.parametrize("cmd", ["emit", "capture", "sanitize"])
@pytest.mark.parametrize("sid,script,fn,rc,emit_msg,run_msg", SCRIPTS, ids=[s[0] for s in SCRIPTS])
def test_script_failures_agree(here, cmd, sid, script, fn, rc, emit_msg, run_msg):
  (here / "bad.py").write_bytes(script)
  spec = f"bad.py:{fn}" if fn else "bad.py"
  got_rc, out, err = cli(cmd, *(["-o", "m.json"] if cmd == "capture" else []), spec)
  want = emit_msg if cmd == "emit" else run_msg or emit_msg
  assert (got_rc, err.splitlines()[0]) == (rc, f"hcqdsl: error: {want}")
  assert "Traceback" not in out + err and "internal error" not in err

def test_emit_output_errors(here):
  (here / "ok.py").write_text("from tinygrad import Tensor\ndef main():\n  return (Tensor.ones(4) + 1).realize()\n")
  # (refused before the script runs: its work would be lost at the end)
  assert cli("emit", "ok.py", "-o", "no/such/dir/x.hcq") == (2, "", "hcqdsl: error: -o no/such/dir/x.hcq: no such directory (no/such/dir)\n")
  assert cli("emit", "ok.py:main", "-o", "ok.py") == \
    (2, "", "hcqdsl: error: -o ok.py is the input ok.py: writing it would overwrite the input; give another file\n")
  assert (here / "ok.py").read_text().startswith("from tinygrad")
  assert cli("emit", "ok.py", "--max-values", "-1") == (2, "", "hcqdsl: error: --max-values must be at least 0, not -1\n")

# ---- check must reject what compile rejects, with the same message (item 2)

@pytest.mark.parametrize("decl,stmt,msg", [
  ("device gpu = AMD:65536 gfx1100", "signal s = 1", "p.hcq:1:18: error[bounds]: device index 65536 is outside 0 .. 65535"),
  ("device gpu = AMD:0 gfx1100", f"signal s = kick + {2**65}",
   f"p.hcq:5:14: error[overflow]: `kick + {2**65}`: {2**65} (0x20000000000000000) is outside 64 bits, so the value is "
   "outside 0 .. 4294967295 in every launch"),
  ("device gpu = AMD:0 gfx1100", f"signal s = kick - {2**64}",
   f"p.hcq:5:14: error[overflow]: `kick - {2**64}`: {2**64} (0x10000000000000000) is outside 64 bits, so the value is "
   "outside 0 .. 4294967295 in every launch"),
])
def test_check_rejects_what_compile_rejects(here, decl, stmt, msg):
  (here / "p.hcq").write_text(f"{decl}\nsignal s on gpu\nvar kick\nqueue c compute on gpu {{\n  {stmt}\n}}\nhost {{\n  wait s >= 1\n}}\n")
  rc, out, err = cli("compile", "p.hcq")
  assert rc == 1 and err.splitlines()[0] == msg
  rc, out, err = cli("check", "p.hcq")
  assert rc == 1 and msg in out.splitlines()

def test_huge_launch_index_and_write_range_do_not_crash_check(here):
  (here / "p.hcq").write_text(f"""device gpu = AMD:0 gfx1100
buffer r on gpu size 64 rebound = u32 [1], u32 [2]
buffer o on gpu size 64
buffer f on gpu size 64
kernel k(out a, in b) = builtin add<i32>
queue c compute on gpu {{
  exec k(o, r@{HUGE})
  poll f[0:4] == 1
}}
queue d compute on gpu {{
  write f[0:{HUGE}] = 1
}}
""")
  rc, out, err = cli("check", "p.hcq")
  assert rc == 1 and err == ""
  assert [l for l in out.splitlines() if "error[bounds]" in l] == [
    f"p.hcq:7:13: error[bounds]: `r@{HUGE}`: `r` lists 2 launches, so its launches are 1 .. 2",
    f"p.hcq:11:9: error[bounds]: range `f[0:{HUGE}]` is outside buffer `f` (64 bytes)"]
  assert cli("graph", "p.hcq")[0] == 0

def test_run_takes_a_var_constant_past_63_bits(here):
  (here / "p.hcq").write_text(SIMPLE.replace("signal s = kick", f"signal s = kick + {HUGE}").replace("wait s >= kick", f"wait s >= kick - {HUGE}"))
  rc, out, err = cli("run", "p.hcq")
  assert rc == 0 and err == "hcqdsl: warning: p.hcq has 2 check errors (overflow); run `hcqdsl check p.hcq` (--no-check silences this)\n"

# ---- sizes past what the machine holds (item 2: 10**5 queues)

def test_clock_rows_past_the_limit_are_a_bounds_error(monkeypatch):
  import importlib
  clocks = importlib.import_module("hcqdsl.check.clocks")   # (where the clock rows are built)
  monkeypatch.setattr(clocks, "MAX_CLOCK_BYTES", 64)
  text = "device g = AMD:0\nsignal s on g\n" + "".join(f"queue q{i} compute on g {{\n  signal s = 1\n}}\n" for i in range(4))
  [d] = [d for d in hcqdsl.check_text(text, "q.hcq") if d.severity == "error"]
  assert (d.code, d.span.line, d.span.column, d.message) == ("bounds", 3, 1,
    "the program is too big for check: its happens-before clocks are 9 rows of 5 sequences (0.0 GiB), more than the "
    "5.96046e-08 GiB check allows; check fewer queues or launches")

def test_regions_past_the_mapping_limit_are_a_bounds_error(here, monkeypatch):
  import hcqdsl.runtime.execute as ex
  monkeypatch.setattr(ex, "max_map_count", lambda: 1030)
  monkeypatch.setattr(ex, "_maps_in_use", lambda: 0)
  (here / "q.hcq").write_text("device g = AMD:0\nsignal s on g\n" + "".join(f"queue q{i} compute on g {{\n  signal s = 1\n}}\n" for i in range(4)))
  rc, out, err = cli("run", "q.hcq", "--no-check")
  assert rc == 1 and out.splitlines()[0] == (
    "q.hcq:3:1: error[bounds]: the program needs 9 memory regions (5 in its memory plan, 4 rings), more than the 2 the "
    "emulator can map in this process (vm.max_map_count is 1,030; each region takes up to 3)")

# ---- launches bounded (item 3), var lists (item 2)

@pytest.mark.parametrize("cmd", ["check", "run", "graph"])
def test_launches_are_bounded(here, cmd):
  (here / "p.hcq").write_text(SIMPLE)
  assert cli(cmd, "p.hcq", "--launches", HUGE) == (2, "", f"hcqdsl: error: --launches must be at most 65536, not {HUGE}\n")
  (here / "h.hcq").write_text("# hcq: launches=70000\n" + SIMPLE)
  assert cli(cmd, "h.hcq") == (2, "", "hcqdsl: error: h.hcq:1:1: bad `# hcq:` header: `launches=70000`: launches must be at most 65536\n")

def test_diff_launches_bounded_and_past_a_var_list(here):
  (here / "p.hcq").write_text(SIMPLE)
  assert cli("diff", "p.hcq", "p.hcq", "--launches", HUGE) == (2, "", f"hcqdsl: error: --launches must be at most 65536, not {HUGE}\n")
  rc, out, err = cli("diff", "p.hcq", "p.hcq", "--launches", 3)
  assert (rc, out.splitlines()[0], err) == (2, "p.hcq:3:1: error[bounds]: var `kick` lists 2 values, fewer than the 3 launches asked for",
    "hcqdsl: error: p.hcq lists values for fewer than the 3 launches compared: give --launches at most what it lists\n")

def test_graph_past_a_var_list(here):
  (here / "p.hcq").write_text(SIMPLE)
  rc, out, err = cli("graph", "p.hcq", "--launches", 3)
  assert (rc, out, err.splitlines()[0]) == (1, "", "p.hcq:3:1: error[bounds]: var `kick` lists 2 values, fewer than the 3 launches asked for")

# ---- fmt (items 3 and 4)

def test_fmt_with_a_hex_literal_is_linear_in_statements_per_line(here):
  (here / "h.hcq").write_text("device gpu = AMD:0\nsignal s on gpu\nqueue q compute on gpu {\n  "
                              + "; ".join(["signal s = 0x10"] * 32000) + "\n}\n")
  t = time.perf_counter()
  assert cli("fmt", "h.hcq")[0] == 0
  assert time.perf_counter() - t < 30   # quadratic before: 90 s (2.7 s without the hex literal); now ~1 s
  assert (here / "h.hcq").read_text().count("  signal s = 0x10\n") == 32000

def test_fmt_leaves_files_with_static_errors_untouched(here):
  text = "device gpu = AMD:0\nsignal  s on gpu\nqueue q compute on gpu {\n  wait t >= 1\n}\n"
  (here / "p.hcq").write_text(text)
  assert cli("fmt", "p.hcq") == (1, "", "p.hcq:4:8: error[name]: unknown signal `t`\n      wait t >= 1\n           ^\n"
                                        "error: cannot format p.hcq\n0 files reformatted, 1 left unchanged\n")
  assert (here / "p.hcq").read_text() == text

def test_fmt_refuses_invalid_utf8(here):
  b = b"device gpu = AMD:0\n# caf\xe9\nsignal  s on gpu\n"
  (here / "p.hcq").write_bytes(b)
  assert cli("fmt", "p.hcq") == (1, "", "p.hcq:2:6: error: not UTF-8 (byte 0xe9); a program is UTF-8 text\n"
                                        "error: cannot format p.hcq\n0 files reformatted, 1 left unchanged\n")
  assert (here / "p.hcq").read_bytes() == b

def test_utf8_bom_is_accepted_and_kept(here):
  (here / "p.hcq").write_bytes(b"\xef\xbb\xbf# hcq: launches=3\ndevice  gpu = AMD:0\n")
  assert cli("check", "p.hcq") == (0, "ok: 0 errors, 0 warnings over 3 launches, 0 queues\n", "")
  assert cli("fmt", "p.hcq")[0] == 0 and (here / "p.hcq").read_bytes() == b"\xef\xbb\xbf# hcq: launches=3\ndevice gpu = AMD:0\n"

def test_cr_only_file_with_a_header(here):
  (here / "p.hcq").write_bytes(b"# hcq: launches=3\rdevice gpu = AMD:0\rsignal s on gpu\r")
  assert cli("check", "p.hcq") == (0, "ok: 0 errors, 0 warnings over 3 launches, 0 queues\n", "")

def _apply(a: list, diff: list) -> list:
  """`diff` (unified, from fmt) applied to the lines `a`."""
  out, i, k = [], 0, 2
  while k < len(diff):
    h = diff[k].split()
    start = int(h[1][1:].split(",")[0]) - (0 if "," not in h[1] or h[1].split(",")[1] != "0" else -1)
    out += a[i:start - 1]
    i = start - 1
    k += 1
    while k < len(diff) and not diff[k].startswith("@@"):
      line = diff[k]
      k += 1
      if line.startswith("\\"):
        out[-1] = out[-1].rstrip("\n")
        continue
      if line[0] in " -":
        assert a[i] == line[1:] or a[i] + "\n" == line[1:], (i, a[i], line)
        i += 1
      if line[0] in " +": out.append(line[1:])
  return out + a[i:]

def test_fmt_diff_of_a_huge_file_is_linear_and_applies(monkeypatch):
  from hcqdsl.cli import fmt
  rng = random.Random(0)
  for _ in range(200):   # the linear diff (used past DIFFLIB_LINES) is a patch that applies
    a = [f"{rng.randrange(6)}\n" for _ in range(rng.randrange(40))]
    b = [x if rng.random() < 0.7 else f"{rng.randrange(6)}\n" for x in a if rng.random() < 0.9]
    b[rng.randrange(len(b) + 1):0] = ["new\n"] * rng.randrange(3)
    monkeypatch.setattr(fmt, "DIFFLIB_LINES", 0)
    assert _apply(a, list(fmt.unified_diff(a, b, "p"))) == b, (a, b)
  monkeypatch.undo()
  a = [f"  signal {' ' * (i % 2)}s = {i % 100}\n" for i in range(200_000)]
  b = [f"  signal s = {i % 100}\n" for i in range(200_000)]
  t = time.perf_counter()
  d = list(fmt.unified_diff(a, b, "p"))
  assert time.perf_counter() - t < 30 and _apply(a, d) == b   # difflib: 150 s

# ---- disasm (items 2 and 4)

@pytest.mark.parametrize("data,msg", [
  (b"queue q compute gfx999: 1 2\n", "h.txt:1:17: unknown arch `gfx999` (one of gfx942, gfx1100, gfx1201, sm_86, sm_89, sm_90, sm_120)"),
  (b"1 2\n  3 123456789\n", "h.txt:2:5: `123456789` is more than 32 bits (a dword is 0 .. 0xffffffff)"),
  (b"queue q0 copy gfx1100: 0 -1\n", "h.txt:1:26: `-1` is not a hex dword"),
  (b"zz\n", "h.txt:1:1: `zz` is not a hex dword"),
  (b"hello: world\n", "h.txt:1:1: `hello:` is not a `queue NAME ENGINE ARCH:` prefix of `compile --hex`"),
  (b"\x01\x02\xff", "h.txt: binary input of 3 bytes is not a whole number of dwords"),
])
def test_disasm_unusable_input_is_exit_2(here, data, msg):
  (here / "h.txt").write_bytes(data)
  assert cli("disasm", "h.txt", "--engine", "pm4") == (2, "", f"hcqdsl: error: {msg}\n")

def test_disasm_of_a_device_ends(here):
  assert cli("disasm", "/dev/zero") == (2, "", "hcqdsl: error: /dev/zero: not a file\n")

# ---- outputs (items 2 and 4)

def test_compile_refuses_to_overwrite_its_source(here):
  (here / "p.hcq").write_text(SIMPLE)
  assert cli("compile", "p.hcq", "-o", "p.hcq") == \
    (2, "", "hcqdsl: error: -o p.hcq is the input p.hcq: writing it would overwrite the input; give another file\n")
  assert (here / "p.hcq").read_text() == SIMPLE

@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_check_witness_write_error_is_reported(here):
  (here / "p.hcq").write_text(SIMPLE)
  assert cli("check", "p.hcq", "--witness", "/dev/full")[::2] == (2, "hcqdsl: error: /dev/full: No space left on device\n")

@pytest.mark.parametrize("flag,value,msg", [
  ("--timeout", "nan", "--timeout takes a finite number of seconds, at least 0, not nan"),
  ("--timeout", "inf", "--timeout takes a finite number of seconds, at least 0, not inf"),
  ("--kernel-timeout", "nan", "--kernel-timeout takes a finite number of seconds, at least 0, not nan"),
  ("--kernel-timeout", "-1", "--kernel-timeout takes a finite number of seconds, at least 0, not -1.0"),
  ("--max-memory", "inf", "--max-memory takes a size like 512M or 64G, got `inf`"),
  ("--max-memory", "nan", "--max-memory takes a size like 512M or 64G, got `nan`"),
])
def test_run_refuses_nan_and_negative_limits(here, flag, value, msg):
  (here / "p.hcq").write_text(SIMPLE)
  assert cli("run", "p.hcq", f"{flag}={value}") == (2, "", f"hcqdsl: error: {msg}\n")

# ---- JSON inputs: manifests and witnesses (items 2-4)

def _manifest(**extra):
  from lift_util import hang_manifest
  return hang_manifest(**extra)

def test_deep_json(here):
  (here / "d.json").write_text("[" * 200_000 + "]" * 200_000)
  assert cli("lift", "d.json") == (1, "", "hcqdsl: error: d.json:1:501: invalid JSON: nested too deeply\n")
  (here / "p.hcq").write_text(SIMPLE)
  assert cli("run", "p.hcq", "--replay", "d.json") == (2, "", "hcqdsl: error: d.json:1:501: not JSON (nested too deeply)\n")
  from hcqdsl.target.image import Image, ImageError, MAGIC, VERSION
  js = b"[" * 200_000 + b"]" * 200_000
  with pytest.raises(ImageError) as e: Image.from_bytes(MAGIC + struct.pack("<II", VERSION, len(js)) + js)
  assert str(e.value) == "corrupt image metadata: JSON nested too deeply"

def test_manifest_kernel_that_is_no_object(here):
  (here / "m.json").write_text(json.dumps(_manifest(kernels=[5])))
  assert cli("lift", "m.json") == (1, "", "hcqdsl: error: m.json: kernels[0]: expected an object, got int\n")

def test_manifest_queue_file_read_is_bounded(here, monkeypatch):
  import hcqdsl.lift.schema as mf
  monkeypatch.setattr(mf, "MAX_QUEUE_FILE", 1 << 20)
  m = _manifest()
  del m["queues"][1]["dwords"]
  m["queues"][1]["file"] = "/dev/zero"
  (here / "m.json").write_text(json.dumps(m))
  assert cli("lift", "m.json") == (1, "", "hcqdsl: error: m.json: queues[1].file: /dev/zero: more than 1048576 bytes "
                                          "(a queue's dwords are far fewer)\n")

def test_lift_renames_keyword_names(here):
  m = _manifest()
  m["queues"][0]["name"], m["queues"][1]["name"] = "queue", "host"
  for q in m["queues"]: q["device"] = "device"
  (here / "m.json").write_text(json.dumps(m))
  assert cli("lift", "m.json", "-o", "m.hcq")[0] == 0
  text = (here / "m.hcq").read_text()
  assert "device device_1 = AMD:0 gfx1100" in text and "queue queue_1 compute on device_1 {" in text and "queue host_1 copy" in text
  rc, out, err = cli("check", "m.hcq")
  assert rc == 1 and [l for l in out.splitlines() if "error[" in l] == [
    "m.hcq:13:3: error[deadlock]: queue_1 waits forever for s_100000000000 >= 27 (launch 1); s_100000000000 is stuck at 26; "
    "host_1 would write s_100000000000 at line 21 (launch 1) but is itself blocked"]
  m["devices"] = [{"name": "g", "index": 65536, "arch": "gfx1100"}]
  (here / "m.json").write_text(json.dumps(m))
  assert cli("lift", "m.json") == (1, "", "hcqdsl: error: m.json: devices[0].index: 65536 is past the largest device index, 65535\n")
  m["devices"] = [{"name": "g", "index": 1, "arch": "gfx1100"}, {"name": "h", "index": 1, "arch": "gfx1100"}]   # (check: a name error)
  (here / "m.json").write_text(json.dumps(m))
  assert cli("lift", "m.json") == (1, "", "hcqdsl: error: m.json: devices[1].index: 1 is already device `g`'s index\n")

def test_replay_refuses_a_bad_witness(here):
  from fuzz import witness_files
  path, w = witness_files()[0]
  w["launches"] = -1
  (here / "w.json").write_text(json.dumps(w))
  assert cli("run", path, "--replay", "w.json") == (2, "", "hcqdsl: error: w.json: launches: expected an integer in 1..65536, got -1\n")
  w["launches"], w["witnesses"][0]["first"]["range"] = 1, [0, 2**64]
  (here / "w.json").write_text(json.dumps(w))
  assert cli("run", path, "--replay", "w.json") == (2, "", "hcqdsl: error: w.json: witnesses[0].first.range: expected [start, end] "
                                                    "with 0 <= start < end <= 16 (the size of `a`), got [0, 18446744073709551616]\n")

def test_every_witness_field_mutant_is_exit_2(here):
  """The fuzz's mutants through the CLI: exit 2, one line naming the field, no replay run."""
  from fuzz import witness_files, witness_mutants
  n = 0
  for path, w in witness_files()[:1]:
    for at, m in witness_mutants(w):
      (here / "w.json").write_text(json.dumps(m))
      rc, out, err = cli("run", path, "--replay", "w.json", "--no-check")
      assert (rc, out) == (2, "") and err.startswith("hcqdsl: error: w.json: ") and err.count("\n") == 1, (at, err)
      n += 1
  assert n == 185
