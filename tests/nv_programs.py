"""NV tests' shared inputs: programs made NV, what NV refuses, the symbolic two-device program, the QMD-chain program,
an NV image but where its source was."""
from __future__ import annotations
import attrs
from hcqdsl.ir import Device
from hcqdsl.target.image import Image

# what NV refuses: tinygrad's NVCopyQueue has no write, NV's poll_bit tests one bit
NV_REFUSED = {"deadlock_poll_undone": "`write` on NV copy queue", "queue_write": "`write` on NV copy queue",
              "rdma_poll": "`write` on NV copy queue"}

def to_nv(prog, archs):
  """The program with device i an NV device of archs[i % len(archs)]."""
  devs = iter(range(1 << 20))
  return attrs.evolve(prog, decls=tuple(attrs.evolve(d, vendor="NV", arch=archs[next(devs) % len(archs)]) if isinstance(d, Device) else d
                                        for d in prog.decls))

def layout(img: Image) -> tuple:
  return ([(q.name, q.engine, q.device, q.arch, q.addr, q.dwords, q.patches, q.mem_patches, [(s.offset, s.length) for s in q.stmts])
           for q in img.queues],
          img.regions, img.data, img.kernels, img.var_values, img.signals, img.buffers, img.vars, img.devices)

SYMBOLIC = """\
device g0 = NV:0 {a0}
device g1 = NV:1 {a1}
buffer cache on g0 size 64K
buffer x on g0 size 8M rebound = i32 [1], i32 [2], i32 [3], i32 [4], i32 [5], i32 [6], i32 [7], i32 [8]
buffer y on g0 size 8M
buffer flag on host size 64
buffer z on g1 size 64K
signal s0 on g0
signal s1 on g1 = 3
signal hs on host
var pos = [0, 1, 1, 7, 3, 3, 0, 65535]
var n
kernel put(inout cache, in x, i32 at, u32 count)
kernel one(inout z)
queue c0 compute on g0 {{
  epoch
  exec put(cache[16:], x[64:], pos, n - 1) grid (pos + 1, 2, n) block (32, 3)
  signal s0 = n
  timestamp hs
  signal hs = pos + 7
  exec put(cache, x, 7, pos + 2) grid (4)
  exec put(cache, x@2, 1, 2) block (1024)
  exec put(cache[8:], y, n, n) grid (n) block (2, 2, 64)
  signal s0 = n + 1
  write flag[0:4] = pos
  write flag[8:16] = n + 3
  poll flag[16:20] & 0x80 == 0
  poll flag[20:24] & 0x1 == 0x1
  barrier
  exec put(cache, y, 0, 0)
  timestamp s0
  signal g0.timeline = g0.epoch
}}
queue x0 copy on g0 {{
  epoch
  wait s0 >= n
  copy y <- x
  copy y[0:4] <- x[4096:4100]
  copy flag[0:8] <- x@3[0:8]
  barrier
  timestamp hs
  signal g0.timeline = g0.epoch
}}
queue c1 compute on g1 {{
  wait s1 >= n + 2
  exec one(z) grid (n, 2)
  exec one(z[8:16])
  signal s1 = n + 3
  signal g1.timeline = g1.epoch
}}
"""

QMD_CHAIN = """\
device g = NV:0 sm_89
buffer a on g size 16 = i32 [1, 2, 3, 4]
buffer b on g size 16
buffer flag on g size 16
signal s on g
signal t on g
signal u on g
signal v on g
var kick
kernel twice(out y, in x) = c "void twice(int *y, int *x) { for (int i = 0; i < 4; i++) y[i] = 2 * x[i]; }"
kernel inc(inout y) = c "void inc(int *y) { for (int i = 0; i < 4; i++) y[i] += 1; }"
queue c compute on g {
  epoch
  exec twice(b, a)
  signal s = kick
  signal t = kick + 1
  exec inc(b)
  signal u = kick + 2
  signal v = kick + 3
  timestamp t
  write flag[0:4] = 0x80
  poll flag[0:4] & 0x80 == 0x80
  signal g.timeline = g.epoch
}
host {
  wait g.timeline >= g.epoch
}
expect b == i32 [3, 5, 7, 9]
"""
