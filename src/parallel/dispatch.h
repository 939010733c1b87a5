// parallel/dispatch.h - one MoE layer's dispatch and combine plan on one rank (expert parallelism).
//
// A rank holds some rows (its share of the batch) with their router's top-k experts and weights. Dispatch sends
// each row once to every rank that owns at least one of its experts, with k ints of metadata: the expert of each
// slot that lives there, -1 for the others. The owner runs its experts on the pairs (row, expert) it received and
// sends one output row per pair back, in the order the pairs arrived. The weights never travel: the sender
// combines, per row, sum over slots s of weight[s] * output[s] in slot order from 0 (combine_expert_outputs), the
// order the single-device MoE block sums in, so the result has its bits wherever the experts ran. (Summing a
// rank's slots there would halve the return traffic of k = 8 over 2 ranks but change that order.)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "parallel/placement.h"

namespace seedling {

struct DispatchPlan {
  int ranks = 0;
  int k = 0;
  int64_t rows = 0;  // this rank's rows
  // Send side, segments in rank order: the rows for rank d are send_row[send_offset[d] .. send_offset[d + 1]),
  // local row indices in ascending order; send_meta holds k ints per sent row.
  std::vector<int64_t> send_offset;  // ranks + 1
  std::vector<int64_t> send_row;
  std::vector<int32_t> send_meta;
  // Return side: the outputs coming back from rank d are [return_offset[d], return_offset[d + 1]) of the returned
  // rows, in the order the rows were sent, a row's present slots in slot order. pair_index[i * k + s] is where row
  // i's slot s output lies among them.
  std::vector<int64_t> return_offset;  // ranks + 1
  std::vector<int64_t> pair_index;     // rows * k

  std::vector<int64_t> send_counts() const;    // rows to each rank
  std::vector<int64_t> return_counts() const;  // output rows back from each rank
};

// The plan of `rows` rows routed to chosen (rows x k expert ids) in `layer` under `placement`; an Error naming the
// row when an id is not an expert of the layer.
DispatchPlan plan_dispatch(int64_t rows, int k, std::span<const int> chosen, const ExpertPlacement& placement,
                           int layer);

// The receive side: from the metadata of the rows received (k ints each, in arrival order), the pairs to run,
// row by row and slot by slot: pair_row indexes the received rows. source_offset[s] .. source_offset[s + 1] are
// the pairs of the rows rank s sent, which go back to s in that order.
struct ReceivedPairs {
  std::vector<int64_t> pair_row;
  std::vector<int> pair_expert;
  std::vector<int64_t> source_offset;  // ranks + 1

  std::vector<int64_t> return_counts() const;  // output rows to each source rank
};

// recv_rows[s]: rows received from rank s. An Error when the metadata names an expert this rank does not own in
// `layer`, or a row carries no expert (the sender's plan and this rank's placement disagree).
ReceivedPairs received_pairs(std::span<const int64_t> recv_rows, int k, std::span<const int32_t> meta,
                             const ExpertPlacement& placement, int layer, int rank);

// The rows [begin, end) of `m` that rank `rank` of `ranks` dispatches and combines when every rank holds the same
// batch (attention replicated): consecutive shards, the first m % ranks one row longer.
struct RowShard {
  int64_t begin = 0, end = 0;
};
RowShard row_shard(int64_t m, int rank, int ranks);

// One MoE layer's exchange on rank `rank` when every rank holds the same batch and the same routes (attention and
// router replicated): its shard's dispatch plan, and what it will receive from each rank, worked out from the
// routes alone, since every rank can compute every other rank's plan. No counts or metadata need to travel, only
// rows and outputs: the same plans as exchanging them (the same functions compute both).
struct ReplicatedExchange {
  RowShard shard;
  DispatchPlan plan;               // the shard's rows, indices relative to shard.begin
  std::vector<int64_t> recv_rows;  // rows received from each rank
  ReceivedPairs pairs;
};
ReplicatedExchange replicated_exchange(int64_t M, int k, std::span<const int> chosen, const ExpertPlacement& placement,
                                       int layer, int rank);

}  // namespace seedling
