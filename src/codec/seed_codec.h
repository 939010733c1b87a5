// codec/seed_codec.h - the seed tiers P3, P4, S3: blocks, their decode, and the slice blob (docs/formats/seed.md).
//
// expand_seed and decode_block are the scalar spec of the format: kernels and searches must reproduce them bit for
// bit (decoded weights) or within float32 rounding (dot products), as their tests say. A slice is one matrix of
// rows x cols (one expert's projection), blocks of C weights along each row, stored as one blob:
//   int32 exp_bias | uint16 seed[n] | uint16 word[n] | uint8 code[ceil(n/2)] (P4, S3 only)
// validate_seed_blob is what a loader calls before any kernel reads a blob.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "codec/seed_arith.h"
#include "core/codec_layout.h"
#include "core/error.h"

namespace seedling::seed {

// SeedTier, kAllSeedTiers, seed_tier_spec, SeedSliceLayout, seed_slice_layout: core/codec_layout.h.

std::string_view seed_tier_name(SeedTier t);                // "p3", "p4", "s3"
std::optional<SeedTier> parse_seed_tier(std::string_view);  // nullopt when unknown

// kMaxBlock, kMaxCoefs, the exponent range, kR32, pow2f, seed_scale, round_bf16: codec/seed_arith.h.

// One block, unpacked: seed 1..65535, q[0..P) in -8..7, code 0..15 (e = bias + code).
struct SeedBlock {
  uint16_t seed = 1;
  int8_t q[kMaxCoefs] = {0, 0, 0, 0};
  uint8_t code = 0;
};

// The expansion S[c*P + p] = state(c*P + p + 1) - 32768 of a seed, C*P values: by stepping (spec) and by the
// GF(2) stream tables (fast; equal for every seed, tested).
void expand_seed(SeedTier t, uint16_t seed, int32_t* S);
void expand_seed_fast(SeedTier t, uint16_t seed, int32_t* S);

// Decode one block at exponent e into C floats (bf16 values): w_c = round_bf16(float(sum_p S[c][p] q_p) * scale(e)).
void decode_block(SeedTier t, const SeedBlock& b, int e, float* out);

// The 16-bit word of a block and back (the code lives in the word for P3 only).
uint16_t pack_word(SeedTier t, const SeedBlock& b);
void unpack_word(SeedTier t, uint16_t word, SeedBlock* b);

// Bits per weight of a slice, the bias included.
double seed_bits_per_weight(SeedTier t, int64_t rows, int64_t cols);

// A slice blob as the kernels read it (no ownership).
struct SeedMatrix {
  SeedTier tier = SeedTier::P4;
  const uint8_t* blob = nullptr;
  int64_t rows = 0, cols = 0;
};

// Reads block i of a blob (no checks; validate first).
int32_t seed_blob_bias(const uint8_t* blob);
SeedBlock seed_blob_block(SeedTier t, const uint8_t* blob, const SeedSliceLayout& L, int64_t i);

// Writes a blob from blocks (n_blocks of them) and a bias; the result passes validate_seed_blob or this throws.
std::vector<uint8_t> write_seed_blob(SeedTier t, int64_t rows, int64_t cols, int32_t exp_bias,
                                     const std::vector<SeedBlock>& blocks);

// Throws seedling::Error naming `tensor` when the blob's size is not the layout's, a seed is 0, a padding nibble
// is set, or some block's bias + code leaves [kMinExponent, kMaxExponent].
void validate_seed_blob(SeedTier t, const void* data, size_t size, int64_t rows, int64_t cols, std::string_view tensor);

// The whole matrix decoded to rows x cols floats by the spec (reference for kernels and tests).
void decode_seed_matrix(const SeedMatrix& m, float* out);

}  // namespace seedling::seed
