"""Buffer contents between tinygrad and the IR: a tinygrad Buffer's bytes, and those bytes as `Data` of the .hcq dtype
that matches tinygrad's."""
from __future__ import annotations
from typing import Optional
from ..ir import Data, DTYPES

__all__ = ["DTYPE_OF", "buffer_bytes", "to_data"]

# tinygrad dtype name -> .hcq dtype
DTYPE_OF = {"float": "f32", "half": "f16", "double": "f64", "int": "i32", "uint": "u32", "char": "i8", "uchar": "u8",
            "bool": "u8", "short": "i16", "ushort": "u16", "long": "i64", "ulong": "u64"}

def buffer_bytes(buf, lo: int = 0, hi: Optional[int] = None):
  """A copy of bytes [lo:hi) of a tinygrad Buffer as uint8 (zero-copy view first: only the range is copied)."""
  import numpy as np
  return np.frombuffer(buf.as_memoryview(allow_zero_copy=True), dtype=np.uint8)[lo:hi].copy()

def to_data(raw, dtype) -> Data:
  """uint8 bytes as Data of the .hcq dtype of tinygrad's `dtype` (u8 for a dtype .hcq has not). The values are a
  numpy array over the bytes (a 26M-parameter model's weights as Python floats would take gigabytes)."""
  import numpy as np
  dt = DTYPE_OF.get(dtype.name, "u8")
  return Data(dt, raw.view(np.dtype(DTYPES[dt][0]).newbyteorder("<")))
