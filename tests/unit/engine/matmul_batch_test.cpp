// ops::matmul_batch gives every job matmul's bits, on both affine paths and with any thread count, when jobs share
// an x (quantized once) or not, mix codecs and groups, and include empty jobs.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "codec/quantize.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "ops/matmul.h"
#include "test_util.h"

namespace seedling::ops {

TEST(MatmulBatch, EveryJobGetsMatmulsBitsOnBothPathsWithAnyThreadCount) {
  const int64_t K = 130, K2 = 96;
  struct Stored {
    Codec codec;
    int64_t rows, cols;
    std::vector<uint8_t> bytes;
  };
  std::vector<Stored> stored = {{Codec::Q4_G64, 100, K, {}}, {Codec::Q4_G64, 70, K, {}},   {Codec::Q8_G32, 33, K, {}},
                                {Codec::BF16, 50, K, {}},    {Codec::Q4_G32, 200, K2, {}}, {Codec::Q8_G64, 9, K2, {}}};
  uint32_t seed = 1;
  for (Stored& s : stored) {
    const auto w = test::gaussian(size_t(s.rows * s.cols), seed++);
    s.bytes.resize(codec_matrix_bytes(s.codec, s.rows, s.cols));
    encode_matrix(s.codec, DType::F32, w.data(), s.rows, s.cols, s.bytes.data());
  }
  const auto x1 = test::gaussian(size_t(3 * K), 20), x2 = test::gaussian(size_t(K2), 21);
  // (stored matrix, x, rows of x): four products of x1, two of x2, one empty.
  const std::vector<std::tuple<size_t, const float*, int64_t>> plan = {
      {0, x1.data(), 3}, {1, x1.data(), 3}, {2, x1.data(), 3}, {3, x1.data(), 3},
      {4, x2.data(), 1}, {5, x2.data(), 1}, {5, x2.data(), 0}};
  const ScopedCpuDot restore(cpu_dot());  // the mode before, back at the end
  for (const CpuDot mode : {CpuDot::Float, CpuDot::Int8}) {
    set_cpu_dot(mode);
    std::vector<std::vector<float>> want;
    for (const auto& [s, x, m] : plan) {
      want.emplace_back(size_t(m * stored[s].rows));
      matmul(x, m, {stored[s].codec, stored[s].bytes.data(), stored[s].rows, stored[s].cols}, want.back().data());
    }
    for (const int threads : {1, 2, 3}) {
      ThreadPool::set_global_threads(threads);
      std::vector<std::vector<float>> got;
      std::vector<MatmulJob> jobs;
      for (const auto& [s, x, m] : plan) got.emplace_back(size_t(m * stored[s].rows), -1.0f);
      for (size_t j = 0; j < plan.size(); ++j) {
        const auto& [s, x, m] = plan[j];
        jobs.push_back(
            {x, m, {stored[s].codec, stored[s].bytes.data(), stored[s].rows, stored[s].cols}, got[j].data()});
      }
      matmul_batch(jobs);
      for (size_t j = 0; j < plan.size(); ++j) {
        ASSERT_EQ(got[j].size(), want[j].size());
        if (want[j].empty()) continue;  // the empty job: nothing to compare (memcmp of no bytes takes no null)
        EXPECT_EQ(std::memcmp(got[j].data(), want[j].data(), want[j].size() * 4), 0)
            << (mode == CpuDot::Int8 ? "int8" : "float") << " job " << j << " threads " << threads;
      }
    }
  }
  ThreadPool::set_global_threads(int(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace seedling::ops
