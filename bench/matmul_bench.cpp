// bench/matmul_bench.cpp - batch-1 matmul speed against a streaming read of the same bytes, in one run.
// Usage: build/bench/matmul_bench [rows cols]   (default: the Qwen3-30B-A3B lm_head, 151936 x 2048, bf16)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "ops/matmul.h"

using namespace seedling;

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char** argv) {
  const int64_t rows = argc > 2 ? std::atoll(argv[1]) : 151936, cols = argc > 2 ? std::atoll(argv[2]) : 2048;
  std::vector<uint16_t> w(size_t(rows * cols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(float(int(i % 97) - 48) / 64.0f);
  const ops::Matrix m{DType::BF16, w.data(), rows, cols};
  std::vector<float> x(static_cast<size_t>(cols), 0.5f), y(static_cast<size_t>(rows));
  const double bytes = double(w.size()) * 2;
  std::vector<double> mm, rd;
  for (int r = 0; r < 7; ++r) {
    double t0 = now();
    ops::matmul(x.data(), 1, m, y.data());
    mm.push_back(bytes / (now() - t0) / 1e9);
    t0 = now();
    const float s = ops::stream_read(reinterpret_cast<const float*>(w.data()), int64_t(w.size() / 2));
    rd.push_back(bytes / (now() - t0) / 1e9);
    if (s == 12345.0f) std::printf(" ");
  }
  std::sort(mm.begin(), mm.end());
  std::sort(rd.begin(), rd.end());
  std::printf(
      "bf16 matvec %lld x %lld (%.0f MB), %d threads: %.2f GB/s; streaming read of the same bytes: %.2f GB/s;"
      " ratio %.2f (medians of 7)\n",
      static_cast<long long>(rows), static_cast<long long>(cols), bytes / 1e6, ThreadPool::global().size(), mm[3],
      rd[3], mm[3] / rd[3]);
}
