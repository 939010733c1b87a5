#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>

namespace seedling {

TEST(DType, Bf16WidensExactlyAndRoundsToNearestEven) {
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties go to the even mantissa (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1.0p-8f), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1.0078125 (odd) and 1.015625 (even): rounds up to even.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0x1.0p-8f), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}

TEST(DType, F16RoundTripsEveryHalfValue) {
  // Every finite f16 value widens to a float that narrows back to the same bits.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = uint16_t(h);
    if ((bits & 0x7c00) == 0x7c00) continue;  // inf / nan
    const float f = f16_to_f32(bits);
    EXPECT_EQ(f32_to_f16(f), bits) << std::hex << h;
  }
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x0001), 0x1.0p-24f);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);    // rounds to infinity
}

TEST(DType, ParsesSafetensorsNames) {
  DType t;
  EXPECT_TRUE(parse_safetensors_dtype("BF16", &t));
  EXPECT_EQ(t, DType::BF16);
  EXPECT_TRUE(parse_safetensors_dtype("F8_E4M3", &t));  // FP8 releases (model/fp8_weights.h)
  EXPECT_EQ(t, DType::F8_E4M3);
  EXPECT_EQ(dtype_size(t), 1u);
  EXPECT_FALSE(parse_safetensors_dtype("F8_E5M2", &t));
}

}  // namespace seedling
