"""`hcqdsl lift`: command buffers back to a whole, checkable .hcq program — from an image (`.hcqimg`: names, vars, host
steps and kernels from its metadata, lift/image.py) or from a manifest (JSON, lift/schema.py; docs/lift.md): a raw
dump (lift/raw.py) or a capture of tinygrad (lift/captured.py; NV: lift/nv_capture.py). Packets are decoded by hcqdsl.amd and turned into
statements by AMD's lifter's `lift_group` (amd/lift.py); what is no statement is kept as a comment with its dword offset."""
from __future__ import annotations
import os, pathlib
from typing import Optional
import attrs
from ..ir import Program
from ..target.image import Image, MAGIC
from .image import lift_image, write_code_objects
from .schema import (Manifest, MQueue, ManifestError, load_manifest, MANIFEST_KIND, MANIFEST_VERSION, READABLE_VERSIONS,
                     LAUNCH_VAR)
from .raw import lift_raw
from .captured import lift_capture, LIFT_RTOL, LIFT_ATOL, RunState
from . import nv_capture

__all__ = ["lift_manifest", "load_manifest", "lift_file", "Manifest", "MQueue", "ManifestError", "MANIFEST_KIND",
           "MANIFEST_VERSION", "READABLE_VERSIONS", "LAUNCH_VAR", "LIFT_RTOL", "LIFT_ATOL", "RunState"]

def lift_manifest(m: Manifest, code_dir=None, program_dir=None, trace: Optional[dict] = None, whole: bool = False,
                  folded_only: bool = False, run=None) -> Program:
  """A program from a manifest. A capture (version 2, host steps, no read pointers): every step tinygrad ran, its
  repeated launches folded (a var `launch` wherever a dword changes by one per launch), the steps before them as launch
  1 and after them as the last launch (`folded_only`: the repeated launches alone; `whole`: the run as it happened,
  every step in one launch; `trace` gets which capture steps each lifted queue and host statement stands for). With
  read pointers: the work still to do at the dump (signals start at the snapshot; what ran already is listed as
  comments; check with launches=1). Otherwise: every queue's whole stream, launches=1. `run`: the capture is a window
  of a longer run (sanitize's, lift/captured.py's RunState), lifted as the whole run's lift lifts those steps."""
  triage = any(q.read_ptr is not None for q in m.queues)
  if m.version >= 2 and m.host and not triage:
    if nv_capture.is_nv_capture(m):   # tinygrad's NV runtime
      return nv_capture.lift_nv_capture(m, code_dir, program_dir, trace, whole, folded_only, run)
    return lift_capture(m, code_dir, program_dir, trace, whole, folded_only, run)
  return lift_raw(m)

def lift_file(path, program_file: Optional[str] = None, code_dir=None, whole: bool = False, trace: Optional[dict] = None,
              folded_only: bool = False) -> Program:
  """Lift an image (`.hcqimg`, by its magic) or a manifest (JSON). Raises ValueError (ManifestError) on bad input.
  Code objects — an image's real ones, a capture's kernels — are written to `code_dir` (default: beside
  `program_file`, else beside the input) and referenced relative to the program file. A capture: every step (its
  repeated launches folded, lift_manifest); `whole`: as the run happened (every step, one launch; sanitize's
  reading); `folded_only`: its repeated launches alone; `trace` gets what the lift left out (`left_out`)."""
  p = pathlib.Path(path)
  try: b = p.read_bytes()
  except OSError as e: raise ManifestError(f"{p}: {e.strerror or e}") from None
  pdir = pathlib.Path(program_file).parent if program_file else p.parent
  cdir = pathlib.Path(code_dir) if code_dir is not None else pdir
  if b[:8] == MAGIC:
    try:
      img = Image.from_bytes(b)
      prog = lift_image(img, os.path.relpath(cdir, pdir))
    except ValueError as e: raise ManifestError(f"{p}: {e}") from None
    try: write_code_objects(img, cdir)
    except ValueError as e: raise ManifestError(str(e)) from None
  else: prog = lift_manifest(load_manifest(p), cdir, pdir, trace, whole, folded_only)
  return attrs.evolve(prog, file=program_file or prog.file)
