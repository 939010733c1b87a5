// bench/cuda_bench_util.h - what the CUDA benchmarks share: timing a stretch of work on a stream by events, the
// median / min / max of a set of timings or rates, seeded normal random inputs and random matrices in a codec.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

#include "codec/codec.h"
#include "codec/quantize.h"
#include "codec/seed_codec.h"
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

// A matrix in `codec`: an affine or float codec from N(0, 0.02) weights, a seed tier as random blocks (the decode's
// work does not depend on which seeds a search would pick).
inline std::vector<uint8_t> matrix_bytes(Codec c, int64_t rows, int64_t cols, std::mt19937& rng) {
  if (!codec_is_seed(c)) {
    const std::vector<float> w = gaussian(size_t(rows * cols), rng(), 0.02f);
    std::vector<uint8_t> out(codec_matrix_bytes(c, rows, cols));
    encode_matrix(c, DType::F32, w.data(), rows, cols, out.data());
    return out;
  }
  const seed::SeedTier t = codec_seed_tier(c);
  std::vector<seed::SeedBlock> blocks(size_t(seed::seed_slice_layout(t, rows, cols).n_blocks));
  for (seed::SeedBlock& b : blocks) {
    b.seed = uint16_t(1 + rng() % 65535);
    for (int p = 0; p < seed::seed_tier_spec(t).coefs; ++p) b.q[p] = int8_t(int(rng() % 16) - 8);
    b.code = uint8_t(rng() % 16);
  }
  return seed::write_seed_blob(t, rows, cols, -22, blocks);
}

}  // namespace seedling::bench
