// ops/gated_delta.h - the Gated DeltaNet's sequence ops: the causal depthwise conv1d step, L2 normalisation, and the
// gated delta rule over one value head, token by token (the reference, and the decode path) or in chunks (prompts).
//
// The gated delta rule (transformers' torch_recurrent_gated_delta_rule) keeps a state S (key_dim x value_dim) per
// value head; for each token, with k and q L2-normalised and q scaled by 1/sqrt(key_dim):
//   S = S * exp(g);  u = beta * (v - S^T k);  S = S + k u^T;  out = S^T q.
// The chunked form (torch_chunk_gated_delta_rule, chunks of 64) computes the same in chunks: within a chunk the
// updates form a unit lower-triangular system solved by forward substitution, then the state advances once per
// chunk. Both keep S in float32 between calls and sum in double; they agree within float rounding
// (tests/unit/engine/gated_delta_test.cpp).
#pragma once

#include <cstdint>

namespace seedling::ops {

// One value head's inputs over n consecutive tokens of one sequence, row t at q + t * q_stride, ...
struct DeltaRun {
  const float* q = nullptr;  // key_dim per row: L2-normalised and scaled
  const float* k = nullptr;  // key_dim per row: L2-normalised
  const float* v = nullptr;  // value_dim per row
  const float* g = nullptr;  // the log decay per row (<= 0)
  const float* beta = nullptr;
  float* out = nullptr;  // value_dim per row
  int64_t q_stride = 0, k_stride = 0, v_stride = 0, gb_stride = 1, out_stride = 0;
  int n = 0;
};

// The recurrent form as decode runs it: ref::gated_delta_rule's operations, each output's and each state element's
// sums in the same order (so the same bits), with the loops turned so that every pass walks the state's rows
// contiguously, a whole row of value_dim at a time, and two passes over the state a token instead of four.
void gated_delta_recurrent(const DeltaRun& run, int key_dim, int value_dim, float* state);

// The chunked form: chunks of `chunk` tokens from the run's start; `state` (key_dim x value_dim) advanced.
void gated_delta_chunked(const DeltaRun& run, int key_dim, int value_dim, float* state, int chunk = 64);

// One token of the causal depthwise conv1d of `channels` channels and kernel `kernel` (weights [channels][kernel],
// PyTorch's conv1d: the oldest input meets w[0]), then SiLU, into out; `window` holds the previous kernel - 1 inputs
// ([kernel - 1][channels], oldest first) and is shifted to end with x. Channels [c0, c1) only (c1 < 0: to the end):
// each channel's output and window are its own, so ranges run apart give the whole step's bits.
void causal_conv1d_silu_step(const float* x, float* window, const float* w, int channels, int kernel, float* out,
                             int c0 = 0, int c1 = -1);

// x = x / sqrt(sum(x^2) + eps), then times scale (transformers' l2norm, eps 1e-6).
void l2_normalize(float* x, int n, float eps, float scale);

// log(1 + exp(x)), as torch's softplus (x past 20 returned as is).
double softplus(double x);

// qwen3_next's grouped projections put in order: qkvz holds m rows of, per key head, [q (key_dim), k (key_dim), v
// (r x value_dim), z (r x value_dim)], ba per key head [b (r), a (r)], r = value_heads / key_heads; into mixed (m rows
// of q, k, v: 2 key_heads x key_dim + value_heads x value_dim), z (m x value_heads * value_dim), b and a (m x
// value_heads).
void ungroup_qkvz_ba(const float* qkvz, const float* ba, int64_t m, int key_heads, int value_heads, int key_dim,
                     int value_dim, float* mixed, float* z, float* b, float* a);

// The per-head gates of `rows` rows of `heads` value heads: beta = sigmoid(b) and the log decay
// g = -exp(a_log[h]) * softplus(a + dt_bias[h]) (b, a, beta, g: rows x heads).
void delta_gates(const float* b, const float* a, const float* a_log, const float* dt_bias, int64_t rows, int heads,
                 float* beta, float* g);

namespace ref {
// The recurrent form, token by token: the definition above.
void gated_delta_rule(const DeltaRun& run, int key_dim, int value_dim, float* state);
}  // namespace ref

}  // namespace seedling::ops
