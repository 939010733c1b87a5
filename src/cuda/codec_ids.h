// cuda/codec_ids.h - codec/codec.h's codec numbers and block sizes as plain constants, for the .cu files: nvcc cannot
// compile what codec.h includes (fmt's compile-time format checks). runtime.cpp static_asserts each value against
// codec.h, so the two cannot drift apart.
#pragma once

#include <cstdint>

namespace seedling {
enum class Codec : uint8_t;  // codec/codec.h
}

namespace seedling::cuda::codec_ids {
// The codecs with kernels, numbered as in codec.h (a complete enum: nvcc wants one for template parameters).
enum class CodecId : uint8_t { F32, F16, BF16, Q8_G32, Q8_G64, Q4_G32, Q4_G64, P3, P4, S3 };
inline constexpr Codec F32 = Codec(0);  // the default of DeviceMatrix and ExpertLayout
// Bytes of one block: 2 bytes scale + 2 bytes minimum + the quantized values.
inline constexpr int kQ8G32Bytes = 36, kQ8G64Bytes = 68, kQ4G32Bytes = 20, kQ4G64Bytes = 36;
}  // namespace seedling::cuda::codec_ids
