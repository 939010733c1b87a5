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
// Everything here is inline: io/ (the packed format, a lower layer) sizes tensors with it without linking codec/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "core/dtype.h"

namespace seedling {

enum class Codec : uint8_t { F32, F16, BF16, Q8_G32, Q8_G64, Q4_G32, Q4_G64 };

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
static_assert(sizeof(BlockQ8G32) == 4 + 32, "q8_g32 block is 36 bytes");
static_assert(sizeof(BlockQ8G64) == 4 + 64, "q8_g64 block is 68 bytes");
static_assert(sizeof(BlockQ4G32) == 4 + 16, "q4_g32 block is 20 bytes");
static_assert(sizeof(BlockQ4G64) == 4 + 32, "q4_g64 block is 36 bytes");

inline constexpr Codec kAllCodecs[] = {Codec::F32,    Codec::F16,    Codec::BF16,  Codec::Q8_G32,
                                       Codec::Q8_G64, Codec::Q4_G32, Codec::Q4_G64};

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

inline bool codec_is_affine(Codec c) {
  return c >= Codec::Q8_G32;
}
inline int codec_bits(Codec c) {
  return c == Codec::Q4_G32 || c == Codec::Q4_G64 ? 4 : 8;
}
// Group size of an affine codec; 1 for float codecs.
inline int64_t codec_group(Codec c) {
  switch (c) {
    case Codec::Q8_G32:
    case Codec::Q4_G32:
      return 32;
    case Codec::Q8_G64:
    case Codec::Q4_G64:
      return 64;
    default:
      return 1;
  }
}
// Bytes of one block (affine) or one element (float).
inline size_t codec_block_bytes(Codec c) {
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
  }
  return 0;
}
inline size_t codec_row_bytes(Codec c, int64_t cols) {
  const int64_t g = codec_group(c);
  return size_t((cols + g - 1) / g) * codec_block_bytes(c);
}
inline size_t codec_matrix_bytes(Codec c, int64_t rows, int64_t cols) {
  return size_t(rows) * codec_row_bytes(c, cols);
}

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

// Element k of a stored row, as float; the scalar definition every kernel must match bit for bit.
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
