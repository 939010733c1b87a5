// Fuzz target: the route-trace CSV (experts/route_trace.h, docs/formats/route-trace.md). Each input is written as a
// .csv file, read, and replayed against the shape of tests/data/models/qwen3_moe_a (3 layers, experts in layers 0 and
// 2, 8 experts, top-2), token by token as a decode asks: a trace with a route for every token up to its last and both
// expert layers hands out every record, and one with a gap stops at it with an Error. Any input
// must end in routes or a seedling::Error, never a crash, leak, hang or sanitizer report. Built and run by
// tests/cli/fuzz_route_trace.sh.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <vector>

#include "core/error.h"
#include "experts/route_trace.h"
#include "fuzz_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = seedling::fuzz::write_file("trace.csv", seedling::fuzz::as_text(data, size));
  constexpr int kExperts = 8, kTopK = 2;
  static constexpr std::array<uint8_t, 3> kLayerHasExperts = {1, 0, 1};
  std::vector<seedling::RouteRecord> records;
  std::optional<seedling::RouteReplay> replay;
  try {
    records = seedling::read_route_trace(path);
    replay.emplace(path, kLayerHasExperts, kExperts, kTopK);
  } catch (const seedling::Error&) {
    return 0;
  }
  if (replay->size() != records.size()) std::abort();
  // Keys (token, layer) are unique and layers are 0 or 2: the trace is complete when it has both layers of every
  // token up to its last.
  int64_t last = 0;
  for (const seedling::RouteRecord& r : records) last = std::max(last, r.token);
  const bool complete = records.size() == size_t(2 * (last + 1));
  std::array<int, kTopK> experts{};
  std::array<float, kTopK> weights{};
  int64_t token = 0;
  try {
    for (; token <= last + 1; ++token) {
      for (int layer : {0, 2}) {
        replay->route(layer, 0, experts, weights);
        for (int e : experts) {
          if (e < 0 || e >= kExperts) std::abort();
        }
        for (float w : weights) {
          if (!std::isfinite(w)) std::abort();  // a NaN weight would make every logit NaN
        }
      }
    }
    std::abort();  // token last + 1 was answered
  } catch (const seedling::Error&) {
    // A complete trace answers every token up to its last and stops at the next; any other stops at its first gap.
    if (complete && (token != last + 1 || replay->used() != records.size())) std::abort();
    if (!complete && token > last) std::abort();
  }
  return 0;
}
