"""Hostile manifests and images (issue 37 item 5, the format causes): each refused with one clear error naming the
file and the field, never a traceback or a program that does not check. One exact-message test per cause."""
import json
import pytest
from cli_run import cli, ROOT
from fuzz import nv_images, nv_manifest, edit_metadata

@pytest.fixture(scope="module")
def nv_image():
  return next(img for img in nv_images() if img.kernels and any(k["params"] for k in img.kernels))

@pytest.mark.parametrize("field", ["bytes", "extent"])
@pytest.mark.parametrize("bad,shown", [('"4"', '"4"'), ("-4", "-4"), ("1.5", "1.5"), ("NaN", "NaN"), ("1e400", "Infinity"),
                                       ("8589934604", "8589934604")],
                         ids=["string", "negative", "fractional", "nan", "infinity", "past-32-bits"])
def test_signature_bytes_that_are_no_byte_count(field, bad, shown, nv_image, tmp_path):
  """A capture's `kernels[].params[].bytes` lays out the kernel arguments, its `extent` bounds what the kernel reads:
  a string was a TypeError, a negative, fractional or NaN count a lifted program with syntax errors (an extent past 32
  bits is what tinygrad's vmax of an unbounded index gave: the capture no longer records it, a manifest may)."""
  m = nv_manifest(nv_image)
  m["kernels"][0]["params"][0][field] = "@BAD@"
  (tmp_path / "m.json").write_text(json.dumps(m).replace('"@BAD@"', bad))
  rc, out, err = cli("lift", str(tmp_path / "m.json"), "-o", str(tmp_path / "m.hcq"))
  assert (rc, out, err) == (1, "", f"hcqdsl: error: {tmp_path / 'm.json'}: kernels[0].params[0].{field}: expected null or an integer "
                                   f"in 0..4294967295, got {shown}\n")

def test_nv_raw_dump_is_refused_naming_the_field(nv_image, tmp_path):
  """An NV manifest without a capture's host steps was lifted as `AMD:0 sm_89`, then refused with `unknown AMD target
  'sm_89'`, naming neither file nor field."""
  m = nv_manifest(nv_image)
  del m["host"]
  (tmp_path / "m.json").write_text(json.dumps(m))
  rc, out, err = cli("lift", str(tmp_path / "m.json"))
  assert (rc, out, err) == (1, "", f"hcqdsl: error: {tmp_path / 'm.json'}: queues[0].target: `sm_89` is an NV arch, and a manifest "
                                   "without a capture's host steps (or with read pointers) is a raw dump of AMD's PM4/SDMA rings; an "
                                   "NV queue is lifted from its image (`hcqdsl lift P.hcqimg`) or from a capture of tinygrad's NV "
                                   "runtime (`hcqdsl capture`)\n")

def test_nv_capture_lifts_as_nv(nv_image, tmp_path):
  (tmp_path / "m.json").write_text(json.dumps(nv_manifest(nv_image)))
  rc, out, err = cli("lift", str(tmp_path / "m.json"), "-o", str(tmp_path / "m.hcq"))
  assert rc == 0 and "device gpu0 = NV:0 sm_89" in (tmp_path / "m.hcq").read_text(), err
  assert cli("check", str(tmp_path / "m.hcq"), "--launches", "1")[0] == 0

@pytest.mark.parametrize("vendor", ["AMD", "NV"])
def test_emptied_kernel_params_are_refused(vendor, nv_image, tmp_path):
  """An image whose `kernels[].params` were emptied lifted to execs whose arguments its kernels do not take (arity
  errors in check): the image is refused, naming both fields."""
  from hcqdsl import parse
  from hcqdsl.vendors import compile_program
  img = nv_image if vendor == "NV" else compile_program(parse(open(ROOT / "programs" / "spec_example.hcq").read(), "spec_example.hcq"))
  def empty(m):
    m["kernels"][0]["params"] = []
    return m
  (tmp_path / "p.hcqimg").write_bytes(edit_metadata(img.to_bytes(), empty))
  k = img.kernels[0]
  r = next(i for i, r in enumerate(img.regions) if r.kind == "kernargs" and r.meta.get("kernel") == k["name"] and r.device == k["device"])
  n = len(img.regions[r].meta["args"])
  for cmd, code in (("lift", 1), ("disasm", 2)):   # (each command's exit code for an input it cannot read)
    rc, out, err = cli(cmd, str(tmp_path / "p.hcqimg"))
    assert (rc, out, err) == (code, "", f"hcqdsl: error: {tmp_path / 'p.hcqimg'}: corrupt image metadata: kernels[0].params holds 0 "
                                     f"parameters of `{k['name']}`, but regions[{r}].meta.args (the kernel arguments of its exec "
                                     f"`{img.regions[r].name}`) holds {n}\n"), cmd
