// Eviction order of the slot cache by hand, and the cache simulator against the real streamed provider.
#include <gtest/gtest.h>

#include <random>

#include "experts/cache_sim.h"
#include "experts/slot_cache.h"
#include "streamed_test_util.h"

namespace seedling {
namespace {

// Accesses `key` and releases it at once; returns the evicted key or -1.
int64_t touch(ExpertSlotCache& c, uint64_t key) {
  const auto a = c.access(key);
  EXPECT_TRUE(a.has_value());
  c.unpin(a->slot);
  return a->evicted ? int64_t(*a->evicted) : -1;
}

TEST(SlotCache, LruEvictsTheLeastRecentlyUsed) {
  ExpertSlotCache c(3, EvictionPolicy::lru);
  EXPECT_EQ(touch(c, 1), -1);
  EXPECT_EQ(touch(c, 2), -1);
  EXPECT_EQ(touch(c, 3), -1);
  EXPECT_EQ(touch(c, 1), -1);  // hit: 1 is now the most recent
  EXPECT_EQ(touch(c, 4), 2);
  EXPECT_EQ(touch(c, 5), 3);
  EXPECT_EQ(touch(c, 6), 1);
  EXPECT_EQ(c.hits(), 1u);
  EXPECT_EQ(c.misses(), 6u);
}

TEST(SlotCache, LfuEvictsTheFewestLifetimeUsesThenTheLeastRecent) {
  ExpertSlotCache c(3, EvictionPolicy::lfu);
  for (uint64_t k : {1, 1, 1, 2, 3, 3}) touch(c, k);  // uses: 1 x3, 2 x1, 3 x2
  EXPECT_EQ(touch(c, 4), 2);                          // fewest uses
  EXPECT_EQ(touch(c, 5), 4);                          // 4 and 5's predecessor: 4 has 1 use
  touch(c, 5);                                        // 5: 2 uses, as many as 3, and more recent
  EXPECT_EQ(touch(c, 6), 3);                          // tie at 2 uses: 3 is older than 5
  // Counts survive eviction: 2 comes back with 2 uses and outlives 6 (1 use).
  EXPECT_EQ(touch(c, 2), 6);
  EXPECT_EQ(touch(c, 7), 5);  // 5 and 2 both have 2 uses, 5 is older
}

TEST(SlotCache, PinnedSlotsAreNeverVictims) {
  ExpertSlotCache c(2, EvictionPolicy::lru);
  const auto a = c.access(1);
  touch(c, 2);
  EXPECT_EQ(touch(c, 3), 2);  // 1 is older but pinned
  c.access(3);
  EXPECT_FALSE(c.access(4).has_value());  // both pinned
  EXPECT_EQ(c.misses(), 3u);              // the refused access counted nothing
  c.unpin(a->slot);
  EXPECT_EQ(touch(c, 4), 1);
}

std::vector<ExpertAccessGroup> random_groups(uint32_t seed, int n, int layers, int experts, int topk, int rows = 1) {
  std::mt19937 rng(seed);
  // Skewed choice, as routers are: expert popularity ~ 1 / (rank + 1).
  std::vector<double> w(static_cast<size_t>(experts));
  for (int e = 0; e < experts; ++e) w[size_t(e)] = 1.0 / (e + 1);
  std::discrete_distribution<int> pick(w.begin(), w.end());
  std::vector<ExpertAccessGroup> out;
  for (int t = 0; t < n; ++t) {
    for (int l = 0; l < layers; ++l) {
      ExpertAccessGroup g{l, {}};
      for (int r = 0; r < rows; ++r) {
        std::vector<int> row;
        while (int(row.size()) < topk) {
          const int e = (pick(rng) + 7 * l) % experts;
          if (std::find(row.begin(), row.end(), e) == row.end()) row.push_back(e);
        }
        g.experts.insert(g.experts.end(), row.begin(), row.end());
      }
      std::sort(g.experts.begin(), g.experts.end());
      g.experts.erase(std::unique(g.experts.begin(), g.experts.end()), g.experts.end());
      out.push_back(g);
    }
  }
  return out;
}

// Drives the real provider as Model::moe does: optionally prefetch the block's experts, then acquire, compute,
// release each in ascending order.
ExpertStats run_real(const test::BlobFiles& files, const std::vector<ExpertAccessGroup>& groups, int slots,
                     EvictionPolicy p, bool prefetch) {
  StreamedOptions o;
  o.slots = slots;
  o.policy = p;
  o.min_slots = 4;
  StreamedExperts x(files.where, test::view_blob(), test::check_xxh64(), o);
  for (const auto& g : groups) {
    if (prefetch) x.prefetch(g.layer, g.experts);
    for (int e : g.experts) {
      EXPECT_TRUE(test::holds(x.acquire(g.layer, e), g.layer, e));
      x.release(g.layer, e);
    }
  }
  return x.stats();
}

TEST(CacheSim, ReproducesTheRealCachesHitsAndMissesExactly) {
  const auto files = test::write_blob_files(test::temp_dir("/tmp", "sim-vs-real"), 3, 16);
  // Single-row blocks (decode) and four-row blocks (prefill, unions larger than the smallest caches).
  for (int rows : {1, 4}) {
    const auto groups = random_groups(11 + uint32_t(rows), 120, 3, 16, 4, rows);
    for (EvictionPolicy p : {EvictionPolicy::lru, EvictionPolicy::lfu}) {
      for (int slots : {4, 7, 12, 30}) {
        for (bool prefetch : {true, false}) {
          const ExpertStats real = run_real(files, groups, slots, p, prefetch);
          const CacheSimResult sim = simulate_cache(groups, slots, p, prefetch);
          EXPECT_EQ(sim.hits, real.hits) << policy_name(p) << " slots " << slots << " rows " << rows;
          EXPECT_EQ(sim.misses, real.misses) << policy_name(p) << " slots " << slots << " rows " << rows;
          if (slots >= 12) {  // below that, three layers of four experts thrash every slot
            EXPECT_GT(sim.hits, 0u);
          }
          EXPECT_GT(sim.misses, 0u);
        }
      }
    }
  }
}

TEST(CacheSim, BeladyIsNeverBeatenOnRandomTraces) {
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    const auto groups = random_groups(seed, 300, 4, 32, 4);
    for (int slots : {4, 8, 16, 48, 100}) {
      const double belady = simulate_cache(groups, slots, EvictionPolicy::belady).hit_rate();
      EXPECT_GE(belady, simulate_cache(groups, slots, EvictionPolicy::lru).hit_rate()) << seed << " " << slots;
      EXPECT_GE(belady, simulate_cache(groups, slots, EvictionPolicy::lfu).hit_rate()) << seed << " " << slots;
    }
  }
}

TEST(CacheSim, HandTraceCountsAsWorkedOut) {
  // One layer, slots 2, no prefetch. Accesses 1 2 1 3 2 1:
  //   lru:    m m h m(evict 2) m(evict 1) m(evict 3)      -> 1 hit
  //   belady: m m h m(evict 1: next use furthest) h m     -> 2 hits, the optimum
  std::vector<ExpertAccessGroup> g;
  for (int e : {1, 2, 1, 3, 2, 1}) g.push_back({0, {e}});
  EXPECT_EQ(simulate_cache(g, 2, EvictionPolicy::lru, false).hits, 1u);
  EXPECT_EQ(simulate_cache(g, 2, EvictionPolicy::belady, false).hits, 2u);
  // Enough slots for every expert: only first uses miss.
  EXPECT_EQ(simulate_cache(g, 3, EvictionPolicy::lru).misses, 3u);
}

}  // namespace
}  // namespace seedling
