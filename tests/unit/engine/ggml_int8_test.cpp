// The int8-activation products of ggml's quant blocks (ops::ggml_matmul_int8, ops/ggml_int8.h) against their scalar
// definition (ops::ref::ggml_matmul_int8) bit for bit, on every SIMD target this CPU runs, any batch size and
// thread count; and the definition against the exact product of the dequantized weights (ops::ref::matmul: the
// reference values, in double) within the bound that x's rounding to int8 and the float32 steps allow.
#include "ops/ggml_int8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "codec/codec.h"
#include "codec/ggml_quants.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "ops/expert_products.h"
#include "ops/matmul.h"
#include "ops/ops.h"
#include "test_util.h"

namespace seedling::ops {

namespace {

// Every ggml codec (each has an int8 product).
std::vector<Codec> ggml_codecs() {
  std::vector<Codec> out;
  for (Codec c : kAllCodecs)
    if (codec_is_ggml(c)) out.push_back(c);
  return out;
}

// rows x cols of codec c: random code bytes (every code, scale and min value occurs) with float16 fields of
// either sign near 0.01, e8m0 scales 2^-7 .. 2^0 and, one block in four, 2^-128 .. 2^-125 (the subnormal halves
// e < 2 among them); row 0's codes all 0xFF (each type's largest codes and scales).
std::vector<uint8_t> random_blocks(Codec c, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> w(codec_matrix_bytes(c, rows, cols));
  for (uint8_t& b : w) b = uint8_t(rng());
  std::fill(w.begin(), w.begin() + std::ptrdiff_t(codec_row_bytes(c, cols)), uint8_t{0xFF});
  std::normal_distribution<float> nd(0.0f, 0.01f);
  const size_t block = codec_block_bytes(c);
  for (size_t at = 0; at < w.size(); at += block) {
    for (size_t off : ggml::ggml_f16_fields(c)) {
      const uint16_t h = f32_to_f16(nd(rng));
      std::memcpy(&w[at + off], &h, 2);
    }
    if (c == Codec::MXFP4_GGML) w[at] = uint8_t(rng() % 4 == 0 ? rng() % 4 : 120 + rng() % 8);
  }
  return w;
}

void restore_threads() {
  ThreadPool::set_global_threads(int(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace

// Quantized rows: the SIMD quantizer gives the scalar one's bytes (and block sums), each value within half a step.
TEST(GgmlInt8, QuantizedRowsEqualTheScalarDefinitionAndRoundToHalfAStep) {
  for (const int64_t group : {int64_t{32}, int64_t{256}}) {
    for (const int64_t cols : {group, 3 * group, int64_t{2048}}) {
      const int64_t m = 3;
      auto x = test::gaussian(size_t(m * cols), 5);
      for (int64_t k = 0; k < group; ++k) x[size_t(k)] = 0.0f;  // a zero block
      x[size_t(cols + group / 2)] = 1e4f;                       // one huge value
      Int8Rows want;
      ref::quantize_ggml_int8_rows(x.data(), m, cols, group, want);
      test::for_each_simd_target([&] {
        Int8Rows got;
        quantize_ggml_int8_rows(x.data(), m, cols, group, got);
        ASSERT_EQ(got.q, want.q) << "cols " << cols << " group " << group;
        ASSERT_EQ(std::memcmp(got.scale.data(), want.scale.data(), want.scale.size() * 4), 0);
        ASSERT_EQ(std::memcmp(got.sum.data(), want.sum.data(), want.sum.size() * 4), 0);
        ASSERT_EQ(got.bsum, want.bsum);
      });
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t k = 0; k < cols; ++k) {
          const int64_t index = i * want.blocks + k / group;
          const float s = want.scale[size_t(index)], q = want.q[size_t(i * cols + k)];
          ASSERT_LE(std::fabs(q), 127.0f);
          ASSERT_LE(std::fabs(double(x[size_t(i * cols + k)]) - double(s) * q), double(s) * (0.5 + 0x1p-20));
        }
      }
    }
  }
}

class GgmlInt8Test : public ::testing::TestWithParam<std::tuple<Codec, int, int, int>> {};

// SIMD = scalar definition bit for bit for every target, thread count and batch row; and the definition within the
// bound of x's rounding (and float32's) from the exact product of the dequantized weights.
TEST_P(GgmlInt8Test, KernelEqualsTheScalarDefinitionBitForBitAndStaysWithinTheRoundingBound) {
  const Codec c = std::get<0>(GetParam());
  const int m = std::get<1>(GetParam()), rows = std::get<2>(GetParam());
  const int64_t cols = int64_t(std::get<3>(GetParam())) * codec_group(c);
  const auto bytes = random_blocks(c, rows, cols, uint32_t(rows * 7 + int(c)));
  auto x = test::gaussian(size_t(m * cols), 12);
  for (int64_t k = 0; k < cols; ++k) x[size_t(k)] = k % 3 == 0 ? -2.0f : 2.0f;  // row 0: codes at +-127
  const Matrix w{c, bytes.data(), rows, cols};
  std::vector<float> want(size_t(m * rows));
  ref::ggml_matmul_int8(x.data(), m, w, want.data());
  test::for_each_simd_target([&] {
    for (const int threads : {1, 2, 3}) {
      ThreadPool::set_global_threads(threads);
      std::vector<float> got(want.size());
      ggml_matmul_int8(x.data(), m, w, got.data());
      for (size_t e = 0; e < want.size(); ++e) {
        ASSERT_EQ(std::memcmp(&got[e], &want[e], 4), 0)
            << "threads " << threads << " row " << e / size_t(rows) << " output " << e % size_t(rows) << ": " << got[e]
            << " vs " << want[e];
      }
      for (int i = 0; i < m; ++i) {
        std::vector<float> alone(static_cast<size_t>(rows));
        ggml_matmul_int8(x.data() + size_t(i * cols), 1, w, alone.data());
        ASSERT_EQ(std::memcmp(alone.data(), want.data() + size_t(i * rows), size_t(rows) * 4), 0) << "row " << i;
      }
    }
  });
  restore_threads();

  // The definition computes exactly sum_k W_k * scale_b * q_k, W_k = d * (scale_g * code_k) - dmin * min_g in
  // exact arithmetic, then float32 roundings. With mag_k = |d scale_g code_k| + |dmin min_g| (>= |W_k|) and
  // |scale_b q_k| <= |x_k| + scale_b, and u = 2^-24:
  //   x's rounding                      sum_k mag_k * scale_b * (0.5 + 2^-20) (the quantizer's bound, tested above)
  //   W_k against the reference value   at most 2 roundings of gguf-py's float32 steps: 2u mag_k |x_k|
  //   a block's float steps             float(isum), d *, float(msum), dmin *, -, scale_b *: (1+u)^4 - 1 < 4.01u
  //                                     of sum_{k in b} mag_k (|x_k| + scale_b), on both paths' magnitudes
  //   the sum over B blocks             B u (1 + 5u) times the same magnitudes
  //   ref::matmul's float of its double u |exact|
  // so |def - exact| <= rounding + (B + 8) u * sum_k mag_k (|x_k| + scale_b).
  std::vector<float> exact(want.size());
  ref::matmul(x.data(), m, w, exact.data());
  Int8Rows xq;
  ref::quantize_ggml_int8_rows(x.data(), m, cols, codec_group(c), xq);
  const int64_t group = codec_group(c), blocks = cols / group;
  for (int i = 0; i < m; ++i) {
    for (int n = 0; n < rows; ++n) {
      const uint8_t* row = bytes.data() + size_t(n) * w.row_bytes();
      double rounding = 0, terms = 0;
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* block = row + size_t(b) * codec_block_bytes(c);
        ggml::IntScales s;
        ggml::ggml_int_scales(c, block, s);
        const double sx = xq.scale[size_t(i * blocks + b)];
        for (int j = 0; j < int(group); ++j) {
          const double mag = std::fabs(double(s.d) * s.scale[j / 16] * ggml::ggml_code(c, block, j)) +
                             std::fabs(double(s.dmin) * s.min[j / 16]);
          rounding += mag * sx * (0.5 + 0x1p-20);
          terms += mag * (std::fabs(double(x[size_t(i * cols + b * group + j)])) + sx);
        }
      }
      const double bound = rounding + double(blocks + 8) * 0x1p-24 * terms;
      const double err = std::fabs(double(want[size_t(i * rows + n)]) - double(exact[size_t(i * rows + n)]));
      ASSERT_LE(err, bound) << codec_name(c) << " row " << i << " output " << n;
    }
  }
}

// Rows: 1 and 3 (the row kernel: the K types four outputs at a time, SuperOuts4), 5 (its four-row form), 12 (past
// kTileKRows, 8: the K types' tile GEMM).
INSTANTIATE_TEST_SUITE_P(Shapes, GgmlInt8Test,
                         ::testing::Combine(::testing::ValuesIn(ggml_codecs()), ::testing::Values(1, 3, 5, 12),
                                            ::testing::Values(1, 3, 17, 69), ::testing::Values(1, 3, 9)),
                         [](const auto& info) {
                           const auto& p = info.param;
                           return std::string(codec_name(std::get<0>(p))) + "_m" + std::to_string(std::get<1>(p)) +
                                  "_" + std::to_string(std::get<2>(p)) + "x" + std::to_string(std::get<3>(p)) + "b";
                         });

// The integer form is the reference value: d * (scale * code) - dmin * min equals codec_value within gguf-py's
// float32 roundings of the same products (2 at most), for every element of random blocks of every type.
TEST(GgmlInt8, IntegerFormIsTheReferenceValue) {
  for (const Codec c : ggml_codecs()) {
    const int64_t cols = 4 * codec_group(c);
    const auto bytes = random_blocks(c, 3, cols, 99);
    const Matrix w{c, bytes.data(), 3, cols};
    for (int64_t r = 0; r < 3; ++r) {
      for (int64_t k = 0; k < cols; ++k) {
        const uint8_t* block =
            bytes.data() + size_t(r) * w.row_bytes() + size_t(k / codec_group(c)) * codec_block_bytes(c);
        ggml::IntScales s;
        ggml::ggml_int_scales(c, block, s);
        const int j = int(k % codec_group(c));
        const double dq = double(s.d) * s.scale[j / 16] * ggml::ggml_code(c, block, j),
                     ml = double(s.dmin) * s.min[j / 16];
        ASSERT_LE(std::fabs(dq - ml - double(w.at(r, k))), 2 * 0x1p-24 * (std::fabs(dq) + std::fabs(ml)))
            << codec_name(c) << " element " << k;
      }
    }
  }
}

// The blocks' float16 fields read inline (ggml::f16_at) give f16_to_f32's bits for every float16.
TEST(GgmlInt8, InlineFloat16ReadIsTheConversion) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t v = uint16_t(h);
    uint8_t p[2];
    std::memcpy(p, &v, 2);
    const float a = ggml::f16_at(p), b = f16_to_f32(v);
    ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << h;
  }
}

// matmul follows cpu_dot(): int8 gives ggml_matmul_int8's bits, float the float path's; matmul_batch likewise.
TEST(GgmlInt8, MatmulFollowsTheSelectedPath) {
  const int64_t rows = 20, cols = 512;
  for (const Codec c : {Codec::Q4_K, Codec::Q8_0}) {
    const auto bytes = random_blocks(c, rows, cols, 3);
    const Matrix w{c, bytes.data(), rows, cols};
    const auto x = test::gaussian(size_t(cols), 4);
    std::vector<float> int8(static_cast<size_t>(rows)), via(int8.size()), batch(int8.size()), flt(int8.size());
    ggml_matmul_int8(x.data(), 1, w, int8.data());
    const ScopedCpuDot restore(cpu_dot());  // the mode before, back at the end
    set_cpu_dot(CpuDot::Float);
    matmul(x.data(), 1, w, flt.data());
    set_cpu_dot(CpuDot::Int8);
    matmul(x.data(), 1, w, via.data());
    matmul_batch({{x.data(), 1, w, batch.data()}});
    EXPECT_EQ(via, int8) << codec_name(c);
    EXPECT_EQ(batch, int8) << codec_name(c);
    EXPECT_NE(flt, int8) << codec_name(c);
  }
}

// Under int8, ggml's types are cut into pieces like the affine codecs (one parallel region for a MoE layer's
// experts, one for a batch of products): pieces of 64 outputs over 1-3 threads, in matmul_batch (two jobs sharing
// x, quantized once) and in expert_products (gate, up, silu, down), give ggml_matmul_int8's bits.
TEST(GgmlInt8, PiecesAndExpertRegionsGiveTheWholeProductsBits) {
  const ScopedCpuDot restore(cpu_dot());
  set_cpu_dot(CpuDot::Int8);
  for (const Codec c : {Codec::Q4_K, Codec::Q6_K, Codec::IQ4_XS, Codec::Q4_0}) {
    // H: gate and up's columns, down's outputs (pieces of 64 and a short one); I: the expert's width, down's columns.
    const int64_t H = 512 + 8, I = c == Codec::Q4_0 ? 96 : 256;
    const int64_t HC = c == Codec::Q4_0 ? H - 8 : 512;  // gate and up's columns: whole blocks
    const auto gate = random_blocks(c, I, HC, 1), up = random_blocks(c, I, HC, 2), down = random_blocks(c, H, I, 3);
    const Matrix wg{c, gate.data(), I, HC}, wu{c, up.data(), I, HC}, wd{c, down.data(), H, I};
    ASSERT_TRUE(matmul_by_pieces(wg) && matmul_by_pieces(wd)) << codec_name(c);
    for (const int64_t m : {int64_t{1}, int64_t{5}, int64_t{9}}) {
      const auto x = test::gaussian(size_t(m * HC), uint64_t(4 + m));
      std::vector<float> g(size_t(m * I)), u(g.size()), a(g.size()), d(size_t(m * H));
      ggml_matmul_int8(x.data(), m, wg, g.data());
      ggml_matmul_int8(x.data(), m, wu, u.data());
      silu_mul(g.data(), u.data(), a.data(), m * I);
      ggml_matmul_int8(a.data(), m, wd, d.data());
      for (const int threads : {1, 2, 3}) {
        ThreadPool::set_global_threads(threads);
        const std::string at =
            std::string(codec_name(c)) + " m " + std::to_string(m) + " threads " + std::to_string(threads);
        std::vector<float> bg(g.size(), -1.0f), bu(u.size(), -1.0f), bd(d.size(), -1.0f);
        matmul_batch({{x.data(), m, wg, bg.data()}, {x.data(), m, wu, bu.data()}, {a.data(), m, wd, bd.data()}});
        ASSERT_EQ(std::memcmp(bg.data(), g.data(), g.size() * 4), 0) << at;
        ASSERT_EQ(std::memcmp(bu.data(), u.data(), u.size() * 4), 0) << at;
        ASSERT_EQ(std::memcmp(bd.data(), d.data(), d.size() * 4), 0) << at;
        std::vector<float> ex(x.size()), eg(g.size()), eu(g.size()), ea(g.size()), ed(d.size(), -1.0f);
        const ExpertJob job{m, wg, wu, wd, ex.data(), eg.data(), eu.data(), ea.data(), ed.data()};
        const ExpertSteps steps{[&](size_t) { ex = x; },
                                [&](size_t, int64_t n0, int64_t n1) {
                                  for (int64_t r = 0; r < m; ++r)
                                    silu_mul(eg.data() + r * I + n0, eu.data() + r * I + n0, ea.data() + r * I + n0,
                                             n1 - n0);
                                },
                                [&](size_t, int64_t, int64_t) {}};
        expert_products(std::span<const ExpertJob>(&job, 1), steps);
        ASSERT_EQ(std::memcmp(ea.data(), a.data(), a.size() * 4), 0) << at;
        ASSERT_EQ(std::memcmp(ed.data(), d.data(), d.size() * 4), 0) << at;
      }
    }
  }
  restore_threads();
}

// Auto, the default, takes int8 for every quantized codec (each one's int8 kernel is the faster): the affine codecs
// and every ggml type; the float codecs and Seedling's own mxfp4 keep the float path.
TEST(GgmlInt8, AutoTakesInt8WhereItsKernelIsFaster) {
  const ScopedCpuDot automatic(CpuDot::Auto);
  for (const Codec c : {Codec::Q4_G32, Codec::Q4_G64, Codec::Q8_G32, Codec::Q8_G64, Codec::Q2_K, Codec::Q3_K,
                        Codec::Q4_K, Codec::Q5_K, Codec::Q6_K, Codec::IQ4_XS, Codec::Q8_0, Codec::Q4_0, Codec::Q5_0,
                        Codec::Q5_1, Codec::IQ4_NL, Codec::MXFP4_GGML}) {
    EXPECT_TRUE(int8_products(c)) << codec_name(c);
  }
  for (const Codec c : {Codec::BF16, Codec::F16, Codec::F32, Codec::MXFP4}) {
    EXPECT_FALSE(int8_products(c)) << codec_name(c);
  }
  const int64_t rows = 20, cols = 512;
  const auto x = test::gaussian(size_t(cols), 4);
  for (const Codec c : {Codec::Q4_K, Codec::Q8_0}) {
    const auto bytes = random_blocks(c, rows, cols, 3);
    const Matrix w{c, bytes.data(), rows, cols};
    std::vector<float> expect(static_cast<size_t>(rows)), got(expect.size());
    ggml_matmul_int8(x.data(), 1, w, expect.data());
    matmul(x.data(), 1, w, got.data());
    EXPECT_EQ(got, expect) << codec_name(c);
  }
  {
    const ScopedCpuDot flt(CpuDot::Float);
    EXPECT_FALSE(int8_products(Codec::Q4_K));
    EXPECT_FALSE(int8_products(Codec::Q4_G64));
  }
  const ScopedCpuDot int8(CpuDot::Int8);
  EXPECT_TRUE(int8_products(Codec::Q8_0));
  EXPECT_FALSE(int8_products(Codec::BF16));
}

}  // namespace seedling::ops
