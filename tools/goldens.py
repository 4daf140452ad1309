"""Goldens for a refactor that must change nothing users see: write every observable output of the toolchain over
every program of programs/ into a folder, run it again after the change, and `diff -r` the two folders.

    python tools/goldens.py /tmp/before            # on the old tree
    python tools/goldens.py /tmp/after             # on the new tree
    diff -r /tmp/before /tmp/after && echo identical

What it writes (one file per program and output, so a difference names its program):
- check/NAME.L{1,2,3}.json: `check --format json` of the program at 1-3 launches;
- compile/NAME.ARCH.txt: for every AMD and NV arch (every device rewritten to it, and NV's two-arch mix), the image's
  sha256, its disassembly and its lift (`as_hcq`), or the error the compiler raised;
- isa/rdna3_c.txt: the C the RDNA3 translator writes for every opcode with pseudocode (or why it cannot);
- lift/MANIFEST.{default,folded,whole}.hcq: with `--captures DIR`, the lifts of every capture manifest (*.json) in DIR
  (the default lift: every step; `--folded-only`; `--whole`).
"""
from __future__ import annotations
import argparse, hashlib, pathlib, sys
import attrs

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hcqdsl import render_json, check_text, HcqError  # noqa: E402
from hcqdsl.check import parse_syntax  # noqa: E402
from hcqdsl.ir import Device, AMD_ARCHS, NV_ARCHS  # noqa: E402


def with_arch(prog, vendor: str, archs: tuple):
  """prog with device i a `vendor` device of archs[i % len(archs)]."""
  devs = [d for d in prog.decls if isinstance(d, Device)]
  arch = {d.name: archs[i % len(archs)] for i, d in enumerate(devs)}
  return attrs.evolve(prog, decls=tuple(attrs.evolve(d, vendor=vendor, arch=arch[d.name]) if isinstance(d, Device) else d
                                        for d in prog.decls))

def _compiled(prog) -> str:
  from hcqdsl import compile_program, disasm_image, as_hcq
  try: img = compile_program(prog)
  except (HcqError, ValueError) as e: return f"error: {type(e).__name__}: {e}\n"
  out = [f"sha256 {hashlib.sha256(img.to_bytes()).hexdigest()}", disasm_image(img)]
  try: out.append(as_hcq(img))
  except Exception as e: out.append(f"lift error: {type(e).__name__}: {e}")  # noqa: BLE001  (recorded, compared)
  return "\n".join(out) + "\n"

def programs(out: pathlib.Path) -> None:
  for path in sorted((ROOT / "programs").glob("*.hcq")):
    text = path.read_text()
    for n in (1, 2, 3):
      (out / "check" / f"{path.stem}.L{n}.json").write_text(render_json(check_text(text, path.name, launches=n)) + "\n")
    prog = parse_syntax(text, path.name)[0]
    if prog is None: continue
    variants = [("AMD", (a,)) for a in AMD_ARCHS] + [("NV", (a,)) for a in NV_ARCHS] + [("NV", ("sm_89", "sm_120"))]
    for vendor, archs in variants:
      (out / "compile" / f"{path.stem}.{'+'.join(archs)}.txt").write_text(_compiled(with_arch(prog, vendor, archs)))

def isa(out: pathlib.Path) -> None:
  from hcqdsl.runtime.isa import native
  from hcqdsl.runtime.isa.gfx11 import pcode_table
  lines = []
  for op in sorted(pcode_table("rdna3"), key=lambda o: (type(o).__name__, o.value)):
    t = native._translation(op)  # noqa: SLF001  (the translation itself is what is compared)
    lines.append(f"// {type(op).__name__}.{op.name}\n" + (f"// unsupported: {t}" if isinstance(t, Exception) else t.source))
  (out / "isa" / "rdna3_c.txt").write_text("\n".join(lines) + "\n")

def lifts(out: pathlib.Path, captures: pathlib.Path) -> None:
  from hcqdsl import format as fmt
  from hcqdsl.lift.manifest import lift_file
  for m in sorted(captures.glob("*.json")):
    for mode, kw in (("default", {}), ("folded", {"folded_only": True}), ("whole", {"whole": True})):
      try: text = fmt(lift_file(str(m), **kw))
      except Exception as e: text = f"error: {type(e).__name__}: {e}\n"  # noqa: BLE001  (recorded, compared)
      (out / "lift" / f"{m.stem}.{mode}.hcq").write_text(text)

def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("out", help="folder to write the goldens into (created)")
  ap.add_argument("--captures", metavar="DIR", help="also lift every capture manifest (*.json) in DIR")
  ap.add_argument("--skip-isa", action="store_true", help="leave out the RDNA3 translation (slow)")
  a = ap.parse_args()
  out = pathlib.Path(a.out)
  for sub in ("check", "compile", "isa", "lift"): (out / sub).mkdir(parents=True, exist_ok=True)
  programs(out)
  if not a.skip_isa: isa(out)
  if a.captures: lifts(out, pathlib.Path(a.captures))
  print(f"goldens in {out}: {sum(1 for p in out.rglob('*') if p.is_file())} files")
  return 0

if __name__ == "__main__":
  sys.exit(main())
