"""shapes.py on tinygrad's own packets (the stand-in device's SDMA queue): a submission that differs from its shape only
at sites is read by them, and the facts of an address seen a few submissions ago are the same object again (what the
sanitizer's capture and canon.py key their reuse on: an HCQGraph replay's inputs alternate between two buffers)."""
import numpy as np
from amd_standin import StandinDevice, copy_queue, signal, buf
from hcqdsl.tinygrad.shapes import Shapes, VARIANTS

DEV = StandinDevice("gfx1100")

def copy_words(src: int, value: int = 4) -> np.ndarray:
  q = copy_queue(DEV).wait(signal(0x5000), value - 1).copy(buf(0x900000), buf(src), 256).signal(signal(0x5000), value)
  return np.asarray(q._q, dtype=np.uint32)

def test_alternating_addresses_give_the_same_facts_object():
  sh = Shapes(lambda addr, n: None)
  subs = [sh.submission("copy0_gpu0", "copy", "gfx1100", copy_words(src, 4 + i))
          for i, src in enumerate([0x100000, 0x200000, 0x100000, 0x200000, 0x300000])]
  shapes = {s.id for _, s, _ in subs}
  assert len(shapes) == 1 and (sh.hits, sh.misses) == (4, 1)
  facts = [f for _, _, f in subs]
  assert facts[0] is facts[2] and facts[1] is facts[3]
  assert facts[0] is not facts[1] and facts[4] not in (facts[0], facts[1])
  assert [(f.kind, f.addr) for _, f in facts[4]] == [("signal", 0x5000), ("use", 0x300000), ("use", 0x900000), ("copy", 0x300000),
                                                     ("signal", 0x5000)]
  assert [(f.kind, f.addr) for _, f in facts[1]][1] == ("use", 0x200000)

def test_the_variants_kept_are_bounded():
  sh = Shapes(lambda addr, n: None)
  first = sh.submission("copy0_gpu0", "copy", "gfx1100", copy_words(0x100000))[1]
  for i in range(3 * VARIANTS): sh.submission("copy0_gpu0", "copy", "gfx1100", copy_words(0x200000 + 0x1000 * i))
  assert len(first.variants) == VARIANTS
  again = sh.submission("copy0_gpu0", "copy", "gfx1100", copy_words(0x100000))[2]   # forgotten: read again, still right
  assert [(f.kind, f.addr) for _, f in again][1] == ("use", 0x100000)
