// cuda/launch.cu - launch.cuh's host functions: the router policy's check, the environment's A/B switches, whether
// programmatic dependent launch is on, and raising a kernel's shared memory limit.
#include <atomic>
#include <cstdlib>
#include <string>

#include "cuda/launch.cuh"

namespace seedling::cuda {

bool env_flag(const char* name) {
  const char* e = std::getenv(name);
  return e != nullptr && e[0] != '\0' && e[0] != '0';
}

void check_route_policy(int64_t e, int k, const RouterPolicy& p, const char* what) {
  const bool groups_ok = p.n_group > 0 && e % p.n_group == 0 && p.topk_group >= 1 && p.topk_group <= p.n_group;
  if (e <= 4096 && k <= e && groups_ok) return;
  check(cudaErrorInvalidValue,
        (std::string(what) + ": at most 4096 experts, k <= experts, n_group dividing them and 1 <= topk_group <= "
                             "n_group")
            .c_str());
}

bool pdl_enabled() {
  static const bool off = env_flag("SEEDLING_NO_PDL");
  if (off) return false;
  constexpr int kMaxDevices = 64;
  static std::atomic<int> major[kMaxDevices] = {};  // 0: not asked yet
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  if (dev < 0 || dev >= kMaxDevices) return false;
  int m = major[dev].load(std::memory_order_relaxed);
  if (m == 0) {
    check(cudaDeviceGetAttribute(&m, cudaDevAttrComputeCapabilityMajor, dev), "reading the compute capability");
    major[dev].store(m, std::memory_order_relaxed);
  }
  return m >= 9;
}

void allow_dynamic_smem(const void* kernel, size_t dynamic) {
  struct Seen {
    int dev = -1;
    const void* kernel = nullptr;
    size_t bytes = 0;
  };
  constexpr int kSeen = 32;
  thread_local Seen seen[kSeen];
  thread_local int next = 0;
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  for (const Seen& e : seen) {
    if (e.kernel == kernel && e.dev == dev && dynamic <= e.bytes) return;
  }
  cudaFuncAttributes a{};
  check(cudaFuncGetAttributes(&a, kernel), "reading a kernel's shared memory");
  if (a.sharedSizeBytes + dynamic > kStageSharedBytes) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(dynamic)),
          "raising a kernel's shared memory limit");
  }
  seen[next] = {dev, kernel, dynamic};
  next = (next + 1) % kSeen;
}

}  // namespace seedling::cuda
