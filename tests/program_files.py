"""The programs of programs/ as tests read them: the files, the ones no lowering takes, the `# E:` markers they carry."""
from __future__ import annotations
import pathlib, re

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGRAMS = sorted(str(p) for p in (ROOT / "programs").glob("*.hcq"))
# programs whose errors stop every lowering on purpose (unknown names, ranges outside buffers, syntax in the wrong block)
NOT_LOWERED = {"bounds_copy_lengths", "bounds_range_outside", "name_buffer_as_signal", "name_copy_on_compute", "name_submit_twice",
               "name_unknown_signal", "overflow_literal", "syntax_exec_in_host", "syntax_submit_in_queue"}
MARK = re.compile(r"#\s*E:\s*([a-z-]+)")

def markers(text: str) -> dict:
  """code -> the lines marked `# E: code`."""
  out: dict = {}
  for i, line in enumerate(text.split("\n"), 1):
    for code in MARK.findall(line): out.setdefault(code, set()).add(i)
  return out

# the symbolic two-device AMD program (every statement kind; its archs `{a0}`, `{a1}` to fill in)
PROGRAM = """
device g0 = AMD:0 {a0}
device g1 = AMD:1 {a1}
buffer a on g0 size 8M
buffer b on g1 size 8M
buffer h on host size 64K
signal s0 on g0
signal s1 on g1 = 3
signal hs on host
var kick
var step
kernel k2(in x, out y)
kernel k1(inout z)
queue c0 compute on g0 {{
  epoch
  wait s1 >= kick + 1
  exec k2(a, a[4096:8192]) grid (4, 2) block (64, 1, 1)
  barrier
  exec k1(h[0:256])
  timestamp s0
  write a[16:20] = step + 2
  write h[8:16] = 0x1234
  poll a[60:64] & 0x01000000 == 0x01000000
  poll h[0:4] == step
  signal s0 = kick
  signal hs = 7
  wait hs >= step - 1
  signal g0.timeline = g0.epoch
}}
queue x1 copy on g1 {{
  epoch
  wait s0 >= kick
  copy b <- a
  copy b[16:32] <- h[100:116]
  barrier
  timestamp s1
  write b[0:8] = kick
  write h[0:4] = 9
  signal s1 = step + 5
  signal g1.timeline = g1.epoch
}}
"""
