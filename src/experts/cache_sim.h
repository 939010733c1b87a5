// experts/cache_sim.h - replays a route trace through the expert slot cache and counts hits.
//
// The replay makes the accesses Model::moe makes: each step's rows of one layer are one MoE block, which fetches
// the union of their chosen experts once each, in ascending expert id. With `prefetch` (the MoE block calling
// ExpertProvider::prefetch after routing) the block's experts are pinned together up front, as StreamedExperts
// does; without it each is acquired and released alone. Both go through ExpertSlotCache, the streamed
// provider's own bookkeeping, so on the same accesses the simulator and the real cache count the same hits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "experts/route_trace.h"
#include "experts/slot_cache.h"

namespace seedling {

// One MoE block's fetches: a layer and its distinct experts, ascending; the step (decode step or prompt) it is of.
struct ExpertAccessGroup {
  int layer = 0;
  std::vector<int> experts;
  int64_t step = 0;
};

// Consecutive records with the same (step, layer) form one group.
std::vector<ExpertAccessGroup> access_groups(const std::vector<RouteRecord>& trace);

struct CacheSimResult {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t admitted = 0;  // misses copied into a slot (all of them without an admission cap)
  uint64_t steps = 0;
  double hit_rate() const { return hits + misses == 0 ? 0.0 : double(hits) / double(hits + misses); }
};

// With admit_per_step > 0, a step copies at most that many misses into slots; its later misses leave the cache as
// it is (read in place: the VRAM cache's direct reads, which then copy misses after the step), counted as misses.
CacheSimResult simulate_cache(std::span<const ExpertAccessGroup> groups, int slots, EvictionPolicy policy,
                              bool prefetch = true, int admit_per_step = 0);

}  // namespace seedling
