"""What an editor shows on hover (Markdown): for a name, its declaration and uses — a signal's writers and waiters,
a buffer's accesses (which statement reads or writes which bytes), a var's values, a device's queues, a kernel's
execs, a queue's statements; for a statement, what it compiles to on the file's target — the packets (PM4, SDMA) or
methods and QMD (NV) that the image's source map gives it, listed by its vendor (vendors.disasm_statement)."""
from __future__ import annotations
from typing import Optional
from ..ir import (Program, Device, Buffer, Signal, Var, Kernel, Queue, Host, Wait, SignalWrite, Exec, Copy, Write,
                  HostWrite, Poll, Timestamp, Epoch, Submit, Slice, timeline_of, device_arch)
from ..lang.format import format_stmt, format_decl
from ..lang.lexical import range_text
from .names import Names, refs

__all__ = ["hover_name", "hover_statement", "block_of", "MAX_LISTED"]

MAX_LISTED = 12   # uses listed per kind; the rest are counted

def block_of(prog: Program) -> dict[int, tuple[str, int]]:
  """id(statement) -> (its block's name: a queue's, or "host"; its index in the block)."""
  out = {}
  for d in prog.decls:
    if type(d) in (Queue, Host):
      name = d.name if type(d) is Queue else "host"
      for i, s in enumerate(d.body): out[id(s)] = (name, i)
  return out

def _where(s, blocks) -> str:
  return f"`{blocks[id(s)][0]}` line {s.span.line}" if s.span is not None else f"`{blocks[id(s)][0]}`"

def _listing(title: str, items: list[str]) -> list[str]:
  if not items: return [f"**{title}:** none"]
  more = len(items) - MAX_LISTED
  return [f"**{title}** ({len(items)}):", *(f"- {x}" for x in items[:MAX_LISTED]), *([f"- ... and {more} more"] if more > 0 else [])]

def _statements(prog: Program):
  for d in prog.decls:
    if type(d) in (Queue, Host):
      for s in d.body: yield d, s

def _signal(prog: Program, name: str, blocks) -> list[str]:
  writers, waiters = [], []
  dev = name[:-len(".timeline")] if name.endswith(".timeline") else None
  for d, s in _statements(prog):
    t = type(s)
    if t in (SignalWrite, Timestamp) and s.signal.name == name: writers.append(f"{_where(s, blocks)}: `{format_stmt(s)}`")
    elif t is Wait and s.signal.name == name: waiters.append(f"{_where(s, blocks)}: `{format_stmt(s)}`")
    elif t is Epoch and dev is not None and type(d) is Queue and d.device.name == dev:
      waiters.append(f"{_where(s, blocks)}: `epoch` (waits `{name} >= {dev}.epoch - 1`)")
  return _listing("writers", writers) + _listing("waiters", waiters)

def _modes(prog: Program, s, buf: str) -> list[tuple[str, Slice]]:
  """(how, slice) for each access statement `s` makes to buffer `buf`."""
  t = type(s)
  if t is Exec:
    k = next((k for k in prog.kernels if k.name == s.kernel.name), None)
    out = []
    for i, a in enumerate(s.args):
      if type(a) is not Slice or a.buffer.name != buf: continue
      p = k.params[i] if k is not None and i < len(k.params) else None
      out.append(("reads and writes" if p is not None and p.reads and p.writes else "writes" if p is not None and p.writes
                  else "reads", a))
    return out
  if t is Copy:
    return [(how, x) for how, x in (("writes", s.dst), ("reads", s.src)) if x.buffer.name == buf]
  if t in (Write, HostWrite) and s.dst.buffer.name == buf: return [("writes", s.dst)]
  if t is Poll and s.src.buffer.name == buf: return [("polls", s.src)]
  return []

def _buffer(prog: Program, b: Buffer, blocks) -> list[str]:
  acc = []
  for _, s in _statements(prog):
    for how, x in _modes(prog, s, b.name):
      rng = range_text(*x.bounds(b.size))
      acc.append(f"{_where(s, blocks)}: {how} `{b.name}{rng}`{f' (launch {x.launch})' if x.launch is not None else ''}: `{format_stmt(s)}`")
  out = _listing("accesses", acc)
  checks = [f"line {e.span.line}: `{format_decl(e)[:80]}`" for e in prog.expects if e.target.buffer.name == b.name and e.span]
  if checks: out += _listing("expects", checks)
  code = [k.name for k in prog.kernels if k.impl is not None and k.impl.code == b.name]
  if code: out.append(f"holds the code of kernel{'s' * (len(code) > 1)} {', '.join(f'`{c}`' for c in code)}")
  return out

def _uses(prog: Program, name: str, blocks) -> list[str]:
  return [f"{_where(s, blocks)}: `{format_stmt(s)}`" for _, s in _statements(prog) if name in refs(s)]

def _device(prog: Program, d: Device, target: Optional[str]) -> list[str]:
  arch = device_arch(d, target)
  out = [f"{d.vendor} device {d.index}, {arch}{'' if d.arch else ' (not declared: the default)'}"]
  qs = [f"`{q.name}` ({q.engine}, {len(q.body)} statement{'s' * (len(q.body) != 1)})" for q in prog.queues if q.device.name == d.name]
  out += _listing("queues", qs)
  nb = sum(1 for b in prog.buffers if b.device is not None and b.device.name == d.name)
  ns = sum(1 for s in prog.of(Signal) if s.device is not None and s.device.name == d.name)
  out.append(f"{nb} buffer{'s' * (nb != 1)}, {ns} signal{'s' * (ns != 1)} and its `{timeline_of(d.name)}`, `{d.name}.epoch`")
  return out

def hover_name(names: Names, name: str, target: Optional[str] = None) -> Optional[str]:
  """Markdown for the name `name` (a declared one, or a device's `D.timeline` / `D.epoch`), else None."""
  prog = names.program
  d = names.decls.get(name)
  if d is None: return None
  blocks = block_of(prog)
  implicit = "." in name and type(d) in (Signal, Var)
  head = (f"`{name}`: the implicit {'timeline signal' if type(d) is Signal else 'launch-number var'} of device "
          f"`{name.split('.', 1)[0]}`" if implicit else f"```hcq\n{format_decl(d) if type(d) is not Queue else _queue_head(d)}\n```")
  lines = [head]
  if type(d) is Signal: lines += _signal(prog, name, blocks)
  elif type(d) is Buffer: lines += _buffer(prog, d, blocks)
  elif type(d) is Var:
    if not implicit:
      lines.append("values per launch: " + (", ".join(map(str, d.values)) if d.values is not None else "the launch number (1, 2, ...)"))
    lines += _listing("uses", _uses(prog, name, blocks))
  elif type(d) is Device: lines += _device(prog, d, target)
  elif type(d) is Kernel: lines += _listing("execs", _uses(prog, name, blocks))
  elif type(d) is Queue:
    subs = [f"{_where(s, blocks)}: `{format_stmt(s)}`" for _, s in _statements(prog) if type(s) is Submit and any(q.name == name for q in s.queues)]
    lines.append(f"{len(d.body)} statement{'s' * (len(d.body) != 1)}")
    if subs: lines += _listing("submitted", subs)
  return "\n\n".join(_paragraphs(lines))

def _queue_head(q: Queue) -> str: return f"queue {q.name} {q.engine} on {q.device.name}"

def _paragraphs(lines: list[str]) -> list[str]:
  """List items kept together under their title (one Markdown paragraph break between the groups)."""
  out: list[str] = []
  for ln in lines:
    if ln.startswith("- ") and out: out[-1] += "\n" + ln
    else: out.append(ln)
  return out

def hover_statement(names: Names, node, image, error: Optional[str] = None) -> Optional[str]:
  """Markdown for a statement: what it compiles to (`image`: the program's image on the file's target, None with
  `error` saying why there is none). A host statement is a host step: no packets."""
  from ..vendors import disasm_statement
  blocks = block_of(names.program)
  if id(node) not in blocks: return None
  block, index = blocks[id(node)]
  head = f"```hcq\n{format_stmt(node)}\n```"
  if block == "host": return head + "\n\na host step: the CPU does it, no packets"
  if image is None: return head + f"\n\nno packets to show: {error or 'the program does not compile'}"
  q = next((q for q in image.queues if q.name == block), None)
  if q is None or index >= len(q.stmts): return head
  e = q.stmts[index]
  what = f"`{block}` ({q.engine}, {q.arch}, {q.packet_format}): dwords {e.offset}..{e.offset + e.length}"
  body = disasm_statement(image, block, index)
  if not body: return head + f"\n\n{what}: no packets"
  return head + f"\n\ncompiles to, on {what}:\n\n```\n" + "\n".join(body) + "\n```"
