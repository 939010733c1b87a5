// core/codec_layout.h - the codecs' names, block layouts and stored sizes: what io/ (the packed format) needs to name
// and size a tensor, kept below codec/ so io/ includes nothing above it.
//
// What the bytes mean (codec_value, the scalar definition every kernel matches) is in codec/codec.h, which includes
// this; the seed slice blob is docs/formats/seed.md (its decode and validation: codec/seed_codec.h). Everything here
// is inline, so seedling_core sizes tensors without linking codec/*.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace seedling {

namespace seed {

enum class SeedTier : uint8_t { P3, P4, S3 };
inline constexpr SeedTier kAllSeedTiers[] = {SeedTier::P3, SeedTier::P4, SeedTier::S3};

struct SeedTierSpec {
  int block;           // C: weights per block
  int coefs;           // P: int4 coefficients per block
  bool codes_apart;    // exponent code in its own nibble array (P4, S3) or in the word's bits 0-3 (P3)
  int bits_per_block;  // 32 or 36
};

constexpr SeedTierSpec seed_tier_spec(SeedTier t) {
  switch (t) {
    case SeedTier::P3:
      return {8, 3, false, 32};
    case SeedTier::P4:
      return {8, 4, true, 36};
    case SeedTier::S3:
      return {12, 4, true, 36};
  }
  return {8, 3, false, 32};
}

// A slice blob: int32 exp_bias | uint16 seed[n] | uint16 word[n] | uint8 code[ceil(n/2)] (P4, S3 only).
struct SeedSliceLayout {
  int64_t rows = 0, cols = 0;
  int64_t blocks_per_row = 0;  // ceil(cols / C)
  int64_t n_blocks = 0;
  size_t seeds_offset = 4, words_offset = 0, codes_offset = 0;
  size_t bytes = 0;  // the blob's exact size
};
// Throws Error on a shape that is not positive.
inline SeedSliceLayout seed_slice_layout(SeedTier t, int64_t rows, int64_t cols) {
  const SeedTierSpec sp = seed_tier_spec(t);
  if (rows <= 0 || cols <= 0) fail("a seed slice needs positive rows and cols, got {} x {}", rows, cols);
  SeedSliceLayout L;
  L.rows = rows;
  L.cols = cols;
  L.blocks_per_row = (cols + sp.block - 1) / sp.block;
  L.n_blocks = rows * L.blocks_per_row;
  L.seeds_offset = 4;
  L.words_offset = 4 + 2 * size_t(L.n_blocks);
  L.codes_offset = 4 + 4 * size_t(L.n_blocks);
  L.bytes = L.codes_offset + (sp.codes_apart ? size_t(L.n_blocks + 1) / 2 : 0);
  return L;
}

}  // namespace seed

enum class Codec : uint8_t { F32, F16, BF16, Q8_G32, Q8_G64, Q4_G32, Q4_G64, P3, P4, S3, MXFP4, FP8_G32 };

struct BlockQ8G32 {
  uint16_t d;  // scale, float16
  uint16_t m;  // minimum, float16
  uint8_t q[32];
};
struct BlockQ8G64 {
  uint16_t d, m;
  uint8_t q[64];
};
struct BlockQ4G32 {
  uint16_t d, m;
  uint8_t q[16];  // low nibble: element i, high nibble: element i + 16
};
struct BlockQ4G64 {
  uint16_t d, m;
  uint8_t q[32];  // low nibble: element i, high nibble: element i + 32
};
struct BlockMxfp4 {
  uint8_t e;      // e8m0 scale: 2^(e - 127)
  uint8_t q[16];  // low nibble: element 2i, high nibble: element 2i + 1
};
static_assert(sizeof(BlockMxfp4) == 17, "mxfp4 block is 17 bytes");
struct BlockFp8G32 {
  float d;        // scale, float32 (DeepSeek's weight_scale_inv of the block this group lies in)
  uint8_t q[32];  // FP8 e4m3 (e4m3fn: bias 7, no infinities, 0x7F / 0xFF NaN) codes
};
static_assert(sizeof(BlockFp8G32) == 36, "fp8_g32 block is 36 bytes");
static_assert(sizeof(BlockQ8G32) == 4 + 32, "q8_g32 block is 36 bytes");
static_assert(sizeof(BlockQ8G64) == 4 + 64, "q8_g64 block is 68 bytes");
static_assert(sizeof(BlockQ4G32) == 4 + 16, "q4_g32 block is 20 bytes");
static_assert(sizeof(BlockQ4G64) == 4 + 32, "q4_g64 block is 36 bytes");

inline constexpr Codec kAllCodecs[] = {Codec::F32,    Codec::F16,    Codec::BF16,   Codec::Q8_G32,
                                       Codec::Q8_G64, Codec::Q4_G32, Codec::Q4_G64, Codec::P3,
                                       Codec::P4,     Codec::S3,     Codec::MXFP4,  Codec::FP8_G32};

inline std::string_view codec_name(Codec c) {
  switch (c) {
    case Codec::F32:
      return "f32";
    case Codec::F16:
      return "f16";
    case Codec::BF16:
      return "bf16";
    case Codec::Q8_G32:
      return "q8_g32";
    case Codec::Q8_G64:
      return "q8_g64";
    case Codec::Q4_G32:
      return "q4_g32";
    case Codec::Q4_G64:
      return "q4_g64";
    case Codec::P3:
      return "p3";
    case Codec::P4:
      return "p4";
    case Codec::S3:
      return "s3";
    case Codec::MXFP4:
      return "mxfp4";
    case Codec::FP8_G32:
      return "fp8_g32";
  }
  return "?";
}

// "bf16", "q8_g32", ...; nullopt when unknown (callers fail closed, naming the value).
inline std::optional<Codec> parse_codec(std::string_view s) {
  for (Codec c : kAllCodecs) {
    if (codec_name(c) == s) return c;
  }
  return std::nullopt;
}

// The names of every codec, for error messages ("f32, f16, ..., s3").
inline std::string codec_names() {
  std::string s;
  for (Codec c : kAllCodecs) {
    if (!s.empty()) s += ", ";
    s += codec_name(c);
  }
  return s;
}

inline bool codec_is_float(Codec c) {
  return c == Codec::F32 || c == Codec::F16 || c == Codec::BF16;
}
inline bool codec_is_affine(Codec c) {
  return c >= Codec::Q8_G32 && c <= Codec::Q4_G64;
}
inline bool codec_is_seed(Codec c) {
  return c == Codec::P3 || c == Codec::P4 || c == Codec::S3;
}
// The seed tier of a seed codec (check codec_is_seed first).
inline seed::SeedTier codec_seed_tier(Codec c) {
  SEEDLING_CHECK(codec_is_seed(c), "{} is not a seed codec", codec_name(c));
  return c == Codec::P3 ? seed::SeedTier::P3 : c == Codec::P4 ? seed::SeedTier::P4 : seed::SeedTier::S3;
}
// The codec of a seed tier (codec_seed_tier's inverse).
inline Codec seed_tier_codec(seed::SeedTier t) {
  return t == seed::SeedTier::P3 ? Codec::P3 : t == seed::SeedTier::P4 ? Codec::P4 : Codec::S3;
}
inline int codec_bits(Codec c) {
  return c == Codec::Q4_G32 || c == Codec::Q4_G64 || c == Codec::MXFP4 ? 4 : 8;
}
// Group size of an affine codec; 1 for float codecs.
inline int64_t codec_group(Codec c) {
  switch (c) {
    case Codec::Q8_G32:
    case Codec::Q4_G32:
    case Codec::MXFP4:
    case Codec::FP8_G32:
      return 32;
    case Codec::Q8_G64:
    case Codec::Q4_G64:
      return 64;
    default:
      return 1;
  }
}
// Bytes of one block (affine) or one element (float); not defined for seed codecs (their blocks are split across
// arrays: see seed::seed_slice_layout).
inline size_t codec_block_bytes(Codec c) {
  SEEDLING_CHECK(!codec_is_seed(c), "{} has no fixed block size", codec_name(c));
  switch (c) {
    case Codec::F32:
      return 4;
    case Codec::F16:
    case Codec::BF16:
      return 2;
    case Codec::Q8_G32:
      return sizeof(BlockQ8G32);
    case Codec::Q8_G64:
      return sizeof(BlockQ8G64);
    case Codec::Q4_G32:
      return sizeof(BlockQ4G32);
    case Codec::Q4_G64:
      return sizeof(BlockQ4G64);
    case Codec::MXFP4:
      return sizeof(BlockMxfp4);
    case Codec::FP8_G32:
      return sizeof(BlockFp8G32);
    case Codec::P3:
    case Codec::P4:
    case Codec::S3:
      break;
  }
  return 0;
}
// Bytes of one stored row; float and affine codecs only (a seed matrix is one blob, not rows).
inline size_t codec_row_bytes(Codec c, int64_t cols) {
  const int64_t g = codec_group(c);
  return size_t((cols + g - 1) / g) * codec_block_bytes(c);
}
// Bytes of a rows x cols matrix: rows of codec_row_bytes, or one seed slice blob (header included).
inline size_t codec_matrix_bytes(Codec c, int64_t rows, int64_t cols) {
  if (codec_is_seed(c)) return seed::seed_slice_layout(codec_seed_tier(c), rows, cols).bytes;
  return size_t(rows) * codec_row_bytes(c, cols);
}
// Bytes of a tensor of `shape` stored as rows of its first dimension (one row for a vector), each row the product
// of the other dimensions (a conv weight (channels, 1, kernel): channels rows of kernel).
inline size_t codec_tensor_bytes(Codec c, const std::vector<int64_t>& shape) {
  if (shape.size() <= 1) return codec_matrix_bytes(c, 1, shape.empty() ? 1 : shape[0]);
  int64_t cols = 1;
  for (size_t i = 1; i < shape.size(); ++i) cols *= shape[i];
  return codec_matrix_bytes(c, shape[0], cols);
}

}  // namespace seedling
