// bench/cuda_bench_util.h - what the CUDA benchmarks share: timing a stretch of work on a stream by events, the
// median / min / max of a set of timings or rates, and seeded normal random inputs.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

#include "cuda/kernels.h"

namespace seedling::bench {

// Seconds of f's work on the stream, by events recorded around it.
inline double timed(const std::function<void()>& f, cudaStream_t s) {
  cudaEvent_t a, b;
  cuda::check(cudaEventCreate(&a), "event");
  cuda::check(cudaEventCreate(&b), "event");
  cuda::check(cudaEventRecord(a, s), "event");
  f();
  cuda::check(cudaEventRecord(b, s), "event");
  cuda::check(cudaEventSynchronize(b), "bench run");
  float ms = 0;
  cuda::check(cudaEventElapsedTime(&ms, a, b), "event");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / 1e3;
}

struct Stats {
  double med, lo, hi;
};
// Median (the upper one of an even count), min and max; v must not be empty.
inline Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// n floats drawn from N(0, sigma^2) by a generator seeded with `seed` (the same inputs every run).
inline std::vector<float> gaussian(size_t n, uint32_t seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

}  // namespace seedling::bench
