// codec/ggml_quants.h - the values of ggml's quant blocks (core/codec_layout.h's BlockQ8_0 ... BlockMxfp4Ggml), as
// GGUF files store them: the reference dequantization, one function per type giving element j of one block.
//
// Each function is gguf-py's dequantize_blocks (gguf/quants.py, llama.cpp's numpy reference) for that type written
// as scalar C++: the same integer unpacking, then the same float32 operations in the same order, each rounded on
// its own (numpy fuses nothing; -ffp-contract=off here), so every value equals gguf-py's bit for bit
// (tests/unit/engine/ggml_codec_test.cpp, against vectors gguf-py wrote: tests/data/gguf/make_quant_vectors.py).
// MXFP4 is ggml's dequantize_row_mxfp4 (ik_llama's gguf-py has no MXFP4; mainline's computes the same products).
//
// Layouts shared by several types: a 32-element run of 16 bytes holds element i in the low nibble of byte i and
// element i + 16 in the high nibble (nibble32); the 2-bit codes of Q2_K/Q3_K and the 4-bit codes of Q4_K/Q5_K sweep
// their bytes several times with growing shifts, as spelt out per type. d, dmin and m are IEEE float16.
// Every kernel that reads these codecs (ops/matmul_ggml.cpp) computes each weight exactly as these functions do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/codec_layout.h"
#include "core/dtype.h"

namespace seedling::ggml {

// f16_to_f32 of the float16 at p, finite numbers inline (the kernels read a block's d and dmin this way; a K-quant's
// super-block d, the scale of its 6-bit scales, is often subnormal in float16: 2^-24 * the mantissa, exactly).
inline float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  const uint32_t exp = (h >> 10) & 0x1Fu;
  if ((h & 0x7FFFu) == 0) return (h & 0x8000u) != 0 ? -0.0f : 0.0f;  // a block's dmin is often zero
  if (exp == 0) {
    const float f = float(h & 0x3FFu) * 0x1p-24f;
    return (h & 0x8000u) != 0 ? -f : f;
  }
  if (exp == 31) return f16_to_f32(h);  // infinities, NaNs
  const uint32_t bits = uint32_t(h & 0x8000u) << 16 | (uint32_t(h & 0x7FFFu) + ((127 - 15) << 10)) << 13;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Element j < 32 of a run of 16 nibble bytes.
inline int nibble32(const uint8_t* qs, int j) {
  return j < 16 ? qs[j] & 0x0F : qs[j - 16] >> 4;
}

// IQ4_NL's (and IQ4_XS's) 16 non-linear levels (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
// The FP4 e2m1 values doubled (ggml's kvalues_mxfp4); the scale below is halved to match.
inline constexpr int8_t kMxfp4Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// Half the e8m0 scale 2^(e - 127), exact: ggml_e8m0_to_fp32_half (e = 255 gives 2^127, not NaN).
inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t(0x00200000u) << e : uint32_t(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Each type's integer code of element j (the `*_code` functions) is what its value multiplies; the int8 products
// (ops/ggml_int8.h) compute with these codes and the integer sub-block scales of ggml_int_scales below.

// Q8_0: d, 32 int8 codes. x * d.
inline int q8_0_code(const uint8_t* b, int j) {
  return int8_t(b[offsetof(BlockQ8_0, qs) + size_t(j)]);
}
inline float q8_0_value(const uint8_t* b, int j) {
  const float d = f16_at(b);
  const float q = float(q8_0_code(b, j));
  return q * d;
}

// Q4_0: d, 16 nibble bytes. d * (q - 8).
inline int q4_0_code(const uint8_t* b, int j) {
  return nibble32(b + offsetof(BlockQ4_0, qs), j) - 8;
}
inline float q4_0_value(const uint8_t* b, int j) {
  const float d = f16_at(b);
  return d * float(q4_0_code(b, j));
}

// The 5-bit code of Q5_0/Q5_1: the nibble, and bit j of the little-endian u32 qh as bit 4.
inline int q5_code(const uint8_t* qh, const uint8_t* qs, int j) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  return nibble32(qs, j) | int((h >> j) & 1u) << 4;
}

// Q5_0: d, qh, 16 nibble bytes. d * (q - 16).
inline int q5_0_code(const uint8_t* b, int j) {
  return q5_code(b + offsetof(BlockQ5_0, qh), b + offsetof(BlockQ5_0, qs), j) - 16;
}
inline float q5_0_value(const uint8_t* b, int j) {
  const float d = f16_at(b);
  return d * float(q5_0_code(b, j));
}

// Q5_1: d, m, qh, 16 nibble bytes. d * q + m.
inline int q5_1_code(const uint8_t* b, int j) {
  return q5_code(b + offsetof(BlockQ5_1, qh), b + offsetof(BlockQ5_1, qs), j);
}
inline float q5_1_value(const uint8_t* b, int j) {
  const float d = f16_at(b), m = f16_at(b + offsetof(BlockQ5_1, m));
  const float dq = d * float(q5_1_code(b, j));
  return dq + m;
}

// The 2-bit field of element j of Q2_K's and Q3_K's 64 code bytes: the two halves of 128 elements each sweep
// their 32 bytes four times, shifts 0, 2, 4, 6.
inline int crumb(const uint8_t* qs, int j) {
  return (qs[(j / 128) * 32 + j % 32] >> (2 * ((j % 128) / 32))) & 3;
}

// Q2_K: per sub-block of 16 a scale nibble s and a min nibble n: (d * s) * q - (dmin * n).
inline float q2_k_value(const uint8_t* b, int j) {
  const uint8_t sc = b[offsetof(BlockQ2_K, scales) + size_t(j / 16)];
  const float d = f16_at(b + offsetof(BlockQ2_K, d)), dmin = f16_at(b + offsetof(BlockQ2_K, dmin));
  const float dl = d * float(sc & 0x0F), ml = dmin * float(sc >> 4);
  const float dq = dl * float(crumb(b + offsetof(BlockQ2_K, qs), j));
  return dq - ml;
}

// Q3_K's 6-bit scale of sub-block s (of 16), offset by 32: the low 4 bits from the nibbles of bytes 0-7 (low
// nibbles for s < 8), the high 2 from bytes 8-11 (byte 8 + s % 4, shift 2 * (s / 4)).
inline int q3_k_scale(const uint8_t* scales, int s) {
  const int low = s < 8 ? scales[s] & 0x0F : scales[s - 8] >> 4;
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (low | high << 4) - 32;
}

// Q3_K: code = the 2-bit field minus 4 where the hmask bit (bit j / 32 of byte j % 32) is clear;
// (d * scale) * code.
inline int q3_k_code(const uint8_t* b, int j) {
  const int high = (b[offsetof(BlockQ3_K, hmask) + size_t(j % 32)] >> (j / 32)) & 1;
  return crumb(b + offsetof(BlockQ3_K, qs), j) - (high == 0 ? 4 : 0);
}
inline float q3_k_value(const uint8_t* b, int j) {
  const float d = f16_at(b + offsetof(BlockQ3_K, d));
  const float dl = d * float(q3_k_scale(b + offsetof(BlockQ3_K, scales), j / 16));
  return dl * float(q3_k_code(b, j));
}

// Q4_K's and Q5_K's 6-bit scale and min of sub-block s (of 32), from 12 bytes: for s < 4 the low 6 bits of bytes
// s and s + 4; for s >= 4 a nibble of byte s + 4 (low: scale, high: min) and the top 2 bits of bytes s - 4, s.
inline void k_scale_min(const uint8_t* q, int s, int& scale, int& min) {
  if (s < 4) {
    scale = q[s] & 0x3F;
    min = q[s + 4] & 0x3F;
  } else {
    scale = (q[s + 4] & 0x0F) | ((q[s - 4] >> 2) & 0x30);
    min = (q[s + 4] >> 4) | ((q[s] >> 2) & 0x30);
  }
}

// k_scale_min of all 8 sub-blocks at once, byte s of `scales` and of `mins` sub-block s's (the int8 kernels read
// them per block): bytes 0-3 of the 12 hold scales 0-3 (low 6 bits) and the top bits of scales 4-7, bytes 4-7 the
// mins likewise, bytes 8-11 the low nibbles of scales 4-7 (low) and mins 4-7 (high). Little-endian.
inline void k_scales_mins(const uint8_t* q, uint64_t& scales, uint64_t& mins) {
  uint32_t u[3];
  std::memcpy(u, q, sizeof(u));
  const uint32_t hi_scales = (u[2] & 0x0F0F0F0Fu) | ((u[0] >> 2) & 0x30303030u);
  const uint32_t hi_mins = ((u[2] >> 4) & 0x0F0F0F0Fu) | ((u[1] >> 2) & 0x30303030u);
  scales = uint64_t(u[0] & 0x3F3F3F3Fu) | uint64_t(hi_scales) << 32;
  mins = uint64_t(u[1] & 0x3F3F3F3Fu) | uint64_t(hi_mins) << 32;
}

// The 4-bit field of element j of Q4_K's and Q5_K's 128 code bytes: each 64 elements sweep 32 bytes twice,
// low nibbles then high.
inline int k_nibble(const uint8_t* qs, int j) {
  return (qs[(j / 64) * 32 + j % 32] >> (4 * ((j / 32) % 2))) & 0x0F;
}

// Q4_K: (d * scale) * q - (dmin * min), per sub-block of 32.
inline float q4_k_value(const uint8_t* b, int j) {
  int scale, min;
  k_scale_min(b + offsetof(BlockQ4_K, scales), j / 32, scale, min);
  const float d = f16_at(b), dmin = f16_at(b + offsetof(BlockQ4_K, dmin));
  const float dl = d * float(scale), ml = dmin * float(min);
  const float dq = dl * float(k_nibble(b + offsetof(BlockQ4_K, qs), j));
  return dq - ml;
}

// Q5_K: Q4_K's with bit j / 32 of qh[j % 32] as the code's bit 4.
inline int q5_k_code(const uint8_t* b, int j) {
  const int high = (b[offsetof(BlockQ5_K, qh) + size_t(j % 32)] >> (j / 32)) & 1;
  return k_nibble(b + offsetof(BlockQ5_K, qs), j) | high << 4;
}
inline float q5_k_value(const uint8_t* b, int j) {
  int scale, min;
  k_scale_min(b + offsetof(BlockQ5_K, scales), j / 32, scale, min);
  const float d = f16_at(b), dmin = f16_at(b + offsetof(BlockQ5_K, dmin));
  const float dl = d * float(scale), ml = dmin * float(min);
  const float dq = dl * float(q5_k_code(b, j));
  return dq - ml;
}

// Q6_K: each half of 128 elements takes 64 ql bytes (swept twice, low nibbles then high) and 32 qh bytes (swept
// four times, 2 bits at shifts 0, 2, 4, 6) for code = (low | high << 4) - 32; (d * scale) * code per sub-block of 16.
inline int q6_k_code(const uint8_t* b, int j) {
  const int half = j / 128, r = j % 128;
  const int low = (b[offsetof(BlockQ6_K, ql) + size_t(half * 64 + r % 64)] >> (4 * (r / 64))) & 0x0F;
  const int high = (b[offsetof(BlockQ6_K, qh) + size_t(half * 32 + r % 32)] >> (2 * (r / 32))) & 3;
  return (low | high << 4) - 32;
}
inline float q6_k_value(const uint8_t* b, int j) {
  const float d = f16_at(b + offsetof(BlockQ6_K, d));
  const float dl = d * float(int8_t(b[offsetof(BlockQ6_K, scales) + size_t(j / 16)]));
  return dl * float(q6_k_code(b, j));
}

// IQ4_NL: d * level[q].
inline int iq4_nl_code(const uint8_t* b, int j) {
  return kIq4nlValues[nibble32(b + offsetof(BlockIq4Nl, qs), j)];
}
inline float iq4_nl_value(const uint8_t* b, int j) {
  const float d = f16_at(b);
  return d * float(iq4_nl_code(b, j));
}

// IQ4_XS's 6-bit scale of sub-block s (of 32), offset by 32: nibble s % 2 of scales_l[s / 2], bits 2s, 2s+1 of
// scales_h above it.
inline int iq4_xs_scale(const uint8_t* b, int s) {
  uint16_t h;
  std::memcpy(&h, b + offsetof(BlockIq4Xs, scales_h), 2);
  const int low = (b[offsetof(BlockIq4Xs, scales_l) + size_t(s / 2)] >> (4 * (s % 2))) & 0x0F;
  return (low | ((h >> (2 * s)) & 3) << 4) - 32;
}

// IQ4_XS: (d * scale) * level[q], each sub-block of 32 a nibble run of its own 16 bytes.
inline int iq4_xs_code(const uint8_t* b, int j) {
  return kIq4nlValues[nibble32(b + offsetof(BlockIq4Xs, qs) + size_t(16 * (j / 32)), j % 32)];
}
inline float iq4_xs_value(const uint8_t* b, int j) {
  const float d = f16_at(b);
  const float dl = d * float(iq4_xs_scale(b, j / 32));
  return dl * float(iq4_xs_code(b, j));
}

// MXFP4 as ggml stores it: e8m0_half(e) * doubled_fp4[q], q a nibble run (element i low, i + 16 high). Every
// product is exact, so for e < 255 it is Seedling's mxfp4 value of the same code and scale.
inline int mxfp4_ggml_code(const uint8_t* b, int j) {
  return kMxfp4Doubled[nibble32(b + offsetof(BlockMxfp4Ggml, qs), j)];
}
inline float mxfp4_ggml_value(const uint8_t* b, int j) {
  return e8m0_half(b[0]) * float(mxfp4_ggml_code(b, j));
}

// A block in integers, for the int8 products: element j's value is, in exact arithmetic,
//   d * (scale[j / 16] * code_j) - dmin * min[j / 16]
// with code_j the type's *_code, per group of 16 elements (a sub-block of 32 gives both its groups its scale and
// min; a 32-element type has one scale of 1). min is 0 and dmin 0 where the type has none; Q5_1's + m is dmin = -m,
// min 1. (The values above are these products rounded in float32 as gguf-py rounds them.)
// Byte offsets of a block's float16 fields (d, dmin, m); none for MXFP4_GGML (its scale is an e8m0 byte).
inline std::vector<size_t> ggml_f16_fields(Codec c) {
  switch (c) {
    case Codec::Q5_1:
      return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
    case Codec::Q2_K:
      return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case Codec::Q3_K:
      return {offsetof(BlockQ3_K, d)};
    case Codec::Q4_K:
    case Codec::Q5_K:
      return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case Codec::Q6_K:
      return {offsetof(BlockQ6_K, d)};
    case Codec::MXFP4_GGML:
      return {};
    default:
      return {0};  // Q8_0, Q4_0, Q5_0, IQ4_NL, IQ4_XS: d first
  }
}

// A 32-element block's d and dmin in this form (scale 1; min 1 where dmin is not 0: Q5_1's -m).
inline void ggml_d_dmin(Codec c, const uint8_t* b, float& d, float& dmin) {
  d = c == Codec::MXFP4_GGML ? e8m0_half(b[0]) : f16_at(b);
  dmin = c == Codec::Q5_1 ? -f16_at(b + offsetof(BlockQ5_1, m)) : 0.0f;
}
struct IntScales {
  float d = 0, dmin = 0;
  int16_t scale[16] = {}, min[16] = {};
  bool has_min = false;
};
// Always inlined: the int8 kernels call it once per block with a constant codec, which folds the switch away.
[[gnu::always_inline]] inline void ggml_int_scales(Codec c, const uint8_t* b, IntScales& s) {
  const int groups = int(codec_group(c) / 16);
  s.has_min = c == Codec::Q5_1 || c == Codec::Q2_K || c == Codec::Q4_K || c == Codec::Q5_K;
  s.dmin = 0;
  for (int g = 0; g < groups; ++g) s.scale[g] = 1, s.min[g] = 0;
  if (groups == 2) {
    ggml_d_dmin(c, b, s.d, s.dmin);
    if (s.has_min) s.min[0] = s.min[1] = 1;
    return;
  }
  switch (c) {
    case Codec::Q2_K:
      s.d = f16_at(b + offsetof(BlockQ2_K, d)), s.dmin = f16_at(b + offsetof(BlockQ2_K, dmin));
      for (int g = 0; g < 16; ++g) {
        const uint8_t sc = b[offsetof(BlockQ2_K, scales) + size_t(g)];
        s.scale[g] = int16_t(sc & 0x0F), s.min[g] = int16_t(sc >> 4);
      }
      return;
    case Codec::Q3_K:
      s.d = f16_at(b + offsetof(BlockQ3_K, d));
      for (int g = 0; g < 16; ++g) s.scale[g] = int16_t(q3_k_scale(b + offsetof(BlockQ3_K, scales), g));
      return;
    case Codec::Q4_K:
    case Codec::Q5_K: {
      s.d = f16_at(b), s.dmin = f16_at(b + offsetof(BlockQ4_K, dmin));
      uint64_t scales, mins;
      k_scales_mins(b + offsetof(BlockQ4_K, scales), scales, mins);
      for (int sub = 0; sub < 8; ++sub) {
        const int16_t scale = int16_t((scales >> (8 * sub)) & 0xFFu), min = int16_t((mins >> (8 * sub)) & 0xFFu);
        s.scale[2 * sub] = s.scale[2 * sub + 1] = scale;
        s.min[2 * sub] = s.min[2 * sub + 1] = min;
      }
      return;
    }
    case Codec::Q6_K:
      s.d = f16_at(b + offsetof(BlockQ6_K, d));
      for (int g = 0; g < 16; ++g) s.scale[g] = int8_t(b[offsetof(BlockQ6_K, scales) + size_t(g)]);
      return;
    case Codec::IQ4_XS:
      s.d = f16_at(b);
      for (int sub = 0; sub < 8; ++sub) s.scale[2 * sub] = s.scale[2 * sub + 1] = int16_t(iq4_xs_scale(b, sub));
      return;
    default:
      return;
  }
}

// The integer code of element j of one block of ggml codec c (the `*_code` above).
inline int ggml_code(Codec c, const uint8_t* b, int j) {
  switch (c) {
    case Codec::Q8_0:
      return q8_0_code(b, j);
    case Codec::Q4_0:
      return q4_0_code(b, j);
    case Codec::Q5_0:
      return q5_0_code(b, j);
    case Codec::Q5_1:
      return q5_1_code(b, j);
    case Codec::Q2_K:
      return crumb(b + offsetof(BlockQ2_K, qs), j);
    case Codec::Q3_K:
      return q3_k_code(b, j);
    case Codec::Q4_K:
      return k_nibble(b + offsetof(BlockQ4_K, qs), j);
    case Codec::Q5_K:
      return q5_k_code(b, j);
    case Codec::Q6_K:
      return q6_k_code(b, j);
    case Codec::IQ4_NL:
      return iq4_nl_code(b, j);
    case Codec::IQ4_XS:
      return iq4_xs_code(b, j);
    case Codec::MXFP4_GGML:
      return mxfp4_ggml_code(b, j);
    default:
      break;
  }
  return 0;
}

// Element j of one block of ggml codec c (codec_is_ggml).
inline float ggml_value(Codec c, const uint8_t* block, int j) {
  switch (c) {
    case Codec::Q8_0:
      return q8_0_value(block, j);
    case Codec::Q4_0:
      return q4_0_value(block, j);
    case Codec::Q5_0:
      return q5_0_value(block, j);
    case Codec::Q5_1:
      return q5_1_value(block, j);
    case Codec::Q2_K:
      return q2_k_value(block, j);
    case Codec::Q3_K:
      return q3_k_value(block, j);
    case Codec::Q4_K:
      return q4_k_value(block, j);
    case Codec::Q5_K:
      return q5_k_value(block, j);
    case Codec::Q6_K:
      return q6_k_value(block, j);
    case Codec::IQ4_NL:
      return iq4_nl_value(block, j);
    case Codec::IQ4_XS:
      return iq4_xs_value(block, j);
    case Codec::MXFP4_GGML:
      return mxfp4_ggml_value(block, j);
    default:
      break;
  }
  return 0.0f;
}

}  // namespace seedling::ggml
