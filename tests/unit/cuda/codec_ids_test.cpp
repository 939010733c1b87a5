// The codec constants the .cu files compute with (cuda/codec_ids.h), on the CPU: no GPU needed, so these run in CI.
#include "cuda/codec_ids.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>

#include "codec/codec.h"
#include "cuda/kernels.h"

namespace seedling {
namespace {

using cuda::codec_ids::fp4_value;
using cuda::codec_ids::fp4x8_f16_bits;
using cuda::codec_ids::kFp4Unscale;

// Every 16-bit word of four FP4 codes, in the low and in the high half of a word (the other half another word):
// each fp16 that fp4x8_f16_bits makes, widened and times 2^14, is fp4_value of its code bit for bit (the sign of -0
// included), and fp4_value is codec.h's table.
TEST(CudaCodecIds, Fp4AsFp16BitsAreTheValuesTimes2ToTheMinus14) {
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(std::bit_cast<uint32_t>(fp4_value(uint32_t(c))), std::bit_cast<uint32_t>(kFp4Values[c])) << c;
  }
  for (uint32_t cw = 0; cw < 0x10000u; ++cw) {
    const uint32_t other = (cw * 40503u + 12345u) & 0xffffu;
    for (const uint32_t w : {cw | other << 16, other | cw << 16}) {
      uint32_t h[4] = {};
      fp4x8_f16_bits(w, h);
      for (int j = 0; j < 4; ++j) {
        for (int half = 0; half < 2; ++half) {
          const float got = f16_to_f32(uint16_t(h[j] >> (16 * half))) * kFp4Unscale;
          const float want = fp4_value((w >> (16 * half + 4 * j)) & 0xfu);
          ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
              << "word " << w << " block " << half << " code " << j;
        }
      }
    }
  }
}

// ggml's GGUF types have CUDA kernels: has_kernel takes each (and the list of codecs with kernels names them);
// fp8_g32 has none yet, so its upload is refused by name.
TEST(CudaCodecIds, GgufCodecsHaveKernelsFp8DoesNotYet) {
  for (Codec c : kAllCodecs) {
    EXPECT_EQ(cuda::has_kernel(c), c != Codec::FP8_G32) << codec_name(c);
  }
  const std::string names = cuda::kernel_codec_names();
  for (const char* name : {"q4_k", "q6_k", "iq4_xs", "mxfp4_ggml", "q8_0", "q4_g32"}) {
    EXPECT_NE(names.find(name), std::string::npos) << name << " in " << names;
  }
  EXPECT_EQ(names.find("fp8_g32"), std::string::npos) << names;
}

}  // namespace
}  // namespace seedling
