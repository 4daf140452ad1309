"""PM4 (type-3) packets for AMD compute queues: encoders producing exactly the dwords tinygrad's AMDComputeQueue emits,
and a decoder that walks dwords into named packets. Constants come from tinygrad's pm4_nv / pm4_soc15 headers."""
from __future__ import annotations
import functools
from typing import Any
from tinygrad.runtime.autogen.am import pm4_nv
from .targets import Target, get_target, unmasked
from ..ir import U32_MAX
from .packet import Walker, Packet, raw_packet, join64

# SET_UCONFIG_REG's offsets count from here (the same in pm4_nv and pm4_soc15); the emulator keys those registers by
# their absolute address, apart from the SH registers it keys by SET_SH_REG offset
UCONFIG_REG_START = pm4_nv.PACKET3_SET_UCONFIG_REG_START

# the PM4 header's framing (pm4_soc15 defines it the same): packet type, count (body dwords - 1), type-3 opcode
packet_type, packet_count, packet_opcode = pm4_nv.CP_PACKET_GET_TYPE, pm4_nv.CP_PACKET_GET_COUNT, pm4_nv.CP_PACKET3_GET_OPCODE

def packet_length(h: int, get=None) -> int:
  """Dwords of the PM4 packet whose header dword is `h`: a type-3 header and count + 1 body dwords; any other header
  dword stands alone. The one PM4 length rule of the decoder, the emulator and the submitter (`get`, the next dwords,
  is unused: the SDMA rule's signature)."""
  return packet_count(h) + 2 if packet_type(h) == pm4_nv.PACKET_TYPE3 else 1

# WAIT_REG_MEM's compare functions (SDMA POLL_REGMEM uses the same codes): code -> the comparison of the polled
# value with the reference; only the gfx10+ header names them
WAIT_FUNCTIONS = {getattr(pm4_nv, f"PACKET3_WAIT_REG_MEM__FUNCTION__{name}"): op for name, op in (
  ("ALWAYS_PASS", "always"), ("LESS_THAN_REF_VALUE", "<"), ("LESS_THAN_EQUAL_TO_THE_REF_VALUE", "<="),
  ("EQUAL_TO_THE_REFERENCE_VALUE", "=="), ("NOT_EQUAL_REFERENCE_VALUE", "!="),
  ("GREATER_THAN_OR_EQUAL_REFERENCE_VALUE", ">="), ("GREATER_THAN_REFERENCE_VALUE", ">"))}
FUNC_GE = pm4_nv.PACKET3_WAIT_REG_MEM__FUNCTION__GREATER_THAN_OR_EQUAL_REFERENCE_VALUE   # the one .hcq waits use
FUNC_EQ = pm4_nv.PACKET3_WAIT_REG_MEM__FUNCTION__EQUAL_TO_THE_REFERENCE_VALUE   # the one .hcq polls use (poll_bit)
EVENT_INDEX_CS_PARTIAL_FLUSH = pm4_nv.PACKET3_EVENT_WRITE__EVENT_INDEX__CS_PARTIAL_FLUSH
# RELEASE_MEM's data_sel: what the packet stores (the 32-bit value, 64 bits, the GPU clock: `timestamp`)
DATA_SEL_32, DATA_SEL_64, DATA_SEL_CLOCK = (pm4_nv.data_sel__mec_release_mem__send_32_bit_low, pm4_nv.data_sel__mec_release_mem__send_64_bit_data,
                                            pm4_nv.data_sel__mec_release_mem__send_gpu_clock_counter)
POLL_INTERVAL = 4  # WAIT_REG_MEM poll interval tinygrad uses

class PM4:
  """Encoders for one target. Each method appends the packet's dwords to `out` (a list of ints) — no objects, no
  per-call lookups: every constant dword is computed once here."""
  # dword offset, from the start of the statement's packets, of the 32-bit value (or an address's low dword) that a
  # launch patches: from the packets' layouts (_SPECS, set below it), as the decoder reads them
  WAIT_VALUE_AT: int
  SIGNAL_VALUE_AT: int
  WRITE_VALUE_AT: int
  WRITE_ADDR_AT: int
  POLL_VALUE_AT: int
  POLL_ADDR_AT: int
  # dword offsets, counted back from the end of an exec's packets, of the workgroup size (x, y, z: COMPUTE_NUM_THREAD_*)
  # and of the grid (DISPATCH_DIRECT's dim_x, y, z)
  EXEC_BLOCK_FROM_END, EXEC_GRID_FROM_END = 12, 6

  def __init__(self, t: Target):
    p, gc, self.t = t.pm4, t.gc, t
    gfx9, P3 = t.gen == 9, p.PACKET3
    self.WRM = P3(p.PACKET3_WAIT_REG_MEM, 5)
    self.IB, self.IB_VALID = P3(p.PACKET3_INDIRECT_BUFFER, 2), p.INDIRECT_BUFFER_VALID
    self.WRM_MEM_GE = p.WAIT_REG_MEM_MEM_SPACE(1) | p.WAIT_REG_MEM_OPERATION(0) | p.WAIT_REG_MEM_FUNCTION(FUNC_GE) | p.WAIT_REG_MEM_ENGINE(0)
    self.WRM_MEM_EQ = p.WAIT_REG_MEM_MEM_SPACE(1) | p.WAIT_REG_MEM_OPERATION(0) | p.WAIT_REG_MEM_FUNCTION(FUNC_EQ) | p.WAIT_REG_MEM_ENGINE(0)
    # HDP flush: write the request register, wait until the done register matches (operation 1 = write, wait, write)
    self.WRM_REG_DONE = p.WAIT_REG_MEM_MEM_SPACE(0) | p.WAIT_REG_MEM_OPERATION(1) | p.WAIT_REG_MEM_FUNCTION(FUNC_GE) | p.WAIT_REG_MEM_ENGINE(0)

    # RELEASE_MEM: end-of-pipe event; gfx9 names its fields without the PACKET3_RELEASE_MEM_ prefix
    self.RM = P3(p.PACKET3_RELEASE_MEM, 6)
    if gfx9:
      ev = p.EVENT_TYPE(p.CACHE_FLUSH_AND_INV_TS_EVENT) | p.EVENT_INDEX(p.event_index__mec_release_mem__end_of_pipe)
      flush = p.EOP_TC_WB_ACTION_EN | p.EOP_TC_NC_ACTION_EN
      def memsel(ds, isel): return p.DATA_SEL(ds) | p.INT_SEL(isel)
    else:
      ev = p.PACKET3_RELEASE_MEM_EVENT_TYPE(p.CACHE_FLUSH_AND_INV_TS_EVENT) | \
           p.PACKET3_RELEASE_MEM_EVENT_INDEX(p.event_index__mec_release_mem__end_of_pipe)
      flush = p.PACKET3_RELEASE_MEM_GCR_GLV_INV | p.PACKET3_RELEASE_MEM_GCR_GL1_INV | p.PACKET3_RELEASE_MEM_GCR_GL2_INV | \
              p.PACKET3_RELEASE_MEM_GCR_GLM_WB | p.PACKET3_RELEASE_MEM_GCR_GLM_INV | p.PACKET3_RELEASE_MEM_GCR_GL2_WB | \
              p.PACKET3_RELEASE_MEM_GCR_SEQ
      def memsel(ds, isel): return p.PACKET3_RELEASE_MEM_DATA_SEL(ds) | p.PACKET3_RELEASE_MEM_INT_SEL(isel) | p.PACKET3_RELEASE_MEM_DST_SEL(0)
    self.RM_EV, self.RM_EV_FLUSH = ev, ev | flush
    self.RM_SEL_32 = memsel(p.data_sel__mec_release_mem__send_32_bit_low, p.int_sel__mec_release_mem__none)
    self.RM_SEL_64 = memsel(p.data_sel__mec_release_mem__send_64_bit_data, p.int_sel__mec_release_mem__none)
    self.RM_SEL_CLOCK = memsel(p.data_sel__mec_release_mem__send_gpu_clock_counter, p.int_sel__mec_release_mem__none)
    # tinygrad's release_mem() defaults: no data, int_sel 2 (interrupt after write confirm)
    self.RM_SEL_NONE = memsel(p.data_sel__mec_release_mem__none, p.int_sel__mec_release_mem__send_interrupt_after_write_confirm)

    # ACQUIRE_MEM over the whole address space; the full form (all caches) and exec's (no I$ / L2 invalidate)
    def acquire(gli=1, glm=1, glk=1, glv=1, gl1=1, gl2=1):
      if gfx9:
        cntl = p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_SH_ICACHE_ACTION_ENA(gli) | p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_SH_KCACHE_ACTION_ENA(glk) | \
               p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TC_ACTION_ENA(gl2) | p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TCL1_ACTION_ENA(gl1) | \
               p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TC_WB_ACTION_ENA(gl2)
        return (P3(p.PACKET3_ACQUIRE_MEM, 5), cntl, U32_MAX, U32_MAX, 0, 0, 0xA)  # 0xA: poll interval
      gcr = p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLI_INV(gli) | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_INV(glm) | \
            p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_WB(glm) | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_INV(glk) | \
            p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_WB(glk) | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLV_INV(glv) | \
            p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL1_INV(gl1) | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_INV(gl2) | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_WB(gl2)
      return (P3(p.PACKET3_ACQUIRE_MEM, 6), 0, U32_MAX, U32_MAX, 0, 0, 0, gcr)
    self.ACQ_ALL, self.ACQ_EXEC = acquire(), acquire(gli=0, gl2=0)

    self.BARRIER = (self.WRM, self.WRM_REG_DONE, t.hdp_flush_req, t.hdp_flush_done, U32_MAX, U32_MAX, POLL_INTERVAL) + self.ACQ_ALL
    self.TS_HEAD = (self.RM, self.RM_EV, self.RM_SEL_NONE, 0, 0, 0, 0, 0, self.RM, self.RM_EV, self.RM_SEL_CLOCK)
    self.TS_TAIL = (0, 0, 0) + self.ACQ_ALL

    # exec: SET_SH_REG register offsets and the fixed tail
    def sh(reg): return reg.addr[0] - p.PACKET3_SET_SH_REG_START
    self.SH = functools.partial(P3, p.PACKET3_SET_SH_REG)
    self.R_PGM_LO, self.R_RSRC1, self.R_RSRC3 = sh(gc.regCOMPUTE_PGM_LO), sh(gc.regCOMPUTE_PGM_RSRC1), sh(gc.regCOMPUTE_PGM_RSRC3)
    self.R_TMPRING, self.R_SCRATCH = sh(gc.regCOMPUTE_TMPRING_SIZE), sh(gc.regCOMPUTE_DISPATCH_SCRATCH_BASE_LO)
    self.R_USER_DATA = sh(gc.regCOMPUTE_USER_DATA_0)
    self.EXEC_RESTART = (P3(p.PACKET3_SET_SH_REG, 3), sh(gc.regCOMPUTE_RESTART_X), 0, 0, 0)
    self.EXEC_LIMITS = (P3(p.PACKET3_SET_SH_REG, 1), sh(gc.regCOMPUTE_RESOURCE_LIMITS), gc.regCOMPUTE_RESOURCE_LIMITS.encode(waves_per_sh=0))
    self.START_X = (P3(p.PACKET3_SET_SH_REG, 8), sh(gc.regCOMPUTE_START_X), 0, 0, 0)
    self.DISPATCH = P3(p.PACKET3_DISPATCH_DIRECT, 3)
    w32 = (lambda w: {}) if gfx9 else (lambda w: {"cs_w32_en": int(w)})  # gfx9 is wave64 only
    self.INITIATOR = {w: gc.regCOMPUTE_DISPATCH_INITIATOR.encode(**w32(w), force_start_at_000=1, compute_shader_en=1) for w in (False, True)}
    self.CS_PARTIAL_FLUSH = (P3(p.PACKET3_EVENT_WRITE, 0), p.EVENT_TYPE(t.soc.CS_PARTIAL_FLUSH) | p.EVENT_INDEX(EVENT_INDEX_CS_PARTIAL_FLUSH))

  # ---- statements

  def wait(self, out: list, addr: int, value: int):
    """WAIT_REG_MEM: memory, 32-bit, `>=`, full mask (AMDComputeQueue.wait)."""
    out += (self.WRM, self.WRM_MEM_GE, addr & U32_MAX, addr >> 32, value, U32_MAX, POLL_INTERVAL)

  def poll(self, out: list, addr: int, value: int, mask: int):
    """WAIT_REG_MEM: memory, 32-bit, `(mem & mask) == value` (AMDComputeQueue.poll_bit)."""
    out += (self.WRM, self.WRM_MEM_EQ, addr & U32_MAX, addr >> 32, value, mask, POLL_INTERVAL)

  def signal(self, out: list, addr: int, value: int):
    """RELEASE_MEM at end of pipe with cache write-back/invalidate, 32-bit data (AMDComputeQueue.signal)."""
    out += (self.RM, self.RM_EV_FLUSH, self.RM_SEL_32, addr & U32_MAX, addr >> 32, value & U32_MAX, value >> 32, 0)

  def write(self, out: list, addr: int, value: int, b64: bool = False):
    """RELEASE_MEM at end of pipe, no cache action, 32-bit low or 64-bit data, no interrupt (AMDComputeQueue.write)."""
    out += (self.RM, self.RM_EV, self.RM_SEL_64 if b64 else self.RM_SEL_32, addr & U32_MAX, addr >> 32, value & U32_MAX, value >> 32, 0)

  def indirect(self, out: list, addr: int, ndw: int):
    """INDIRECT_BUFFER: run `ndw` dwords at `addr` (AMDComputeQueue's bound submit, tinygrad's `_submit` with an IB)."""
    out += (self.IB, addr & U32_MAX, addr >> 32, ndw | self.IB_VALID)

  def barrier(self, out: list):
    """HDP flush + ACQUIRE_MEM of every cache (AMDComputeQueue.memory_barrier)."""
    out += self.BARRIER

  def timestamp(self, out: list, ts_addr: int):
    """Drain (EOP release), write the GPU clock at end of pipe, then ACQUIRE_MEM (AMDComputeQueue.timestamp)."""
    out += self.TS_HEAD
    out += (ts_addr & U32_MAX, ts_addr >> 32)
    out += self.TS_TAIL

  def exec(self, out: list, prog_addr: int, rsrc1: int, rsrc2: int, rsrc3: int, tmpring_size: int, scratch_addr: int,
           user_data: tuple, grid: tuple, block: tuple, wave32: bool = True):
    """AMDComputeQueue.exec on a single-XCC queue: caches, program registers, user SGPRs (kernarg pointer, ...),
    workgroup size, DISPATCH_DIRECT of `grid` workgroups, CS_PARTIAL_FLUSH."""
    SH, pg, sc = self.SH, prog_addr >> 8, scratch_addr >> 8
    out += self.ACQ_EXEC
    out += (SH(2), self.R_PGM_LO, pg & U32_MAX, pg >> 32, SH(2), self.R_RSRC1, rsrc1, rsrc2, SH(1), self.R_RSRC3, rsrc3,
            SH(1), self.R_TMPRING, tmpring_size, SH(2), self.R_SCRATCH, sc & U32_MAX, sc >> 32)
    out += self.EXEC_RESTART
    out += (SH(len(user_data)), self.R_USER_DATA, *user_data)
    out += self.EXEC_LIMITS
    out += self.START_X
    out += (*block, 0, 0, self.DISPATCH, *grid, self.INITIATOR[bool(wave32)])
    out += self.CS_PARTIAL_FLUSH

@functools.cache
def encoder(target: str) -> PM4: return PM4(get_target(target))

# ---------------------------------------------------------------- decoder

def _field_bits(mod, macros) -> tuple | None:
  """(shift, mask or None) of the first header macro that exists; None mask: `(x) << n` without a width."""
  for m in macros:
    if (fn := getattr(mod, m, None)) is None: continue
    if isinstance(fn, int): return ((fn & -fn).bit_length() - 1, fn // (fn & -fn))  # a flag set: all its bits
    fn = unmasked(fn)
    sh = fn(1).bit_length() - 1
    full = fn(U32_MAX)
    return (sh, None if full == (U32_MAX << sh) else full >> sh)
  return None

def _dword(mod, spec) -> tuple:
  """A dword's field spec -> ((name, shift, mask), ...). A field without a width runs up to the next field."""
  if isinstance(spec, str): return ((spec, 0, U32_MAX),)
  got = sorted((b[0], name, b[1]) for name, *macros in spec if (b := _field_bits(mod, macros)) is not None)
  if not got: return ((spec[0][0], 0, U32_MAX),)
  return tuple((name, sh, mask if mask is not None else ((1 << ((got[i + 1][0] if i + 1 < len(got) else 32) - sh)) - 1))
               for i, (sh, name, mask) in enumerate(got))

def _flags(mod, *prefixes) -> int:
  return functools.reduce(int.__or__, (v for k, v in vars(mod).items() if isinstance(v, int) and k.startswith(prefixes)), 0)

# packet name -> per body dword: a field name (whole dword) or [(field, header macro, fallback macro, ...)]
_WRM = [[("function", "PACKET3_WAIT_REG_MEM__FUNCTION", "WAIT_REG_MEM_FUNCTION"),
         ("mem_space", "PACKET3_WAIT_REG_MEM__MEM_SPACE", "WAIT_REG_MEM_MEM_SPACE"),
         ("operation", "PACKET3_WAIT_REG_MEM__OPERATION", "WAIT_REG_MEM_OPERATION"), ("engine", "WAIT_REG_MEM_ENGINE")],
        "addr_lo", "addr_hi", "reference", "mask", [("poll_interval", "PACKET3_WAIT_REG_MEM__POLL_INTERVAL")]]
_EVENT = [("event_type", "PACKET3_RELEASE_MEM_EVENT_TYPE", "EVENT_TYPE"), ("event_index", "PACKET3_RELEASE_MEM_EVENT_INDEX", "EVENT_INDEX")]
_SPECS: dict[str, list[Any]] = {
  "WAIT_REG_MEM": _WRM,
  "RELEASE_MEM": [_EVENT + [("cache_action", "_FLAGS")],
                  [("dst_sel", "PACKET3_RELEASE_MEM_DST_SEL"), ("int_sel", "PACKET3_RELEASE_MEM_INT_SEL", "INT_SEL"),
                   ("data_sel", "PACKET3_RELEASE_MEM_DATA_SEL", "DATA_SEL")],
                  "addr_lo", "addr_hi", "data_lo", "data_hi", "int_ctxid"],
  "ACQUIRE_MEM": ["coher_cntl", "coher_size_lo", "coher_size_hi", "coher_base_lo", "coher_base_hi", "poll_interval", "gcr_cntl"],
  "DISPATCH_DIRECT": ["dim_x", "dim_y", "dim_z", "dispatch_initiator"],
  "EVENT_WRITE": [[("event_type", "PACKET3_EVENT_WRITE__EVENT_TYPE", "EVENT_TYPE"),
                   ("event_index", "PACKET3_EVENT_WRITE__EVENT_INDEX", "EVENT_INDEX")], "address_lo", "address_hi"],
  "INDIRECT_BUFFER": ["ib_base_lo", "ib_base_hi", [("ib_size", "PACKET3_INDIRECT_BUFFER__IB_SIZE"), ("chain", "PACKET3_INDIRECT_BUFFER__CHAIN"),
                      ("valid", "PACKET3_INDIRECT_BUFFER__VALID"), ("vmid", "PACKET3_INDIRECT_BUFFER__VMID")]],
  "COPY_DATA": ["control", "src_addr_lo", "src_addr_hi", "dst_addr_lo", "dst_addr_hi"],
  "WRITE_DATA": ["control", "dst_addr_lo", "dst_addr_hi"],
  "PRED_EXEC": ["control"],
}
def field_at(packet: str, field: str) -> int:
  """The dword (0: the header) of `packet` that holds `field` (a name of _SPECS: `addr_lo`, `reference`, ...)."""
  return 1 + next(i for i, d in enumerate(_SPECS[packet]) if d == field or (isinstance(d, list) and field in (f[0] for f in d)))

# where each statement's patched dword sits (wait and poll: WAIT_REG_MEM; signal and write: RELEASE_MEM)
PM4.WAIT_VALUE_AT, PM4.POLL_VALUE_AT, PM4.POLL_ADDR_AT = (field_at("WAIT_REG_MEM", f) for f in ("reference", "reference", "addr_lo"))
PM4.SIGNAL_VALUE_AT, PM4.WRITE_VALUE_AT, PM4.WRITE_ADDR_AT = (field_at("RELEASE_MEM", f) for f in ("data_lo", "data_lo", "addr_lo"))

# packets whose length is fixed (body dwords); any other length is malformed
_FIXED = {"WAIT_REG_MEM": 6, "RELEASE_MEM": 7, "DISPATCH_DIRECT": 4}
_REG_WRITES = ("SET_SH_REG", "SET_UCONFIG_REG")

class Decoder(Walker):
  def __init__(self, t: Target):
    p, self.t = t.pm4, t
    self.ops: dict[int, str] = {}
    for k, v in vars(p).items():  # definition order: the first name of an opcode wins (0x3F is INDIRECT_BUFFER)
      if k.startswith("PACKET3_") and "__" not in k and isinstance(v, int) and v < 0x100 and not k.endswith(("_START", "_END")):
        self.ops.setdefault(v, k[len("PACKET3_"):])
    flags = _flags(p, "EOP_") if t.gen == 9 else _flags(p, "PACKET3_RELEASE_MEM_GCR_")
    spec: dict[str, Any] = dict(_SPECS)
    spec["RELEASE_MEM"] = [[x if x[1] != "_FLAGS" else ("cache_action", "_RM_FLAGS") for x in spec["RELEASE_MEM"][0]]] + spec["RELEASE_MEM"][1:]
    p_ = _FlagMod(p, {"_RM_FLAGS": flags})
    self.specs = {name: tuple(_dword(p_, d) for d in dws) for name, dws in spec.items()}
    if t.gen == 9: self.fixed = {**_FIXED, "ACQUIRE_MEM": 6}
    else: self.fixed = {**_FIXED, "ACQUIRE_MEM": 7}
    self.reg_base = {"SET_SH_REG": p.PACKET3_SET_SH_REG_START, "SET_UCONFIG_REG": p.PACKET3_SET_UCONFIG_REG_START}
    self.events = t.soc.enum_VGT_EVENT_TYPE

  def decode_one(self, dw, i: int) -> Packet:
    """The packet at dword `i` of `dw` (a sequence of ints). Never raises on data; always advances >= 1 dword."""
    n, h = len(dw), dw[i]
    typ = packet_type(h)
    if typ == pm4_nv.PACKET_TYPE2: return Packet(i, "TYPE2_NOP", 1, {}, (h,))  # filler dword
    if typ != pm4_nv.PACKET_TYPE3: return raw_packet(dw, i, 1, f"type-{typ} packet header (only type-3 packets are used on compute queues)")
    body, op = packet_length(h) - 1, packet_opcode(h)
    name = self.ops.get(op)
    if i + 1 + body > n:
      return raw_packet(dw, i, n - i, f"truncated: {name or hex(op)} needs {body} body dwords, {n - i - 1} left")
    if name is None: return raw_packet(dw, i, body + 1, f"unknown PM4 opcode {op:#x}", name=f"UNKNOWN_{op:#04x}")
    if (want := self.fixed.get(name)) is not None and body != want:
      return raw_packet(dw, i, body + 1, f"malformed: {name} has {body} body dwords, expected {want}", name=name)
    vals = dw[i + 1:i + 1 + body]
    fields: dict = {"opcode": op}
    if name in _REG_WRITES:
      fields["reg_offset"] = off = vals[0] & 0xFFFF
      fields["values"] = tuple(vals[1:])
      if name == "SET_SH_REG": fields["reg"] = self.t.sh_regs.get(off, f"{off:#x}")
      fields["reg_addr"] = self.reg_base[name] + off
      return Packet(i, name, body + 1, fields, tuple(dw[i:i + 1 + body]))
    spec = self.specs.get(name, ())
    for k, fs in zip(vals, spec):
      for fname, sh, mask in fs: fields[fname] = (k >> sh) & mask
    if len(vals) > len(spec): fields["data"] = tuple(vals[len(spec):])
    if "event_type" in fields: fields["event"] = self.events.get(fields["event_type"], str(fields["event_type"]))
    return Packet(i, name, body + 1, join64(fields), tuple(dw[i:i + 1 + body]))


class _FlagMod:
  """A header module with a few extra names (used for the OR of a packet's flag constants)."""
  def __init__(self, mod, extra): self.mod, self.extra = mod, extra
  def __getattr__(self, k): return self.extra[k] if k in self.extra else getattr(self.mod, k)

@functools.cache
def decoder(target: str) -> Decoder: return Decoder(get_target(target))

def decode(dwords, target: str = "gfx1100") -> list[Packet]: return decoder(target).decode(dwords)
