// cuda/codec_ids.h - core/codec_layout.h's codec numbers and block sizes as plain constants, for the .cu files: nvcc
// cannot compile what that header includes (fmt's compile-time format checks). runtime.cpp static_asserts each value
// against it, so the two cannot drift apart.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace seedling {
enum class Codec : uint8_t;  // codec/codec.h
}

namespace seedling::cuda::codec_ids {
// Every codec, numbered as in core/codec_layout.h (a complete enum: nvcc wants one for template parameters);
// has_kernel (products.cu) says which the kernels read: every one.
enum class CodecId : uint8_t {
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
inline constexpr Codec F32 = Codec(0);  // the default of DeviceMatrix and ExpertLayout
// Bytes of one affine block: 2 bytes scale + 2 bytes minimum + the quantized values.
inline constexpr int kQ8G32Bytes = 36, kQ8G64Bytes = 68, kQ4G32Bytes = 20, kQ4G64Bytes = 36;
// MXFP4: one e8m0 scale byte, then 16 bytes of FP4 e2m1 codes (32 elements); blocks are not 4-byte aligned.
inline constexpr int kMxfp4Bytes = 17;
// FP8_G32: a float32 scale, then 32 FP8 e4m3fn codes (element j in byte j); blocks are 4-byte aligned.
inline constexpr int kFp8G32Bytes = 36;
// An FP4 e2m1 code (sign in bit 3) as codec.h's kFp4Values[code], from its bits: magnitudes 0 and 0.5 below code 2,
// else 2^(e - 1) (1 + m / 2) for exponent bits e and mantissa bit m. runtime.cpp checks all 16 against kFp4Values.
SEEDLING_HD constexpr float fp4_value(uint32_t code) {
  const uint32_t mag = code & 7u;
  const float v = mag < 2u ? 0.5f * float(mag) : (1.0f + 0.5f * float(mag & 1u)) * float(1u << ((mag >> 1) - 1u));
  return (code & 8u) != 0u ? -v : v;
}
// Two blocks' worth of a lane's FP4 codes, w's low 16 bits block A's elements 4t .. 4t + 3 (code j in nibble j), its
// high 16 bits block B's, as fp16 bit patterns: h[j] holds A's code j in its low half and B's in its high half, each
// equal to its code's value times 2^-14. The code's exponent bits go to the fp16's two lowest exponent bits and its
// mantissa bit to the top mantissa bit, so exponent e > 0 gives 2^(e - 15) (1 + m / 2) and e = 0 the subnormal
// m * 2^-15 (the code 0.5); its sign to the fp16's. Each pair is a shift of w whose code sits at bits 12..15 of each
// half (the sign already in place) and one of it 3 bits lower (the exponent and mantissa bits): 15 integer operations
// for 8 codes. A sum of these times x, times kFp4Unscale, is the sum of the values times x bit for bit: scaling by a
// power of 2 commutes with each rounding while no product falls below 2^-112.
SEEDLING_HD constexpr void fp4x8_f16_bits(uint32_t w, uint32_t (&h)[4]) {
  constexpr uint32_t kSign = 0x80008000u, kMag = 0x0E000E00u;
  h[0] = ((w << 12) & kSign) | ((w << 9) & kMag);  // the low nibbles of bytes 0 and 2
  h[1] = ((w << 8) & kSign) | ((w << 5) & kMag);   // the high nibbles of bytes 0 and 2
  h[2] = ((w << 4) & kSign) | ((w << 1) & kMag);   // the low nibbles of bytes 1 and 3
  h[3] = (w & kSign) | ((w >> 3) & kMag);          // the high nibbles of bytes 1 and 3
}
inline constexpr float kFp4Unscale = 16384.0f;  // 2^14
// An FP8 e4m3fn code (sign bit 7, exponent bits 6-3 with bias 7, mantissa bits 2-0) as the fp16 bit pattern of its
// value times 2^-8: the sign to the fp16's sign, the other 7 bits shifted under the fp16's exponent field, whose bias
// 15 is 8 more than e4m3's 7, so exponent e > 0 gives 2^(e - 15) (1 + m / 8) and e = 0 the subnormal m / 8 * 2^-14
// (e4m3's subnormal m / 8 * 2^-6 times 2^-8). Every code's value is exact so (the NaN codes 0x7F and 0xFF are refused
// where FP8 weights are read). e4m3x2_f16_bits does two codes at once: bytes 0 and 1 of w (or 2 and 3 with High) into
// the low and the high half of the result. codec_ids_test checks every code against codec.h's kE4m3Values.
SEEDLING_HD constexpr uint32_t e4m3_f16_bits(uint32_t code) {
  return ((code & 0x80u) << 8) | ((code & 0x7Fu) << 7);
}
template <bool High>
SEEDLING_HD constexpr uint32_t e4m3x2_f16_bits(uint32_t w) {
  const uint32_t b = High ? w >> 16 : w & 0xffffu;             // code A in bits 0-7, code B in bits 8-15
  const uint32_t spread = (b & 0xffu) | ((b & 0xff00u) << 8);  // A in bits 0-7, B in bits 16-23
  return ((spread & 0x00800080u) << 8) | ((spread & 0x007F007Fu) << 7);
}
inline constexpr float kE4m3Unscale = 256.0f;  // 2^8
}  // namespace seedling::cuda::codec_ids
