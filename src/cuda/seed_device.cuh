// cuda/seed_device.cuh - the seed codecs' block decode (docs/formats/seed.md) as __host__ __device__ functions: the
// kernels (lane_dot.cuh, seeds.cu; gemm.cu by 8-weight pieces) run them on the device, and
// tests/unit/engine/seed_device_test.cpp runs the very same code on the CPU against codec/seed_codec.h's spec and
// lfsr.h's stepping (so CI checks the index and bit logic without a GPU). The float arithmetic itself (scale, bf16
// rounding) is codec/seed_arith.h's, shared with the CPU.
//
// Invariant: seed_decode_block and seed_piece_decode give decode_block's floats bit for bit: the stream seed | g(seed)
// << 16 from the two 256-entry GF(2) tables, S = state - 32768, int4 coefficients, the exponent e = bias + code, one
// float32 multiply float(isum) * (fl(1/32767) * 2^e) (exact operands, one rounding, never contracted) and
// round-to-nearest-even to bf16. A slice blob is read where the format puts each field; the blob starts 4-byte aligned
// (cudaMalloc'd memory and the 256-aligned parts of an expert blob are).
#pragma once

#include <cstdint>
#include <cstring>

#include "codec/lfsr.h"
#include "codec/seed_arith.h"

namespace seedling::cuda::seeddev {

// A tier's shape: C weights and P coefficients a block, the exponent code in its own nibble array (P4, S3) or in
// the word's bits 0-3 (P3). Mirrors seed::seed_tier_spec (a test checks them against each other).
struct Geom {
  int C, P;
  bool apart;
};
inline constexpr Geom kP3{8, 3, false}, kP4{8, 4, true}, kS3{12, 4, true};

// The 64-bit stream seed | g(seed) << 16 (state k, 1..48, is bits k..k+15) from lfsr.h's two tables.
SEEDLING_HD uint64_t stream_of(uint16_t seed, const uint64_t* lo, const uint64_t* hi) {
  return uint64_t(seed) | ((lo[seed & 0xFFu] ^ hi[seed >> 8]) << 16);
}

// Coefficient p of a block's word, an int4 in -8..7.
SEEDLING_HD int coef_of(const Geom& g, uint16_t word, int p) {
  const int nib = (word >> ((g.apart ? 0 : 4) + 4 * p)) & 0xF;
  return (nib ^ 8) - 8;
}

// The raw fields of block i of a slice of n blocks (blob: the slice's exp_bias).
struct Fields {
  uint16_t seed, word;
  int code;
};
SEEDLING_HD int32_t blob_bias(const uint8_t* blob) {
  return *reinterpret_cast<const int32_t*>(blob);
}
SEEDLING_HD Fields block_fields(const Geom& g, const uint8_t* blob, int64_t n, int64_t i) {
  const uint16_t* seeds = reinterpret_cast<const uint16_t*>(blob + 4);
  Fields f;
  f.seed = seeds[i];
  f.word = seeds[n + i];
  f.code = g.apart ? (blob[4 + 4 * n + i / 2] >> (4 * (i & 1))) & 0xF : f.word & 0xF;
  return f;
}

// Weight c of a block: round_bf16(float(sum_p S[c][p] q_p) * scale), S[c][p] = state c P + p + 1 of the stream
// minus 32768, scale = seed_scale(bias + code) (seed_arith.h: the host's own functions).
template <int P>
SEEDLING_HD float seed_value(uint64_t stream, const int (&q)[P], float scale, int c) {
  int32_t isum = 0;
  for (int p = 0; p < P; ++p) isum += (int32_t(uint16_t(stream >> (c * P + p + 1))) - 32768) * q[p];
  return seed::round_bf16(float(isum) * scale);
}

// Decodes one block into w[0..C).
template <int C, int P>
SEEDLING_HD void seed_decode_block(const Geom& g, uint64_t stream, uint16_t word, float scale, float* w) {
  int q[P];
  for (int p = 0; p < P; ++p) q[p] = coef_of(g, word, p);
  for (int c = 0; c < C; ++c) w[c] = seed_value<P>(stream, q, scale, c);
}

// Block i of the slice at `blob` (n blocks), decoded: the whole path a kernel takes from the blob's bytes.
template <int C, int P>
SEEDLING_HD void seed_decode_blob_block(const Geom& g, const uint8_t* blob, int64_t n, int64_t i, const uint64_t* lo,
                                        const uint64_t* hi, float* w) {
  const Fields f = block_fields(g, blob, n, i);
  seed_decode_block<C, P>(g, stream_of(f.seed, lo, hi), f.word, seed::seed_scale(blob_bias(blob) + f.code), w);
}

// A piece: the 8 weights k .. k + 7 (k % 8 == 0) of a seed row, what the tensor-core GEMMs (gemm.cu) widen at a
// time. They lie in block k / C from weight k % C on; in s3 (C = 12) a piece at k % 12 == 8 takes the last 4 of
// that block and the first 4 of the next. Fetch (the loads) and decode (the arithmetic) are apart so a kernel can
// load a slice's fields while it multiplies the one before.
//
// Fetches the fields of the piece at k of the row whose first block is `first` (a slice of n blocks at blob, rows
// of cols weights; k < cols, or raw is all zeros): raw[0] = seed | word << 16 and raw[1] = bias + code of block
// k / C, raw[2], raw[3] the same of the next block where the piece crosses into it inside the row, else zeros.
SEEDLING_HD void seed_piece_fetch(const Geom& g, const uint8_t* blob, int64_t n, int64_t first, int64_t cols, int64_t k,
                                  uint32_t* raw) {
  for (int i = 0; i < 4; ++i) raw[i] = 0;
  if (k >= cols) return;
  const int64_t j = k / g.C;
  const int32_t bias = blob_bias(blob);
  for (int b = 0; b < 2; ++b) {
    if (b == 1 && (k % g.C + 8 <= g.C || (j + 1) * g.C >= cols)) break;
    const Fields f = block_fields(g, blob, n, first + j + b);
    raw[2 * b] = uint32_t(f.seed) | uint32_t(f.word) << 16;
    raw[2 * b + 1] = uint32_t(bias + f.code);
  }
}

// Decodes a fetched piece: v[i] is the row's weight k + i (decode_seed_matrix's, bit for bit), 0 from cols on.
template <int C, int P>
SEEDLING_HD void seed_piece_decode(const Geom& g, const uint32_t* raw, int64_t k, int64_t cols, const uint64_t* lo,
                                   const uint64_t* hi, float* v) {
  constexpr int kBlocks = C % 8 == 0 ? 1 : 2;  // p3, p4: a piece is one whole block
  const int o = kBlocks == 1 ? 0 : int(k % C);
  uint64_t stream[kBlocks];
  float scale[kBlocks];
  int q[kBlocks][P];
  for (int b = 0; b < kBlocks; ++b) {
    stream[b] = stream_of(uint16_t(raw[2 * b]), lo, hi);
    scale[b] = seed::seed_scale(int32_t(raw[2 * b + 1]));
    for (int p = 0; p < P; ++p) q[b][p] = coef_of(g, uint16_t(raw[2 * b] >> 16), p);
  }
  for (int i = 0; i < 8; ++i) {  // the block picked by selects, not by an index (registers, not local memory)
    const int c = o + i;
    const bool next = kBlocks == 2 && c >= C;
    int qc[P];
    for (int p = 0; p < P; ++p) qc[p] = next ? q[kBlocks - 1][p] : q[0][p];
    const float w = seed_value<P>(next ? stream[kBlocks - 1] : stream[0], qc, next ? scale[kBlocks - 1] : scale[0],
                                  next ? c - C : c);
    v[i] = k + i < cols ? w : 0.0f;
  }
}

}  // namespace seedling::cuda::seeddev
