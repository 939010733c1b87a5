// cuda/seed_device.cuh - the seed codecs' block decode (docs/formats/seed.md) as __host__ __device__ functions: the
// kernels (kernels.cu, seeds.cu) run them on the device, and tests/unit/engine/seed_device_test.cpp runs the very
// same code on the CPU against codec/seed_codec.h's spec and lfsr.h's stepping (so CI checks the index and bit logic
// without a GPU). The float arithmetic itself (scale, bf16 rounding) is codec/seed_arith.h's, shared with the CPU.
//
// Invariant: seed_decode_block gives decode_block's floats bit for bit: the stream seed | g(seed) << 16 from the two
// 256-entry GF(2) tables, S = state - 32768, int4 coefficients, the exponent e = bias + code, one float32 multiply
// float(isum) * (fl(1/32767) * 2^e) (exact operands, one rounding, never contracted) and round-to-nearest-even to
// bf16. A slice blob is read where the format puts each field; the blob starts 4-byte aligned (cudaMalloc'd memory
// and the 256-aligned parts of an expert blob are).
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

// Decodes one block into w[0..C): w_c = round_bf16(float(sum_p S[c][p] q_p) * scale), scale = seed_scale(bias + code)
// (seed_arith.h: the host's own functions).
template <int C, int P>
SEEDLING_HD void seed_decode_block(const Geom& g, uint64_t stream, uint16_t word, float scale, float* w) {
  int q[P];
  for (int p = 0; p < P; ++p) q[p] = coef_of(g, word, p);
  for (int c = 0; c < C; ++c) {
    int32_t isum = 0;
    for (int p = 0; p < P; ++p) isum += (int32_t(uint16_t(stream >> (c * P + p + 1))) - 32768) * q[p];
    w[c] = seed::round_bf16(float(isum) * scale);
  }
}

// Block i of the slice at `blob` (n blocks), decoded: the whole path a kernel takes from the blob's bytes.
template <int C, int P>
SEEDLING_HD void seed_decode_blob_block(const Geom& g, const uint8_t* blob, int64_t n, int64_t i, const uint64_t* lo,
                                        const uint64_t* hi, float* w) {
  const Fields f = block_fields(g, blob, n, i);
  seed_decode_block<C, P>(g, stream_of(f.seed, lo, hi), f.word, seed::seed_scale(blob_bias(blob) + f.code), w);
}

}  // namespace seedling::cuda::seeddev
