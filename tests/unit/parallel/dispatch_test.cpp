// Dispatch and combine plans by hand, the receive side's checks, and the row shards.
#include "parallel/dispatch.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace seedling {

namespace {

// Two ranks, one layer of 4 experts: rank 0 owns 0 and 2, rank 1 owns 1 and 3.
ExpertPlacement two_ranks() {
  ExpertPlacement p;
  p.ranks = 2;
  p.owner = {{0, 1, 0, 1}};
  p.rank_bytes = {2, 2};
  p.rank_load = {{2, 2}};
  return p;
}

}  // namespace

TEST(DispatchTest, EachRowGoesOnceToEachRankOfItsExpertsWithItsSlotsThere) {
  const ExpertPlacement p = two_ranks();
  // Row 0: experts 3, 0 (one each side); row 1: 2, 0 (both on rank 0); row 2: 1, 3 (both on rank 1).
  const std::vector<int> chosen = {3, 0, 2, 0, 1, 3};
  const DispatchPlan d = plan_dispatch(3, 2, chosen, p, 0);
  EXPECT_EQ(d.send_offset, (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(d.send_row, (std::vector<int64_t>{0, 1, 0, 2}));
  EXPECT_EQ(d.send_meta, (std::vector<int32_t>{-1, 0, 2, 0, 3, -1, 1, 3}));
  EXPECT_EQ(d.send_counts(), (std::vector<int64_t>{2, 2}));
  // Outputs back: rank 0's (row 0 slot 1, row 1 slots 0 and 1), then rank 1's (row 0 slot 0, row 2 slots 0, 1).
  EXPECT_EQ(d.return_offset, (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(d.pair_index, (std::vector<int64_t>{3, 0, 1, 2, 4, 5}));
}

TEST(DispatchTest, TheReceiverRunsThePairsInArrivalOrderAndReturnsThemPerSource) {
  const ExpertPlacement p = two_ranks();
  // Rank 1 receives one row from rank 0 (slot 0: expert 3) and two from itself.
  const std::vector<int64_t> recv = {1, 2};
  const std::vector<int32_t> meta = {3, -1, 1, 3, -1, 1};
  const ReceivedPairs r = received_pairs(recv, 2, meta, p, 0, 1);
  EXPECT_EQ(r.pair_row, (std::vector<int64_t>{0, 1, 1, 2}));
  EXPECT_EQ(r.pair_expert, (std::vector<int>{3, 1, 3, 1}));
  EXPECT_EQ(r.return_counts(), (std::vector<int64_t>{1, 3}));
}

TEST(DispatchTest, DisagreementsAreErrorsNotWrongSums) {
  const ExpertPlacement p = two_ranks();
  const std::vector<int64_t> recv = {1, 0};
  const auto message = [&](std::vector<int32_t> meta, int rank) {
    try {
      received_pairs(recv, 2, meta, p, 0, rank);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message({0, -1}, 1),
            "dispatch: rank 1 was sent expert 0 of layer 0, which it does not own (rank 0 sent it)");
  EXPECT_EQ(message({-1, -1}, 0), "dispatch: rank 0 was sent a row with no expert of its own from rank 0");
  EXPECT_EQ(message({0}, 0), "dispatch: rank 0 received rows without their metadata");
  const std::vector<int> bad = {0, 7};
  EXPECT_THROW(plan_dispatch(1, 2, bad, p, 0), Error);
  EXPECT_THROW(plan_dispatch(1, 2, std::vector<int>{0, 1}, p, 3), Error);  // no such layer
}

TEST(DispatchTest, NoRowsIsAnEmptyPlan) {
  const DispatchPlan d = plan_dispatch(0, 2, {}, two_ranks(), 0);
  EXPECT_EQ(d.send_counts(), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(d.return_counts(), (std::vector<int64_t>{0, 0}));
  EXPECT_TRUE(d.pair_index.empty());
}

TEST(DispatchTest, RowShardsCoverTheBatchInOrder) {
  for (int R = 1; R <= 5; ++R) {
    for (int64_t m = 0; m <= 11; ++m) {
      int64_t next = 0;
      for (int r = 0; r < R; ++r) {
        const RowShard s = row_shard(m, r, R);
        EXPECT_EQ(s.begin, next);
        EXPECT_GE(s.end - s.begin, m / R);
        EXPECT_LE(s.end - s.begin, m / R + 1);
        next = s.end;
      }
      EXPECT_EQ(next, m);
    }
  }
  EXPECT_EQ(row_shard(1, 0, 4).end, 1);  // a decode row: rank 0 combines it, the others none
  EXPECT_EQ(row_shard(1, 3, 4).begin, row_shard(1, 3, 4).end);
}

}  // namespace seedling
