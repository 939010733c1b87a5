// model/mla.cpp - multi-head latent attention on the CPU (model/mla.h): Model::mla_attention and its pieces.
//
// Every row, prompt or decode, runs the absorbed form, so a position's logits are the same bits whether it came in a
// prompt or decoded alone, batched or not (tests/unit/engine/decode_test.cpp); the expanded form is the reference.
#include "model/mla.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "ops/matmul.h"

namespace seedling {

std::vector<float> mla_absorbed_keys(const ops::Matrix& kv_b, int heads, const MlaPlan& m) {
  const int r = m.kv_lora_rank, dn = m.qk_nope_head_dim, per = dn + m.v_head_dim;
  SEEDLING_CHECK(kv_b.rows == int64_t(heads) * per && kv_b.cols == r, "kv_b is {} x {}", kv_b.rows, kv_b.cols);
  std::vector<float> out(size_t(heads) * size_t(r) * size_t(dn));
  std::vector<float> row(static_cast<size_t>(r));
  for (int h = 0; h < heads; ++h) {
    for (int j = 0; j < dn; ++j) {
      const ops::Matrix one = kv_b.row_slice(int64_t(h) * per + j, 1);
      for (int c = 0; c < r; ++c) row[size_t(c)] = one.at(0, c);
      for (int c = 0; c < r; ++c) out[(size_t(h) * size_t(r) + size_t(c)) * size_t(dn) + size_t(j)] = row[size_t(c)];
    }
  }
  return out;
}

void mla_rope(float* x, int pos, const MlaPlan& m, const ops::Rope& rope) {
  const int d = m.qk_rope_head_dim, half = d / 2;
  if (m.rope_interleave) {  // (x0, x1), (x2, x3), ... -> x0, x2, ..., x1, x3, ...: then rotate_half's pairs
    float tmp[512];
    SEEDLING_CHECK(d <= 512, "qk_rope_head_dim {} over 512", d);
    for (int i = 0; i < half; ++i) {
      tmp[i] = x[2 * i];
      tmp[half + i] = x[2 * i + 1];
    }
    std::copy_n(tmp, d, x);
  }
  ops::apply_rope(x, 1, d, pos, rope);
}

void mla_latent_head(const float* q_abs, const float* cache, int first, int last, const MlaPlan& m, float* out_lat,
                     float* scratch) {
  const int r = m.kv_lora_rank, w = m.cache_width(), n = last - first + 1;
  float mx = -INFINITY;
  for (int j = 0; j < n; ++j) {
    scratch[j] = ops::dot(q_abs, cache + int64_t(first + j) * w, w) * m.softmax_scale;
    mx = std::max(mx, scratch[j]);
  }
  float sum = 0.0f;
  for (int j = 0; j < n; ++j) {
    scratch[j] = std::exp(scratch[j] - mx);
    sum = sum + scratch[j];
  }
  std::fill(out_lat, out_lat + r, 0.0f);
  for (int j = 0; j < n; ++j) ops::axpy(scratch[j] / sum, cache + int64_t(first + j) * w, out_lat, r);
}

namespace {

// Head h's value rows of kv_b: W_UV[h] (v x rank).
ops::Matrix value_rows(const ops::Matrix& kv_b, int h, const MlaPlan& m) {
  const int per = m.qk_nope_head_dim + m.v_head_dim;
  return kv_b.row_slice(int64_t(h) * per + m.qk_nope_head_dim, m.v_head_dim);
}

ops::Matrix absorb_matrix(const std::vector<float>& k_absorb, int h, const MlaPlan& m) {
  const int64_t r = m.kv_lora_rank, dn = m.qk_nope_head_dim;
  return {Codec::F32, k_absorb.data() + size_t(h) * size_t(r * dn), r, dn};
}

}  // namespace

void mla_absorbed_row(const float* q, const float* cache, int last, const ops::Matrix& kv_b,
                      const std::vector<float>& k_absorb, int heads, const MlaPlan& m, float* out) {
  const int r = m.kv_lora_rank, dn = m.qk_nope_head_dim, dr = m.qk_rope_head_dim, qh = dn + dr;
  std::vector<float> q_abs(size_t(r + dr)), lat(static_cast<size_t>(r)), scratch(static_cast<size_t>(last + 1));
  for (int h = 0; h < heads; ++h) {
    ops::matmul(q + h * qh, 1, absorb_matrix(k_absorb, h, m), q_abs.data());
    std::copy_n(q + h * qh + dn, dr, q_abs.data() + r);
    mla_latent_head(q_abs.data(), cache, 0, last, m, lat.data(), scratch.data());
    ops::matmul(lat.data(), 1, value_rows(kv_b, h, m), out + h * m.v_head_dim);
  }
}

void mla_expanded_row(const float* q, const float* cache, int last, const ops::Matrix& kv_b, int heads,
                      const MlaPlan& m, float* out) {
  const int r = m.kv_lora_rank, dn = m.qk_nope_head_dim, dr = m.qk_rope_head_dim, dv = m.v_head_dim;
  const int qh = dn + dr, per = dn + dv, w = m.cache_width(), n = last + 1;
  std::vector<double> kv(size_t(n) * size_t(heads) * size_t(per)), s(static_cast<size_t>(n));
  for (int t = 0; t < n; ++t) {  // kv_b(latent): every head's nope key and value at every position
    for (int o = 0; o < heads * per; ++o) {
      double acc = 0.0;
      for (int c = 0; c < r; ++c) acc += double(kv_b.at(o, c)) * double(cache[int64_t(t) * w + c]);
      kv[(size_t(t) * size_t(heads * per)) + size_t(o)] = acc;
    }
  }
  for (int h = 0; h < heads; ++h) {
    double mx = -INFINITY;
    for (int t = 0; t < n; ++t) {
      const double* k = kv.data() + size_t(t) * size_t(heads * per) + size_t(h * per);
      double acc = 0.0;
      for (int j = 0; j < dn; ++j) acc += double(q[h * qh + j]) * k[j];
      for (int j = 0; j < dr; ++j) acc += double(q[h * qh + dn + j]) * double(cache[int64_t(t) * w + r + j]);
      s[size_t(t)] = acc * double(m.softmax_scale);
      mx = std::max(mx, s[size_t(t)]);
    }
    double sum = 0.0;
    for (int t = 0; t < n; ++t) sum += (s[size_t(t)] = std::exp(s[size_t(t)] - mx));
    for (int j = 0; j < dv; ++j) {
      double acc = 0.0;
      for (int t = 0; t < n; ++t) acc += s[size_t(t)] * kv[size_t(t) * size_t(heads * per) + size_t(h * per + dn + j)];
      out[h * dv + j] = float(acc / sum);
    }
  }
}

void Model::mla_attention(int layer, std::span<const BatchRow> rows, const float* xn, float* out) {
  const ModelConfig& c = config_;
  const LayerWeights& lw = w_.layers[size_t(layer)];
  const MlaPlan& m = c.plan(layer).mla;
  const int64_t M = int64_t(rows.size()), H = c.hidden_size;
  const int heads = c.num_heads, r = m.kv_lora_rank, dn = m.qk_nope_head_dim, dr = m.qk_rope_head_dim;
  const int dv = m.v_head_dim, qh = dn + dr, w = m.cache_width();
  const int64_t Q = int64_t(heads) * qh;
  std::vector<float> q(size_t(M * Q)), ckv(size_t(M * w));
  if (activation_observer_ != nullptr) activation_observer_->on_input(layer, MatrixInput::AttnQkv, -1, xn, M, H);
  if (m.q_lora_rank > 0) {  // q_a_proj -> q_a_layernorm -> q_b_proj
    std::vector<float> qa(size_t(M * m.q_lora_rank));
    ops::matmul(xn, M, lw.mla_q_a, qa.data());
    ops::rms_norm(qa.data(), M, m.q_lora_rank, lw.mla_q_a_norm.data(), c.rms_norm_eps);
    ops::matmul(qa.data(), M, lw.mla_q_b, q.data());
  } else {
    ops::matmul(xn, M, lw.q, q.data());
  }
  ops::matmul(xn, M, lw.mla_kv_a, ckv.data());  // (M, rank + rope): latent, rope key
  for (int64_t i = 0; i < M; ++i) {
    const BatchRow& row = rows[size_t(i)];
    float* ci = ckv.data() + i * w;
    ops::rms_norm(ci, 1, r, lw.mla_kv_a_norm.data(), c.rms_norm_eps);
    mla_rope(ci + r, row.pos, m, rope_);
    for (int h = 0; h < heads; ++h) mla_rope(q.data() + i * Q + h * qh + dn, row.pos, m, rope_);
    SEEDLING_CHECK(row.pos < row.kv->capacity(), "position {} beyond KV capacity {}", row.pos, row.kv->capacity());
    std::copy_n(ci, w, row.kv->keys(layer) + int64_t(row.pos) * w);
  }
  // The absorbed queries [heads][M][rank + rope]: W_UK[h]^T q_nope (one product per head over the rows), q_rope.
  std::vector<float> qn(size_t(M * dn)), qa(size_t(M * r)), q_abs(size_t(heads) * size_t(M * w));
  for (int h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < M; ++i) std::copy_n(q.data() + i * Q + h * qh, dn, qn.data() + i * dn);
    ops::matmul(qn.data(), M, absorb_matrix(lw.mla_k_absorb, h, m), qa.data());
    for (int64_t i = 0; i < M; ++i) {
      float* dst = q_abs.data() + (size_t(h) * size_t(M) + size_t(i)) * size_t(w);
      std::copy_n(qa.data() + i * r, r, dst);
      std::copy_n(q.data() + i * Q + h * qh + dn, dr, dst + r);
    }
  }
  std::vector<float> lat(size_t(heads) * size_t(M * r));  // [heads][M][rank]
  ThreadPool::global().parallel_for(size_t(M * heads), 1, [&](size_t b, size_t e) {
    std::vector<float> scratch;
    for (size_t it = b; it < e; ++it) {
      const int64_t i = int64_t(it) / heads;
      const int h = int(int64_t(it) % heads);
      const BatchRow& row = rows[size_t(i)];
      scratch.resize(size_t(row.pos + 1));
      const size_t at = size_t(h) * size_t(M) + size_t(i);
      mla_latent_head(q_abs.data() + at * size_t(w), row.kv->keys(layer), 0, row.pos, m, lat.data() + at * size_t(r),
                      scratch.data());
    }
  });
  // W_UV[h] times each head's latent sum, into [M][heads * v], then o_proj.
  std::vector<float> vh(size_t(M * dv)), att(size_t(M) * size_t(heads * dv));
  for (int h = 0; h < heads; ++h) {
    ops::matmul(lat.data() + size_t(h) * size_t(M * r), M, value_rows(lw.mla_kv_b, h, m), vh.data());
    for (int64_t i = 0; i < M; ++i) std::copy_n(vh.data() + i * dv, dv, att.data() + i * heads * dv + h * dv);
  }
  if (activation_observer_ != nullptr)
    activation_observer_->on_input(layer, MatrixInput::AttnO, -1, att.data(), M, heads * dv);
  ops::matmul(att.data(), M, lw.o, out);  // (M, H)
}

}  // namespace seedling
