// The codec constants the .cu files compute with (cuda/codec_ids.h), on the CPU: no GPU needed, so these run in CI.
#include "cuda/codec_ids.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>

#include "codec/codec.h"
#include "core/dtype.h"
#include "cuda/kernels.h"

namespace seedling {
namespace {

using cuda::codec_ids::e4m3_f16_bits;
using cuda::codec_ids::e4m3x2_f16_bits;
using cuda::codec_ids::fp4_value;
using cuda::codec_ids::fp4x8_f16_bits;
using cuda::codec_ids::kE4m3Unscale;
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

// Every FP8 e4m3 code but the two NaNs (0x7F, 0xFF, refused where FP8 weights are read): the fp16 that e4m3_f16_bits
// makes, widened and times 2^8, is codec.h's kE4m3Values bit for bit (subnormals and the sign of -0 included); and
// e4m3x2_f16_bits puts bytes 0 and 1 (or 2 and 3) of a word into its low and high halves as e4m3_f16_bits does.
TEST(CudaCodecIds, E4m3AsFp16BitsAreTheValuesTimes2ToTheMinus8) {
  int checked = 0;
  for (uint32_t c = 0; c < 256; ++c) {
    if ((c & 0x7Fu) == 0x7Fu) continue;
    const float got = f16_to_f32(uint16_t(e4m3_f16_bits(c))) * kE4m3Unscale;
    ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(kE4m3Values.v[c])) << "code " << c;
    ++checked;
  }
  EXPECT_EQ(checked, 254);
  for (uint32_t lo = 0; lo < 0x10000u; ++lo) {
    const uint32_t hi = (lo * 40503u + 12345u) & 0xffffu, w = lo | hi << 16;
    const uint32_t a = e4m3x2_f16_bits<false>(w), b = e4m3x2_f16_bits<true>(w);
    for (int j = 0; j < 4; ++j) {
      const uint32_t got = (j < 2 ? a : b) >> (16 * (j % 2)) & 0xffffu;
      ASSERT_EQ(got, e4m3_f16_bits((w >> (8 * j)) & 0xffu)) << "word " << w << " byte " << j;
    }
  }
}

// FP8 (fp8_g32) has kernels: the upload takes it, and the list of codecs with kernels names it.
TEST(CudaCodecIds, Fp8G32HasAKernel) {
  EXPECT_TRUE(cuda::has_kernel(Codec::FP8_G32));
  EXPECT_NE(cuda::kernel_codec_names().find("fp8_g32"), std::string::npos) << cuda::kernel_codec_names();
}

// Every codec has CUDA kernels now: has_kernel takes each (FP8, GGUF's ggml types as stored), and the list of codecs
// with kernels that an upload refusal would print names them.
TEST(CudaCodecIds, EveryCodecHasAKernel) {
  for (Codec c : kAllCodecs) {
    EXPECT_TRUE(cuda::has_kernel(c)) << codec_name(c);
  }
  const std::string names = cuda::kernel_codec_names();
  for (const char* name : {"q4_k", "q6_k", "iq4_xs", "mxfp4_ggml", "q8_0", "q4_g32"}) {
    EXPECT_NE(names.find(name), std::string::npos) << name << " in " << names;
  }
}

}  // namespace
}  // namespace seedling
