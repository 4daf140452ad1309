"""Kernels the emulator can run: built-ins named by `= builtin NAME<dtype>(args)` and C source compiled with the host
compiler. A kernel is called with one numpy byte view per parameter (the argument's byte range in emulated memory);
builtins reinterpret those bytes as their dtype (trailing bytes that do not fill an element are left alone).

Built-ins (dtype default f32; `n` = elements of the shortest argument involved):
  fill<T>(value)    (out dst)                dst[:] = value
  iota<T>(start=0)  (out dst)                dst[i] = start + i
  add<T>            (out c, in a, in b)      c[:n] = a[:n] + b[:n]
  mul<T>            (out c, in a, in b)      c[:n] = a[:n] * b[:n]
  scale<T>(factor)  (inout x) | (out y, in x)  x *= factor | y[:n] = x[:n] * factor
  copy              (out dst, in src)        bytes dst[:n] = src[:n]
  sum<T>            (out dst, in src)        dst[0] = sum(src)
  spin(us)          (any)                    touches nothing; costs `us` emulated microseconds
Anything else (wrong parameter count, unknown name) is a KernelError, reported as a device fault at dispatch.
"""
from __future__ import annotations
import ctypes, os, select, signal, struct, time
from typing import Callable, Optional
import numpy as np
from ..ir import DTYPES
from ..host_cc import build_so, NoCompilerError, CompileError

__all__ = ["KernelError", "KernelFault", "KernelFn", "make_kernel", "compile_c", "BUILTINS", "Worker"]

class KernelError(Exception): pass

class KernelFault(KernelError):
  """A C kernel's memory fault in the worker: the signal and the host address it touched (the emulator names the
  buffer and the offset: device.Memory.host_region)."""
  def __init__(self, signame: str, addr: int):
    super().__init__(f"crashed ({signame} at host address {addr:#x})")
    self.signame, self.addr = signame, addr

# the worker's fault handler: on SIGSEGV/SIGBUS it writes 2, the signal number and the faulting address (si_addr) to
# the response pipe and exits; async-signal-safe (write, _exit) and on its own stack. The fork guard: while a kernel
# runs (hcq_kernel_enter .. hcq_kernel_leave), the child of a fork() exits at once, inside fork, so it never returns into
# the kernel nor into hcqdsl's code (a second emulator, or a second reader of the worker's pipe running every kernel
# twice); hcq_kernel_leave says how many forks the kernel made, and the call is a fault at its exec
_GUARD_C = r"""
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
static int hcq_fd = -1;
static char hcq_stack[65536];
static void hcq_fault(int sig, siginfo_t *si, void *ctx) {
  unsigned char m[10]; uint64_t a = (uint64_t)(uintptr_t)si->si_addr;
  m[0] = 2; m[1] = (unsigned char)sig;
  for (int i = 0; i < 8; i++) m[2 + i] = (unsigned char)(a >> (8 * i));
  (void)!write(hcq_fd, m, 10); _exit(99);
}
void hcq_guard_install(int fd) {
  stack_t st; st.ss_sp = hcq_stack; st.ss_size = sizeof hcq_stack; st.ss_flags = 0; sigaltstack(&st, 0);
  struct sigaction sa; sa.sa_sigaction = hcq_fault; sa.sa_flags = SA_SIGINFO | SA_ONSTACK; sigemptyset(&sa.sa_mask);
  hcq_fd = fd; sigaction(SIGSEGV, &sa, 0); sigaction(SIGBUS, &sa, 0);
}
static volatile int hcq_in_kernel = 0, hcq_forks = 0, hcq_registered = 0;
static void hcq_fork_parent(void) { if (hcq_in_kernel) hcq_forks++; }
static void hcq_fork_child(void) { if (hcq_in_kernel) _exit(0); }
void hcq_kernel_enter(void) {
  if (!hcq_registered) { pthread_atfork(0, hcq_fork_parent, hcq_fork_child); hcq_registered = 1; }
  hcq_forks = 0; hcq_in_kernel = 1;
}
int hcq_kernel_leave(void) { hcq_in_kernel = 0; return hcq_forks; }
"""

FORKED = "forked a child process: a kernel may not create processes (the child exited at once, inside fork)"

def _guard_installer():
  """The compiled `hcq_guard_install(fd)`, or None (no compiler: a crash is then reported without its address)."""
  try: return compile_c(_GUARD_C, "hcq_guard_install", 1, argtypes=[ctypes.c_int])
  except KernelError: return None

def _fork_guard() -> tuple:
  """(enter(), leave() -> forks made) around a C kernel's call (the fork guard above). C kernels exist only where a
  compiler does, so the guard compiles wherever one runs."""
  lib = compile_c(_GUARD_C, "hcq_kernel_enter", 0).lib
  leave = lib.hcq_kernel_leave
  leave.argtypes, leave.restype = [], ctypes.c_int
  return lib.hcq_kernel_enter, leave

def _dt(t: str) -> np.dtype: return np.dtype(DTYPES[t][0]).newbyteorder("<")
def _as(v: np.ndarray, dt: np.dtype) -> np.ndarray: return v[:len(v) - len(v) % dt.itemsize].view(dt)
def _arg(args: tuple, i: int, default=None):
  if i < len(args): return args[i]
  if default is None: raise KernelError(f"needs argument {i + 1}")
  return default

def _fill(views, dt, args):
  _need(views, 1)
  _as(views[0], dt)[:] = _arg(args, 0)
def _iota(views, dt, args):
  _need(views, 1)
  d = _as(views[0], dt)
  d[:] = np.arange(len(d)) + _arg(args, 0, 0)
def _binop(f):
  def run(views, dt, args):
    _need(views, 3)
    c, a, b = (_as(v, dt) for v in views)
    n = min(len(a), len(b), len(c))
    f(a[:n], b[:n], out=c[:n])
  return run
def _scale(views, dt, args):
  k = _arg(args, 0)
  if len(views) == 1:
    x = _as(views[0], dt)
    x[:] = x * k
  else:
    _need(views, 2)
    y, x = _as(views[0], dt), _as(views[1], dt)
    n = min(len(x), len(y))
    y[:n] = x[:n] * k
def _copy(views, dt, args):
  _need(views, 2)
  n = min(len(views[0]), len(views[1]))
  views[0][:n] = views[1][:n]
def _sum(views, dt, args):
  _need(views, 2)
  d = _as(views[0], dt)
  if len(d): d[0] = _as(views[1], dt).sum(dtype=dt)
def _spin(views, dt, args): pass
def _need(views, n):
  if len(views) != n: raise KernelError(f"takes {n} parameters, got {len(views)}")

# name -> (run(views, dtype, args), extra cost in µs from args)
BUILTINS: dict[str, tuple] = {
  "fill": (_fill, None), "iota": (_iota, None), "add": (_binop(np.add), None), "mul": (_binop(np.multiply), None),
  "scale": (_scale, None), "copy": (_copy, None), "sum": (_sum, None), "spin": (_spin, lambda a: float(_arg(a, 0))),
}

class KernelFn:
  """What a dispatch runs: `run(views)`; `extra_us` is added to the kernel's cost (spin). When `wants_dims`, the
  dispatch sets `dims` = ((grid x, y, z), (block x, y, z)) before each run."""
  def __init__(self, name: str, run: Callable, extra_us: float = 0.0, wants_dims: bool = False):
    self.name, self.run, self.extra_us, self.wants_dims, self.dims = name, run, extra_us, wants_dims, ((1, 1, 1), (1, 1, 1))

class Worker:
  """Runs C kernels in a forked child process, so a kernel that crashes or never returns becomes a KernelError (a
  device fault at its `exec`) instead of taking the tool down. The emulated memory is shared anonymous mappings
  (device._zeros) made before the fork, so the child writes the very pages the emulator reads, at the same
  addresses: a call is one pipe round trip carrying the function's index and the argument pointers. A worker is
  forked on the first call and again after a crash, a timeout, or a new function or mapping it cannot see."""
  def __init__(self, timeout_s: float = 10.0):
    self.timeout_s, self.seen = timeout_s, (0, 0)
    self.funcs: list[tuple[Callable, Optional[tuple]]] = []   # (C function, its library's (hcq_grid, hcq_block) or None)
    self.pid: Optional[int] = None   # the worker's, while one runs

  def add(self, fn, dims=None) -> int:
    """Register a C function (and its library's hcq_grid/hcq_block arrays, if any); returns its index for `call`."""
    self.funcs.append((fn, dims))
    return len(self.funcs) - 1

  def _fork(self):
    from .device import MAPPINGS
    self.close()
    install = _guard_installer()   # (compiled before the fork: the child only calls it)
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: call kernels until the pipe closes; never returns into the caller's code
      try:
        import faulthandler
        faulthandler.disable()   # the parent reports the crash; no Python traceback dump from the child
        os.close(req_w)
        os.close(resp_r)
        if install is not None: install(resp_w)
        enter, leave = _fork_guard()
        def read(n: int) -> bytes:
          b = b""
          while len(b) < n:
            more = os.read(req_r, n - len(b))
            if not more: raise EOFError
            b += more
          return b
        while True:
          fid, n, has_dims = struct.unpack("<III", read(12))
          kinds, vals = read(n), struct.unpack(f"<{n}Q", read(8 * n))
          fn, dims = self.funcs[fid]
          if has_dims:
            d = struct.unpack("<6I", read(24))
            dims[0][:], dims[1][:] = d[:3], d[3:]
          enter()
          fn(*[ctypes.c_void_p(v) if k else v for k, v in zip(kinds, vals)])
          os.write(resp_w, b"\3" if leave() else b"\1")
      except EOFError: pass
      finally: os._exit(0)
    os.close(req_r)
    os.close(resp_w)
    self.pid, self.req, self.resp, self.seen = pid, req_w, resp_r, (len(self.funcs), MAPPINGS[0])

  def call(self, fid: int, args: list, dims=None) -> None:
    """Run function `fid` on `args` (byte views: their address is passed; ints: scalar parameters)."""
    from .device import MAPPINGS
    if self.pid is None or self.seen != (len(self.funcs), MAPPINGS[0]): self._fork()
    kinds = bytes(type(a) is not int for a in args)
    vals = [a & (2**64 - 1) if type(a) is int else a.ctypes.data for a in args]
    msg = struct.pack(f"<III{len(args)}s{len(args)}Q", fid, len(args), dims is not None, kinds, *vals)
    if dims is not None: msg += struct.pack("<6I", *dims[0], *dims[1])
    os.write(self.req, msg)
    ready: list = []
    deadline = time.monotonic() + self.timeout_s
    while not ready and (left := deadline - time.monotonic()) > 0:   # (select takes at most ~9e9 s: waited in steps)
      ready, _, _ = select.select([self.resp], [], [], min(left, 3600.0))
    got = os.read(self.resp, 1) if ready else b""
    if got == b"\1": return
    if got == b"\3": raise KernelError(FORKED)
    fault = os.read(self.resp, 9) if got == b"\2" else b""
    pid = self.pid
    assert pid is not None   # (forked above)
    if not ready: os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    self.pid = None
    os.close(self.req)
    os.close(self.resp)
    if not ready: raise KernelError(f"did not return within {self.timeout_s:g} s (`--kernel-timeout`): killed")
    if len(fault) == 9: raise KernelFault(signal.Signals(fault[0]).name, int.from_bytes(fault[1:], "little"))
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    raise KernelError(f"crashed ({signal.Signals(sig).name if sig else f'exit status {os.WEXITSTATUS(status)}'})")

  def close(self):
    """End the worker. It is killed, not asked: a call cut short (an interrupt, an error of the caller's) may have
    left it inside a kernel that never returns, and nothing it holds needs a clean exit (the memory is the emulator's)."""
    if self.pid is None: return
    os.close(self.req)
    os.close(self.resp)
    try: os.kill(self.pid, signal.SIGKILL)
    except ProcessLookupError: pass
    os.waitpid(self.pid, 0)
    self.pid = None

def make_kernel(k, cache_dir: Optional[str] = None, worker: Optional[Worker] = None) -> KernelFn:
  """A KernelFn for an ir.Kernel. C source wins over builtin (it is the emitted, exact one); no implementation (or only
  an AMD code object, which the emulator cannot execute) touches nothing. C kernels run in `worker` when given, else
  in this process (faster, but a crashing kernel takes the process down)."""
  impl = k.impl
  if impl is not None and impl.c_source is not None:
    fn = compile_c(impl.c_source, k.name, len(k.params), cache_dir, [_CTYPE.get(p.mode, ctypes.c_void_p) for p in k.params])
    # launch dims: a C kernel that defines `unsigned int hcq_grid[3], hcq_block[3];` finds each dispatch's there
    try: dims = ((ctypes.c_uint32 * 3).in_dll(fn.lib, "hcq_grid"), (ctypes.c_uint32 * 3).in_dll(fn.lib, "hcq_block"))
    except ValueError: dims = None
    if worker is not None:
      fid = worker.add(fn, dims)
      def run_w(views): worker.call(fid, views, kf.dims if dims is not None else None)
      kf = KernelFn(k.name, run_w, wants_dims=dims is not None)
      return kf
    enter, leave = _fork_guard()
    def run_c(views):  # buffers are byte views, scalar parameters ints
      if dims is not None: dims[0][:], dims[1][:] = kf.dims   # type: ignore[call-overload]  # ctypes takes any sequence; typeshed: list
      enter()
      fn(*[v if type(v) is int else ctypes.c_void_p(v.ctypes.data) for v in views])
      if leave(): raise KernelError(FORKED)
    kf = KernelFn(k.name, run_c, wants_dims=dims is not None)
    return kf
  if impl is not None and impl.builtin is not None:
    if impl.builtin not in BUILTINS: raise KernelError(f"unknown builtin `{impl.builtin}` (known: {', '.join(BUILTINS)})")
    run, extra = BUILTINS[impl.builtin]
    dt, args = _dt(impl.dtype or "f32"), tuple(impl.args)
    def run_b(views):
      try: run([v for v in views if type(v) is not int], dt, args)  # built-ins take buffers only
      except KernelError as e: raise KernelError(f"builtin {impl.builtin}: {e}") from None
    return KernelFn(k.name, run_b, extra(args) if extra else 0.0)
  return KernelFn(k.name, lambda views: None)

# ---- C kernels


def _arch_flags() -> list:
  """tinygrad's CPU device arch flags (ClangCompiler on `<machine>,native`: -march=native on x86_64, -mcpu=native and
  -ffixed-x18 on arm64), so kernels get the same FMA contraction and vector ISA as tinygrad's."""
  import platform
  try:
    from tinygrad.runtime.support.compiler_cpu import ClangCompiler
    m = platform.machine().lower()
    return list(ClangCompiler([{"amd64": "x86_64", "aarch64": "arm64"}.get(m, m), "native"]).args)
  except Exception: return []  # an arch tinygrad does not know: plain -O2 code

# tinygrad's ClangCompiler.compile codegen flags (its -nostdlib/--target=*-none-elf only matter for its own loader);
# FLAGS are tried first, BASE_FLAGS when the host compiler rejects them
BASE_FLAGS = ["-shared", "-fPIC", "-O2"]
FLAGS = BASE_FLAGS + ["-ffreestanding", "-fno-math-errno", *_arch_flags()]

_loaded: dict = {}

_CTYPE = {"i32": ctypes.c_int32, "u32": ctypes.c_uint32}  # scalar parameter types (ir.SCALARS) as C sees them

def compile_c(source: str, name: str, nparams: int, cache_dir: Optional[str] = None, argtypes: Optional[list] = None):
  """Compile `source` to a shared library with tinygrad's CPU flags (cached by hash of compiler + flags + source) and
  return its function `name`, typed as taking `nparams` pointers (or `argtypes`)."""
  try: so = build_so(source, FLAGS, BASE_FLAGS, cache=cache_dir)
  except NoCompilerError as e: raise KernelError(f"no C compiler found ({e})") from None
  except CompileError as e: raise KernelError(f"C kernel `{name}` does not compile:\n{e}") from None
  if so not in _loaded: _loaded[so] = ctypes.CDLL(so)
  try: fn = getattr(_loaded[so], name)
  except AttributeError: raise KernelError(f"C kernel source defines no function `{name}`") from None
  fn.argtypes, fn.restype = argtypes or [ctypes.c_void_p] * nparams, None
  fn.lib = _loaded[so]
  return fn
