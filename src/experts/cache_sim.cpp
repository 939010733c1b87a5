// experts/cache_sim.cpp - trace replay through ExpertSlotCache (see cache_sim.h).
#include "experts/cache_sim.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "core/error.h"

namespace seedling {

std::vector<ExpertAccessGroup> access_groups(const std::vector<RouteRecord>& trace) {
  std::vector<ExpertAccessGroup> out;
  for (size_t i = 0; i < trace.size();) {
    size_t j = i;
    ExpertAccessGroup g;
    g.layer = trace[i].layer;
    g.step = trace[i].step;
    while (j < trace.size() && trace[j].step == trace[i].step && trace[j].layer == trace[i].layer) {
      g.experts.insert(g.experts.end(), trace[j].experts.begin(), trace[j].experts.end());
      ++j;
    }
    std::sort(g.experts.begin(), g.experts.end());
    g.experts.erase(std::unique(g.experts.begin(), g.experts.end()), g.experts.end());
    out.push_back(std::move(g));
    i = j;
  }
  return out;
}

CacheSimResult simulate_cache(std::span<const ExpertAccessGroup> groups, int slots, EvictionPolicy policy,
                              bool prefetch, int admit_per_step) {
  // Flatten to the access sequence, and for each access the position of the same key's next access (belady).
  std::vector<uint64_t> keys;
  for (const auto& g : groups) {
    for (int e : g.experts) keys.push_back(expert_key(g.layer, e));
  }
  std::vector<uint64_t> next(keys.size(), ExpertSlotCache::kNever);
  std::unordered_map<uint64_t, uint64_t> seen;
  for (size_t i = keys.size(); i-- > 0;) {
    if (auto it = seen.find(keys[i]); it != seen.end()) next[i] = it->second;
    seen[keys[i]] = i;
  }

  ExpertSlotCache cache(slots, policy);
  uint64_t left_out = 0, steps = 0;
  int admitted = 0;  // this step's
  // Access i: its pinned slot, -1 for a miss the step's admission cap leaves out, nullopt with every slot pinned.
  const auto fetch = [&](size_t i) -> std::optional<int> {
    if (admit_per_step > 0 && admitted >= admit_per_step && cache.find(keys[i]) < 0) {
      ++left_out;
      return -1;
    }
    const auto a = cache.access(keys[i], next[i]);
    if (!a) return std::nullopt;
    admitted += a->hit ? 0 : 1;
    return a->slot;
  };
  size_t pos = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& g = groups[gi];
    if (gi == 0 || g.step != groups[gi - 1].step) ++steps, admitted = 0;
    const size_t n = g.experts.size();
    std::vector<int> held(n, -2);  // slot pinned by the prefetch for g.experts[k] (-1: left out, -2: not fetched)
    size_t covered = 0;
    if (prefetch) {
      for (; covered < n; ++covered) {
        const auto slot = fetch(pos + covered);
        if (!slot) break;
        held[covered] = *slot;
      }
    }
    for (size_t k = 0; k < n; ++k) {
      int slot = held[k];
      if (slot == -2) {
        const auto a = fetch(pos + k);
        SEEDLING_CHECK(a.has_value(), "cache simulator: no free slot with {} slots", slots);
        slot = *a;
      }
      if (slot >= 0) cache.unpin(slot);
    }
    pos += n;
  }
  return {cache.hits(), cache.misses() + left_out, cache.misses(), steps};
}

}  // namespace seedling
