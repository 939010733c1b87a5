// parallel/placement.cpp - the expert placement planner: greedy by load (longest first), capped by bytes.
//
// Longest-processing-time first is within 4/3 of the best balance for identical ranks and needs no search, so every
// rank computes the same answer in microseconds. The cap of ceil(E / R) experts a rank per layer keeps the bytes
// even (a layer's experts are the same size), which the budgets of identical GPUs want; it gives way only where a
// budget leaves no other rank.
#include "parallel/placement.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace seedling {

namespace {

double gb(uint64_t b) {
  return double(b) / 1e9;
}

std::string rank_fill(const std::vector<uint64_t>& used, const std::vector<uint64_t>& budget) {
  std::string s;
  for (size_t r = 0; r < used.size(); ++r) {
    s += fmt::format("{}rank {} {:.3f} of {:.3f} GB", r ? ", " : "", r, gb(used[r]), gb(budget[r]));
  }
  return s;
}

}  // namespace

std::vector<int> ExpertPlacement::experts_of(int layer, int rank) const {
  std::vector<int> out;
  const std::vector<int>& row = owner[size_t(layer)];
  for (size_t e = 0; e < row.size(); ++e) {
    if (row[e] == rank) out.push_back(int(e));
  }
  return out;
}

double ExpertPlacement::imbalance(int layer) const {
  const std::vector<uint64_t>& l = rank_load[size_t(layer)];
  const uint64_t total = std::accumulate(l.begin(), l.end(), uint64_t(0));
  if (l.empty() || total == 0) return 1.0;
  return double(*std::max_element(l.begin(), l.end())) * double(l.size()) / double(total);
}

ExpertPlacement plan_placement(const PlacementInput& in) {
  const int R = in.ranks, E = in.num_experts;
  const size_t L = in.layer_has_experts.size();
  if (R < 1) fail("expert placement: {} ranks (at least 1)", R);
  if (E < 1) fail("expert placement: the model has no routed experts");
  if (in.expert_bytes.size() != L) fail("expert placement: {} expert sizes for {} layers", in.expert_bytes.size(), L);
  if (!in.load.empty() && in.load.size() != L)
    fail("expert placement: load of {} layers for {} layers", in.load.size(), L);
  if (!in.rank_budget.empty() && in.rank_budget.size() != size_t(R)) {
    fail("expert placement: {} budgets for {} ranks", in.rank_budget.size(), R);
  }
  const std::vector<uint64_t> budget =
      in.rank_budget.empty() ? std::vector<uint64_t>(size_t(R), UINT64_MAX) : in.rank_budget;
  if (!in.rank_budget.empty()) {
    uint64_t need = 0, have = 0;
    for (size_t l = 0; l < L; ++l) need += in.layer_has_experts[l] ? in.expert_bytes[l] * uint64_t(E) : 0;
    for (uint64_t b : budget) have += b;
    if (need > have) {
      fail("expert placement: the routed experts need {:.3f} GB, the {} ranks' budgets add up to {:.3f} GB", gb(need),
           R, gb(have));
    }
  }
  ExpertPlacement p;
  p.ranks = R;
  p.owner.resize(L);
  p.rank_bytes.assign(size_t(R), 0);
  p.rank_load.assign(L, std::vector<uint64_t>(size_t(R), 0));
  const int cap = (E + R - 1) / R;
  for (size_t l = 0; l < L; ++l) {
    if (!in.layer_has_experts[l]) continue;
    const bool measured = !in.load.empty() && !in.load[l].empty();
    if (measured && in.load[l].size() != size_t(E)) {
      fail("expert placement: layer {} has load for {} experts, the model {}", l, in.load[l].size(), E);
    }
    std::vector<uint64_t> load(size_t(E), 1);  // unmeasured: all alike, which spreads them evenly
    if (measured) load = in.load[l];
    std::vector<int> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return load[size_t(a)] > load[size_t(b)]; });
    const uint64_t bytes = in.expert_bytes[l];
    std::vector<int> count(size_t(R), 0);
    std::vector<uint64_t>& rank_load = p.rank_load[l];
    p.owner[l].assign(size_t(E), -1);
    for (int e : order) {
      // The best rank with room: least load in this layer, then fewest bytes overall, then the lowest index.
      const auto pick = [&](bool capped) {
        int best = -1;
        for (int r = 0; r < R; ++r) {
          if (capped && count[size_t(r)] >= cap) continue;
          if (budget[size_t(r)] - p.rank_bytes[size_t(r)] < bytes) continue;
          if (best < 0 || rank_load[size_t(r)] < rank_load[size_t(best)] ||
              (rank_load[size_t(r)] == rank_load[size_t(best)] &&
               p.rank_bytes[size_t(r)] < p.rank_bytes[size_t(best)])) {
            best = r;
          }
        }
        return best;
      };
      int r = pick(true);
      if (r < 0) r = pick(false);
      if (r < 0) {
        fail("expert placement: expert {} of layer {} ({:.1f} MB) fits on no rank: {}", e, l, double(bytes) / 1e6,
             rank_fill(p.rank_bytes, budget));
      }
      p.owner[l][size_t(e)] = r;
      ++count[size_t(r)];
      rank_load[size_t(r)] += measured ? load[size_t(e)] : 1;
      p.rank_bytes[size_t(r)] += bytes;
    }
  }
  return p;
}

std::vector<std::vector<uint64_t>> expert_load_from_trace(const std::vector<RouteRecord>& records,
                                                          const std::vector<uint8_t>& layer_has_experts,
                                                          int num_experts) {
  std::vector<std::vector<uint64_t>> load(layer_has_experts.size());
  for (size_t l = 0; l < load.size(); ++l) {
    if (layer_has_experts[l]) load[l].assign(size_t(num_experts), 0);
  }
  for (const RouteRecord& r : records) {
    if (r.layer < 0 || size_t(r.layer) >= load.size() || load[size_t(r.layer)].empty()) {
      fail("route trace: token {} names layer {}, which has no routed experts in this model", r.token, r.layer);
    }
    for (int e : r.experts) {
      if (e < 0 || e >= num_experts) {
        fail("route trace: token {} in layer {} names expert {}; the model has {}", r.token, r.layer, e, num_experts);
      }
      ++load[size_t(r.layer)][size_t(e)];
    }
  }
  return load;
}

std::string describe_placement(const ExpertPlacement& p, const PlacementInput& in) {
  std::string s = "expert placement:";
  for (int r = 0; r < p.ranks; ++r) {
    s += fmt::format(" rank {} {:.3f}", r, gb(p.rank_bytes[size_t(r)]));
    if (!in.rank_budget.empty()) s += fmt::format(" of {:.3f}", gb(in.rank_budget[size_t(r)]));
    s += " GB";
    s += r + 1 < p.ranks ? "," : "";
  }
  double worst = 1.0;
  int worst_layer = -1;
  for (size_t l = 0; l < p.owner.size(); ++l) {
    if (p.owner[l].empty()) continue;
    const double v = p.imbalance(int(l));
    if (worst_layer < 0 || v > worst) worst = v, worst_layer = int(l);
  }
  const bool measured = !in.load.empty();
  if (worst_layer >= 0) {
    s += fmt::format("; busiest rank / mean {}: {:.3f} (layer {})", measured ? "load" : "experts", worst, worst_layer);
  }
  return s + "\n";
}

}  // namespace seedling
