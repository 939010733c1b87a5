// cuda/seed_search.cpp - seed_search_slice_cuda (cuda/seed_search.h): the CPU search's plan, the device's keys, the
// CPU's recovery of each winner.
#include "cuda/seed_search.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "codec/codec.h"
#include "core/error.h"
#include "cuda/seeds.h"

namespace seedling::cuda {

namespace {

// A device buffer freed on every path out.
template <typename T>
struct DeviceBuffer {
  T* p = nullptr;
  explicit DeviceBuffer(size_t n) {
    check(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)), "seed search: cudaMalloc");
  }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

}  // namespace

seed::SeedSearchResult seed_search_slice_cuda(seed::SeedTier t, const float* w, int64_t rows, int64_t cols,
                                              const float* h, uint32_t n_seeds) {
  const int C = seed::seed_tier_spec(t).block;
  const seed::SeedSearchPlan plan = seed::plan_seed_search(t, w, rows, cols, h, n_seeds);
  seed::SeedSearchResult res;
  res.exp_bias = plan.exp_bias;
  res.blocks.assign(size_t(seed::seed_slice_layout(t, rows, cols).n_blocks), seed::SeedBlock{});
  size_t most = 0;
  for (const auto& g : plan.groups) most = std::max(most, g.blocks.size());
  DeviceBuffer<float> dx{most * size_t(C)}, dh{size_t(C)};
  DeviceBuffer<unsigned long long> dkeys(most);
  std::vector<float> xg(most * size_t(C));
  std::vector<unsigned long long> keys(most);
  for (const auto& g : plan.groups) {
    const size_t n = g.blocks.size();
    for (size_t k = 0; k < n; ++k) {
      std::memcpy(&xg[k * size_t(C)], &plan.xpad[size_t(g.blocks[k]) * size_t(C)], sizeof(float) * size_t(C));
    }
    check(cudaMemcpy(dx.p, xg.data(), n * size_t(C) * sizeof(float), cudaMemcpyHostToDevice), "seed search: blocks");
    check(cudaMemcpy(dh.p, g.h.data(), size_t(C) * sizeof(float), cudaMemcpyHostToDevice), "seed search: energies");
    constexpr size_t kLaunch = size_t(65535) * 32;  // blocks one launch covers (its grid's y is at most 65535)
    for (size_t a = 0; a < n; a += kLaunch) {
      seed_search_blocks(seed_tier_codec(t), dx.p + a * size_t(C), int64_t(std::min(kLaunch, n - a)), dh.p,
                         plan.exp_bias, plan.exp_bias + 15, n_seeds, dkeys.p + a, nullptr);
    }
    check(cudaMemcpy(keys.data(), dkeys.p, n * sizeof(unsigned long long), cudaMemcpyDeviceToHost),
          "seed search: keys");
    for (size_t k = 0; k < n; ++k) {
      if (keys[k] == ~0ull) continue;  // no seed scored finite: the reference's default block
      const uint32_t low = uint32_t(keys[k] & 0xFFFFFFFFu), err_bits = uint32_t(keys[k] >> 32);
      float err;
      res.blocks[size_t(g.blocks[k])] =
          seed::recover_seed_block(t, &xg[k * size_t(C)], g.h.data(), plan.exp_bias, low >> 2, int(low & 3), &err);
      uint32_t host_bits;
      std::memcpy(&host_bits, &err, 4);
      SEEDLING_CHECK(host_bits == err_bits, "CUDA seed search: seed {}'s error {:a} on the device, {:a} on the CPU",
                     (low >> 2) + 1, std::bit_cast<float>(err_bits), err);
    }
  }
  return res;
}

}  // namespace seedling::cuda
