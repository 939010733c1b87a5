// core/dtype.h - element types of stored tensors and their exact conversions to float.
//
// Activations are float32 everywhere; stored weights keep their checkpoint type and are widened on the fly.
// bf16 -> f32 and f16 -> f32 are exact; f32 -> bf16 rounds to nearest even (the rounding torch uses).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace seedling {

enum class DType : uint8_t { F32, F16, BF16, I8, U8, I32, I64, U16, U32, F8_E4M3 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
// Parses a safetensors dtype string ("BF16", "F16", "F32", ...). Returns false when unknown.
bool parse_safetensors_dtype(std::string_view s, DType* out);

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);  // NaN stays NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

}  // namespace seedling
