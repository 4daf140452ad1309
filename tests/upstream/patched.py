"""Run a standalone tinygrad test file (tests/upstream/test_*.py) with patches of tinygrad applied in memory first.

  python tests/upstream/patched.py [--patch docs/findings/X.patch]... tests/upstream/test_Y.py [unittest args]

Without --patch this is `python -m unittest` of the file on tinygrad as installed. The test files need only tinygrad;
tinygrad_patch.py (beside this file) applies each patch to the imported tinygrad (a tinygrad developer applies it with
`git apply` instead)."""
import importlib.util, pathlib, sys, unittest

def main(argv: list[str]) -> int:
  patches = []
  while argv[:1] == ["--patch"]:
    patches.append(argv[1])
    argv = argv[2:]
  if not argv: sys.exit(__doc__)
  here = pathlib.Path(__file__).resolve().parent
  sys.path.insert(0, str(here))
  import tinygrad_patch
  for p in patches: print(f"patched {p}: {', '.join(tinygrad_patch.apply(p))}", file=sys.stderr)
  path = pathlib.Path(argv[0]).resolve()
  spec = importlib.util.spec_from_file_location(path.stem, path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[path.stem] = module
  spec.loader.exec_module(module)
  prog = unittest.main(module=module, argv=[str(path), *argv[1:]], exit=False)
  return 0 if prog.result.wasSuccessful() else 1

if __name__ == "__main__": sys.exit(main(sys.argv[1:]))
