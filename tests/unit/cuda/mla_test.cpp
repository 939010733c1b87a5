// Multi-head latent attention's kernels (cuda/mla.cu) against model/mla.cpp's pieces, on random inputs: the latent's
// norm and RoPE with the cache write (rms_norm, mla_rope), the absorbed query (mla_absorbed_keys), latent attention
// (mla_latent_head), the value rows; and the three together, absorbed, against the expanded form transformers computes
// (mla_expanded_row, in double) within float rounding. Tolerances come from the arithmetic, as in kernels_test.cpp:
// float32 on both sides, sums in another order.
#include "model/mla.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "codec/quantize.h"
#include "cuda/mla_forward.h"
#include "cuda_test_util.h"
#include "kv/kv_layout.h"
#include "ops/matmul.h"
#include "ops/ops.h"
#include "test_util.h"

namespace seedling {

namespace {

using test::DeviceVec;

constexpr double kU = 1.0 / 16777216.0;  // 2^-24, float32 unit roundoff

// (heads, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim)
using Dims = std::tuple<int, int, int, int, int>;

// The plan of these dimensions (the softmax scale 1 / sqrt(rank + rope): scores of size about 1 for inputs of size 1)
// and the kernels' shape of it, as the CUDA forward makes it (mla_forward.h).
MlaPlan plan_of(const Dims& d, bool interleave = true) {
  MlaPlan m;
  std::tie(std::ignore, m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim) = d;
  m.rope_interleave = interleave;
  m.softmax_scale = 1.0f / std::sqrt(float(m.cache_width()));
  return m;
}
cuda::MlaShape shape_of(const Dims& d, bool interleave = true) {
  return cuda::mla_shape(plan_of(d, interleave), std::get<0>(d));
}

std::string dims_name(const Dims& d) {
  const auto [h, r, n, ro, v] = d;
  return fmt::format("h{}_r{}_n{}_ro{}_v{}", h, r, n, ro, v);
}

// kv_b (heads x (nope + v) rows of rank) in `codec` from random floats of size sd, or random blocks of a ggml codec
// (a GGUF's attn_kv_b: values within about 0.1).
std::vector<uint8_t> kv_b_bytes(Codec c, const cuda::MlaShape& s, uint32_t seed, float sd) {
  const int64_t rows = int64_t(s.heads) * (s.nope + s.v);
  if (codec_is_ggml(c)) return test::encoded(c, rows, s.rank, seed);
  const std::vector<float> w = test::gaussian(size_t(rows * s.rank), seed, sd);
  std::vector<uint8_t> out(codec_matrix_bytes(c, rows, s.rank));
  encode_matrix(c, DType::F32, w.data(), rows, s.rank, out.data());
  return out;
}

ops::Rope rope_table(int d, float scaling) {
  ops::Rope r;
  r.rotary_dim = d;
  r.attention_scaling = scaling;
  for (int i = 0; i < d / 2; ++i) r.inv_freq.push_back(1.0f / std::pow(10000.0f, float(2 * i) / float(d)));
  return r;
}

// Where the CUDA forward keeps the latent rows of 2 MLA layers (kv/kv_layout.h): layer l's from base(l) * cap.
KvRowLayout latent_layout(int width) {
  const KvLayerShape latent{width, 0, 0};
  return KvRowLayout(std::vector<KvLayerShape>{latent, latent});
}

// A sequence's latent cache of those 2 layers, random rows.
struct LatentCache {
  int cap = 0, width = 0;
  std::vector<float> host;
  const float* layer(int l) const { return host.data() + latent_layout(width).row(l, false, cap, 0); }
};
LatentCache latent_cache(int cap, int width, uint32_t seed) {
  return {cap, width, test::gaussian(size_t(latent_layout(width).per_position()) * size_t(cap), seed)};
}

}  // namespace

class CudaMlaTest : public ::testing::TestWithParam<Dims> {};

// The latent RMS-normed over rank, the rope key and each head's query rope part rotated (interleaved pairs or
// rotate-half, cos and sin scaled as YaRN's attention scaling does), the row written at its position of its cache;
// the query's nope parts and every other cache position untouched.
TEST_P(CudaMlaTest, RopeAndCacheWriteMatchCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<int> pos = {0, 1, 17, 511, 3000};
  const int rows = int(pos.size()), cap = 3001, layer = 1;
  for (const bool interleave : {true, false}) {
    for (const float scaling : {1.0f, 1.3f}) {
      const cuda::MlaShape s = shape_of(GetParam(), interleave);
      const MlaPlan m = plan_of(GetParam(), interleave);
      const ops::Rope rope = rope_table(s.rope, scaling);
      const int w = s.width(), qh = s.q_head();
      const std::vector<float> q = test::gaussian(size_t(rows * s.heads * qh), 1, 2.0f),
                               kv = test::gaussian(size_t(rows * w), 2, 2.0f), norm = test::gaussian(size_t(s.rank), 3);
      std::vector<float> want_q = q, want_kv = kv;
      for (int r = 0; r < rows; ++r) {
        float* c = want_kv.data() + r * w;
        ops::rms_norm(c, 1, s.rank, norm.data(), 1e-6f);
        mla_rope(c + s.rank, pos[size_t(r)], m, rope);
        for (int h = 0; h < s.heads; ++h)
          mla_rope(want_q.data() + (r * s.heads + h) * qh + s.nope, pos[size_t(r)], m, rope);
      }
      const KvRowLayout layout = latent_layout(w);
      DeviceVec<float> dq(q), dkv(kv), dn(norm), df(rope.inv_freq),
          cache(test::poisoned(size_t(layout.per_position() * cap)));
      std::vector<cuda::KvRow> kr;
      for (int r = 0; r < rows; ++r) kr.push_back({cache.get(), cap, pos[size_t(r)]});
      DeviceVec<cuda::KvRow> drows(kr);
      DeviceVec<int> dp(pos);
      cuda::mla_rope_cache(dq.get(), dkv.get(), rows, s, dn.get(), 1e-6f, dp.get(), df.get(), scaling, drows.get(),
                           layout.base(layer), nullptr);
      const std::vector<float> got_q = dq.download(), got_kv = dkv.download(), c = cache.download();
      const std::string what =
          std::string(interleave ? "interleaved" : "rotate-half") + " scaling " + std::to_string(scaling);
      // RoPE: cosf/sinf within 2 ulps of the C library's, two products and a sum of the pair, times scaling: bounded
      // by (rope + 16) u of the rope part's largest magnitude.
      auto rope_bound = [&](const float* part) {
        double mx = 0;
        for (int j = 0; j < s.rope; ++j) mx = std::max(mx, std::fabs(double(part[j])));
        return (double(s.rope) + 16) * kU * 2 * mx * scaling + 1e-30;
      };
      for (int r = 0; r < rows; ++r) {
        for (int h = 0; h < s.heads; ++h) {
          const size_t at = size_t((r * s.heads + h) * qh);
          for (int j = 0; j < s.nope; ++j) ASSERT_EQ(got_q[at + size_t(j)], q[at + size_t(j)]) << what << " nope";
          const double b = rope_bound(want_q.data() + at + s.nope);
          for (int j = s.nope; j < qh; ++j) {
            ASSERT_NEAR(got_q[at + size_t(j)], want_q[at + size_t(j)], b) << what << " row " << r << " head " << h;
          }
        }
        const size_t at = size_t(r * w);
        // The norm: a sum of rank squares in float (relative (rank + 8) u), its inverse square root, two products.
        for (int j = 0; j < s.rank; ++j) {
          ASSERT_NEAR(got_kv[at + size_t(j)], want_kv[at + size_t(j)],
                      (double(s.rank) + 8) * kU * std::fabs(want_kv[at + size_t(j)]) + 1e-30)
              << what << " latent, row " << r;
        }
        const double b = rope_bound(want_kv.data() + at + s.rank);
        for (int j = s.rank; j < w; ++j) {
          ASSERT_NEAR(got_kv[at + size_t(j)], want_kv[at + size_t(j)], b) << what << " rope key, row " << r;
        }
        const size_t row_at = size_t(layout.row(layer, false, cap, pos[size_t(r)]));
        for (int j = 0; j < w; ++j) ASSERT_EQ(c[row_at + size_t(j)], got_kv[at + size_t(j)]) << what << " cached";
      }
      int64_t written = 0;
      for (const float v : c) written += v != 1e30f;
      EXPECT_EQ(written, int64_t(rows) * w) << what << ": only the rows' positions of their layer are written";
    }
  }
}

// The absorbed query against the CPU's absorption matrix (mla_absorbed_keys, kv_b's nope rows transposed to float32)
// in double: kv_b read down its columns in each codec the kernel reads (affine, FP8 and ggml weights widened exactly
// as codec_value; a GGUF's Q4_0, Q8_0 and Q4_K where the rank is whole blocks), 11 rows (a partial tile of 8), the rope
// part copied exactly; a row alone gets its bits in the batch.
TEST_P(CudaMlaTest, AbsorbedQueryMatchesCpuAbsorptionMatrix) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const cuda::MlaShape s = shape_of(GetParam());
  const MlaPlan m = plan_of(GetParam());
  const int rows = 11, w = s.width(), qh = s.q_head();
  const int64_t kv_rows = int64_t(s.heads) * (s.nope + s.v);
  const std::vector<float> q = test::gaussian(size_t(rows * s.heads * qh), 4);
  for (const Codec c :
       {Codec::F32, Codec::BF16, Codec::Q8_G32, Codec::Q4_G64, Codec::FP8_G32, Codec::Q4_0, Codec::Q8_0, Codec::Q4_K}) {
    if (s.rank % codec_group(c) != 0) continue;  // a ggml block never spans two rows
    const std::vector<uint8_t> wb = kv_b_bytes(c, s, 5, 0.3f);
    const ops::Matrix kv_b(c, wb.data(), kv_rows, s.rank);
    const std::vector<float> absorb = mla_absorbed_keys(kv_b, s.heads, m);  // [heads][rank][nope]
    DeviceVec<uint8_t> dw(wb);
    DeviceVec<float> dq(q), dout(test::poisoned(size_t(rows * s.heads * w))),
        dalone(test::poisoned(size_t(s.heads * w)));
    const cuda::DeviceMatrix dm{c, dw.get(), kv_rows, s.rank};
    cuda::mla_absorb_query(dq.get(), rows, dm, s, dout.get(), nullptr);
    cuda::mla_absorb_query(dq.get() + 9 * s.heads * qh, 1, dm, s, dalone.get(), nullptr);
    const std::vector<float> got = dout.download(), alone = dalone.download();
    for (int i = 0; i < rows; ++i) {
      for (int h = 0; h < s.heads; ++h) {
        const float* qn = q.data() + (i * s.heads + h) * qh;
        const size_t at = size_t((i * s.heads + h) * w);
        for (int r = 0; r < s.rank; ++r) {
          double want = 0, abs = 0;
          for (int j = 0; j < s.nope; ++j) {
            const double t =
                double(absorb[(size_t(h) * size_t(s.rank) + size_t(r)) * size_t(s.nope) + size_t(j)]) * double(qn[j]);
            want += t;
            abs += std::fabs(t);
          }
          ASSERT_NEAR(got[at + size_t(r)], want, (double(s.nope) + 8) * kU * abs + 1e-30)
              << codec_name(c) << " row " << i << " head " << h << " dim " << r;
        }
        for (int j = 0; j < s.rope; ++j) ASSERT_EQ(got[at + size_t(s.rank + j)], qn[s.nope + j]) << "rope part";
      }
    }
    for (int j = 0; j < s.heads * w; ++j)
      ASSERT_EQ(alone[size_t(j)], got[size_t(9 * s.heads * w + j)]) << codec_name(c);
  }
}

// Latent attention against mla_latent_head row by row and head by head, over caches of several (position, capacity):
// one key; splits of one tile; splits of 2 tiles with the last partial (700 of 701); a cache far larger than its row
// (a graph's: empty splits); 3,000 positions (splits of 192 keys). Then its invariants: a second launch merges to the
// same bits (the counters are back at zero), a row alone gets its bits in the batch, and rows in launches of 2 get the
// bits of one launch.
TEST_P(CudaMlaTest, LatentAttentionMatchesCpuAndEachRowAlone) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const cuda::MlaShape s = shape_of(GetParam());
  const MlaPlan m = plan_of(GetParam());
  const int w = s.width(), layer = 1;
  const std::vector<std::pair<int, int>> pos_cap = {{0, 1}, {40, 64}, {700, 701}, {100, 4096}, {2999, 3000}};
  const int n = int(pos_cap.size());
  std::vector<LatentCache> caches;
  std::vector<std::unique_ptr<DeviceVec<float>>> dcaches;
  std::vector<cuda::KvRow> kr;
  for (int r = 0; r < n; ++r) {
    caches.push_back(latent_cache(pos_cap[size_t(r)].second, w, uint32_t(10 + r)));
    dcaches.push_back(std::make_unique<DeviceVec<float>>(caches.back().host));
    kr.push_back({dcaches.back()->get(), caches.back().cap, pos_cap[size_t(r)].first});
  }
  const std::vector<float> q_abs = test::gaussian(size_t(n * s.heads * w), 20);
  DeviceVec<cuda::KvRow> drows(kr);
  DeviceVec<float> dq(q_abs);
  const size_t lat_n = size_t(n * s.heads * s.rank);
  auto run = [&](int64_t rows, int64_t per_launch, int first) {
    DeviceVec<float> lat(test::poisoned(size_t(rows * s.heads * s.rank)));
    DeviceVec<float> scratch(size_t(cuda::mla_attention_scratch_floats(per_launch, s)));
    DeviceVec<int> counters(std::vector<int>(size_t(cuda::mla_attention_counters(per_launch, s)), 0));
    for (int rep = 0; rep < 2; ++rep) {  // twice on the same counters: the second launch must merge as well
      cuda::mla_attention(dq.get() + size_t(first * s.heads * w), rows, drows.get() + first,
                          latent_layout(w).base(layer), s, lat.get(), scratch.get(), counters.get(), per_launch,
                          nullptr);
    }
    EXPECT_EQ(counters.download(), std::vector<int>(size_t(cuda::mla_attention_counters(per_launch, s)), 0));
    return lat.download();
  };
  const std::vector<float> got = run(n, n, 0);
  ASSERT_EQ(got.size(), lat_n);
  for (int i = 0; i < n; ++i) {
    const int p = pos_cap[size_t(i)].first;
    std::vector<float> want(size_t(s.rank)), scratch(size_t(p + 1));
    for (int h = 0; h < s.heads; ++h) {
      mla_latent_head(q_abs.data() + (i * s.heads + h) * w, caches[size_t(i)].layer(layer), 0, p, m, want.data(),
                      scratch.data());
      for (int r = 0; r < s.rank; ++r) {
        // A convex combination of latents of size about 1: float32 softmax and sums in another order.
        ASSERT_NEAR(got[size_t((i * s.heads + h) * s.rank + r)], want[size_t(r)], 2e-5)
            << "row " << i << " (position " << p << ") head " << h << " dim " << r;
      }
    }
  }
  const std::vector<float> alone = run(1, 1, 3);
  for (int j = 0; j < s.heads * s.rank; ++j) ASSERT_EQ(alone[size_t(j)], got[size_t(3 * s.heads * s.rank + j)]);
  EXPECT_EQ(run(n, 2, 0), got) << "launches of 2 rows";
}

// The value rows: att[i][h * v + j] = W_UV[h] row j . lat[i][h] against ops::ref::matmul of head h's value rows, in
// the float, FP8 and offset-free ggml codecs (Q4_0, Q8_0: d * sum(q x), whose rounding scales with |w x|; the affine
// and K-quant codecs' factored sums are lane_dot's, held to the CPU in kernels_test.cpp), 6 rows (a full launch row
// tile of 4 and a partial one); the ggml ones where the rank is whole blocks.
TEST_P(CudaMlaTest, ValueRowsMatchCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const cuda::MlaShape s = shape_of(GetParam());
  const int rows = 6;
  const int64_t kv_rows = int64_t(s.heads) * (s.nope + s.v);
  const std::vector<float> lat = test::gaussian(size_t(rows * s.heads * s.rank), 6);
  for (const Codec c : {Codec::F32, Codec::BF16, Codec::FP8_G32, Codec::Q4_0, Codec::Q8_0}) {
    if (s.rank % codec_group(c) != 0) continue;
    const std::vector<uint8_t> wb = kv_b_bytes(c, s, 7, 0.3f);
    const ops::Matrix kv_b(c, wb.data(), kv_rows, s.rank);
    DeviceVec<uint8_t> dw = test::device_weights(c, wb, kv_rows, s.rank);
    DeviceVec<float> dl(lat), dout(test::poisoned(size_t(rows * s.heads * s.v)));
    cuda::mla_value(dl.get(), rows, {c, dw.get(), kv_rows, s.rank}, s, dout.get(), nullptr);
    const std::vector<float> got = dout.download();
    for (int h = 0; h < s.heads; ++h) {
      const ops::Matrix wv = kv_b.row_slice(int64_t(h) * (s.nope + s.v) + s.nope, s.v);
      for (int i = 0; i < rows; ++i) {
        const float* x = lat.data() + (i * s.heads + h) * s.rank;
        std::vector<float> want(size_t(s.v));
        ops::ref::matmul(x, 1, wv, want.data());
        for (int j = 0; j < s.v; ++j) {
          double abs = 0;
          for (int r = 0; r < s.rank; ++r) abs += std::fabs(double(x[r]) * double(wv.at(j, r)));
          ASSERT_NEAR(got[size_t(i * s.heads * s.v + h * s.v + j)], want[size_t(j)],
                      (double(s.rank) + 8) * kU * abs + 1e-30)
              << codec_name(c) << " row " << i << " head " << h << " dim " << j;
        }
      }
    }
  }
}

// The three kernels together (absorbed query, latent attention, value rows), as the CUDA forward runs every row,
// against the expanded attention transformers computes (keys and values from kv_b per position, in double) and
// against the CPU forward's absorbed row: within float rounding, with kv_b in bf16 and in FP8 (DeepSeek's release).
TEST_P(CudaMlaTest, AbsorbedOnTheDeviceEqualsExpandedWithinFloatRounding) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const cuda::MlaShape s = shape_of(GetParam());
  const MlaPlan m = plan_of(GetParam());
  const int w = s.width(), qh = s.q_head(), layer = 0;
  const int64_t kv_rows = int64_t(s.heads) * (s.nope + s.v);
  const std::vector<int> last = {0, 1, 17, 129};
  const int n = int(last.size()), cap = 130;
  const LatentCache cache = latent_cache(cap, w, 30);
  const std::vector<float> q = test::gaussian(size_t(n * s.heads * qh), 31);
  DeviceVec<float> dcache(cache.host), dq(q);
  std::vector<cuda::KvRow> kr;
  for (int i = 0; i < n; ++i) kr.push_back({dcache.get(), cap, last[size_t(i)]});
  DeviceVec<cuda::KvRow> drows(kr);
  for (const Codec c : {Codec::BF16, Codec::FP8_G32}) {
    // kv_b of size 0.3 sqrt(64 / rank): values of size 2.4 and scores of size 1-2 at every rank, as in mla_test.cpp.
    const std::vector<uint8_t> wb = kv_b_bytes(c, s, 32, 0.3f * std::sqrt(64.0f / float(s.rank)));
    const ops::Matrix kv_b(c, wb.data(), kv_rows, s.rank);
    const std::vector<float> absorb = mla_absorbed_keys(kv_b, s.heads, m);
    DeviceVec<uint8_t> dw = test::device_weights(c, wb, kv_rows, s.rank);
    const cuda::DeviceMatrix dm{c, dw.get(), kv_rows, s.rank};
    DeviceVec<float> q_abs(size_t(n * s.heads * w)), lat(size_t(n * s.heads * s.rank)),
        att(test::poisoned(size_t(n * s.heads * s.v)));
    DeviceVec<float> scratch(size_t(cuda::mla_attention_scratch_floats(n, s)));
    DeviceVec<int> counters(std::vector<int>(size_t(cuda::mla_attention_counters(n, s)), 0));
    cuda::mla_absorb_query(dq.get(), n, dm, s, q_abs.get(), nullptr);
    cuda::mla_attention(q_abs.get(), n, drows.get(), latent_layout(w).base(layer), s, lat.get(), scratch.get(),
                        counters.get(), n, nullptr);
    cuda::mla_value(lat.get(), n, dm, s, att.get(), nullptr);
    const std::vector<float> got = att.download();
    for (int i = 0; i < n; ++i) {
      std::vector<float> expanded(size_t(s.heads * s.v)), absorbed(expanded.size());
      const float* qi = q.data() + i * s.heads * qh;
      mla_expanded_row(qi, cache.layer(layer), last[size_t(i)], kv_b, s.heads, m, expanded.data());
      mla_absorbed_row(qi, cache.layer(layer), last[size_t(i)], kv_b, absorb, s.heads, m, absorbed.data());
      // Outputs are softmax-weighted means of values of size ~ 2.4, scores sums of rank + rope float32 products:
      // rounding of order 1e-6 relative (mla_test.cpp's reasoning); 1e-4 has room, a wrong head, pair or scale is off
      // by O(1).
      for (size_t j = 0; j < expanded.size(); ++j) {
        ASSERT_NEAR(got[size_t(i) * expanded.size() + j], expanded[j], 1e-4)
            << codec_name(c) << " row " << i << " out " << j << ": against the expanded form";
        ASSERT_NEAR(got[size_t(i) * expanded.size() + j], absorbed[j], 1e-4)
            << codec_name(c) << " row " << i << " out " << j << ": against the CPU's absorbed row";
      }
    }
  }
}

// deepseek_v3_a's widths; an odd shape (10 heads: a group of 8 and one of 2; a cache row of 78 floats, not 16-byte
// aligned: plain loads); DeepSeek-V3's widths with 16 of its 128 heads (rank 512: two latent dims a thread, a row of
// 576 floats: 92 KB of shared memory a block); rank 600 (four dims a thread).
INSTANTIATE_TEST_SUITE_P(Shapes, CudaMlaTest,
                         ::testing::Values(Dims{4, 32, 16, 8, 16}, Dims{10, 72, 24, 6, 20}, Dims{16, 512, 128, 64, 128},
                                           Dims{3, 600, 32, 8, 16}),
                         [](const auto& info) { return dims_name(info.param); });

// Shapes the kernels cannot run are one clear error each, before any launch: kv_b of another shape than the plan's,
// a rope part wider than 512.
TEST(CudaMla, ShapesTheKernelsCannotRunAreClearErrors) {
  const cuda::MlaShape s = shape_of(Dims{4, 32, 16, 8, 16});
  const std::string e1 = test::error_of([&] {
    cuda::mla_absorb_query(nullptr, 1, {Codec::BF16, nullptr, 4 * 31, 32}, s, nullptr, nullptr);
  });
  EXPECT_NE(e1.find("mla_absorb_query: kv_b is 124 x 32, expected 4 heads x (16 + 16) rows of 32"), std::string::npos)
      << e1;
  const std::string e2 = test::error_of([&] {
    cuda::mla_value(nullptr, 1, {Codec::BF16, nullptr, 4 * 32, 33}, s, nullptr, nullptr);
  });
  EXPECT_NE(e2.find("mla_value: kv_b is 128 x 33"), std::string::npos) << e2;
  cuda::MlaShape wide = s;
  wide.rope = 514;
  const std::string e3 = test::error_of([&] {
    cuda::mla_rope_cache(nullptr, nullptr, 1, wide, nullptr, 0.0f, nullptr, nullptr, 1.0f, nullptr, 0, nullptr);
  });
  EXPECT_NE(e3.find("at most 512"), std::string::npos) << e3;
}

}  // namespace seedling
