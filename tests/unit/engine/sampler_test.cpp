#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "core/error.h"

namespace seedling {

TEST(Sampler, TemperatureZeroIsArgmax) {
  Sampler s({});
  const std::vector<float> l = {0.1f, 3.0f, 2.9f, -1.0f};
  EXPECT_EQ(s.sample(l, {}), 1);
}

// The plain loop argmax replaces: the first index of the maximum; NaN never compares greater.
int32_t argmax_reference(std::span<const float> l) {
  int32_t best = 0;
  for (size_t i = 1; i < l.size(); ++i) {
    if (l[i] > l[size_t(best)]) best = int32_t(i);
  }
  return best;
}

TEST(Sampler, ArgmaxEqualsThePlainLoop) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  for (const size_t n : {1, 2, 15, 16, 17, 33, 1000, 151936}) {
    for (int trial = 0; trial < 6; ++trial) {
      std::vector<float> l(n);
      for (float& v : l) v = trial % 2 ? std::round(u(rng)) : u(rng);  // odd trials: many ties
      if (trial == 2) l[n / 2] = nan;
      if (trial == 3 && n > 1) l[n - 1] = l[0] = inf;
      if (trial == 4) l[0] = nan;  // nothing beats a NaN at 0: index 0
      if (trial == 5) std::fill(l.begin(), l.end(), -0.0f), l[n - 1] = 0.0f;
      EXPECT_EQ(argmax(l), argmax_reference(l)) << "n " << n << " trial " << trial;
    }
  }
  EXPECT_EQ(argmax(std::vector<float>{}), 0);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  const std::vector<float> l = {1.0f, 1.1f, 0.9f, 1.05f, 0.95f, 1.0f, 1.02f, 0.98f};
  auto draw = [&](uint64_t seed) {
    Sampler s(
        {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .repetition_penalty = 1.0f, .seed = seed});
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.sample(l, {}));
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(Sampler, TopKOneAndTinyTopPAreGreedy) {
  const std::vector<float> l = {0.5f, 0.4f, 2.0f, 1.9f};
  Sampler k1({.temperature = 1.0f, .top_k = 1, .top_p = 1.0f, .min_p = 0.0f, .repetition_penalty = 1.0f, .seed = 5});
  Sampler p0({.temperature = 1.0f, .top_k = 0, .top_p = 0.01f, .min_p = 0.0f, .repetition_penalty = 1.0f, .seed = 5});
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(k1.sample(l, {}), 2);
    EXPECT_EQ(p0.sample(l, {}), 2);
  }
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  // Probabilities about 0.665, 0.245, 0.090: min_p 0.2 keeps the first two only.
  const std::vector<float> l = {2.0f, 1.0f, 0.0f};
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.2f, .repetition_penalty = 1.0f, .seed = 9});
  std::map<int32_t, int> seen;
  for (int i = 0; i < 2000; ++i) ++seen[s.sample(l, {})];
  EXPECT_EQ(seen.count(2), 0u);
  EXPECT_GT(seen[1], 300);
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
  const std::vector<float> l = {0.0f, std::log(3.0f)};  // p = 0.25, 0.75
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .repetition_penalty = 1.0f, .seed = 1});
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ones += s.sample(l, {}) == 1;
  EXPECT_NEAR(double(ones) / n, 0.75, 0.015);
}

TEST(Sampler, RepetitionPenaltyDemotesSeenTokens) {
  const std::vector<float> l = {2.0f, 1.9f};
  Sampler s({.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .repetition_penalty = 1.5f, .seed = 0});
  const std::vector<int32_t> ctx = {0};
  EXPECT_EQ(s.sample(l, ctx), 1);  // 2.0 / 1.5 < 1.9
}

TEST(Sampler, LogitBiasIsAddedFirst) {
  const std::vector<float> l = {2.0f, 1.0f, 0.5f};
  Sampler s({.logit_bias = {{2, 1.6f}}});
  EXPECT_EQ(s.sample(l, {}), 2);  // 0.5 + 1.6 > 2.0
  Sampler ban({.logit_bias = {{0, -100.0f}, {1, -100.0f}}});
  EXPECT_EQ(ban.sample(l, {}), 2);
  Sampler out_of_range({.logit_bias = {{3, 1.0f}}});
  EXPECT_THROW(out_of_range.sample(l, {}), Error);
}

// OpenAI's definition: logit[t] -= presence * (c[t] > 0) + frequency * c[t] over this sampler's own draws (the
// context passed in, the prompt, does not count).
TEST(Sampler, PresenceAndFrequencyPenaltiesCountTheDraws) {
  const std::vector<float> l = {3.0f, 2.0f, 0.0f};
  const std::vector<int32_t> prompt = {0, 0, 0};
  Sampler presence({.presence_penalty = 1.5f});
  EXPECT_EQ(presence.sample(l, prompt), 0);  // nothing drawn yet: the prompt's 0s are not penalised
  EXPECT_EQ(presence.sample(l, prompt), 1);  // 3 - 1.5 < 2
  EXPECT_EQ(presence.sample(l, prompt), 0);  // 0 at 1.5, 1 at 0.5
  Sampler frequency({.frequency_penalty = 0.6f});
  std::vector<int32_t> got;
  for (int i = 0; i < 5; ++i) got.push_back(frequency.sample(l, {}));
  // 0: 3, 2.4, 1.8 (after one, two draws); 1: 2, 1.4. Draws: 0 (3>2), 0 (2.4>2), 1 (1.8<2), 0 (1.8>1.4), 1 (1.2<1.4).
  EXPECT_EQ(got, (std::vector<int32_t>{0, 0, 1, 0, 1}));
  Sampler negative({.presence_penalty = -2.0f});  // a negative penalty favours what was drawn
  EXPECT_EQ(negative.sample(std::vector<float>{2.0f, 2.5f}, {}), 1);
  EXPECT_EQ(negative.sample(std::vector<float>{2.6f, 2.5f}, {}), 1);  // 2.5 + 2 > 2.6
}

// log softmax of the raw logits, in double; the alternatives highest first, the lower id first on ties.
TEST(Sampler, TokenLogprobsAreTheLogSoftmaxWithTheTopAlternatives) {
  const std::vector<float> l = {1.0f, 3.0f, 2.0f, 3.0f, -50.0f};
  double z = 0.0;
  for (const float x : l) z += std::exp(double(x));
  const TokenLogprobs lp = token_logprobs(l, 2, 3);
  EXPECT_EQ(lp.token, 2);
  EXPECT_FLOAT_EQ(lp.logprob, float(2.0 - std::log(z)));
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);
  EXPECT_EQ(lp.top[1].first, 3);
  EXPECT_EQ(lp.top[2].first, 2);
  EXPECT_FLOAT_EQ(lp.top[0].second, float(3.0 - std::log(z)));
  EXPECT_EQ(token_logprobs(l, 4, 0).top.size(), 0u);
  EXPECT_EQ(token_logprobs(l, 4, 9).top.size(), l.size());
  EXPECT_FLOAT_EQ(token_logprobs(l, 4, 0).logprob, float(-50.0 - std::log(z)));
}

TEST(Sampler, RejectsBadParameters) {
  EXPECT_THROW(
      Sampler({.temperature = -1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .repetition_penalty = 1.0f, .seed = 0}),
      Error);
  EXPECT_THROW(
      Sampler({.temperature = 1.0f, .top_k = 0, .top_p = 0.0f, .min_p = 0.0f, .repetition_penalty = 1.0f, .seed = 0}),
      Error);
  EXPECT_THROW(Sampler({.presence_penalty = std::nanf("")}), Error);
  EXPECT_THROW(Sampler({.logit_bias = {{-1, 1.0f}}}), Error);
  EXPECT_THROW(Sampler({.logit_bias = {{1, INFINITY}}}), Error);
}

}  // namespace seedling

namespace seedling {
namespace {

// Structured output's mask: a disallowed token is never picked, greedy or sampled, however likely; the draws among
// the allowed ones keep their relative odds.
TEST(SamplerMask, DisallowedTokensAreNeverPicked) {
  std::vector<float> logits(200, 0.0f);
  logits[7] = 50.0f;  // by far the most likely, and disallowed
  logits[130] = 1.0f;
  std::vector<uint64_t> allowed(4, 0);
  for (int id : {3, 130, 199}) allowed[size_t(id) / 64] |= uint64_t(1) << (id % 64);
  Sampler greedy({});
  EXPECT_EQ(greedy.sample(logits, {}, allowed), 130);
  EXPECT_EQ(greedy.sample(logits, {}), 7);
  for (float temp : {0.5f, 1.0f, 2.0f}) {
    for (int top_k : {0, 1, 2, 50}) {
      SamplerParams p;
      p.temperature = temp;
      p.top_k = top_k;
      p.top_p = 0.999f;
      p.seed = 11;
      Sampler s(p);
      int picked_130 = 0;
      for (int i = 0; i < 300; ++i) {
        const int32_t t = s.sample(logits, {}, allowed);
        ASSERT_TRUE(t == 3 || t == 130 || t == 199) << t;
        picked_130 += t == 130;
      }
      EXPECT_GT(picked_130, 0);
    }
  }
  std::vector<uint64_t> none(4, 0);
  EXPECT_THROW(greedy.sample(logits, {}, none), Error);
}

}  // namespace
}  // namespace seedling
