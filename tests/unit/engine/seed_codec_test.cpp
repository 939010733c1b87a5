// Seed codecs (docs/formats/seed.md): the LFSR spec, the stream tables, the golden expansion hash, words and blobs,
// validation of bad blobs, scalar = fast search. The kernels' tests are in seed_matmul_test.cpp.
#include "codec/seed_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "codec/lfsr.h"
#include "codec/seed_search.h"
#include "core/error.h"
#include "test_util.h"

using namespace seedling;
using namespace seedling::seed;

namespace {

uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

// FNV-1a 64 over every seed's expansion (int32 S values, little-endian), seeds 1..65535 in order.
uint64_t expansion_hash(SeedTier t) {
  const SeedTierSpec sp = seed_tier_spec(t);
  uint64_t h = 0xcbf29ce484222325ull;
  int32_t S[kMaxStates];
  for (uint32_t s = 1; s <= 65535; ++s) {
    expand_seed(t, uint16_t(s), S);
    h = fnv1a(h, S, sizeof(int32_t) * size_t(sp.block * sp.coefs));
  }
  return h;
}

using seedling::test::gaussian;

}  // namespace

TEST(SeedLfsr, StepMatchesHandComputedTapsAndPeriodIs65535) {
  EXPECT_EQ(lfsr_step(0x0001), 0x8000);  // bit 0 set: feedback 1
  EXPECT_EQ(lfsr_step(0x8000), 0x4000);  // bit 15 is no tap
  EXPECT_EQ(lfsr_step(0x1000), 0x8800);  // bit 12 is a tap
  EXPECT_EQ(lfsr_step(0x000B), 0x8005);  // bits 0, 1, 3: three taps, feedback 1
  EXPECT_EQ(lfsr_step(0), 0);
  uint16_t s = 1;
  uint32_t n = 0;
  do {
    s = lfsr_step(s);
    ++n;
  } while (s != 1 && n <= 70000);
  EXPECT_EQ(n, kLfsrPeriod);
}

TEST(SeedLfsr, StreamTablesEqualSteppingForEverySeed) {
  for (uint32_t s = 1; s <= 65535; ++s) {
    uint16_t states[kMaxStates];
    lfsr_states(uint16_t(s), kMaxStates, states);
    const uint64_t stream = lfsr_stream(uint16_t(s));
    for (int k = 0; k < kMaxStates; ++k) ASSERT_EQ(lfsr_stream_state(stream, k + 1), states[k]) << "seed " << s;
    // The linearity the tables rest on, checked against the spec directly.
    ASSERT_EQ(lfsr_feedback_bits(uint16_t(s)),
              lfsr_feedback_bits(uint16_t(s & 0xFF)) ^ lfsr_feedback_bits(uint16_t(s & 0xFF00)));
  }
  for (SeedTier t : kAllSeedTiers) {
    int32_t a[kMaxStates], b[kMaxStates];
    for (uint32_t s = 1; s <= 65535; ++s) {
      expand_seed(t, uint16_t(s), a);
      expand_seed_fast(t, uint16_t(s), b);
      ASSERT_EQ(0, std::memcmp(a, b, sizeof(int32_t) * size_t(seed_tier_spec(t).block * seed_tier_spec(t).coefs)));
    }
  }
}

// Locks the format: any change to the LFSR, the state order or S = state - 32768 changes these. The constants were
// computed once from the scalar spec (expand_seed) when the format was written down; a change is a format break.
TEST(SeedLfsr, GoldenHashOfEveryExpansionLocksTheFormat) {
  EXPECT_EQ(expansion_hash(SeedTier::P3), 0x40fe22a21152fd55ull);
  EXPECT_EQ(expansion_hash(SeedTier::P4), 0xdb6fac5a668a14e5ull);
  EXPECT_EQ(expansion_hash(SeedTier::S3), 0x5a0cf8db87db3b05ull);
}

TEST(SeedCodec, WordBitPositionsFollowTheFormat) {
  SeedBlock b;
  b.q[0] = 1;
  b.q[1] = -1;
  b.q[2] = 7;
  b.q[3] = -8;
  b.code = 5;
  EXPECT_EQ(pack_word(SeedTier::P3, b), 0x7F15);  // code in bits 0-3, then q0, q1, q2
  EXPECT_EQ(pack_word(SeedTier::P4, b), 0x87F1);  // q0..q3, code apart
  SeedBlock u;
  unpack_word(SeedTier::P4, 0x87F1, &u);
  EXPECT_EQ(u.q[0], 1);
  EXPECT_EQ(u.q[1], -1);
  EXPECT_EQ(u.q[2], 7);
  EXPECT_EQ(u.q[3], -8);
  unpack_word(SeedTier::P3, 0x7F15, &u);
  EXPECT_EQ(u.code, 5);
  EXPECT_EQ(u.q[2], 7);
}

TEST(SeedCodec, DecodeIsOneExactScaleThenBf16Rounding) {
  // Against an oracle in double: S from the LFSR spec, the product rounded to float then to bf16.
  SeedBlock b;
  b.seed = 12345;
  b.q[0] = 3;
  b.q[1] = -7;
  b.q[2] = 5;
  b.q[3] = -1;
  float w[kMaxBlock];
  decode_block(SeedTier::S3, b, -20, w);
  uint16_t st[kMaxStates];
  lfsr_states(12345, 48, st);
  for (int c = 0; c < 12; ++c) {
    double isum = 0;
    for (int p = 0; p < 4; ++p) isum += (double(st[c * 4 + p]) - 32768.0) * b.q[p];
    const float prod = float(isum * double(1.0f / 32767.0f) * std::ldexp(1.0, -20));  // exact scale, one rounding
    EXPECT_EQ(w[c], round_bf16(prod)) << c;
    EXPECT_NEAR(w[c], isum / 32767.0 * std::ldexp(1.0, -20), std::fabs(w[c]) * 0.005 + 1e-30);
  }
  EXPECT_EQ(seed_bits_per_weight(SeedTier::P3, 768, 2048), 4.0 + 32.0 / (768 * 2048));
  EXPECT_NEAR(seed_bits_per_weight(SeedTier::P4, 768, 2048), 4.5, 1e-4);
  EXPECT_NEAR(seed_bits_per_weight(SeedTier::S3, 2048, 768), 3.0, 1e-4);
}

TEST(SeedCodec, ValidateRejectsWrongSizeBadCodesZeroSeedsAndPadding) {
  const int64_t rows = 3, cols = 20;  // S3: 2 blocks per row (12 + 8), 6 blocks
  std::vector<SeedBlock> blocks(6);
  for (auto& b : blocks) b.code = 15;
  auto blob = write_seed_blob(SeedTier::S3, rows, cols, 80, blocks);
  EXPECT_EQ(blob.size(), 4u + 4 * 6 + 3);
  EXPECT_NO_THROW(validate_seed_blob(SeedTier::S3, blob.data(), blob.size(), rows, cols, "w"));
  try {
    validate_seed_blob(SeedTier::S3, blob.data(), blob.size() - 1, rows, cols, "layers.0.mlp.experts.3.down_proj");
    FAIL() << "wrong size accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers.0.mlp.experts.3.down_proj"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("takes 31 bytes"), std::string::npos) << e.what();
  }
  EXPECT_THROW(validate_seed_blob(SeedTier::P4, blob.data(), blob.size(), rows, cols, "w"), Error);
  auto bad = blob;
  const int32_t bias = 90;  // 90 + 15 > kMaxExponent
  std::memcpy(bad.data(), &bias, 4);
  try {
    validate_seed_blob(SeedTier::S3, bad.data(), bad.size(), rows, cols, "w");
    FAIL() << "out-of-range exponent code accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exponent code 15"), std::string::npos) << e.what();
  }
  bad = blob;
  bad[4] = bad[5] = 0;  // block 0's seed
  EXPECT_THROW(validate_seed_blob(SeedTier::S3, bad.data(), bad.size(), rows, cols, "w"), Error);
  bad = blob;
  const int32_t low = -200;
  std::memcpy(bad.data(), &low, 4);
  EXPECT_THROW(validate_seed_blob(SeedTier::S3, bad.data(), bad.size(), rows, cols, "w"), Error);
  // 5 blocks: the last code byte's high nibble is padding and must be 0.
  std::vector<SeedBlock> five(5);
  auto odd = write_seed_blob(SeedTier::P4, 5, 8, 0, five);
  odd.back() |= 0x30;
  EXPECT_THROW(validate_seed_blob(SeedTier::P4, odd.data(), odd.size(), 5, 8, "w"), Error);
}

// The fast search (SIMD over seeds, threads over blocks) returns the reference's seeds, coefficients and codes.
static void expect_fast_equals_reference(SeedTier t, int64_t rows, int64_t cols, uint32_t n_seeds, bool weighted,
                                         uint32_t rng_seed) {
  std::vector<float> w = gaussian(size_t(rows * cols), rng_seed, 0.02f);
  // Edge cases: an all-zero row, an outlier, a row of tiny values.
  for (int64_t k = 0; k < cols; ++k) {
    w[size_t(k)] = 0.0f;
    if (rows > 2) w[size_t(2 * cols + k)] *= 1e-3f;
  }
  if (rows > 1) w[size_t(cols + 1)] = 0.9f;
  std::vector<float> h;
  if (weighted) {
    h = gaussian(size_t(cols), rng_seed + 1);
    for (float& v : h) v = v * v + 0.01f;
  }
  SeedSearchOptions opt;
  opt.n_seeds = n_seeds;
  const SeedSearchResult fast = seed_search_slice(t, w.data(), rows, cols, weighted ? h.data() : nullptr, opt);
  opt.use_reference = true;
  const SeedSearchResult ref = seed_search_slice(t, w.data(), rows, cols, weighted ? h.data() : nullptr, opt);
  ASSERT_EQ(fast.exp_bias, ref.exp_bias);
  ASSERT_EQ(fast.blocks.size(), ref.blocks.size());
  for (size_t i = 0; i < ref.blocks.size(); ++i) {
    ASSERT_EQ(fast.blocks[i].seed, ref.blocks[i].seed) << seed_tier_name(t) << " block " << i;
    ASSERT_EQ(fast.blocks[i].code, ref.blocks[i].code) << seed_tier_name(t) << " block " << i;
    for (int p = 0; p < kMaxCoefs; ++p) ASSERT_EQ(fast.blocks[i].q[p], ref.blocks[i].q[p]) << "block " << i;
  }
}

TEST(SeedSearch, FastEqualsScalarReferenceOnThousandsOfBlocksPerTier) {
  // 3000+ blocks per tier on the first 256 seeds (the per-seed arithmetic is the same for every seed), weighted
  // and not, with a partial last block for S3 (cols = 100: 8 blocks of 12 and one of 4).
  for (SeedTier t : kAllSeedTiers) {
    const int64_t cols = t == SeedTier::S3 ? 100 : 96;
    expect_fast_equals_reference(t, 200, cols, 256, false, 7);
    expect_fast_equals_reference(t, 150, cols, 256, true, 8);
  }
}

TEST(SeedSearch, FastEqualsScalarReferenceOverAllSeeds) {
  for (SeedTier t : kAllSeedTiers) expect_fast_equals_reference(t, 3, seed_tier_spec(t).block, 65535, true, 9);
}

TEST(SeedSearch, FastEqualsScalarReferenceOnExactlyDecodableBlocks) {
  // Blocks that some seed reproduces exactly (error 0, so later seeds can only tie and must lose to it), beside
  // Gaussian ones: the fast search's early stop on candidates that reach the block's best so far keeps the
  // reference's winner, ties included. All 65535 seeds, unweighted and weighted.
  for (SeedTier t : kAllSeedTiers) {
    const int C = seed_tier_spec(t).block;
    const int64_t rows = 6;
    std::vector<float> w = gaussian(size_t(rows * C), 31, 0.02f);
    std::mt19937 rng(32);
    std::uniform_int_distribution<int> seed(1, 65535), q(-8, 7);
    for (int64_t r = 0; r < 3; ++r) {
      SeedBlock b;
      b.seed = uint16_t(seed(rng));
      for (int p = 0; p < seed_tier_spec(t).coefs; ++p) b.q[p] = int8_t(q(rng));
      decode_block(t, b, -12, &w[size_t(r * C)]);
    }
    std::vector<float> h = gaussian(size_t(C), 33);
    for (float& v : h) v = v * v + 0.01f;
    for (const float* hp : {static_cast<const float*>(nullptr), static_cast<const float*>(h.data())}) {
      SeedSearchOptions opt;
      const SeedSearchResult fast = seed_search_slice(t, w.data(), rows, C, hp, opt);
      opt.use_reference = true;
      const SeedSearchResult ref = seed_search_slice(t, w.data(), rows, C, hp, opt);
      ASSERT_EQ(fast.exp_bias, ref.exp_bias);
      for (size_t i = 0; i < ref.blocks.size(); ++i) {
        ASSERT_EQ(fast.blocks[i].seed, ref.blocks[i].seed) << seed_tier_name(t) << " block " << i;
        ASSERT_EQ(fast.blocks[i].code, ref.blocks[i].code) << seed_tier_name(t) << " block " << i;
        for (int p = 0; p < kMaxCoefs; ++p) ASSERT_EQ(fast.blocks[i].q[p], ref.blocks[i].q[p]) << "block " << i;
      }
    }
  }
}

TEST(SeedSearch, DecodedErrorIsNearSeedLmLevelsOnGaussianWeights) {
  // Not an exact oracle: P4 on i.i.d. Gaussian weights should land well under int3's error (~0.03-0.04 relative)
  // and the search's own score must be the decoded error (the winner's blocks decode to what it scored).
  const int64_t rows = 16, cols = 64;
  std::vector<float> w = gaussian(size_t(rows * cols), 11);
  const auto blob = encode_seed_slice(SeedTier::P4, w.data(), rows, cols, nullptr);
  std::vector<float> d(w.size());
  decode_seed_matrix({SeedTier::P4, blob.data(), rows, cols}, d.data());
  double num = 0, den = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    num += double(w[i] - d[i]) * (w[i] - d[i]);
    den += double(w[i]) * w[i];
  }
  EXPECT_LT(num / den, 0.025);
}

TEST(SeedSearch, ProgressReportsEveryBlockAtTheEnd) {
  std::vector<float> w = gaussian(64 * 16, 3);
  SeedSearchOptions opt;
  opt.n_seeds = 64;
  SeedSearchProgress last;
  int calls = 0;
  opt.progress = [&](const SeedSearchProgress& p) {
    last = p;
    ++calls;
  };
  seed_search_slice(SeedTier::P3, w.data(), 64, 16, nullptr, opt);
  EXPECT_GE(calls, 1);
  EXPECT_EQ(last.blocks_done, 128);
  EXPECT_EQ(last.blocks_total, 128);
}
