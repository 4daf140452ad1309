"""What NV's pushbuffer methods and QMDs mean, stated once: for each decoded method group (nv/pushbuf.py's decoder),
which statement kind it is (wait, signal, write, poll, dispatch, copy, barrier) and where its fields sit; for each QMD
what it launches (program, kernel arguments, grid, workgroup), the semaphores it releases and the QMD it launches next;
and the one walk of a QMD chain. Every consumer (capture, the lifts, the emulator's engine) asks this module; none
re-derives a method's meaning from its fields. The rules are a table (`MEANINGS`), first match per group wins."""
from __future__ import annotations
from typing import Callable, Iterator, Optional
import attrs
from ..ir import U32_MAX, POLL_SIZE
from .qmd import QMD

__all__ = ["Meaning", "Rule", "MEANINGS", "KINDS", "SIGNALS", "SIGNAL_MEMORY", "SEM_COMPARE", "SETUP_METHODS", "STATEMENT_TAILS",
           "meaning", "copy_length", "Release", "Launch", "launch", "qmd_chain", "MAX_CHAIN", "WPTR_BYTES"]

# bytes one step of a queue's write pointer covers in hcqdsl's model of NV's queues (runtime/submit.py, the engine):
# both engines' pushbuffers are rings of method dwords, their pointers counting dwords
WPTR_BYTES = {"compute": 4, "copy": 4}

KINDS = ("wait", "signal", "write", "poll", "compare", "dispatch", "copy", "length", "barrier")
SIGNALS = ("wait", "signal")            # the kinds that name a signal, as the lifts classify them
# what capture records as a signal's memory (its value read before the GPU runs): a superset of SIGNALS (an acquire
# that is no `wait` still compares a signal), so that what the lifters later classify was recorded
SIGNAL_MEMORY = SIGNALS + ("compare",)

# SEM_EXECUTE's acquire operations -> the comparison they make, as a hang report shows it (an ACQ_AND / ACQ_NOR is
# `(word & mask) == value`, with the mask and value `meaning` gives)
SEM_COMPARE = {"ACQ_CIRC_GEQ": ">=", "ACQ_STRICT_GEQ": ">=", "ACQUIRE": "==", "ACQ_AND": "==", "ACQ_NOR": "=="}

# methods that set up a channel (tinygrad's NVCommandQueue.setup: the class bound to a subchannel, the shader memory
# windows and local memory; PM_TRIGGER, the profiler's): channel state, no statement (a capture's first submissions)
SETUP_METHODS = ("SET_OBJECT", "SET_SHADER_LOCAL_MEMORY", "SET_SHADER_SHARED_MEMORY", "PM_TRIGGER")
# the method groups that end the statement before them: a release's interrupt, SEND_PCAS_A's action, a copy piece's
# length and launch
STATEMENT_TAILS = ("NON_STALL_INTERRUPT", "SEND_SIGNALING_PCAS2_B", "LINE_LENGTH_IN", "LAUNCH_DMA")

_SEM, _COPY_SEM, _COPY = "SEM_ADDR_LO..SEM_EXECUTE", "SET_SEMAPHORE_A..SET_SEMAPHORE_PAYLOAD", "OFFSET_IN_UPPER..OFFSET_OUT_LOWER"

@attrs.frozen
class Rule:
  """One row of MEANINGS: group `packet` means `kind` when `when(fields)`; its address in field `addr` (the decoder's
  joined 64-bit field, whose low half is dword `addr_at` of the group), its value in field `value` (dword `value_at`),
  `size(fields)` bytes there; a copy's source in `src` (dword `src_at`)."""
  packet: str
  kind: str
  when: Callable[[dict], bool]
  addr: Optional[str] = None
  addr_at: Optional[int] = None
  value: Optional[str] = None
  value_at: Optional[int] = None
  size: Callable[[dict], int] = lambda f: 0
  src: Optional[str] = None
  src_at: Optional[int] = None

def _op(*ops: str) -> Callable[[dict], bool]: return lambda f: f.get("sem_execute.operation") in ops
def _timestamped(f: dict) -> bool: return f.get("sem_execute.release_timestamp") == "EN"
def _payload_bytes(f: dict) -> int: return 8 if f.get("sem_execute.payload_size") == "64BIT" else 4

MEANINGS: tuple = (
  # the host class's semaphore (every queue): SEM_ADDR_LO, SEM_ADDR_HI, SEM_PAYLOAD_LO, SEM_PAYLOAD_HI, SEM_EXECUTE
  Rule(_SEM, "wait", _op("ACQ_CIRC_GEQ"), "sem_addr", 1, "sem_payload", 3, lambda f: 8),
  Rule(_SEM, "compare", _op("ACQ_STRICT_GEQ", "ACQUIRE"), "sem_addr", 1, "sem_payload", 3, lambda f: 8),
  Rule(_SEM, "signal", lambda f: _op("RELEASE")(f) and _timestamped(f), "sem_addr", 1, "sem_payload", 3, lambda f: 8),  # NVCommandQueue.signal
  Rule(_SEM, "write", _op("RELEASE"), "sem_addr", 1, "sem_payload", 3, _payload_bytes),   # HWQueue.write: no timestamp
  Rule(_SEM, "poll", _op("ACQ_AND", "ACQ_NOR"), "sem_addr", 1, "sem_payload", 3, lambda f: POLL_SIZE),
  # the compute class
  Rule("SEND_PCAS_A", "dispatch", lambda f: True, "qmd_addr"),   # the QMD it launches: `launch` reads it
  Rule("INVALIDATE_SHADER_CACHES_NO_WFI", "barrier", lambda f: True),
  # the copy class: a piece's addresses, then its length, then LAUNCH_DMA; a copy queue's release semaphore
  Rule(_COPY, "copy", lambda f: True, "dst_addr", 3, src="src_addr", src_at=1),
  Rule("LINE_LENGTH_IN", "length", lambda f: True, value="line_length_in"),
  Rule(_COPY_SEM, "signal", lambda f: True, "semaphore_addr", 1, "set_semaphore_payload", 3, lambda f: 8),
)
assert {r.kind for r in MEANINGS} <= set(KINDS)
_BY_PACKET: dict = {}
for _r in MEANINGS: _BY_PACKET.setdefault(_r.packet, []).append(_r)

@attrs.frozen
class Meaning:
  """What one method group means: its kind, the address it waits on, releases to, launches or copies to, the bytes
  there, its value (a semaphore's payload, low 32 bits), the dword offsets of the address's low half and the value in
  the stream decoded; a poll's mask and the value it compares with, an acquire's comparison (SEM_COMPARE); a copy's
  source address and its dword offset. A field the kind has none of is 0 (the comparison: None); the decoder
  joins a group's 64-bit values only when it holds both halves, which every rule's group does."""
  kind: str
  addr: int = 0
  size: int = 0
  value: int = 0
  addr_at: int = 0
  value_at: int = 0
  mask: int = 0
  compare: Optional[str] = None
  src: int = 0
  src_at: int = 0

def meaning(p) -> Optional[Meaning]:
  """What method group `p` (decoded by nv/pushbuf.py) means, by MEANINGS; None: nothing a statement says."""
  if p.raw: return None
  f = p.fields
  for r in _BY_PACKET.get(p.name, ()):
    if not r.when(f): continue
    v = f[r.value] if r.value else 0
    v = v & U32_MAX if r.packet == _SEM else v
    op = f.get("sem_execute.operation")
    mask = (v if op == "ACQ_AND" else ~v & U32_MAX) if r.kind == "poll" else 0
    if r.kind == "poll": v = v if op == "ACQ_AND" else 0   # ACQ_AND: some bit of the payload set; ACQ_NOR: some bit of it clear
    def at(k: Optional[int]) -> int: return 0 if k is None else p.offset + k
    return Meaning(r.kind, f[r.addr] if r.addr else 0, r.size(f), v, at(r.addr_at), at(r.value_at), mask,
                   SEM_COMPARE.get(op) if r.packet == _SEM else None, f[r.src] if r.src else 0, at(r.src_at))
  return None

def copy_length(packets: list, j: int) -> int:
  """The bytes copy piece `packets[j]` (OFFSET_IN..OFFSET_OUT) moves: the LINE_LENGTH_IN after it, before the next
  piece (0: none — a piece without its length)."""
  for q in packets[j + 1:]:
    if (x := meaning(q)) is not None and x.kind in ("length", "copy"): return x.value if x.kind == "length" else 0
  return 0

# ---- QMDs: what one launches, and the chain of QMDs it launches after it (DEPENDENT_QMD0)

@attrs.frozen
class Release:
  """A QMD's release semaphore: its address, payload (64-bit when `wide`) and the payload's byte offset in the QMD."""
  addr: int
  value: int
  value_at: int
  wide: bool

@attrs.frozen
class Launch:
  """What a QMD launches: the program and kernel-argument (constant bank 0) addresses, the grid and its byte offset in
  the QMD, the workgroup size, the release semaphores written after the kernel, and the QMD launched next (None: the
  chain ends; `dependent_action` is DEPENDENT_QMD0_ACTION, 1 the only one tinygrad uses)."""
  program: int
  kernargs: int
  grid: tuple
  grid_at: int
  block: tuple
  releases: tuple
  dependent: Optional[int]
  dependent_action: int

def launch(qmd: QMD) -> Launch:
  """What `qmd` launches (qmd.py's fields, as tinygrad's NVComputeQueue.exec and signal write them)."""
  go, bo, d = qmd.offset(qmd.grid_field()), qmd.offset("cta_thread_dimension0"), qmd.data
  grid = tuple(int.from_bytes(d[go + 4 * j:go + 4 * j + 4], "little") for j in range(3))
  block = (int.from_bytes(d[bo:bo + 2], "little"), int.from_bytes(d[bo + 2:bo + 4], "little"), d[qmd.offset("cta_thread_dimension2")])
  releases = []
  for i in range(2):
    en, _, pf = qmd.release_fields(i)
    if not qmd.read(en): continue
    wide = bool("release0_payload64b" in qmd.fields and qmd.read(f"release{i}_payload64b"))
    releases.append(Release(qmd.address(f"release{i}"), qmd.read(pf) | (qmd.read(pf.replace("lower", "upper")) << 32 if wide else 0),
                            qmd.offset(pf), wide))
  dep = qmd.read("dependent_qmd0_enable")
  return Launch(qmd.address("program"), qmd.address("cbuf0"), grid, go, block, tuple(releases), qmd.address("dependent") if dep else None,
                qmd.read("dependent_qmd0_action") if dep else 0)

# QMDs one SEND_PCAS_A may launch through dependent pointers. A chain is one submission's execs in a row (tinygrad's
# NVComputeQueue and hcqdsl's NV lowering chain each exec's QMD to the one before it), so no real chain comes near
# this; the bound is for corrupt memory whose pointers never repeat (a repeat is a cycle: the walk ends there), so
# that capture, the lifts and the emulator each read at most this many QMDs.
MAX_CHAIN = 1 << 16

def qmd_chain(qa: int, read: Callable[[int], Optional[QMD]]) -> Iterator[tuple]:
  """(address, QMD, Launch) of each QMD from `qa` on, following dependent pointers; `read(addr)` gives the QMD there
  (None: unreadable, the chain ends). Ends at a QMD seen before (a cycle) or after MAX_CHAIN QMDs: then the last
  Launch still names a dependent QMD."""
  seen: set = set()
  while qa and qa not in seen and len(seen) < MAX_CHAIN:
    seen.add(qa)
    if (qmd := read(qa)) is None: return
    got = launch(qmd)
    yield qa, qmd, got
    qa = got.dependent or 0
