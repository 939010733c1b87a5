// The seed codecs on the device: the decode of whole slices against the CPU spec (decode_seed_matrix) bit for bit,
// the products at an expert's shapes against the CPU's seed_matmul, and the clear errors. (matmul, matvec and the
// expert kernels on seed matrices are also in kernels_test.cpp's codec lists, against ops::ref::matmul; the
// tensor-core GEMMs on seed matrices are in gemm_test.cpp.)
//
// Bound of a product: GPU and CPU both multiply the same decoded weights (bit for bit) by the same floats and sum
// n terms in float32 in different orders, each within (n + 8) * 2^-24 * sum |x_k w_k| of the exact sum, so they
// differ by at most twice that.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "codec/seed_codec.h"
#include "core/error.h"
#include "cuda/seeds.h"
#include "cuda_test_util.h"
#include "ops/seed_matmul.h"
#include "test_util.h"

namespace seedling {

namespace {

using test::DeviceVec;
using namespace seed;

constexpr double kU = 1.0 / 16777216.0;  // 2^-24

std::vector<float> device_decode(Codec c, const std::vector<uint8_t>& blob, int64_t rows, int64_t cols) {
  DeviceVec<uint8_t> db(blob);
  DeviceVec<float> out(test::poisoned(size_t(rows * cols)));
  cuda::decode_seed_matrix({c, db.get(), rows, cols}, out.get(), nullptr);
  return out.download();
}

std::vector<float> cpu_decode(Codec c, const std::vector<uint8_t>& blob, int64_t rows, int64_t cols) {
  std::vector<float> out(size_t(rows * cols));
  decode_seed_matrix({codec_seed_tier(c), blob.data(), rows, cols}, out.data());
  return out;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    ASSERT_EQ(a, b) << what << " element " << i << ": " << got[i] << " vs " << want[i];
  }
}

}  // namespace

// Every seed of every tier: 65535 rows of one block, row s - 1 holding seed s, random coefficients and codes.
TEST(CudaSeeds, DecodeEqualsSpecForEverySeed) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const Codec c : {Codec::P3, Codec::P4, Codec::S3}) {
    const SeedTier t = codec_seed_tier(c);
    const int64_t C = seed_tier_spec(t).block, rows = 65535;
    std::vector<uint8_t> blob = test::random_seed_slice(c, rows, C, 3, -20);
    for (int64_t s = 1; s <= rows; ++s) {  // seeds in order: seed array entry s - 1 holds s
      const uint16_t v = uint16_t(s);
      std::memcpy(blob.data() + 4 + 2 * size_t(s - 1), &v, 2);
    }
    validate_seed_blob(t, blob.data(), blob.size(), rows, C, "test");
    expect_same_bits(device_decode(c, blob, rows, C), cpu_decode(c, blob, rows, C), std::string(codec_name(c)));
  }
}

// Biases at both ends of the format's range, cols leaving a partial last block in every tier (1003 = 125 * 8 + 3
// = 83 * 12 + 7), a row shorter than one block, odd block counts (the codes' padding nibble), odd row counts.
TEST(CudaSeeds, DecodeEqualsSpecAtExtremeExponentsAndOddShapes) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const Codec c : {Codec::P3, Codec::P4, Codec::S3}) {
    for (const int32_t bias : {kMinExponent, -7, kMaxExponent - 15}) {
      for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{7, 1003}, {13, 5}, {3, 100}, {1, 2048}}) {
        const std::vector<uint8_t> blob = test::random_seed_slice(c, rows, cols, uint32_t(rows + cols), bias);
        expect_same_bits(device_decode(c, blob, rows, cols), cpu_decode(c, blob, rows, cols),
                         std::string(codec_name(c)) + " bias " + std::to_string(bias) + " " + std::to_string(rows) +
                             " x " + std::to_string(cols));
      }
    }
  }
}

// Qwen3-30B-A3B's expert shapes (gate/up 768 x 2048, down 2048 x 768): matmul at m = 1 (decode) and m = 5 against
// the CPU's seed_matmul within the bound of the file comment.
TEST(CudaSeeds, ProductsAtExpertShapesMatchCpuSeedMatmul) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const Codec c : {Codec::P3, Codec::P4, Codec::S3}) {
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{768, 2048}, {2048, 768}}) {
      const int64_t m = 5;
      const std::vector<uint8_t> blob = test::random_seed_slice(c, rows, cols, 9);
      const SeedMatrix sm{codec_seed_tier(c), blob.data(), rows, cols};
      const std::vector<float> x = test::gaussian(size_t(m * cols), 4);
      std::vector<float> want(size_t(m * rows)), w(size_t(rows * cols));
      seed_matmul(x.data(), m, sm, want.data());
      decode_seed_matrix(sm, w.data());
      DeviceVec<uint8_t> db(blob);
      DeviceVec<float> dx(x), dy(test::poisoned(size_t(m * rows))), dy1(test::poisoned(size_t(rows)));
      const cuda::DeviceMatrix dm{c, db.get(), rows, cols};
      cuda::matmul(dx.get(), m, dm, dy.get(), false, nullptr);
      cuda::matmul(dx.get(), 1, dm, dy1.get(), false, nullptr);
      const std::vector<float> got = dy.download(), one = dy1.download();
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t n = 0; n < rows; ++n) {
          double abs_sum = 0;
          for (int64_t k = 0; k < cols; ++k) {
            abs_sum += std::fabs(double(x[size_t(i * cols + k)]) * double(w[size_t(n * cols + k)]));
          }
          const double bound = 2.0 * double(cols + 8) * kU * abs_sum + 1e-30;
          ASSERT_LE(std::fabs(double(got[size_t(i * rows + n)]) - double(want[size_t(i * rows + n)])), bound)
              << codec_name(c) << " " << rows << " x " << cols << " row " << i << " out " << n;
        }
      }
      for (int64_t n = 0; n < rows; ++n) ASSERT_EQ(one[size_t(n)], got[size_t(n)]) << "m = 1 differs from m = 5";
    }
  }
}

// Errors without a GPU: a decode of a codec that is not a seed codec, a seed blob that is not 4-byte aligned.
TEST(CudaSeeds, BadInputIsAClearError) {
  const auto* misaligned = reinterpret_cast<const void*>(uintptr_t(4098));
  EXPECT_NE(test::error_of([] {
              cuda::decode_seed_matrix({Codec::BF16, nullptr, 4, 8}, nullptr, nullptr);
            }).find("not a seed codec"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] {
              cuda::decode_seed_matrix({Codec::P4, misaligned, 4, 8}, nullptr, nullptr);
            }).find("4-byte aligned"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] {
              cuda::matmul(nullptr, 1, {Codec::S3, misaligned, 4, 24}, nullptr, false, nullptr);
            }).find("4-byte aligned"),
            std::string::npos);
}

}  // namespace seedling
