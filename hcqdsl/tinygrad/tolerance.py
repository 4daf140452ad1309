"""The tolerance of a float `expect` emit writes: what two float32 summation orders can differ by.

tinygrad's C kernels for the CPU and its AMD code objects compute the same reductions in different orders (the AMD
ones split them over lanes and workgroups), so the results agree only to rounding. Summing n float32 terms in two
orders differs by at most about 2·n·eps·Σ|x| (eps = 2**-24, the unit roundoff); relative to the result that is
2·n·eps when the terms do not cancel. emit takes n = the longest reduction of the program (errors flow from one
kernel into the next, so the longest one anywhere bounds the rest), and for terms that cancel it scales the absolute
part by the output's largest magnitude: rtol = max(1e-5, 2·n·eps), atol = rtol·max|out| (at least 1e-8, numpy's
default). docs/emit.md "Tolerances"."""
from __future__ import annotations

__all__ = ["reduction_length", "tolerance", "RTOL_MIN", "ATOL_MIN"]

EPS32 = 2.0 ** -24
RTOL_MIN, ATOL_MIN = 1e-5, 1e-8   # numpy.allclose's defaults: never tighter than them

def reduction_length(ast) -> int:
  """The largest number of terms one output element of tinygrad kernel `ast` sums (symbolic lengths at their max)."""
  from tinygrad.uop.ops import Ops
  n = 1
  for u in ast.toposort():
    if u.op is not Ops.REDUCE: continue
    k = 1
    for r in u.src[1:]:
      if r.op is Ops.RANGE: k *= int(r.src[0].vmax)
    n = max(n, k)
  return n

def tolerance(n: int, values) -> tuple[float, float]:
  """(rtol, atol) for float `values` computed through reductions of at most `n` terms."""
  import numpy as np
  rtol = max(RTOL_MIN, 2 * n * EPS32)
  v = np.abs(np.asarray(values, dtype=np.float64))
  v = v[np.isfinite(v)]
  return float(f"{rtol:.2g}"), float(f"{max(ATOL_MIN, rtol * (float(v.max()) if v.size else 0.0)):.2g}")
