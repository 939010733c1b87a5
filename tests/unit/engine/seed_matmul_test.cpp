// Seed kernels (ops/seed_matmul.h) against the format's scalar spec: the SIMD row decode equals decode_seed_matrix
// bit for bit (every seed, every coefficient and code, partial last blocks), the matmul's dot products are within
// the float32 rounding bound of the plain reference and of an exact (double) dot, and a row of x gives the same bits
// alone, in a batch (fused m = 1 path against the chunked m > 1 path) and under any thread count.
#include "ops/seed_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "codec/lfsr.h"
#include "core/thread_pool.h"
#include "test_util.h"

using namespace seedling;
using namespace seedling::seed;
using seedling::test::for_each_simd_target;
using seedling::test::rounding_gamma;

namespace {

// Uniformly random blocks: seeds 1..65535, q in -8..7, codes 0..15 (so every nibble value is hit).
std::vector<SeedBlock> random_blocks(SeedTier t, int64_t n, uint32_t rng_seed) {
  std::mt19937 rng(rng_seed);
  std::uniform_int_distribution<int> seed(1, 65535), q(-8, 7), code(0, 15);
  const SeedTierSpec sp = seed_tier_spec(t);
  std::vector<SeedBlock> blocks(static_cast<size_t>(n));
  for (SeedBlock& b : blocks) {
    b.seed = uint16_t(seed(rng));
    for (int p = 0; p < sp.coefs; ++p) b.q[p] = int8_t(q(rng));
    b.code = uint8_t(code(rng));
  }
  return blocks;
}

void expect_rows_equal_spec(const SeedMatrix& sm) {
  std::vector<float> full(static_cast<size_t>(sm.rows * sm.cols));
  decode_seed_matrix(sm, full.data());
  // One float past the row is a guard: decode_seed_row writes exactly cols floats.
  std::vector<float> row(static_cast<size_t>(sm.cols + 1));
  for (int64_t r = 0; r < sm.rows; ++r) {
    row[size_t(sm.cols)] = 12345.0f;
    decode_seed_row(sm, r, row.data());
    ASSERT_EQ(0, std::memcmp(row.data(), &full[size_t(r * sm.cols)], sizeof(float) * size_t(sm.cols)))
        << seed_tier_name(sm.tier) << " row " << r;
    ASSERT_EQ(row[size_t(sm.cols)], 12345.0f) << "wrote past the row";
  }
}

}  // namespace

// The SIMD decode rounds to bf16 by adding 0x8000 to the bits and clearing the low 16, which equals the spec's
// ties-to-even only if no product float(isum) * scale(e) is a tie. |isum| <= 2^20 and scale(e) = fl(1/32767) * 2^e
// scales by a power of two into the normal range (docs/formats/seed.md), so the low 16 bits of the product are those
// of float(isum) * fl(1/32767): checking every isum checks every weight the format can hold.
TEST(SeedKernel, ProductsNeverTieAtBf16) {
  int ties = 0;
  for (int32_t isum = -(1 << 20); isum <= (1 << 20); ++isum) {
    const float f = float(isum) * kR32;
    uint32_t u;
    std::memcpy(&u, &f, 4);
    ties += (u & 0xFFFFu) == 0x8000u;
  }
  EXPECT_EQ(ties, 0);
  for (int e : {kMinExponent, 0, kMaxExponent}) {
    const float f = float(-(1 << 20) + 7) * seed_scale(e);
    EXPECT_EQ(round_bf16(f), round_bf16(float(-(1 << 20) + 7) * kR32) * std::ldexp(1.0f, e)) << e;
  }
}

TEST(SeedKernel, RowDecodeEqualsSpecForEverySeedPerTier) {
  for_each_simd_target([&] {
    // One block per seed: 65535 rows of one block, every q and code drawn at random.
    for (SeedTier t : kAllSeedTiers) {
      const int64_t C = seed_tier_spec(t).block;
      std::vector<SeedBlock> blocks = random_blocks(t, 65535, 1);
      for (uint32_t s = 1; s <= 65535; ++s) blocks[s - 1].seed = uint16_t(s);
      const auto blob = write_seed_blob(t, 65535, C, -20, blocks);
      expect_rows_equal_spec({t, blob.data(), 65535, C});
    }
  });
}

TEST(SeedKernel, RowDecodeEqualsSpecAtExtremeExponentsAndPartialBlocks) {
  for_each_simd_target([&] {
    // Biases at both ends of the format's range; cols that leave a partial last block in every tier (1003 = 125 * 8
    // + 3 = 83 * 12 + 7) and a row shorter than one block.
    for (SeedTier t : kAllSeedTiers) {
      for (int32_t bias : {kMinExponent, -7, kMaxExponent - 15}) {
        for (int64_t cols : {int64_t(1003), int64_t(5)}) {
          const int64_t rows = 7;
          const SeedSliceLayout L = seed_slice_layout(t, rows, cols);
          const auto blob = write_seed_blob(t, rows, cols, bias, random_blocks(t, L.n_blocks, uint32_t(bias + 200)));
          expect_rows_equal_spec({t, blob.data(), rows, cols});
        }
      }
    }
  });
}

TEST(SeedKernel, MatmulWithinFloatRoundingOfReferenceAndBatchIndependent) {
  for_each_simd_target([&] {
    // cols = 1003: more than one decode chunk of the m > 1 path (64 blocks) and a partial last block in every tier.
    const int64_t rows = 45, cols = 1003;
    for (SeedTier t : kAllSeedTiers) {
      const SeedSliceLayout L = seed_slice_layout(t, rows, cols);
      const auto blob = write_seed_blob(t, rows, cols, -25, random_blocks(t, L.n_blocks, 5));
      const SeedMatrix sm{t, blob.data(), rows, cols};
      std::vector<float> W(static_cast<size_t>(rows * cols));
      decode_seed_matrix(sm, W.data());
      for (int64_t m : {int64_t(1), int64_t(3), int64_t(9)}) {
        std::mt19937 rng(static_cast<uint32_t>(m));
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float> x(static_cast<size_t>(m * cols));
        for (float& v : x) v = nd(rng);
        std::vector<float> y(static_cast<size_t>(m * rows)), yr(static_cast<size_t>(m * rows)),
            y1(static_cast<size_t>(rows));
        seed_matmul(x.data(), m, sm, y.data());
        ref::seed_matmul(x.data(), m, sm, yr.data());
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t r = 0; r < rows; ++r) {
            // Every term x_k w_k is exact in double; the sum of cols of them in double errs by at most
            // cols * 2^-53 * mag. The kernel (fused multiply-adds into lanes, then a tree) and the reference (rounded
            // products, then a running sum) each err by at most gamma_{cols + 8} * mag against the exact dot.
            double exact = 0, mag = 0;
            for (int64_t k = 0; k < cols; ++k) {
              const double p = double(x[size_t(i * cols + k)]) * double(W[size_t(r * cols + k)]);
              exact += p;
              mag += std::fabs(p);
            }
            const double g = rounding_gamma(double(cols + 8)), slack = double(cols) * std::ldexp(mag, -53);
            const float fast = y[size_t(i * rows + r)], plain = yr[size_t(i * rows + r)];
            EXPECT_LE(std::fabs(double(fast) - exact), g * mag + slack) << seed_tier_name(t) << " m " << m << " " << r;
            EXPECT_LE(std::fabs(double(fast) - double(plain)), 2 * g * mag + slack) << seed_tier_name(t) << " " << r;
          }
          // Row i of x alone (the fused m = 1 path) gives the batch's bits.
          seed_matmul(x.data() + i * cols, 1, sm, y1.data());
          ASSERT_EQ(0, std::memcmp(y1.data(), y.data() + i * rows, sizeof(float) * size_t(rows)))
              << seed_tier_name(t) << " m " << m << " row " << i;
        }
        // One thread against the default pool: the same bits.
        const int threads = ThreadPool::global().size();
        ThreadPool::set_global_threads(1);
        std::vector<float> ys(static_cast<size_t>(m * rows));
        seed_matmul(x.data(), m, sm, ys.data());
        ThreadPool::set_global_threads(std::max(threads, 2));
        ASSERT_EQ(0, std::memcmp(ys.data(), y.data(), sizeof(float) * ys.size())) << seed_tier_name(t) << " m " << m;
      }
    }
  });
}

TEST(SeedKernel, ScaledWeightsFarFromOneKeepTheirDotProducts) {
  for_each_simd_target([&] {
    // Weights near 2^-100 and near 2^+80: the products stay normal floats and the kernel keeps the reference's
    // relative accuracy (no flush, no overflow in the lanes).
    const int64_t rows = 8, cols = 64;
    for (SeedTier t : kAllSeedTiers) {
      for (int32_t bias : {-100, 70}) {
        const SeedSliceLayout L = seed_slice_layout(t, rows, cols);
        const auto blob = write_seed_blob(t, rows, cols, bias, random_blocks(t, L.n_blocks, 9));
        const SeedMatrix sm{t, blob.data(), rows, cols};
        std::vector<float> W(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(cols), 1.0f),
            y(static_cast<size_t>(rows));
        decode_seed_matrix(sm, W.data());
        for (int64_t k = 0; k < cols; k += 2) x[size_t(k)] = -0.75f;
        seed_matmul(x.data(), 1, sm, y.data());
        for (int64_t r = 0; r < rows; ++r) {
          double exact = 0, mag = 0;
          for (int64_t k = 0; k < cols; ++k) {
            exact += double(x[size_t(k)]) * W[size_t(r * cols + k)];
            mag += std::fabs(double(x[size_t(k)]) * W[size_t(r * cols + k)]);
          }
          ASSERT_TRUE(std::isfinite(y[size_t(r)]));
          EXPECT_LE(std::fabs(double(y[size_t(r)]) - exact), rounding_gamma(double(cols + 8)) * mag)
              << bias << " " << r;
        }
      }
    }
  });
}
