"""tinygrad's own AMD runtime on tinygrad's mock GPU (a fake KFD driver and GPU with PM4/SDMA executors and an RDNA3
emulator), a peer of the project: found through TINYGRAD_REPO (a tinygrad checkout), else ../shared/peers/tinygrad
beside the repository. Workloads run in a subprocess (tinygrad picks its device when it is imported)."""
from __future__ import annotations
import ctypes.util, json, os, pathlib, shutil, subprocess, sys
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORKLOADS = pathlib.Path(__file__).parent / "mock_workloads"
HOW = ("set TINYGRAD_REPO to a tinygrad checkout (its test/mockgpu and extra/ are the mock GPU), or put one at "
       "../shared/peers/tinygrad; the mock needs `apt-get install clang libllvm19`")

def tinygrad_repo():
  for p in (os.environ.get("TINYGRAD_REPO"), ROOT.parent / "shared" / "peers" / "tinygrad"):
    if p and (pathlib.Path(p) / "test" / "mockgpu" / "mockgpu.py").is_file(): return pathlib.Path(p)
  return None

def unavailable():
  """Why the mock GPU cannot run here (None: it can)."""
  if tinygrad_repo() is None: return f"tinygrad's mock GPU not found: {HOW}"
  if shutil.which("clang") is None: return f"no clang (the mock's RDNA3 emulator builds with it): {HOW}"
  if not (ctypes.util.find_library("LLVM-19") or any(pathlib.Path("/usr/lib").glob("*/libLLVM*.so.19*"))):
    return f"no libLLVM 19 (tinygrad's AMD compiler): {HOW}"
  return None

# The peer tier is the `peer` marker: `-m peer` selects it, `-m "not peer"` leaves it out. tests/conftest.py skips every
# `peer` test with unavailable()'s reason where the mock cannot run, and says at the end of the run how many it skipped.
needs_mock = pytest.mark.peer

def env(hcq2: bool = False, **extra) -> dict:
  e = {k: v for k, v in os.environ.items() if k not in ("DEV", "HCQ2", "HCQ_RUNTIME_DEV", "JIT", "PYTHONPATH")}
  e.update(DEV="MOCKKFD+AMD", PYTHONPATH=os.pathsep.join([str(tinygrad_repo()), str(ROOT)]))
  if hcq2: e.update(HCQ2="1", HCQ_RUNTIME_DEV="PYTHON")
  e.update(extra)
  return e

# tinygrad's mock NV GPU (test/mockgpu/nv: GPFIFOs, semaphores, copies and QMD launches; no kernel runs there, its PTX
# emulator library is absent, so numbers from kernels are zeros): `env(**NV)`, `hcqdsl(..., **NV)`, `capture(..., **NV)`
NV = {"DEV": "MOCK+NV"}

def hcqdsl(*args, hcq2: bool = False, timeout: int = 600, **extra) -> subprocess.CompletedProcess:
  """`python -m hcqdsl ARGS` with tinygrad on the mock GPU."""
  return subprocess.run([sys.executable, "-m", "hcqdsl", *map(str, args)], capture_output=True, text=True, timeout=timeout,
                        env=env(hcq2, **extra), cwd=str(ROOT))

def capture(workload: str, tmp: pathlib.Path, hcq2: bool = False, **extra) -> tuple:
  """Capture a workload of tests/mock_workloads; returns (manifest path, tinygrad's output .npy path)."""
  man, out = tmp / f"{workload}.json", tmp / f"{workload}.npy"
  r = hcqdsl("capture", "-o", man, WORKLOADS / f"{workload}.py", out, hcq2=hcq2, **extra)
  assert r.returncode == 0, r.stderr
  return man, out

def manifest(path) -> dict: return json.loads(pathlib.Path(path).read_text())

def report(r: subprocess.CompletedProcess) -> dict:
  """`sanitize --format json`'s report: the last line of stdout (the user's script prints what it prints first)."""
  return json.loads(r.stdout.strip().splitlines()[-1])

def verdicts(kept) -> tuple:
  """(sanitize's, the whole run's): each problem found, as (code, the capture steps and keys of its statements), counted —
  sanitize's from `--keep DIR`'s occurrences.json, the other from `hcqdsl lift --whole` + `check` of DIR/capture.json,
  by the same coordinates (hcqdsl.tinygrad.live.coordinates): the two must be equal, warning for warning."""
  import collections
  import hcqdsl
  from hcqdsl.lift.manifest import lift_file
  from hcqdsl.tinygrad.live import coordinates
  kept = pathlib.Path(kept)
  info: dict = {}
  text = hcqdsl.format(lift_file(kept / "capture.json", str(kept / "whole.hcq"), whole=True, trace=info))
  prog = hcqdsl.parse(text, "whole.hcq")
  co = coordinates(prog, text, info, list(range(len(manifest(kept / "capture.json")["host"]))))
  whole: collections.Counter = collections.Counter()
  for d in hcqdsl.check(prog, 1):
    whole[(d.code, tuple((co[s.line][0], tuple(co[s.line][1])) for s in [d.span] + [r.span for r in d.related or ()]
                         if s is not None and s.line in co))] += 1
  occ = json.loads((kept / "occurrences.json").read_text())
  return collections.Counter((c, tuple((g, tuple(k)) for g, k in ev)) for c, ev in occ), whole
