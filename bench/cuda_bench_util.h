// bench/cuda_bench_util.h - what the CUDA benchmarks share: timing a stretch of work on a stream by events, and the
// median / min / max of a set of timings or rates.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
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

}  // namespace seedling::bench
