"""tinygrad's CPU device on a machine without clang: gcc behind clang's command line.

tinygrad 0.14's CPU device compiles every kernel (and, at start-up, its own queue workers) with
`$CC -c -x c ... --target=<arch>-none-unknown-elf -march=native - -o -` and loads the object with its own ELF loader.
A fresh Debian machine has gcc but no clang. gcc takes the same C once three clang-only spellings in tinygrad's C are
rewritten (`gcc_compatible`), `--target=` is dropped (gcc has one target) and the object goes through a file (gcc's
`as` cannot write to stdout). `use_for_tinygrad()` points `CC` at a two-line wrapper that runs this file as a script;
it does nothing when the user set `CC` or clang is on PATH. The runtime's C kernels take the same rewrite.

Standalone on purpose: the wrapper runs it with `python -I -S`, once per compiled kernel, so it imports only the
standard library."""
from __future__ import annotations
import os, re, shutil, subprocess, sys, tempfile

__all__ = ["gcc_compatible", "use_for_tinygrad", "wrapper", "find_cc", "cache_dir", "digest", "build_so", "NoCompilerError",
           "CompileError"]

class NoCompilerError(RuntimeError): pass
class CompileError(RuntimeError): pass   # the compiler's stderr

_GCC = ("gcc", "cc")  # compilers that take gcc's command line (the wrapper's)

_VEC = re.compile(r"typedef ([^;]+?) (\w+) __attribute__\(\(aligned\((\d+)\),ext_vector_type\((\d+)\)\)\);")
_BITCAST = ("#ifndef __clang__\n#define __builtin_bit_cast(T, v) ({ __typeof__(v) _bc_v = (v); T _bc_r; "
            "__builtin_memcpy(&_bc_r, &_bc_v, sizeof(_bc_r)); _bc_r; })\n#endif\n")
# clang's __fp16 is a storage type (arithmetic on it is float arithmetic); gcc's _Float16 is an arithmetic type,
# computed in half precision where the target has AVX512-FP16 (-march=native on Sapphire Rapids and later): a
# product of two halves would round to half there. Without AVX512-FP16, gcc evaluates _Float16 in float and rounds
# only at casts and assignments, which is clang's __fp16 meaning.
_FP16 = ("#if !defined(__clang__) && (defined(__x86_64__) || defined(__i386__))\n#ifdef __AVX512FP16__\n"
         "#pragma GCC target(\"no-avx512fp16\")\n#endif\n#define __fp16 _Float16\n#endif\n")

def gcc_compatible(src: str) -> str:
  """tinygrad's clang C, accepted by both clang and gcc with the same meaning: `ext_vector_type(N)` becomes GCC's
  `vector_size` (power-of-two N, the only sizes tinygrad's CPU renderer makes), `__builtin_bit_cast` a memcpy,
  and `__fp16` (ARM-only in gcc) `_Float16` on x86, computed as clang computes `__fp16` (in float, above)."""
  src = _VEC.sub(lambda m: m.group(0) if int(m.group(4)) & (int(m.group(4)) - 1) else
                 f"typedef {m.group(1)} {m.group(2)} __attribute__((vector_size({m.group(4)}*sizeof({m.group(1)}))));", src)
  if "__builtin_bit_cast" in src and _BITCAST not in src: src = _BITCAST + src
  if "__fp16" in src and _FP16 not in src: src = _FP16 + src
  return src

def find_cc(names=("clang", "cc", "gcc"), use_env: bool = True) -> str | None:
  """The host C compiler: `$CC` (when `use_env` and it is on PATH), else the first of `names` on PATH. The runtime's C
  kernels take any (the default order); the tinygrad wrapper needs gcc behind clang's command line (`("gcc", "cc")`)."""
  if use_env and (cc := os.environ.get("CC")) and shutil.which(cc): return cc
  return next((p for c in names if (p := shutil.which(c))), None)

def cache_dir(given: str | None = None) -> str:
  """The directory for compiled kernels and the wrapper: `given`, else `$HCQDSL_CACHE`, else one per user in the system
  temp directory (created)."""
  d = given or os.environ.get("HCQDSL_CACHE") or os.path.join(tempfile.gettempdir(), f"hcqdsl-kernels-{os.getuid()}")
  os.makedirs(d, exist_ok=True)
  return d

def digest(*parts: str) -> str:
  """The cache key of a compiled artifact: a hash over what it is built from (compiler, flags, source, ...)."""
  import hashlib
  return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]

def build_so(source: str, flags: list, fallback: list | None = None, prefix: str = "", cache: str | None = None,
             libs: tuple = ()) -> str:
  """The path of a shared library of C `source` built by the host compiler (find_cc) with `flags`, else `fallback`
  (for a compiler that rejects them), linked with `libs`: cached in cache_dir(cache) as PREFIX + digest(compiler,
  flags, source) + `.so`, built once per machine and shared by concurrent processes. Raises NoCompilerError, or
  CompileError with the compiler's messages."""
  cc = find_cc()
  if cc is None: raise NoCompilerError("tried $CC, clang, cc, gcc")
  so = os.path.join(cache_dir(cache), f"{prefix}{digest(cc, ' '.join(flags), source)}.so")
  if not os.path.exists(so):
    src, tmp = so[:-3] + ".c", f"{so[:-3]}.{os.getpid()}.tmp"
    with open(src, "w", encoding="utf-8") as f: f.write(source)   # (UTF-8 whatever the locale: a non-ASCII comment in LC_ALL=C)
    for fl in (flags, fallback) if fallback is not None else (flags,):
      r = subprocess.run([cc, *fl, "-o", tmp, src, *libs], capture_output=True, encoding="utf-8", errors="replace")
      if r.returncode == 0: break
    if r.returncode != 0: raise CompileError(r.stderr.strip())
    os.replace(tmp, so)  # atomic: concurrent runs share the cache
  return so

def use_for_tinygrad() -> str | None:
  """Make tinygrad's CPU device compile with gcc when there is no clang: sets `CC` (before tinygrad first compiles) to a
  wrapper around this module and returns its path; None when `CC` is already set or clang is on PATH."""
  if os.environ.get("CC") or shutil.which("clang"): return None
  os.environ["CC"] = path = wrapper()
  return path

def wrapper() -> str:
  """The path of an executable that takes clang's command line and runs gcc (written once per interpreter)."""
  gcc = find_cc(_GCC, use_env=False)
  if gcc is None: raise NoCompilerError("tinygrad's CPU device needs a C compiler and none is on PATH "
                                        "(install one: `apt-get install gcc`, or clang)")
  path = os.path.join(cache_dir(), "tinygrad-cc")
  text = f'#!/bin/sh\nHCQDSL_GCC="{gcc}" exec "{sys.executable}" -I -S "{os.path.abspath(__file__)}" "$@"\n'
  try:
    with open(path) as f: same = f.read() == text
  except OSError: same = False
  if not same:
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as f: f.write(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)  # atomic: concurrent processes share the wrapper
  return path

def _compile(argv: list) -> int:
  """Run gcc for a clang-style `-c -x c [flags] - -o -` line: source from stdin, object to stdout."""
  gcc = os.environ.get("HCQDSL_GCC") or find_cc(_GCC, use_env=False)
  if gcc is None:
    sys.stderr.write("hcqdsl tinygrad-cc: no gcc on PATH\n")
    return 127
  args = [a for a in argv if not a.startswith("--target=")]
  with tempfile.TemporaryDirectory(prefix="hcqdsl-cc-") as tmp:
    out = os.path.join(tmp, "out.o")
    to_stdout = False
    for i in range(len(args) - 1):
      if args[i] == "-o" and args[i + 1] == "-": args[i + 1], to_stdout = out, True
    src = sys.stdin.read() if "-" in args else None
    r = subprocess.run([gcc, *args], input=gcc_compatible(src) if src is not None else None, text=True)
    if r.returncode != 0: return r.returncode
    if to_stdout:
      with open(out, "rb") as f: sys.stdout.buffer.write(f.read())
  return 0

if __name__ == "__main__": sys.exit(_compile(sys.argv[1:]))
