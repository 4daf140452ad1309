"""tinygrad's CPU device without clang: the gcc wrapper (hcqdsl.host_cc) takes tinygrad's clang command line and C."""
import os, subprocess, sys, textwrap
import pytest
from hcqdsl import host_cc

CLANG_C = textwrap.dedent("""\
  typedef float float4 __attribute__((aligned(16),ext_vector_type(4)));
  void k(float* restrict out, unsigned* restrict bits, __fp16* restrict h) {
    float4 v = (float4){1.0f, 2.0f, 3.0f, 4.0f};
    *((float4*)(out)) = v + v;
    bits[0] = __builtin_bit_cast(unsigned int, (float)(out[1]));
    h[0] = (__fp16)out[2];
  }
  """)
# tinygrad 0.14 ClangCompiler.compile's command line (runtime/support/compiler_cpu.py)
TINYGRAD_ARGS = ["-c", "-x", "c", "-O2", "-fPIC", "-ffreestanding", "-fno-math-errno", "-nostdlib", "-fno-ident",
                 "--target=x86_64-none-unknown-elf", "-march=native", "-", "-o", "-"]

needs_gcc = pytest.mark.skipif(host_cc.find_cc(("gcc", "cc"), use_env=False) is None, reason="no gcc/cc on PATH (apt-get install gcc)")

def test_gcc_compatible_rewrites_the_clang_only_spellings():
  src = host_cc.gcc_compatible(CLANG_C)
  assert "ext_vector_type" not in src and "vector_size(4*sizeof(float))" in src
  assert "#define __builtin_bit_cast(T, v)" in src and "#define __fp16 _Float16" in src
  assert host_cc.gcc_compatible(src) == src  # idempotent: emitted kernels are rewritten again by the runtime

@needs_gcc
def test_wrapper_compiles_tinygrad_command_line_to_an_object_on_stdout():
  r = subprocess.run([host_cc.wrapper(), *TINYGRAD_ARGS], input=CLANG_C.encode(), capture_output=True)
  assert r.returncode == 0, r.stderr.decode()
  assert r.stdout[:4] == b"\x7fELF"

@needs_gcc
def test_wrapper_reports_compile_errors_with_gcc_status():
  r = subprocess.run([host_cc.wrapper(), *TINYGRAD_ARGS], input=b"void k( {", capture_output=True)
  assert r.returncode != 0 and b"error" in r.stderr and r.stdout == b""

@needs_gcc
def test_tinygrad_cpu_device_runs_through_the_wrapper(tmp_path):
  """The real thing: tinygrad's CPU device (its queue workers and a kernel with vectors) compiled by gcc."""
  code = ("from tinygrad import Tensor\n"
          "a = Tensor.arange(16).float().reshape(4, 4)\n"
          "print((a @ a).sum(1).tolist(), (a.exp2() + a.sqrt()).max().item())\n")
  env = dict(os.environ, CC=host_cc.wrapper(), DEV="CPU", CACHELEVEL="0")
  r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=300)
  assert r.returncode == 0, r.stderr[-2000:]
  assert r.stdout.split() == ["[260.0,", "740.0,", "1220.0,", "1700.0]", "32771.87109375"]  # float32: 2**15 + sqrt(15)

@needs_gcc
def test_gcc_computes_fp16_products_as_clang(monkeypatch, tmp_path):
  """clang's `__fp16` is a storage type: `(float)((__fp16)a * (__fp16)b)` is the exact float product of the two halves.
  gcc with -march=native on an AVX512-FP16 machine would round it to half (the half workload's C matmul then missed
  tinygrad's numbers in 249 of 256 elements); the rewrite keeps clang's meaning."""
  import ctypes
  import numpy as np
  from hcqdsl.runtime.kernels import compile_c
  monkeypatch.setenv("CC", host_cc.find_cc(("gcc", "cc"), use_env=False))
  src = host_cc.gcc_compatible("void k(float* restrict out, float* restrict a, float* restrict b) {\n"
                               "  for (int i = 0; i < 64; i++) out[i] = (float)(((__fp16)(a[i]))*((__fp16)(b[i])));\n}\n")
  fn = compile_c(src, "k", 3, cache_dir=str(tmp_path))
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
  out = np.zeros(64, np.float32)
  fn(*(x.ctypes.data_as(ctypes.c_void_p) for x in (out, a, b)))
  want = a.astype(np.float16).astype(np.float32) * b.astype(np.float16).astype(np.float32)  # exact: 22-bit products
  assert (out == want).all() and (want != want.astype(np.float16).astype(np.float32)).sum() > 32
