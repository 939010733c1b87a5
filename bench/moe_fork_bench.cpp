// bench/moe_fork_bench.cpp - one MoE layer at batch 1 (8 of 128 experts of the Qwen3-30B-A3B shape: gate and up
// 768 x 2048, down 2048 x 768, q4_g64, int8 products) as 24 ops::matmul calls (a fork and join each) against 2
// ops::matmul_batch calls (gate and up together, then down). 41 rounds, the arms alternating A B B A; prints the
// median, min and max microseconds a layer, and the bytes a layer over the median time.
// Not a CMake target yet; build after `ninja -C build seedling_engine` with (one line)
//   g++ -std=c++20 -O2 -ffp-contract=off -Isrc bench/moe_fork_bench.cpp -o /tmp/moe_fork_bench
//   build/libseedling_engine.a build/libseedling_core.a $(pkg-config --libs libhwy liburing libxxhash) -lfmt -lpthread
// Usage: /tmp/moe_fork_bench [threads]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "codec/quantize.h"
#include "core/thread_pool.h"
#include "ops/matmul.h"
using namespace seedling;
static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  ThreadPool::set_global_threads(threads);
  ops::set_cpu_dot(ops::CpuDot::Int8);
  const int E = 128, K = 8;
  const int64_t H = 2048, I = 768;
  const Codec c = Codec::Q4_G64;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> wf(size_t(H * I));
  for (auto& v : wf) v = nd(rng);
  std::vector<uint8_t> one(codec_matrix_bytes(c, I, H));
  encode_matrix(c, DType::F32, wf.data(), I, H, one.data());
  // E experts x 3 matrices of the same bytes copied (different memory, so no cache reuse across experts)
  const size_t mb = one.size();
  std::vector<uint8_t> all(size_t(E) * 3 * mb);
  for (size_t i = 0; i < size_t(E) * 3; ++i) std::copy(one.begin(), one.end(), all.begin() + i * mb);
  std::vector<float> x(static_cast<size_t>(H)), g(static_cast<size_t>(K * I)), u(g.size()), a(g.size()),
      d(static_cast<size_t>(K * H));
  for (auto& v : x) v = nd(rng);
  auto mat = [&](int e, int which) {
    return which == 2 ? ops::Matrix{c, all.data() + (size_t(e) * 3 + 2) * mb, H, I}
                      : ops::Matrix{c, all.data() + (size_t(e) * 3 + which) * mb, I, H};
  };
  std::vector<double> ta, tb;
  for (int r = 0; r < 41; ++r) {
    int ids[K];
    for (int k = 0; k < K; ++k) ids[k] = int(rng() % E);
    for (int arm : {r % 2, 1 - r % 2}) {
      const double t0 = now();
      if (arm == 0) {
        for (int k = 0; k < K; ++k) {
          ops::matmul(x.data(), 1, mat(ids[k], 0), g.data() + k * I);
          ops::matmul(x.data(), 1, mat(ids[k], 1), u.data() + k * I);
          for (int64_t i = 0; i < I; ++i) a[size_t(k * I + i)] = g[size_t(k * I + i)] * u[size_t(k * I + i)];
          ops::matmul(a.data() + k * I, 1, mat(ids[k], 2), d.data() + k * H);
        }
      } else {
        std::vector<ops::MatmulJob> jobs;
        for (int k = 0; k < K; ++k) {
          jobs.push_back({x.data(), 1, mat(ids[k], 0), g.data() + k * I});
          jobs.push_back({x.data(), 1, mat(ids[k], 1), u.data() + k * I});
        }
        ops::matmul_batch(jobs);
        for (int64_t i = 0; i < K * I; ++i) a[size_t(i)] = g[size_t(i)] * u[size_t(i)];
        jobs.clear();
        for (int k = 0; k < K; ++k) jobs.push_back({a.data() + k * I, 1, mat(ids[k], 2), d.data() + k * H});
        ops::matmul_batch(jobs);
      }
      (arm == 0 ? ta : tb).push_back((now() - t0) * 1e6);
    }
  }
  std::sort(ta.begin(), ta.end());
  std::sort(tb.begin(), tb.end());
  const double bytes = 3.0 * K * double(mb);
  std::printf(
      "threads %d: 24 matmul calls %.0f us (min %.0f max %.0f, %.2f GB/s); 2 matmul_batch calls %.0f us (min %.0f "
      "max %.0f, %.2f GB/s); ratio %.3f\n",
      threads, ta[20], ta[0], ta[40], bytes / ta[20] / 1e3, tb[20], tb[0], tb[40], bytes / tb[20] / 1e3,
      tb[20] / ta[20]);
}
