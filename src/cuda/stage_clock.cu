// cuda/stage_clock.cu - stage_clock_reset and stage_clock_report (kernels.h) over every translation unit's sums
// (stage_clock.cuh); in a build without SEEDLING_STAGE_CLOCK they do nothing.
#include <cstdio>
#include <string>

#include "cuda/stage_clock.cuh"

namespace seedling::cuda {

#ifdef SEEDLING_STAGE_CLOCK
namespace {
constexpr int kMaxStageClockUnits = 16;
struct StageClockUnits {
  StageClockSums units[kMaxStageClockUnits];
  int count = 0;
};
// Filled before main by the translation units' registrations, so a function's static (no order between files).
StageClockUnits& stage_clock_units() {
  static StageClockUnits u;
  return u;
}
}  // namespace

bool register_stage_clock(const StageClockSums& s) {
  StageClockUnits& u = stage_clock_units();
  check(u.count < kMaxStageClockUnits ? cudaSuccess : cudaErrorInvalidValue, "stage clock: too many units");
  u.units[u.count++] = s;
  return true;
}
#endif

void stage_clock_reset(cudaStream_t stream) {
#ifdef SEEDLING_STAGE_CLOCK
  const StageClockUnits& u = stage_clock_units();
  for (int i = 0; i < u.count; ++i) u.units[i].reset(stream);
  check(cudaStreamSynchronize(stream), "stage clock");
#else
  (void)stream;
#endif
}

std::string stage_clock_report() {
#ifdef SEEDLING_STAGE_CLOCK
  unsigned long long sum[kClkKinds][kClkMarks] = {}, blocks[kClkKinds] = {};
  const StageClockUnits& u = stage_clock_units();
  for (int i = 0; i < u.count; ++i) u.units[i].add(sum, blocks);
  int dev = 0, khz = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev), "reading the SM clock");
  static const char* const kNames[kClkKinds] = {"q/k/v", "o", "router", "head", "attention", "gate/up", "down"};
  std::string out = "stage clock, us a block from its start at " + std::to_string(khz / 1000) +
                    " MHz (marks: waited, operands, main loop, end):\n";
  for (int k = 0; k < kClkKinds; ++k) {
    if (blocks[k] == 0) continue;
    char line[256];
    const double us = 1e3 / double(khz) / double(blocks[k]);
    std::snprintf(line, sizeof(line), "  %-9s %10llu blocks: %7.2f %7.2f %7.2f %7.2f\n", kNames[k], blocks[k],
                  double(sum[k][0]) * us, double(sum[k][1]) * us, double(sum[k][2]) * us, double(sum[k][3]) * us);
    out += line;
  }
  return out;
#else
  return "";
#endif
}

}  // namespace seedling::cuda
