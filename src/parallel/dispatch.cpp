// parallel/dispatch.cpp - dispatch and combine plans: which rows go where, and where their outputs come back.
#include "parallel/dispatch.h"

#include <algorithm>

#include "core/error.h"

namespace seedling {

namespace {

std::vector<int64_t> counts_of(const std::vector<int64_t>& offset) {
  std::vector<int64_t> c(offset.empty() ? 0 : offset.size() - 1);
  for (size_t d = 0; d < c.size(); ++d) c[d] = offset[d + 1] - offset[d];
  return c;
}

}  // namespace

std::vector<int64_t> DispatchPlan::send_counts() const {
  return counts_of(send_offset);
}

std::vector<int64_t> DispatchPlan::return_counts() const {
  return counts_of(return_offset);
}

std::vector<int64_t> ReceivedPairs::return_counts() const {
  return counts_of(source_offset);
}

DispatchPlan plan_dispatch(int64_t rows, int k, std::span<const int> chosen, const ExpertPlacement& placement,
                           int layer) {
  const int R = placement.ranks;
  if (layer < 0 || size_t(layer) >= placement.owner.size() || placement.owner[size_t(layer)].empty()) {
    fail("dispatch: layer {} has no routed experts in the placement", layer);
  }
  const std::vector<int>& owner = placement.owner[size_t(layer)];
  const int E = int(owner.size());
  if (chosen.size() != size_t(rows * k)) fail("dispatch: {} expert ids for {} rows of top-{}", chosen.size(), rows, k);
  DispatchPlan p;
  p.ranks = R;
  p.k = k;
  p.rows = rows;
  // Each slot's rank, checked once.
  std::vector<int> slot_rank(chosen.size());
  for (size_t j = 0; j < chosen.size(); ++j) {
    const int e = chosen[j];
    if (e < 0 || e >= E)
      fail("dispatch: row {} of layer {} chose expert {}; the layer has {}", j / size_t(k), layer, e, E);
    slot_rank[j] = owner[size_t(e)];
  }
  p.send_offset.assign(size_t(R) + 1, 0);
  p.return_offset.assign(size_t(R) + 1, 0);
  p.pair_index.assign(size_t(rows * k), -1);
  int64_t returned = 0;
  for (int d = 0; d < R; ++d) {
    for (int64_t i = 0; i < rows; ++i) {
      bool sent = false;
      for (int s = 0; s < k; ++s) {
        const size_t j = size_t(i * k + s);
        if (slot_rank[j] != d) continue;
        if (!sent) {  // the row once, with the slots that live on d
          sent = true;
          p.send_row.push_back(i);
          p.send_meta.resize(p.send_meta.size() + size_t(k), -1);
        }
        p.send_meta[p.send_meta.size() - size_t(k) + size_t(s)] = chosen[j];
        p.pair_index[j] = returned++;
      }
    }
    p.send_offset[size_t(d) + 1] = int64_t(p.send_row.size());
    p.return_offset[size_t(d) + 1] = returned;
  }
  return p;
}

ReceivedPairs received_pairs(std::span<const int64_t> recv_rows, int k, std::span<const int32_t> meta,
                             const ExpertPlacement& placement, int layer, int rank) {
  const std::vector<int>& owner = placement.owner.at(size_t(layer));
  const int E = int(owner.size());
  ReceivedPairs r;
  r.source_offset.assign(recv_rows.size() + 1, 0);
  int64_t row = 0;
  for (size_t s = 0; s < recv_rows.size(); ++s) {
    for (int64_t n = 0; n < recv_rows[s]; ++n, ++row) {
      if (meta.size() < size_t((row + 1) * k)) fail("dispatch: rank {} received rows without their metadata", rank);
      bool any = false;
      for (int slot = 0; slot < k; ++slot) {
        const int e = meta[size_t(row * k + slot)];
        if (e < 0) continue;
        if (e >= E || owner[size_t(e)] != rank) {
          fail("dispatch: rank {} was sent expert {} of layer {}, which it does not own (rank {} sent it)", rank, e,
               layer, s);
        }
        any = true;
        r.pair_row.push_back(row);
        r.pair_expert.push_back(e);
      }
      if (!any) fail("dispatch: rank {} was sent a row with no expert of its own from rank {}", rank, s);
    }
    r.source_offset[s + 1] = int64_t(r.pair_row.size());
  }
  if (meta.size() != size_t(row * k)) fail("dispatch: rank {} received metadata for other rows than it got", rank);
  return r;
}

RowShard row_shard(int64_t m, int rank, int ranks) {
  const int64_t base = m / ranks, extra = m % ranks;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

ReplicatedExchange replicated_exchange(int64_t M, int k, std::span<const int> chosen, const ExpertPlacement& placement,
                                       int layer, int rank) {
  const int R = placement.ranks;
  if (chosen.size() != size_t(M * k)) fail("dispatch: {} expert ids for {} rows of top-{}", chosen.size(), M, k);
  ReplicatedExchange x;
  x.recv_rows.assign(size_t(R), 0);
  std::vector<int32_t> meta;
  for (int s = 0; s < R; ++s) {
    const RowShard shard = row_shard(M, s, R);
    DispatchPlan p =
        plan_dispatch(shard.end - shard.begin, k,
                      chosen.subspan(size_t(shard.begin * k), size_t((shard.end - shard.begin) * k)), placement, layer);
    const int64_t first = p.send_offset[size_t(rank)], last = p.send_offset[size_t(rank) + 1];
    x.recv_rows[size_t(s)] = last - first;
    meta.insert(meta.end(), p.send_meta.begin() + first * k, p.send_meta.begin() + last * k);
    if (s == rank) {
      x.shard = shard;
      x.plan = std::move(p);
    }
  }
  x.pairs = received_pairs(x.recv_rows, k, meta, placement, layer, rank);
  return x;
}

}  // namespace seedling
