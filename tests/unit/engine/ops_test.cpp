// The fast kernels against their plain references, and the batch-independence they promise.
#include "ops/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>

#include "core/dtype.h"
#include "ops/matmul.h"
#include "test_util.h"

namespace seedling::ops {

namespace {

struct Weights {
  std::vector<uint16_t> half;
  std::vector<float> full;
  Matrix view(DType t, int64_t rows, int64_t cols) const {
    return {t, t == DType::F32 ? static_cast<const void*>(full.data()) : half.data(), rows, cols};
  }
};

Weights random_weights(DType t, int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  Weights w;
  for (int64_t i = 0; i < n; ++i) {
    const float v = d(rng);
    if (t == DType::BF16) w.half.push_back(f32_to_bf16(v));
    if (t == DType::F16) w.half.push_back(f32_to_f16(v));
    if (t == DType::F32) w.full.push_back(v);
  }
  return w;
}

}  // namespace

class MatmulTest : public ::testing::TestWithParam<std::tuple<DType, int, int, int>> {};

TEST_P(MatmulTest, FastEqualsReferenceWithinFloatRounding) {
  const auto [dtype, m, rows, cols] = GetParam();
  std::mt19937 rng(7);
  const Weights w = random_weights(dtype, int64_t(rows) * cols, rng);
  const Matrix mat = w.view(dtype, rows, cols);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(size_t(m) * size_t(cols));
  for (float& v : x) v = d(rng);
  std::vector<float> fast(size_t(m) * size_t(rows)), ref(fast.size());
  matmul(x.data(), m, mat, fast.data());
  ref::matmul(x.data(), m, mat, ref.data());
  for (int i = 0; i < m; ++i) {
    for (int n = 0; n < rows; ++n) {
      // |error| of a float32 sum of `cols` products <= cols * eps * sum |x_k w_k| (standard bound).
      double mag = 0;
      for (int k = 0; k < cols; ++k) mag += std::fabs(double(x[size_t(i * cols + k)]) * double(mat.at(n, k)));
      const double bound = double(cols) * 0x1.0p-24 * mag + 1e-30;
      ASSERT_LE(std::fabs(double(fast[size_t(i * rows + n)]) - double(ref[size_t(i * rows + n)])), bound)
          << "row " << i << " col " << n;
    }
  }
  // Each row alone gives the same bits as in the batch.
  for (int i = 0; i < m; ++i) {
    std::vector<float> alone(static_cast<size_t>(rows));
    matmul(x.data() + size_t(i) * size_t(cols), 1, mat, alone.data());
    for (int n = 0; n < rows; ++n) ASSERT_EQ(alone[size_t(n)], fast[size_t(i * rows + n)]) << i << "," << n;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MatmulTest,
    ::testing::Values(std::make_tuple(DType::BF16, 1, 64, 64), std::make_tuple(DType::BF16, 7, 33, 67),
                      std::make_tuple(DType::BF16, 37, 130, 40), std::make_tuple(DType::F16, 5, 17, 96),
                      std::make_tuple(DType::F32, 9, 31, 129), std::make_tuple(DType::F32, 1, 3, 5)),
    [](const auto& info) {  // no structured binding here: its commas would split the macro's arguments
      const auto& p = info.param;
      return std::string(dtype_name(std::get<0>(p))) + "_m" + std::to_string(std::get<1>(p)) + "_" +
             std::to_string(std::get<2>(p)) + "x" + std::to_string(std::get<3>(p));
    });

// Against the formula in double: a short span (head dim 8: the per-key form) and one of three chunks (head dim 64:
// the SIMD kernel and attention_combine).
TEST(Ops, AttentionRowMatchesTheFormula) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (const auto& [s, first, last] :
       {std::tuple{AttentionShape{4, 2, 8, 0.35f}, 3, 9}, std::tuple{AttentionShape{4, 2, 64, 0.125f}, 5, 300}}) {
    const int D = s.head_dim, row = 2 * D, positions = last + 1;
    std::vector<float> q(size_t(4 * D)), k(size_t(positions * row)), v(size_t(positions * row)), out(q.size());
    for (auto* vec : {&q, &k, &v}) {
      for (float& x : *vec) x = d(rng);
    }
    attention_row(q.data(), k.data(), v.data(), first, last, s, 0, 4, out.data());
    for (int h = 0; h < 4; ++h) {
      const int kvh = h / 2;
      std::vector<double> score;
      double mx = -1e300;
      for (int j = first; j <= last; ++j) {
        double dot = 0;
        for (int c = 0; c < D; ++c) dot += double(q[size_t(h * D + c)]) * k[size_t(j * row + kvh * D + c)];
        score.push_back(dot * s.scale);
        mx = std::max(mx, score.back());
      }
      double z = 0;
      for (double& x : score) z += (x = std::exp(x - mx));
      for (int c = 0; c < D; ++c) {
        double want = 0;
        for (int j = first; j <= last; ++j) want += score[size_t(j - first)] / z * v[size_t(j * row + kvh * D + c)];
        EXPECT_NEAR(out[size_t(h * D + c)], want, 1e-5) << "span " << first << ".." << last;
      }
    }
  }
}

// The SIMD attention (ops/attention.cpp) against the per-key form (ref::attention_row), on head dims of 1 to 16
// vectors and ones it hands to the per-key form (20, 80), spans shorter and longer than a vector of keys, GQA groups
// and sinks. The sums run in other orders, so they agree to float rounding: within 2e-6 of outputs whose
// magnitude is about 1 (weights of a softmax times values of N(0, 1)).
TEST(Ops, AttentionRowSimdMatchesThePerKeyForm) {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 1.0f);
  struct Case {
    int heads, kv_heads, head_dim, first, last;
    bool sinks;
  };
  for (const Case& k : {Case{4, 2, 8, 0, 0, false}, Case{4, 2, 16, 3, 9, true}, Case{8, 2, 64, 0, 100, false},
                        Case{4, 4, 128, 17, 300, true}, Case{2, 1, 256, 0, 33, false}, Case{4, 1, 128, 5, 5, false},
                        Case{3, 1, 20, 0, 40, false}, Case{2, 2, 80, 2, 70, true}, Case{32, 4, 128, 0, 511, false}}) {
    AttentionShape s{k.heads, k.kv_heads, k.head_dim, 1.0f / std::sqrt(float(k.head_dim))};
    std::vector<float> sinks(size_t(k.heads));
    for (float& x : sinks) x = d(rng);
    if (k.sinks) s.sinks = sinks.data();
    const size_t positions = size_t(k.last + 1), row = size_t(k.kv_heads * k.head_dim);
    std::vector<float> q(size_t(k.heads * k.head_dim)), kc(positions * row), vc(positions * row);
    for (auto* vec : {&q, &kc, &vc}) {
      for (float& x : *vec) x = d(rng);
    }
    std::vector<float> fast(q.size()), slow(q.size());
    attention_row(q.data(), kc.data(), vc.data(), k.first, k.last, s, 0, k.heads, fast.data());
    ref::attention_row(q.data(), kc.data(), vc.data(), k.first, k.last, s, 0, k.heads, slow.data());
    for (size_t i = 0; i < q.size(); ++i) {
      ASSERT_NEAR(fast[i], slow[i], 2e-6)
          << "heads " << k.heads << " dim " << k.head_dim << " span " << k.first << ".." << k.last << " output " << i;
    }
#if defined(__x86_64__)
    // The SIMD kernel ran (it hands other head dims to the per-key form): over a long span its sums, in another
    // order, leave some output's bits different. Head dims of 16 to 128 are whole vectors on every x86 target.
    if (k.head_dim % 16 == 0 && k.head_dim <= 128 && k.last - k.first >= 100) {
      EXPECT_NE(std::memcmp(fast.data(), slow.data(), fast.size() * 4), 0) << "dim " << k.head_dim;
    }
#endif
    // One head at a time gives the same bits as all heads in one call.
    for (int h = 0; h < k.heads; ++h) {
      std::vector<float> one(q.size());
      attention_row(q.data(), kc.data(), vc.data(), k.first, k.last, s, h, h + 1, one.data());
      for (int c = 0; c < k.head_dim; ++c) {
        const size_t i = size_t(h * k.head_dim + c);
        ASSERT_EQ(one[i], fast[i]) << "head " << h;
      }
    }
  }
}

// A row's chunks computed apart, a KV head's query heads at a time, and combined (the decoder's split at decode)
// give attention_row's bits; spans of one chunk, several, and a partial last one, with and without sinks.
TEST(Ops, AttentionChunksComputedApartGiveTheRowsBits) {
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (const auto& [first, last, with_sinks] :
       {std::tuple{0, 0, false}, std::tuple{0, 127, true}, std::tuple{3, 300, false}, std::tuple{40, 1000, true}}) {
    AttentionShape s{8, 2, 64, 0.125f};
    std::vector<float> sinks(8);
    for (float& x : sinks) x = d(rng);
    if (with_sinks) s.sinks = sinks.data();
    const size_t row = size_t(s.n_kv_heads * s.head_dim), positions = size_t(last + 1);
    std::vector<float> q(size_t(s.n_heads * s.head_dim)), kc(positions * row), vc(positions * row);
    for (auto* vec : {&q, &kc, &vc}) {
      for (float& x : *vec) x = d(rng);
    }
    std::vector<float> whole(q.size()), apart(q.size());
    attention_row(q.data(), kc.data(), vc.data(), first, last, s, 0, s.n_heads, whole.data());
    const int chunks = attention_chunks(first, last), group = s.n_heads / s.n_kv_heads;
    const int64_t o_stride = int64_t(q.size()), ml_stride = 2 * s.n_heads;
    std::vector<float> o(size_t(chunks * o_stride)), ml(size_t(chunks * ml_stride));
    for (int c = chunks - 1; c >= 0; --c) {  // in any order
      const int c0 = first + c * kAttentionChunk, c1 = std::min(last, c0 + kAttentionChunk - 1);
      for (int h = 0; h < s.n_heads; h += group) {
        attention_chunk(q.data(), kc.data(), vc.data(), c0, c1, s, h, h + group,
                        o.data() + c * o_stride + h * s.head_dim, ml.data() + c * ml_stride + 2 * h);
      }
    }
    attention_combine(s, 0, s.n_heads, chunks, o.data(), o_stride, ml.data(), ml_stride, apart.data());
    ASSERT_EQ(std::memcmp(whole.data(), apart.data(), whole.size() * 4), 0) << first << ".." << last;
  }
}

// The SIMD silu_mul (vector exp) against the scalar loop: each element within a few ulp (Highway's exp is within
// 1 ulp; the division and products round as the loop's), on lengths that leave a tail, and an element's bits
// the same wherever it lies.
TEST(Ops, SiluMulSimdMatchesTheScalarLoop) {
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.0f, 4.0f);
  for (int n : {1, 7, 16, 33, 1000}) {
    const size_t len = static_cast<size_t>(n);
    std::vector<float> g(len), u(len), fast(len), slow(len);
    for (int i = 0; i < n; ++i) g[size_t(i)] = d(rng), u[size_t(i)] = d(rng);
    g[0] = -90.0f;  // exp(90) overflows to inf: silu is -0, as in the loop
    if (n > 5) g[1] = -200.0f, g[2] = -1e30f, g[3] = 200.0f, g[4] = 1e30f;  // past the vector exp's range
    silu_mul(g.data(), u.data(), fast.data(), n);
    ref::silu_mul(g.data(), u.data(), slow.data(), n);
    for (int i = 0; i < n; ++i) {
      ASSERT_NEAR(fast[size_t(i)], slow[size_t(i)], 4e-7f * std::abs(slow[size_t(i)]) + 1e-30f) << n << " " << i;
      float one = 0;
      silu_mul(g.data() + i, u.data() + i, &one, 1);
      ASSERT_EQ(one, fast[size_t(i)]) << n << " " << i;
    }
  }
}

// A sink logit joins each head's softmax denominator and attends to nothing (gpt_oss): the weights sum to below 1.
TEST(Ops, AttentionSinkJoinsTheDenominatorOnly) {
  const float sinks[2] = {0.7f, -1.3f};
  AttentionShape s{2, 1, 2, 1.0f};
  s.sinks = sinks;
  const std::vector<float> q = {1, 0, 0, 1}, k = {1, 0, 0, 1, 1, 1}, v = {1, 2, 3, 4, 5, 6};
  std::vector<float> out(4);
  attention_row(q.data(), k.data(), v.data(), 0, 2, s, 0, 2, out.data());
  for (int h = 0; h < 2; ++h) {
    const double sc[3] = {double(q[size_t(2 * h)]) * k[0] + q[size_t(2 * h + 1)] * k[1],
                          double(q[size_t(2 * h)]) * k[2] + q[size_t(2 * h + 1)] * k[3],
                          double(q[size_t(2 * h)]) * k[4] + q[size_t(2 * h + 1)] * k[5]};
    double z = std::exp(double(sinks[h]));
    for (double x : sc) z += std::exp(x);
    for (int c = 0; c < 2; ++c) {
      double want = 0;
      for (int j = 0; j < 3; ++j) want += std::exp(sc[j]) / z * v[size_t(2 * j + c)];
      EXPECT_NEAR(out[size_t(2 * h + c)], want, 1e-6) << "head " << h;
    }
  }
}

// Group-limited top-k as GLM-4.5 / DeepSeek-V3 select: groups scored by their two best choices (score + bias), the
// best topk_group kept, the others' choices zeroed, then the top k of what remains.
TEST(Ops, GroupTopKKeepsTheBestGroupsAndZeroesTheOthers) {
  // 8 experts, 4 groups of 2. Choices (scores + bias): group 0: 0.9+0.1, group 1: 0.5+0.5, group 2: 0.95+0.0,
  // group 3: 0.6+0.6. Sums: 1.0, 1.0, 0.95, 1.2; the best two groups are 3 and 0 (0 before 1 on a tie).
  const float scores[8] = {0.9f, 0.1f, 0.5f, 0.5f, 0.95f, 0.0f, 0.6f, 0.6f};
  const float bias[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::vector<float> scratch;
  int idx[3];
  group_top_k(scores, bias, 8, 4, 2, 3, idx, &scratch);
  EXPECT_EQ(idx[0], 0);  // 0.9
  EXPECT_EQ(idx[1], 6);  // 0.6 (group 3), before 7 on the tie
  EXPECT_EQ(idx[2], 7);
  // A bias moves the selection: expert 4 (0.95) beats expert 0 once group 2 is kept.
  const float bias2[8] = {0, 0, 0, 0, 0.3f, 0, 0, 0};
  group_top_k(scores, bias2, 8, 4, 1, 2, idx, &scratch);
  EXPECT_EQ(idx[0], 4);  // group 2 scores 1.25 + 0.0, the best
  // Its other expert's choice is 0, as are the zeroed ones' (transformers' masked_fill(0.0)): a tie, lower index first.
  EXPECT_EQ(idx[1], 0);
}

// gpt_oss's activation: the gate clamped above at the limit, up clamped both ways, (up + 1) * g * sigmoid(alpha g).
TEST(Ops, ClampedSwigluClampsGateAboveAndUpBothWays) {
  const float gate[3] = {-2.0f, 1.0f, 9.0f}, up[3] = {-9.0f, 0.5f, 8.0f};
  float out[3];
  clamped_swiglu(gate, up, out, 3, 1.702f, 7.0f);
  auto want = [](double g, double u) { return (u + 1) * g / (1 + std::exp(-1.702 * g)); };
  EXPECT_NEAR(out[0], want(-2.0, -7.0), 1e-6);
  EXPECT_NEAR(out[1], want(1.0, 0.5), 1e-6);
  EXPECT_NEAR(out[2], want(7.0, 7.0), 1e-5);
}

TEST(Ops, RopeRotatesPairsHalfApart) {
  Rope rope;
  rope.rotary_dim = 4;
  rope.inv_freq = {1.0f, 0.5f};
  std::vector<float> x = {1, 2, 3, 4};
  apply_rope(x.data(), 1, 4, 2, rope);
  // Pair (0, 2) turns by 2 rad, pair (1, 3) by 1 rad.
  EXPECT_NEAR(x[0], 1 * std::cos(2.0) - 3 * std::sin(2.0), 1e-6);
  EXPECT_NEAR(x[2], 3 * std::cos(2.0) + 1 * std::sin(2.0), 1e-6);
  EXPECT_NEAR(x[1], 2 * std::cos(1.0) - 4 * std::sin(1.0), 1e-6);
  EXPECT_NEAR(x[3], 4 * std::cos(1.0) + 2 * std::sin(1.0), 1e-6);
}

// A second set of heads (a row's k beside its q) turns by the same angles: each set's bits are those of rotating it
// alone, partial rotary included (head_dim 6, rotary_dim 4: the last two dims untouched).
TEST(Ops, RopeOnTwoHeadSetsGivesEachSetsBitsAlone) {
  Rope rope;
  rope.rotary_dim = 4;
  rope.inv_freq = {0.9f, 0.05f};
  rope.attention_scaling = 1.25f;
  std::vector<float> q = test::gaussian(18, 3), k = test::gaussian(12, 4);
  std::vector<float> q_alone = q, k_alone = k;
  apply_rope(q_alone.data(), 3, 6, 37, rope);
  apply_rope(k_alone.data(), 2, 6, 37, rope);
  apply_rope(q.data(), 3, 6, 37, rope, k.data(), 2);
  EXPECT_EQ(std::memcmp(q.data(), q_alone.data(), q.size() * 4), 0);
  EXPECT_EQ(std::memcmp(k.data(), k_alone.data(), k.size() * 4), 0);
  EXPECT_EQ(k[4], test::gaussian(12, 4)[4]);  // past rotary_dim: as it was
}

TEST(Ops, TopKBreaksTiesTowardsTheLowerIndex) {
  const float x[] = {0.1f, 0.7f, 0.3f, 0.7f, 0.2f};
  int idx[3];
  top_k(x, 5, 3, idx);
  EXPECT_EQ(idx[0], 1);
  EXPECT_EQ(idx[1], 3);
  EXPECT_EQ(idx[2], 2);
}

TEST(Ops, RmsNormMatchesTheFormula) {
  std::vector<float> x = {1, -2, 3, -4}, w = {1, 0.5f, 2, 1};
  rms_norm(x.data(), 1, 4, w.data(), 1e-6f);
  const double inv = 1.0 / std::sqrt((1 + 4 + 9 + 16) / 4.0 + 1e-6);
  EXPECT_NEAR(x[0], 1 * inv, 1e-6);
  EXPECT_NEAR(x[1], -2 * inv * 0.5, 1e-6);
  EXPECT_NEAR(x[2], 3 * inv * 2, 1e-6);
}

}  // namespace seedling::ops
