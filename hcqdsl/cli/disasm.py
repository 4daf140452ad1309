"""`hcqdsl disasm FILE`: packets of an image, `compile --hex` output or raw dwords."""
from __future__ import annotations
import sys
from ..ir import TARGETS, NV_ARCHS, DEFAULT_ARCHS
from ..target.image import Image, MAGIC, packet_format
from ..amd.disasm import read_raw, RawError
from ..vendors import disasm_image, disasm_dwords
from ..lift.image import as_hcq
from .util import read_bytes, UsageError


def add_args(p) -> None:
  p.add_argument("file", help="an image (.hcqimg), `compile --hex` output, or raw dwords (hex text, or little-endian binary)")
  p.add_argument("--as-hcq", action="store_true", help="print .hcq queue statements instead of packets (images only)")
  p.add_argument("--engine", choices=("pm4", "sdma", "compute", "copy", "nv"),
                 help="packet format of raw input (`compile --hex` lines name their own; nv: NV pushbuffer methods)")
  p.add_argument("--target", choices=TARGETS, help="arch of raw input (default: the one a `compile --hex` line names, else gfx1100)")

def run(a) -> int:
  try: b = read_bytes(a.file)   # (a missing file, a directory or a device like /dev/zero, whose read never ends)
  except UsageError as e:
    sys.stderr.write(f"hcqdsl: error: {e}\n")
    return 2
  if b[:8] == MAGIC:
    try: img = Image.from_bytes(b)
    except ValueError as e:   # an unusable input file: one line, exit 2
      sys.stderr.write(f"hcqdsl: error: {a.file}: {e}\n")
      return 2
    sys.stdout.write(as_hcq(img) if a.as_hcq else disasm_image(img))
    return 0
  if a.as_hcq:
    sys.stderr.write("hcqdsl: error: --as-hcq needs an image (raw dwords carry no signal or buffer names)\n")
    return 2
  try: queues = read_raw(b)
  except RawError as e:   # an unusable input file: one line (at the word's line and column), exit 2
    sys.stderr.write(f"hcqdsl: error: {a.file}:{'' if e.line is not None else ' '}{e}\n")
    return 2
  engine = {"pm4": "compute", "sdma": "copy"}.get(a.engine, a.engine)
  if engine == "nv" and (a.target or DEFAULT_ARCHS["NV"]) not in NV_ARCHS:
    sys.stderr.write(f"hcqdsl: error: --engine nv takes an NV --target ({', '.join(NV_ARCHS)}), not {a.target}\n")
    return 2
  if engine is None and any(q[1] is None for q in queues):
    sys.stderr.write(f"hcqdsl: error: {a.file} is not an image nor `compile --hex` output; give --engine pm4|sdma "
                     f"(and --target) for raw dwords\n")
    return 2
  for name, eng, arch, dw in queues:
    eng, arch = engine or eng, a.target or arch or DEFAULT_ARCHS["NV" if engine == "nv" else "AMD"]
    if name is not None: sys.stdout.write(f"queue {name} {eng} ({arch}, {packet_format(eng, arch)}): {len(dw)} dwords\n")
    sys.stdout.write(disasm_dwords(dw, eng, arch))
  return 0
