#include "core/dtype.h"

namespace seedling {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
    case DType::I32:
    case DType::U32:
      return 4;
    case DType::F16:
    case DType::BF16:
    case DType::U16:
      return 2;
    case DType::I8:
    case DType::U8:
    case DType::F8_E4M3:
      return 1;
    case DType::I64:
      return 8;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    case DType::I8:
      return "I8";
    case DType::U8:
      return "U8";
    case DType::I32:
      return "I32";
    case DType::I64:
      return "I64";
    case DType::U16:
      return "U16";
    case DType::U32:
      return "U32";
    case DType::F8_E4M3:
      return "F8_E4M3";
  }
  return "?";
}

bool parse_safetensors_dtype(std::string_view s, DType* out) {
  struct Entry {
    std::string_view name;
    DType type;
  };
  static constexpr Entry kTable[] = {{"F32", DType::F32},        {"F16", DType::F16}, {"BF16", DType::BF16},
                                     {"I8", DType::I8},          {"U8", DType::U8},   {"I32", DType::I32},
                                     {"I64", DType::I64},        {"U16", DType::U16}, {"U32", DType::U32},
                                     {"F8_E4M3", DType::F8_E4M3}};
  for (const auto& e : kTable) {
    if (e.name == s) {
      *out = e.type;
      return true;
    }
  }
  return false;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | (uint32_t(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u);
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // overflow to inf (>= 65520 rounds up)
  if (abs < 0x38800000u) {                                  // subnormal or zero in f16
    if (abs < 0x33000000u) return uint16_t(sign);
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // value / 2^-24 = m * 2^(e - 126): f16 subnormal units
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    uint32_t r = m >> shift;
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return uint16_t(sign | r);
  }
  uint32_t v = abs - (112u << 23);  // rebias exponent
  const uint32_t rem = v & 0x1fffu;
  v >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (v & 1u))) ++v;
  return uint16_t(sign | v);
}

}  // namespace seedling
