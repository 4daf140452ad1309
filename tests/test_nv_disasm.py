"""NV images read back: compile -> to_bytes -> from_bytes -> disasm (every method known, every QMD listed) -> the queues
lifted from their methods and QMDs -> compile gives the same image, on every program of programs/ made NV and on the
symbolic program of test_nv_encode.py; the CLI's compile --hex and disasm on NV programs."""
from __future__ import annotations
import pathlib, re
import attrs, pytest
from hcqdsl import parse
from hcqdsl.ir import Queue, Timestamp
from hcqdsl.target.image import Image
from hcqdsl.vendors import compile_program, disasm_image
from hcqdsl.nv import pushbuf
from hcqdsl.nv.lift import lift_queue
from hcqdsl.cli import main
from program_files import PROGRAMS, NOT_LOWERED
from nv_programs import NV_REFUSED, SYMBOLIC, to_nv, layout

ROOT = pathlib.Path(__file__).resolve().parent.parent

def relift(p, img: Image, source_map: bool = True):
  """The program with each queue's body replaced by what its methods and QMDs lift to."""
  if not source_map: img = attrs.evolve(img, queues=[attrs.evolve(q, stmts=[]) for q in img.queues])
  bodies = {}
  for q in img.queues:
    stmts = lift_queue(img, q)
    assert not [s for s in stmts if isinstance(s, str)], (q.name, stmts)
    bodies[q.name] = tuple(stmts)
  return attrs.evolve(p, decls=tuple(attrs.evolve(d, body=bodies[d.name]) if isinstance(d, Queue) else d for d in p.decls))

def round_trip(p) -> int:
  img = compile_program(p)
  back = Image.from_bytes(img.to_bytes())
  assert back == img
  listing = disasm_image(back)
  assert "RAW" not in listing and "METHOD_0x" not in listing and listing.count("\nqueue ") + listing.startswith("queue ") == len(img.queues)
  for q in back.queues:
    assert not [x for x in pushbuf.decoder(q.arch).decode(q.dwords) if x.raw], q.name
    assert listing.count("QMD v") >= sum(1 for r in img.regions if r.kind == "kernargs")
  again = compile_program(relift(p, back))
  assert layout(again) == layout(img)
  # without the source map: the QMDs still say which statements they carry (a timestamp lifts as `signal s = 0`, the
  # same bytes on NV)
  bare = compile_program(relift(p, back, source_map=False))
  assert [(q.dwords, q.patches, q.mem_patches) for q in bare.queues] == [(q.dwords, q.patches, q.mem_patches) for q in img.queues]
  return len(img.queues)

@pytest.mark.parametrize("path", PROGRAMS, ids=lambda x: pathlib.Path(x).stem)
def test_programs_round_trip(path):
  name = pathlib.Path(path).stem
  if name in NOT_LOWERED or name in NV_REFUSED: return
  assert round_trip(to_nv(parse(pathlib.Path(path).read_text(), path), ("sm_89", "sm_120"))) >= 1

@pytest.mark.parametrize("archs", [("sm_89", "sm_120"), ("sm_90", "sm_86")], ids="+".join)
def test_symbolic_round_trip(archs):
  p = parse(SYMBOLIC.format(a0=archs[0], a1=archs[1]), "s.hcq")
  assert round_trip(p) == 3
  img = compile_program(p)
  c0 = lift_queue(img, img.queue("c0"))
  assert sum(isinstance(s, Timestamp) for s in c0) == 2   # the source map tells a timestamp from `signal s = 0`

def test_disasm_names_what_it_shows():
  p = parse(SYMBOLIC.format(a0="sm_89", a1="sm_120"), "s.hcq")
  text = disasm_image(compile_program(p))
  assert "sem_execute.operation              ACQ_CIRC_GEQ" in text and "(g0.timeline)" in text
  assert re.search(r"qmd_addr +0x[0-9a-f]+ \(c0\.kernargs\.1\+0x200\)", text)
  assert "release 0" in text and "then launch QMD" in text and "patched per launch = n" in text
  assert "program                            " in text and "(put.code@g0)" in text

def test_cli_compile_hex_and_disasm(tmp_path, capsys):
  src = tmp_path / "n.hcq"
  src.write_text(SYMBOLIC.format(a0="sm_89", a1="sm_120"))
  assert main(["compile", str(src), "--hex"]) == 0
  hexed = capsys.readouterr().out
  assert hexed.startswith("queue c0 compute sm_89: ")
  (tmp_path / "n.hex").write_text(hexed)
  assert main(["disasm", str(tmp_path / "n.hex")]) == 0
  out = capsys.readouterr().out
  assert "queue x0 copy (sm_89, nv)" in out and "OFFSET_IN_UPPER..OFFSET_OUT_LOWER" in out
  assert main(["compile", str(src), "-o", str(tmp_path / "n.hcqimg")]) == 0
  capsys.readouterr()
  assert main(["disasm", str(tmp_path / "n.hcqimg")]) == 0
  assert "(sm_120, nv)" in capsys.readouterr().out
  assert main(["disasm", "--as-hcq", str(tmp_path / "n.hcqimg")]) == 0
  lifted = capsys.readouterr().out
  assert "exec put(cache[16:], x[64:], pos, n - 1) grid (pos + 1, 2, n) block (32, 3, 1)" in lifted and "timestamp hs" in lifted
  (tmp_path / "raw.hex").write_text(hexed.splitlines()[0].split(":", 1)[1])
  assert main(["disasm", "--engine", "nv", str(tmp_path / "raw.hex")]) == 0
  assert "SEND_PCAS_A" in capsys.readouterr().out

def test_compile_target_picks_the_vendor(tmp_path):
  p = parse("device g = NV:0\ndevice h = AMD:1\nqueue q compute on g {\n  barrier\n}\nqueue r compute on h {\n  barrier\n}\n", "t.hcq")
  img = compile_program(p, "sm_120")
  assert (img.queue("q").arch, img.queue("r").arch) == ("sm_120", "gfx1100")
  img = compile_program(p, "gfx942")
  assert (img.queue("q").arch, img.queue("r").arch) == ("sm_89", "gfx942")
  assert img.queue("q").packet_format == "nv" and img.queue("r").packet_format == "pm4"
