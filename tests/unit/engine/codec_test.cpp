// Affine q8/q4 codecs: the block layout is what codec.h declares, encoding error stays within its bound, the fast
// matmul equals the double-precision reference within float rounding, and a row gives the same bits alone or batched.
// Seed codecs as ops::Matrix: sizes are the slice layout's, at() is the spec decode, matmul dispatches to the seed
// kernels (fast and reference), and nothing cuts a seed matrix by rows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "codec/quantize.h"
#include "codec/seed_search.h"
#include "core/error.h"
#include "ops/matmul.h"
#include "ops/seed_matmul.h"

namespace seedling {

namespace {
const Codec kAffine[] = {Codec::Q8_G32, Codec::Q8_G64, Codec::Q4_G32, Codec::Q4_G64};

std::vector<float> normal(size_t n, uint32_t seed, float mean = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(mean, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<uint8_t> encode(Codec c, const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<uint8_t> out(codec_matrix_bytes(c, rows, cols));
  encode_matrix(c, DType::F32, x.data(), rows, cols, out.data());
  return out;
}
}  // namespace

TEST(Codec, BlockSizesAndBitsPerWeightAreTheDeclaredOnes) {
  EXPECT_EQ(codec_row_bytes(Codec::Q8_G32, 64), 2 * 36u);   // 9.0 bits per weight
  EXPECT_EQ(codec_row_bytes(Codec::Q8_G64, 128), 2 * 68u);  // 8.5
  EXPECT_EQ(codec_row_bytes(Codec::Q4_G32, 64), 2 * 20u);   // 5.0
  EXPECT_EQ(codec_row_bytes(Codec::Q4_G64, 128), 2 * 36u);  // 4.5
  EXPECT_EQ(codec_row_bytes(Codec::Q4_G32, 40), 2 * 20u);   // a partial last group takes a whole block
  for (Codec c : kAllCodecs) EXPECT_EQ(parse_codec(codec_name(c)), c);
  EXPECT_FALSE(parse_codec("q3_g32").has_value());
}

TEST(Codec, Q4NibbleOrderIsLowFirstHalfHighSecondHalf) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[size_t(i)] = float(i % 16);  // exactly representable: d = 1, m = 0
  x[16] = 15;
  x[31] = 0;
  const auto b = encode(Codec::Q4_G32, x, 1, 32);
  const uint8_t* q = b.data() + 4;
  EXPECT_EQ(q[0], (15 << 4) | 0);   // element 0 low, element 16 high
  EXPECT_EQ(q[15], (0 << 4) | 15);  // element 15 low, element 31 high
  for (int i = 0; i < 32; ++i) EXPECT_EQ(codec_value(Codec::Q4_G32, b.data(), i), x[size_t(i)]);
}

TEST(Codec, DequantizedErrorIsWithinHalfAStepPlusFloat16Rounding) {
  const int64_t rows = 8, cols = 200;  // 200: partial last groups for both group sizes
  for (Codec c : kAffine) {
    const auto x = normal(size_t(rows * cols), 3, 0.5f);
    const auto b = encode(c, x, rows, cols);
    const ops::Matrix m{c, b.data(), rows, cols};
    const int64_t g = codec_group(c);
    const int qmax = (1 << codec_bits(c)) - 1;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t k0 = 0; k0 < cols; k0 += g) {
        float lo = INFINITY, hi = -INFINITY;
        for (int64_t k = k0; k < std::min(cols, k0 + g); ++k) {
          lo = std::min(lo, x[size_t(r * cols + k)]);
          hi = std::max(hi, x[size_t(r * cols + k)]);
        }
        // Half a step of the float16 scale (which may be one float16 ulp coarser than (hi-lo)/qmax), plus the
        // float16 rounding of the minimum (2^-11 relative) and the float32 arithmetic of d*q+m.
        const double step = double(hi - lo) / qmax * (1 + 0x1.0p-9);
        const double bound = step / 2 + std::fabs(lo) * 0x1.0p-11 + 1e-6;
        for (int64_t k = k0; k < std::min(cols, k0 + g); ++k) {
          ASSERT_LE(std::fabs(double(m.at(r, k)) - double(x[size_t(r * cols + k)])), bound)
              << codec_name(c) << " row " << r << " col " << k;
        }
      }
    }
  }
}

TEST(Codec, ConstantGroupsAndBf16PassthroughAreExact) {
  std::vector<float> x(64, 0.375f);
  for (Codec c : kAffine) {
    const auto b = encode(c, x, 1, 64);
    for (int k = 0; k < 64; ++k) EXPECT_EQ(codec_value(c, b.data(), k), 0.375f) << codec_name(c);
  }
  std::vector<uint16_t> h = {f32_to_bf16(1.5f), f32_to_bf16(-2.25f), 0x7f7f};
  std::vector<uint8_t> out(6);
  encode_matrix(Codec::BF16, DType::BF16, h.data(), 1, 3, out.data());
  EXPECT_EQ(std::memcmp(out.data(), h.data(), 6), 0);
}

TEST(Codec, NonFiniteValuesAreAnError) {
  std::vector<float> x(32, 1.0f);
  x[3] = NAN;
  EXPECT_THROW(encode(Codec::Q8_G32, x, 1, 32), Error);
}

// The float path's definition (the int8 path has its own tests: int8_dot_test.cpp).
class QuantMatmulTest : public ::testing::TestWithParam<std::tuple<Codec, int, int, int>> {
  ops::ScopedCpuDot float_dot_{ops::CpuDot::Float};
};

TEST_P(QuantMatmulTest, FastEqualsReferenceWithinFloatRoundingAndRowsAreBatchIndependent) {
  const auto [c, m, rows, cols] = GetParam();
  const auto wf = normal(size_t(rows) * size_t(cols), 11);
  const auto b = encode(c, wf, rows, cols);
  const ops::Matrix w{c, b.data(), rows, cols};
  const auto x = normal(size_t(m) * size_t(cols), 12);
  std::vector<float> fast(size_t(m) * size_t(rows)), ref(fast.size());
  ops::matmul(x.data(), m, w, fast.data());
  ops::ref::matmul(x.data(), m, w, ref.data());
  for (int i = 0; i < m; ++i) {
    for (int n = 0; n < rows; ++n) {
      double mag = 0;
      for (int k = 0; k < cols; ++k) mag += std::fabs(double(x[size_t(i * cols + k)]) * double(w.at(n, k)));
      const double bound = double(cols) * 0x1.0p-24 * mag + 1e-30;
      ASSERT_LE(std::fabs(double(fast[size_t(i * rows + n)]) - double(ref[size_t(i * rows + n)])), bound)
          << codec_name(c) << " row " << i << " col " << n;
    }
  }
  for (int i = 0; i < m; ++i) {
    std::vector<float> alone(static_cast<size_t>(rows));
    ops::matmul(x.data() + size_t(i * cols), 1, w, alone.data());
    ASSERT_EQ(std::memcmp(alone.data(), fast.data() + size_t(i * rows), size_t(rows) * 4), 0)
        << codec_name(c) << " row " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Mxfp4Shapes, QuantMatmulTest,
                         ::testing::Combine(::testing::Values(Codec::MXFP4), ::testing::Values(1, 5, 33),
                                            ::testing::Values(1, 7, 64), ::testing::Values(32, 40, 200, 256)),
                         [](const auto& info) {
                           return std::string("mxfp4_m") + std::to_string(std::get<1>(info.param)) + "_r" +
                                  std::to_string(std::get<2>(info.param)) + "_c" +
                                  std::to_string(std::get<3>(info.param));
                         });

INSTANTIATE_TEST_SUITE_P(Fp8Shapes, QuantMatmulTest,
                         ::testing::Combine(::testing::Values(Codec::FP8_G32), ::testing::Values(1, 5, 33),
                                            ::testing::Values(1, 7, 64), ::testing::Values(32, 40, 200, 256)),
                         [](const auto& info) {
                           return std::string("fp8_m") + std::to_string(std::get<1>(info.param)) + "_r" +
                                  std::to_string(std::get<2>(info.param)) + "_c" +
                                  std::to_string(std::get<3>(info.param));
                         });

// The layout gpt-oss releases: element 2i in the low nibble of byte i, one e8m0 scale; rounding to the nearest e2m1
// magnitude with the scale 2^ceil(log2(max / 6)), ties to the smaller magnitude.
TEST(Codec, Mxfp4LayoutScaleAndRoundingAreTheReleasedOnes) {
  std::vector<float> x(32, 0.0f);
  x[0] = 6.0f;    // max 6: scale 2^0
  x[1] = -1.5f;   // code 8 + 3
  x[2] = 5.0f;    // halfway 4 | 6: the smaller, 4 (code 6)
  x[3] = -0.2f;   // nearest 0: code 0, never -0 (8)
  x[31] = 2.75f;  // nearest 3 (code 5)
  const auto b = encode(Codec::MXFP4, x, 1, 32);
  ASSERT_EQ(b.size(), 17u);
  EXPECT_EQ(b[0], 127);
  EXPECT_EQ(b[1], (11 << 4) | 7);
  EXPECT_EQ(b[2], (0 << 4) | 6);
  EXPECT_EQ(b[16], (5 << 4) | 0);
  EXPECT_EQ(codec_value(Codec::MXFP4, b.data(), 1), -1.5f);
  EXPECT_EQ(codec_value(Codec::MXFP4, b.data(), 2), 4.0f);
  for (float& v : x) v *= 0x1.0p-20f;  // the scale follows: 2^-20, every code the same
  const auto s = encode(Codec::MXFP4, x, 1, 32);
  EXPECT_EQ(s[0], 127 - 20);
  EXPECT_EQ(std::memcmp(s.data() + 1, b.data() + 1, 16), 0);
  EXPECT_EQ(mxfp4_scale(0), 0x1.0p-127f);
  EXPECT_EQ(mxfp4_scale(254), 0x1.0p127f);
}

INSTANTIATE_TEST_SUITE_P(Shapes, QuantMatmulTest,
                         ::testing::Combine(::testing::ValuesIn(kAffine), ::testing::Values(1, 5, 33),
                                            ::testing::Values(1, 7, 64), ::testing::Values(32, 40, 200, 256)),
                         [](const auto& info) {
                           return std::string(codec_name(std::get<0>(info.param))) + "_m" +
                                  std::to_string(std::get<1>(info.param)) + "_r" +
                                  std::to_string(std::get<2>(info.param)) + "_c" +
                                  std::to_string(std::get<3>(info.param));
                         });

TEST(SeedCodecMatrix, SizesAtAndMatmulAreTheSeedSlices) {
  EXPECT_EQ(codec_matrix_bytes(Codec::P3, 768, 2048), 4 + 4 * size_t(768 * 256));                  // 4.0 b/w
  EXPECT_EQ(codec_matrix_bytes(Codec::P4, 768, 2048), 4 + 4 * size_t(768 * 256) + 768 * 256 / 2);  // 4.5 b/w
  EXPECT_EQ(codec_matrix_bytes(Codec::S3, 2048, 768), 4 + 4 * size_t(2048 * 64) + 2048 * 64 / 2);  // 3.0 b/w
  for (Codec c : {Codec::P3, Codec::P4, Codec::S3}) {
    EXPECT_TRUE(codec_is_seed(c));
    EXPECT_FALSE(codec_is_affine(c));
    EXPECT_FALSE(codec_is_float(c));
    const int64_t rows = 21, cols = 100, m = 3;  // 100: a partial last block for every tier
    const seed::SeedTier t = codec_seed_tier(c);
    seed::SeedSearchOptions opt;
    opt.n_seeds = 64;
    const std::vector<float> w = normal(size_t(rows * cols), 5);
    const std::vector<uint8_t> blob = seed::encode_seed_slice(t, w.data(), rows, cols, nullptr, opt);
    const ops::Matrix mat{c, blob.data(), rows, cols};
    EXPECT_EQ(mat.nbytes(), blob.size());
    EXPECT_EQ(mat.nbytes(), seed::seed_slice_layout(t, rows, cols).bytes);
    std::vector<float> full(size_t(rows * cols));
    seed::decode_seed_matrix(mat.seed_matrix(), full.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < cols; ++k) ASSERT_EQ(mat.at(r, k), full[size_t(r * cols + k)]) << codec_name(c);
    const std::vector<float> x = normal(size_t(m * cols), 6);
    std::vector<float> y(size_t(m * rows)), ys(size_t(m * rows)), yr(size_t(m * rows)), yrs(size_t(m * rows));
    ops::matmul(x.data(), m, mat, y.data());
    seed::seed_matmul(x.data(), m, mat.seed_matrix(), ys.data());
    ops::ref::matmul(x.data(), m, mat, yr.data());
    seed::ref::seed_matmul(x.data(), m, mat.seed_matrix(), yrs.data());
    EXPECT_EQ(0, std::memcmp(y.data(), ys.data(), y.size() * 4)) << codec_name(c);
    EXPECT_EQ(0, std::memcmp(yr.data(), yrs.data(), yr.size() * 4)) << codec_name(c);
    EXPECT_THROW(mat.row_bytes(), Error);
    EXPECT_THROW(mat.row_slice(1, 2), Error);
  }
}

}  // namespace seedling
