// bench/seed_bench.cpp - seed kernels against the int4 (q4_g64) kernel per core, and the seed search, in one run.
// Usage: build/bench/seed_bench [kernels|search|all] [reps]   (default: all, 9 repetitions)
//
// Invariant: every ratio printed comes from arms timed in the same run, interleaved in each repetition (the order
// reversed on every other repetition, A B C D then D C B A), medians quoted with min and max; nothing is asserted
// about speed. Results of the kernels are checked against each other (seed against the decoded reference) so a
// fast wrong kernel cannot print a figure. Times are CPU seconds of the measuring thread (or, for the search on
// several threads, of the process), so other tenants of a shared machine do not count as our time.
//
// kernels: ONE thread (per core), the two Qwen3-30B-A3B expert shapes 768 x 2048 (gate/up) and 2048 x 768 (down):
//   hot  - one matrix, again and again (it stays in the L2 cache): the decode's own speed;
//   cold - a ring of distinct matrices larger than the last-level cache (each call reads its weights from RAM, as
//          a decode step reads each routed expert once), with bytes/s against the one-thread streaming read
//          bandwidth measured in the same repetitions (ops::stream_read over a buffer twice the L3);
//   m = 1 (matvec), m = 8 and m = 64 (matmul), G weights/s counted per row of x (m * rows * cols per call).
// search: the full 65535-seed search, weights/s per core (CPU time) on one thread and on all threads, and the
//   core-days that rate gives for every routed expert of Qwen3-30B-A3B (48 layers x 128 experts x 3 x 2048 x 768).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "codec/quantize.h"
#include "codec/seed_search.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/matmul.h"
#include "ops/seed_matmul.h"

using namespace seedling;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU seconds of this thread (kernels: the arms run on the calling thread) or of the whole process (the search on
// every thread): time the machine's other tenants take from us is not counted, which a wall clock on a shared
// 2-core machine would.
double cpu_now(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}
double thread_cpu() {
  return cpu_now(CLOCK_THREAD_CPUTIME_ID);
}

struct Stats {
  double median, min, max;
};
Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// `copies` copies of one matrix's bytes, each at a 64-byte boundary: the ring the cold arms cycle through.
struct Ring {
  std::vector<uint8_t> bytes;
  size_t stride = 0, size = 0;
  int copies = 0;
  Ring(const std::vector<uint8_t>& one, int n) : stride((one.size() + 63) / 64 * 64), size(one.size()), copies(n) {
    bytes.resize(stride * size_t(n) + 64);
    for (int i = 0; i < n; ++i) std::memcpy(bytes.data() + stride * size_t(i), one.data(), one.size());
  }
  const uint8_t* at(int i) const { return bytes.data() + stride * size_t(i % copies); }
};

// One kernel under test: calls fn(weights, x, m, y) on a matrix.
struct Arm {
  std::string name;
  double bits_per_weight;
  Ring ring;
  std::function<void(const uint8_t*, const float*, int64_t, float*)> fn;
};

std::vector<seed::SeedBlock> random_blocks(seed::SeedTier t, int64_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> seed(1, 65535), q(-8, 7), code(0, 15);
  std::vector<seed::SeedBlock> blocks(static_cast<size_t>(n));
  for (seed::SeedBlock& b : blocks) {
    b.seed = uint16_t(seed(rng));
    for (int p = 0; p < seed::seed_tier_spec(t).coefs; ++p) b.q[p] = int8_t(q(rng));
    b.code = uint8_t(code(rng));
  }
  return blocks;
}

void bench_shape(int64_t rows, int64_t cols, int reps, size_t llc_bytes) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> w(size_t(rows * cols));
  for (float& v : w) v = nd(rng);
  std::vector<uint8_t> q4(codec_matrix_bytes(Codec::Q4_G64, rows, cols));
  encode_matrix(Codec::Q4_G64, DType::F32, w.data(), rows, cols, q4.data());

  // Rings of at least 1.25 x the last-level cache per arm: a cyclic walk larger than the cache misses every time.
  const auto ring_copies = [&](size_t bytes) { return int(std::max<size_t>(2, llc_bytes * 5 / 4 / bytes + 1)); };
  std::vector<Arm> arms;
  arms.push_back({"q4_g64", 8.0 * double(q4.size()) / double(rows * cols), Ring(q4, ring_copies(q4.size())),
                  [rows, cols](const uint8_t* b, const float* x, int64_t m, float* y) {
                    ops::matmul(x, m, ops::Matrix{Codec::Q4_G64, b, rows, cols}, y);
                  }});
  for (seed::SeedTier t : seed::kAllSeedTiers) {
    const seed::SeedSliceLayout L = seed::seed_slice_layout(t, rows, cols);
    // Random blocks: the kernels' work does not depend on which seeds or coefficients a search would pick.
    const std::vector<uint8_t> blob = seed::write_seed_blob(t, rows, cols, -20, random_blocks(t, L.n_blocks, rng));
    arms.push_back({std::string(seed::seed_tier_name(t)), seed::seed_bits_per_weight(t, rows, cols),
                    Ring(blob, ring_copies(blob.size())),
                    [t, rows, cols](const uint8_t* b, const float* x, int64_t m, float* y) {
                      seed::seed_matmul(x, m, seed::SeedMatrix{t, b, rows, cols}, y);
                    }});
  }

  const int64_t max_m = 64;
  std::vector<float> x(size_t(max_m * cols)), y(size_t(max_m * rows)), yref(size_t(max_m * rows));
  std::normal_distribution<float> nx(0.0f, 1.0f);
  for (float& v : x) v = nx(rng);
  // Each seed arm against the spec's decode then a double dot (a wrong kernel would print a figure otherwise).
  for (size_t a = 1; a < arms.size(); ++a) {
    const seed::SeedTier t = seed::kAllSeedTiers[a - 1];
    std::vector<float> W(size_t(rows * cols));
    seed::decode_seed_matrix({t, arms[a].ring.at(0), rows, cols}, W.data());
    arms[a].fn(arms[a].ring.at(0), x.data(), 1, y.data());
    for (int64_t r = 0; r < rows; ++r) {
      double exact = 0, mag = 0;
      for (int64_t k = 0; k < cols; ++k) {
        exact += double(x[size_t(k)]) * W[size_t(r * cols + k)];
        mag += std::fabs(double(x[size_t(k)]) * W[size_t(r * cols + k)]);
      }
      if (std::fabs(y[size_t(r)] - exact) > double(cols + 8) * std::ldexp(mag, -23)) {
        fail("seed_bench: {} row {} gives {}, the decoded reference {}", arms[a].name, r, y[size_t(r)], exact);
      }
    }
  }

  // The one-thread streaming read over twice the last-level cache: the ceiling of the cold arms' bytes/s.
  std::vector<float> stream(llc_bytes * 2 / sizeof(float), 1.0f);
  volatile float sink = 0;

  struct Case {
    int64_t m;
    bool cold;
  };
  const Case cases[] = {{1, false}, {1, true}, {8, true}, {64, true}};
  for (const Case& c : cases) {
    // Calls per timing: about 64 matvec-equivalents per timed run hot; cold, one lap of the smallest ring at m = 1.
    int calls = c.cold ? arms[0].ring.copies : 64;
    for (const Arm& a : arms) calls = std::min(calls, c.cold ? a.ring.copies : calls);
    calls = std::max(2, int(calls / c.m));
    std::vector<std::vector<double>> secs(arms.size());
    std::vector<double> stream_s;
    std::vector<int> next(arms.size(), 0);
    for (int rep = 0; rep < reps; ++rep) {
      for (size_t k = 0; k < arms.size(); ++k) {
        const size_t a = rep % 2 == 0 ? k : arms.size() - 1 - k;
        const double t0 = thread_cpu();
        for (int i = 0; i < calls; ++i) {
          arms[a].fn(arms[a].ring.at(c.cold ? next[a]++ : 0), x.data(), c.m, y.data());
        }
        secs[a].push_back(thread_cpu() - t0);
      }
      if (c.cold) {
        const double t0 = thread_cpu();
        sink = sink + ops::stream_read(stream.data(), int64_t(stream.size()));
        stream_s.push_back(thread_cpu() - t0);
      }
    }
    const double weights = double(calls) * double(c.m) * double(rows * cols);
    std::printf(
        "\n%lld x %lld, m = %lld, %s, 1 thread: G weights/s (per row of x, per CPU second), median [min, max] of "
        "%d\n",
        (long long)rows, (long long)cols, (long long)c.m,
        c.cold ? "cold (a ring of distinct matrices > L3)" : "hot (one matrix, cache-resident)", reps);
    double ceiling = 0;
    if (c.cold) {
      const Stats s = stats(stream_s);
      ceiling = double(stream.size() * sizeof(float)) / s.median / 1e9;
      std::printf("  memory ceiling: one-thread stream read of %.0f MiB: %.2f GB/s [%.2f, %.2f]\n",
                  double(stream.size() * sizeof(float)) / (1 << 20), ceiling,
                  double(stream.size() * sizeof(float)) / s.max / 1e9,
                  double(stream.size() * sizeof(float)) / s.min / 1e9);
    }
    const double q4_rate = weights / stats(secs[0]).median / 1e9;
    for (size_t a = 0; a < arms.size(); ++a) {
      const Stats s = stats(secs[a]);
      const double rate = weights / s.median / 1e9;
      std::printf("  %-7s %.3f b/w  %6.3f G weights/s [%.3f, %.3f]", arms[a].name.c_str(), arms[a].bits_per_weight,
                  rate, weights / s.max / 1e9, weights / s.min / 1e9);
      if (a > 0) std::printf("  ratio to q4_g64 %.3f", rate / q4_rate);
      if (c.cold) {
        // Weight bytes read per second (once per call: the m rows of x share them).
        const double gbs = double(calls) * double(arms[a].ring.size) / s.median / 1e9;
        std::printf("  %.2f GB/s = %.3f of the ceiling", gbs, gbs / ceiling);
      }
      std::printf("\n");
    }
  }
}

void bench_search() {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  const int64_t cols = 2048, srows = 4;
  const int hw_threads = std::max(1, int(std::thread::hardware_concurrency()));
  std::vector<float> w(size_t(srows * hw_threads * cols));
  for (float& v : w) v = nd(rng);
  const double qwen_weights = 48.0 * 128 * 3 * 2048 * 768;
  std::printf("\nsearch: all 65535 seeds, unweighted, N(0, 0.02) weights in rows of %lld (the table build included)\n",
              (long long)cols);
  for (int threads : {1, hw_threads}) {
    ThreadPool::set_global_threads(threads);
    for (seed::SeedTier t : seed::kAllSeedTiers) {
      const int64_t sr = srows * threads;
      const double t0 = now(), c0 = cpu_now(CLOCK_PROCESS_CPUTIME_ID);
      seed::seed_search_slice(t, w.data(), sr, cols, nullptr);
      const double wall = now() - t0, cpu = cpu_now(CLOCK_PROCESS_CPUTIME_ID) - c0;
      const double per_core = double(sr * cols) / cpu;
      std::printf(
          "  %s, %d thread(s): %lld x %lld in %.2f s wall, %.2f s CPU = %.0f weights/s per core (%.0f wall); "
          "Qwen3-30B-A3B experts (%.3g weights): %.1f core-days\n",
          std::string(seed::seed_tier_name(t)).c_str(), threads, (long long)sr, (long long)cols, wall, cpu, per_core,
          double(sr * cols) / wall, qwen_weights, qwen_weights / per_core / 86400);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "all";
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 9;
  if (what != "all" && what != "kernels" && what != "search") {
    std::fprintf(stderr, "usage: seed_bench [kernels|search|all] [reps]\n");
    return 2;
  }
  try {
    if (what != "search") {
      ThreadPool::set_global_threads(1);
      // Rings and the streaming read are sized from the last-level cache (256 MiB when the system does not say).
      const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
      const size_t llc = l3 > 0 ? size_t(l3) : size_t(256) << 20;
      bench_shape(768, 2048, reps, llc);
      bench_shape(2048, 768, reps, llc);
    }
    if (what != "kernels") bench_search();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
