#include "ops/ops.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/matmul.h"

namespace seedling::ops {

void rms_norm_to(const float* x, float* out, int64_t rows, int64_t n, const float* weight, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    // The sum of squares in double, in 8 interleaved partial sums (lane j takes elements j, j + 8, ...) added in a
    // fixed tree, rather than one chain of dependent double adds: a decode runs this on one thread between parallel
    // regions, 3 times a layer (a 4-layer decode's row steps 47 -> 36 us a token on one Zen 4 core).
    double part[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      for (int j = 0; j < 8; ++j) part[j] += double(xr[i + j]) * double(xr[i + j]);
    }
    for (int j = 0; i < n; ++i, ++j) part[j] += double(xr[i]) * double(xr[i]);
    const double ss = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
    const float inv = 1.0f / std::sqrt(float(ss / double(n)) + eps);
    for (i = 0; i < n; ++i) o[i] = weight[i] * (xr[i] * inv);
  }
}

void rms_norm(float* x, int64_t rows, int64_t n, const float* weight, float eps) {
  rms_norm_to(x, x, rows, n, weight, eps);
}

namespace {
// cs[i] = cos and cs[half + i] = sin of pos * inv_freq[i], times attention_scaling (rotary_dim floats).
void rope_cos_sin(int pos, const Rope& rope, float* cs) {
  const int half = rope.rotary_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float angle = float(pos) * rope.inv_freq[i];
    cs[i] = std::cos(angle) * rope.attention_scaling;
    cs[half + i] = std::sin(angle) * rope.attention_scaling;
  }
}

void rotate_heads(float* heads, int n_heads, int head_dim, const float* cs, int rotary_dim) {
  const int half = rotary_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = heads + h * head_dim;
    for (int i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half], c = cs[i], s = cs[half + i];
      v[i] = a * c - b * s;
      v[i + half] = b * c + a * s;
    }
  }
}

}  // namespace

void apply_rope(float* heads, int n_heads, int head_dim, int pos, const Rope& rope, float* more, int n_more) {
  thread_local std::vector<float> cs;  // this thread's, reused: every row of every layer comes through here
  cs.resize(size_t(rope.rotary_dim));
  rope_cos_sin(pos, rope, cs.data());
  rotate_heads(heads, n_heads, head_dim, cs.data(), rope.rotary_dim);
  if (more != nullptr) rotate_heads(more, n_more, head_dim, cs.data(), rope.rotary_dim);
}

namespace ref {
void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}
}  // namespace ref

void clamped_swiglu(const float* gate, const float* up, float* out, int64_t n, float alpha, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::min(std::max(up[i], -limit), limit);
    const float glu = g * sigmoid(g * alpha);
    out[i] = (u + 1.0f) * glu;
  }
}

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

void add_to(float* x, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] + b[i];
}

void clamp(float* x, int64_t n, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::min(std::max(x[i], lo), hi);
}

void swiglu_mlp(const float* x, int64_t m, const Matrix& gate, const Matrix& up, const Matrix& down, float* out,
                const MlpObserver& seen) {
  const int64_t I = gate.rows;
  std::vector<float> g(size_t(m * I)), u(size_t(m * I));
  matmul(x, m, gate, g.data());
  matmul(x, m, up, u.data());
  silu_mul(g.data(), u.data(), g.data(), m * I);
  if (seen) seen(g.data());
  matmul(g.data(), m, down, out);
}

void softmax(float* x, int64_t n) {
  const float mx = *std::max_element(x, x + n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = float(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void top_k(const float* x, int n, int k, int* idx) {
  std::vector<int> order(size_t(n), 0);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
  std::copy(order.begin(), order.begin() + k, idx);
}

void group_top_k(const float* scores, const float* bias, int n, int n_group, int topk_group, int k, int* idx,
                 std::vector<float>* scratch, float masked) {
  const int per = n / n_group;
  scratch->assign(size_t(n + 2 * n_group), 0.0f);
  float* choice = scratch->data();
  float* group = choice + n;
  for (int e = 0; e < n; ++e) choice[e] = bias != nullptr ? scores[e] + bias[e] : scores[e];
  for (int gi = 0; gi < n_group; ++gi) {
    int best[2];
    top_k(choice + gi * per, per, 2, best);
    group[gi] = choice[gi * per + best[0]] + choice[gi * per + best[1]];
  }
  std::vector<int> kept(static_cast<size_t>(topk_group));
  top_k(group, n_group, topk_group, kept.data());
  float* keep = group + n_group;  // 1 for a kept group
  for (int gi : kept) keep[gi] = 1.0f;
  for (int e = 0; e < n; ++e) {
    if (keep[e / per] == 0.0f) choice[e] = masked;
  }
  top_k(choice, n, k, idx);
}

void attention_combine(const AttentionShape& s, int h_begin, int h_end, int chunks, const float* o, int64_t o_stride,
                       const float* ml, int64_t ml_stride, float* out) {
  const int D = s.head_dim;
  for (int h = h_begin; h < h_end; ++h) {
    const int64_t i = h - h_begin;
    const float sink = s.sinks != nullptr ? s.sinks[h] : -INFINITY;
    float mx = sink;
    for (int c = 0; c < chunks; ++c) mx = std::max(mx, ml[c * ml_stride + 2 * i]);
    float sum = sink == -INFINITY ? 0.0f : std::exp(sink - mx);
    float* oh = out + int64_t(h) * D;
    std::fill(oh, oh + D, 0.0f);
    for (int c = 0; c < chunks; ++c) {
      const float f = std::exp(ml[c * ml_stride + 2 * i] - mx);
      sum += f * ml[c * ml_stride + 2 * i + 1];
      axpy(f, o + c * o_stride + i * D, oh, D);
    }
    const float inv = 1.0f / sum;
    for (int d = 0; d < D; ++d) oh[d] *= inv;
  }
}

namespace {
// attention_row from a chunk function: each chunk into a thread's buffers, then attention_combine.
template <typename ChunkFn>
void chunked_row(ChunkFn chunk, const float* q, const float* k_cache, const float* v_cache, int first, int last,
                 const AttentionShape& s, int h_begin, int h_end, float* out) {
  const int chunks = attention_chunks(first, last), heads = h_end - h_begin;
  const int64_t o_stride = int64_t(heads) * s.head_dim, ml_stride = 2 * int64_t(heads);
  thread_local std::vector<float> o, ml;
  o.resize(size_t(chunks * o_stride));
  ml.resize(size_t(chunks * ml_stride));
  for (int c = 0; c < chunks; ++c) {
    const int c0 = first + c * kAttentionChunk, c1 = std::min(last, c0 + kAttentionChunk - 1);
    chunk(q, k_cache, v_cache, c0, c1, s, h_begin, h_end, o.data() + c * o_stride, ml.data() + c * ml_stride);
  }
  attention_combine(s, h_begin, h_end, chunks, o.data(), o_stride, ml.data(), ml_stride, out);
}
}  // namespace

void attention_row(const float* q, const float* k_cache, const float* v_cache, int first, int last,
                   const AttentionShape& s, int h_begin, int h_end, float* out) {
  chunked_row(attention_chunk, q, k_cache, v_cache, first, last, s, h_begin, h_end, out);
}

namespace ref {
void attention_chunk(const float* q, const float* k_cache, const float* v_cache, int first, int last,
                     const AttentionShape& s, int h_begin, int h_end, float* o, float* ml) {
  const int group = s.n_heads / s.n_kv_heads;
  const int kv_stride = s.n_kv_heads * s.head_dim;
  const int n = last - first + 1;
  float score[kAttentionChunk];
  for (int h = h_begin; h < h_end; ++h) {
    const int kvh = h / group, i = h - h_begin;
    const float* qh = q + h * s.head_dim;
    float mx = -INFINITY;
    for (int j = 0; j < n; ++j) {
      score[j] = dot(qh, k_cache + int64_t(first + j) * kv_stride + kvh * s.head_dim, s.head_dim) * s.scale;
      mx = std::max(mx, score[j]);
    }
    float sum = 0.0f;
    float* oh = o + int64_t(i) * s.head_dim;
    std::fill(oh, oh + s.head_dim, 0.0f);
    for (int j = 0; j < n; ++j) {
      const float e = std::exp(score[j] - mx);
      sum += e;
      axpy(e, v_cache + int64_t(first + j) * kv_stride + kvh * s.head_dim, oh, s.head_dim);
    }
    ml[2 * i] = mx;
    ml[2 * i + 1] = sum;
  }
}

void attention_row(const float* q, const float* k_cache, const float* v_cache, int first, int last,
                   const AttentionShape& s, int h_begin, int h_end, float* out) {
  chunked_row(attention_chunk, q, k_cache, v_cache, first, last, s, h_begin, h_end, out);
}

}  // namespace ref

}  // namespace seedling::ops
