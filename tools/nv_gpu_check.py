"""The NV encodings checked on a machine with an NVIDIA GPU, in one call of at most 10 minutes: a small multi-queue
tinygrad program (a TinyJit called 3 times: input uploads on the copy queue, two kernels on the compute queue, the
read-back; with a second GPU, a copy to it and a kernel there) runs on tinygrad's NV runtime under `hcqdsl capture`;
the capture is lifted (the run as it happened), checked, run on hcqdsl's emulator and compiled, and the methods of each
captured submission are compared with what `compile` gives for its lifted queue — with addresses (ours lay memory out
differently) replaced by the names of the signals and buffers they point into, the QMD's address by a token, and the
channel setup and the zero padding tinygrad submits (no statement) left out — and so are each QMD's launch fields
(grid, block, release semaphores, the QMD it launches) and kernel-argument pointers. Prints one line per step and
`captured bytes == compile(lifted): yes|no` (the first difference when no); exit 0 when every step passed, 1 when one
failed, 0 with `skipped: ...` where there is no NVIDIA driver (no /dev/nvidiactl) — or run it on tinygrad's mock NV GPU
with DEV=MOCK+NV and a tinygrad checkout on PYTHONPATH (its test/mockgpu).
  python tools/nv_gpu_check.py [--keep DIR] [--timeout 420]"""
from __future__ import annotations
import argparse, os, pathlib, subprocess, sys, tempfile, time
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

WORKLOAD = '''
import numpy as np
from tinygrad import Tensor, TinyJit, Device
d0 = "NV"
try: Device["NV:1"]; d1 = "NV:1"
except Exception: d1 = None   # one GPU: compute and copy queues of one device
@TinyJit
def step(x):
  y = ((x * 2).contiguous() + 1).contiguous()
  return (y.to(d1) * 3).contiguous() if d1 else (y * 3).contiguous()
for i in range(3): out = step(Tensor(np.full(256, i, dtype=np.float32)).realize()).numpy()
print("tinygrad ran on", d0, d1 or "(one GPU)")
'''

def driver() -> str | None:
  """Why the check cannot run here (None: it can): an NVIDIA driver's device node, or tinygrad's mock NV GPU."""
  dev = os.environ.get("DEV", "")
  if "MOCK" in dev and "NV" in dev: return None
  if not os.path.exists("/dev/nvidiactl"): return "no NVIDIA driver (/dev/nvidiactl absent)"
  return None

def normalize(dw: list, arch: str, name_of) -> list:
  """The statement methods of a pushbuffer with their addresses named (name_of(addr) -> name+offset); SEND_PCAS_A's
  QMD address is a token. Channel setup and zero padding are left out."""
  from hcqdsl.nv import pushbuf
  from hcqdsl.nv.meaning import SETUP_METHODS
  addrs = ("sem_addr", "semaphore_addr", "src_addr", "dst_addr")
  out = []
  for p in pushbuf.decoder(arch).decode(dw):
    if p.raw and p.dwords == (0,): continue
    if not p.raw and (p.name.startswith(SETUP_METHODS) or p.name == "METHOD_0x0"): continue
    f = tuple((k, name_of(v) if k in addrs else "qmd" if k == "qmd_addr" else v) for k, v in sorted(p.fields.items()) if k != "send_pcas_a")
    out.append((p.name, f))
  return out

def qmd_fields(dw: list, arch: str, read, name_of, pointers: dict) -> list:
  """Per QMD a SEND_PCAS_A launches and its chain: grid, block, releases (named address, payload), the kernel-argument
  pointers (named; `pointers`: program address -> how many) — what hcqdsl sets from a statement; the rest of a QMD is
  the kernel's (its cubin's) own."""
  from hcqdsl.nv import pushbuf
  from hcqdsl.nv.qmd import QMD
  from hcqdsl.nv.targets import get_target
  t, out = get_target(arch), []
  for p in pushbuf.decoder(arch).decode(dw):
    if p.raw or p.name != "SEND_PCAS_A": continue
    qa, seen = p.fields["qmd_addr"], set()
    while qa and qa not in seen:
      seen.add(qa)
      b = read(qa, t.qmd_size)
      if b is None:
        out.append(("unreadable QMD",))
        break
      q = QMD.of(t, bytearray(b))
      go, bo = q.offset(q.grid_field()), q.offset("cta_thread_dimension0")
      grid = tuple(int.from_bytes(b[go + 4 * j:go + 4 * j + 4], "little") for j in range(3))
      block = (int.from_bytes(b[bo:bo + 2], "little"), int.from_bytes(b[bo + 2:bo + 4], "little"), b[q.offset("cta_thread_dimension2")])
      rel = [(name_of(q.address(f"release{i}")), q.read(q.release_fields(i)[2])) for i in range(2) if q.read(q.release_fields(i)[0])]
      ka = q.address("cbuf0")
      args = read(ka + t.args_offset, 8 * pointers.get(q.address("program"), 0)) or b""
      ptrs = tuple(name_of(int.from_bytes(args[i:i + 8], "little")) for i in range(0, len(args), 8))
      out.append((grid, block, tuple(rel), ptrs, bool(q.read("dependent_qmd0_enable"))))
      qa = q.address("dependent") if q.read("dependent_qmd0_enable") else 0
  return out

def namer(signals: dict, buffers: dict):
  """addr -> `name` / `name+off` over signals {addr: name} and buffers {name: (addr, size)}; `?addr` for neither."""
  spans = sorted((a, n, s) for n, (a, s) in buffers.items())
  def name_of(a: int) -> str:
    if a in signals: return signals[a]
    for lo, n, s in spans:
      if lo <= a < lo + s: return n if a == lo else f"{n}+{a - lo:#x}"
    return f"?{a:#x}"
  return name_of

def compare(trace: dict, img) -> list:
  """The differences between each captured submission and the compiled queue of its lifted program ([] when none)."""
  from hcqdsl.ir import NV_ARCHS, KERNARGS
  cap_name = namer(trace["signals"], trace["buffers"])
  ours_name = namer({a: n for n, a in img.signals.items()}, img.buffers)
  ours_mem = dict(img.data)
  def read_ours(a, n):
    for base, b in ours_mem.items():
      if base <= a and a + n <= base + len(b): return b[a - base:a - base + n]
    return None
  # (the lift's last parameter `kernargs`, the block the exec reads, is a pointer of compile's QMD only: not compared)
  ours_ptrs = {k["prog_addr"]: sum(p[0] in ("in", "out", "inout") and p[1] != KERNARGS for p in k["params"]) for k in img.kernels}
  diffs = []
  for q in img.queues:
    if q.arch not in NV_ARCHS or q.name not in trace["submitted"]: continue
    arch, dw, blocks = trace["submitted"][q.name]
    def read_cap(a, n, blocks=blocks):
      for base, b in blocks:
        if base <= a and a + n <= base + len(b): return b[a - base:a - base + n]
      return None
    a, b = normalize(dw, arch, cap_name), normalize(q.dwords, q.arch, ours_name)
    if a != b:
      i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
      diffs.append(f"{q.name}: method group {i}: captured {a[i] if i < len(a) else '(none)'} != compiled {b[i] if i < len(b) else '(none)'}")
      continue
    qa = qmd_fields(dw, arch, read_cap, cap_name, trace["pointers"])
    qb = qmd_fields(q.dwords, q.arch, read_ours, ours_name, ours_ptrs)
    if qa != qb: diffs.append(f"{q.name}: QMD launch fields: captured {qa} != compiled {qb}")
  return diffs

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--keep", help="directory for the capture, the lifted program and the log (default: a temporary one)")
  ap.add_argument("--timeout", type=float, default=420, help="seconds the tinygrad program may take under capture")
  a = ap.parse_args(argv)
  if (why := driver()) is not None:
    print(f"skipped: {why}: this check needs an NVIDIA GPU (or tinygrad's mock NV GPU: DEV=MOCK+NV with a tinygrad checkout on PYTHONPATH)")
    return 0
  t0 = time.perf_counter()
  out = pathlib.Path(a.keep or tempfile.mkdtemp(prefix="nv_gpu_check_"))
  out.mkdir(parents=True, exist_ok=True)
  (out / "workload.py").write_text(WORKLOAD)
  env = {**os.environ, "DEV": os.environ.get("DEV", "NV")}
  env["PYTHONPATH"] = os.pathsep.join(x for x in [os.environ.get("PYTHONPATH"), str(pathlib.Path(__file__).resolve().parents[1])] if x)
  try:
    r = subprocess.run([sys.executable, "-m", "hcqdsl", "capture", "-o", str(out / "capture.json"), str(out / "workload.py")],
                       capture_output=True, text=True, timeout=a.timeout, env=env)
  except subprocess.TimeoutExpired:
    print(f"capture: FAILED: the tinygrad program did not finish in {a.timeout:.0f} s")
    return 1
  (out / "capture.log").write_text(r.stdout + r.stderr)
  if r.returncode != 0:
    print(f"capture: FAILED (exit {r.returncode}): {(r.stderr.strip().splitlines() or ['?'])[-1]}  (log: {out / 'capture.log'}; "
          "tinygrad 0.14 cannot open a Hopper GPU: its class lists omit HOPPER_*, tinygrad issue #16314)")
    return 1
  print(f"capture: {next((ln for ln in r.stderr.splitlines() if ln.startswith('wrote ')), 'ok')}")
  import hcqdsl
  from hcqdsl.lift.manifest import load_manifest, lift_manifest
  from hcqdsl.lang.format import format_program
  from hcqdsl.vendors import compile_program
  trace: dict = {}
  prog = lift_manifest(load_manifest(out / "capture.json"), None, None, trace, whole=True)
  text = format_program(prog)
  (out / "lifted.hcq").write_text(text)
  prog = hcqdsl.parse(text, str(out / "lifted.hcq"))
  ok = "cannot lift (" not in text
  n = sum(len(q.body) for q in prog.queues)
  print(f"lift: {len(prog.queues)} queues, {n} statements{'' if ok else ', SOME METHODS NOT LIFTED'} ({out / 'lifted.hcq'})")
  diags = hcqdsl.check(prog, 1)
  errors = [d for d in diags if d.severity == "error"]
  print(f"check: {len(errors)} errors, {len(diags) - len(errors)} warnings" + (f": {errors[0].message}" if errors else ""))
  res = hcqdsl.run(prog, launches=1)
  print(f"run: {'ok' if res.ok else 'FAILED: ' + res.summary().splitlines()[0]}")
  diffs = compare(trace, compile_program(prog))
  print(f"captured bytes == compile(lifted): {'yes' if not diffs else 'no'} ({len(trace['submitted'])} submissions compared: methods with "
        "addresses named, QMD launch fields, kernel-argument pointers)")
  for d in diffs[:5]: print(f"  {d}")
  print(f"done in {time.perf_counter() - t0:.1f} s")
  return 0 if ok and not errors and res.ok and not diffs else 1

if __name__ == "__main__":
  sys.exit(main())
