// Eviction order of the slot cache by hand, and the cache simulator against the real streamed provider.
#include "experts/cache_sim.h"

#include <gtest/gtest.h>

#include <random>

#include "experts/route_trace.h"
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

TEST(SlotCache, AdmitInstallsAheadOfUseWithoutCountingOne) {
  ExpertSlotCache c(2, EvictionPolicy::lru);
  touch(c, 1);
  touch(c, 2);
  const auto a = c.admit(3);  // a prefetch: evicts the least recent (1), counts nothing
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->evicted, std::optional<uint64_t>(1));
  EXPECT_EQ(c.pins(a->slot), 0);
  EXPECT_FALSE(c.admit(3).has_value());  // resident already
  EXPECT_EQ(c.hits(), 0u);
  EXPECT_EQ(c.misses(), 2u);
  EXPECT_EQ(touch(c, 3), -1);  // its use is a hit
  EXPECT_EQ(c.hits(), 1u);
  const auto p2 = c.access(2), p3 = c.access(3);
  EXPECT_FALSE(c.admit(4).has_value());  // every slot pinned
  c.unpin(p2->slot);
  c.unpin(p3->slot);

  // lfu: a guess that was never used has no uses, so it is the first victim.
  ExpertSlotCache f(2, EvictionPolicy::lfu);
  touch(f, 1);
  ASSERT_TRUE(f.admit(2).has_value());
  EXPECT_EQ(touch(f, 3), 2);
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
          if (slots >= 30) {  // below that, LRU can thrash: 3 layers x 4 experts cycle through 12 slots
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
  // At most one miss a step admitted (all six accesses are one step): 1 is copied in, 2 and 3 are read in place and
  // leave the cache as it was, so both later uses of 1 hit: m h m m h after the first -> 2 hits, 4 misses, 1 copy.
  const CacheSimResult capped = simulate_cache(g, 2, EvictionPolicy::lru, false, 1);
  EXPECT_EQ(capped.hits, 2u);
  EXPECT_EQ(capped.misses, 4u);
  EXPECT_EQ(capped.admitted, 1u);
  EXPECT_EQ(capped.steps, 1u);
  // One step per access: the cap resets each step, so it admits every miss, as uncapped LRU.
  for (size_t i = 0; i < g.size(); ++i) g[i].step = int64_t(i);
  const CacheSimResult per_step = simulate_cache(g, 2, EvictionPolicy::lru, false, 1);
  EXPECT_EQ(per_step.hits, 1u);
  EXPECT_EQ(per_step.admitted, per_step.misses);
  EXPECT_EQ(per_step.steps, 6u);
}

}  // namespace
}  // namespace seedling

namespace seedling {
namespace {

std::string read_text(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  std::string s;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  std::fclose(f);
  return s;
}

TEST(RouteTrace, WriterNumbersTokensAndStepsAsForwardReportsThem) {
  const std::string path = test::temp_dir("/tmp", "trace") + ".csv";
  {
    RouteTraceWriter w(path);
    const std::vector<int> ids = {5, 1};
    const std::vector<float> wt = {0.75f, 0.25f};
    // Step 0: a prefill of 2 rows over layers 0 and 2 (layer 1 has no experts). Step 1 and 2: one row each.
    for (int layer : {0, 2}) {
      for (int row : {0, 1}) w.on_route(layer, row, ids, wt);
    }
    for (int step = 0; step < 2; ++step) {
      for (int layer : {0, 2}) w.on_route(layer, 0, ids, wt);
    }
    w.close();
  }
  EXPECT_EQ(read_text(path),
            "token_index,layer,expert_ids,weights,step\n"
            "0,0,5 1,0.75 0.25,0\n1,0,5 1,0.75 0.25,0\n"
            "0,2,5 1,0.75 0.25,0\n1,2,5 1,0.75 0.25,0\n"
            "2,0,5 1,0.75 0.25,1\n2,2,5 1,0.75 0.25,1\n"
            "3,0,5 1,0.75 0.25,2\n3,2,5 1,0.75 0.25,2\n");
  const auto records = read_route_trace(path);
  ASSERT_EQ(records.size(), 8u);
  EXPECT_EQ(records[3].token, 1);
  EXPECT_EQ(records[3].layer, 2);
  EXPECT_EQ(records[3].experts, (std::vector<int>{5, 1}));
  EXPECT_FLOAT_EQ(records[3].weights[0], 0.75f);
  // One MoE block per (step, layer): the prefill's two rows share a block.
  const auto groups = access_groups(records);
  ASSERT_EQ(groups.size(), 6u);
  EXPECT_EQ(groups[0].experts, (std::vector<int>{1, 5}));
  std::remove(path.c_str());
}

TEST(RouteTrace, ReadsTransformersTracesPlainAndGzipped) {
  // tools/record_route_trace.py's columns: token_id instead of step, so every token is its own block.
  const std::string path = test::temp_dir("/tmp", "hf-trace") + ".csv";
  std::FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(
      "token_index,layer,expert_ids,weights,token_id\n0,0,3 1,0.6 0.4,17\n0,1,2 0,0.5 0.5,17\n"
      "1,0,3 2,0.7 0.3,9\n",
      f);
  std::fclose(f);
  ASSERT_EQ(std::system(("gzip -kf '" + path + "'").c_str()), 0);
  for (const std::string& p : {path, path + ".gz"}) {
    const auto r = read_route_trace(p);
    ASSERT_EQ(r.size(), 3u) << p;
    EXPECT_EQ(r[2].step, 1);
    EXPECT_EQ(r[1].experts, (std::vector<int>{2, 0}));
    EXPECT_EQ(access_groups(r).size(), 3u);
  }
  f = std::fopen(path.c_str(), "w");
  std::fputs("token_index,layer,expert_ids\n0,0,3 x\n", f);
  std::fclose(f);
  try {
    read_route_trace(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_route_trace(path + ".missing"), Error);
  std::remove(path.c_str());
  std::remove((path + ".gz").c_str());
}

}  // namespace
}  // namespace seedling
