"""Where memories live, for both vendors: the facts of the memory plan every image shares."""

__all__ = ["SIGNAL_SLOT", "TIMESTAMP_OFFSET", "kernarg_layout", "kernargs_region"]

# a signal's slot: its value (u64, 32 bits used) at +0, a `timestamp`'s GPU clock (u64) at +TIMESTAMP_OFFSET
SIGNAL_SLOT, TIMESTAMP_OFFSET = 16, 8

def kernarg_layout(params) -> tuple:
  """(byte offset of each argument in the kernel arguments, their size) for Params (a buffer: an 8-byte pointer, a
  scalar: a 4-byte value) or byte sizes, each aligned to its size: tinygrad's layout (its kernels take buffers first,
  then their variables), which compile writes and lift reads back."""
  offs, top = [], 0
  for p in params:
    n = p if type(p) is int else 4 if p.scalar else 8
    top += -top % n
    offs.append(top)
    top += n
  return offs, top

def kernargs_region(queue: str, index: int) -> str:
  """The name of the kernel-argument region of the exec at `index` of `queue`'s body (compile names it, a replay
  finds the block a race on an exec's kernel arguments is about by it)."""
  return f"{queue}.kernargs.{index}"
