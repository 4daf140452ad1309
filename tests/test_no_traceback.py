"""No traceback on any input: sizes, offsets and values at every power of two up to 2**64 (and one below each) fed
into every command that reads a program, in process; each must end with an exit code of 0, 1 or 2 and print no
traceback or internal error."""
import contextlib, io
import pytest
from hcqdsl.cli import main

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

def cli(*argv) -> tuple:
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try: rc = main(list(argv))
    except SystemExit as e: rc = e.code
  return rc, out.getvalue() + err.getvalue()

@pytest.mark.parametrize("slot", SLOTS)
def test_powers_of_two_into_every_command(slot, tmp_path):
  f, seen = tmp_path / "p.hcq", {0: 0, 1: 0, 2: 0}
  for v in VALUES:
    f.write_text(program(slot, v))
    cmds = [("parse", str(f)), ("fmt", "--check", str(f)), ("check", str(f)), ("graph", str(f), "-o", str(tmp_path / "g.dot")),
            ("check", str(f), "--var", f"kick={v}")]
    # the emulator and disasm where compile took the program (the others report what compile does)
    rc, text = cli("compile", str(f), "-o", str(tmp_path / "p.hcqimg"))
    assert rc in (0, 1) and "Traceback" not in text and "internal error" not in text, ("compile", v, text[-2000:])
    if rc == 0:
      cmds += [("disasm", str(tmp_path / "p.hcqimg")), ("run", str(f), "--kernel-timeout", "5")]
    for argv in cmds:
      rc, text = cli(*argv)
      assert rc in (0, 1, 2) and "Traceback" not in text and "internal error" not in text, (argv, v, text[-2000:])
      seen[rc] += 1
  # every slot is taken somewhere and refused somewhere (an overflow, a bounds error, a usage error)
  assert seen[0] > 20 and seen[1] + seen[2] > 20, seen
