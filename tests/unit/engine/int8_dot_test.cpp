// The int8-activation products (ops::matmul_int8) against their scalar definition (ops::ref::matmul_int8) bit for
// bit, on every SIMD target this CPU runs, any batch size and thread count; and the definition against the exact
// product of the stored weights (ops::ref::matmul, in double) within the bound that x's rounding to int8 allows.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
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

namespace {

constexpr Codec kAffine[] = {Codec::Q4_G32, Codec::Q4_G64, Codec::Q8_G32, Codec::Q8_G64};

std::vector<uint8_t> encode(Codec c, const std::vector<float>& w, int64_t rows, int64_t cols) {
  std::vector<uint8_t> out(codec_matrix_bytes(c, rows, cols));
  encode_matrix(c, DType::F32, w.data(), rows, cols, out.data());
  return out;
}

// The SIMD targets of this CPU (Highway's bits), best first, and the scalar fallback.
std::vector<int64_t> cpu_targets() {
  std::vector<int64_t> out;
  const int64_t all = hwy::SupportedTargets();
  for (int64_t t = all; t != 0; t &= t - 1) out.push_back(t & -t);
  return out;
}

// Runs fn once under each target of this CPU, then restores Highway's own choice.
template <class Fn>
void for_each_target(Fn fn) {
  for (const int64_t t : cpu_targets()) {
    hwy::SetSupportedTargetsForTest(t);
    fn(std::string(hwy::TargetName(t)));
  }
  hwy::SetSupportedTargetsForTest(0);
}

void restore_threads() {
  ThreadPool::set_global_threads(int(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace

// Quantized rows: the SIMD quantizer gives the scalar one's bytes, and each value is within half a step of x.
TEST(Int8Dot, QuantizedRowsEqualTheScalarDefinitionAndRoundToHalfAStep) {
  for (const int64_t group : {32, 64}) {
    for (const int64_t cols : {1, 31, 64, 100, 2065}) {
      const int64_t m = 3;
      auto x = test::gaussian(size_t(m * cols), 5);
      for (int64_t k = 0; k < std::min<int64_t>(cols, group); ++k) x[size_t(k)] = 0.0f;  // a zero block
      if (cols > 70) x[size_t(cols + 70)] = 1e4f;                                        // one huge value
      Int8Rows want;
      ref::quantize_int8_rows(x.data(), m, cols, group, want);
      for_each_target([&](const std::string& target) {
        Int8Rows got;
        quantize_int8_rows(x.data(), m, cols, group, got);
        ASSERT_EQ(got.q, want.q) << target << " cols " << cols << " group " << group;
        ASSERT_EQ(std::memcmp(got.scale.data(), want.scale.data(), want.scale.size() * 4), 0) << target;
        ASSERT_EQ(std::memcmp(got.sum.data(), want.sum.data(), want.sum.size() * 4), 0) << target;
      });
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t k = 0; k < cols; ++k) {
          const int64_t index = i * want.blocks + k / group;
          const float s = want.scale[size_t(index)], q = want.q[size_t(index * group + k % group)];
          ASSERT_LE(std::fabs(q), 127.0f);
          ASSERT_LE(std::fabs(double(x[size_t(i * cols + k)]) - double(s) * q), double(s) * (0.5 + 0x1p-20));
        }
      }
    }
  }
}

class Int8DotTest : public ::testing::TestWithParam<std::tuple<Codec, int, int, int>> {};

// SIMD = scalar definition bit for bit for every target, thread count and batch row; and the definition within
// the bound of x's rounding from the exact product of the stored weights.
TEST_P(Int8DotTest, KernelEqualsTheScalarDefinitionBitForBitAndStaysWithinTheRoundingBound) {
  // Plain locals, not a structured binding: the lambda below captures them (clang before 16 refuses bindings).
  const Codec c = std::get<0>(GetParam());
  const int m = std::get<1>(GetParam()), rows = std::get<2>(GetParam()), cols = std::get<3>(GetParam());
  auto wf = test::gaussian(size_t(rows * cols), 11);
  auto x = test::gaussian(size_t(m * cols), 12);
  // Row 0 at the codes' extremes against x at +-127 (a q8 pair sums to 64,770: past int16, where pmaddubsw would
  // saturate); row 1 all equal (d = 0).
  for (int64_t k = 0; k < cols; ++k) {
    x[size_t(k)] = k % 3 == 0 ? -2.0f : 2.0f;
    wf[size_t(k)] = x[size_t(k)] > 0 ? 1.0f : -1.0f;
    if (rows > 1) wf[size_t(cols + k)] = 0.25f;
  }
  const auto bytes = encode(c, wf, rows, cols);
  const Matrix w{c, bytes.data(), rows, cols};
  std::vector<float> want(size_t(m * rows));
  ref::matmul_int8(x.data(), m, w, want.data());
  for_each_target([&](const std::string& target) {
    for (const int threads : {1, 2, 3}) {
      ThreadPool::set_global_threads(threads);
      std::vector<float> got(want.size());
      matmul_int8(x.data(), m, w, got.data());
      for (size_t e = 0; e < want.size(); ++e) {
        ASSERT_EQ(std::memcmp(&got[e], &want[e], 4), 0)
            << target << " threads " << threads << " row " << e / size_t(rows) << " output " << e % size_t(rows) << ": "
            << got[e] << " vs " << want[e];
      }
      for (int i = 0; i < m; ++i) {
        std::vector<float> alone(static_cast<size_t>(rows));
        matmul_int8(x.data() + size_t(i * cols), 1, w, alone.data());
        ASSERT_EQ(std::memcmp(alone.data(), want.data() + size_t(i * rows), size_t(rows) * 4), 0) << target << i;
      }
    }
  });
  restore_threads();

  // The definition computes, exactly, sum_k (d q_k + m) * scale * xq_k: the stored weights times x rounded to
  // half a step (scale / 2) of its block, then float32 roundings of its per-block terms and of the sum over blocks.
  std::vector<float> exact(want.size());
  ref::matmul(x.data(), m, w, exact.data());
  Int8Rows xq;
  ref::quantize_int8_rows(x.data(), m, cols, codec_group(c), xq);
  for (int i = 0; i < m; ++i) {
    for (int n = 0; n < rows; ++n) {
      const uint8_t* row = bytes.data() + size_t(n) * w.row_bytes();
      double rounding = 0, terms = 0;
      for (int64_t k = 0; k < cols; ++k) {
        const int64_t b = k / codec_group(c), index = i * xq.blocks + b;
        uint16_t mh;
        std::memcpy(&mh, row + size_t(b) * codec_block_bytes(c) + 2, 2);
        const double v = codec_value(c, row, k), mn = f16_to_f32(mh), s = xq.scale[size_t(index)];
        rounding += std::fabs(v) * s * (0.5 + 0x1p-20);
        terms += (std::fabs(v - mn) + std::fabs(mn)) * (std::fabs(double(x[size_t(i * cols + k)])) + s);
      }
      const double bound = rounding + double(xq.blocks + 3) * 0x1p-23 * terms;
      const double err = std::fabs(double(want[size_t(i * rows + n)]) - double(exact[size_t(i * rows + n)]));
      ASSERT_LE(err, bound) << codec_name(c) << " row " << i << " output " << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Int8DotTest,
                         ::testing::Combine(::testing::ValuesIn(kAffine), ::testing::Values(1, 5),
                                            ::testing::Values(1, 3, 17, 69), ::testing::Values(31, 64, 100, 200)),
                         [](const auto& info) {
                           const auto& p = info.param;
                           return std::string(codec_name(std::get<0>(p))) + "_m" + std::to_string(std::get<1>(p)) +
                                  "_" + std::to_string(std::get<2>(p)) + "x" + std::to_string(std::get<3>(p));
                         });

class Int8GemmTest : public ::testing::TestWithParam<std::tuple<Codec, int>> {};

// Both int8 kernels (Rows, for decode; Gemm, for prefill: a tile of outputs repacked, then every row) and
// matmul_int8's own choice give the definition's bits for 1..70 rows (Gemm's passes of 8, 4, 2 and 1 rows), 37
// outputs (short tiles), K with a short last block, 1-3 threads, on every target of this CPU.
TEST_P(Int8GemmTest, BothKernelsEqualTheDefinitionForAnyRowCountAndThreads) {
  const Codec c = std::get<0>(GetParam());
  const int cols = std::get<1>(GetParam());
  const int rows = 37, max_m = 70;
  auto wf = test::gaussian(size_t(rows * cols), 21);
  auto x = test::gaussian(size_t(max_m * cols), 22);
  for (int64_t k = 0; k < cols; ++k) {  // extremes, as above: codes 0 and 255 (15) against x at +-127
    x[size_t(k)] = k % 3 == 0 ? -2.0f : 2.0f;
    wf[size_t(k)] = x[size_t(k)] > 0 ? 1.0f : -1.0f;
  }
  for (int64_t k = 0; k < cols; ++k) x[size_t(3 * cols + k)] = 0.0f;  // a row of zeros (scale 0)
  const auto bytes = encode(c, wf, rows, cols);
  const Matrix w{c, bytes.data(), rows, cols};
  std::vector<float> want(size_t(max_m * rows));
  ref::matmul_int8(x.data(), max_m, w, want.data());
  for_each_target([&](const std::string& target) {
    const size_t tile = int8_tile_outputs(c);
    if (tile == 0) return;  // no SIMD kernel on this target: matmul_int8 is the definition itself
    Int8Rows xq;
    for (int m = 1; m <= max_m; ++m) {
      const int threads = 1 + m % 3;
      ThreadPool::set_global_threads(threads);
      quantize_int8_rows(x.data(), m, cols, codec_group(c), xq);
      for (const Int8Kernel kernel : {Int8Kernel::Rows, Int8Kernel::Gemm, Int8Kernel::Auto}) {
        std::vector<float> got(size_t(m * rows), -1.0f);
        if (kernel == Int8Kernel::Auto) {
          matmul_int8(x.data(), m, w, got.data());
        } else {  // pieces of whole tiles over the pool, as matmul_int8 splits them
          const size_t tiles = (size_t(rows) + tile - 1) / tile;
          ThreadPool::global().parallel_for(tiles, 1, [&](size_t t0, size_t t1) {
            matmul_int8_range(xq, w, got.data(), int64_t(t0 * tile), std::min(int64_t(t1 * tile), int64_t(rows)),
                              kernel);
          });
        }
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
            << target << " kernel " << int(kernel) << " rows " << m << " threads " << threads;
      }
    }
  });
  restore_threads();
}

INSTANTIATE_TEST_SUITE_P(Shapes, Int8GemmTest,
                         ::testing::Combine(::testing::ValuesIn(kAffine), ::testing::Values(40, 200)),
                         [](const auto& info) {
                           return std::string(codec_name(std::get<0>(info.param))) + "_k" +
                                  std::to_string(std::get<1>(info.param));
                         });

// matmul follows cpu_dot(): int8 gives matmul_int8's bits, float the float path's, for affine weights only.
TEST(Int8Dot, MatmulFollowsTheSelectedPath) {
  const int64_t rows = 20, cols = 96;
  const auto bytes = encode(Codec::Q4_G32, test::gaussian(size_t(rows * cols), 3), rows, cols);
  const Matrix w{Codec::Q4_G32, bytes.data(), rows, cols};
  const auto x = test::gaussian(size_t(cols), 4);
  std::vector<float> int8(static_cast<size_t>(rows)), via(int8.size()), flt(int8.size());
  matmul_int8(x.data(), 1, w, int8.data());
  const ScopedCpuDot restore(cpu_dot());  // the mode before, back at the end
  set_cpu_dot(CpuDot::Float);
  matmul(x.data(), 1, w, flt.data());
  set_cpu_dot(CpuDot::Int8);
  matmul(x.data(), 1, w, via.data());
  EXPECT_EQ(via, int8);
  EXPECT_NE(flt, int8);
}

}  // namespace seedling::ops
