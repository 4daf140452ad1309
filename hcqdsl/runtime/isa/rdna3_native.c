/* The RDNA3 executor's native loop (native.py): runs a dispatch's workgroups and waves over a table of decoded
   instructions (one row of int64 columns each, built by native.py), calling each opcode's translated pseudocode
   (pcode_c.py, compiled separately) through a function pointer. The semantics are rdna3.py's, line for line: operand
   fetch, VOP3 modifiers and FP32 denormal flushing, write-back of lane masks, SMEM/GLOBAL/FLAT/DS, WMMA, VOPD,
   barriers. It stops with a status when it is done, faults, or reaches a PC it has no row for (native.py decodes
   there and calls again: the state lives in the parameter block). The C preamble (pcode_c.HEADER and the column
   and parameter #defines) is prepended by native.py. */
#include <stdlib.h>

typedef void (*opfn)(Regs *, int, uint32_t);
#define LANES 32
#define R_COUNT 24
#define SRC_HI16 (1LL << 31)
#define SRC_PACKED (1LL << 32)
#define SRC_LO_FROM_HI (1LL << 33)
#define SRC_HI_FROM_HI (1LL << 34)
#define SRC_NEG_LO (1LL << 35)
#define SRC_NEG_HI (1LL << 36)
#define WAVE_WORDS (256 + 256 * LANES)
#define W_SCC 128
#define W_PC_LO 129
#define W_PC_HI 130
#define W_DONE 131
#define W_BARRIER 132
#define W_ID 133
#define SREG_VCC 106
#define SREG_NULL 124
#define SREG_M0 125
#define SREG_EXEC 126

typedef struct { uint64_t base, end; uint8_t *host; } Region;

typedef struct {
  int64_t *par;        /* the parameter block */
  Regs r;
  Region *last;
} Ctx;

#define P (c->par)
#define COL(ins, k) ((ins)[k])

static Region *region(Ctx *c, uint64_t a, uint64_t n) {
  Region *r = c->last;
  if (r && a >= r->base && a + n <= r->end && a + n >= a) return r;
  Region *rs = (Region *)P[P_REGIONS]; int64_t lo = 0, hi = P[P_NREGIONS] - 1, f = -1;
  while (lo <= hi) { int64_t m = (lo + hi) / 2; if (rs[m].base <= a) { f = m; lo = m + 1; } else hi = m - 1; }
  if (f < 0 || a >= rs[f].end || a + n > rs[f].end || a + n < a) return 0;
  c->last = &rs[f];
  return &rs[f];
}

static int fault(Ctx *c, int code, uint64_t pc, int64_t a, int64_t b) {
  P[P_FAULT] = code; P[P_FAULT_PC] = (int64_t)pc; P[P_FAULT_A] = a; P[P_FAULT_B] = b;
  return 1;
}

/* a denormal of the given width (16, 32, 64) as signed zero, for FLOAT_MODE's flushing (other bits kept) */
static inline uint64_t flushed(uint64_t x, int bits) {
  if (bits == 64) return (!(x & 0x7FF0000000000000ULL) && (x & 0xFFFFFFFFFFFFFULL)) ? x & 0x8000000000000000ULL : x;
  if (bits == 16) return (!(x & 0x7C00ULL) && (x & 0x3FFULL)) ? x & ~0x7FFFULL : x;
  return (!(x & 0x7F800000ULL) && (x & 0x7FFFFFULL)) ? x & ~0x7FFFFFFFULL : x;
}

static inline uint64_t sgpr_pair(uint32_t *w, int o) { return (uint64_t)w[o] | ((uint64_t)w[o + 1] << 32); }

/* a scalar operand's raw bits (descriptor: kind | reg << 8 | bits << 20; constants resolved by native.py) */
static inline uint64_t sread(uint32_t *w, int64_t d, int64_t cval) {
  int kind = d & 0xff, o = (d >> 8) & 0xfff, bits = (d >> 20) & 0xff;
  switch (kind) {
    case OPK_SGPR: return bits > 32 ? sgpr_pair(w, o) : (uint64_t)w[o];
    case OPK_CONST: return (uint64_t)cval;
    case OPK_SCC: return w[W_SCC];
    case OPK_VCCZ: return w[SREG_VCC] == 0 && w[SREG_VCC + 1] == 0;
    case OPK_EXECZ: return w[SREG_EXEC] == 0;
    default: return 0;
  }
}

/* a vector operand for all lanes, with the VOP3 abs/neg modifiers and FP32 denormal flushing */
static inline void vread(Ctx *c, uint32_t *w, int64_t d, int64_t cval, uint64_t *out) {
  int kind = d & 0xff, o = (d >> 8) & 0xfff, bits = (d >> 20) & 0xff, mods = (d >> 28) & 3, fl = (d >> 30) & 1;
  if (kind == OPK_VGPR) {
    uint32_t *v = w + 256 + o * LANES;
    if (bits > 32) { uint32_t *v1 = v + LANES; for (int l = 0; l < LANES; l++) out[l] = v[l] | ((uint64_t)v1[l] << 32); }
    else for (int l = 0; l < LANES; l++) out[l] = v[l];
  } else { uint64_t x = sread(w, d, cval); for (int l = 0; l < LANES; l++) out[l] = x; }
  if (d & SRC_HI16) for (int l = 0; l < LANES; l++) out[l] = (out[l] >> 16) & 0xFFFF;
  if (d & SRC_PACKED) {   /* packed math: halves as opsel/opsel_hi select them, negated by neg/neg_hi */
    for (int l = 0; l < LANES; l++) {
      uint64_t x = out[l], lo = ((d & SRC_LO_FROM_HI) ? x >> 16 : x) & 0xFFFF, hi = ((d & SRC_HI_FROM_HI) ? x >> 16 : x) & 0xFFFF;
      if (d & SRC_NEG_LO) lo ^= 0x8000;
      if (d & SRC_NEG_HI) hi ^= 0x8000;
      out[l] = lo | (hi << 16);
    }
  }
  if (mods) {
    uint64_t sign = bits == 64 ? 1ULL << 63 : bits == 32 ? 1ULL << 31 : 1ULL << 15;
    for (int l = 0; l < LANES; l++) { if (mods & 2) out[l] &= ~sign; if (mods & 1) out[l] ^= sign; }
  }
  if (fl) for (int l = 0; l < LANES; l++) out[l] = flushed(out[l], bits);
}

static inline uint64_t special(uint32_t *w, int reg) {
  switch (reg) {
    case R_SCC: return w[W_SCC];
    case R_VCC: return sgpr_pair(w, SREG_VCC);
    case R_EXEC: return w[SREG_EXEC];
    case R_PC: return (uint64_t)w[W_PC_LO] | ((uint64_t)w[W_PC_HI] << 32);
    case R_M0: return w[SREG_M0];
    default: return 0;
  }
}

static inline uint32_t mask_bits(uint64_t *out, int n, uint32_t old, uint32_t exec) {
  uint32_t bits = 0;
  if (n == LANES) { for (int l = 0; l < LANES; l++) bits |= (uint32_t)((out[l] >> l) & 1) << l; }
  else bits = (uint32_t)out[0];
  (void)old;
  return bits & exec;   /* inactive lanes' bits are 0 (rdna3._mask_bits) */
}

static inline void write_mask(uint32_t *w, int64_t o, uint32_t v) { if (o >= 0 && o != SREG_NULL) w[o] = v; }
static inline uint32_t read_mask(uint32_t *w, int64_t o) { return (o < 0 || o == SREG_NULL) ? 0 : w[o]; }

static inline uint64_t clamp_bits(uint64_t x, int64_t flags) {   /* the clamp modifier: [0, 1], NaN to 0 */
  if (flags & FL_CLAMP_F32) { float f = b2f((uint32_t)x); f = f != f ? 0.0f : f < 0.0f ? 0.0f : f > 1.0f ? 1.0f : f; return (x & ~0xFFFFFFFFULL) | f2b(f); }
  if (flags & FL_CLAMP_F16) { float f = h2f((uint32_t)x & 0xFFFF); f = f != f ? 0.0f : f < 0.0f ? 0.0f : f > 1.0f ? 1.0f : f; return (x & ~0xFFFFULL) | f2h(f); }
  double f = b2d(x); f = f != f ? 0.0 : f < 0.0 ? 0.0 : f > 1.0 ? 1.0 : f; return d2b(f);
}

static inline void write_v(Ctx *c, uint32_t *w, int64_t reg, uint64_t *val, int bits, uint32_t exec, int64_t flags) {
  uint32_t *v = w + 256 + reg * LANES;
  int flush = (flags & FL_FLUSH_D) != 0;
  int clamp = (flags & (FL_CLAMP_F32 | FL_CLAMP_F16 | FL_CLAMP_F64)) != 0;
  for (int l = 0; l < LANES; l++) {
    if (!((exec >> l) & 1)) continue;
    uint64_t x = val[l];
    if (clamp) x = clamp_bits(x, flags);
    if (flush) x = flushed(x, bits);
    if (bits > 32) { v[l] = (uint32_t)x; v[l + LANES] = (uint32_t)(x >> 32); }
    else if (bits == 16) v[l] = (flags & FL_D_HI) ? (v[l] & 0xFFFFu) | ((uint32_t)(x & 0xFFFF) << 16) : (v[l] & 0xFFFF0000u) | (uint32_t)(x & 0xFFFF);
    else v[l] = (uint32_t)x;
  }
}

static inline void write_s(uint32_t *w, int64_t o, uint64_t v, int bits) {
  if (o < 0 || o == SREG_NULL) return;
  w[o] = (uint32_t)v;
  if (bits > 32) w[o + 1] = (uint32_t)(v >> 32);
}

/* run pcode function `fn` with the registers of Regs filled, then write back what it assigned (rdna3._run_pcode) */
static void writeback(Ctx *c, uint32_t *w, int64_t *ins, int vector, int n) {
  Regs *r = &c->r;
  int64_t writes = COL(ins, C_WRITES), lane_bits = COL(ins, C_LANE_BITS);
  uint32_t exec = w[SREG_EXEC];
  int64_t dst = COL(ins, C_DST), mode = COL(ins, C_DST_MODE), dbits = COL(ins, C_DBITS), sdst = COL(ins, C_SDST);
  if (writes & (1 << R_D0)) {
    if (lane_bits & (1 << R_D0)) write_mask(w, dst, mask_bits(r->r[R_D0], n, read_mask(w, dst), exec));
    else if (mode == DM_VGPR) write_v(c, w, dst, r->r[R_D0], (int)dbits, exec, COL(ins, C_FLAGS));
    else {   /* an SGPR: a 16-bit result is zero-extended; FLOAT_MODE flushes a denormal float result */
      uint64_t x = r->r[R_D0][0];
      if (COL(ins, C_FLAGS) & FL_FLUSH_D) x = flushed(x, (int)dbits);
      write_s(w, dst, dbits == 16 ? x & 0xFFFF : x, (int)dbits);
    }
  }
  if (writes & (1 << R_D1)) {   /* D1: each lane's carry-out bit (bit 0 of its D1) into its bit of the mask */
    uint32_t bits = 0;
    if (vector && (lane_bits & (1 << R_D1))) bits = mask_bits(r->r[R_D1], n, 0, exec);
    else if (vector) { for (int l = 0; l < LANES; l++) bits |= (uint32_t)(r->r[R_D1][l] & 1) << l; bits &= exec; }
    else bits = (uint32_t)r->r[R_D1][0];
    write_mask(w, sdst, bits);
  }
  if (writes & (1 << R_SCC)) w[W_SCC] = (uint32_t)(r->r[R_SCC][0] & 1);
  if (writes & (1 << R_VCC)) {
    int64_t t = sdst < 0 ? SREG_VCC : sdst;
    write_mask(w, t, vector ? mask_bits(r->r[R_VCC], n, read_mask(w, t), exec) : (uint32_t)r->r[R_VCC][0]);
  }
  if (writes & (1 << R_EXEC)) {
    uint32_t nw = (vector && (lane_bits & (1 << R_EXEC))) ? mask_bits(r->r[R_EXEC], n, exec, exec) : (uint32_t)r->r[R_EXEC][0];
    w[SREG_EXEC] = nw;
  }
  if (writes & (1 << R_PC)) { uint64_t pc = r->r[R_PC][0]; w[W_PC_LO] = (uint32_t)pc; w[W_PC_HI] = (uint32_t)(pc >> 32); w[W_BARRIER] |= 2; }
}

static inline void fill(Regs *r, int reg, uint64_t x, int n) { for (int l = 0; l < n; l++) r->r[reg][l] = x; }

static void run_scalar(Ctx *c, uint32_t *w, int64_t *ins) {
  Regs *r = &c->r;
  r->vgpr = w + 256;
  int64_t args = COL(ins, C_ARGS);
  for (int k = 0; k < R_COUNT; k++) {
    if (!((args >> k) & 1)) continue;
    uint64_t x;
    if (k <= R_S2) {
      int64_t d = COL(ins, C_SRC0 + k);
      x = d ? sread(w, d, COL(ins, C_CVAL0 + k)) : special(w, k);
      if ((d >> 30) & 1) x = flushed(x, (int)((d >> 20) & 0xff));
    }
    else if (k == R_D0) x = COL(ins, C_D0_SRC) ? sread(w, COL(ins, C_D0_SRC), 0) : 0;
    else if (k == R_SIMM16) x = (uint64_t)COL(ins, C_SIMM16);
    else if (k == R_SIMM32) x = (uint64_t)COL(ins, C_LIT);
    else if (k == R_VCCZ) x = w[SREG_VCC] == 0;
    else if (k == R_EXECZ) x = w[SREG_EXEC] == 0;
    else x = special(w, k);
    r->r[k][0] = x;
  }
  ((opfn)COL(ins, C_FN))(r, 1, 1);
  writeback(c, w, ins, 0, 1);
}

static void run_vector(Ctx *c, uint32_t *w, int64_t *ins) {
  Regs *r = &c->r;
  int64_t args = COL(ins, C_ARGS), flags = COL(ins, C_FLAGS);
  uint32_t exec = w[SREG_EXEC];
  for (int k = 0; k < 3; k++) {
    int64_t d = COL(ins, C_SRC0 + k);
    if (!d) continue;
    if (k == 2 && (flags & FL_VCC_FROM_S2)) vread(c, w, d, COL(ins, C_CVAL0 + k), r->r[R_VCC]);
    else vread(c, w, d, COL(ins, C_CVAL0 + k), r->r[R_S0 + k]);
  }
  for (int k = 0; k < R_COUNT; k++) {
    if (!((args >> k) & 1)) continue;
    if (k <= R_S2 && COL(ins, C_SRC0 + k) && !(k == 2 && (flags & FL_VCC_FROM_S2))) continue;
    if (k == R_VCC && (flags & FL_VCC_FROM_S2)) continue;
    if (k == R_D0 && COL(ins, C_D0_SRC)) { vread(c, w, COL(ins, C_D0_SRC), 0, r->r[R_D0]); continue; }
    if (k == R_VCC && COL(ins, C_VCCIN)) { fill(r, R_VCC, sread(w, COL(ins, C_VCCIN), COL(ins, C_VCCIN_VAL)), LANES); continue; }
    if (k == R_SIMM32) { fill(r, k, (uint64_t)COL(ins, C_LIT), LANES); continue; }
    if (k == R_SIMM16) { fill(r, k, (uint64_t)COL(ins, C_SIMM16), LANES); continue; }
    if (k == R_VCCZ) { fill(r, k, w[SREG_VCC] == 0, LANES); continue; }
    if (k == R_EXECZ) { fill(r, k, w[SREG_EXEC] == 0, LANES); continue; }
    if (k >= R_OPSEL && k <= R_NEG_HI) { fill(r, k, (uint64_t)COL(ins, C_OPSEL + (k - R_OPSEL)), LANES); continue; }
    if (k == R_SRC0) { fill(r, k, (uint64_t)COL(ins, C_SRC0_IDX), LANES); continue; }
    if (k == R_VDST) { fill(r, k, (uint64_t)COL(ins, C_VDST_IDX), LANES); continue; }
    fill(r, k, special(w, k), LANES);
  }
  if (flags & FL_MIX)   /* v_fma_mix*: neg and abs (neg_hi) on the f32 value, or on the f16 half opsel selects */
    for (int i = 0; i < 3; i++) {
      int64_t f16 = (COL(ins, C_OPSEL_HI) >> i) & 1, hi = (COL(ins, C_OPSEL) >> i) & 1;
      uint64_t sign = !f16 ? 0x80000000ULL : hi ? 0x80000000ULL : 0x8000ULL;
      for (int l = 0; l < LANES; l++) {
        if ((COL(ins, C_NEG_HI) >> i) & 1) r->r[R_S0 + i][l] &= ~sign;
        if ((COL(ins, C_NEG) >> i) & 1) r->r[R_S0 + i][l] ^= sign;
      }
    }
  r->vgpr = w + 256;
  if (flags & FL_WAVE) {   /* cross-lane (v_readlane, v_readfirstlane, v_writelane): once per wave, whatever EXEC */
    ((opfn)COL(ins, C_FN))(r, 1, 1);
    writeback(c, w, ins, 0, 1);
    return;
  }
  ((opfn)COL(ins, C_FN))(r, LANES, exec);
  writeback(c, w, ins, 1, LANES);
}

static void run_vopd(Ctx *c, uint32_t *w, int64_t *ins) {
  Regs *r = &c->r;
  r->vgpr = w + 256;
  uint64_t dx[LANES];
  uint32_t exec = w[SREG_EXEC];
  for (int half = 0; half < 2; half++) {
    int64_t b = half ? C_Y : 0, args = COL(ins, C_ARGS + b);
    for (int k = 0; k < 2; k++) vread(c, w, COL(ins, C_SRC0 + b + k), COL(ins, C_CVAL0 + b + k), r->r[R_S0 + k]);
    for (int k = 0; k < R_COUNT; k++) {
      if (!((args >> k) & 1) || k == R_S0 || k == R_S1) continue;
      if (k == R_D0) { vread(c, w, COL(ins, C_D0_SRC + b), 0, r->r[R_D0]); continue; }
      if (k == R_SIMM32) { fill(r, k, (uint64_t)COL(ins, C_LIT), LANES); continue; }
      fill(r, k, special(w, k), LANES);
    }
    ((opfn)COL(ins, C_FN + b))(r, LANES, exec);
    if (!half) memcpy(dx, r->r[R_D0], sizeof dx);
  }
  write_v(c, w, COL(ins, C_DST), dx, 32, exec, COL(ins, C_FLAGS) & FL_FLUSH_D);
  write_v(c, w, COL(ins, C_DST + C_Y), r->r[R_D0], 32, exec, COL(ins, C_FLAGS + C_Y) & FL_FLUSH_D);
}

/* memory */
static int run_smem(Ctx *c, uint32_t *w, int64_t *ins, uint64_t pc) {
  int64_t n = COL(ins, C_M_WIDTH), so = COL(ins, C_M_SOFF);
  uint64_t base = sgpr_pair(w, (int)COL(ins, C_M_ADDR));
  uint64_t addr = (base + (uint64_t)COL(ins, C_M_OFFSET) + (so ? (uint64_t)(uint32_t)sread(w, so, COL(ins, C_M_SOFF_VAL)) : 0)) & ~3ULL;
  Region *rg = region(c, addr, (uint64_t)n);
  if (!rg) return fault(c, F_MEM, pc, (int64_t)addr, n);
  uint32_t tmp[16]; memcpy(tmp, rg->host + (addr - rg->base), (size_t)n);
  int d = (int)COL(ins, C_M_DATA);
  for (int k = 0; k < n / 4; k++) w[d + k] = tmp[k];
  return 0;
}

static inline uint32_t ext(const uint8_t *p, int n, int sgn) {
  if (n == 1) return sgn ? (uint32_t)(int32_t)(int8_t)p[0] : p[0];
  uint16_t h; memcpy(&h, p, 2);
  return sgn ? (uint32_t)(int32_t)(int16_t)h : h;
}

static int run_global(Ctx *c, uint32_t *w, int64_t *ins, uint64_t pc) {
  uint32_t exec = w[SREG_EXEC];
  int n = (int)COL(ins, C_M_WIDTH), sgn = (int)(COL(ins, C_M_FLAGS) & MF_SIGNED), store = (int)(COL(ins, C_M_FLAGS) & MF_STORE);
  int64_t sa = COL(ins, C_M_SADDR), a = COL(ins, C_M_ADDR);
  uint64_t off = (uint64_t)COL(ins, C_M_OFFSET), addrs[LANES];
  uint32_t *va = w + 256 + a * LANES;
  uint8_t *host[LANES];
  for (int l = 0; l < LANES; l++) {
    if (!((exec >> l) & 1)) continue;
    uint64_t x = sa < 0 ? ((uint64_t)va[l] | ((uint64_t)va[l + LANES] << 32)) : sgpr_pair(w, (int)sa) + va[l];
    addrs[l] = x + off;
  }
  for (int l = 0; l < LANES; l++) {
    if (!((exec >> l) & 1)) continue;
    Region *rg = region(c, addrs[l], (uint64_t)n);
    if (!rg) return fault(c, F_MEM, pc, (int64_t)addrs[l], n);
    host[l] = rg->host + (addrs[l] - rg->base);
  }
  int nd = n < 4 ? 1 : n / 4;
  if (store) {
    uint32_t *dv = w + 256 + COL(ins, C_M_DATA) * LANES;
    for (int l = 0; l < LANES; l++) {
      if (!((exec >> l) & 1)) continue;
      uint32_t tmp[4];
      for (int k = 0; k < nd; k++) tmp[k] = dv[k * LANES + l];
      memcpy(host[l], tmp, (size_t)n);
    }
    P[P_STORES]++;
  } else {
    uint32_t vals[4][LANES];
    for (int l = 0; l < LANES; l++) {
      if (!((exec >> l) & 1)) continue;
      if (n >= 4) { uint32_t tmp[4]; memcpy(tmp, host[l], (size_t)n); for (int k = 0; k < nd; k++) vals[k][l] = tmp[k]; }
      else vals[0][l] = ext(host[l], n, sgn);
    }
    uint32_t *dv = w + 256 + COL(ins, C_M_VDST) * LANES;
    for (int k = 0; k < nd; k++) for (int l = 0; l < LANES; l++) if ((exec >> l) & 1) dv[k * LANES + l] = vals[k][l];
  }
  return 0;
}

static int run_ds(Ctx *c, uint32_t *w, int64_t *ins, uint64_t pc) {
  uint32_t exec = w[SREG_EXEC];
  int n = (int)COL(ins, C_M_WIDTH), sgn = (int)(COL(ins, C_M_FLAGS) & MF_SIGNED), store = (int)(COL(ins, C_M_FLAGS) & MF_STORE);
  int two = (int)(COL(ins, C_M_FLAGS) & MF_TWO);
  int64_t size = P[P_LDS_SIZE];
  uint8_t *lds = (uint8_t *)P[P_LDS];
  uint32_t *va = w + 256 + COL(ins, C_M_ADDR) * LANES;
  int64_t offs[2] = {COL(ins, C_M_OFF0), COL(ins, C_M_OFF1)};
  int nd = n < 4 ? 1 : n / 4;
  uint32_t vals[8][LANES];
  for (int h = 0; h < 1 + two; h++)
    for (int l = 0; l < LANES; l++) {
      if (!((exec >> l) & 1)) continue;
      int64_t x = (int64_t)va[l] + offs[h];
      if (x < 0 || x + n > size) return fault(c, F_LDS, pc, x, n);
    }
  for (int h = 0; h < 1 + two; h++) {
    if (store) {
      uint32_t *dv = w + 256 + COL(ins, h ? C_M_DATA1 : C_M_DATA) * LANES;
      for (int l = 0; l < LANES; l++) {
        if (!((exec >> l) & 1)) continue;
        uint32_t tmp[4];
        for (int k = 0; k < nd; k++) tmp[k] = dv[k * LANES + l];
        memcpy(lds + (int64_t)va[l] + offs[h], tmp, (size_t)n);
      }
    } else {
      for (int l = 0; l < LANES; l++) {
        if (!((exec >> l) & 1)) continue;
        uint8_t *p = lds + (int64_t)va[l] + offs[h];
        if (n >= 4) { uint32_t tmp[4]; memcpy(tmp, p, (size_t)n); for (int k = 0; k < nd; k++) vals[h * nd + k][l] = tmp[k]; }
        else vals[h * nd][l] = ext(p, n, sgn);
      }
    }
  }
  if (!store) {
    uint32_t *dv = w + 256 + COL(ins, C_M_VDST) * LANES;
    for (int k = 0; k < nd * (1 + two); k++) for (int l = 0; l < LANES; l++) if ((exec >> l) & 1) dv[k * LANES + l] = vals[k][l];
  }
  return 0;
}

static int run_scratch(Ctx *c, uint32_t *w, int64_t *ins, uint64_t pc, int64_t wi) {
  uint32_t exec = w[SREG_EXEC];
  int64_t fl = COL(ins, C_M_FLAGS), n = COL(ins, C_M_WIDTH), size = P[P_SCRATCH_SIZE], sa = COL(ins, C_M_SADDR);
  uint32_t *va = w + 256 + COL(ins, C_M_ADDR) * LANES;
  int64_t addrs[LANES];
  for (int l = 0; l < LANES; l++) {
    if (!((exec >> l) & 1)) continue;
    int64_t a = COL(ins, C_M_OFFSET) + ((fl & MF_SVE) ? (int64_t)va[l] : 0) + (sa >= 0 ? (int64_t)w[sa] : 0);
    if (a < 0 || a + n > size) return fault(c, F_SCRATCH, pc, a, n);
    addrs[l] = a;
  }
  uint8_t *base = (uint8_t *)P[P_SCRATCH] + wi * LANES * size;
  int nd = n < 4 ? 1 : (int)n / 4;
  if (fl & MF_STORE) {
    uint32_t *dv = w + 256 + COL(ins, C_M_DATA) * LANES;
    for (int l = 0; l < LANES; l++) {
      if (!((exec >> l) & 1)) continue;
      uint32_t tmp[4];
      for (int k = 0; k < nd; k++) tmp[k] = dv[k * LANES + l];
      memcpy(base + l * size + addrs[l], tmp, (size_t)n);
    }
  } else {
    uint32_t vals[4][LANES];
    for (int l = 0; l < LANES; l++) {
      if (!((exec >> l) & 1)) continue;
      uint8_t *p = base + l * size + addrs[l];
      if (n >= 4) { uint32_t tmp[4]; memcpy(tmp, p, (size_t)n); for (int k = 0; k < nd; k++) vals[k][l] = tmp[k]; }
      else vals[0][l] = ext(p, (int)n, (int)(fl & MF_SIGNED));
    }
    uint32_t *dv = w + 256 + COL(ins, C_M_VDST) * LANES;
    for (int k = 0; k < nd; k++) for (int l = 0; l < LANES; l++) if ((exec >> l) & 1) dv[k * LANES + l] = vals[k][l];
  }
  return 0;
}

static void run_wmma(Ctx *c, uint32_t *w, int64_t *ins) {
  int64_t flags = COL(ins, C_FLAGS);
  int bf16_in = (flags & FL_WMMA_BF16_IN) != 0, out = (int)COL(ins, C_DBITS);   /* out: 0 F32, 1 F16, 2 BF16 */
  float a[16][16], b[16][16];
  for (int m = 0; m < 2; m++) {
    uint32_t *v = w + 256 + COL(ins, C_SRC0 + m) * LANES;
    float (*x)[16] = m ? b : a;
    for (int lane = 0; lane < 16; lane++)
      for (int k = 0; k < 16; k++) {
        uint32_t h = (v[(k / 2) * LANES + lane] >> (16 * (k & 1))) & 0xFFFF;
        x[lane][k] = bf16_in ? b2f(h << 16) : h2f(h);
      }
  }
  uint32_t *cv = w + 256 + COL(ins, C_SRC2) * LANES, res[8][LANES];
  for (int vg = 0; vg < 8; vg++)
    for (int lane = 0; lane < LANES; lane++) {
      int row = 2 * vg + lane / 16, col = lane % 16;
      uint32_t acc = cv[vg * LANES + lane];
      float cc = out == 0 ? b2f(acc) : out == 1 ? h2f(acc & 0xFFFF) : b2f((acc & 0xFFFF) << 16);
      float d = a[row][0] * b[col][0];
      for (int k = 1; k < 16; k++) d = d + a[row][k] * b[col][k];
      d = d + cc;
      res[vg][lane] = out == 0 ? f2b(d) : out == 1 ? f2h(d) : (f2b(d) >> 16);
    }
  uint32_t exec = w[SREG_EXEC], *dv = w + 256 + COL(ins, C_DST) * LANES;
  for (int vg = 0; vg < 8; vg++) for (int l = 0; l < LANES; l++) if ((exec >> l) & 1) dv[vg * LANES + l] = res[vg][l];
}

/* one wave until s_endpgm, s_barrier, a fault or a PC without a row; 0: stopped normally */
static int run_wave(Ctx *c, uint32_t *w, int64_t wi) {
  int64_t *prog = (int64_t *)P[P_PROG], *index = (int64_t *)P[P_INDEX];
  uint64_t base = (uint64_t)P[P_BASE], nidx = (uint64_t)P[P_INDEX_LEN];
  int64_t count = P[P_COUNT], max = P[P_MAX_INS];
  for (;;) {
    uint64_t pc = (uint64_t)w[W_PC_LO] | ((uint64_t)w[W_PC_HI] << 32);
    uint64_t slot = (pc - base) >> 2;
    int64_t i = (pc >= base && !(pc & 3) && slot < nidx) ? index[slot] : -1;
    if (i < 0) { P[P_COUNT] = count; P[P_FAULT_PC] = (int64_t)pc; return 2; }
    int64_t *ins = prog + i * NCOL;
    uint64_t ipc = pc;
    int rc = 0;
    switch (COL(ins, C_KIND)) {
      case K_SCALAR: run_scalar(c, w, ins); break;
      case K_VECTOR: run_vector(c, w, ins); break;
      case K_VOPD: run_vopd(c, w, ins); break;
      case K_NOP: break;
      case K_ENDPGM: w[W_DONE] = 1; break;
      case K_BARRIER: w[W_BARRIER] |= 1; break;
      case K_SMEM: rc = run_smem(c, w, ins, pc); break;
      case K_GLOBAL: rc = run_global(c, w, ins, pc); break;
      case K_DS: rc = run_ds(c, w, ins, pc); break;
      case K_WMMA: run_wmma(c, w, ins); break;
      case K_SCRATCH: rc = run_scratch(c, w, ins, pc, wi); break;
      default: rc = fault(c, F_UNSUPPORTED, pc, i, 0);
    }
    if (rc) { P[P_COUNT] = count; return 1; }
    if (w[W_BARRIER] & 2) w[W_BARRIER] &= ~2u;   /* a branch set the PC */
    else { pc += (uint64_t)COL(ins, C_SIZE); w[W_PC_LO] = (uint32_t)pc; w[W_PC_HI] = (uint32_t)(pc >> 32); }
    count++;
    if (count > max) { P[P_COUNT] = count; return fault(c, F_MAX, ipc, i, 0); }
    if (w[W_DONE] || (w[W_BARRIER] & 1)) { P[P_COUNT] = count; return 0; }
  }
}

static void init_wave(Ctx *c, uint32_t *w, int64_t wi, int64_t gx, int64_t gy, int64_t gz) {
  memset(w, 0, sizeof(uint32_t) * 256);
  int64_t nuser = P[P_NUSER], k = nuser, en = P[P_ENABLES];
  uint32_t *user = (uint32_t *)P[P_USER];
  for (int i = 0; i < nuser; i++) w[i] = user[i];
  if (en & 1) w[k++] = (uint32_t)gx;
  if (en & 2) w[k++] = (uint32_t)gy;
  if (en & 4) w[k++] = (uint32_t)gz;
  if (en & 8) w[k++] = (uint32_t)P[P_NWAVES];
  if (en & 16) w[k++] = 0;
  int64_t bx = P[P_BX], by = P[P_BY], nthreads = bx * by * P[P_BZ];
  uint32_t *v0 = w + 256;
  memset(v0, 0, sizeof(uint32_t) * 256 * LANES);
  for (int l = 0; l < LANES; l++) {
    int64_t t = wi * LANES + l;
    v0[l] = (uint32_t)((t % bx) | ((t / bx % by) << 10) | ((t / (bx * by)) << 20));
  }
  int64_t live = nthreads - wi * LANES; if (live > LANES) live = LANES;
  w[SREG_EXEC] = live >= 32 ? 0xFFFFFFFFu : (uint32_t)((1u << live) - 1);
  uint64_t pc = (uint64_t)P[P_ENTRY];
  w[W_PC_LO] = (uint32_t)pc; w[W_PC_HI] = (uint32_t)(pc >> 32); w[W_ID] = (uint32_t)wi;
}

/* run the dispatch (or the single workgroup of waves already in P_WAVES when P_NWG is 0); the status: 0 done,
   1 fault (P_FAULT*), 2 a PC without a row (P_FAULT_PC): decode there and call again */
int hcq_run(int64_t *params) {
  Ctx ctx, *c = &ctx;
  c->par = params; c->last = 0; c->r.ieee = (int)P[P_IEEE];
  uint32_t *waves = (uint32_t *)P[P_WAVES];
  int64_t nwaves = P[P_NWAVES];
  for (;;) {
    if (!P[P_INWG]) {
      if (P[P_WG] >= P[P_NWG]) return 0;
      int64_t g = P[P_WG], gx = g % P[P_GX], gy = g / P[P_GX] % P[P_GY], gz = g / (P[P_GX] * P[P_GY]);
      for (int64_t wi = 0; wi < nwaves; wi++) init_wave(c, waves + wi * WAVE_WORDS, wi, gx, gy, gz);
      if (P[P_LDS_SIZE]) memset((void *)P[P_LDS], 0, (size_t)P[P_LDS_SIZE]);
      if (P[P_SCRATCH_SIZE]) memset((void *)P[P_SCRATCH], 0, (size_t)(nwaves * LANES * P[P_SCRATCH_SIZE]));
      P[P_INWG] = 1; P[P_WI] = 0; P[P_TURN] = 0;
    }
    int any = 0;
    for (; P[P_WI] < nwaves; P[P_WI]++) {
      uint32_t *w = waves + P[P_WI] * WAVE_WORDS;
      if (w[W_DONE]) continue;
      if (!P[P_TURN]) { w[W_BARRIER] = 0; P[P_TURN] = 1; }
      int rc = run_wave(c, w, P[P_WI]);
      if (rc) { P[P_FAULT_WAVE] = P[P_WI]; return rc; }
      P[P_TURN] = 0;
    }
    P[P_WI] = 0;
    for (int64_t wi = 0; wi < nwaves; wi++) if (!waves[wi * WAVE_WORDS + W_DONE]) any = 1;
    if (!any) { P[P_INWG] = 0; P[P_WG]++; if (P[P_NWG] == 0) return 0; }
  }
}
