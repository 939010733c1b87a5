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

// The ggml types (Q8_0 .. MXFP4_GGML) come last, so the numbers before them (cuda/codec_ids.h) stay as they were.
enum class Codec : uint8_t {
  F32,
  F16,
  BF16,
  Q8_G32,
  Q8_G64,
  Q4_G32,
  Q4_G64,
  P3,
  P4,
  S3,
  MXFP4,
  FP8_G32,
  Q8_0,
  Q4_0,
  Q5_0,
  Q5_1,
  Q2_K,
  Q3_K,
  Q4_K,
  Q5_K,
  Q6_K,
  IQ4_NL,
  IQ4_XS,
  MXFP4_GGML,
};

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

// ggml's blocks as GGUF files store them (ggml-common.h's block_q8_0 ... block_mxfp4, the same fields in the same
// order; every uint16_t is an IEEE float16). ggml's Q4_1 is BlockQ4G32 byte for byte, so it is the codec q4_g32.
// What the bytes mean: codec/ggml_quants.h. Each 32-element run of 16 nibble bytes holds element i in the low
// nibble of byte i and element i + 16 in its high nibble, as BlockQ4G32 does.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // bit i (of the little-endian u32): the 5th bit of element i
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
// The K types: super-blocks of 256 elements in sub-blocks of 16 (Q2_K, Q3_K, Q6_K) or 32 (Q4_K, Q5_K).
inline constexpr int kQK_K = 256;
struct BlockQ2_K {
  uint8_t scales[16];  // per sub-block of 16: low nibble the scale, high nibble the min, both times d / dmin
  uint8_t qs[64];      // 2-bit codes
  uint16_t d, dmin;
};
struct BlockQ3_K {
  uint8_t hmask[32];   // the high (3rd) bit of each code
  uint8_t qs[64];      // the low 2 bits
  uint8_t scales[12];  // 16 6-bit scales, offset by 32
  uint16_t d;
};
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];  // 8 6-bit scales and 8 6-bit mins
  uint8_t qs[128];
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];  // the 5th bit of each code
  uint8_t qs[128];
};
struct BlockQ6_K {
  uint8_t ql[128];    // the low 4 bits
  uint8_t qh[64];     // the high 2 bits
  int8_t scales[16];  // per sub-block of 16
  uint16_t d;
};
struct BlockIq4Nl {
  uint16_t d;
  uint8_t qs[16];  // indices into the 16 non-linear levels
};
struct BlockIq4Xs {
  uint16_t d;
  uint16_t scales_h;    // the high 2 bits of 8 6-bit scales
  uint8_t scales_l[4];  // their low 4 bits
  uint8_t qs[128];
};
struct BlockMxfp4Ggml {
  uint8_t e;       // e8m0 scale
  uint8_t qs[16];  // FP4 e2m1 codes: low nibble element i, high nibble element i + 16 (unlike BlockMxfp4)
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24,
              "ggml's 32-element blocks");
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
                  sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210,
              "ggml's K blocks");
static_assert(sizeof(BlockIq4Nl) == 18 && sizeof(BlockIq4Xs) == 136 && sizeof(BlockMxfp4Ggml) == 17,
              "ggml's IQ4 and MXFP4 blocks");

static_assert(sizeof(BlockQ8G32) == 4 + 32, "q8_g32 block is 36 bytes");
static_assert(sizeof(BlockQ8G64) == 4 + 64, "q8_g64 block is 68 bytes");
static_assert(sizeof(BlockQ4G32) == 4 + 16, "q4_g32 block is 20 bytes");
static_assert(sizeof(BlockQ4G64) == 4 + 32, "q4_g64 block is 36 bytes");

inline constexpr Codec kAllCodecs[] = {Codec::F32,    Codec::F16,     Codec::BF16,   Codec::Q8_G32,    Codec::Q8_G64,
                                       Codec::Q4_G32, Codec::Q4_G64,  Codec::P3,     Codec::P4,        Codec::S3,
                                       Codec::MXFP4,  Codec::FP8_G32, Codec::Q8_0,   Codec::Q4_0,      Codec::Q5_0,
                                       Codec::Q5_1,   Codec::Q2_K,    Codec::Q3_K,   Codec::Q4_K,      Codec::Q5_K,
                                       Codec::Q6_K,   Codec::IQ4_NL,  Codec::IQ4_XS, Codec::MXFP4_GGML};

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
    case Codec::Q8_0:
      return "q8_0";
    case Codec::Q4_0:
      return "q4_0";
    case Codec::Q5_0:
      return "q5_0";
    case Codec::Q5_1:
      return "q5_1";
    case Codec::Q2_K:
      return "q2_k";
    case Codec::Q3_K:
      return "q3_k";
    case Codec::Q4_K:
      return "q4_k";
    case Codec::Q5_K:
      return "q5_k";
    case Codec::Q6_K:
      return "q6_k";
    case Codec::IQ4_NL:
      return "iq4_nl";
    case Codec::IQ4_XS:
      return "iq4_xs";
    case Codec::MXFP4_GGML:
      return "mxfp4_ggml";
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
// ggml's quant blocks as GGUF stores them (codec/ggml_quants.h); read as stored, never encoded by Seedling.
inline bool codec_is_ggml(Codec c) {
  return c >= Codec::Q8_0 && c <= Codec::MXFP4_GGML;
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
// Bits of one stored code of an affine or MXFP4 codec.
inline int codec_bits(Codec c) {
  return c == Codec::Q4_G32 || c == Codec::Q4_G64 || c == Codec::MXFP4 ? 4 : 8;
}
// Elements of one block (an affine codec's group, a ggml type's block or super-block); 1 for float codecs.
constexpr int64_t codec_group(Codec c) {
  switch (c) {
    case Codec::Q8_G32:
    case Codec::Q4_G32:
    case Codec::MXFP4:
    case Codec::FP8_G32:
    case Codec::Q8_0:
    case Codec::Q4_0:
    case Codec::Q5_0:
    case Codec::Q5_1:
    case Codec::IQ4_NL:
    case Codec::MXFP4_GGML:
      return 32;
    case Codec::Q8_G64:
    case Codec::Q4_G64:
      return 64;
    case Codec::Q2_K:
    case Codec::Q3_K:
    case Codec::Q4_K:
    case Codec::Q5_K:
    case Codec::Q6_K:
    case Codec::IQ4_XS:
      return kQK_K;
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
    case Codec::Q8_0:
      return sizeof(BlockQ8_0);
    case Codec::Q4_0:
      return sizeof(BlockQ4_0);
    case Codec::Q5_0:
      return sizeof(BlockQ5_0);
    case Codec::Q5_1:
      return sizeof(BlockQ5_1);
    case Codec::Q2_K:
      return sizeof(BlockQ2_K);
    case Codec::Q3_K:
      return sizeof(BlockQ3_K);
    case Codec::Q4_K:
      return sizeof(BlockQ4_K);
    case Codec::Q5_K:
      return sizeof(BlockQ5_K);
    case Codec::Q6_K:
      return sizeof(BlockQ6_K);
    case Codec::IQ4_NL:
      return sizeof(BlockIq4Nl);
    case Codec::IQ4_XS:
      return sizeof(BlockIq4Xs);
    case Codec::MXFP4_GGML:
      return sizeof(BlockMxfp4Ggml);
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
