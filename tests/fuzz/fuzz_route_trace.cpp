// Fuzz target: the route-trace CSV (experts/route_trace.h, docs/formats/route-trace.md). Each input is written as a
// .csv file, read, and replayed against the shape of tests/data/models/qwen3_moe_a (3 layers, experts in layers 0 and
// 2, 8 experts, top-2): the replay hands out every record in order, asked for the layer the record names. Any input
// must end in routes or a seedling::Error, never a crash, leak, hang or sanitizer report. Built and run by
// tests/cli/fuzz_route_trace.sh.
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "experts/route_trace.h"
#include "fuzz_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = seedling::fuzz::write_file("trace.csv", seedling::fuzz::as_text(data, size));
  constexpr int kExperts = 8, kTopK = 2;
  static constexpr std::array<uint8_t, 3> kLayerHasExperts = {1, 0, 1};
  try {
    const std::vector<seedling::RouteRecord> records = seedling::read_route_trace(path);
    seedling::RouteReplay replay(path, kLayerHasExperts, kExperts, kTopK);
    if (replay.size() != records.size()) std::abort();
    std::array<int, kTopK> experts{};
    std::array<float, kTopK> weights{};
    for (const seedling::RouteRecord& r : records) {
      replay.route(r.layer, 0, experts, weights);
      for (int e : experts) {
        if (e < 0 || e >= kExperts) std::abort();
      }
      for (float w : weights) {
        if (!std::isfinite(w)) std::abort();  // a NaN weight would make every logit NaN
      }
    }
    if (replay.used() != records.size()) std::abort();
  } catch (const seedling::Error&) {
  }
  return 0;
}
