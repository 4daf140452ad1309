"""Per-launch CPU cost of submitting a 1000-command program: hcqdsl's submit interpreter (patch changed dwords, copy the
commands onto the ring, doorbell) against tinygrad 0.14's own `HWQueue._apply_var_vals` + `_submit` for the same queues
built with tinygrad's encoders (symbolic values as tinygrad Variables) on the test stand-in device with a stand-in ring
and doorbell. Both write identical dwords to their rings (checked).
  python benchmarks/submit.py [--commands 1000] [--launches 200] [--target gfx1100]"""
import argparse, ctypes, os, random, sys, time, types
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import numpy as np  # noqa: E402
from hcqdsl.syntax import parse  # noqa: E402
from hcqdsl.compile import compile_program  # noqa: E402
from hcqdsl.runtime.emulator import Emulator  # noqa: E402
from hcqdsl.runtime.submit import Submitter  # noqa: E402
from test_amd_encode import _replay  # noqa: E402  (tinygrad queue for one of our compiled queues)
from tinygrad.runtime.support.hcq import MMIOInterface  # noqa: E402
from tinygrad.runtime.ops_amd import AMDQueueDesc  # noqa: E402

def program(n: int, arch: str, seed: int = 0) -> str:
  """n statements: 70% on a compute queue (wait/signal/exec), 30% on a copy queue (wait/signal/copy); values per launch."""
  rng = random.Random(seed)
  c, x = [], []
  for _ in range(n):
    if rng.random() < 0.7: c.append(rng.choice(["wait s0 >= k", "signal s1 = k + 1", "exec f(a)"]))
    else: x.append(rng.choice(["wait s1 >= k", "signal s0 = k", "copy b <- a"]))
  body = lambda xs: "\n".join("  " + s for s in xs)
  return (f"device g = AMD:0 {arch}\nbuffer a on g size 4K\nbuffer b on g size 4K\nsignal s0 on g\nsignal s1 on g\nvar k\n"
          f"kernel f(inout a)\nqueue c compute on g {{\n{body(c)}\n}}\nqueue x copy on g {{\n{body(x)}\n}}\n")

class Ring:
  """A stand-in hardware queue for tinygrad: ring, read/write pointers and doorbell in plain host memory."""
  def __init__(self, nbytes):
    self.mem = (ctypes.c_uint32 * (nbytes // 4))()
    self.ptrs = (ctypes.c_uint64 * 3)()
    a = ctypes.addressof
    self.desc = AMDQueueDesc(ring=MMIOInterface(a(self.mem), nbytes, fmt="I"),
                             read_ptr=MMIOInterface(a(self.ptrs), 8, fmt="Q"), write_ptr=MMIOInterface(a(self.ptrs) + 8, 8, fmt="Q"),
                             doorbell=MMIOInterface(a(self.ptrs) + 16, 8, fmt="Q"))

def tinygrad_device(tq, ring):
  dev = tq.dev
  dev.compute_queue = ring.desc
  dev.sdma_queue = lambda idx=0: ring.desc
  dev.is_usb = lambda: False
  dev.iface = types.SimpleNamespace(dev_impl=types.SimpleNamespace(gmc=types.SimpleNamespace(flush_hdp=lambda: None)))
  return dev

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--commands", type=int, default=1000)
  ap.add_argument("--launches", type=int, default=200)
  ap.add_argument("--target", default="gfx1100")
  a = ap.parse_args()
  text = program(a.commands, a.target)
  p = parse(text, "bench.hcq")
  img = compile_program(p, a.target)
  ndw = {q.name: len(q.dwords) for q in img.queues}
  ring_bytes = 1 << (8 * max(ndw.values())).bit_length()

  # hcqdsl: the submit interpreter on the emulator device (engines not run: the read pointer is moved by hand)
  emu = Emulator()
  sub = Submitter(img, emu, ring_size=ring_bytes)
  ours = 0.0
  for k in range(1, a.launches + 1):
    t0 = time.perf_counter()
    vec = sub.env_vector(k)
    for qs in sub.queues.values():
      for _ in sub.submit(qs, k, vec, None): pass
    ours += time.perf_counter() - t0
    for e in emu.engines: e.rptr = e.ring.wptr

  # tinygrad: _apply_var_vals + _submit per queue
  tqs = []
  for qi in img.queues:
    tq, symname = _replay(img, p, qi.name)
    ring = Ring(ring_bytes)
    tqs.append((qi, tq, tinygrad_device(tq, ring), ring, symname))
  theirs = 0.0
  for k in range(1, a.launches + 1):
    env = img.env(k)
    for qi, tq, dev, ring, symname in tqs: ring.ptrs[0] = ring.desc.put_value if qi.engine == "copy" else ring.ptrs[0]
    t0 = time.perf_counter()
    for qi, tq, dev, ring, symname in tqs:
      tq._apply_var_vals({symname[v]: x for v, x in env.items()})
      tq._submit(dev)
    theirs += time.perf_counter() - t0

  # the same command stream for the last launch, and it is what sits on our ring
  for qi, tq, dev, ring, _ in tqs:
    qs = sub.queues[qi.name]
    assert qs.tmpl.tolist() == [x & 0xFFFFFFFF for x in tq._q], f"{qi.name}: command streams differ"
    start, n, launch, off = qs.segs[-1]
    if n == ndw[qi.name]: assert (qs.ring_u32[start % qs.ndw_ring:][:n] == qs.tmpl).all()
  per = lambda t: t / a.launches * 1e6
  print(f"{a.commands} commands ({', '.join(f'{k}: {v} dwords' for k, v in ndw.items())}), {a.launches} launches, {a.target}")
  print(f"hcqdsl   {per(ours):9.1f} us/launch")
  print(f"tinygrad {per(theirs):9.1f} us/launch")
  print(f"ratio    {theirs / ours:9.1f}x")

if __name__ == "__main__": main()
