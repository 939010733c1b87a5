// codec/codec.h - how a stored weight matrix encodes its numbers: the codecs as data.
//
// A matrix of rows x cols is stored row by row. Float codecs (f32, f16, bf16) store the elements. Affine codecs
// cut each row into groups of G consecutive input elements (G = 32 or 64, along cols); a group is one block:
//
//   value[j] = d * q[j] + m      (d = scale, m = group minimum, both IEEE float16; q unsigned, 8 or 4 bits)
//
// computed in float32 as one multiply then one add (never fused), the same in every kernel and reference.
// A row has ceil(cols / G) blocks; when cols is not a multiple of G the last block's unused slots hold q = 0 and
// are never read. In 4-bit blocks byte i holds element i in its low nibble and element i + G/2 in its high nibble
// (as ggml's q4_1), so one half of a group is one contiguous run of nibbles of the same position.
// Bits per weight: q8_g32 9.0, q8_g64 8.5, q4_g32 5.0, q4_g64 4.5.
//
// Seed codecs (p3, p4, s3; docs/formats/seed.md) store a whole matrix as ONE slice blob with a header (the exponent
// bias) and arrays over all its blocks, so a seed matrix has no fixed row size: only codec_matrix_bytes applies to
// it, and nothing may cut it by rows. Bits per weight: p3 4.0, p4 4.5, s3 3.0 (plus 32 bits per slice).
//
// MXFP4 (OCP microscaling, as gpt-oss releases its experts): blocks of 32 elements, one e8m0 scale byte (2^(e - 127))
// then 16 bytes of FP4 e2m1 codes, element 2i in the low nibble of byte i and 2i + 1 in its high nibble:
//
//   value[j] = kFp4Values[code[j]] * 2^(e - 127)      (exact in float32 for every e < 255; e = 255 is refused)
//
// 4.25 bits per weight. A checkpoint stores the scales and codes as two tensors (`*_scales`, `*_blocks`); the loader
// puts each row's scale before its codes (model/expert_parts.cpp), a byte rearrangement, never a requantization.
//
// FP8_G32 (DeepSeek-V3's and Qwen3-FP8's block-scaled release): groups of 32 elements, one float32 scale d, then 32
// FP8 e4m3fn codes:
//
//   value[j] = kE4m3Values[code[j]] * d      (one float32 multiply, as transformers dequantizes)
//
// 9 bits per weight. A release stores the codes (F8_E4M3 `weight`) and one scale per B x B block (F32
// `weight_scale_inv`); the loader gives each row's 32-wide groups the scale of the block they lie in
// (model/fp8_weights.cpp): a byte rearrangement, never a requantization, for any block width that is a multiple
// of 32.
//
// ggml's quant types (q8_0, q4_0, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs, mxfp4_ggml;
// docs/formats/gguf.md): the blocks a GGUF file stores, read as stored and never written by Seedling (no encoder).
// Each value is gguf-py's dequantization of its block, the same float32 operations in the same order, one function
// per type in codec/ggml_quants.h; for example q4_k's value[j] = (d * scale[s]) * q[j] - (dmin * min[s]) per
// sub-block s of 32. ggml's Q4_1 is q4_g32 above, byte for byte and value for value; F32, F16 and BF16 are the float
// codecs. mxfp4_ggml is MXFP4 in ggml's nibble order (element i low, i + 16 high, not 2i / 2i + 1 as mxfp4 above),
// value[j] = (2^(e - 127) / 2) * (2 * fp4(code[j])), equal to mxfp4's for the same code and e < 255. Rows are whole
// blocks (32 elements, 256 for the K types and iq4_xs). Bits per weight: q8_0 8.5, q4_0 4.5, q5_0 5.5, q5_1 6.0,
// q2_k 2.625, q3_k 3.4375, q4_k 4.5, q5_k 5.5, q6_k 6.5625, iq4_nl 4.5, iq4_xs 4.25, mxfp4_ggml 4.25.
//
// The enum, names, block structs and sizes are core/codec_layout.h (below io/, which sizes tensors with them); the
// values are here and in codec/ggml_quants.h. Everything is inline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

#include "codec/ggml_quants.h"
#include "core/codec_layout.h"
#include "core/dtype.h"

namespace seedling {

// The FP4 e2m1 values of codes 0..15 (sign in bit 3).
inline constexpr float kFp4Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                         -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// The FP8 e4m3fn value of a code (sign bit 7, exponent bits 6-3 with bias 7, mantissa bits 2-0; exponent 0 is
// subnormal m / 8 * 2^-6; 0x7F and 0xFF are NaN).
constexpr float e4m3_value(uint8_t code) {
  const int e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return __builtin_nanf("");
  float mag = e == 0 ? float(m) / 8.0f / 64.0f : (1.0f + float(m) / 8.0f);
  for (int i = 7; i < e; ++i) mag *= 2.0f;
  for (int i = e; i < 7 && e > 0; ++i) mag /= 2.0f;
  return (code & 0x80) != 0 ? -mag : mag;
}
struct E4m3Table {
  float v[256];
  constexpr E4m3Table() : v() {
    for (int c = 0; c < 256; ++c) v[c] = e4m3_value(uint8_t(c));
  }
};
inline constexpr E4m3Table kE4m3Values{};

// The codec that stores a safetensors float dtype as it is; nullopt for other dtypes.
inline std::optional<Codec> codec_of_dtype(DType t) {
  switch (t) {
    case DType::F32:
      return Codec::F32;
    case DType::F16:
      return Codec::F16;
    case DType::BF16:
      return Codec::BF16;
    default:
      return std::nullopt;
  }
}

// The scale 2^(e - 127) of an MXFP4 block, exact (e = 255, NaN in the OCP format, is refused where blocks are read).
inline float mxfp4_scale(uint8_t e) {
  uint32_t bits = e == 0 ? 0x00400000u : uint32_t(e) << 23;  // 2^-127 is a float32 subnormal
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Element k of a stored row, as float; the scalar definition every kernel must match bit for bit. Float, affine,
// MXFP4, FP8 and ggml codecs only: a seed matrix's elements come from seed::decode_seed_matrix (ops::Matrix::at handles
// both).
inline float codec_value(Codec c, const uint8_t* row, int64_t k) {
  if (c == Codec::F32) {
    float v;
    std::memcpy(&v, row + size_t(k) * 4, 4);
    return v;
  }
  if (c == Codec::F16 || c == Codec::BF16) {
    uint16_t h;
    std::memcpy(&h, row + size_t(k) * 2, 2);
    return c == Codec::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
  }
  const int64_t g = codec_group(c);
  const uint8_t* block = row + size_t(k / g) * codec_block_bytes(c);
  const int64_t j = k % g;
  if (c == Codec::MXFP4) {
    const uint8_t byte = block[1 + j / 2];
    return kFp4Values[j % 2 == 0 ? byte & 0x0F : byte >> 4] * mxfp4_scale(block[0]);
  }
  if (c == Codec::FP8_G32) {
    float d;
    std::memcpy(&d, block, 4);
    return kE4m3Values.v[block[4 + j]] * d;
  }
  if (codec_is_ggml(c)) return ggml::ggml_value(c, block, int(j));
  uint16_t dh, mh;
  std::memcpy(&dh, block, 2);
  std::memcpy(&mh, block + 2, 2);
  const uint8_t* q = block + 4;
  const int qv = codec_bits(c) == 8 ? q[j] : (j < g / 2 ? q[j] & 0x0F : q[j - g / 2] >> 4);
  const float d = f16_to_f32(dh), m = f16_to_f32(mh);
  const float dq = d * float(qv);
  return dq + m;
}

}  // namespace seedling
