"""User C kernels cannot take the tool down (issue 11, item 5): a kernel that crashes or never returns is a device
fault at its `exec` line; `run` exits 1, not with a signal."""
import pytest
from hcqdsl.runtime import run
from hcqdsl.host_cc import find_cc
from hcqdsl.cli import main

pytestmark = pytest.mark.skipif(find_cc() is None, reason="no C compiler: apt-get install gcc")

PROG = '''device g0 = AMD:0
buffer a on g0 size 64
kernel ok(out x) = c "void ok(int *x) { x[0] = 42; }"
kernel bad(out x) = c "void bad(int *x) { *(volatile int *)0 = x[0]; }"
kernel spin(out x) = c "void spin(volatile int *x) { for (;;) x[1]++; }"
kernel quit(out x) = c "void exit(int); void quit(int *x) { exit(3); }"
queue q compute on g0 {
  exec ok(a)
  exec KERNEL(a)
  exec ok(a[4:64])
}
expect a[0:8] == i32 [42, 42]
'''

@pytest.mark.parametrize("kernel,why", [("bad", "crashed (SIGSEGV: an access to host address 0x0, in no buffer)"),
                                        ("quit", "crashed (exit status 3)"),
                                        ("spin", "did not return within 0.5 s (`--kernel-timeout`): killed")])
def test_bad_kernel_is_a_fault_at_its_exec(kernel, why):
  r = run(PROG.replace("KERNEL", kernel), kernel_timeout=0.5)
  assert r.fault is not None and r.fault.line == 9 and r.fault.message == f"kernel `{kernel}`: {why}"
  assert not r.ok

def test_worker_writes_the_emulated_memory():
  r = run(PROG.replace("KERNEL", "ok"))
  assert r.ok and r.buffer("a", "i32")[:2].tolist() == [42, 42]
  r = run(PROG.replace("KERNEL", "ok"), kernel_timeout=None)   # in-process, unguarded
  assert r.ok and r.buffer("a", "i32")[:2].tolist() == [42, 42]

def test_cli_exit_status(tmp_path, capsys):
  f = tmp_path / "k.hcq"
  f.write_text(PROG.replace("KERNEL", "bad"))
  assert main(["run", str(f)]) == 1
  out = capsys.readouterr().out
  assert "kernel `bad`: crashed (SIGSEGV: an access to host address 0x0, in no buffer)" in out and "from line 9: `exec bad(a)`" in out
  f.write_text(PROG.replace("KERNEL", "spin"))
  assert main(["run", str(f), "--kernel-timeout", "0.3"]) == 1
  assert main(["run", str(f), "--kernel-timeout", "-1"]) == 2

# C kernels inside fences: every buffer of the emulator's memory ends at a guard page and starts after one
FENCED = """device g0 = AMD:0
buffer a on g0 size 64
buffer b on g0 size 4K
buffer c on g0 size 4K
kernel over(out x) = c "void over(int *x) { for (int i = 0; i < 100000; i++) x[i] = i; }"
kernel under(out x) = c "void under(int *x) { x[-1] = 1; }"
kernel edge(out x) = c "void edge(unsigned char *x) { x[4095] = 1; }"
queue q compute on g0 {
  exec ok(c)
  exec KERNEL
}
kernel ok(out x) = c "void ok(int *x) { x[0] = 42; }"
"""

@pytest.mark.parametrize("call, message", [
  ("over(a)", "out-of-bounds access (SIGSEGV): buffer `a` at offset 64, past its end (`a` is 64 bytes)"),
  ("over(b)", "out-of-bounds access (SIGSEGV): buffer `b` at offset 4096, past its end (`b` is 4096 bytes)"),
  ("under(b)", "out-of-bounds access (SIGSEGV): buffer `b` at offset -4, before its start (`b` is 4096 bytes)")])
def test_an_out_of_bounds_c_kernel_faults_naming_buffer_offset_and_exec_line(call, message):
  r = run(FENCED.replace("KERNEL", call))
  assert r.fault is not None and r.fault.message == f"kernel `{call.split('(')[0]}`: {message}" and r.fault.line == 10
  assert f"from line 10: `exec {call}`" in str(r.fault)

def test_the_last_byte_of_a_buffer_is_inside_the_fence():
  r = run(FENCED.replace("KERNEL", "edge(b)"))
  assert r.ok and r.buffer("b")[4095] == 1 and r.buffer("c", "i32")[0] == 42
