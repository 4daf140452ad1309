"""tinygrad's own queues for hcqdsl's compiled queues: each statement of a program replayed through tinygrad's
AMDComputeQueue / AMDCopyQueue on the stand-in device (tests/amd_standin.py), so tests and benchmarks compare our
packets with tinygrad's byte for byte. Shared by tests/test_amd_encode.py, benchmarks/submit.py and
benchmarks/jit_replay.py."""
from __future__ import annotations
import ctypes, types
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import UOp
from tinygrad.runtime.support.hcq import MMIOInterface
from amd_standin import StandinDevice, signal, buf, program, args_state, compute_queue, copy_queue
from hcqdsl.amd.targets import get_target
from hcqdsl.ir import Wait, SignalWrite, Exec, Copy, Write, Poll, Barrier, Timestamp, Epoch, Expr, Ref

__all__ = ["replay", "symbolic_replay"]

def replay(img, p, qname):
  """Build tinygrad's queue for one of our compiled queues, values as tinygrad Variables."""
  q = next(x for x in p.queues if x.name == qname)
  qi = img.queue(qname)
  d = StandinDevice(qi.arch, scratch_addr=0, tmpring_size=0)  # synthetic kernels: no scratch
  tq = compute_queue(d) if q.engine == "compute" else copy_queue(d)
  syms = {v: UOp.variable(v.replace(".", "_"), 0, 2**32 - 1) for v in img.vars}
  def val(e: Expr): return e.offset if e.var is None else syms[e.var.name] + e.offset
  kargs = iter(r for r in img.regions if r.kind == "kernargs" and r.name.startswith(qname + "."))
  for s in q.body:
    if isinstance(s, Epoch): s = Wait(Ref(f"{q.device.name}.timeline"), Expr(Ref(f"{q.device.name}.epoch"), -1))
    if isinstance(s, Wait): tq.wait(signal(img.signals[s.signal.name]), val(s.value))
    elif isinstance(s, SignalWrite): tq.signal(signal(img.signals[s.signal.name]), val(s.value))
    elif isinstance(s, Barrier):
      if q.engine == "compute": tq.memory_barrier()
    elif isinstance(s, Timestamp): tq.timestamp(signal(img.signals[s.signal.name]))
    elif isinstance(s, Write):
      a, size = img.buffers[s.dst.buffer.name]
      lo, hi = s.dst.bounds(size)
      tq.write(buf(a + lo), val(s.value), b64=hi - lo == 8)
    elif isinstance(s, Poll):
      a, size = img.buffers[s.src.buffer.name]
      tq.poll_bit(buf(a + s.src.bounds(size)[0]), val(s.value), mask=s.mask)
    elif isinstance(s, Copy):
      (da, ds), (sa, ss) = img.buffers[s.dst.buffer.name], img.buffers[s.src.buffer.name]
      lo_d, hi_d = s.dst.bounds(ds)
      lo_s, _ = s.src.bounds(ss)
      tq.copy(buf(da + lo_d), buf(sa + lo_s), hi_d - lo_d)
    elif isinstance(s, Exec):
      k = next(k for k in img.kernels if k["name"] == s.kernel.name and k["device"] == q.device.name)
      co = next(r for r in img.regions if r.kind == "code" and r.meta["kernel"] == s.kernel.name and r.device == q.device.name)
      t = get_target(qi.arch)
      rsrc1 = t.gc.regCOMPUTE_PGM_RSRC1.encode(priv=1) if t.gen == 11 else 0
      prg = program(d, k["prog_addr"], rsrc1, t.gc.regCOMPUTE_PGM_RSRC2.encode(user_sgpr=2), 0, wave32=t.gen != 9)
      assert co.addr == k["code_addr"]
      tq.exec(prg, args_state(next(kargs).addr), s.grid or (1, 1, 1), s.block or (1, 1, 1))
  return tq, {v: v.replace(".", "_") for v in syms}

def symbolic_replay(img, p, qname):
  """tinygrad's queue for one of our queues, with tinygrad Variables for vars (and uint64 ones for rebound addresses,
  as HCQGraph's `inp_i`), kernel arguments bound through its args-state `bind_data`."""
  q = next(x for x in p.queues if x.name == qname)
  qi = img.queue(qname)
  d = StandinDevice(qi.arch, scratch_addr=0, tmpring_size=0)
  tq = compute_queue(d) if q.engine == "compute" else copy_queue(d)
  syms = {v: UOp.variable(v.replace(".", "_"), 0, 2**64 - 1 if v.endswith(".addr") else 2**31 - 1,
                          dtype=dtypes.uint64 if v.endswith(".addr") else dtypes.int32) for v in img.vars}
  def val(e): return e if isinstance(e, int) else e.offset if e.var is None else syms[e.var.name] + e.offset
  def addr(sl):
    a, size = img.buffers[sl.buffer.name]
    lo = sl.bounds(size)[0]
    return syms[f"{sl.buffer.name}.addr"] + lo if f"{sl.buffer.name}.addr" in syms else a + lo
  kargs = iter(r for r in img.regions if r.kind == "kernargs" and r.name.startswith(qname + "."))
  mems = {}   # kernarg address -> (ctypes buffer, size)
  for s in q.body:
    if isinstance(s, Epoch): s = Wait(Ref(f"{q.device.name}.timeline"), Expr(Ref(f"{q.device.name}.epoch"), -1))
    if isinstance(s, Wait): tq.wait(signal(img.signals[s.signal.name]), val(s.value))
    elif isinstance(s, SignalWrite): tq.signal(signal(img.signals[s.signal.name]), val(s.value))
    elif isinstance(s, Copy):
      n = s.dst.bounds(img.buffers[s.dst.buffer.name][1])
      tq.copy(buf(addr(s.dst)), buf(addr(s.src)), n[1] - n[0])
    elif isinstance(s, Exec):
      k = next(k for k in img.kernels if k["name"] == s.kernel.name)
      r = next(kargs)
      raw = (ctypes.c_uint8 * (r.size + 64))()
      mem = MMIOInterface(ctypes.addressof(raw), r.size + 64)
      bind = [((addr(a) if not isinstance(a, Expr) else val(a),), mem.view(offset=off), {"i32": "i", "u32": "I"}.get(mode, "Q"))
              for a, (mode, _, off) in zip(s.args, k["params"])]
      mems[r.addr] = (raw, r.size)
      t = get_target(qi.arch)
      rsrc1 = t.gc.regCOMPUTE_PGM_RSRC1.encode(priv=1) if t.gen == 11 else 0
      prg = program(d, k["prog_addr"], rsrc1, t.gc.regCOMPUTE_PGM_RSRC2.encode(user_sgpr=2), 0, wave32=t.gen != 9)
      st = types.SimpleNamespace(bind_data=bind, buf=buf(r.addr))
      tq.exec(prg, st, tuple(val(x) for x in (s.grid or (1, 1, 1))), tuple(val(x) for x in (s.block or (1, 1, 1))))
  return tq, {v: v.replace(".", "_") for v in syms}, mems
