"""Static checks on one program, before any launch is considered: names (`name`), byte ranges (`bounds`), literals
(`overflow`), and statements in the wrong kind of block (`syntax`). `hcqdsl.parse` and `hcqdsl.check` run them first."""
from __future__ import annotations
from ..ir import (Span, Program, Device, Buffer, Signal, Var, Kernel, Queue, Host, Expect, Wait, SignalWrite, Exec, Copy, Write, HostWrite, Poll,
                Barrier, Timestamp, Epoch, Submit, Slice, Expr, Ref, KEYWORDS, U32_MAX, U64_MAX, WRITE_SIZES, POLL_SIZE, DTYPES, split_lines,
                declare_implicit, MEMORY_WINDOW, MAX_DEVICES, BUFFER_ALIGN, DEVICE_INDEX_MAX, VENDORS, NV_MEMORY_WINDOW, NV_HOST_WINDOW,
                device_arch, NV_KERNARG_MAX, nv_kernarg_error, MAX_LAUNCHES, launches_text)
from ..diagnostics import Diagnostic, did_you_mean
from ..lang.rows import Rows, WAIT, SIGNAL, EXEC, COPY
import operator
from typing import Any, Optional
import attrs, re

__all__ = ["check_static", "StaticCheck", "check_launches", "launches_span", "valid_launches"]

_KIND = {Device: "device", Buffer: "buffer", Signal: "signal", Var: "var", Kernel: "kernel", Queue: "queue"}
_SYNC = frozenset((Wait, SignalWrite, Timestamp))
_QUEUE_ONLY = {Exec: "exec", Copy: "copy", Write: "write", Poll: "poll", Barrier: "barrier", Timestamp: "timestamp", Epoch: "epoch"}

def _what(decl) -> str:
  if decl is None: return "nothing"
  k = _KIND.get(type(decl), "name")
  if isinstance(decl, Signal) and decl.name.endswith(".timeline"): return "a signal"
  if isinstance(decl, Var) and decl.name.endswith(".epoch"): return "a var"
  return f"a {k}" if k[0] not in "aeiou" else f"an {k}"

# builtins whose first argument is a value of the kernel's dtype (spin's is microseconds)
_VALUE_ARGS = {"fill", "iota", "scale", "spin"}
_FMAX = {"f16": 65504.0, "f32": 3.4028234663852886e38, "f64": 1.7976931348623157e308}

def _range(dt: str) -> tuple:
  if dt[0] == "f": return (-_FMAX[dt], _FMAX[dt])
  bits = 8 * DTYPES[dt][1]
  return (0, (1 << bits) - 1) if dt[0] == "u" else (-(1 << bits - 1), (1 << bits - 1) - 1)

class StaticCheck:
  """Walks the program once, collecting every problem it can find (several errors per run)."""
  name = "static"

  def run(self, prog: Program) -> list[Diagnostic]:
    self.prog = prog
    self.diags: list[Diagnostic] = []
    self._lines: Optional[list[str]] = None
    self.device_at: dict = {}   # (vendor, index) -> the first device declared there (a dict: 20,000 devices took 51 s pairwise)
    self.names = self._declare(prog)
    self.submitted: dict = {}
    for d in prog.decls: getattr(self, f"_{type(d).__name__.lower()}")(d)
    self._address_space(prog)
    return self.diags

  def _address_space(self, prog: Program):
    """What the targets cannot address: more devices than 48-bit windows, more buffer bytes than a memory's window."""
    for d in prog.devices[MAX_DEVICES:MAX_DEVICES + 1]:
      self._err("bounds", f"device `{d.name}` is device number {MAX_DEVICES + 1}; the 48-bit address space holds "
                f"{MAX_DEVICES} devices", d.span)
    used: dict = {}
    nv = {d.name for d in prog.devices if d.vendor == "NV"}
    for b in prog.buffers:
      mem = b.device.name if b.device is not None else None
      before = used.get(mem, 0)
      used[mem] = before + max(b.size, 1) + -max(b.size, 1) % BUFFER_ALIGN
      # NV queues address 40 bits: an NV device's memory window, and the host's below them (docs/nv.md)
      limit, what = (NV_MEMORY_WINDOW, "an NV device's 40-bit window holds") if mem in nv else \
                    (NV_HOST_WINDOW, "the host's memory below the NV devices' windows holds") if mem is None and nv else \
                    (MEMORY_WINDOW, "the targets address per memory")
      if before <= limit < used[mem]:   # the buffer that crosses the end
        size = f"{limit >> 40} TiB" if limit >= 1 << 40 else f"{limit >> 30} GiB"
        self._err("bounds", f"buffer `{b.name}` ({b.size} bytes) does not fit: the buffers in {mem or 'host'} memory need "
                  f"{used[mem]} bytes, more than the {limit} ({size}) {what}", b.span)

  def _err(self, code, msg, span, severity="error"): self.diags.append(Diagnostic(code, msg, span, severity))

  def _declare(self, prog: Program) -> dict:
    names: dict = {}
    for d in prog.decls:
      if isinstance(d, (Host, Expect)): continue
      if d.name in KEYWORDS:  # reported once here; still declared, so its uses are not `unknown` errors too
        self._err("syntax", f"`{d.name}` is a keyword and cannot be used as a name", prog.locate(d.name, d.span))
      if d.name in names:
        first = names[d.name]
        self._err("name", f"`{d.name}` is already declared as {_what(first)} at line {first.span.line}", d.span)
        continue
      names[d.name] = d
    return declare_implicit(names, prog.of(Device))

  def _need(self, ref: Ref, kind, what: str, at):
    """The declaration `ref` names, if it is a `kind`; else an error at the name inside span `at`."""
    d = self.names.get(ref.name)
    if d is not None and isinstance(d, kind): return d
    span = self.prog.locate(ref.name, at)
    if d is None:
      base, _, attr = ref.name.partition(".")
      if attr and isinstance(self.names.get(base), Device): self._err("name", f"a device has `.timeline` and `.epoch`, not `.{attr}`", span)
      elif attr:
        devs = [n for n, x in self.names.items() if isinstance(x, Device)]
        self._err("name", f"unknown device `{base}` in `{ref.name}`{did_you_mean(base, devs)}", span)
      else:
        like = [n for n, x in self.names.items() if isinstance(x, kind)]
        self._err("name", f"unknown {what} `{ref.name}`{did_you_mean(ref.name, like or self.names)}", span)
      return None
    if not isinstance(d, kind):
      self._err("name", f"`{ref.name}` is {_what(d)}, not {'an' if what[0] in 'aeiou' else 'a'} {what}", span)
      return None
    return d

  # ---- declarations
  def _device(self, d: Device):
    if d.vendor not in VENDORS:
      self._err("name", f"unknown device kind `{d.vendor}` (one of {', '.join(f'`{v}`' for v in VENDORS)}){did_you_mean(d.vendor, VENDORS)}",
                d.span)
    if not 0 <= d.index <= DEVICE_INDEX_MAX:
      self._err("bounds", f"device index {d.index} is outside 0 .. {DEVICE_INDEX_MAX}", self.prog.locate(str(d.index), d.span))
    if d.vendor in VENDORS and d.arch is not None and d.arch not in VENDORS[d.vendor]:
      self._err("name", f"unknown {d.vendor} architecture `{d.arch}` (one of {', '.join(VENDORS[d.vendor])})", d.span)
    o = self.device_at.setdefault((d.vendor, d.index), d)
    if o is not d: self._err("name", f"{d.vendor}:{d.index} is already device `{o.name}`", d.span)

  def _buffer(self, b: Buffer):
    if b.device is not None: self._need(b.device, Device, "device", b.span)
    if b.size <= 0: self._err("bounds", f"buffer `{b.name}` has size {b.size}; sizes are at least 1 byte", b.span)
    for init in ((b.init,) if b.init is not None else ()) + b.launch_inits:
      if init.nbytes > b.size:
        self._err("bounds", f"{len(init.values)} {init.dtype} values are {init.nbytes} bytes, more than buffer `{b.name}` ({b.size} bytes)",
                  init.span or b.span)
    if b.per_launch is not None and not b.launch_inits:
      self._err("bounds", f"{b.per_launch} buffer `{b.name}` lists no contents: write one list per launch after `=`", b.span)

  def _signal(self, s: Signal):
    if s.device is not None: self._need(s.device, Device, "device", s.span)
    if not 0 <= s.init <= U32_MAX: self._err("overflow", f"initial value {s.init} is outside 32 bits", self.prog.locate(str(s.init), s.span))

  def _var(self, v: Var):
    if v.values is not None and not v.values: self._err("bounds", f"var `{v.name}` lists no values: write one per launch", v.span)

  def _kernel(self, k: Kernel):
    seen: dict = {}
    for p in k.params:
      if p.name in seen: self._err("name", f"parameter `{p.name}` appears twice in kernel `{k.name}`", k.span)
      seen[p.name] = p
    if k.impl is not None and k.impl.code is not None:   # the buffer its code was uploaded to
      self._need(Ref(k.impl.code), Buffer, "buffer", self.prog.locate(k.impl.code, k.impl.span or k.span))
    if k.impl is not None and k.impl.dtype is not None and k.impl.dtype not in DTYPES:
      self._err("name", f"unknown dtype `{k.impl.dtype}` (one of {', '.join(DTYPES)})", k.impl.span or k.span)
    elif k.impl is not None and k.impl.builtin in _VALUE_ARGS and k.impl.c_source is None:
      dt = k.impl.dtype or "f32"
      for v in k.impl.args[:1] if k.impl.builtin != "spin" else ():
        lo, hi = _range(dt)
        if isinstance(v, float) and v != v: ok = dt[0] == "f"
        else: ok = lo <= v <= hi or (dt[0] == "f" and v in (float("inf"), float("-inf")))
        if not ok:
          self._err("bounds", f"{k.impl.builtin}<{dt}>({v}): {v} is outside {dt} ({lo} .. {hi})", k.impl.span or k.span)
      if k.impl.builtin == "spin" and k.impl.args[:1] and not 0 <= k.impl.args[0] <= 1e9:
        self._err("bounds", f"spin({k.impl.args[0]}): microseconds are 0 .. 1e9", k.impl.span or k.span)

  def _launches(self, d):
    """A block's `launches` clause: launches are numbered 1 .. MAX_LAUNCHES, and a range holds at least one."""
    if d.launches is None: return
    first, last = d.launches
    text = launches_text(d.launches)
    if first < 1: self._err("bounds", f"`launches {text}`: launches are numbered from 1 (there is no launch {first})", self._launches_span(d))
    elif last is not None and last < first:
      self._err("bounds", f"`launches {text}` is empty: it ends before it starts (`launches {last}..{first}`?)", self._launches_span(d))
    elif max(first, last or 0) > MAX_LAUNCHES:
      self._err("bounds", f"`launches {text}`: launch numbers are 1 .. {MAX_LAUNCHES} (the most launches a command checks or runs)",
                self._launches_span(d))

  def _launches_span(self, d): return launches_span(self.prog, d)

  def _queue(self, q: Queue):
    self._launches(q)
    dev = self._need(q.device, Device, "device", q.span)
    if dev is not None and dev.vendor == "NV": self._nv_queue(q, dev)
    if self._clean_body(q): return
    for s in q.body: self._queue_stmt(q, s)

  def _queue_stmt(self, q: Queue, s) -> None:
    """The checks of one statement of queue q."""
    if isinstance(s, Submit):
      self._err("syntax", "`submit` is a host statement; queues cannot submit", s.span)
      return
    if isinstance(s, HostWrite):
      self._err("syntax", "`write B = T [..], ...` (bytes per launch) is a host statement; a queue's `write` stores one value", s.span)
      return
    if isinstance(s, Exec) and q.engine == "copy":
      self._err("name", f"`exec` on copy queue `{q.name}`: kernels run on compute queues", s.span)
    if isinstance(s, Copy) and q.engine == "compute":
      self._err("name", f"`copy` on compute queue `{q.name}`: copies run on copy queues", s.span)
    if isinstance(s, Poll) and q.engine == "copy":
      dev = self.names.get(q.device.name)
      vendor = dev.vendor if type(dev) is Device and dev.vendor in VENDORS else "AMD"
      self._err("name", f"`poll` on copy queue `{q.name}`: a masked poll runs on compute queues (tinygrad's "
                f"{vendor}CopyQueue has no poll_bit)", s.span)
    self._stmt(s)

  def _nv_queue(self, q: Queue, dev: Device):
    """What tinygrad's NV queues do not have or mean otherwise (docs/nv.md): NVCopyQueue has no write and no poll_bit,
    NVComputeQueue.poll_bit tests one bit (ACQ_AND / ACQ_NOR: any bit of the mask set / clear), and the QMD holds the
    block in 16- and 8-bit fields the patch table does not patch; an exec's arguments fit constant bank 0's 13-bit size.
    (The column rows are execs without a problem when no distinct block or kernel has one: then only the node rows
    are looked at one by one.)"""
    arch, too_big = device_arch(dev), {}
    rows = Rows.of(q)
    stmts: Any = rows.nodes_made
    if (c := rows.columns.get(EXEC)) is not None:
      kernels = {rows.pool.names[i] for i in set(c.x)}
      blocks = [rows.pool.dims[d][1] for d in set(c.z) if d >= 0]
      if any(b is not None and any(type(x) is Expr for x in b) for b in blocks) or any(
          type(k := self.names.get(n)) is Kernel and arch in NV_KERNARG_MAX and nv_kernarg_error(k, arch) for n in kernels): stmts = q.body
    for s in stmts:
      t = type(s)
      if t is Write and q.engine == "copy":
        self._err("name", f"`write` on NV copy queue `{q.name}`: tinygrad's NVCopyQueue has no write (NV stores run on compute queues)", s.span)
      elif t is Poll and q.engine == "compute" and (s.mask & (s.mask - 1) or not s.mask or s.value.var is not None
                                                    or s.value.offset not in (0, s.mask)):
        self._err("name", f"`poll` on NV queue `{q.name}` tests one bit: NV's poll_bit (SEM_EXECUTE ACQ_AND / ACQ_NOR) passes when any "
                  f"bit of the mask is set / clear, so the mask must be one bit and the value 0 or the mask", s.span)
      elif t is Exec and s.block is not None and any(type(x) is Expr for x in s.block):
        self._err("name", f"a block over a var on NV queue `{q.name}`: the QMD holds the block in 16- and 8-bit fields "
                  f"(CTA_THREAD_DIMENSION0..2) the patch table cannot patch yet", s.span)
      if t is Exec and type(k := self.names.get(s.kernel.name)) is Kernel and arch in NV_KERNARG_MAX:
        if k.name not in too_big: too_big[k.name] = nv_kernarg_error(k, arch)
        if too_big[k.name] is not None: self._err("bounds", too_big[k.name], self.prog.locate(k.name, s.span))

  def _clean_body(self, q: Queue) -> bool:
    """True when a queue's body has nothing to report: the common case, decided so that a million-statement program
    checks in a fraction of a second. Its statements are read as columns of ints (lang/rows.py): each distinct
    name, value and launch dimension is looked at once, the ranges in C loops over the columns; the statements that
    are nodes (few) by the full checks. False sends every statement through the full checks, which say what is
    wrong, in order."""
    rows = Rows.of(q)
    cols, pool, names, U = rows.columns, rows.pool, self.names, U32_MAX
    if (EXEC in cols and q.engine != "compute") or (COPY in cols and q.engine != "copy"): return False
    if rows.nodes_made:   # (few: their own checks, the problems they find dropped; any sends the body to the full checks)
      diags, self.diags = self.diags, []
      try:
        for s in rows.nodes_made: self._queue_stmt(q, s)
      finally: diags, self.diags = self.diags, diags
      if diags: return False
    def named(ids, kind) -> bool: return all(type(names.get(pool.names[i])) is kind for i in set(ids))
    if not all(named(c.x, Signal) for k in (WAIT, SIGNAL) if (c := cols.get(k)) is not None): return False
    # values: a var's name a var; the offsets 32-bit (the parser reads no other; a negative one: only over a var)
    for k in (WAIT, SIGNAL):
      if (c := cols.get(k)) is None: continue
      if not named({v for v in set(c.y) if v >= 0}, Var): return False
      if c.z and (max(c.z) > U or (min(c.z) < 0 and any(z < 0 for y, z in zip(c.y, c.z) if y < 0))): return False
    if (c := cols.get(EXEC)) is not None and not self._clean_execs(c, pool): return False
    if (c := cols.get(COPY)) is not None:
      lo, hi = self._ranges(c, pool)
      if lo is None: return False
      if list(map(operator.sub, hi[0::2], lo[0::2])) != list(map(operator.sub, hi[1::2], lo[1::2])): return False   # a copy's sides
    return True

  def _clean_execs(self, c, pool) -> bool:
    """A column of execs (every argument a slice) with nothing to report: known kernels taking as many buffers, launch
    dimensions in range or over vars, ranges inside their buffers."""
    names, nparams = self.names, {}
    for i in set(c.x):
      k = names.get(pool.names[i])
      if type(k) is not Kernel or any(p.scalar for p in k.params): return False
      nparams[i] = len(k.params)
    if list(map(nparams.__getitem__, c.x)) != c.y: return False
    dims = [x for d in set(c.z) if d >= 0 for grid_block in pool.dims[d] if grid_block is not None for x in grid_block]
    if not all(1 <= x <= U32_MAX for x in dims if type(x) is int): return False
    W = U64_MAX
    if any(type(x) is not int and (type(names.get(x.var.name) if x.var is not None else Var) is not Var or not -W <= x.offset <= W)
           for x in dims): return False
    return self._ranges(c, pool)[0] is not None

  def _ranges(self, c, pool) -> tuple:
    """(starts, ends) of a column's slices, a missing bound read as the buffer's start or end; (None, None) when a
    slice names no buffer or its range is empty or outside the buffer."""
    names, size = self.names, {}
    for i in set(c.buf):
      if type(b := names.get(pool.names[i])) is not Buffer: return None, None
      size[i] = b.size
    lo, hi = c.lo, c.hi
    if -1 in lo: lo = [0 if x < 0 else x for x in lo]
    if -1 in hi: hi = [size[b] if x < 0 else x for b, x in zip(c.buf, hi)]
    if not (all(map(operator.lt, lo, hi)) and all(map(operator.le, hi, map(size.__getitem__, c.buf)))): return None, None
    return lo, hi

  def _host(self, h: Host):
    self._launches(h)
    submitted = self.submitted   # queue -> [(the submit's span, its host block's launches)]: named once per launch
    for s in h.body:
      seen: dict = {}
      if type(s) in _QUEUE_ONLY:
        self._err("syntax", f"`{_QUEUE_ONLY[type(s)]}` is not allowed in a host block (host accepts wait, signal, submit and "
                  f"`write B = T [..], ...`)", s.span)
        continue
      if isinstance(s, Submit):
        for r in s.queues:
          seen[r.name] = seen.get(r.name, 0) + 1
          if (q := self._need(r, Queue, "queue", s.span)) is None: continue
          # (two host blocks may each submit a queue, in launches they do not share: `host launches 1`, `host launches 2..`)
          if (o := next((x for x in submitted.get(r.name, ()) if _overlap(x[1], h.launches, q.launches)), None)) is not None:
            self._err("name", f"queue `{r.name}` is already submitted at line {o[0].line}{_shared(o[1], h.launches, q.launches)}",
                      self.prog.locate(r.name, s.span, seen[r.name]))
          else: submitted.setdefault(r.name, []).append((s.span, h.launches))
        continue
      if isinstance(s, HostWrite):
        self._host_write(s)
        continue
      if isinstance(s, Wait):   # the host compares the signal's 64-bit memory: its waits take 64-bit values
        self._need(s.signal, Signal, "signal", s.span)
        self._expr(s.value, s.span, U64_MAX)
        continue
      self._stmt(s)

  def _expect(self, e: Expect):
    b = self._slice(e.target, e.span)
    if b is None: return
    lo, hi = e.target.bounds(b.size)
    if e.data.nbytes > hi - lo:
      self._err("bounds", f"{len(e.data.values)} {e.data.dtype} values are {e.data.nbytes} bytes, more than the {hi - lo} bytes of "
                f"`{_fmt_slice(e.target)}`", e.data.span or e.span)

  # ---- statements
  def _stmt(self, s):
    if isinstance(s, (Wait, SignalWrite)):
      self._need(s.signal, Signal, "signal", s.span)
      self._expr(s.value, s.span)
    elif isinstance(s, Timestamp): self._need(s.signal, Signal, "signal", s.span)
    elif isinstance(s, Exec): self._exec(s)
    elif isinstance(s, Copy): self._copy(s)
    elif isinstance(s, Write): self._write(s)
    elif isinstance(s, Poll): self._poll(s)

  def _expr(self, e: Expr, at, limit: int = U32_MAX):
    if e.var is not None:
      self._need(e.var, Var, "var", at)
      if not -U64_MAX <= e.offset <= U64_MAX:   # (an image holds the constant in 65 bits; past 64 no launch fits)
        self._err("overflow", f"`{e}`: {abs(e.offset)} ({abs(e.offset):#x}) is outside 64 bits, so the value is outside 0 .. {limit} "
                  f"in every launch", self._value_span(at))
    elif not 0 <= e.offset <= limit and limit == U32_MAX:
      self._err("overflow", f"{e.offset} ({e.offset:#x}) is outside 32 bits (signal values are 0 .. {U32_MAX})", self._value_span(at))
    elif not 0 <= e.offset <= limit:
      self._err("overflow", f"{e.offset} ({e.offset:#x}) is outside 64 bits (the host's waits compare 0 .. {limit})", self._value_span(at))

  def _value_span(self, at):
    """The value of a `wait`/`signal` statement: the text after its `=` or `>=`."""
    if at is None or self.prog.source is None or at.line != at.end_line: return at
    line = self._line(at.line)
    text = line[at.column - 1:at.end_column - 1]
    i = text.rfind("=") + 1
    while i < len(text) and text[i] in " \t": i += 1
    return Span(at.file, at.line, at.column + i, at.line, at.end_column) if 0 < i < len(text) else at

  def _line(self, n: int) -> str:
    """Line n of the source as spans count lines (split once per run, only when an error needs it)."""
    if (lines := self._lines) is None:
      assert self.prog.source is not None   # (the callers' spans were found in the source)
      lines = self._lines = split_lines(self.prog.source)
    return lines[n - 1] if 0 < n <= len(lines) else ""

  def _slice(self, s: Slice, at):
    b = self._need(s.buffer, Buffer, "buffer", at)
    if b is None: return None
    if s.launch is not None and b.per_launch != "rebound":
      self._err("name", f"`{_fmt_slice(s)}`: only a rebound buffer has memory per launch (`{b.name}` is not rebound)", self._slice_span(s, at))
    elif s.launch is not None and not 1 <= s.launch <= len(b.launch_inits):
      self._err("bounds", f"`{_fmt_slice(s)}`: `{b.name}` lists {len(b.launch_inits)} launch{'es' * (len(b.launch_inits) != 1)}, "
                f"so its launches are 1 .. {len(b.launch_inits)}", self._slice_span(s, at))
    lo, hi = s.bounds(b.size)
    if lo > hi: self._err("bounds", f"range `{_fmt_slice(s)}` ends before it starts", self._slice_span(s, at))
    elif hi > b.size: self._err("bounds", f"range `{_fmt_slice(s)}` is outside buffer `{b.name}` ({b.size} bytes)", self._slice_span(s, at))
    elif lo == hi: self._err("bounds", f"range `{_fmt_slice(s)}` is empty", self._slice_span(s, at))
    return b

  def _slice_span(self, s: Slice, at):
    """`name[a:b]` inside the statement at `at` (found only when there is an error to show)."""
    span = self.prog.locate(s.buffer.name, at)
    if not s.ranged or span is at or span is None: return span   # (None only when `at` is)
    line = self._line(span.line)
    close = line.find("]", span.end_column - 1, at.end_column - 1)
    return span if close < 0 else attrs.evolve(span, end_column=close + 2)

  def _exec(self, s: Exec):
    k = self._need(s.kernel, Kernel, "kernel", s.span)
    for a in s.args:
      if type(a) is Expr: self._expr(a, s.span)
      else: self._slice(a, s.span)
    if k is not None and len(s.args) != len(k.params):
      self._err("name", f"kernel `{k.name}` takes {len(k.params)} argument{'s' * (len(k.params) != 1)}, {len(s.args)} given", s.span)
    elif k is not None:
      for p, a in zip(k.params, s.args):
        if p.scalar and type(a) is not Expr:
          self._err("name", f"parameter `{p.name}` of `{k.name}` is a {p.mode} value: pass a number or a var expression, not buffer "
                    f"`{a.buffer.name}`", self.prog.locate(a.buffer.name, s.span))
        elif not p.scalar and type(a) is Expr:
          self._err("name", f"parameter `{p.name}` of `{k.name}` is a buffer: `{a}` is a value", s.span)
    for dims, what in ((s.grid, "grid"), (s.block, "block")):
      if dims is None: continue
      for x in dims:
        if type(x) is Expr: self._expr(x, s.span)
        elif not 1 <= x <= U32_MAX: self._err("bounds", f"{what} dimensions are 1 .. {U32_MAX}", s.span)

  def _copy(self, s: Copy):
    bd, bs = self._slice(s.dst, s.span), self._slice(s.src, s.span)
    if bd is None or bs is None: return
    (a, b), (c, d) = s.dst.bounds(bd.size), s.src.bounds(bs.size)
    if b - a != d - c:
      self._err("bounds", f"copy of unequal lengths: `{_fmt_slice(s.dst)}` is {b - a} bytes, `{_fmt_slice(s.src)}` is {d - c}", s.span)

  def _host_write(self, s: HostWrite):
    if (b := self._slice(s.dst, s.span)) is None: return
    lo, hi = s.dst.bounds(b.size)
    for d in s.launch_inits:
      if d.nbytes > hi - lo:
        self._err("bounds", f"{len(d.values)} {d.dtype} values are {d.nbytes} bytes, more than the {hi - lo} bytes of `{_fmt_slice(s.dst)}`",
                  d.span or s.span)

  def _write(self, s: Write):
    self._expr(s.value, s.span)
    if (b := self._slice(s.dst, s.span)) is None: return
    lo, hi = s.dst.bounds(b.size)
    if 0 <= lo < hi <= b.size and hi - lo not in WRITE_SIZES:
      self._err("bounds", f"`write` stores 4 or 8 bytes (a 32- or 64-bit value), not the {hi - lo} bytes of `{_fmt_slice(s.dst)}`", s.span)

  def _poll(self, s: Poll):
    self._expr(s.value, s.span)
    if not 0 <= s.mask <= U32_MAX:
      self._err("overflow", f"mask {s.mask} ({s.mask:#x}) is outside 32 bits (a poll compares one 32-bit word)", s.span)
    elif s.value.var is None and 0 <= s.value.offset <= U32_MAX and s.value.offset & ~s.mask:
      self._err("deadlock", f"`poll` can never pass: {s.value.offset:#x} has bits outside the mask {s.mask:#x} "
                f"(`(word & {s.mask:#x}) == {s.value.offset:#x}` is never true)", self._value_span(s.span))
    at = attrs.evolve(s.span, column=s.span.column + len("poll")) if s.span is not None else None   # past the keyword (`poll` may name the buffer)
    if (b := self._slice(s.src, at)) is None: return
    lo, hi = s.src.bounds(b.size)
    if 0 <= lo < hi <= b.size and (hi - lo != POLL_SIZE or lo % POLL_SIZE):
      self._err("bounds", f"`poll` reads one aligned 32-bit word (4 bytes at a multiple of 4), not `{_fmt_slice(s.src)}` "
                f"({hi - lo} bytes at {lo})", self._slice_span(s.src, at))

def launches_span(prog: Program, d) -> Optional[Span]:
  """`launches 2..7` in a block's header (a queue may be called `launches`: the last one before the `{`), else its span."""
  sp = d.span
  if sp is None or prog.source is None or sp.line < 1: return sp
  lines = split_lines(prog.source)
  if sp.line > len(lines): return sp
  line = lines[sp.line - 1]
  brace = line.find("{", sp.column - 1)
  ms = list(_LAUNCHES.finditer(line[sp.column - 1:brace if brace >= 0 else len(line)]))
  if not ms: return sp
  return Span(sp.file, sp.line, sp.column + ms[-1].start(), sp.line, sp.column + ms[-1].end())

def valid_launches(r: Optional[tuple]) -> bool:
  """A clause the static check takes (numbered from 1, not empty, within MAX_LAUNCHES), or none."""
  return r is None or (1 <= r[0] <= MAX_LAUNCHES and (r[1] is None or r[0] <= r[1] <= MAX_LAUNCHES))

_LAUNCHES = re.compile(r"launches[ \t]+[0-9A-Fa-fxX_]+(?:[ \t]*\.\.(?:[ \t]*[0-9A-Fa-fxX_]+)?)?")

def _overlap(*ranges) -> bool:
  """Do blocks with these `launches` (None: every launch) share a launch?"""
  first = max((r[0] for r in ranges if r is not None), default=1)
  lasts = [r[1] for r in ranges if r is not None and r[1] is not None]
  return not lasts or first <= min(lasts)

def _shared(*ranges) -> str:
  """` (both in launches 2..4)` when the blocks' clauses narrow where two submits meet."""
  if all(r is None for r in ranges): return ""
  first = max(r[0] for r in ranges if r is not None)
  lasts = [r[1] for r in ranges if r is not None and r[1] is not None]
  return f" (both run in launch{'es' * (not lasts or min(lasts) != first)} {launches_text((first, min(lasts) if lasts else None))})"

def _pinned(s: Slice) -> bool: return s.launch is not None

def _fmt_slice(s: Slice) -> str:
  name = s.buffer.name if s.launch is None else f"{s.buffer.name}@{s.launch}"
  if not s.ranged: return name
  return f"{name}[{'' if s.start is None else s.start}:{'' if s.end is None else s.end}]"

def check_static(prog: Program) -> list[Diagnostic]: return StaticCheck().run(prog)

def check_launches(prog: Program, launches: int, pinned=()) -> list[Diagnostic]:
  """A `bounds` error for each var list (not pinned by the caller) and per-launch buffer listing fewer than `launches`
  values: launch k takes element k, and there is no launch-k element to take."""
  out = []  # an empty list is the static check's error already
  for v in prog.of(Var):
    if v.values and v.name not in pinned and len(v.values) < launches:
      out.append(Diagnostic("bounds", f"var `{v.name}` lists {len(v.values)} value{'s' * (len(v.values) != 1)}, fewer than the {launches} "
                            f"launches asked for", v.span))
  for d in prog.decls:   # a block whose launches all lie past the ones asked for never runs
    if isinstance(d, (Queue, Host)) and d.launches is not None and valid_launches(d.launches) and d.launches[0] > launches:
      what = f"queue `{d.name}`" if isinstance(d, Queue) else "this host block"
      out.append(Diagnostic("bounds", f"{what} takes part in launches {launches_text(d.launches)} only, past the {launches} "
                            f"launch{'es' * (launches != 1)} asked for: it never runs (give at least {d.launches[0]} launches)",
                            launches_span(prog, d)))
  for h in prog.of(Host):
    # a host write lists one entry per launch its block runs in, from the block's first launch
    first = h.launches[0] if h.launches is not None else 1
    last = launches if h.launches is None or h.launches[1] is None else min(h.launches[1], launches)
    for s in h.body:
      if type(s) is HostWrite and first <= last and len(s.launch_inits) < last - first + 1:
        want = f"the {launches} launches asked for" if first == 1 and last == launches else \
               f"its block's launch{'es' * (first != last)} {launches_text((first, last))} in the {launches} asked for"
        out.append(Diagnostic("bounds", f"the host's write of `{_fmt_slice(s.dst)}` lists bytes for {len(s.launch_inits)} "
                              f"launch{'es' * (len(s.launch_inits) != 1)}, fewer than {want}", s.span))
  for b in prog.of(Buffer):
    if b.launch_inits and len(b.launch_inits) < launches:
      out.append(Diagnostic("bounds", f"{b.per_launch} buffer `{b.name}` lists contents for {len(b.launch_inits)} "
                            f"launch{'es' * (len(b.launch_inits) != 1)}, fewer than the {launches} launches asked for", b.span))
  return sorted(out, key=lambda d: (d.span.line, d.span.column) if d.span else (0, 0))
