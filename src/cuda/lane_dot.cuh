// cuda/lane_dot.cuh - the codec dots: one lane's share of a weight row times x, for every codec the CUDA-core
// kernels read (lane_dot; products.cu, experts.cu).
//
// Matrix products give each output element to one warp: lane l takes the codec's units (4/8 floats, or for the
// affine codecs G / 8 codes of a block shared by 8 lanes) in a fixed pattern, multiplies them into every row it
// serves, and the 32 partial sums meet in a fixed shuffle tree. That order depends only on the matrix, never on the
// row count or on whether the weights were first staged in shared memory. MXFP4 and FP8 blocks are shared by 8 lanes
// as the affine codecs' are (mxfp4_group_dot, fp8_group_dot); a lane takes one 8-element piece of a ggml block
// (ggml_group_dot). Seed matrices (p3, p4, s3) go through the same kernels: lane l decodes blocks l, l + 32, ... of a
// row in registers (seed_group_dot) and adds each decoded weight times x in element order; they are never staged (their
// rows are not contiguous bytes).
#pragma once

#include <cstdint>

#include "cuda/codec_device.cuh"
#include "cuda/warp_primitives.cuh"

namespace seedling::cuda {

// The raw 32-bit words of one full unit. Lanes load the words of several units before widening any, so several
// loads are in flight per lane (memory-level parallelism is what a matrix-vector product lives on).
template <CodecId C>
struct Raw {
  uint32_t w[Unit<C>::bytes / 4];
};

// Float units are read as one 16-byte load when the caller knows every row starts 16-byte aligned (V).
template <CodecId C, bool V>
constexpr bool kRawLoads = is_float(C) && V;

template <CodecId C, bool V>
__device__ __forceinline__ void load_raw(const uint8_t* row, int64_t u, Raw<C>& r) {
  const uint4 v = *reinterpret_cast<const uint4*>(row + u * Unit<C>::bytes);
  r.w[0] = v.x;
  r.w[1] = v.y;
  r.w[2] = v.z;
  r.w[3] = v.w;
}

// Widens a full float unit's words into w[G] (bf16/f16 halves in element order).
template <CodecId C>
__device__ __forceinline__ void widen(const Raw<C>& r, float* w) {
  constexpr int G = Unit<C>::G;
  if constexpr (C == Id::F32) {
#pragma unroll
    for (int j = 0; j < G; ++j) w[j] = __uint_as_float(r.w[j]);
  } else {
#pragma unroll
    for (int i = 0; i < G / 2; ++i) {
      const uint16_t lo = uint16_t(r.w[i] & 0xffffu), hi = uint16_t(r.w[i] >> 16);
      w[2 * i] = C == Id::BF16 ? bf16_bits(lo) : f16_bits(lo);
      w[2 * i + 1] = C == Id::BF16 ? bf16_bits(hi) : f16_bits(hi);
    }
  }
}

// A code (below 2^23) as a float, exactly: 2^23 + q has q in its low mantissa bits, and subtracting 2^23 is exact.
// One logic op and one add instead of an integer-to-float conversion, which runs at an eighth of the float rate.
__device__ __forceinline__ float code_float(uint32_t q) {
  return __fsub_rn(__uint_as_float(0x4B000000u | q), 8388608.0f);
}

// Byte b of w (below 2^8) as a float, exactly as code_float: the byte permute builds 0x4B0000'byte' in one step.
__device__ __forceinline__ float code_float_byte(uint32_t w, int b) {
  return __fsub_rn(__uint_as_float(__byte_perm(w, 0x4B000000u, 0x7650u | unsigned(b))), 8388608.0f);
}

// Affine codecs: 8 lanes share one block, each widening G / 8 of its codes, so a group's reads of x are contiguous
// (a lane's elements sit 4 floats from its neighbours', not a whole block apart) and each lane holds few registers.
// The warp's 4 groups take blocks grp, grp + 4, ...; which lane adds which element depends only on the matrix.
//
// Lane t of a group reads the block's scale/minimum word and its own codes: q4_g64 and q8_g32 one word, q8_g64 two,
// q4_g32 half of one.
template <CodecId C>
__device__ __forceinline__ void load_affine(const uint8_t* blk, int t, uint32_t& dm, uint32_t& c0, uint32_t& c1) {
  const uint32_t* words = reinterpret_cast<const uint32_t*>(blk);
  dm = words[0];
  c1 = 0;
  if constexpr (C == Id::Q4_G64 || C == Id::Q8_G32) {
    c0 = words[1 + t];
  } else if constexpr (C == Id::Q4_G32) {
    c0 = reinterpret_cast<const uint16_t*>(blk + 4)[t];
  } else {  // q8_g64
    c0 = words[1 + 2 * t];
    c1 = words[2 + 2 * t];
  }
}

// The G / 8 codes lane t holds of a block, as exact floats, and the element of the block each belongs to.
template <CodecId C>
__device__ __forceinline__ void affine_codes(uint32_t c0, uint32_t c1, int t, float* q, int* idx) {
  if constexpr (C == Id::Q4_G64) {  // byte i: element i (low nibble), i + 32 (high)
    // The 4 low and the 4 high nibbles each masked into bytes with one operation, then each byte placed under the
    // exponent of 2^23 with one byte permute (code_float's bits, in fewer instructions).
    const uint32_t lo = c0 & 0x0f0f0f0fu, hi = (c0 >> 4) & 0x0f0f0f0fu;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      q[b] = code_float_byte(lo, b);
      q[4 + b] = code_float_byte(hi, b);
      idx[b] = 4 * t + b;
      idx[4 + b] = 32 + 4 * t + b;
    }
  } else if constexpr (C == Id::Q4_G32) {  // byte i: element i (low nibble), i + 16 (high)
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      q[b] = code_float((c0 >> (8 * b)) & 0x0fu);
      q[2 + b] = code_float((c0 >> (8 * b + 4)) & 0x0fu);
      idx[b] = 2 * t + b;
      idx[2 + b] = 16 + 2 * t + b;
    }
  } else if constexpr (C == Id::Q8_G32) {  // byte i is element i
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      q[b] = code_float((c0 >> (8 * b)) & 0xffu);
      idx[b] = 4 * t + b;
    }
  } else {  // q8_g64
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      q[b] = code_float((c0 >> (8 * b)) & 0xffu);
      q[4 + b] = code_float((c1 >> (8 * b)) & 0xffu);
      idx[b] = 8 * t + b;
      idx[4 + b] = 8 * t + 4 + b;
    }
  }
}

// The lane's G / 8 inputs of a full block (elements idx of x), with 16-byte loads where they are contiguous and the
// caller says x is 16-byte aligned (A); q4_g32's pairs are read as two floats each way.
template <CodecId C, bool A>
__device__ __forceinline__ void lane_inputs(const float* x, int t, float* xv) {
  constexpr int kPer = Unit<C>::G / 8;
  if constexpr (A && C == Id::Q4_G64) {
    const float4 lo = *reinterpret_cast<const float4*>(x + 4 * t),
                 hi = *reinterpret_cast<const float4*>(x + 32 + 4 * t);
    xv[0] = lo.x, xv[1] = lo.y, xv[2] = lo.z, xv[3] = lo.w, xv[4] = hi.x, xv[5] = hi.y, xv[6] = hi.z, xv[7] = hi.w;
  } else if constexpr (A && C == Id::Q8_G64) {
    const float4 lo = *reinterpret_cast<const float4*>(x + 8 * t), hi = *reinterpret_cast<const float4*>(x + 8 * t + 4);
    xv[0] = lo.x, xv[1] = lo.y, xv[2] = lo.z, xv[3] = lo.w, xv[4] = hi.x, xv[5] = hi.y, xv[6] = hi.z, xv[7] = hi.w;
  } else if constexpr (A && C == Id::Q8_G32) {
    const float4 v = *reinterpret_cast<const float4*>(x + 4 * t);
    xv[0] = v.x, xv[1] = v.y, xv[2] = v.z, xv[3] = v.w;
  } else {
    float q[kPer];
    int idx[kPer];
    affine_codes<C>(0, 0, t, q, idx);
#pragma unroll
    for (int j = 0; j < kPer; ++j) xv[j] = x[idx[j]];
  }
}

// NW weight rows, row v against R rows of its own x (row r at xs[v] + r * ldx), into acc[v][r]. Each group loads
// the words of kBatch blocks of every weight row before widening any, so a lane has 2 * NW * kBatch loads in flight.
//
// The arithmetic is factored: a block's values are d * q + m, so the lane adds d * (sum of q * x) + m * (sum of x)
// over its G / 8 elements (fmaf, in this order) instead of widening every weight: about half the instructions of
// widening, and matrix-vector products here are bound by instructions, not bytes. Every kernel that reads an affine
// matrix sums this way, in one order per output element that depends only on the matrix (not on NW, R, `rows` or
// where the weights sit), so a row's result is the same alone, batched, staged or not. Against the CPU (which
// widens each weight), the error is bounded by the sum of (|d q| + |m|) |x| instead of |w x| (tests/unit/cuda).
// SameX: every weight row reads the same x (xs[v] == xs[0]): each block's inputs and their sum are read and added
// once for all NW rows, in the same order, so the same bits.
//
// kWhole: the caller knows every block is full and x 16-byte aligned, so the loop leaves out the partial block's
// and the unaligned loads' code, the operations and their order unchanged. (ncu counted 8.5 instructions a weight in
// the head's product, against 3.3 for its float operations: docs/results/2026-12-01-cuda-session11-decode-ceiling.md.)
template <CodecId C, int R, int NW, bool SameX, bool kWhole>
__device__ __forceinline__ void affine_group_dot_shaped(const uint8_t* const (&wrows)[NW], int64_t cols,
                                                        const float* const (&xs)[NW], int64_t ldx, int rows,
                                                        bool aligned, float (&acc)[NW][R]) {
  constexpr int G = Unit<C>::G, kPer = G / 8, kBatch = NW == 1 ? 8 : 4;
  const int lane = threadIdx.x % kWarp, grp = lane / 8, t = lane % 8;
  const int64_t units = (cols + G - 1) / G;
  // The lane's inputs of block k0 of row xr: 16-byte loads, element loads, or (a partial block) zeros past cols.
  const auto inputs = [&](const float* xr, int64_t k0, const int(&idx)[kPer], float(&xv)[kPer]) {
    if (kWhole || (k0 + G <= cols && aligned)) {
      lane_inputs<C, true>(xr, t, xv);
    } else if (k0 + G <= cols) {
      lane_inputs<C, false>(xr, t, xv);
    } else {
#pragma unroll
      for (int j = 0; j < kPer; ++j) xv[j] = k0 + idx[j] < cols ? xr[idx[j]] : 0.0f;
    }
  };
  for (int64_t u0 = grp; u0 < units; u0 += 4 * kBatch) {
    uint32_t dm[NW][kBatch], c0[NW][kBatch], c1[NW][kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t u = u0 + 4 * i;
#pragma unroll
      for (int v = 0; v < NW; ++v) {
        if (u < units) load_affine<C>(wrows[v] + u * Unit<C>::bytes, t, dm[v][i], c0[v][i], c1[v][i]);
      }
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t u = u0 + 4 * i;
      if (u >= units) break;
      const int64_t k0 = u * G;
      if constexpr (SameX) {
        float xv[R][kPer], sx[R];
        int idx[kPer];
        {
          float q0[kPer];
          affine_codes<C>(0, 0, t, q0, idx);
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (r >= rows) break;
          inputs(xs[0] + r * ldx + k0, k0, idx, xv[r]);
          sx[r] = 0.0f;
#pragma unroll
          for (int j = 0; j < kPer; ++j) sx[r] = __fadd_rn(sx[r], xv[r][j]);
        }
#pragma unroll
        for (int v = 0; v < NW; ++v) {
          const float d = f16_bits(uint16_t(dm[v][i] & 0xffffu)), m = f16_bits(uint16_t(dm[v][i] >> 16));
          float q[kPer];
          affine_codes<C>(c0[v][i], c1[v][i], t, q, idx);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            if (r >= rows) break;
            float sq = 0.0f;
#pragma unroll
            for (int j = 0; j < kPer; ++j) sq = fmaf(q[j], xv[r][j], sq);
            acc[v][r] = fmaf(m, sx[r], fmaf(d, sq, acc[v][r]));
          }
        }
      } else {
#pragma unroll
        for (int v = 0; v < NW; ++v) {
          const float d = f16_bits(uint16_t(dm[v][i] & 0xffffu)), m = f16_bits(uint16_t(dm[v][i] >> 16));
          float q[kPer];
          int idx[kPer];
          affine_codes<C>(c0[v][i], c1[v][i], t, q, idx);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            if (r >= rows) break;
            float xv[kPer];
            inputs(xs[v] + r * ldx + k0, k0, idx, xv);
            float sq = 0.0f, sx = 0.0f;
#pragma unroll
            for (int j = 0; j < kPer; ++j) {
              sq = fmaf(q[j], xv[j], sq);
              sx = __fadd_rn(sx, xv[j]);
            }
            acc[v][r] = fmaf(m, sx, fmaf(d, sq, acc[v][r]));
          }
        }
      }
    }
  }
}

// Whether every row of each x (rows ldx floats apart) starts 16-byte aligned.
template <int NW>
__device__ __forceinline__ bool rows_aligned16(const float* const (&xs)[NW], int64_t ldx) {
  bool aligned = ldx % 4 == 0;
#pragma unroll
  for (int v = 0; v < NW; ++v) aligned = aligned && reinterpret_cast<uintptr_t>(xs[v]) % 16 == 0;
  return aligned;
}

// affine_group_dot_shaped, kWhole when the shape allows it.
template <CodecId C, int R, int NW, bool SameX = false>
__device__ __forceinline__ void affine_group_dot(const uint8_t* const (&wrows)[NW], int64_t cols,
                                                 const float* const (&xs)[NW], int64_t ldx, int rows,
                                                 float (&acc)[NW][R]) {
  const bool aligned = rows_aligned16(xs, ldx);
  if (aligned && cols % Unit<C>::G == 0) {
    affine_group_dot_shaped<C, R, NW, SameX, true>(wrows, cols, xs, ldx, rows, aligned, acc);
  } else {
    affine_group_dot_shaped<C, R, NW, SameX, false>(wrows, cols, xs, ldx, rows, aligned, acc);
  }
}

// acc[r] += w . x[r][k0 .. k0 + valid) for the rows r < rows.
template <int G, int R>
__device__ __forceinline__ void fma_unit(const float* w, int valid, const float* x, int64_t ldx, int64_t k0, int rows,
                                         float* acc) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r >= rows) break;
    const float* xr = x + r * ldx + k0;
    float a = acc[r];
    if (valid == G) {
#pragma unroll
      for (int j = 0; j < G; ++j) a = fmaf(w[j], xr[j], a);
    } else {  // the row's last unit: registers indexed by constants only, so w stays out of local memory
#pragma unroll
      for (int j = 0; j < G; ++j) {
        if (j < valid) a = fmaf(w[j], xr[j], a);
      }
    }
    acc[r] = a;
  }
}

// Seed codecs: lane l decodes blocks l, l + 32, ... of each of NW weight rows (seed_device.cuh, bit for bit the
// CPU's weights) and adds w_c * x_c over the block's elements in order (fma_unit), for R rows of that weight row's x.
// The fields of kBatch blocks a row are loaded before any is decoded, so several loads are in flight per lane. The
// order of additions depends only on the matrix, as for the other codecs.
template <CodecId C, int R, int NW>
__device__ __forceinline__ void seed_group_dot(const SeedRow (&wrows)[NW], int64_t cols, const float* const (&xs)[NW],
                                               int64_t ldx, int rows, float (&acc)[NW][R]) {
  constexpr seeddev::Geom g = seed_geom(C);
  constexpr int kBatch = NW == 1 ? 4 : 2;
  const int lane = threadIdx.x % kWarp;
  const int64_t per_row = (cols + g.C - 1) / g.C;
  const uint64_t* lo = kDeviceStreamTables.lo;
  const uint64_t* hi = kDeviceStreamTables.hi;
  int32_t bias[NW];
#pragma unroll
  for (int v = 0; v < NW; ++v) bias[v] = seeddev::blob_bias(wrows[v].blob);
  for (int64_t j0 = lane; j0 < per_row; j0 += kWarp * kBatch) {
    seeddev::Fields f[NW][kBatch] = {};
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t j = j0 + i * kWarp;
#pragma unroll
      for (int v = 0; v < NW; ++v) {
        if (j < per_row) f[v][i] = seeddev::block_fields(g, wrows[v].blob, wrows[v].n_blocks, wrows[v].first + j);
      }
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t j = j0 + i * kWarp;
      if (j >= per_row) break;
      const int64_t k0 = j * g.C;
      const int valid = int(min_i64(g.C, cols - k0));
#pragma unroll
      for (int v = 0; v < NW; ++v) {
        float w[g.C];
        seeddev::seed_decode_block<g.C, g.P>(g, seeddev::stream_of(f[v][i].seed, lo, hi), f[v][i].word,
                                             seed::seed_scale(bias[v] + f[v][i].code), w);
        fma_unit<g.C, R>(w, valid, xs[v], ldx, k0, rows, acc[v]);
      }
    }
  }
}

// MXFP4 (codec.h), rows in mxfp4_layout.h's device layout: as the affine codecs, 8 lanes share a block and the warp's
// 4 groups take blocks grp, grp + 4, ...; lane t adds 2^(e - 127) * sum(fp4 * x) over the block's elements 4t .. 4t + 3
// (a group's x is 32 contiguous floats): the scale is a power of 2, so that product is exact and the result is the sum
// of the exact weights times x, rounded in this fixed order. A lane reads a chunk's codes (2K bytes: one 16-byte load
// in a chunk of 32 blocks) and its group's K scales in one load each, for NW rows, before it widens any.
template <int K>
struct Mxfp4Lane {
  uint32_t code[(K + 1) / 2];   // blocks 2i and 2i + 1 in word i (K = 1: one block, the high half zero)
  uint32_t scale[(K + 3) / 4];  // block i's scale in byte i % 4 of word i / 4
};

template <int K>
__device__ __forceinline__ void mxfp4_load(const uint8_t* row, int64_t nb, int64_t b, int lane, Mxfp4Lane<K>& d) {
  const uint8_t* c = row + 16 * b + 2 * K * lane;
  const uint8_t* s = row + mxfp4::scales_at(nb) + b + K * (lane / 8);
  if constexpr (K == 8) {
    const uint4 v = *reinterpret_cast<const uint4*>(c);
    const uint2 e = *reinterpret_cast<const uint2*>(s);
    d.code[0] = v.x, d.code[1] = v.y, d.code[2] = v.z, d.code[3] = v.w;
    d.scale[0] = e.x, d.scale[1] = e.y;
  } else if constexpr (K == 4) {
    const uint2 v = *reinterpret_cast<const uint2*>(c);
    d.code[0] = v.x, d.code[1] = v.y;
    d.scale[0] = *reinterpret_cast<const uint32_t*>(s);
  } else if constexpr (K == 2) {
    d.code[0] = *reinterpret_cast<const uint32_t*>(c);
    d.scale[0] = *reinterpret_cast<const uint16_t*>(s);
  } else {
    d.code[0] = *reinterpret_cast<const uint16_t*>(c);
    d.scale[0] = *s;
  }
}

// The chunk of K that starts at block b (of nb): each of the lane's blocks b + grp + 4i in order, every block whole and
// x 16-byte aligned.
template <int K, int R, int NW, bool SameX>
__device__ __forceinline__ void mxfp4_chunk(const uint8_t* const (&wrows)[NW], int64_t nb, int64_t b,
                                            const float* const (&xs)[NW], int64_t ldx, int rows, float (&acc)[NW][R]) {
  constexpr int G = Unit<Id::MXFP4>::G;
  const int lane = threadIdx.x % kWarp, grp = lane / 8, t = lane % 8;
  if (K == 1 && b + grp >= nb) return;  // the last chunk may hold fewer than 4 blocks
  Mxfp4Lane<K> d[NW];
#pragma unroll
  for (int v = 0; v < NW; ++v) mxfp4_load<K>(wrows[v], nb, b, lane, d[v]);
  constexpr int kPer = K == 1 ? 1 : 2;  // blocks of a code word
  // Block i of the chunk for weight row v (its 4 codes q, times 2^-14) against its inputs xv of each row r.
  const auto add_block = [&](int v, int i, const float(&q)[4], const float(&xv)[R][4]) {
    const uint32_t sw = d[v].scale[i / 4];
    const float scale = i % 4 == 0   ? e8m0_scale_byte<0>(sw)
                        : i % 4 == 1 ? e8m0_scale_byte<1>(sw)
                        : i % 4 == 2 ? e8m0_scale_byte<2>(sw)
                                     : e8m0_scale_byte<3>(sw);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= rows) break;
      float sq = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) sq = fmaf(q[j], xv[r][j], sq);
      acc[v][r] = fmaf(scale, sq * kFp4Unscale, acc[v][r]);
    }
  };
  const auto block_inputs = [&](const float* x, int i, float(&xv)[R][4]) {
    const int64_t k0 = (b + grp + 4 * i) * G;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= rows) break;
      const float4 f = *reinterpret_cast<const float4*>(x + r * ldx + k0 + 4 * t);
      xv[r][0] = f.x, xv[r][1] = f.y, xv[r][2] = f.z, xv[r][3] = f.w;
    }
  };
  if constexpr (SameX) {  // each block's inputs read once for all NW weight rows
#pragma unroll
    for (int i2 = 0; i2 < (K + 1) / 2; ++i2) {
      float xv[kPer][R][4];
#pragma unroll
      for (int h = 0; h < kPer; ++h) block_inputs(xs[0], 2 * i2 + h, xv[h]);
#pragma unroll
      for (int v = 0; v < NW; ++v) {
        float q[2][4];  // blocks 2 i2 and 2 i2 + 1, elements 4t .. 4t + 3, times 2^-14
        fp4x8_times_2m14(d[v].code[i2], q[0], q[1]);
#pragma unroll
        for (int h = 0; h < kPer; ++h) add_block(v, 2 * i2 + h, q[h], xv[h]);
      }
    }
  } else {  // weight row by weight row, each with its own x
#pragma unroll
    for (int v = 0; v < NW; ++v) {
#pragma unroll
      for (int i2 = 0; i2 < (K + 1) / 2; ++i2) {
        float q[2][4];
        fp4x8_times_2m14(d[v].code[i2], q[0], q[1]);
#pragma unroll
        for (int h = 0; h < kPer; ++h) {
          float xv[R][4];
          block_inputs(xs[v], 2 * i2 + h, xv);
          add_block(v, 2 * i2 + h, q[h], xv);
        }
      }
    }
  }
}

// Every block whole and x 16-byte aligned: the row's chunks in order.
template <int R, int NW, bool SameX>
__device__ __forceinline__ void mxfp4_group_dot_shaped(const uint8_t* const (&wrows)[NW], int64_t cols,
                                                       const float* const (&xs)[NW], int64_t ldx, int rows,
                                                       float (&acc)[NW][R]) {
  const int64_t nb = mxfp4::blocks(cols);
  int64_t b = 0;
  for (; b + mxfp4::kChunkMax <= nb; b += mxfp4::kChunkMax)
    mxfp4_chunk<8, R, NW, SameX>(wrows, nb, b, xs, ldx, rows, acc);
  if (nb - b >= 16) {
    mxfp4_chunk<4, R, NW, SameX>(wrows, nb, b, xs, ldx, rows, acc);
    b += 16;
  }
  if (nb - b >= 8) {
    mxfp4_chunk<2, R, NW, SameX>(wrows, nb, b, xs, ldx, rows, acc);
    b += 8;
  }
  if (nb - b >= 4) {
    mxfp4_chunk<1, R, NW, SameX>(wrows, nb, b, xs, ldx, rows, acc);
    b += 4;
  }
  if (b < nb) mxfp4_chunk<1, R, NW, SameX>(wrows, nb, b, xs, ldx, rows, acc);
}

// The same sums block by block, each block's codes and scale found by mxfp4_layout.h's offsets: for rows whose blocks
// are not all whole or whose x is not 16-byte aligned (few registers and little code, so the chunked path beside it
// keeps its registers; the operations and their order are the chunked path's).
template <int R, int NW>
__device__ __forceinline__ void mxfp4_group_dot_any(const uint8_t* const (&wrows)[NW], int64_t cols,
                                                    const float* const (&xs)[NW], int64_t ldx, int rows, bool aligned,
                                                    float (&acc)[NW][R]) {
  constexpr int G = Unit<Id::MXFP4>::G;
  const int lane = threadIdx.x % kWarp, grp = lane / 8, t = lane % 8;
  const int64_t nb = mxfp4::blocks(cols);
  for (int64_t u = grp; u < nb; u += 4) {
    const int64_t k0 = u * G;
    const size_t at = mxfp4::code_at(nb, u, t);
    const size_t sat = mxfp4::scale_at(nb, u);
#pragma unroll
    for (int v = 0; v < NW; ++v) {
      const uint8_t* c = wrows[v] + at;
      float q[2][4];
      fp4x8_times_2m14(uint32_t(c[0]) | uint32_t(c[1]) << 8, q[0], q[1]);
      const float scale = e8m0_scale(wrows[v][sat]);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (r >= rows) break;
        const float* xr = xs[v] + r * ldx + k0;
        float xv[4];
        if (k0 + G <= cols && aligned) {
          const float4 f = *reinterpret_cast<const float4*>(xr + 4 * t);
          xv[0] = f.x, xv[1] = f.y, xv[2] = f.z, xv[3] = f.w;
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j) xv[j] = k0 + 4 * t + j < cols ? xr[4 * t + j] : 0.0f;
        }
        float sq = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j) sq = fmaf(q[0][j], xv[j], sq);
        acc[v][r] = fmaf(scale, sq * kFp4Unscale, acc[v][r]);
      }
    }
  }
}

// The chunked path where every block is whole and x 16-byte aligned, else mxfp4_group_dot_any.
template <int R, int NW, bool SameX>
__device__ __forceinline__ void mxfp4_group_dot(const uint8_t* const (&wrows)[NW], int64_t cols,
                                                const float* const (&xs)[NW], int64_t ldx, int rows,
                                                float (&acc)[NW][R]) {
  const bool aligned = rows_aligned16(xs, ldx);
  if (aligned && cols % Unit<Id::MXFP4>::G == 0) {
    mxfp4_group_dot_shaped<R, NW, SameX>(wrows, cols, xs, ldx, rows, acc);
  } else {
    mxfp4_group_dot_any<R, NW>(wrows, cols, xs, ldx, rows, aligned, acc);
  }
}

// FP8_G32 (codec.h): as the affine codecs, 8 lanes share a block and the warp's 4 groups take blocks grp, grp + 4, ...;
// lane t adds d * (sum of e4m3(code) * x) over the block's elements 4t .. 4t + 3 (fmaf in element order; the codes
// widened exactly as their values times 2^-8, the sum then times kE4m3Unscale, exact while no product falls below
// 2^-118). Against the CPU (which widens each weight to the float e4m3(code) * d) the error is bounded by the sum of
// |w x|, as for the float codecs. The words of kBatch blocks of every weight row are loaded before any is widened;
// SameX reads each block's inputs once for all NW rows (the same operations, so the same bits). kWhole: every block
// full and x 16-byte aligned (the same operations, less code).
template <int R, int NW, bool SameX, bool kWhole>
__device__ __forceinline__ void fp8_group_dot_shaped(const uint8_t* const (&wrows)[NW], int64_t cols,
                                                     const float* const (&xs)[NW], int64_t ldx, int rows, bool aligned,
                                                     float (&acc)[NW][R]) {
  constexpr int G = Unit<Id::FP8_G32>::G, kBatch = NW == 1 ? 8 : 4;
  const int lane = threadIdx.x % kWarp, grp = lane / 8, t = lane % 8;
  const int64_t units = (cols + G - 1) / G;
  // The lane's 4 inputs of the block at k0 of row xr: one 16-byte load, element loads, or zeros past cols.
  const auto inputs = [&](const float* xr, int64_t k0, float(&xv)[4]) {
    if (kWhole || (k0 + G <= cols && aligned)) {
      const float4 v = *reinterpret_cast<const float4*>(xr + 4 * t);
      xv[0] = v.x, xv[1] = v.y, xv[2] = v.z, xv[3] = v.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) xv[j] = k0 + 4 * t + j < cols ? xr[4 * t + j] : 0.0f;
    }
  };
  for (int64_t u0 = grp; u0 < units; u0 += 4 * kBatch) {
    uint32_t dw[NW][kBatch], cw[NW][kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t u = u0 + 4 * i;
#pragma unroll
      for (int v = 0; v < NW; ++v) {
        if (u < units) {
          const uint32_t* words = reinterpret_cast<const uint32_t*>(wrows[v] + u * Unit<Id::FP8_G32>::bytes);
          dw[v][i] = words[0];
          cw[v][i] = words[1 + t];
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t u = u0 + 4 * i;
      if (u >= units) break;
      const int64_t k0 = u * G;
      float xv[NW][R][4];
#pragma unroll
      for (int v = 0; v < NW; ++v) {
        if (SameX && v > 0) break;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (r >= rows) break;
          inputs(xs[v] + r * ldx + k0, k0, xv[v][r]);
        }
      }
#pragma unroll
      for (int v = 0; v < NW; ++v) {
        float q[4];
        e4m3x4_times_2m8(cw[v][i], q);
        const float d = __uint_as_float(dw[v][i]);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (r >= rows) break;
          const float(&x4)[4] = xv[SameX ? 0 : v][r];
          float sq = 0.0f;
#pragma unroll
          for (int j = 0; j < 4; ++j) sq = fmaf(q[j], x4[j], sq);
          acc[v][r] = fmaf(d, sq * kE4m3Unscale, acc[v][r]);
        }
      }
    }
  }
}

// fp8_group_dot_shaped, kWhole when the shape allows it.
template <int R, int NW, bool SameX>
__device__ __forceinline__ void fp8_group_dot(const uint8_t* const (&wrows)[NW], int64_t cols,
                                              const float* const (&xs)[NW], int64_t ldx, int rows,
                                              float (&acc)[NW][R]) {
  const bool aligned = rows_aligned16(xs, ldx);
  if (aligned && cols % Unit<Id::FP8_G32>::G == 0) {
    fp8_group_dot_shaped<R, NW, SameX, true>(wrows, cols, xs, ldx, rows, aligned, acc);
  } else {
    fp8_group_dot_shaped<R, NW, SameX, false>(wrows, cols, xs, ldx, rows, aligned, acc);
  }
}

// The ggml codecs (ggml_pieces.h): lane l takes piece t (elements 8t .. 8t + 7; for the 32-element nibble types pair
// piece t, elements 4t .. 4t + 3 and 16 + 4t .. 16 + 4t + 3, so a lane loads 4 code bytes and uses both nibbles of
// each) of its group's blocks, a group being the 4 lanes that share a 32-element block (the warp's 8 groups take
// blocks grp, grp + 8, ...) or the whole warp for the 256-element blocks (blocks 0, 1, ...), so a group's x is
// contiguous and a lane reads its piece's as two float4s. A piece
// lies in one sub-block, of one scale d and offset m, so the lane adds d * sum(q x) + m * sum(x) over it (fmaf, in
// this order; m only for the types with an offset), factored as the affine codecs' blocks are: the order depends only
// on the matrix, never on NW, R or `rows`. The words of kBatch blocks of every weight row are loaded before any is
// decoded. SameX: each piece's inputs (and their sum) read once for all NW rows, the same operations. kWhole: every
// block whole and x 16-byte aligned; otherwise x is read element by element, zeros past cols (a GGUF's rows are whole
// blocks; the CPU refuses others).
template <CodecId C, int R, int NW, bool SameX, bool kWhole>
__device__ __forceinline__ void ggml_group_dot_shaped(const uint8_t* const (&wrows)[NW], int64_t cols,
                                                      const float* const (&xs)[NW], int64_t ldx, int rows,
                                                      float (&acc)[NW][R]) {
  constexpr int G = Unit<C>::G, kLanes = G / 8, kGroups = kWarp / kLanes, kBatch = NW == 1 ? 4 : NW == 2 ? 2 : 1;
  constexpr bool kOffset = ggml_dev::has_offset(C), kPair = ggml_dev::has_pair_pieces(C);
  const int lane = threadIdx.x % kWarp, grp = lane / kLanes, t = lane % kLanes, j0 = 8 * t;
  // The block positions of the piece's elements 0..3 and 4..7.
  const int lo = kPair ? 4 * t : j0, hi = kPair ? 16 + 4 * t : j0 + 4;
  const int64_t units = (cols + G - 1) / G;
  // The piece's 8 inputs of one row of x (xb: its block's first; kb that block's first column), and their sum where
  // the type adds an offset.
  const auto inputs = [&](const float* xb, int64_t kb, float(&xv)[8], float& sx) {
    if constexpr (kWhole) {
      const float4 a = *reinterpret_cast<const float4*>(xb + lo), b = *reinterpret_cast<const float4*>(xb + hi);
      xv[0] = a.x, xv[1] = a.y, xv[2] = a.z, xv[3] = a.w, xv[4] = b.x, xv[5] = b.y, xv[6] = b.z, xv[7] = b.w;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int at = j < 4 ? lo + j : hi + j - 4;
        xv[j] = kb + at < cols ? xb[at] : 0.0f;
      }
    }
    sx = 0.0f;
    if constexpr (kOffset) {
#pragma unroll
      for (int j = 0; j < 8; ++j) sx = __fadd_rn(sx, xv[j]);
    }
  };
  // acc += d * sum(q x) (+ m * sum(x)) over the piece.
  const auto add = [&](const ggml_dev::Piece& p, const float(&xv)[8], float sx, float& a) {
    float sq = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) sq = fmaf(p.q[j], xv[j], sq);
    a = fmaf(p.d, sq, a);
    if constexpr (kOffset) a = fmaf(p.m, sx, a);
  };
  for (int64_t u0 = grp; u0 < units; u0 += kGroups * kBatch) {
    uint32_t raw[NW][kBatch][8] = {};
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t u = u0 + kGroups * i;
#pragma unroll
      for (int v = 0; v < NW; ++v) {
        if (u >= units) continue;
        if constexpr (kPair) {
          ggml_dev::pair_fetch<C>(wrows[v] + u * Unit<C>::bytes, t, raw[v][i]);
        } else {
          ggml_dev::fetch<C>(wrows[v] + u * Unit<C>::bytes, j0, raw[v][i]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t u = u0 + kGroups * i;
      if (u >= units) break;
      const int64_t kb = u * G;
      // SameX: every row's inputs read before the weight rows; else one row's at a time.
      constexpr int kXRows = SameX ? R : 1;
      float xv[kXRows][8], sx[kXRows];
      if constexpr (SameX) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (r >= rows) break;
          inputs(xs[0] + r * ldx + kb, kb, xv[r], sx[r]);
        }
      }
#pragma unroll
      for (int v = 0; v < NW; ++v) {
        ggml_dev::Piece p;
        if constexpr (kPair) {
          p = ggml_dev::pair_decode<C>(raw[v][i], t);
        } else {
          p = ggml_dev::decode<C>(raw[v][i], j0);
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (r >= rows) break;
          if constexpr (!SameX) inputs(xs[v] + r * ldx + kb, kb, xv[0], sx[0]);
          add(p, xv[SameX ? r : 0], sx[SameX ? r : 0], acc[v][r]);
        }
      }
    }
  }
}

// Q4_K and Q5_K read whole code runs instead of pieces: 8 lanes share a 256-element block, as the affine codecs'
// blocks are shared (the warp's 4 groups take blocks grp, grp + 4, ...). Lane t of a group owns bytes 16t .. 16t + 15
// of the block's qs: run c = t / 2 holds sub-block 2c in its low nibbles and 2c + 1 in its high ones, so the lane
// takes positions p0 = 16 (t % 2) .. p0 + 15 of both sub-blocks (Q5_K's fifth bits: bits 2c and 2c + 1 of qh's bytes
// p0 .. p0 + 15). It loads the block's 16-byte header (d, dmin, the 12 scale bytes) once, where a piece reloaded it
// for every 8 elements, and adds per sub-block d * sum(q x) + m * sum(x) over its 16 elements (fmaf in element
// order, the low sub-block first), with d and m ggml_pieces.h's decode() values. The order depends only on the
// matrix. kWhole: x 16-byte aligned (a GGUF's K-quant rows are whole blocks); otherwise x is read element by element.
template <CodecId C, int R, int NW, bool SameX, bool kWhole>
__device__ __forceinline__ void kquant_group_dot_shaped(const uint8_t* const (&wrows)[NW], int64_t cols,
                                                        const float* const (&xs)[NW], int64_t ldx, int rows,
                                                        float (&acc)[NW][R]) {
  static_assert(C == Id::Q4_K || C == Id::Q5_K, "Q4_K and Q5_K");
  constexpr int kLanes = 8, kGroups = kWarp / kLanes, kBatch = NW == 1 ? 2 : 1;
  constexpr int kQs = C == Id::Q4_K ? 16 : 48, kBytes = Unit<C>::bytes;
  const int lane = threadIdx.x % kWarp, grp = lane / kLanes, t = lane % kLanes, c = t / 2, p0 = 16 * (t % 2);
  const int64_t units = (cols + 255) / 256;
  // The 16 inputs of one row at xr (element k0 of the row), zeros past cols.
  const auto inputs = [&](const float* xr, int64_t k0, float(&xv)[16]) {
    if constexpr (kWhole) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float4 f = reinterpret_cast<const float4*>(xr)[j];
        xv[4 * j] = f.x, xv[4 * j + 1] = f.y, xv[4 * j + 2] = f.z, xv[4 * j + 3] = f.w;
      }
    } else {
#pragma unroll
      for (int j = 0; j < 16; ++j) xv[j] = k0 + j < cols ? xr[j] : 0.0f;
    }
  };
  for (int64_t u0 = grp; u0 < units; u0 += kGroups * kBatch) {
    uint4 hdr[NW][kBatch], qs[NW][kBatch], qh[NW][kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t u = u0 + kGroups * i;
#pragma unroll
      for (int v = 0; v < NW; ++v) {
        if (u >= units) continue;
        const uint8_t* blk = wrows[v] + u * kBytes;
        hdr[v][i] = *reinterpret_cast<const uint4*>(blk);
        qs[v][i] = *reinterpret_cast<const uint4*>(blk + kQs + 32 * c + p0);
        if constexpr (C == Id::Q5_K) qh[v][i] = *reinterpret_cast<const uint4*>(blk + 16 + p0);
      }
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t u = u0 + kGroups * i;
      if (u >= units) break;
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // sub-block 2c (low nibbles), then 2c + 1 (high)
        const int sb = 2 * c + half;
        const int64_t k0 = u * 256 + 32 * sb + p0;
        constexpr int kXRows = SameX ? R : 1;
        float xv[kXRows][16], sx[kXRows];
        const auto row_inputs = [&](const float* xr, float(&x16)[16], float& s) {
          inputs(xr, k0, x16);
          s = 0.0f;
#pragma unroll
          for (int j = 0; j < 16; ++j) s = __fadd_rn(s, x16[j]);
        };
        if constexpr (SameX) {
#pragma unroll
          for (int r = 0; r < R; ++r) {
            if (r >= rows) break;
            row_inputs(xs[0] + r * ldx + k0, xv[r], sx[r]);
          }
        }
#pragma unroll
        for (int v = 0; v < NW; ++v) {
          const uint4 h = hdr[v][i];
          int scale = 0, min = 0;
          ggml_dev::k_scale_min_words(h.y, h.z, h.w, sb, scale, min);
          const float d = __fmul_rn(ggml_dev::f16_value(h.x), code_float(uint32_t(scale)));
          const float m = -__fmul_rn(ggml_dev::f16_value(h.x >> 16), code_float(uint32_t(min)));
          const uint32_t code_words[4] = {qs[v][i].x, qs[v][i].y, qs[v][i].z, qs[v][i].w};
          float q[16];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            uint32_t b = (code_words[j] >> (4 * half)) & 0x0F0F0F0Fu;
            if constexpr (C == Id::Q5_K) {
              const uint32_t hw = j == 0 ? qh[v][i].x : j == 1 ? qh[v][i].y : j == 2 ? qh[v][i].z : qh[v][i].w;
              b |= ((hw >> sb) & 0x01010101u) << 4;
            }
#pragma unroll
            for (int e = 0; e < 4; ++e) q[4 * j + e] = code_float_byte(b, e);
          }
#pragma unroll
          for (int r = 0; r < R; ++r) {
            if (r >= rows) break;
            if constexpr (!SameX) row_inputs(xs[v] + r * ldx + k0, xv[0], sx[0]);
            const float(&x16)[16] = xv[SameX ? r : 0];
            float sq = 0.0f;
#pragma unroll
            for (int j = 0; j < 16; ++j) sq = fmaf(q[j], x16[j], sq);
            acc[v][r] = fmaf(d, sq, acc[v][r]);
            acc[v][r] = fmaf(m, sx[SameX ? r : 0], acc[v][r]);
          }
        }
      }
    }
  }
}

// Q6_K in runs (ggml_pieces.h's q6k_run_fetch / q6k_run_decode): 8 lanes share a block (the warp's 4 groups take
// blocks grp, grp + 4, ...); lane t adds, per group g of its four, d * sum(q x) over its 8 elements (fmaf in element
// order, g = 0 first). 24 bytes of codes and one scale word a lane where a piece reloaded d and its scale for every 8
// elements. The order depends only on the matrix. kWhole: x 16-byte aligned; otherwise x is read element by element.
template <int R, int NW, bool SameX, bool kWhole>
__device__ __forceinline__ void q6k_group_dot_shaped(const uint8_t* const (&wrows)[NW], int64_t cols,
                                                     const float* const (&xs)[NW], int64_t ldx, int rows,
                                                     float (&acc)[NW][R]) {
  constexpr int kLanes = 8, kGroups = kWarp / kLanes, kBatch = NW == 1 ? 2 : 1;
  constexpr int kBytes = Unit<Id::Q6_K>::bytes;
  const int lane = threadIdx.x % kWarp, grp = lane / kLanes, t = lane % kLanes;
  const int64_t units = (cols + 255) / 256;
  const auto inputs = [&](const float* xr, int64_t k0, float(&xv)[8]) {
    if constexpr (kWhole) {
      const float4 lo = reinterpret_cast<const float4*>(xr)[0], hi = reinterpret_cast<const float4*>(xr)[1];
      xv[0] = lo.x, xv[1] = lo.y, xv[2] = lo.z, xv[3] = lo.w, xv[4] = hi.x, xv[5] = hi.y, xv[6] = hi.z, xv[7] = hi.w;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) xv[j] = k0 + j < cols ? xr[j] : 0.0f;
    }
  };
  for (int64_t u0 = grp; u0 < units; u0 += kGroups * kBatch) {
    uint32_t raw[NW][kBatch][9];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t u = u0 + kGroups * i;
#pragma unroll
      for (int v = 0; v < NW; ++v) {
        if (u < units) ggml_dev::q6k_run_fetch(wrows[v] + u * kBytes, t, raw[v][i]);
      }
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t u = u0 + kGroups * i;
      if (u >= units) break;
#pragma unroll
      for (int g = 0; g < 4; ++g) {
        const int64_t k0 = u * 256 + 128 * (t / 4) + 32 * g + 8 * (t % 4);
        constexpr int kXRows = SameX ? R : 1;
        float xv[kXRows][8];
        if constexpr (SameX) {
#pragma unroll
          for (int r = 0; r < R; ++r) {
            if (r >= rows) break;
            inputs(xs[0] + r * ldx + k0, k0, xv[r]);
          }
        }
#pragma unroll
        for (int v = 0; v < NW; ++v) {
          const ggml_dev::Piece p = ggml_dev::q6k_run_decode(raw[v][i], t, g);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            if (r >= rows) break;
            if constexpr (!SameX) inputs(xs[v] + r * ldx + k0, k0, xv[0]);
            const float(&x8)[8] = xv[SameX ? r : 0];
            float sq = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; ++j) sq = fmaf(p.q[j], x8[j], sq);
            acc[v][r] = fmaf(p.d, sq, acc[v][r]);
          }
        }
      }
    }
  }
}

// ggml_group_dot_shaped (kquant_group_dot_shaped for Q4_K and Q5_K, q6k_group_dot_shaped for Q6_K), kWhole when the
// shape allows it.
template <CodecId C, int R, int NW, bool SameX>
__device__ __forceinline__ void ggml_group_dot(const uint8_t* const (&wrows)[NW], int64_t cols,
                                               const float* const (&xs)[NW], int64_t ldx, int rows,
                                               float (&acc)[NW][R]) {
  const bool whole = rows_aligned16(xs, ldx) && cols % Unit<C>::G == 0;
  if constexpr (C == Id::Q4_K || C == Id::Q5_K) {
    if (whole) {
      kquant_group_dot_shaped<C, R, NW, SameX, true>(wrows, cols, xs, ldx, rows, acc);
    } else {
      kquant_group_dot_shaped<C, R, NW, SameX, false>(wrows, cols, xs, ldx, rows, acc);
    }
  } else if constexpr (C == Id::Q6_K) {
    if (whole) {
      q6k_group_dot_shaped<R, NW, SameX, true>(wrows, cols, xs, ldx, rows, acc);
    } else {
      q6k_group_dot_shaped<R, NW, SameX, false>(wrows, cols, xs, ldx, rows, acc);
    }
  } else if (whole) {
    ggml_group_dot_shaped<C, R, NW, SameX, true>(wrows, cols, xs, ldx, rows, acc);
  } else {
    ggml_group_dot_shaped<C, R, NW, SameX, false>(wrows, cols, xs, ldx, rows, acc);
  }
}

// The G inputs x[0 .. G) of a full float unit into xv: with 16-byte loads where x is 16-byte aligned (A: every x row
// is, and a unit starts at a multiple of G), else one float at a time. The same values either way.
template <int G, bool A>
__device__ __forceinline__ void unit_inputs(const float* x, float* xv) {
  if constexpr (A && G % 4 == 0) {
#pragma unroll
    for (int q = 0; q < G / 4; ++q) {
      const float4 v = reinterpret_cast<const float4*>(x)[q];
      xv[4 * q] = v.x, xv[4 * q + 1] = v.y, xv[4 * q + 2] = v.z, xv[4 * q + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int j = 0; j < G; ++j) xv[j] = x[j];
  }
}

// Float codecs: lane l takes units l, l + 32, ... of each weight row (lane_dot's contract).
//
// With 16-byte loads (kRawLoads) a lane first loads kInFlight units of every one of the NW rows, then widens and
// adds them: a matrix-vector product lives on the bytes in flight. The loads are predicated on the row's end, so a
// row's last partial pass (a bf16 row of 2,880 is 2.8 passes of 4 units a lane) keeps its loads in flight together
// instead of one load and one round trip per unit. Each accumulator still takes its row's units in increasing order.
//
// x is read a unit at a time with 16-byte loads where its rows are aligned (A), and with SameX (one x for the NW
// rows, one row of it) once for all NW rows: scalar loads of x, lanes 32 bytes apart, cost a decode product of
// gpt-oss's bf16 q/k/v more shared-memory cycles (8-way bank conflicts) than its weights take DRAM time.
template <CodecId C, int R, bool V, int NW, bool SameX, bool A>
__device__ __forceinline__ void lane_dot_float_shaped(const uint8_t* const (&wrows)[NW], int64_t cols,
                                                      const float* const (&xs)[NW], int64_t ldx, int rows,
                                                      float (&acc)[NW][R]) {
  constexpr int G = Unit<C>::G;
  const int64_t units = (cols + G - 1) / G, full = cols / G;
  const int lane = threadIdx.x % kWarp;
  float w[G];
  int64_t u = lane;
  if constexpr (kRawLoads<C, V>) {
    constexpr int kInFlight = NW >= 2 ? 4 : 8;  // units of each row a lane loads before the first is used
    for (; u < full; u += kInFlight * kWarp) {
      Raw<C> raw[NW][kInFlight];
#pragma unroll
      for (int v = 0; v < NW; ++v) {
#pragma unroll
        for (int i = 0; i < kInFlight; ++i) {
          if (u + i * kWarp < full) load_raw<C, V>(wrows[v], u + i * kWarp, raw[v][i]);
        }
      }
#pragma unroll
      for (int i = 0; i < kInFlight; ++i) {
        if (u + i * kWarp >= full) break;
        const int64_t k0 = (u + i * kWarp) * G;
        float xv[G];
        if constexpr (SameX && R == 1) unit_inputs<G, A>(xs[0] + k0, xv);
#pragma unroll
        for (int v = 0; v < NW; ++v) {
          widen<C>(raw[v][i], w);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            if (r >= rows) break;
            if constexpr (!(SameX && R == 1)) unit_inputs<G, A>(xs[v] + r * ldx + k0, xv);
            float a = acc[v][r];
#pragma unroll
            for (int j = 0; j < G; ++j) a = fmaf(w[j], xv[j], a);
            acc[v][r] = a;
          }
        }
      }
    }
    // The lane's first unit at or past `full`: the partial last unit if it is this lane's.
    u = full + (lane - full % kWarp + kWarp) % kWarp;
  }
#pragma unroll
  for (int v = 0; v < NW; ++v) {
    for (int64_t k = u; k < units; k += kWarp) {
      const int64_t k0 = k * G;
      const int valid = int(min_i64(G, cols - k0));
      load_unit<C>(wrows[v], k, valid, w);
      fma_unit<G, R>(w, valid, xs[v], ldx, k0, rows, acc[v]);
    }
  }
}

template <CodecId C, int R, bool V, int NW, bool SameX>
__device__ __forceinline__ void lane_dot_float(const uint8_t* const (&wrows)[NW], int64_t cols,
                                               const float* const (&xs)[NW], int64_t ldx, int rows,
                                               float (&acc)[NW][R]) {
  if (rows_aligned16(xs, ldx)) {
    lane_dot_float_shaped<C, R, V, NW, SameX, true>(wrows, cols, xs, ldx, rows, acc);
  } else {
    lane_dot_float_shaped<C, R, V, NW, SameX, false>(wrows, cols, xs, ldx, rows, acc);
  }
}

// Sum over this lane's share of each of NW weight rows (float codecs: units lane, lane + 32, ...; affine:
// affine_group_dot; MXFP4: mxfp4_group_dot; FP8: fp8_group_dot; ggml: ggml_group_dot; seed: seed_group_dot) of w . x
// for R rows of that weight row's x (row r at xs[v] + r * ldx) into acc[v][r]. The units and their order depend only
// on the matrix, so a row's sum does not depend on NW, R or `rows`. SameX (every xs[v] the same): affine, MXFP4, FP8,
// ggml and float codecs read (and sum) each block's inputs once for all NW rows.
template <CodecId C, int R, bool V, int NW = 1, bool SameX = false>
__device__ __forceinline__ void lane_dot(const WRow<C> (&wrows)[NW], int64_t cols, const float* const (&xs)[NW],
                                         int64_t ldx, int rows, float (&acc)[NW][R]) {
  if constexpr (is_seed(C)) {
    seed_group_dot<C, R, NW>(wrows, cols, xs, ldx, rows, acc);
  } else if constexpr (is_affine(C)) {
    affine_group_dot<C, R, NW, SameX>(wrows, cols, xs, ldx, rows, acc);
  } else if constexpr (C == Id::MXFP4) {
    mxfp4_group_dot<R, NW, SameX>(wrows, cols, xs, ldx, rows, acc);
  } else if constexpr (is_ggml(C)) {
    ggml_group_dot<C, R, NW, SameX>(wrows, cols, xs, ldx, rows, acc);
  } else if constexpr (C == Id::FP8_G32) {
    fp8_group_dot<R, NW, SameX>(wrows, cols, xs, ldx, rows, acc);
  } else {
    lane_dot_float<C, R, V, NW, SameX>(wrows, cols, xs, ldx, rows, acc);
  }
}

}  // namespace seedling::cuda
