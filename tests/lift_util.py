"""A manifest (the raw-dump form `hcqdsl capture` writes) from a compiled image: what a recorder would have seen if
the image's launches had been submitted by a runtime — dwords only, no names."""
from __future__ import annotations
from hcqdsl.ir import U32_MAX
from hcqdsl import parse
from hcqdsl.target.image import Image
from hcqdsl.vendors import compile_program

def manifest_from_image(img: Image, launches: int = 2, params: bool = True, buffers: bool = True) -> dict:
  """Per launch: the host's steps with every queue's submission (queues no `submit` names go first, as the language
  says), each queue's dwords patched for that launch. Kernarg blocks go in `memory`; buffers and kernel parameter
  modes too unless turned off (a recorder on tinygrad knows the buffers, not the modes). Scalar parameters are left
  out: a raw lift recovers pointer arguments only."""
  streams = {q.name: [] for q in img.queues}
  host = []
  def submit(qn: str, k: int):
    q = img.queue(qn)
    dw = img.patched(q, img.env(k))
    host.append({"op": "submit", "queue": qn, "start": len(streams[qn]), "length": len(dw)})
    streams[qn] += dw
  for k in range(1, launches + 1):
    env = img.env(k)
    named = {n for h in img.host if h["op"] == "submit" for n in h["queues"]}
    bare = any(h["op"] == "submit" and not h["queues"] for h in img.host)
    done: set = set()
    if not bare or not img.host:
      for qn in [q.name for q in img.queues if q.name not in named]:
        submit(qn, k)
        done.add(qn)
    for h in img.host:
      if h["op"] == "submit":
        for qn in (h["queues"] or [q.name for q in img.queues]):
          if qn not in done:
            submit(qn, k)
            done.add(qn)
      elif h["op"] == "write": continue   # the host's store into memory: no ring dword, not in a version-1 manifest
      else:
        v = (env[h["var"]] if h["var"] else 0) + h["add"]
        if h["op"] == "signal" or v <= U32_MAX: v &= U32_MAX   # the host's waits compare 64 bits
        host.append({"op": h["op"], "addr": hex(h["addr"]), "value": v})
  devname = {d["name"]: d["name"] for d in img.devices}
  def region_dev(a): return next((r.device for r in img.regions if r.addr <= a < r.addr + max(r.size, 1)), None)
  m = {"format": "hcqdsl-manifest", "version": 1,
       "devices": [{"name": d["name"], "index": d["index"], "arch": d["arch"]} for d in img.devices],
       "queues": [{"name": q.name, "device": q.device, "target": q.arch, "engine": q.engine,
                   "dwords": " ".join(f"{x:08x}" for x in streams[q.name])} for q in img.queues],
       "signals": [{"addr": hex(a), "value": 0, **({"device": devname[region_dev(a)]} if region_dev(a) else {}),
                    **({"timeline": True} if n.endswith(".timeline") else {})}
                   for n, a in img.signals.items()],
       "memory": [{"addr": hex(r.addr), "hex": next(b for a, b in img.data if a == r.addr).hex()}
                  for r in img.regions if r.kind == "kernargs"],
       "host": host}
  for a, b in img.data:  # initial signal values
    for s in m["signals"]:
      if int(s["addr"], 16) == a and len(b) == 8: s["value"] = int.from_bytes(b, "little") & U32_MAX
  if buffers:
    m["buffers"] = [{"addr": hex(a), "size": n, **({"device": region_dev(a)} if region_dev(a) else {})} for a, n in img.buffers.values()]
  if params:
    m["kernels"] = [{"prog_addr": hex(k["prog_addr"]), "params": [p[0] for p in k["params"] if p[0] in ("in", "out", "inout")]} for k in img.kernels]
  return m

# two queues on one device waiting on each other: what a hang's dump looks like
HANG = """device gpu0 = AMD:0 gfx1100
signal a on gpu0
signal b on gpu0
queue q0 compute on gpu0 {
  wait a >= 1
  signal b = 26
  wait a >= 27
  signal b = 27
}
queue q1 copy on gpu0 {
  wait b >= 27
  signal a = 27
}
"""

def hang_manifest(q0_read=None, q1=True, a=26, b=26, **extra):
  img = compile_program(parse(HANG, "h.hcq"))
  q0, q1i = img.queues
  qs = [{"name": "q0", "device": "gpu0", "target": "gfx1100", "engine": "compute", "dwords": q0.dwords,
         "read_ptr": q0.stmts[2].offset if q0_read is None else q0_read}]
  if q1: qs.append({"name": "q1", "device": "gpu0", "target": "gfx1100", "engine": "copy",
                    "dwords": " ".join(f"{x:08x}" for x in q1i.dwords), "read_ptr": 0, "write_ptr": len(q1i.dwords)})
  return {"format": "hcqdsl-manifest", "version": 1, "queues": qs, **extra,
          "signals": [{"addr": hex(img.signals["a"]), "value": a}, {"addr": img.signals["b"], "value": b}]}
