// ops/ops.h - the small operations of a decoder layer, on float32 rows.
//
// These are plain loops: they cost little next to the matrix products in ops/matmul.h. Attention uses the fast
// dot/axpy of matmul.h; tests/unit/engine/ops_test.cpp holds it against a direct formula.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ops/matrix.h"

namespace seedling::ops {

// x[i] = w[i] * x[i] / sqrt(mean(x^2) + eps), over rows of n elements (the Llama/Qwen RMSNorm, in float32).
void rms_norm(float* x, int64_t rows, int64_t n, const float* weight, float eps);
// Writes the normalised copy of x into out.
void rms_norm_to(const float* x, float* out, int64_t rows, int64_t n, const float* weight, float eps);

// Rotary position embedding in the "rotate half" layout of Hugging Face: pairs (i, i + d/2) of each head,
// angle pos * inv_freq[i]. inv_freq has rotary_dim / 2 entries; dimensions past rotary_dim are left alone.
struct Rope {
  std::vector<float> inv_freq;
  float attention_scaling = 1.0f;  // multiplies cos and sin (1 for default and linear scaling)
  int rotary_dim = 0;
};
// Rotates n_heads heads at position pos, and as many more heads (n_more at `more`: a row's k beside its q) by the same
// angles, computed once; each head's bits are those of rotating it alone.
void apply_rope(float* heads, int n_heads, int head_dim, int pos, const Rope& rope, float* more = nullptr,
                int n_more = 0);

// out[i] = silu(gate[i]) * up[i]: SIMD with a vector exp (ops/activation.cpp), within 2 ulp of ref::silu_mul.
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
namespace ref {
void silu_mul(const float* gate, const float* up, float* out, int64_t n);  // the scalar loop with std::exp
}  // namespace ref
// gpt_oss's activation: g = min(gate[i], limit), out[i] = (clamp(up[i], -limit, limit) + 1) * g * sigmoid(alpha g).
void clamped_swiglu(const float* gate, const float* up, float* out, int64_t n, float alpha, float limit);
// 1 / (1 + exp(-x)), in float.
float sigmoid(float x);
// x[i] = x[i] + b[i]
void add_to(float* x, const float* b, int64_t n);
// x[i] = min(max(x[i], lo), hi)
void clamp(float* x, int64_t n, float lo, float hi);

// A SwiGLU MLP over m rows: out = down(silu(gate x) * up x). `seen`, when set, sees the activation entering down
// (m x width floats) before it is multiplied.
using MlpObserver = std::function<void(const float* activation)>;
void swiglu_mlp(const float* x, int64_t m, const Matrix& gate, const Matrix& up, const Matrix& down, float* out,
                const MlpObserver& seen = {});

// In-place softmax over n values, in float with the max subtracted.
void softmax(float* x, int64_t n);

// Indices of the k largest values, largest first; equal values keep the lower index first.
void top_k(const float* x, int n, int k, int* idx);
// Group-limited top-k (DeepSeek-V3, GLM-4.5): over choice[e] = scores[e] + bias[e] (bias may be null), each of the
// n_group equal groups scores the sum of its two largest choices; the topk_group best groups stay, the others' choices
// become `masked` (0, or -inf as DeepSeek-V3's router), and the k largest choices that remain are the experts,
// largest first (ties: lower index).
void group_top_k(const float* scores, const float* bias, int n, int n_group, int topk_group, int k, int* idx,
                 std::vector<float>* scratch, float masked = 0.0f);

// Causal attention of one query row over keys [first, last] of a cache laid out [pos][kv_heads][head_dim].
// q: [n_heads][head_dim]; out: [n_heads][head_dim]. Query head h reads KV head h / (n_heads / n_kv_heads).
struct AttentionShape {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float scale = 1.0f;
  // [n_heads] or null: head h's softmax also counts one logit sinks[h] in its denominator (attends to nothing).
  const float* sinks = nullptr;
};
// A row's keys go through attention in chunks of kAttentionChunk from `first`: each chunk's softmax is taken against
// the chunk's own largest score (attention_chunk), then the chunks are combined in order (attention_combine).
// attention_row does both, so a long row whose chunks ran on different threads (model/decoder.cpp, at decode) has
// the bits it has when one thread runs it.
inline constexpr int kAttentionChunk = 128;
inline int attention_chunks(int first, int last) {
  return (last - first) / kAttentionChunk + 1;
}
// Computes query heads [h_begin, h_end) only. SIMD (ops/attention.cpp); a row's result depends only on its own
// query and span of keys, never on the batch or the thread count.
void attention_row(const float* q, const float* k_cache, const float* v_cache, int first, int last,
                   const AttentionShape& s, int h_begin, int h_end, float* out);
// One chunk, keys [first, last] (at most kAttentionChunk), for query heads [h_begin, h_end): head h_begin + i's
// unnormalised output o[i * head_dim ...] = sum_j exp(score_j - m) v_j, with ml[2 i] = m, the chunk's largest score,
// and ml[2 i + 1] = sum_j exp(score_j - m). SIMD, as attention_row.
void attention_chunk(const float* q, const float* k_cache, const float* v_cache, int first, int last,
                     const AttentionShape& s, int h_begin, int h_end, float* o, float* ml);
// Heads [h_begin, h_end)'s outputs from `chunks` results of attention_chunk over those heads, in chunk order: chunk
// c's o at o + c * o_stride, its ml at ml + c * ml_stride. The sink (if any) joins the denominator.
void attention_combine(const AttentionShape& s, int h_begin, int h_end, int chunks, const float* o, int64_t o_stride,
                       const float* ml, int64_t ml_stride, float* out);
namespace ref {
// The per-key form attention_row must agree with (to float rounding): per chunk a dot product per key, the
// exponentials against the chunk's largest score, the value rows added in order; then attention_combine.
void attention_row(const float* q, const float* k_cache, const float* v_cache, int first, int last,
                   const AttentionShape& s, int h_begin, int h_end, float* out);
void attention_chunk(const float* q, const float* k_cache, const float* v_cache, int first, int last,
                     const AttentionShape& s, int h_begin, int h_end, float* o, float* ml);
}  // namespace ref

}  // namespace seedling::ops
