"""The emulator's NV engine against tinygrad's mock NV executor (test/mockgpu/nv/nvgpu.py, tests/nv_mock.py): the same
image, run by both, ends with the same signal values and buffer bytes — every race-free program of programs/ that NV
lowers, on the QMD-version-3 architectures the mock decodes (its QMD struct is NVC6C0_QMDV03_00), with kernels made
implementation-less (the mock runs none without gpuocelot)."""
from __future__ import annotations
import pathlib
import attrs, pytest
from hcqdsl import parse
from hcqdsl.ir import Kernel
from hcqdsl.runtime import run
from hcqdsl.vendors import compile_program
from mock_gpu import needs_mock
from nv_mock import run_on_mock
from hcqdsl.header import read_header as header
from program_files import PROGRAMS, NOT_LOWERED, markers
from nv_programs import NV_REFUSED, QMD_CHAIN, to_nv

pytestmark = needs_mock

def no_impls(p):
  return attrs.evolve(p, decls=tuple(attrs.evolve(d, impl=None) if isinstance(d, Kernel) else d for d in p.decls))

CLEAN = [p for p in PROGRAMS if pathlib.Path(p).stem not in NOT_LOWERED | set(NV_REFUSED) and not markers(pathlib.Path(p).read_text())]

def agree(p, launches: int) -> bool:
  """Both executors on p's image; returns whether they hung (after asserting they agree)."""
  img = compile_program(p)
  ours, theirs = run(p, launches=launches), run_on_mock(img, launches)
  assert (ours.hang is not None or ours.fault is not None) == theirs.hang, (ours.summary(), theirs)
  if not theirs.hang:
    assert ours.signals == theirs.signals
    assert {b: ours.memory[b] for b in ours.memory} == theirs.memory
  return theirs.hang

@pytest.mark.parametrize("archs", [("sm_89",), ("sm_86", "sm_90")], ids="+".join)
@pytest.mark.parametrize("path", CLEAN, ids=lambda x: pathlib.Path(x).stem)
def test_emulator_agrees_with_tinygrads_mock(path, archs):
  text = pathlib.Path(path).read_text()
  p = no_impls(to_nv(parse(text, path), archs))
  listed = p.listed_launches
  assert not agree(p, min(header(text).get("launches", 2) + 1, listed[0] if listed else 99))

def test_qmd_chain_agrees():
  """QMD releases (two, then methods), a dependent launch, a timestamp's 0, a one-bit poll released by a write."""
  assert not agree(no_impls(parse(QMD_CHAIN, "q.hcq")), 3)

def test_both_hang_on_a_deadlock():
  src = QMD_CHAIN.replace("  poll flag[0:4] & 0x80 == 0x80\n", "  poll flag[0:4] & 0x100 == 0x100\n")
  assert agree(no_impls(parse(src, "q.hcq")), 1)

def test_programs_compared():
  assert len(CLEAN) >= 25
