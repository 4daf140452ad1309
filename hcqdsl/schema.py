"""The one schema framework: a file format is one declaration built of these types (IMAGE in target/image.py,
MANIFEST in lift/schema.py, WITNESS in check/witness.py), and writing and reading go through the same declaration,
so what is written always reads back.

A format is a `Pass` subclass: what one pass over a file knows (the names defined so far, the row being converted,
what the format keeps beyond that) and how it words an error. Each type converts with `conv(v, pass, path)`, which
raises `Invalid` naming the path of the first bad field; `convert` turns that into the format's error. Types whose
conversion has no effect on the pass (no name defined, nothing kept) also have `fast(v, pass)`: the same value, or
BAD without a message. A list converts its items by `fast` and redoes only a bad item by `conv` for the message, so
an image's hundreds of thousands of rows are checked without a path string each."""
from __future__ import annotations
import json, operator, re
from typing import Callable, NoReturn, Optional
import attrs

__all__ = ["Pass", "Invalid", "MISSING", "BAD", "convert", "Int", "Str", "Bool", "Num", "Opt", "List", "Row", "Map", "Obj",
           "Rec", "Variant", "Keep", "Key", "describe", "table", "too_deep", "got_json"]

MISSING = object()   # the value of an absent key, for a format that words it as a bad value (Pass.missing)
BAD = object()       # what `fast` returns for a value that does not fit

class Invalid(Exception):
  """The first bad field: at its JSON path, `what` it should be and the value `got` (MISSING: absent), or a whole
  message (`at` None)."""
  def __init__(self, at: Optional[str], what: str, got=None):
    super().__init__(what)
    self.at, self.what, self.got = at, what, got

class Pass:
  """One pass over a file, reading (JSON -> objects) or writing (objects -> JSON): the names defined so far (or given
  by the format: a program's buffers), the row being converted and the values kept (`Keep`), for the checks that
  depend on them. A format words its errors by overriding `error` (and `among`, `OR_NULL`, `missing`)."""
  NOUN = "file"                  # what the format is called in messages (`the image has none`)
  OR_NULL = False                # a nullable field's message says `... or null`
  TOP = "the metadata"           # the path of the top-level object in messages
  def __init__(self, reading: bool):
    self.reading = reading
    self.names: dict = {}
    self.row: list = []
    self.kept: dict = {}
  def bad(self, msg: str) -> NoReturn: raise Invalid(None, msg)
  def fail(self, at: str, what: str, v) -> NoReturn: raise Invalid(at, what, v)
  def among(self, names) -> str:
    names = sorted(names)
    return ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
  def missing(self, t, at: str, key: str) -> NoReturn: self.bad(f"{at or self.TOP} has no `{key}`")
  def error(self, e: Invalid) -> Exception:
    """The format's exception for the first bad field."""
    if e.at is None: return ValueError(e.what)
    r = repr(e.got)
    return ValueError(f"{e.at} is {r[:40] + '...' if len(r) > 40 else r}, not {e.what}")

def convert(t, v, c: Pass):
  """`v` converted by the declaration `t` in pass `c` (reading or writing); the format's error at the first bad field."""
  try: return t.conv(v, c, "")
  except Invalid as e: raise c.error(e) from None

def _at(at: str, key) -> str: return f"{at}.{key}" if at else str(key)

def _bound(b, c: Pass): return b(c) if callable(b) else b

class Int:
  """An integer in lo..hi; a bound may be a function of the pass (the queue's dword count, the row so far)."""
  def __init__(self, lo=0, hi=(1 << 48) - 1, doc: str = ""): self.lo, self.hi, self.text = lo, hi, doc
  def fast(self, v, c: Pass):
    lo, hi = self.lo, self.hi
    return v if type(v) is int and (lo(c) if callable(lo) else lo) <= v <= (hi(c) if callable(hi) else hi) else BAD
  def conv(self, v, c: Pass, at: str):
    lo, hi = _bound(self.lo, c), _bound(self.hi, c)
    if type(v) is not int or not lo <= v <= hi: c.fail(at, f"an integer in {lo}..{hi}", v)
    return v
  def doc(self) -> str: return self.text or f"int {self.lo}..{self.hi}"

class Str:
  """A string: one of `among`, or a name of `ref` (defined earlier in the file, or given by the format), or defining
  a name of `defines`. `doc`: what it is, for the docs (else said from the above)."""
  def __init__(self, among=None, ref: Optional[str] = None, defines: Optional[str] = None, doc: str = ""):
    self.among, self.ref, self.defines, self.text = among, ref, defines, doc
    if defines is not None: self.fast = None  # type: ignore[method-assign, assignment]  # no fast path: check() runs
  def fast(self, v, c: Pass):
    if type(v) is not str or (self.among is not None and v not in self.among) or \
       (self.ref is not None and v not in c.names.get(self.ref, ())): return BAD
    return v
  def conv(self, v, c: Pass, at: str):
    if type(v) is not str: c.fail(at, "a string", v)
    if self.among is not None and v not in self.among: c.fail(at, f"one of {c.among(self.among)}", v)
    if self.ref is not None and v not in (names := c.names.get(self.ref, ())):
      c.fail(at, f"one of {c.among(names)}" if names else f"a name of {self.ref} (the {c.NOUN} has none)", v)
    if self.defines is not None:
      names = c.names.setdefault(self.defines, set())
      if v in names: c.fail(at, f"a new name (it names two {self.defines})", v)
      names.add(v)
    return v
  def doc(self) -> str:
    if self.text: return self.text
    return f"one of {', '.join(self.among)}" if self.among else f"a name of {self.ref}" if self.ref else \
      f"a new name of {self.defines}" if self.defines else "string"

class Bool:
  def fast(self, v, c: Pass): return v if type(v) is bool else BAD
  def conv(self, v, c: Pass, at: str):
    if type(v) is not bool: c.fail(at, "true or false", v)
    return v
  def doc(self) -> str: return "true or false"

class Num:
  """A number; an expect's NaN and infinities are the strings nan, inf, -inf (JSON has no such numbers)."""
  def fast(self, v, c: Pass): return v if type(v) in (int, float) or v in ("nan", "inf", "-inf") else BAD
  def conv(self, v, c: Pass, at: str):
    if self.fast(v, c) is BAD: c.fail(at, "a number", v)
    return v
  def doc(self) -> str: return "number (or \"nan\", \"inf\", \"-inf\")"

def _no_fast(t) -> bool: return getattr(t, "fast", None) is None

class Opt:
  def __init__(self, t):
    self.t = t
    if _no_fast(t): self.fast = None  # type: ignore[method-assign, assignment]  # no fast path: check() runs
  def fast(self, v, c: Pass): return None if v is None else self.t.fast(v, c)
  def conv(self, v, c: Pass, at: str):
    if v is None: return None
    if not c.OR_NULL: return self.t.conv(v, c, at)
    try: return self.t.conv(v, c, at)
    except Invalid as e:
      if e.at != at: raise
      c.fail(at, f"{e.what} or null", e.got)
  def doc(self) -> str: return f"null or {self.t.doc()}"   # inside a Row

class List:
  """A JSON list; `nonempty`: at least one item."""
  def __init__(self, t, nonempty: bool = False):
    self.t, self.nonempty = t, nonempty
    if _no_fast(t) or nonempty: self.fast = None  # type: ignore[method-assign, assignment]  # no fast path: check() runs
  def fast(self, v, c: Pass):
    if type(v) is not list: return BAD
    fast = self.t.fast
    out = [fast(x, c) for x in v]
    return BAD if BAD in out else out
  def conv(self, v, c: Pass, at: str):
    if type(v) is not list or (self.nonempty and not v): c.fail(at, "a non-empty list" if self.nonempty else "a list", v)
    t = self.t
    if t.fast is None: return [t.conv(x, c, f"{at}[{i}]") for i, x in enumerate(v)]
    out = [t.fast(x, c) for x in v]
    if BAD in out: out = [t.conv(x, c, f"{at}[{i}]") for i, x in enumerate(v)]   # the first bad item's message
    return out

class Row:
  """A JSON list of fixed length, one type per item; in memory `make` of the items (tuple, list, or an attrs class
  with these fields in order). Writing takes only what reading makes (a list is not a tuple), so a file always
  reads back equal to what was written."""
  def __init__(self, make, *items, names: tuple = ()):
    self.make, self.items, self.names, self.n = make, items, names, len(items)
    self.fields = operator.attrgetter(*(f.name for f in attrs.fields(make))) if attrs.has(make) else None
    if any(_no_fast(t) for t in items): self.fast = None  # type: ignore[method-assign, assignment]  # no fast path: check() runs
    self.fasts = tuple(t.fast for t in items) if self.fast is not None else ()
  def _items(self, v, c: Pass):
    """The row's items as a list or tuple (writing: the in-memory value's), or BAD."""
    if not c.reading:   # what reading makes, so that a file reads back equal to what was written
      if type(v) is not self.make: return BAD
      return self.fields(v) if self.fields is not None else v
    return v if type(v) is list and len(v) == self.n else BAD
  def fast(self, v, c: Pass):
    items = self._items(v, c)
    if items is BAD or len(items) != self.n: return BAD
    outer, c.row = c.row, items
    for f, x in zip(self.fasts, items):
      if f(x, c) is BAD:
        c.row = outer
        return BAD
    c.row = outer
    if not c.reading: return items
    return self.make(*items) if self.fields is not None else self.make(items)
  def conv(self, v, c: Pass, at: str):
    if not c.reading and type(v) is not self.make: c.fail(at, f"a {self.make.__name__}", v)
    items = self._items(v, c)
    if items is BAD or len(items) != self.n: c.fail(at, f"a list of {self.n}", v)
    outer, c.row = c.row, []
    for i, (t, x) in enumerate(zip(self.items, items)): c.row.append(t.conv(x, c, f"{at}[{i}]"))
    row, c.row = c.row, outer
    if not c.reading: return row
    return self.make(*row) if self.fields is not None else self.make(row)
  def doc(self) -> str:
    return "[" + ", ".join(f"{n}: {t.doc()}" if n else t.doc() for n, t in zip(self.names or ("",) * len(self.items), self.items)) + "]"

class Map:
  """A JSON object from names to values; a dict in memory."""
  fast = None
  def __init__(self, key: Str, val): self.key, self.val = key, val
  def conv(self, v, c: Pass, at: str):
    if type(v) is not dict: c.fail(at, "an object", v)
    key, val = self.key.conv, self.val.conv
    return {key(k, c, _at(at, k)): val(x, c, _at(at, k)) for k, x in v.items()}

class Obj:
  """A JSON object with these keys, converted in this order (keys in `optional` may be absent; `open`: other keys
  are ignored when reading and not written when writing, where the value may also be any attrs record: its declared
  attributes are written; else other keys are refused); in memory a dict, or an instance of `make` (an attrs class
  whose fields are the keys). `check(out, pass, path)`, once every key is converted: what the keys must satisfy
  together."""
  fast = None
  def __init__(self, fields: dict, optional=(), make=None, open: bool = False, check: Optional[Callable] = None,  # noqa: A002
               sparse=()):
    """`sparse`: optional keys left out when None (a record's field with a default of None, written only when set, so
    files that do not use it stay as they were)."""
    self.fields, self.optional, self.make, self.open, self.check, self.sparse = fields, set(optional), make, open, check, set(sparse)
  def conv(self, v, c: Pass, at: str):
    if self.make is not None and not c.reading:
      if type(v) is not self.make: c.fail(at or f"the {c.NOUN}", f"a {self.make.__name__}", v)
      v = {k: getattr(v, k) for k in self.fields if k not in self.sparse or getattr(v, k) is not None}
    elif not c.reading and self.open and attrs.has(type(v)): v = {k: getattr(v, k) for k in self.fields if hasattr(v, k)}
    elif type(v) is not dict: c.fail(at or c.TOP, "an object", v)
    if not self.open:
      for k in v:
        if k not in self.fields: c.bad(f"{at or c.TOP} has a key `{k}`, not one of {c.among(self.fields)}")
    out = {}
    for k, t in self.fields.items():
      if k in v: out[k] = t.conv(v[k], c, _at(at, k))
      elif k not in self.optional: c.missing(t, at, k)
    if self.check is not None: self.check(out, c, at)
    return self.make(**out) if self.make is not None and c.reading else out

def Rec(cls, check: Optional[Callable] = None, open: bool = False, sparse=(), **fields) -> Obj:  # noqa: A002
  """An attrs class as a JSON object: every field declared, in conversion order; fields with a default may be absent
  (those in `sparse` are left out when None)."""
  assert list(sorted(fields)) == sorted(f.name for f in attrs.fields(cls)), cls
  return Obj(fields, {f.name for f in attrs.fields(cls) if f.default is not attrs.NOTHING}, cls, open, check, sparse)

class Variant:
  """An object whose `tag` key picks its shape (each shape an Obj that declares the tag too)."""
  fast = None
  def __init__(self, tag: str, shapes: dict): self.tag, self.shapes = tag, shapes
  def conv(self, v, c: Pass, at: str):
    if not c.reading:   # a record: its shape is the one made of its class
      shape = next((s for s in self.shapes.values() if s.make is not None and type(v) is s.make), None)
      if shape is not None: return shape.conv(v, c, at)
    if type(v) is not dict: c.fail(at, "an object", v)
    tag = Str(tuple(self.shapes))
    if self.tag not in v: c.missing(tag, at, self.tag)
    tag.conv(v[self.tag], c, _at(at, self.tag))
    return self.shapes[v[self.tag]].conv(v, c, at)

class Keep:
  """`t`, its converted value kept in the pass as `key` (what a later field's bounds depend on: the launch count);
  `check(value, pass, path)`: what it must satisfy together with what was kept before it."""
  fast = None
  def __init__(self, key: str, t, check: Optional[Callable] = None): self.key, self.t, self.check = key, t, check
  def conv(self, v, c: Pass, at: str):
    c.kept[self.key] = out = self.t.conv(v, c, at)
    if self.check is not None: self.check(out, c, at)
    return out
  def doc(self) -> str: return self.t.doc()

class Key:
  """A documented key of an object: converts as `t`; `text` says what it means, `since` which version of the format
  introduced it, and `required` whether the docs call it required when the object's declaration cannot say so
  (required for one shape of the object only: a manifest host step's keys, each for its `op`). `table` prints them."""
  fast = None
  def __init__(self, t, text: str, since: int = 1, required: bool = False):
    self.t, self.text, self.since, self.required = t, text, since, required
  def conv(self, v, c: Pass, at: str): return self.t.conv(v, c, at)
  def doc(self) -> str: return self.t.doc()

def _kind(t) -> str:
  """What a documented key holds, for `table`: `object`, `list of objects`, else its type's doc()."""
  t = t.t if isinstance(t, (Key, Keep)) else t
  if isinstance(t, Obj): return "object"
  if isinstance(t, List) and isinstance(t.t, Obj): return "list of objects"
  return t.doc()

def table(t) -> str:
  """A declaration whose keys are `Key`s as a Markdown table: one row per key (`a[].b` for the keys of a list's
  objects), what it holds, required (absent from its object's `optional`, or `Key.required`) and since which version."""
  rows = ["| field | kind | meaning |", "| --- | --- | --- |"]
  def walk(obj: Obj, at: str):
    for k, key in obj.fields.items():
      inner = key.t.t if isinstance(key.t, Keep) else key.t
      path = f"{at}{k}" + ("[]" if isinstance(inner, List) else "")
      flags = ", ".join(x for x in ("required" * (k not in obj.optional or key.required), f"since version {key.since}" * (key.since > 1)) if x)
      rows.append(f"| `{path}` | {_kind(key)}{f' ({flags})' if flags else ''} | {key.text} |")
      sub = inner.t if isinstance(inner, List) else inner
      if isinstance(sub, Obj): walk(sub, path + ".")
  walk(t, "")
  return "\n".join(rows) + "\n"

def _describe(t, ind: str) -> tuple:
  """(the one-line head of type t, the lines of its keys below it, indented by `ind` + 2)."""
  sub = ind + "  "
  if isinstance(t, Obj):
    body = []
    for k, ft in t.fields.items():
      head, lines = _describe(ft, sub)
      body += [f"{sub}{k}{' (optional)' * (k in t.optional)}: {head}"] + lines
    return "object", body
  if isinstance(t, Variant):
    body = []
    for name, shape in t.shapes.items():
      head, lines = _describe(Obj({k: v for k, v in shape.fields.items() if k != t.tag}, shape.optional), sub)
      body += [f"{sub}{t.tag} = {name}: {head}"] + lines
    return f"object by `{t.tag}`", body
  if isinstance(t, (List, Opt)):
    head, lines = _describe(t.t, ind)
    return f"{'list of' if isinstance(t, List) else 'null or'} {head}", lines
  if isinstance(t, Map):
    head, lines = _describe(t.val, ind)
    return f"object of {t.key.doc()}: {head}", lines
  if isinstance(t, Keep): return _describe(t.t, ind)
  return t.doc(), []

def describe(t) -> str:
  """A declaration as text: one line per key, nested keys indented (the docs hold each format's; tests keep them equal)."""
  head, lines = _describe(t, "")
  return "\n".join(line[2:] for line in lines) + "\n"

_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')

def too_deep(text: str, limit: int = 500) -> str:
  """`LINE:COLUMN` of the first bracket nested more than `limit` deep in JSON text (where json.loads gave up with a
  RecursionError, or near it)."""
  depth = 0
  for m in _JSON_TOKEN.finditer(text):
    ch = m[0]
    if ch in "[{": depth += 1
    elif ch in "]}": depth -= 1
    if depth > limit:
      i = m.start()
      return f"{text.count(chr(10), 0, i) + 1}:{i - text.rfind(chr(10), 0, i)}"
  return "1:1"

def got_json(v, limit: int = 80) -> str:
  """A bad value as JSON text for a message (`nothing (missing)` for an absent key), cut after `limit` characters."""
  if v is MISSING: return "nothing (missing)"
  s = json.dumps(v, default=repr)
  return s[:limit] + " ..." if len(s) > limit else s
