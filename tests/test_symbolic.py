"""Symbolic launches in hand-written programs (issue 12): var lists, scalar kernel parameters, launch dims over vars,
rebound and rewritten buffers — through parse/format, static checks, check, compile and run."""
import subprocess, sys
import pytest
from hcqdsl import parse, format, check_text
from hcqdsl.vendors import compile_program
from hcqdsl.runtime import run
from hcqdsl.diagnostics import HcqError

DECODE = '''\
device g0 = AMD:0

buffer cache on g0 size 32
buffer x on g0 size 4 rebound = i32 [10], i32 [20], i32 [30], i32 [40]
buffer res on g0 size 4

var pos = [0, 1, 2, 3]

kernel put(inout cache, in x, i32 pos) = c """
void put(int *cache, const int *x, int pos) { cache[pos] = x[0]; }
"""
kernel red(out res, in cache, i32 n) = c """
void red(int *res, const int *cache, int n) { int s = 0; for (int i = 0; i < n; i++) s += cache[i]; res[0] = s; }
"""

queue c0 compute on g0 {
  epoch
  exec put(cache, x, pos) grid (pos + 1, 1, 1)
  exec red(res, cache, pos + 1)
  signal g0.timeline = g0.epoch
}

host {
  wait g0.timeline >= g0.epoch - 1
  submit
}

expect res == i32 [100]
'''

def errors(text, launches=2):
  return [f"{d.span.line}:{d.span.column}: {d.code}: {d.message}" for d in check_text(text, "t.hcq", launches) if d.severity == "error"]

def test_round_trip_is_canonical():
  prog = parse(DECODE, "d.hcq")
  assert format(prog) == DECODE
  assert prog.var_lists == {"pos": (0, 1, 2, 3)} and prog.listed_launches == (4, "pos")
  x = next(b for b in prog.buffers if b.name == "x")
  assert x.per_launch == "rebound" and [d.values for d in x.launch_inits] == [(10,), (20,), (30,), (40,)]

def test_runs_and_checks_clean():
  assert errors(DECODE, 4) == []
  for seed in (None, 0, 1, 2):
    res = run(DECODE, launches=4, seed=seed, filename="d.hcq")
    assert res.ok, res.summary()

def test_only_changed_dwords_are_patched():
  """Launch 1 writes every kernel-argument patch (4: x lo/hi, pos, pos + 1) and the command dwords that differ from
  the template; then per launch: epoch - 1, epoch, grid pos + 1 in the command buffer, and pos, pos + 1, x's low
  address dword in the kernel arguments (its high dword stays)."""
  res = run(DECODE, launches=4, filename="d.hcq")
  assert res.queues["c0"].patched == [4, 6, 6, 6]

def test_launches_past_the_lists():
  with pytest.raises(HcqError) as e: run(DECODE, launches=5, filename="d.hcq")
  assert [d.message for d in e.value.diagnostics] == [
    "rebound buffer `x` lists contents for 4 launches, fewer than the 5 launches asked for",
    "var `pos` lists 4 values, fewer than the 5 launches asked for"]  # in line order
  assert errors(DECODE, 5) == ["4:1: bounds: rebound buffer `x` lists contents for 4 launches, fewer than the 5 launches asked for",
                               "7:1: bounds: var `pos` lists 4 values, fewer than the 5 launches asked for"]

def test_pinned_var_wins_over_its_list(tmp_path):
  f = tmp_path / "d.hcq"
  f.write_text(DECODE.replace("expect res == i32 [100]", "expect res == i32 [30]"))
  r = subprocess.run([sys.executable, "-m", "hcqdsl", "run", "--launches", "3", "--var", "pos=0", str(f)], capture_output=True, text=True)
  assert r.returncode == 0 and r.stdout.rstrip().endswith("ok"), r.stdout

def test_host_must_wait_before_patching_kernel_arguments():
  racy = DECODE.replace("  wait g0.timeline >= g0.epoch - 1\n", "")
  assert errors(racy, 2) == [
    "24:3: race: the host writes the kernel arguments of `exec put` (c0 line 18) at line 24 (launch 2) and c0 reads "
    "the kernel arguments of `exec put` (c0 line 18) at line 18 (launch 1) with no happens-before order between them",
    "24:3: race: the host writes the kernel arguments of `exec red` (c0 line 19) at line 24 (launch 2) and c0 reads "
    "the kernel arguments of `exec red` (c0 line 19) at line 19 (launch 1) with no happens-before order between them"]

def _two(kind):
  # copy queue a writes x then signals launch k; b waits for that, then reads x. Within a launch they are ordered;
  # a's launch-2 write is not ordered after b's launch-1 read (copies hold their addresses in the command buffer: no
  # kernel arguments to patch)
  return f'''device g0 = AMD:0
buffer x on g0 size 64{kind}
buffer y on g0 size 64
buffer z on g0 size 64
signal s on g0
var kick
queue a copy on g0 {{
  copy x <- y
  signal s = kick
}}
queue b copy on g0 {{
  wait s >= kick
  copy z <- x
}}
'''

def test_rebound_buffers_are_new_memory_each_launch():
  plain = errors(_two(""), 2)
  assert plain == ["8:3: race: a writes x[0:64] at line 8 (launch 2) and b reads x[0:64] at line 13 (launch 1) with no "
                   "happens-before order between them"]
  assert errors(_two(" rebound = u8 [1], u8 [2]"), 2) == []   # launch 2's x is other memory than launch 1's
  assert errors(_two(" rewritten = u8 [1], u8 [2]"), 2)      # the same memory: the race stays (and the host's)

REWRITTEN = '''device g0 = AMD:0
buffer w on g0 size 8 rewritten = i32 [1, 2], i32 [3, 4], i32 [5, 6]
buffer acc on g0 size 8
kernel add(out c, in a, in w) = builtin add<i32>
queue c0 compute on g0 {
  epoch
  exec add(acc, acc, w)
  signal g0.timeline = g0.epoch
}
host {
  wait g0.timeline >= g0.epoch - 1
  submit
}
expect acc == i32 [9, 12]
'''

def test_rewritten_buffer():
  assert errors(REWRITTEN, 3) == []
  for seed in (None, 0, 1): assert run(REWRITTEN, launches=3, seed=seed).ok
  racy = REWRITTEN.replace("  wait g0.timeline >= g0.epoch - 1\n", "")
  assert errors(racy, 3) == ["2:1: race: the host writes w[0:8] at line 2 (launch 2) and c0 reads w[0:8] at line 7 "
                             "(launch 1) with no happens-before order between them"]

DIMS = '''device g0 = AMD:0
buffer res on g0 size 32
var n = [1, 3, 5]
kernel fill(out res, i32 n) = c """
unsigned int hcq_grid[3], hcq_block[3];
void fill(int *res, int n) {
  for (int i = 0; i < 3; i++) { res[i] += hcq_grid[i]; res[3 + i] += hcq_block[i]; }
  res[6] += n;
}
"""
queue c0 compute on g0 {
  epoch
  exec fill(res, n + 10) grid (n, 2, n + 1) block (n + 7, 1, 4)
  signal g0.timeline = g0.epoch
}
host {
  wait g0.timeline >= g0.epoch - 1
  submit
}
expect res == i32 [9, 6, 12, 30, 3, 12, 39]
'''

def test_c_kernels_see_scalar_arguments_and_patched_launch_dims():
  for seed in (None, 0, 1): assert run(DIMS, launches=3, seed=seed).ok
  img = compile_program(parse(DIMS))
  assert [p.expr() for p in img.queue("c0").patches] == ["g0.epoch - 1", "n + 7", "n", "n + 1", "g0.epoch"]
  assert [p.expr() for p in img.queue("c0").mem_patches] == ["n + 10"]

@pytest.mark.parametrize("text,expected", [
  ("device g = AMD:0\nbuffer a on g size 4\nbuffer b on g size 4\nkernel k(in a, i32 n)\nqueue q compute on g {\n  exec k(a, b)\n}\n",
   ["6:13: name: parameter `n` of `k` is a i32 value: pass a number or a var expression, not buffer `b`"]),
  ("device g = AMD:0\nbuffer a on g size 4\nvar v\nkernel k(in a, i32 n)\nqueue q compute on g {\n  exec k(v, 3)\n}\n",
   ["6:3: name: parameter `a` of `k` is a buffer: `v` is a value"]),
  ("device g = AMD:0\nkernel k(i32 n)\nqueue q compute on g {\n  exec k(nope + 1)\n}\n", ["4:10: name: unknown var `nope`"]),
  ("device g = AMD:0\nvar v = [1, 4294967296]\n", ["2:13: overflow: 4294967296 does not fit 32 bits (0 .. 4294967295)"]),
  ("device g = AMD:0\nvar v = []\n", ["2:1: bounds: var `v` lists no values: write one per launch"]),
  ("device g = AMD:0\nbuffer a on g size 4 rebound\n",
   ["2:1: bounds: rebound buffer `a` lists no contents: write one list per launch after `=`"]),
  ("device g = AMD:0\nbuffer a on g size 4 rewritten = u8 [1], u32 [1, 2]\n",
   ["2:42: bounds: 2 u32 values are 8 bytes, more than buffer `a` (4 bytes)"]),
  ("device g = AMD:0\nkernel k(f32 n)\n",
   ["2:10: syntax: expected `)`, `,`, a parameter mode (`in`, `out`, `inout`) or a scalar type (`i32`, `u32`) after `(`, found `f32`"]),
])
def test_errors(text, expected):
  assert errors(text) == expected

def test_rebound_buffer_reads_its_last_launch():
  prog = DECODE.replace("expect res == i32 [100]", "expect x == i32 [30]")
  res = run(prog, launches=3, filename="d.hcq")
  assert res.ok, res.summary()
  assert res.buffer("x", "i32").tolist() == [30]

def test_kernel_argument_writes_follow_actual_values():
  """The host writes a kernel argument only when its value changes (as `_apply_var_vals`): with `n` equal in
  launches 1 and 2 there is nothing to race with; launch 3 changes it."""
  text = '''device g0 = AMD:0
buffer a on g0 size 4
var n = [5, 5, 6]
kernel k(inout a, i32 n)
queue c0 compute on g0 {
  exec k(a, n)
}
'''
  assert errors(text, 2) == []
  assert errors(text, 3) == ["5:1: race: the host writes the kernel arguments of `exec k` (c0 line 6) when it submits c0 "
                             "(implicitly, before its first statement) (launch 3) and c0 reads the kernel arguments of "
                             "`exec k` (c0 line 6) at line 6 (launch 1) with no happens-before order between them"]

def test_indirect_submission_patches_addresses_and_kernel_arguments():
  """Indirect mode (command-buffer copies) patches the same dwords: rebound addresses in copies (both halves) and the
  kernel arguments, so it leaves the memory the ring mode leaves."""
  text = _two(" rebound = u8 [1], u8 [2], u8 [3]").replace("buffer y on g0 size 64", "buffer y on g0 size 64 = u8 [7, 8]")
  for prog, n in ((text, 3), (DECODE, 4)):
    ring = run(prog, launches=n, seed=1)
    ind = run(prog, launches=n, seed=1, indirect=True)
    assert ring.ok and ind.ok and ind.memory == ring.memory and ind.signals == ring.signals
  assert run(text, launches=3, indirect=True).buffer("x")[:2].tolist() == [7, 8]   # launch 3's x: its own region
