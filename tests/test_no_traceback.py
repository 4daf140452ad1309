"""No traceback on any input: sizes, offsets and values at every power of two up to 2**64 (and one below each) fed
into every command that reads a program, in process; each must end with an exit code of 0, 1 or 2 and print no
traceback or internal error."""
import pytest
from cli_run import cli, ROOT

ROOT_PROGRAMS = ROOT / "programs"

# one slot each: a buffer size, a byte offset, a byte range end, a signal's initial value, a wait and a signal value,
# a var value, a launch dimension, a scalar kernel argument
BASE = """device gpu0 = AMD:0 gfx1100
buffer a on gpu0 size {size}
buffer b on gpu0 size 4K
signal s on gpu0 = {init}
var kick = [{var}, 1]
kernel k(out dst, u32 n) = c "void k(unsigned char *d, unsigned n) {{ d[0] = (unsigned char)n; }}"
queue c0 compute on gpu0 {{
  wait s >= {wait}
  exec k(a[{lo}:{hi}], {arg}) grid ({dim}, 1, 1)
  signal s = {signal}
}}
queue x0 copy on gpu0 {{
  wait s >= {signal}
  copy b[0:16] <- a[{lo}:{lo16}]
}}
host {{
  wait s >= kick
}}
"""
SAFE = dict(size="4K", init=0, var=0, wait=0, lo=0, hi=64, arg=1, dim=1, lo16=16, signal=1)
SLOTS = ["size", "init", "var", "wait", "lo", "hi", "arg", "dim", "signal"]
VALUES = [0] + [1 << p for p in range(65)]

def program(slot: str, v: int) -> str:
  kw = dict(SAFE, **{slot: v})
  if slot == "lo": kw["lo16"], kw["hi"] = v + 16, max(v + 16, 64)
  return BASE.format(**kw)

def cli_text(*argv) -> tuple:
  rc, out, err = cli(*argv)
  return rc, out + err

@pytest.mark.parametrize("slot", SLOTS)
def test_powers_of_two_into_every_command(slot, tmp_path):
  f, seen = tmp_path / "p.hcq", {0: 0, 1: 0, 2: 0}
  for v in VALUES:
    f.write_text(program(slot, v))
    cmds = [("parse", str(f)), ("fmt", "--check", str(f)), ("check", str(f)), ("graph", str(f), "-o", str(tmp_path / "g.dot")),
            ("check", str(f), "--var", f"kick={v}")]
    # the emulator and disasm where compile took the program (the others report what compile does)
    rc, text = cli_text("compile", str(f), "-o", str(tmp_path / "p.hcqimg"))
    assert rc in (0, 1) and "Traceback" not in text and "internal error" not in text, ("compile", v, text[-2000:])
    if rc == 0:
      cmds += [("disasm", str(tmp_path / "p.hcqimg")), ("run", str(f), "--kernel-timeout", "5")]
    for argv in cmds:
      rc, text = cli_text(*argv)
      assert rc in (0, 1, 2) and "Traceback" not in text and "internal error" not in text, (argv, v, text[-2000:])
      seen[rc] += 1
  # every slot is taken somewhere and refused somewhere (an overflow, a bounds error, a usage error)
  assert seen[0] > 20 and seen[1] + seen[2] > 20, seen

# ---- scripts, witnesses and manifests (issue 31): the same promise for the other files the CLI reads

SCRIPT_BODIES = {   # a failure at the top level, or in FN: each must be the script's own error, never ours
  "syntax": b"def main(:\n", "nul": b"x = 1\0\n", "utf16": "x = 1\n".encode("utf-16"), "latin1": b"x = '\xe9'\n",
  "indent": b"def main():\nreturn 1\n", "exception": b"raise ValueError('bad')\n",
  "base-exception": b"class Boom(BaseException): pass\nraise Boom()\n", "keyboard-interrupt": b"raise KeyboardInterrupt\n",
  "generator-exit": b"raise GeneratorExit\n", "exit-0": b"import sys\nsys.exit(0)\n", "exit-5": b"import sys\nsys.exit(5)\n",
  "exit-str": b"import sys\nsys.exit('x')\n", "exit-none": b"import sys\nsys.exit()\n", "recursion": b"def f(): f()\nf()\n",
  "fn-raises": b"def main():\n  raise RuntimeError('x')\n", "fn-exits": b"import sys\ndef main():\n  sys.exit(7)\n",
  "fn-base": b"class B(BaseException): pass\ndef main():\n  raise B\n", "no-fn": b"x = 1\n", "empty": b"",
}

@pytest.mark.parametrize("name", list(SCRIPT_BODIES))
def test_scripts_into_emit_capture_and_sanitize(name, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  (tmp_path / "s.py").write_bytes(SCRIPT_BODIES[name])
  rcs = {}
  for spec in ("s.py", "s.py:main"):
    for cmd in ("emit", "capture", "sanitize"):
      rc, text = cli_text(cmd, *(["-o", "m.json"] if cmd == "capture" else []), spec)
      assert rc in (0, 1, 2, 130) and "Traceback" not in text and "internal error" not in text, (cmd, spec, text[-2000:])
      rcs[cmd, spec] = rc
  for spec in ("s.py", "s.py:main"):   # a script that fails fails alike in all three (exit 1, 2 or 130)
    if rcs["capture", spec] != 2 or rcs["emit", spec] == 2:   # (2 alone: no tensors returned / no AMD queue submitted to)
      assert rcs["capture", spec] == rcs["sanitize", spec], (spec, rcs)

def test_witness_mutants_into_run_replay(tmp_path):
  from fuzz import witness_files, witness_mutants
  n = 0
  for path, w in witness_files():
    for at, m in witness_mutants(w):
      (tmp_path / "w.json").write_text(__import__("json").dumps(m))
      rc, text = cli_text("run", path, "--replay", str(tmp_path / "w.json"), "--no-check")
      assert rc == 2 and text.startswith(f"hcqdsl: error: {tmp_path / 'w.json'}: ") and "Traceback" not in text, (at, text[-2000:])
      n += 1
  assert n == 491

def manifest_mutants_into_lift(tmp_path, rng, bases: list, count: int) -> int:
  """`count` mutants of the manifests `bases` into lift, and what lifts into check: never a traceback, and a lifted
  program is valid .hcq (no syntax or name error). How many lifted."""
  import json
  from fuzz import _mutate_meta, _MANIFEST_VALUES
  import fuzz
  lifted = 0
  for _ in range(count):
    m = json.loads(json.dumps(rng.choice(bases)))
    values, fuzz._VALUES = fuzz._VALUES, _MANIFEST_VALUES
    try: m, _ = _mutate_meta(rng, m)
    finally: fuzz._VALUES = values
    (tmp_path / "m.json").write_text(json.dumps(m))
    rc, text = cli_text("lift", str(tmp_path / "m.json"), "-o", str(tmp_path / "m.hcq"))
    assert rc in (0, 1) and "Traceback" not in text and "internal error" not in text, text[-2000:]
    if rc == 0:
      lifted += 1
      rc, text = cli_text("check", str(tmp_path / "m.hcq"), "--launches", "1")
      assert rc in (0, 1) and "error[syntax]" not in text and "error[name]" not in text, text[-2000:]
  return lifted

def test_manifest_mutants_into_lift(tmp_path):
  import random
  from fuzz import _manifests
  manifest_mutants_into_lift(tmp_path, random.Random(0), _manifests(), 150)

# ---- NV images and manifests (issue 37 item 5): mutated, into every command that reads them

def test_nv_image_mutants_into_disasm_and_lift(tmp_path):
  import random
  from fuzz import nv_images, edit_metadata, _mutate_meta
  rng, bases, n = random.Random(1), [img.to_bytes() for img in nv_images()], 0
  assert len(bases) >= 20
  for _ in range(120):
    b = rng.choice(bases)
    try: b = edit_metadata(b, lambda m: _mutate_meta(rng, m)[0])
    except (ValueError, TypeError): continue   # (a mutation the JSON cannot hold)
    (tmp_path / "p.hcqimg").write_bytes(b)
    for argv in (("disasm", str(tmp_path / "p.hcqimg")), ("lift", str(tmp_path / "p.hcqimg"), "-o", str(tmp_path / "p.hcq"))):
      rc, text = cli_text(*argv)
      assert rc in (0, 1, 2) and "Traceback" not in text and "internal error" not in text, (argv, text[-2000:])
      n += 1
  assert n >= 200

def test_nv_manifest_mutants_into_lift(tmp_path):
  import json, random
  from fuzz import nv_images, nv_manifest
  bases = [nv_manifest(img) for img in nv_images()]
  for m in bases[:3]:   # each lifts as it is, as tinygrad's NV runtime
    (tmp_path / "m.json").write_text(json.dumps(m))
    rc, text = cli_text("lift", str(tmp_path / "m.json"), "-o", str(tmp_path / "m.hcq"))
    assert rc == 0 and "NV:0" in (tmp_path / "m.hcq").read_text(), text[-2000:]
  # (seed 2: 15 of the 120 mutants still lift; the rest are refused naming their field)
  assert manifest_mutants_into_lift(tmp_path, random.Random(2), bases, 120) >= 10

# ---- issue 37: NV method headers, and the CLI's hostile invocations (tests/test_hostile_cli.py has their messages)

def test_nv_method_headers_into_disasm_and_rings():
  """Every opcode, subchannel and a count of 0, 1, 2, 3 and 8191 (past the data) as an NV pushbuffer: disassembled and
  run on an NV ring; a count of 0 was an IndexError in the decoder."""
  import numpy as np
  from hcqdsl.vendors import disasm_dwords
  from hcqdsl.runtime.emulator import Emulator
  n = 0
  for op in range(8):
    for subc in range(8):
      for count in (0, 1, 2, 3, 8191):
        for method in (0x0, 0x5C, 0x1B0):
          dw = [(op << 29) | (count << 16) | (subc << 13) | (method >> 2), 0x10, 0x20]
          for engine in ("compute", "copy"):
            disasm_dwords(dw, "nv", "sm_89")
            emu = Emulator(max_steps=10_000)
            ring = emu.create_queue("q", engine, "gpu0", "sm_89", 4096, addr=0x80_0000_0000)
            emu.write(ring.addr, np.array(dw, dtype="<u4").tobytes())
            emu.doorbell(ring, 4 * len(dw) // ring.unit)
            emu.run(iter(()))
            assert emu.fault is None or ("internal" not in str(emu.fault) and "ring offset" in str(emu.fault)), (dw, str(emu.fault))
            n += 1
  assert n == 8 * 8 * 5 * 3 * 2

def _hostile_invocations(tmp) -> list:
  """(argv, environment, RLIMIT_FSIZE) of each cause of issue 37 this file covers, with the inputs written into tmp."""
  P = ROOT_PROGRAMS
  nv = "device g = NV:0 sm_89\nbuffer a on g size 64\nkernel k(" + ", ".join(f"in b{i}" for i in range(980)) + \
       ")\nqueue q compute on g {\n  exec k(" + ", ".join(["a"] * 980) + ")\n}\n"
  (tmp / "nv.hcq").write_text(nv)
  (tmp / "big.hcq").write_text((P / "run_pipeline.hcq").read_text().replace("\n  ", "\n   ") + "# é\n" * 3000)
  (tmp / "seeds.hcq").write_text("# hcq: seeds=100000000000000000000\n" + (P / "tutorial_fixed.hcq").read_text())
  (tmp / "k.hcq").write_text('device g0 = AMD:0\nbuffer a on g0 size 64\nkernel k(out x) = c "/* é */ void k(int *x) { x[0] = 1; }"\n'
                             'queue q compute on g0 {\n  exec k(a)\n}\n')
  (tmp / "fork.hcq").write_text('device g0 = AMD:0\nbuffer a on g0 size 64\nkernel f(out x) = c "int fork(void); void f(int *x) '
                                '{ fork(); x[0] += 1; }"\nqueue q compute on g0 {\n  exec f(a)\n}\n')
  (tmp / "nvc0.txt").write_text("20000000\n20010000\n")
  c = {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}
  devs = "".join(f"device d{i} = AMD:{i % 3000}\n" for i in range(6000))
  (tmp / "devs.hcq").write_text(devs)
  return [(["fmt", "big.hcq"], None, 4096), (["fmt", "big.hcq"], c, None), (["compile", "nv.hcq"], None, None),
          (["check", "nv.hcq"], None, None), (["compile", "p.hcqimg"], None, None),
          (["compile", P / "run_pipeline.hcq", "-o", "p.hcqimg"], None, 1024),
          (["run", P / "run_race.hcq", "--schedules", str(10**20)], None, None), (["check", "seeds.hcq"], None, None),
          (["run", "seeds.hcq"], None, None), (["run", "k.hcq"], c, None), (["run", "k.hcq", "--kernel-timeout", "1e10"], None, None),
          (["run", "fork.hcq"], None, None), (["run", "fork.hcq", "--kernel-timeout", "0"], None, None),
          (["disasm", "--engine", "nv", "nvc0.txt"], None, None), (["lift", "p.hcqimg", "-o", "no/such/x.hcq"], None, None),
          (["check", "devs.hcq"], None, None), (["run", "--launch", "2", P / "run_race.hcq"], None, None),
          (["check", "--formt", "json", "big.hcq"], None, None), (["check", "nope.hcq", "big.hcq"], None, None),
          (["check", "--fix", "big.hcq", "--format", "sarif"], c, None), (["graph", P / "tutorial_deadlock.hcq", "-o", "d.svg"], None, None)]

def test_hostile_invocations_into_the_cli(tmp_path, monkeypatch):
  """In this process, but where a locale or a file-size limit is the input: there a fresh interpreter."""
  import os, resource, subprocess, sys
  cli("compile", ROOT_PROGRAMS / "tutorial_fixed.hcq", "-o", tmp_path / "p.hcqimg")
  monkeypatch.chdir(tmp_path)
  n = 0
  for argv, env, limit in _hostile_invocations(tmp_path):
    if env is None and limit is None: rc, out, err = cli(*argv)
    else:
      pre = (lambda lim=limit: resource.setrlimit(resource.RLIMIT_FSIZE, (lim, lim))) if limit else None
      r = subprocess.run([sys.executable, "-m", "hcqdsl", *map(str, argv)], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, preexec_fn=pre, timeout=300)
      rc, out, err = r.returncode, r.stdout, r.stderr
    text = out + err
    assert rc in (0, 1, 2) and "Traceback" not in text and "internal error" not in text, (argv, rc, text[-2000:])
    n += 1
  assert n == 21

# ---- hostile scripts (issue 37): what a script does to the process that runs it. Each in a subprocess (they end it,
# fork it, close its stdout), as a copy under tmp_path run there; one command each way a script is named
HOSTILE_BODIES = {
  "os-exit-0": "import os\ndef main():\n  os._exit(0)\nif __name__ == '__main__': main()\n",
  "os-exit-3": "import os\ndef main():\n  os._exit(3)\nif __name__ == '__main__': main()\n",
  "os-exit-thread": "import os, threading\ndef main():\n  t = threading.Thread(target=os._exit, args=(4,))\n  t.start(); t.join()\n"
                    "if __name__ == '__main__': main()\n",
  "bad-str": "class B(Exception):\n  def __str__(self): raise RuntimeError\ndef main(): raise B()\nif __name__ == '__main__': main()\n",
  "bad-str-exit": "import sys\nclass C:\n  def __str__(self): raise RuntimeError\ndef main(): sys.exit(C())\nif __name__ == '__main__': main()\n",
  "close-stdout": "import sys\ndef main():\n  sys.stdout.close(); sys.stderr.close()\nif __name__ == '__main__': main()\n",
  "replace-stdout": "import io, sys\ndef main():\n  sys.stdout = io.StringIO(); sys.stderr = None\nif __name__ == '__main__': main()\n",
  "fork": "import os\ndef main():\n  pid = os.fork()\n  if pid: os.waitpid(pid, 0)\nif __name__ == '__main__': main()\n",
  "chdir": "import os\ndef main():\n  os.makedirs('d', exist_ok=True); os.chdir('d')\nif __name__ == '__main__': main()\n",
}

@pytest.mark.parametrize("name", list(HOSTILE_BODIES))
def test_hostile_scripts_into_emit_capture_and_sanitize(name, tmp_path):
  (tmp_path / "s.py").write_text(HOSTILE_BODIES[name])
  for cmd, spec in (("emit", "s.py"), ("capture", "s.py:main"), ("sanitize", "s.py")):
    rc, out, err = cli(cmd, *(["-o", "m.json"] if cmd == "capture" else []), spec, cwd=tmp_path, env={"DEV": "CPU"}, timeout=300)
    text = out + err
    assert rc in (1, 2) and "Traceback" not in text and "internal error" not in text, (cmd, rc, text[-2000:])
    assert err.count("hcqdsl: error:") == 1, (cmd, err)   # reported once: by the process hcqdsl started
  assert (tmp_path / "m.json").is_file()   # capture writes what it saw, whatever the script did
