// Multi-head latent attention (model/mla.h): the absorbed form the forward runs equals the expanded form transformers
// computes, within float32 rounding; RoPE on the rope part in transformers' interleaved layout; DeepSeek-V3's router
// masks the groups it drops with -inf.
#include "model/mla.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/dtype.h"
#include "ops/ops.h"

namespace seedling {

namespace {

std::vector<float> gaussian(size_t n, std::mt19937& rng, float sd = 1.0f) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace

// DeepSeek-V3's shape cut down (4 heads, rank 64, nope 32, rope 16, v 24), 40 cached positions, kv_b in f32 and bf16.
TEST(Mla, AbsorbedAttentionEqualsExpandedWithinFloatRounding) {
  MlaPlan m;
  m.kv_lora_rank = 64;
  m.qk_nope_head_dim = 32;
  m.qk_rope_head_dim = 16;
  m.v_head_dim = 24;
  m.softmax_scale = 0.7f / std::sqrt(float(m.q_head_dim()));
  const int heads = 4, positions = 40, w = m.cache_width();
  std::mt19937 rng(7);
  const std::vector<float> kv_b =
      gaussian(size_t(heads * (m.qk_nope_head_dim + m.v_head_dim) * m.kv_lora_rank), rng, 0.3f);
  std::vector<uint16_t> kv_b16(kv_b.size());
  for (size_t i = 0; i < kv_b.size(); ++i) kv_b16[i] = f32_to_bf16(kv_b[i]);
  const std::vector<float> cache = gaussian(size_t(positions * w), rng);
  const std::vector<float> q = gaussian(size_t(heads * m.q_head_dim()), rng);
  for (const ops::Matrix& W : {ops::Matrix{Codec::F32, kv_b.data(), int64_t(kv_b.size()) / m.kv_lora_rank, 64},
                               ops::Matrix{Codec::BF16, kv_b16.data(), int64_t(kv_b.size()) / m.kv_lora_rank, 64}}) {
    const std::vector<float> absorb = mla_absorbed_keys(W, heads, m);
    for (int last : {0, 1, 17, positions - 1}) {
      std::vector<float> got(size_t(heads * m.v_head_dim)), want(got.size());
      mla_absorbed_row(q.data(), cache.data(), last, W, absorb, heads, m, got.data());
      mla_expanded_row(q.data(), cache.data(), last, W, heads, m, want.data());
      // Each output is a softmax-weighted mean of values of size ~ sqrt(64) * 0.3 ~ 2.4, its scores sums of ~96
      // float32 products of size ~ 3: rounding of order 1e-6 relative, 1e-4 covers it with room; a wrong head,
      // pair or scale is off by O(1).
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 1e-4) << codec_name(W.codec) << " last " << last << " out " << i;
      }
    }
  }
}

// The expanded form itself: one position, so the softmax is 1 and head h's output is W_UV[h] c exactly.
TEST(Mla, ExpandedAttentionOfOnePositionIsTheValueOfItsLatent) {
  MlaPlan m;
  m.kv_lora_rank = 8;
  m.qk_nope_head_dim = 4;
  m.qk_rope_head_dim = 2;
  m.v_head_dim = 3;
  m.softmax_scale = 1.0f;
  const int heads = 2;
  std::mt19937 rng(3);
  const std::vector<float> kv_b = gaussian(size_t(heads * 7 * 8), rng), cache = gaussian(10, rng),
                           q = gaussian(12, rng);
  const ops::Matrix W{Codec::F32, kv_b.data(), heads * 7, 8};
  std::vector<float> out(size_t(heads * 3));
  mla_expanded_row(q.data(), cache.data(), 0, W, heads, m, out.data());
  for (int h = 0; h < heads; ++h) {
    for (int j = 0; j < 3; ++j) {
      double v = 0;
      for (int c = 0; c < 8; ++c) v += double(kv_b[size_t((h * 7 + 4 + j) * 8 + c)]) * double(cache[size_t(c)]);
      EXPECT_NEAR(out[size_t(h * 3 + j)], v, 1e-5);
    }
  }
}

// transformers' apply_rotary_pos_emb_interleave: pair (x[2i], x[2i+1]) rotated by frequency i, written as
// [x1 cos - x2 sin (all i), x2 cos + x1 sin (all i)]; without interleave rotate_half's pairs (i, i + d/2).
TEST(Mla, RopeRotatesInterleavedPairsIntoTransformersLayout) {
  MlaPlan m;
  m.qk_rope_head_dim = 8;
  ops::Rope rope;
  rope.rotary_dim = 8;
  rope.attention_scaling = 1.25f;
  rope.inv_freq = {1.0f, 0.1f, 0.01f, 0.001f};
  const float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const int pos = 5;
  for (bool inter : {true, false}) {
    m.rope_interleave = inter;
    float y[8];
    std::copy_n(x, 8, y);
    mla_rope(y, pos, m, rope);
    for (int i = 0; i < 4; ++i) {
      const double a = double(pos) * double(rope.inv_freq[size_t(i)]);
      const double c = std::cos(a) * 1.25, s = std::sin(a) * 1.25;
      const double x1 = inter ? x[2 * i] : x[i], x2 = inter ? x[2 * i + 1] : x[i + 4];
      EXPECT_NEAR(y[i], x1 * c - x2 * s, 1e-5) << inter << " " << i;
      EXPECT_NEAR(y[i + 4], x2 * c + x1 * s, 1e-5) << inter << " " << i;
    }
  }
}

// DeepSeek-V3's router (transformers' masked_fill(-inf)): a kept group's expert whose score + bias is negative still
// beats every expert of a dropped group; glm4_moe's masked_fill(0.0) picks the dropped one.
TEST(Mla, DeepseekRouterMasksDroppedGroupsWithMinusInfinity) {
  const float scores[4] = {0.1f, 0.2f, 0.9f, 0.8f}, bias[4] = {0, 0, 0, -0.85f};  // choices 0.1 0.2 | 0.9 -0.05
  int idx[2];
  std::vector<float> scratch;
  ops::group_top_k(scores, bias, 4, 2, 1, 2, idx, &scratch, -INFINITY);
  EXPECT_EQ(idx[0], 2);
  EXPECT_EQ(idx[1], 3);
  ops::group_top_k(scores, bias, 4, 2, 1, 2, idx, &scratch);
  EXPECT_EQ(idx[0], 2);
  EXPECT_EQ(idx[1], 0);
}

}  // namespace seedling
