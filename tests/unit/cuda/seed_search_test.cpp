// The seed search on the GPU (cuda/seed_search.h) against the CPU's (codec/seed_search.h): the same bias and the same
// blocks (seed, coefficients, exponent code), bit for bit, for every tier, unweighted and weighted, on random
// weights and on rows that some seed decodes exactly (errors of 0: the ties go to the lowest seed).
#include "codec/seed_search.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "codec/codec.h"
#include "codec/seed_codec.h"
#include "cuda/seed_search.h"
#include "cuda_test_util.h"
#include "test_util.h"

namespace seedling {

namespace {

using namespace seed;

void expect_same_result(const SeedSearchResult& gpu, const SeedSearchResult& cpu, SeedTier t, const std::string& what) {
  ASSERT_EQ(gpu.exp_bias, cpu.exp_bias) << what;
  ASSERT_EQ(gpu.blocks.size(), cpu.blocks.size()) << what;
  for (size_t i = 0; i < gpu.blocks.size(); ++i) {
    const SeedBlock &a = gpu.blocks[i], &b = cpu.blocks[i];
    ASSERT_EQ(a.seed, b.seed) << what << " block " << i;
    ASSERT_EQ(a.code, b.code) << what << " block " << i;
    for (int p = 0; p < seed_tier_spec(t).coefs; ++p) ASSERT_EQ(a.q[p], b.q[p]) << what << " block " << i;
  }
}

}  // namespace

// A few hundred blocks a tier (24 rows of 100: partial last blocks in every tier), all 65535 seeds.
TEST(CudaSeedSearch, EqualsCpuSearchOnHundredsOfBlocksPerTier) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t rows = 24, cols = 100;
  std::vector<float> w = test::gaussian(size_t(rows * cols), 1, 0.02f);
  std::vector<float> h = test::gaussian(size_t(cols), 2);
  for (float& v : h) v = v * v;  // energies >= 0
  for (const SeedTier t : kAllSeedTiers) {
    // Rows 20..23: a random seed slice decoded, so that many of their blocks some seed decodes exactly (error 0).
    const std::vector<uint8_t> blob = test::random_seed_slice(seed_tier_codec(t), 4, cols, 3);
    decode_seed_matrix({t, blob.data(), 4, cols}, w.data() + 20 * cols);
    for (const bool weighted : {false, true}) {
      const float* hp = weighted ? h.data() : nullptr;
      const SeedSearchResult cpu = seed_search_slice(t, w.data(), rows, cols, hp);
      const SeedSearchResult gpu = cuda::seed_search_slice_cuda(t, w.data(), rows, cols, hp);
      expect_same_result(gpu, cpu, t, std::string(seed_tier_name(t)) + (weighted ? " weighted" : " unweighted"));
    }
  }
}

// Fewer seeds (the pack's preview knob) and a single block: the same as the CPU with the same n_seeds.
TEST(CudaSeedSearch, EqualsCpuSearchWithFewSeeds) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<float> w = test::gaussian(size_t(3 * 40), 5, 0.02f);
  for (const SeedTier t : kAllSeedTiers) {
    for (const uint32_t n : {1u, 300u}) {
      SeedSearchOptions opt;
      opt.n_seeds = n;
      expect_same_result(cuda::seed_search_slice_cuda(t, w.data(), 3, 40, nullptr, n),
                         seed_search_slice(t, w.data(), 3, 40, nullptr, opt), t,
                         std::string(seed_tier_name(t)) + " n_seeds " + std::to_string(n));
      expect_same_result(cuda::seed_search_slice_cuda(t, w.data(), 1, 5, nullptr, n),
                         seed_search_slice(t, w.data(), 1, 5, nullptr, opt), t,
                         std::string(seed_tier_name(t)) + " one short block, n_seeds " + std::to_string(n));
    }
  }
}

// Bad input is the CPU search's clear error, before any device work.
TEST(CudaSeedSearch, BadInputIsTheCpuSearchsError) {
  const std::vector<float> w(16, 0.1f);
  EXPECT_NE(test::error_of([&] {
              cuda::seed_search_slice_cuda(SeedTier::P4, w.data(), 2, 8, nullptr, 0);
            }).find("n_seeds 0 is outside"),
            std::string::npos);
  std::vector<float> bad = w;
  bad[3] = NAN;
  EXPECT_NE(
      test::error_of([&] { cuda::seed_search_slice_cuda(SeedTier::P4, bad.data(), 2, 8, nullptr); }).find("not finite"),
      std::string::npos);
}

}  // namespace seedling
