// codec/affine_reference.h - a plain affine quantize/dequantize for any bit width and group size, for quant-report.
//
// Groups of G consecutive weights along a row; per group m = f16(min) and d = f16((max - m) / (2^b - 1)), stepped
// up one float16 ulp when its rounding would leave the maximum past the top code; q = clamp(lround((x - m) / d),
// 0, 2^b - 1); value = d * q + m (float32, multiply then add). This is the rule of codec/quantize.cpp (affine
// q8/q4 at g32/g64) extended to other widths and groups (int3, g128), which that codec does not store yet.
// Bits per weight: b + 32 / G (two float16 per group). To be unified with codec/quantize.cpp once it takes any
// (bits, group); until then quant-report uses this for every affine row so they share one rule.
#pragma once

#include <cstdint>

namespace seedling::seed {

struct AffineSpec {
  int bits;   // 2..8
  int group;  // G
};

inline double affine_bits_per_weight(AffineSpec s) {
  return double(s.bits) + 32.0 / double(s.group);
}

// Quantizes and dequantizes rows x cols weights (a partial last group per row is its own group).
void affine_roundtrip(AffineSpec s, const float* x, int64_t rows, int64_t cols, float* out);

}  // namespace seedling::seed
