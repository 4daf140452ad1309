"""Apply a unified diff of tinygrad's source (docs/findings/*.patch) to the tinygrad this process imported, in memory:
no file is written. Each hunk is applied to the module's source text; every function or method whose text the patch
changes (or adds) is compiled from the patched text and installed on the live module or class, so the code that runs
is exactly the patch's. Only function and method definitions may change (the fixes of tinygrad/engine/jit.py,
tinygrad/runtime/graph/hcq.py and tinygrad/runtime/support/hcq2.py do); anything else raises. A method wrapped by a
recorder (a function with `__wrapped__` holding the method in its closure, as `hcqdsl capture` installs) keeps its
wrapper around the patched one.

  apply("docs/findings/stale-jit-copy.patch")            # patches the files whose modules can be imported here
  python tests/upstream/tinygrad_patch.py --check P...    # does each patch apply to the installed tinygrad's files?

A tinygrad developer applies the same file with `git apply` (or `patch -p1`) in a tinygrad checkout."""
from __future__ import annotations
import ast, importlib, pathlib, re, sys, textwrap, types

def parse(text: str) -> dict[str, list[tuple[list[str], list[str]]]]:
  """{path: [(old lines, new lines) per hunk]} of a unified diff (paths without their a/ b/ prefix)."""
  files: dict[str, list[tuple[list[str], list[str]]]] = {}
  path, hunk = None, None
  for line in text.splitlines():
    if line.startswith("+++ "):
      path = re.sub(r"^b/", "", line[4:].split("\t")[0].strip())
      files[path], hunk = [], None
    elif line.startswith("--- ") or path is None: hunk = None
    elif line.startswith("@@"):
      hunk = ([], [])
      files[path].append(hunk)
    elif hunk is not None and line[:1] in (" ", "-", "+", ""):
      tag, body = (line[:1] or " "), line[1:]
      if tag != "+": hunk[0].append(body)
      if tag != "-": hunk[1].append(body)
  return files

def patch_text(src: str, hunks: list[tuple[list[str], list[str]]], path: str = "") -> str:
  """src with each hunk's old lines (found exactly once, anywhere: line offsets do not matter) replaced by its new ones."""
  lines = src.splitlines()
  for old, new in hunks:
    at = [i for i in range(len(lines) - len(old) + 1) if lines[i:i + len(old)] == old]
    if len(at) != 1: raise ValueError(f"{path}: a hunk's {len(old)} old lines match {len(at)} places, not one:\n" + "\n".join(old))
    lines[at[0]:at[0] + len(old)] = new
  return "\n".join(lines) + "\n"

def module_name(path: str) -> str: return path[:-3].replace("/", ".")

def installed_file(path: str) -> pathlib.Path:
  import tinygrad
  return pathlib.Path(tinygrad.__file__).parent.parent / path

def _defs(tree: ast.Module):
  """{(class name or None, def name): node} of the module's top-level functions and its classes' methods."""
  out = {}
  for node in tree.body:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)): out[(None, node.name)] = node
    elif isinstance(node, ast.ClassDef):
      for sub in node.body:
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)): out[(node.name, sub.name)] = sub
  return out

def _text(lines: list[str], node) -> str:
  first = min([node.lineno] + [d.lineno for d in node.decorator_list])
  return "\n".join(lines[first - 1:node.end_lineno])

def _rest(tree: ast.Module) -> str:
  """The module with every function body dropped: what must not change."""
  class Strip(ast.NodeTransformer):
    def visit_FunctionDef(self, node): return None
    visit_AsyncFunctionDef = visit_FunctionDef
  return ast.dump(Strip().visit(tree))

def _holds(cell, x) -> bool:
  try: return cell.cell_contents is x
  except ValueError: return False   # an empty cell

def install(module: types.ModuleType, old_src: str, new_src: str) -> list[str]:
  """Install every def new_src changes or adds on the live module (its classes' methods on the live classes)."""
  old_tree, new_tree = ast.parse(old_src), ast.parse(new_src)
  if _rest(ast.parse(old_src)) != _rest(ast.parse(new_src)):
    raise NotImplementedError(f"{module.__name__}: the patch changes more than function definitions")
  old_lines, new_lines, old_defs = old_src.splitlines(), new_src.splitlines(), _defs(old_tree)
  done = []
  for (cls_name, name), node in _defs(new_tree).items():
    if (prev := old_defs.get((cls_name, name))) is not None and _text(old_lines, prev) == _text(new_lines, node): continue
    text = _text(new_lines, node)
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    # compiled at its line in the patched file (tracebacks point there), in a class body when it is a method (super())
    src = "\n" * (first - 2) + "class _Patched:\n" + textwrap.indent(textwrap.dedent(text), "  ") if cls_name else "\n" * (first - 1) + text
    ns: dict = {}
    exec(compile(src, f"{module.__file__} (patched)", "exec"), module.__dict__, ns)
    if cls_name is None:
      setattr(module, name, ns[name])
    else:
      cls, obj = getattr(module, cls_name), ns["_Patched"].__dict__[name]
      fn = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
      if not isinstance(fn, types.FunctionType): raise NotImplementedError(f"{cls_name}.{name}: a decorated method")
      cells = tuple(types.CellType(cls) if v == "__class__" else c for v, c in zip(fn.__code__.co_freevars, fn.__closure__ or ()))
      new = types.FunctionType(fn.__code__, module.__dict__, fn.__name__, fn.__defaults__, cells or None)
      new.__kwdefaults__, new.__qualname__ = fn.__kwdefaults__, f"{cls_name}.{name}"
      new = type(obj)(new) if obj is not fn else new
      live = cls.__dict__.get(name)
      inner = getattr(live, "__wrapped__", None)
      if inner is not None and (cell := next((c for c in getattr(live, "__closure__", None) or () if _holds(c, inner)), None)) is not None:
        cell.cell_contents = live.__wrapped__ = new   # a recording wrapper (hcqdsl capture's) keeps wrapping the patched method
      else: setattr(cls, name, new)
    done.append(f"{module.__name__}.{cls_name + '.' if cls_name else ''}{name}")
  return done

def apply(patch: str | pathlib.Path, only: tuple[str, ...] = ("tinygrad/engine/jit.py", "tinygrad/runtime/graph/hcq.py",
                                                              "tinygrad/runtime/support/hcq2.py")) -> list[str]:
  """Apply a patch file's hunks for the files in `only` (the others, e.g. graph/cuda.py, need their device's libraries
  to import) to the imported tinygrad. Returns the defs installed."""
  done = []
  for path, hunks in parse(pathlib.Path(patch).read_text()).items():
    if path not in only: continue
    module = importlib.import_module(module_name(path))
    old = _applied.get(path) or pathlib.Path(module.__file__).read_text()
    done += install(module, old, new := patch_text(old, hunks, path))
    _applied[path] = new
  return done

_applied: dict[str, str] = {}   # path -> its source with the patches applied so far (patches apply on top of each other)

def check(patch: str | pathlib.Path) -> list[str]:
  """Apply a patch's hunks to the installed tinygrad's files as text (nothing is imported or written); returns the files."""
  files = parse(pathlib.Path(patch).read_text())
  for path, hunks in files.items():
    new = patch_text(installed_file(path).read_text(), hunks, path)
    compile(new, path, "exec")
  return list(files)

if __name__ == "__main__":
  if sys.argv[1:2] != ["--check"] or len(sys.argv) < 3: sys.exit("usage: tinygrad_patch.py --check PATCH...")
  for p in sys.argv[2:]: print(f"{p}: applies to {', '.join(check(p))}")
