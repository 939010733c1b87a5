// The expert placement planner: the uniform split, balance by measured load, bytes under budgets, determinism,
// and the errors when the experts do not fit.
#include "parallel/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "core/error.h"

namespace seedling {

namespace {

PlacementInput input(int ranks, int experts, int layers, uint64_t bytes = 1000) {
  PlacementInput in;
  in.ranks = ranks;
  in.num_experts = experts;
  in.layer_has_experts.assign(size_t(layers), 1);
  in.expert_bytes.assign(size_t(layers), bytes);
  return in;
}

std::string error_of(const PlacementInput& in) {
  try {
    plan_placement(in);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(PlacementTest, UniformSplitGivesEachRankFloorOrCeilOfEachLayerAndEvensTheBytes) {
  for (int R = 1; R <= 5; ++R) {
    PlacementInput in = input(R, 8, 4);
    in.layer_has_experts[1] = 0;  // a dense layer in between
    const ExpertPlacement p = plan_placement(in);
    ASSERT_EQ(p.owner.size(), 4u);
    EXPECT_TRUE(p.owner[1].empty());
    for (int l : {0, 2, 3}) {
      int total = 0;
      for (int r = 0; r < R; ++r) {
        const int n = int(p.experts_of(l, r).size());
        EXPECT_GE(n, 8 / R) << "R " << R << " layer " << l;
        EXPECT_LE(n, (8 + R - 1) / R);
        total += n;
      }
      EXPECT_EQ(total, 8);
    }
    // Three layers of 8 experts: the extra experts of uneven splits go to different ranks, so no rank holds more
    // than one expert's bytes above another.
    const auto [lo, hi] = std::minmax_element(p.rank_bytes.begin(), p.rank_bytes.end());
    EXPECT_LE(*hi - *lo, 1000u) << "R " << R;
  }
}

TEST(PlacementTest, MeasuredLoadIsBalancedLongestFirst) {
  PlacementInput in = input(2, 8, 1);
  // One hot expert and seven cold ones: the hot one's rank gets the coldest three, the other the rest.
  in.load = {{700, 10, 20, 30, 40, 50, 60, 70}};
  const ExpertPlacement p = plan_placement(in);
  const int hot = p.owner_of(0, 0);
  EXPECT_EQ(p.experts_of(0, hot).size(), 4u);  // the cap keeps the bytes even
  EXPECT_EQ(p.rank_load[0][size_t(hot)] + p.rank_load[0][size_t(1 - hot)], 980u);
  // The best a cap of 4 allows: the hot expert with the three coldest.
  EXPECT_EQ(p.rank_load[0][size_t(hot)], 700u + 10 + 20 + 30);
  EXPECT_NEAR(p.imbalance(0), 760.0 * 2 / 980, 1e-12);

  // Random loads: within LPT's bound of the best (4/3 of the mean, or the heaviest expert).
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int R = 2 + trial % 3, E = 16;
    PlacementInput r = input(R, E, 2);
    r.load.assign(2, std::vector<uint64_t>(size_t(E)));
    for (auto& row : r.load)
      for (auto& v : row) v = rng() % 1000;
    const ExpertPlacement q = plan_placement(r);
    for (int l = 0; l < 2; ++l) {
      const uint64_t total = std::accumulate(r.load[size_t(l)].begin(), r.load[size_t(l)].end(), uint64_t(0));
      const uint64_t heaviest = *std::max_element(r.load[size_t(l)].begin(), r.load[size_t(l)].end());
      const uint64_t worst = *std::max_element(q.rank_load[size_t(l)].begin(), q.rank_load[size_t(l)].end());
      // The cap can cost a little over plain LPT; the worst rank stays within the heaviest expert above the mean.
      EXPECT_LE(double(worst), double(total) / R + double(heaviest)) << "trial " << trial;
      for (int rr = 0; rr < R; ++rr) EXPECT_LE(q.experts_of(l, rr).size(), size_t((E + R - 1) / R));
    }
  }
}

TEST(PlacementTest, TheSummaryNamesBytesBudgetsAndTheWorstLayer) {
  PlacementInput in = input(2, 8, 2, 1'000'000'000);
  EXPECT_EQ(describe_placement(plan_placement(in), in),
            "expert placement: rank 0 8.000 GB, rank 1 8.000 GB; busiest rank / mean experts: 1.000 (layer 0)\n");
  in.rank_budget = {9'000'000'000, 9'000'000'000};
  in.load = {{8, 1, 1, 1, 1, 1, 1, 1}, {}};  // layer 0 measured (11 against 4 under the cap), layer 1 alike
  EXPECT_EQ(describe_placement(plan_placement(in), in),
            "expert placement: rank 0 8.000 of 9.000 GB, rank 1 8.000 of 9.000 GB; busiest rank / mean load: 1.467 "
            "(layer 0)\n");
}

TEST(PlacementTest, DeterministicForTheSameInputs) {
  PlacementInput in = input(3, 64, 6, 12345);
  std::mt19937 rng(3);
  in.load.assign(6, std::vector<uint64_t>(64));
  for (auto& row : in.load)
    for (auto& v : row) v = rng() % 50;  // many ties
  const ExpertPlacement a = plan_placement(in), b = plan_placement(in);
  EXPECT_EQ(a.owner, b.owner);
  EXPECT_EQ(a.rank_bytes, b.rank_bytes);
  EXPECT_EQ(a.rank_load, b.rank_load);
}

TEST(PlacementTest, BudgetsAreHonouredAndUnevenBudgetsLiftTheCap) {
  PlacementInput in = input(2, 8, 2, 1000);
  in.rank_budget = {12000, 4000};  // 16 experts: rank 1 can hold 4, so rank 0 must take 12
  const ExpertPlacement p = plan_placement(in);
  EXPECT_EQ(p.rank_bytes[0], 12000u);
  EXPECT_EQ(p.rank_bytes[1], 4000u);
  for (int l = 0; l < 2; ++l) {
    for (int e = 0; e < 8; ++e) EXPECT_GE(p.owner_of(l, e), 0);
  }
}

TEST(PlacementTest, TooLittleBudgetIsOneClearError) {
  PlacementInput in = input(2, 8, 3, 1'000'000'000);
  in.rank_budget = {10'000'000'000, 10'000'000'000};
  EXPECT_EQ(error_of(in),
            "expert placement: the routed experts need 24.000 GB, the 2 ranks' budgets add up to 20.000 GB");
  // Enough in total, but an expert does not divide: 3 experts of 1 GB into budgets of 1.5 GB each.
  PlacementInput g = input(2, 3, 1, 1'000'000'000);
  g.rank_budget = {1'500'000'000, 1'500'000'000};
  EXPECT_EQ(error_of(g),
            "expert placement: expert 2 of layer 0 (1000.0 MB) fits on no rank: rank 0 1.000 of 1.500 GB, rank 1 "
            "1.000 of 1.500 GB");
  PlacementInput w = input(2, 8, 1);
  w.load = {{1, 2, 3}};
  EXPECT_EQ(error_of(w), "expert placement: layer 0 has load for 3 experts, the model 8");
  EXPECT_EQ(error_of(input(0, 8, 1)), "expert placement: 0 ranks (at least 1)");
}

TEST(PlacementTest, LoadFromATraceCountsEachChoiceAndNamesBadRecords) {
  std::vector<RouteRecord> recs = {
      {0, 0, 0, {1, 2}, {0.5f, 0.5f}}, {1, 0, 1, {2, 3}, {0.5f, 0.5f}}, {1, 2, 1, {0, 2}, {0.5f, 0.5f}}};
  const std::vector<uint8_t> has = {1, 0, 1};
  const auto load = expert_load_from_trace(recs, has, 4);
  EXPECT_EQ(load[0], (std::vector<uint64_t>{0, 1, 2, 1}));
  EXPECT_TRUE(load[1].empty());
  EXPECT_EQ(load[2], (std::vector<uint64_t>{1, 0, 1, 0}));
  recs.push_back({2, 1, 2, {0, 1}, {0.5f, 0.5f}});
  EXPECT_THROW(
      {
        try {
          expert_load_from_trace(recs, has, 4);
        } catch (const Error& e) {
          EXPECT_STREQ(e.what(), "route trace: token 2 names layer 1, which has no routed experts in this model");
          throw;
        }
      },
      Error);
  recs.back() = {2, 0, 2, {0, 9}, {0.5f, 0.5f}};
  EXPECT_THROW(expert_load_from_trace(recs, has, 4), Error);
}

}  // namespace seedling
