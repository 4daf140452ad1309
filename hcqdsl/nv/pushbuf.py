"""NVIDIA pushbuffer methods for NV compute and copy queues: encoders producing exactly the dwords tinygrad's
NVComputeQueue / NVCopyQueue emit (ops_nv.py), and a decoder that walks dwords into named method groups. Method
numbers, header layout and flag fields come from tinygrad's generated header (`nv_570`): the host class (NVC56F:
semaphores, on every queue), the compute class (NVC6C0) and the copy class (NVC6B5), on the subchannels tinygrad
binds them to."""
from __future__ import annotations
import functools
from tinygrad.runtime.autogen import nv_570 as nv
from ..ir import U32_MAX
from ..amd.packet import Walker, Packet, raw_packet

__all__ = ["SUBCHANNELS", "flags", "header", "Compute", "Copy", "encoder", "Decoder", "decoder", "decode", "packet_length", "methods",
           "MAX_COPY", "SEM_OPS", "PCAS_ACTION"]

# subchannel -> the class tinygrad's queues address there (NVCommandQueue.setup binds compute to 1, copy to 4; the
# channel's own host methods are subchannel 0)
SUBCHANNELS = {0: "NVC56F", 1: "NVC6C0", 4: "NVC6B5"}
MAX_COPY = 1 << 31   # NVCopyQueue.copy splits a copy in pieces of at most 2 GiB (LINE_LENGTH_IN)
# SEM_EXECUTE's operations (the semaphore methods' compare or store)
SEM_OPS = {getattr(nv, f"NVC56F_SEM_EXECUTE_OPERATION_{n}"): n.lower() for n in
           ("ACQUIRE", "RELEASE", "ACQ_STRICT_GEQ", "ACQ_CIRC_GEQ", "ACQ_AND", "ACQ_NOR", "REDUCTION")}
PCAS_ACTION = nv.NVC6C0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_PREFETCH_SCHEDULE   # what exec sends: prefetch the QMD and schedule it

def flags(reg: str, **kw) -> int:
  """nv_flags: `reg`'s fields set to named values (`operation="release"`) or numbers, from the header's field tuples."""
  return functools.reduce(int.__or__, ((getattr(nv, f"{reg}_{k}_{v}".upper()) if isinstance(v, str) else v) << getattr(nv, f"{reg}_{k}".upper())[1]
                                       for k, v in kw.items()), 0)

def _field(name: str, v: int) -> int:
  hi, lo = getattr(nv, name)
  return (v & ((1 << (hi - lo + 1)) - 1)) << lo

def header(subc: int, method: int, count: int) -> int:
  """An incrementing-method header (NVC56F_DMA_INCR_*): `count` data dwords to `method`, `method + 4`, ..."""
  return (_field("NVC56F_DMA_INCR_OPCODE", nv.NVC56F_DMA_INCR_OPCODE_VALUE) | _field("NVC56F_DMA_INCR_COUNT", count) |
          _field("NVC56F_DMA_INCR_SUBCHANNEL", subc) | _field("NVC56F_DMA_INCR_ADDRESS", method >> 2))

_SEM = header(0, nv.NVC56F_SEM_ADDR_LO, 5)   # SEM_ADDR_LO, SEM_ADDR_HI, SEM_PAYLOAD_LO, SEM_PAYLOAD_HI, SEM_EXECUTE
SEM_WAIT = flags("NVC56F_SEM_EXECUTE", operation="acq_circ_geq", payload_size="64bit")
SEM_SIGNAL = flags("NVC56F_SEM_EXECUTE", operation="release", release_wfi="en", payload_size="64bit", release_timestamp="en")
SEM_WRITE = {b64: flags("NVC56F_SEM_EXECUTE", operation="release", release_wfi="en", payload_size="64bit" if b64 else "32bit")
             for b64 in (False, True)}
SEM_POLL = {op: flags("NVC56F_SEM_EXECUTE", operation=op, payload_size="32bit") for op in ("acq_and", "acq_nor")}

class Host:
  """The semaphore methods every NV queue has (NVCommandQueue)."""
  # dword offsets, from the start of the statement's methods, of the value and address a launch patches
  WAIT_VALUE_AT, WRITE_ADDR_AT, WRITE_VALUE_AT, POLL_ADDR_AT, POLL_VALUE_AT = 3, 1, 3, 1, 3

  def wait(self, out: list, addr: int, value: int):
    """SEM_EXECUTE ACQ_CIRC_GEQ on the 64-bit payload (NVCommandQueue.wait)."""
    out += (_SEM, addr & U32_MAX, addr >> 32, value & U32_MAX, value >> 32, SEM_WAIT)

class Compute(Host):
  """NVComputeQueue's methods (the QMD side of `exec` and of a `signal` after it is hcqdsl/nv/compile.py's)."""
  SIGNAL_VALUE_AT = 3
  BARRIER = (header(1, nv.NVC6C0_INVALIDATE_SHADER_CACHES_NO_WFI, 1),
             flags("NVC6C0_INVALIDATE_SHADER_CACHES_NO_WFI", instruction="true", global_data="true", constant="true"))
  NON_STALL = (header(0, nv.NVC56F_NON_STALL_INTERRUPT, 1), 0)
  PCAS = (header(1, nv.NVC6C0_SEND_PCAS_A, 1), header(1, nv.NVC6C0_SEND_SIGNALING_PCAS2_B, 1), PCAS_ACTION)

  def signal(self, out: list, addr: int, value: int):
    """SEM_EXECUTE RELEASE (wait for idle, 64-bit payload, timestamp) and a non-stall interrupt (NVComputeQueue.signal
    with no QMD to carry it)."""
    out += (_SEM, addr & U32_MAX, addr >> 32, value & U32_MAX, value >> 32, SEM_SIGNAL, *self.NON_STALL)

  def write(self, out: list, addr: int, value: int, b64: bool = False):
    """SEM_EXECUTE RELEASE of a 32- or 64-bit payload, no timestamp (NVComputeQueue.write)."""
    out += (_SEM, addr & U32_MAX, addr >> 32, value & U32_MAX, value >> 32, SEM_WRITE[b64])

  def poll(self, out: list, addr: int, value: int, mask: int):
    """NVComputeQueue.poll_bit: SEM_EXECUTE ACQ_NOR of ~mask when waiting for the bits clear (value 0), else ACQ_AND
    of the value (any bit of it set)."""
    payload = (~mask & U32_MAX) if value == 0 else value
    out += (_SEM, addr & U32_MAX, addr >> 32, payload & U32_MAX, payload >> 32, SEM_POLL["acq_nor" if value == 0 else "acq_and"])

  def barrier(self, out: list):
    """INVALIDATE_SHADER_CACHES_NO_WFI of instruction, global data and constant caches (NVComputeQueue.memory_barrier)."""
    out += self.BARRIER

  def launch(self, out: list, qmd_addr: int):
    """SEND_PCAS_A with the QMD's address >> 8, then SEND_SIGNALING_PCAS2_B prefetch-and-schedule (NVComputeQueue.exec
    when no QMD is active)."""
    h, h2, act = self.PCAS
    out += (h, qmd_addr >> 8, h2, act)

class Copy(Host):
  """NVCopyQueue's methods."""
  SIGNAL_VALUE_AT = 3
  # a copy piece: OFFSET_IN_UPPER..OFFSET_OUT_LOWER (src hi, src lo, dst hi, dst lo), LINE_LENGTH_IN, LAUNCH_DMA
  COPY_DWORDS, COPY_SRC_AT, COPY_DST_AT = 9, 1, 3   # the addresses' high dwords (their low dwords follow)
  max_copy_size = MAX_COPY
  OFFSETS, LENGTH = header(4, nv.NVC6B5_OFFSET_IN_UPPER, 4), header(4, nv.NVC6B5_LINE_LENGTH_IN, 1)
  LAUNCH = header(4, nv.NVC6B5_LAUNCH_DMA, 1)
  COPY_FLAGS = flags("NVC6B5_LAUNCH_DMA", data_transfer_type="non_pipelined", src_memory_layout="pitch", dst_memory_layout="pitch")
  SEMA = header(4, nv.NVC6B5_SET_SEMAPHORE_A, 3)
  SEM_FLAGS = flags("NVC6B5_LAUNCH_DMA", flush_enable="true", semaphore_type="release_four_word_semaphore")

  def signal(self, out: list, addr: int, value: int):
    """SET_SEMAPHORE_A/B/PAYLOAD, then LAUNCH_DMA releasing a four-word semaphore (payload, timestamp) after a flush
    (NVCopyQueue.signal)."""
    out += (self.SEMA, addr >> 32, addr & U32_MAX, value & U32_MAX, self.LAUNCH, self.SEM_FLAGS)

  def copy(self, out: list, dst: int, src: int, size: int):
    """OFFSET_IN/OUT, LINE_LENGTH_IN, LAUNCH_DMA non-pipelined pitch-to-pitch, per piece of at most 2 GiB (NVCopyQueue.copy)."""
    for off in range(0, size, MAX_COPY):
      s, d = src + off, dst + off
      out += (self.OFFSETS, s >> 32, s & U32_MAX, d >> 32, d & U32_MAX, self.LENGTH, min(size - off, MAX_COPY), self.LAUNCH, self.COPY_FLAGS)

  def copy_packets(self, size: int) -> int: return -(-size // MAX_COPY)

@functools.cache
def encoder(engine: str):
  """The method encoder of a queue engine (compute or copy); the same on every NV architecture."""
  return Compute() if engine == "compute" else Copy()

# ---------------------------------------------------------------- decoder

def _bits(v: int, f: tuple) -> int: return (v >> f[1]) & ((1 << (f[0] - f[1] + 1)) - 1)

@functools.cache
def _class(prefix: str) -> tuple:
  """method -> name, and method name -> its enumerated fields ((field, (hi, lo), {value: name}), ...), from the header.
  A method is a constant with fields; a field's named values are the constants below it."""
  consts = {k[len(prefix) + 1:]: v for k, v in vars(nv).items() if k.startswith(prefix + "_") and "QMDV" not in k}
  tups = {k: v for k, v in consts.items() if type(v) is tuple}
  methods: dict = {}
  for k, v in consts.items():
    if type(v) is int and v % 4 == 0 and v < 0x4000 and any(t.startswith(k + "_") for t in tups) and \
       not any(k.startswith(t + "_") for t in tups):
      methods.setdefault(v, k)
  enums: dict = {}
  for m in methods.values():
    for t, f in tups.items():
      if not t.startswith(m + "_") or any(t.startswith(o + "_") and len(o) > len(m) for o in methods.values()): continue
      vals = {x: n[len(t) + 1:] for n, x in consts.items() if n.startswith(t + "_") and type(x) is int and n[len(t) + 1:] not in tups}
      if vals: enums.setdefault(m, []).append((t[len(m) + 1:].lower(), f, vals))
  return methods, {m: tuple(sorted(fs, key=lambda x: x[1][1])) for m, fs in enums.items()}

def method_names() -> tuple:
  """The name of every method of the classes tinygrad binds (SUBCHANNELS), as the decoder names them."""
  return tuple(n for cls in SUBCHANNELS.values() for n in _class(cls)[0].values())

# opcodes of a method header (NVC56F_DMA_*_OPCODE_VALUE): how its data dwords map to methods
_INCR, _NONINCR, _ONEINCR, _IMMD = (nv.NVC56F_DMA_INCR_OPCODE_VALUE, nv.NVC56F_DMA_NONINCR_OPCODE_VALUE, nv.NVC56F_DMA_ONEINCR_OPCODE_VALUE,
                                    nv.NVC56F_DMA_IMMD_OPCODE_VALUE)
_OPCODE, _COUNT, _SUBC, _ADDR = nv.NVC56F_DMA_INCR_OPCODE, nv.NVC56F_DMA_INCR_COUNT, nv.NVC56F_DMA_INCR_SUBCHANNEL, nv.NVC56F_DMA_INCR_ADDRESS
# 64-bit values split over two methods: (joined field, low method, high method)
_JOIN = (("sem_addr", "sem_addr_lo", "sem_addr_hi"), ("sem_payload", "sem_payload_lo", "sem_payload_hi"),
         ("src_addr", "offset_in_lower", "offset_in_upper"), ("dst_addr", "offset_out_lower", "offset_out_upper"),
         ("semaphore_addr", "set_semaphore_b", "set_semaphore_a"))

def packet_length(h: int, get=None) -> int:
  """Dwords of the method group whose header is `h`: the header and its data dwords (an immediate-data header stands
  alone, as does an unknown opcode). The one length rule of the decoder and the emulator."""
  op = _bits(h, _OPCODE)
  return 1 + _bits(h, _COUNT) if op in (_INCR, _NONINCR, _ONEINCR) else 1

def methods(dw, i: int = 0) -> list:
  """(subchannel, method, value) of each data dword of the method group whose header is dw[i] (as far as dw goes): how
  an engine applies it. Incrementing groups step the method by 4 per dword, non-incrementing keep it, one-increment
  groups step once; an immediate header carries its one value itself."""
  h = dw[i]
  op, count, subc, m0 = _bits(h, _OPCODE), _bits(h, _COUNT), _bits(h, _SUBC), _bits(h, _ADDR) << 2
  if op == _IMMD: return [(subc, m0, count)]
  if op not in (_INCR, _NONINCR, _ONEINCR): return []
  step = {_INCR: lambda k: 4 * k, _NONINCR: lambda k: 0, _ONEINCR: lambda k: 4 * min(k, 1)}[op]
  return [(subc, m0 + step(k), dw[i + 1 + k]) for k in range(min(count, len(dw) - i - 1))]

class Decoder(Walker):
  """Method groups: one Packet per header, named by its methods (`SEM_ADDR_LO..SEM_EXECUTE`), fields the methods'
  values (lower case) with 64-bit pairs joined and enumerated flag fields named (`sem_execute.operation`)."""
  def decode_one(self, dw, i: int) -> Packet:
    h, n = dw[i], len(dw)
    op, count, subc, m0 = _bits(h, _OPCODE), _bits(h, _COUNT), _bits(h, _SUBC), _bits(h, _ADDR) << 2
    cls = SUBCHANNELS.get(subc)
    if op not in (_INCR, _NONINCR, _ONEINCR, _IMMD): return raw_packet(dw, i, 1, f"method header {h:#010x} with opcode {op}", name=f"OPCODE_{op}")
    if cls is None: return raw_packet(dw, i, packet_length(h), f"subchannel {subc} is bound to no class", name=f"SUBCHANNEL_{subc}")
    names_of, enums = _class(cls)
    if op != _IMMD and i + 1 + count > n:
      return raw_packet(dw, i, n - i, f"truncated: {count} data dwords, {n - i - 1} left", name=names_of.get(m0, f"METHOD_{m0:#x}"))
    ms = methods(dw, i)
    addrs, data = [m for _, m, _ in ms], [v for _, _, v in ms]
    names = [names_of.get(a, f"METHOD_{a:#x}") for a in addrs]
    fields: dict = {"subchannel": subc, "class": cls}
    for a, nm, v in zip(addrs, names, data):
      fields[nm.lower()] = v
      for f, bits, vals in enums.get(nm, ()):
        x = _bits(v, bits)
        if x or f == enums[nm][0][0]: fields[f"{nm.lower()}.{f}"] = vals.get(x, x)
    for j, lo, hi in _JOIN:   # a 64-bit value stands for its halves
      if lo in fields and hi in fields: fields[j] = fields.pop(lo) | (fields.pop(hi) << 32)
    if "send_pcas_a" in fields: fields["qmd_addr"] = fields["send_pcas_a"] << 8
    # (a count of 0: a header with no data dwords, which sets nothing; named by its method)
    name = names_of.get(m0, f"METHOD_{m0:#x}") if not names else names[0] if len(set(names)) == 1 else f"{names[0]}..{names[-1]}"
    return Packet(i, name, packet_length(h), fields, tuple(dw[i:i + packet_length(h)]))

@functools.cache
def decoder(target: str = "") -> Decoder:
  """The decoder (the same for every NV architecture and both engines: the subchannel names the class)."""
  return Decoder()

def decode(dwords, target: str = "") -> list[Packet]: return decoder(target).decode(dwords)
