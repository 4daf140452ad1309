"""`hcqdsl lift` of whole NV images: compile -> write -> read -> lift_image -> format -> parse -> compile gives the same
image (dwords, patches, memory, regions) on every program of programs/ NV lowers, made NV under two architecture mixes
(and one mixing the vendors), and the lifted program checks as the original does; the CLI's lift of an NV image."""
from __future__ import annotations
import pathlib
import attrs, pytest
import hcqdsl
from hcqdsl import parse
from hcqdsl.ir import Device
from hcqdsl.target.image import Image
from hcqdsl.vendors import compile_program
from hcqdsl.lift.image import lift_image
from hcqdsl.lang.format import format_program
from hcqdsl.cli import main
from program_files import PROGRAMS, NOT_LOWERED
from nv_programs import NV_REFUSED, to_nv, layout
from round_trip import codes

NV_PROGRAMS = [p for p in PROGRAMS if pathlib.Path(p).stem not in NOT_LOWERED | set(NV_REFUSED)]
MIXES = [("sm_89", "sm_120"), ("sm_90", "sm_86"), ("sm_89", "gfx1100")]   # the last: NV and AMD devices in one program

def mixed(prog, archs):
  """Device i of archs[i % len(archs)], of that arch's vendor."""
  devs = iter(range(1 << 20))
  def pick(): return archs[next(devs) % len(archs)]
  return attrs.evolve(prog, decls=tuple(attrs.evolve(d, vendor=hcqdsl.ir.vendor_of(a), arch=a) if isinstance(d, Device) and (a := pick()) else d
                                        for d in prog.decls))

def nv_round_trip(p, mixed_vendors: bool = False):
  try: img = compile_program(p)
  except hcqdsl.HcqError:
    if mixed_vendors: return None   # a queue waiting on the other vendor's signal: an NV queue cannot address it
    raise
  text = format_program(lift_image(Image.from_bytes(img.to_bytes())))
  assert ": cannot lift (" not in text, text
  lifted = parse(text, "lifted.hcq")
  assert layout(compile_program(lifted)) == layout(img)
  return lifted

def test_every_nv_program_is_covered():
  assert len(NV_PROGRAMS) >= 50

@pytest.mark.parametrize("archs", MIXES, ids="+".join)
@pytest.mark.parametrize("path", NV_PROGRAMS, ids=lambda x: pathlib.Path(x).stem)
def test_nv_image_round_trip(path, archs):
  p = mixed(parse(pathlib.Path(path).read_text(), path), archs)
  lifted = nv_round_trip(p, "gfx1100" in archs)
  if archs == MIXES[0]: assert codes(lifted) == codes(p)

def test_nv_devices_are_declared_nv():
  p = to_nv(parse("device g = AMD:0\nsignal s on g\nqueue q compute on g {\n  signal s = 1\n}\n", "t.hcq"), ("sm_90",))
  text = format_program(lift_image(compile_program(p)))
  assert "device g = NV:0 sm_90\n" in text and "  signal s = 1\n" in text, text

def test_cli_lift_of_an_nv_image(tmp_path):
  src = pathlib.Path(__file__).resolve().parent.parent / "programs" / "run_pipeline.hcq"
  p = to_nv(parse(src.read_text(), str(src)), ("sm_89",))
  (tmp_path / "p.hcq").write_text(format_program(p))
  assert main(["compile", str(tmp_path / "p.hcq"), "-o", str(tmp_path / "p.hcqimg")]) == 0
  assert main(["lift", str(tmp_path / "p.hcqimg"), "-o", str(tmp_path / "l.hcq")]) == 0
  assert main(["compile", str(tmp_path / "l.hcq"), "-o", str(tmp_path / "l.hcqimg")]) == 0
  assert layout(Image.from_bytes((tmp_path / "l.hcqimg").read_bytes())) == layout(Image.from_bytes((tmp_path / "p.hcqimg").read_bytes()))
  r = hcqdsl.run(hcqdsl.parse_file(tmp_path / "l.hcq"), launches=2)
  assert r.ok, r.summary()
