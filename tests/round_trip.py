"""The round trip every image must survive: compile -> to_bytes -> from_bytes -> disasm -> lift -> compile gives the same
image; the lifted program checks as the original does (diagnostics keyed by what is on their line)."""
from __future__ import annotations
import pathlib, tempfile
from typing import Optional
import hcqdsl
from hcqdsl import parse
from hcqdsl.ir import Queue, Host
from hcqdsl.lang.format import format_program
from hcqdsl.vendors import compile_program, disasm_image
from hcqdsl.target.image import Image
from hcqdsl.amd.disasm import decoder
from hcqdsl.lift.image import lift_image, write_code_objects

def layout(img: Image) -> tuple:
  """All of an image but where its source was (file, statement lines and texts, the code objects' paths)."""
  kernels = [dict(k, impl=dict(k["impl"], amd_code=None) if k["impl"] else None) for k in img.kernels]
  return ([(q.name, q.engine, q.device, q.arch, q.addr, q.dwords, q.patches, q.mem_patches, [(s.offset, s.length) for s in q.stmts],
            q.launches)
           for q in img.queues], img.regions, img.data, kernels, img.var_values, img.rewrites, img.signals, img.buffers,
          img.vars, img.devices, [dict(h, line=0) for h in img.host], [dict(e, line=0) for e in img.expects], img.target)

def round_trip(prog, target: str = "gfx1100", where: Optional[pathlib.Path] = None) -> Image:
  """The whole pipeline on one program; the lifted program (and its code objects) are written to `where` (default: a
  temporary directory) and compiled from there, as a user would. Returns the image compiled from the lifted text."""
  if where is None:
    with tempfile.TemporaryDirectory() as d: return round_trip(prog, target, pathlib.Path(d))
  img = compile_program(prog, target)
  back = Image.from_bytes(img.to_bytes())
  assert back == img
  listing = disasm_image(back)
  for q in back.queues:   # compile emits only packets the decoder knows
    assert not [p for p in decoder(q.engine, q.arch).decode(q.dwords) if p.raw], q.name
  assert listing.count("\nqueue ") + listing.startswith("queue ") == len(back.queues)
  where.mkdir(parents=True, exist_ok=True)
  write_code_objects(back, where)
  text = format_program(lift_image(back))
  assert "cannot lift" not in text, text
  (where / "lifted.hcq").write_text(text)
  again = compile_program(parse(text, str(where / "lifted.hcq")), target)
  assert layout(again) == layout(img)
  return again

def keyed(prog) -> dict:
  """line -> what the statement or declaration on it is, independent of layout and names of lines."""
  keys = {}
  for n, d in enumerate(prog.decls):
    if isinstance(d, Queue):
      keys[d.span.line] = ("queue", d.name)
      for i, s in enumerate(d.body): keys[s.span.line] = ("stmt", d.name, i)
    elif isinstance(d, Host):   # (the host's statements counted over every host block)
      for s in d.body: keys[s.span.line] = ("host", sum(k[0] == "host" for k in keys.values()))
    else: keys[d.span.line] = (type(d).__name__, getattr(d, "name", n))
  return keys

def codes(prog, launches: int = 2) -> list:
  k = keyed(prog)
  return sorted((k.get(d.span.line if d.span else 0, ()), d.code, d.severity) for d in hcqdsl.check(prog, launches))

def image_round_trip(prog):
  """round_trip (compile, write, read, disasm, lift, compile: the same image), and the lifted program
  checks as the original does."""
  img = compile_program(prog)
  lifted = parse(format_program(lift_image(Image.from_bytes(img.to_bytes()))), "lifted.hcq")
  round_trip(prog)
  assert codes(lifted) == codes(prog)
  return lifted
