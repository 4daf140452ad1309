"""hcqdsl/vendors.py: the API picks the vendor from the program's (or image's) devices, queue by queue, and does what
the CLI does on both vendors — compile, disasm, lift, run with a `--target` of either."""
import pathlib
import pytest
import hcqdsl
from hcqdsl.cli import main
from hcqdsl.vendors import BACKENDS, disasm_dwords
from hcqdsl.ir import VENDORS

ROOT = pathlib.Path(__file__).resolve().parent.parent
NV_PIPELINE = (ROOT / "programs" / "run_pipeline.hcq").read_text().replace("AMD:0 gfx1100", "NV:0")   # no arch: --target's

MIXED = """device g = NV:0
device h = AMD:1 gfx942
buffer a on g size 16
buffer r on host size 16
signal filled on host
kernel fill(out dst) = builtin iota<f32>(1)
queue n compute on g {
  exec fill(a)
  signal filled = 1
}
queue m copy on h {
  wait filled >= 1
  copy r <- a
}
host {
  submit n, m
}
expect r == f32 [1.0, 2.0, 3.0, 4.0]
"""

def test_every_vendor_has_a_backend():
  assert set(BACKENDS) == set(VENDORS)

@pytest.mark.parametrize("target", ["sm_89", "sm_120"])
def test_api_on_an_nv_program_is_the_cli(tmp_path, capsys, target):
  src = tmp_path / "nv.hcq"
  src.write_text(NV_PIPELINE)
  img = hcqdsl.compile_program(hcqdsl.parse(NV_PIPELINE, str(src)), target)
  assert {q.arch for q in img.queues} == {target} and {q.packet_format for q in img.queues} == {"nv"}
  assert main(["compile", str(src), "--target", target, "-o", str(tmp_path / "nv.hcqimg")]) == 0
  assert (tmp_path / "nv.hcqimg").read_bytes() == img.to_bytes()
  capsys.readouterr()
  for flags, api in (([], hcqdsl.disasm_image), (["--as-hcq"], hcqdsl.as_hcq)):
    assert main(["disasm", *flags, str(tmp_path / "nv.hcqimg")]) == 0
    assert capsys.readouterr().out == api(img)
  assert "SEND_PCAS_A" in hcqdsl.disasm_image(img) and "QMD v" in hcqdsl.disasm_image(img)
  assert main(["lift", str(tmp_path / "nv.hcqimg")]) == 0
  assert capsys.readouterr().out == hcqdsl.format(hcqdsl.lift_image(img))

def test_run_target_of_either_vendor(tmp_path, capsys):
  src = tmp_path / "nv.hcq"
  src.write_text(NV_PIPELINE)
  for target in ("sm_89", "sm_90"):
    assert main(["run", str(src), "--target", target, "--launches", "2", "--no-check"]) == 0, capsys.readouterr()
    assert "SEND_PCAS_A" in capsys.readouterr().out
    res = hcqdsl.run(hcqdsl.parse(NV_PIPELINE), launches=2, target=target)
    assert res.ok and all(e.ok for e in res.expects) and res.expects
  # an AMD target leaves an NV device at NV's default arch (and an AMD device takes it)
  assert {q.arch for q in hcqdsl.compile_program(hcqdsl.parse(NV_PIPELINE), "gfx942").queues} == {"sm_89"}

def test_mixed_program_lowers_each_queue_by_its_vendor():
  prog = hcqdsl.parse(MIXED, "mixed.hcq")
  assert not [d for d in hcqdsl.check(prog, launches=1) if d.severity == "error"]
  img = hcqdsl.compile_program(prog, "sm_120")
  assert [(q.name, q.arch, q.packet_format) for q in img.queues] == [("n", "sm_120", "nv"), ("m", "gfx942", "sdma")]
  listing = hcqdsl.disasm_image(img)
  assert "SEND_PCAS_A" in listing and "COPY_LINEAR" in listing and "POLL_REGMEM" in listing
  lifted = hcqdsl.as_hcq(img)
  assert "  exec fill(a)\n  signal filled = 1\n" in lifted and "  wait filled >= 1\n  copy r <- a\n" in lifted
  again = hcqdsl.compile_program(hcqdsl.lift_image(img), "sm_120")
  assert [(q.dwords, q.patches, q.mem_patches) for q in again.queues] == [(q.dwords, q.patches, q.mem_patches) for q in img.queues]
  assert (again.regions, again.data) == (img.regions, img.data)
  res = hcqdsl.run(prog, target="sm_120")
  assert res.ok and [e.ok for e in res.expects] == [True]

def test_disasm_dwords_by_the_arch_vendor():
  img = hcqdsl.compile_program(hcqdsl.parse(MIXED, "mixed.hcq"))
  n, m = img.queue("n"), img.queue("m")
  assert "SEND_PCAS_A" in disasm_dwords(n.dwords, n.engine, n.arch)
  assert "COPY_LINEAR" in disasm_dwords(m.dwords, m.engine, m.arch)
