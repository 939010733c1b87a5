// codec/seed_arith.h - the float arithmetic of the seed format (docs/formats/seed.md) that host and device share:
// the exponent range, fl(1/32767), 2^e, scale(e) and the bf16 rounding of a decoded weight.
//
// Free of fmt and of anything nvcc cannot compile, and marked __host__ __device__ under nvcc, so the CPU code and
// the CUDA kernels (cuda/seed_device.cuh, cuda/seed_search.cu) run these very functions: one definition of each
// operation of the format, not a copy per device.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace seedling::seed {

inline constexpr int kMaxBlock = 12;
inline constexpr int kMaxCoefs = 4;
// Block exponents e = bias + code allowed by the format: scale(e) is a normal float, every weight finite in bf16.
inline constexpr int kMinExponent = -110;
inline constexpr int kMaxExponent = 100;
inline constexpr float kR32 = 1.0f / 32767.0f;  // fl(1/32767)

// 2^e as a float, for kMinExponent - 20 <= e <= 127 (exact, built from the exponent bits).
SEEDLING_HD float pow2f(int e) {
  const uint32_t bits = uint32_t(e + 127) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
// scale(e) = fl(1/32767) * 2^e, exact (a power of two times a normal float: no rounding to contract away).
SEEDLING_HD float seed_scale(int e) {
  return kR32 * pow2f(e);
}

// Round a finite float to the nearest bf16 (ties to even), returned widened to float. The decoded weight.
SEEDLING_HD float round_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

}  // namespace seedling::seed
