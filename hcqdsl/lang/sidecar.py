"""Binary data next to a program: safetensors files (the format tinygrad's `safe_save`/`safe_load` and PyTorch use),
referenced from the text as `f32 from "model.safetensors" ["in0"]` (docs/language.md "Data files").

The format: an 8-byte little-endian header length, a JSON header {name: {"dtype", "shape", "data_offsets": [begin,
end]}} (offsets into the bytes after the header), then the bytes. Reading maps the file (numpy.memmap): a 500 MB
weight file costs no memory until a buffer's bytes are copied into the emulated device."""
from __future__ import annotations
import json, os, struct
from typing import Any
from ..ir import DTYPES

__all__ = ["SidecarError", "read_tensor", "write_tensors", "move_out", "ST_DTYPE", "INLINE_MAX"]

# .hcq dtype -> safetensors dtype
ST_DTYPE = {"f16": "F16", "f32": "F32", "f64": "F64", "i8": "I8", "u8": "U8", "i16": "I16", "u16": "U16", "i32": "I32",
            "u32": "U32", "i64": "I64", "u64": "U64"}
_MAX_HEADER = 100 << 20

class SidecarError(ValueError):
  """A data file that cannot be read, or has no tensor of that name, dtype and size (the parser reports it at the
  reference)."""

_headers: dict = {}   # (path, mtime, size) -> (header, data offset)

def _header(path: str) -> tuple[dict, int]:
  try: st = os.stat(path)
  except OSError as e: raise SidecarError(f"cannot read data file `{path}`: {e.strerror or e}") from None
  key = (os.path.abspath(path), st.st_mtime_ns, st.st_size)
  if key not in _headers:
    with open(path, "rb") as f:
      raw = f.read(8)
      n = struct.unpack("<Q", raw)[0] if len(raw) == 8 else -1
      if not 0 < n <= min(_MAX_HEADER, st.st_size - 8): raise SidecarError(f"`{path}` is not a safetensors file (no header)")
      try: header = json.loads(f.read(n))
      except (ValueError, RecursionError): raise SidecarError(f"`{path}` is not a safetensors file (its header is not JSON)") from None
    if not isinstance(header, dict): raise SidecarError(f"`{path}` is not a safetensors file (its header is not an object)")
    _headers[key] = (header, 8 + n)
  return _headers[key]

def read_tensor(path: str, name: str, dtype: str):
  """The values of tensor `name` in safetensors file `path`, as a flat read-only numpy array of .hcq `dtype`."""
  import numpy as np
  header, base = _header(path)
  t = header.get(name)
  if not isinstance(t, dict) or name == "__metadata__":
    known = [k for k in header if k != "__metadata__"]
    has = f" (it has {len(known)}: {', '.join(known[:4])}{', ...' * (len(known) > 4)})" if known else ""
    raise SidecarError(f"`{path}` has no tensor `{name}`" + has)
  if t.get("dtype") != ST_DTYPE[dtype]:
    raise SidecarError(f"tensor `{name}` in `{path}` is {t.get('dtype')}, not {ST_DTYPE[dtype]} ({dtype})")
  try: lo, hi = (int(x) for x in t["data_offsets"])
  except (KeyError, TypeError, ValueError): raise SidecarError(f"tensor `{name}` in `{path}` has no data_offsets") from None
  size = DTYPES[dtype][1]
  if not 0 <= lo <= hi or (hi - lo) % size or base + hi > os.path.getsize(path):
    raise SidecarError(f"tensor `{name}` in `{path}`: data_offsets [{lo}, {hi}] do not fit the file")
  if hi == lo: return np.zeros(0, np.dtype(DTYPES[dtype][0]))
  return np.memmap(path, dtype=np.dtype(DTYPES[dtype][0]).newbyteorder("<"), mode="r", offset=base + lo, shape=((hi - lo) // size,))

def write_tensors(path: str, tensors: dict[str, tuple[str, Any]]) -> None:
  """Write {name: (.hcq dtype, numpy array or bytes)} as a safetensors file (1-d tensors, in the given order)."""
  import numpy as np
  header, blobs, off = {}, [], 0
  for name, (dtype, values) in tensors.items():
    b = values if isinstance(values, (bytes, bytearray, memoryview)) else \
      np.ascontiguousarray(values, dtype=np.dtype(DTYPES[dtype][0]).newbyteorder("<")).tobytes()
    header[name] = {"dtype": ST_DTYPE[dtype], "shape": [len(b) // DTYPES[dtype][1]], "data_offsets": [off, off + len(b)]}
    blobs.append(b)
    off += len(b)
  text = json.dumps(header, separators=(",", ":")).encode()
  text += b" " * (-len(text) % 8)   # the data starts 8-byte aligned, as safetensors writers do
  tmp = f"{path}.{os.getpid()}.tmp"
  with open(tmp, "wb") as f:
    f.write(struct.pack("<Q", len(text)))
    f.write(text)
    for b in blobs: f.write(b)
  os.replace(tmp, path)

INLINE_MAX = 1024   # values: larger buffer contents and expects go to the data file (`hcqdsl emit --inline-max`)

def move_out(program, path: str, ref: str, inline_max: int = INLINE_MAX):
  """`program` with every buffer's contents (per-launch ones too) and every expect of more than `inline_max` values
  moved to the safetensors file `path` (written; nothing is written when nothing is that big), referenced as `ref` (the
  file's name as the text gives it: relative to the program's directory). Tensor names: the buffer's name, `NAME@K`
  for launch K of a per-launch buffer, `expect@LINE` in declaration order for expects (`expect@N`, N from 1)."""
  import attrs
  from ..ir import Buffer, Expect
  tensors: dict = {}
  def out(d, key):
    if d is None or d.source is not None or len(d.values) <= inline_max: return d
    tensors[key] = (d.dtype, d.values)
    return attrs.evolve(d, values=d.values, source=(ref, key))
  decls, n_expect = [], 0
  for d in program.decls:
    if isinstance(d, Buffer):
      d = attrs.evolve(d, init=out(d.init, d.name), launch_inits=tuple(out(x, f"{d.name}@{k}") for k, x in enumerate(d.launch_inits, 1)))
    elif isinstance(d, Expect):
      n_expect += 1
      d = attrs.evolve(d, data=out(d.data, f"expect@{n_expect}"))
    decls.append(d)
  if tensors: write_tensors(path, tensors)
  return attrs.evolve(program, decls=tuple(decls))
