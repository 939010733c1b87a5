// parallel/ep_moe.cpp - dispatch, experts, return, combine, all-gather: one MoE layer on one rank.
#include "parallel/ep_moe.h"

#include <algorithm>

#include "core/error.h"

namespace seedling {

ExpertParallelMoe::ExpertParallelMoe(Model& model, const ExpertPlacement& placement, Transport& transport,
                                     bool from_routes)
    : model_(model), placement_(placement), t_(transport), from_routes_(from_routes) {
  if (placement.ranks != transport.ranks()) {
    fail("expert parallelism: a placement for {} ranks over a transport of {}", placement.ranks, transport.ranks());
  }
  if (placement.owner.size() != size_t(model.config().num_layers)) {
    fail("expert parallelism: a placement of {} layers for a model of {}", placement.owner.size(),
         model.config().num_layers);
  }
}

void ExpertParallelMoe::routed_sum(int layer, int64_t M, const float* xn, const int* chosen, const float* weight,
                                   float* out) {
  const int R = t_.ranks(), rank = t_.rank(), K = model_.config().experts_per_token;
  const int64_t H = model_.config().hidden_size;
  // Dispatch: this rank's rows to the owners of their experts, with each row's slots there.
  ReplicatedExchange x;
  if (from_routes_) {
    x = replicated_exchange(M, K, std::span<const int>(chosen, size_t(M * K)), placement_, layer, rank);
  } else {
    x.shard = row_shard(M, rank, R);
    const int64_t rows = x.shard.end - x.shard.begin;
    x.plan =
        plan_dispatch(rows, K, std::span<const int>(chosen + x.shard.begin * K, size_t(rows * K)), placement_, layer);
    x.recv_rows.assign(static_cast<size_t>(R), 0);
    t_.exchange_counts(x.plan.send_counts(), x.recv_rows);
  }
  const RowShard mine = x.shard;
  const DispatchPlan& plan = x.plan;
  const int64_t m = mine.end - mine.begin;
  const std::vector<int64_t> send_rows = plan.send_counts();
  const std::vector<int64_t>& recv_rows = x.recv_rows;
  const int64_t sent = int64_t(plan.send_row.size());
  int64_t received = 0;
  for (int64_t n : recv_rows) received += n;
  send_.resize(size_t(sent * H));
  for (int64_t r = 0; r < sent; ++r) {
    std::copy_n(xn + (mine.begin + plan.send_row[size_t(r)]) * H, H, send_.data() + r * H);
  }
  recv_.resize(size_t(received * H));
  all_to_all_rows(t_, send_.data(), send_rows, recv_.data(), recv_rows, H);
  if (!from_routes_) {
    meta_.resize(size_t(received * K));
    all_to_all_rows(t_, plan.send_meta.data(), send_rows, meta_.data(), recv_rows, K);
    x.pairs = received_pairs(recv_rows, K, meta_, placement_, layer, rank);
  }
  // This rank's experts on the pairs it was sent; their outputs back in arrival order.
  const ReceivedPairs& pairs = x.pairs;
  outputs_.resize(pairs.pair_row.size() * size_t(H));
  model_.expert_outputs(layer, pairs.pair_row, pairs.pair_expert, recv_.data(), outputs_.data());
  const std::vector<int64_t> back = pairs.return_counts(), expect = plan.return_counts();
  returned_.resize(size_t(plan.return_offset.back() * H));
  all_to_all_rows(t_, outputs_.data(), back, returned_.data(), expect, H);
  // Combine this rank's rows, then every rank's rows to every rank.
  combine_expert_outputs(m, K, H, weight + mine.begin * K, returned_.data(), plan.pair_index.data(),
                         out + mine.begin * H);
  all_gather_shards(t_, out, M, H);
  traffic_ = {sent, int64_t(pairs.pair_row.size()), m * (R - 1)};
}

void all_gather_shards(Transport& t, float* rows, int64_t M, int64_t width) {
  const int R = t.ranks(), rank = t.rank();
  const RowShard mine = row_shard(M, rank, R);
  const size_t ranks = static_cast<size_t>(R);
  std::vector<int64_t> send_count(ranks, (mine.end - mine.begin) * width), send_offset(ranks, 0), recv_count(ranks),
      recv_offset(ranks);
  for (int r = 0; r < R; ++r) {
    const RowShard s = row_shard(M, r, R);
    recv_count[size_t(r)] = (s.end - s.begin) * width;
    recv_offset[size_t(r)] = s.begin * width;
  }
  send_count[size_t(rank)] = recv_count[size_t(rank)] = 0;  // the own shard is in place
  t.all_to_all_v({.send = rows + mine.begin * width,
                  .send_count = send_count,
                  .send_offset = send_offset,
                  .recv = rows,
                  .recv_count = recv_count,
                  .recv_offset = recv_offset,
                  .item_bytes = sizeof(float)});
}

}  // namespace seedling
