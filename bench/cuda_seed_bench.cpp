// bench/cuda_seed_bench.cpp - the seed codecs on the GPU, in one run: (1) the decode matvec (cuda::matvec, the path
// of a decode step) of p3, p4 and s3 against q4_g64 at Qwen3-30B-A3B's expert shapes, and (2) the seed search on the
// GPU against the CPU search (one thread and all threads).
// Usage: build/bench/cuda_seed_bench [matvec|search|all] [repeats]   (default all, 7; needs a CUDA device)
//
// Invariant: figures only from arms measured in this run. matvec: arms interleaved (A B C D, then D C B A), each
// timed by events over a ring of distinct matrices larger than twice the L2 cache (so each product reads its
// weights from HBM, as a decode step reads each routed expert once); GB/s of stored weight bytes and weights/s,
// median (min-max), against the device-copy bandwidth measured in the same repetitions (read + write bytes / s).
// Each seed arm's output is checked against the CPU's seed_matmul within the float32 bound of the tests before any
// figure is printed. search: all 65535 seeds, unweighted, N(0, 0.02) weights in rows of 2048; the GPU's blocks must
// equal the CPU's (the same slice searched by both) or nothing is printed; weights/s and the time all routed
// experts of Qwen3-30B-A3B (48 x 128 x 3 x 2048 x 768 weights) would take at that rate.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "codec/codec.h"
#include "codec/quantize.h"
#include "codec/seed_search.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "cuda/kernels.h"
#include "cuda/seed_search.h"
#include "cuda_bench_util.h"
#include "ops/seed_matmul.h"

using namespace seedling;
using bench::gaussian;
using bench::matrix_bytes;
using bench::stats;
using bench::Stats;
using bench::timed;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Arm {
  Codec codec;
  size_t bytes = 0, stride = 0;  // one matrix, and its place in the ring (256-aligned)
  int copies = 0;
  uint8_t* ring = nullptr;
};

void bench_matvec(int repeats) {
  int dev = 0, l2 = 0;
  cuda::check(cudaGetDevice(&dev), "no CUDA device");
  cuda::check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "device attribute");
  cudaStream_t s;
  cuda::check(cudaStreamCreate(&s), "stream");
  const size_t copy_bytes = size_t(1) << 30;
  void *ca = nullptr, *cb = nullptr;
  cuda::check(cudaMalloc(&ca, copy_bytes), "bench alloc");
  cuda::check(cudaMalloc(&cb, copy_bytes), "bench alloc");
  cuda::check(cudaMemset(ca, 1, copy_bytes), "bench clear");
  const auto copy = [&] { cuda::check(cudaMemcpyAsync(cb, ca, copy_bytes, cudaMemcpyDeviceToDevice, s), "copy"); };
  std::printf("matvec (cuda::matvec, one row of x), rings of distinct matrices > 2 x L2 (%d MB); %d repeats\n",
              l2 >> 20, repeats);
  std::printf("%-16s | %-6s | %-26s | %-8s | %-24s | %s\n", "shape", "codec", "GB/s median (min-max)", "of copy",
              "G weights/s", "time vs q4_g64");
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{768, 2048}, {2048, 768}}) {
    std::mt19937 rng(7);
    std::vector<Arm> arms;
    const std::vector<float> x = gaussian(size_t(cols), 3, 1.0f);
    float *dx = nullptr, *dy = nullptr;
    cuda::check(cudaMalloc(&dx, size_t(cols) * 4), "bench alloc");
    cuda::check(cudaMalloc(&dy, size_t(rows) * 4), "bench alloc");
    cuda::check(cudaMemcpy(dx, x.data(), size_t(cols) * 4, cudaMemcpyHostToDevice), "bench upload");
    for (const Codec c : {Codec::Q4_G64, Codec::P3, Codec::P4, Codec::S3}) {
      Arm a;
      a.codec = c;
      const std::vector<uint8_t> one = matrix_bytes(c, rows, cols, rng);
      a.bytes = one.size();
      a.stride = (one.size() + 255) / 256 * 256;
      a.copies = int(2 * size_t(l2) / a.stride + 2);
      cuda::check(cudaMalloc(&a.ring, a.stride * size_t(a.copies)), "bench alloc");
      for (int i = 0; i < a.copies; ++i) {
        cuda::check(cudaMemcpy(a.ring + a.stride * size_t(i), one.data(), one.size(), cudaMemcpyHostToDevice),
                    "bench upload");
      }
      if (codec_is_seed(c)) {  // the GPU's product against the CPU's, within the float32 bound of the tests
        std::vector<float> want(static_cast<size_t>(rows)), w(size_t(rows * cols)), got(static_cast<size_t>(rows));
        const seed::SeedMatrix sm{codec_seed_tier(c), one.data(), rows, cols};
        seed::seed_matmul(x.data(), 1, sm, want.data());
        seed::decode_seed_matrix(sm, w.data());
        const cuda::DeviceMatrix dm{c, a.ring, rows, cols};
        cuda::matmul(dx, 1, dm, dy, false, s);
        cuda::check(cudaMemcpy(got.data(), dy, size_t(rows) * 4, cudaMemcpyDeviceToHost), "bench download");
        for (int64_t n = 0; n < rows; ++n) {
          double abs_sum = 0;
          for (int64_t k = 0; k < cols; ++k) abs_sum += std::fabs(double(x[size_t(k)]) * w[size_t(n * cols + k)]);
          const double bound = 2.0 * double(cols + 8) * std::ldexp(1.0, -24) * abs_sum + 1e-30;
          if (std::fabs(double(got[size_t(n)]) - want[size_t(n)]) > bound) {
            fail("{} matvec output {} is {} on the GPU, {} on the CPU (bound {})", codec_name(c), n, got[size_t(n)],
                 want[size_t(n)], bound);
          }
        }
      }
      arms.push_back(a);
    }
    auto run = [&](const Arm& a) {
      return timed(
                 [&] {
                   for (int i = 0; i < a.copies; ++i) {
                     const cuda::DeviceMatrix dm{a.codec, a.ring + a.stride * size_t(i), rows, cols};
                     float* const ys[1] = {dy};
                     cuda::matvec(dx, {&dm, 1}, ys, nullptr, 0.0f, nullptr, false, s);
                   }
                 },
                 s) /
             a.copies;
    };
    for (const Arm& a : arms) run(a);  // warm-up
    std::vector<std::vector<double>> t(arms.size());
    std::vector<double> copy_gbs;
    for (int r = 0; r < repeats; ++r) {
      copy_gbs.push_back(2.0 * double(copy_bytes) / timed(copy, s) / 1e9);
      for (size_t i = 0; i < arms.size(); ++i) {
        const size_t k = r % 2 == 0 ? i : arms.size() - 1 - i;
        t[k].push_back(run(arms[k]));
      }
    }
    const Stats cs = stats(copy_gbs);
    char shape[32];
    std::snprintf(shape, sizeof shape, "%lld x %lld", (long long)rows, (long long)cols);
    for (size_t i = 0; i < arms.size(); ++i) {
      std::vector<double> gbs, wps, ratio;
      for (int r = 0; r < repeats; ++r) {
        gbs.push_back(double(arms[i].bytes) / t[i][size_t(r)] / 1e9);
        wps.push_back(double(rows * cols) / t[i][size_t(r)] / 1e9);
        ratio.push_back(t[i][size_t(r)] / t[0][size_t(r)]);
      }
      const Stats g = stats(gbs), w = stats(wps), q = stats(ratio);
      std::printf(
          "%-16s | %-6s | %7.0f (%5.0f-%5.0f)      | %6.1f%% | %6.1f (%5.1f-%5.1f)     | %5.2fx (%4.2f-%4.2f)\n", shape,
          std::string(codec_name(arms[i].codec)).c_str(), g.med, g.lo, g.hi, 100 * g.med / cs.med, w.med, w.lo, w.hi,
          q.med, q.lo, q.hi);
    }
    std::printf("%-16s | device copy: %.0f GB/s (%.0f-%.0f), read + write bytes of a 1 GiB cudaMemcpy\n", shape, cs.med,
                cs.lo, cs.hi);
    for (Arm& a : arms) cudaFree(a.ring);
    cudaFree(dx);
    cudaFree(dy);
  }
  cudaFree(ca);
  cudaFree(cb);
  cudaStreamDestroy(s);
}

bool same_blocks(const seed::SeedSearchResult& a, const seed::SeedSearchResult& b) {
  if (a.exp_bias != b.exp_bias || a.blocks.size() != b.blocks.size()) return false;
  for (size_t i = 0; i < a.blocks.size(); ++i) {
    if (a.blocks[i].seed != b.blocks[i].seed || a.blocks[i].code != b.blocks[i].code ||
        std::memcmp(a.blocks[i].q, b.blocks[i].q, sizeof a.blocks[i].q) != 0) {
      return false;
    }
  }
  return true;
}

void bench_search() {
  const int64_t cols = 2048, gpu_rows = 64;
  const int threads = std::max(1, int(std::thread::hardware_concurrency()));
  const double qwen = 48.0 * 128 * 3 * 2048 * 768;
  const std::vector<float> w = gaussian(size_t(std::max<int64_t>(gpu_rows, 2 * threads) * cols), 1, 0.02f);
  std::printf(
      "\nsearch: all 65535 seeds, unweighted, N(0, 0.02) weights in rows of %lld; wall time, setup and recovery "
      "included; Qwen3-30B-A3B experts = %.3g weights\n",
      (long long)cols, qwen);
  std::printf("%-4s | %-34s | %-12s | %-10s | %s\n", "tier", "arm", "weights", "weights/s", "Qwen3-30B-A3B experts");
  for (const seed::SeedTier t : seed::kAllSeedTiers) {
    const std::string name(seed::seed_tier_name(t));
    auto line = [&](const char* arm, int64_t rows, double secs) {
      const double wps = double(rows * cols) / secs;
      std::printf("%-4s | %-34s | %-12lld | %10.0f | %.1f days (%.1f hours)\n", name.c_str(), arm,
                  (long long)(rows * cols), wps, qwen / wps / 86400, qwen / wps / 3600);
      return wps;
    };
    // CPU, one thread then all threads, each on 2 rows per thread; the GPU on the all-threads slice (blocks must
    // match) and on a larger one (its rate).
    ThreadPool::set_global_threads(1);
    double t0 = now();
    seed::seed_search_slice(t, w.data(), 2, cols, nullptr);
    const double cpu1 = line("CPU, 1 thread", 2, now() - t0);
    ThreadPool::set_global_threads(threads);
    const int64_t rows_all = 2 * threads;
    t0 = now();
    const seed::SeedSearchResult cpu = seed::seed_search_slice(t, w.data(), rows_all, cols, nullptr);
    char arm[48];
    std::snprintf(arm, sizeof arm, "CPU, %d threads", threads);
    const double cpun = line(arm, rows_all, now() - t0);
    t0 = now();
    const seed::SeedSearchResult gpu = cuda::seed_search_slice_cuda(t, w.data(), rows_all, cols, nullptr);
    line("GPU, the CPU's slice", rows_all, now() - t0);
    if (!same_blocks(gpu, cpu)) fail("{}: the GPU search's blocks differ from the CPU search's", name);
    t0 = now();
    cuda::seed_search_slice_cuda(t, w.data(), gpu_rows, cols, nullptr);
    const double g = line("GPU", gpu_rows, now() - t0);
    std::printf("%-4s | GPU / CPU 1 thread %.0fx, GPU / CPU %d threads %.1fx; blocks equal to the CPU's: yes\n",
                name.c_str(), g / cpu1, threads, g / cpun);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "all";
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 7;
  try {
    cudaDeviceProp prop{};
    cuda::check(cudaGetDeviceProperties(&prop, 0), "no CUDA device");
    std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    if (what == "all" || what == "matvec") bench_matvec(repeats);
    if (what == "all" || what == "search") bench_search();
  } catch (const Error& e) {
    std::fprintf(stderr, "cuda_seed_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
