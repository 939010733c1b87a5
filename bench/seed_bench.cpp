// bench/seed_bench.cpp - seed kernels and the seed search on this machine, in one run.
// Usage: build/bench/seed_bench [rows cols]   (default 768 x 2048: one Qwen3-30B-A3B gate/up expert matrix)
//
// 1. matvec weights/s on ONE thread (per core): seed_matmul (m = 1) for P3, P4, S3 against ops::matmul on the same
//    shape in int4 affine (q4_g64, 4.5 b/w) and bf16; medians of 9, interleaved arms. Also m = 4 rows for seeds.
// 2. The search: weights/s on one thread and on all threads (full 65535 seeds, unweighted), and the time that rate
//    gives for every routed expert of Qwen3-30B-A3B (48 layers x 128 experts x 3 x 2048 x 768 weights).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#if __has_include("codec/quantize.h")
#include "codec/quantize.h"  // the affine int4 codec (packed-format work); without it, bf16 only
#define SEED_BENCH_HAS_Q4 1
#endif
#include "codec/seed_matmul.h"
#include "codec/seed_search.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "ops/matmul.h"

using namespace seedling;

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  const int64_t rows = argc > 2 ? std::atoll(argv[1]) : 768, cols = argc > 2 ? std::atoll(argv[2]) : 2048;
  const int hw_threads = ThreadPool::global().size();
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> w(size_t(rows * cols)), x(size_t(4 * cols)), y(size_t(4 * rows));
  for (float& v : w) v = nd(rng);
  for (float& v : x) v = nd(rng) * 50.0f;

  // Seed blobs: a real search over the first 64 seeds (the kernels' cost does not depend on which seed won).
  seed::SeedSearchOptions quick;
  quick.n_seeds = 64;
  std::vector<std::vector<uint8_t>> blobs;
  for (seed::SeedTier t : seed::kAllSeedTiers)
    blobs.push_back(seed::encode_seed_slice(t, w.data(), rows, cols, nullptr, quick));
  std::vector<uint16_t> wb(w.size());
  for (size_t i = 0; i < w.size(); ++i) wb[i] = f32_to_bf16(w[i]);
  const ops::Matrix mbf{DType::BF16, wb.data(), rows, cols};
#ifdef SEED_BENCH_HAS_Q4
  std::vector<uint8_t> wq(codec_matrix_bytes(Codec::Q4_G64, rows, cols));
  encode_matrix(Codec::Q4_G64, DType::F32, w.data(), rows, cols, wq.data());
  const ops::Matrix mq4{Codec::Q4_G64, wq.data(), rows, cols};
#else
  const ops::Matrix& mq4 = mbf;  // no int4 kernel in this tree: the "int4" column repeats bf16
#endif

  ThreadPool::set_global_threads(1);
  const double nw = double(rows * cols);
  std::vector<std::vector<double>> t_seed(3), t_seed4(3);
  std::vector<double> t_q4, t_bf;
  for (int rep = 0; rep < 9; ++rep) {
    auto arm = [&](auto&& fn) {
      const double t0 = now();
      fn();
      return now() - t0;
    };
    t_q4.push_back(arm([&] { ops::matmul(x.data(), 1, mq4, y.data()); }));
    for (int k = 0; k < 3; ++k) {
      const seed::SeedMatrix sm{seed::kAllSeedTiers[k], blobs[size_t(k)].data(), rows, cols};
      t_seed[size_t(k)].push_back(arm([&] { seed::seed_matmul(x.data(), 1, sm, y.data()); }));
      t_seed4[size_t(k)].push_back(arm([&] { seed::seed_matmul(x.data(), 4, sm, y.data()); }));
    }
    t_bf.push_back(arm([&] { ops::matmul(x.data(), 1, mbf, y.data()); }));
  }
  const double q4 = nw / median(t_q4) / 1e9, bf = nw / median(t_bf) / 1e9;
  std::printf("matvec %lld x %lld, 1 thread, G weights/s (medians of 9, interleaved):\n", (long long)rows,
              (long long)cols);
  std::printf("  int4 affine q4_g64: %.3f   bf16: %.3f\n", q4, bf);
  for (int k = 0; k < 3; ++k) {
    const double s = nw / median(t_seed[size_t(k)]) / 1e9, s4 = 4 * nw / median(t_seed4[size_t(k)]) / 1e9;
    std::printf("  %s seeds: %.3f  (ratio to int4 %.3f, to bf16 %.3f); 4 rows: %.3f per row-weight\n",
                std::string(seed::seed_tier_name(seed::kAllSeedTiers[k])).c_str(), s, s / q4, s / bf, s4);
  }

  // The search, full seed range.
  const double qwen_weights = 48.0 * 128 * 3 * 2048 * 768;
  const int64_t srows = 4;
  for (int threads : {1, hw_threads}) {
    ThreadPool::set_global_threads(threads);
    for (seed::SeedTier t : seed::kAllSeedTiers) {
      const int64_t sr = srows * threads;
      const double t0 = now();
      seed::seed_search_slice(t, w.data(), sr, cols, nullptr);
      const double secs = now() - t0;
      const double rate = double(sr * cols) / secs;
      std::printf(
          "search %s, %d thread(s): %lld x %lld in %.2f s = %.0f weights/s (%.0f per thread); "
          "Qwen3-30B-A3B experts (%.3g weights): %.1f days at this rate\n",
          std::string(seed::seed_tier_name(t)).c_str(), threads, (long long)sr, (long long)cols, secs, rate,
          rate / threads, qwen_weights, qwen_weights / rate / 86400);
    }
  }
  return 0;
}
