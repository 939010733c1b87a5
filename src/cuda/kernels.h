// cuda/kernels.h - the CUDA kernels of one decoder layer, each the device twin of a CPU op in ops/.
//
// Every function launches on `stream` and returns at once; pointers are device memory. Activations, the KV cache
// and every accumulator are float32, and no bf16 rounding happens anywhere in these kernels. Float weights widen
// exactly; an affine block's products are summed as d * sum(q x) + m * sum(x) (lane_dot.cuh, affine_group_dot)
// rather than widening each weight to d * q + m. Results differ from the CPU by float32 rounding only (and
// expf/sinf/cosf's last bits), which the tests in tests/unit/cuda/ bound from the arithmetic. Each output element
// has one fixed order of additions that does not depend on how many rows share the launch, so a row gives the same
// bits alone or in a batch, and each fused decode launch (matvec, router_matvec_topk, expert_down_combine) gives
// the bits of the launches it replaces.
//
// Where they are defined, by concern: products.cu (matmul and the fused decode products), experts.cu, row_ops.cu
// (norms, RoPE, element-wise ops, embedding, top-k), attention_decode.cu and attention_prompt.cu, mla.cu (latent
// attention), gated_delta.cu (the Gated DeltaNet mixer's conv, norms, gates and delta rule), stage_clock.cu,
// runtime.cpp (check, sm_count, kernel_codec_names); the device code they share is in lane_dot.cuh (the codec dots),
// norm_rope_topk.cuh, warp_primitives.cuh and stage_clock.cuh, the host side of a launch in launch.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <string>

#include "cuda/codec_ids.h"

namespace seedling::cuda {

// A weight matrix in device memory, laid out as ops::Matrix: `rows` x `cols`, row-major, in `codec`.
struct DeviceMatrix {
  Codec codec = codec_ids::F32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};

// Whether these kernels read codec c: the float, affine, FP8 (fp8_g32: e4m3 codes widened exactly, times their
// group's float32 scale) and seed codecs (a seed matrix: one slice blob at data, 4-byte aligned; its weights decoded
// exactly as decode_seed_matrix, in registers) and ggml's quant types q8_0 .. iq4_xs (GGUF's blocks as stored, read in
// pieces: ggml_pieces.h; a matrix aligned as check_weight_alignment says), and so do the tensor-core GEMMs (gemm.h);
// and MXFP4 and mxfp4_ggml (17-byte blocks in mxfp4_layout.h's VRAM form, widened exactly), which only the CUDA-core
// products read (matmul, matvec, the expert kernels), not the tensor-core GEMMs. embed reads every one but the seed
// codecs and the two MXFP4s.
bool has_kernel(Codec c);
// The names of the codecs has_kernel accepts, comma-separated (for error messages; runtime.cpp).
std::string kernel_codec_names();

// y[i][n] = sum_k x[i][k] * W[n][k] for m rows (x: m x W.cols, y: m x W.rows); with `accumulate`, y += that sum.
void matmul(const float* x, int64_t m, const DeviceMatrix& w, float* y, bool accumulate, cudaStream_t stream);

// Decode (one row of x): y_i = W_i x (or y_i += with accumulate) for the matrices ws and outputs ys, in one launch
// when they share codec and width (at most 3: q, k and v), each output element summed exactly as matmul sums it.
// With `norm`, x is first RMS-normed with those weights exactly as rms_norm does (inside the launch when the row
// fits in shared memory, kMatvecSharedCols), and the normed row is written to xn_out (required then). biases (one
// per matrix, null for none): y_i = y_i + b_i after the sum and the accumulation, add_bias's operation, in the launch.
constexpr int64_t kMatvecSharedCols = 12288;
void matvec(const float* x, std::span<const DeviceMatrix> ws, std::span<float* const> ys, const float* norm, float eps,
            float* xn_out, bool accumulate, cudaStream_t stream, std::span<const float* const> biases = {});

// The router of one row: logits = router . norm(x) as matvec computes them (xn_out: the normed row), then
// router_topk's softmax and top-k, in the same launch when matvec's is one launch (its last block to finish does
// the top-k; counter: one int, zero before the first call, left at zero by every call). With `also` (a shared
// expert's gate: the same input), also_y = also . norm(x) too, in that launch when it shares the router's codec and
// width.
void router_matvec_topk(const float* x, const DeviceMatrix& router, const float* norm, float eps, float* xn_out,
                        float* logits, int k, bool norm_topk, int* ids, float* weights, int* counter,
                        cudaStream_t stream, const DeviceMatrix* also = nullptr, float* also_y = nullptr);

// x[i] = w * x / sqrt(mean(x^2) + eps), rows of n (out may equal x).
void rms_norm(const float* x, float* out, int64_t rows, int64_t n, const float* weight, float eps, cudaStream_t stream);

// out[i] = silu(gate[i]) * up[i]
void silu_mul(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream);
// x[i][j] += b[j] over rows of n
void add_bias(float* x, const float* b, int64_t rows, int64_t n, cudaStream_t stream);
// x[i] = min(max(x[i], lo), hi) (ops::clamp)
void clamp(float* x, int64_t n, float lo, float hi, cudaStream_t stream);
// x[i][h] += sigmoid(gate[i]) * y[i][h] over rows of n: the shared expert's output y scaled by its gate's logit.
void add_sigmoid_scaled(float* x, const float* y, const float* gate, int64_t rows, int64_t n, cudaStream_t stream);

// Row i of the embedding matrix for token tokens[i], widened to float: x (m x emb.cols).
void embed(const int* tokens, int64_t m, const DeviceMatrix& emb, float* x, cudaStream_t stream);
// Copies rows idx[0..m) of src (rows of n) into dst, packed.
void gather_rows(const float* src, const int* idx, int64_t m, int64_t n, float* dst, cudaStream_t stream);

// Router: per row, softmax over e logits, the k largest (ties: lower index first), their probabilities, divided
// by their sum when norm_topk. ids and weights: m x k.
void router_topk(const float* logits, int64_t m, int e, int k, bool norm_topk, int* ids, float* weights,
                 cudaStream_t stream);
// A router policy (model/config.h's RouterPlan) with its device vectors, as decoder.cpp's route applies it to a
// row's logits: bias added first; then SoftmaxTopK (router_topk's), TopKSoftmax (the k largest logits, a softmax over
// those k) or SigmoidGroupTopK (sigmoid scores; ops::group_top_k over score + correction; the weights are the chosen
// scores; the choices of the groups not kept become `masked`: 0, glm4_moe's, or -inf, deepseek_v3's); renormalised
// (not TopKSoftmax; the sigmoid sums + 1e-20); times scale. Ties: lower index first.
enum class RouteGating : uint8_t { SoftmaxTopK, TopKSoftmax, SigmoidGroupTopK };
struct RouterPolicy {
  RouteGating gating = RouteGating::SoftmaxTopK;
  bool renormalize = true;
  const float* bias = nullptr;        // (e) or null
  const float* correction = nullptr;  // (e) or null: added for the selection only
  int n_group = 1, topk_group = 1;
  float scale = 1.0f;
  float masked = 0.0f;  // SigmoidGroupTopK: what the choices of the groups not kept become
};
// The policy over m rows of e logits (left as they are); one warp a row, 3 * e floats of shared memory (e <= 4096).
void router_route(const float* logits, int64_t m, int e, int k, const RouterPolicy& p, int* ids, float* weights,
                  cudaStream_t stream);
// router_matvec_topk for any router policy: logits as matvec computes them, then router_route's policy p on them
// (its bias included), in the same launch when matvec's is one launch. counter as router_matvec_topk's.
void router_matvec_route(const float* x, const DeviceMatrix& router, const float* norm, float eps, float* xn_out,
                         float* logits, int k, const RouterPolicy& p, int* ids, float* weights, int* counter,
                         cudaStream_t stream);

// Where one layer's experts sit: each expert is one blob [gate (I x H)][up (I x H)][down (H x I)] at table[e]. The
// kernels read blobs in their VRAM form (device_layout.h: MXFP4 rows rearranged, the offsets of device_expert_layout);
// pack_expert_blob writes the packed form, whose layout this struct also describes.
struct ExpertLayout {
  Codec gate_up = codec_ids::F32;
  Codec down = codec_ids::F32;
  int64_t hidden = 0;        // H
  int64_t intermediate = 0;  // I
  size_t up_offset = 0;      // bytes from the blob's start
  size_t down_offset = 0;
  size_t bytes = 0;  // the whole blob, padded
};
// What a layer's experts compute around their products (model/config.h's FfnPlan): biases per expert (expert id's
// slice of each; null: none) on gate and up before the activation and on down after its product, and the
// activation: silu(g) u, or with clamped (gpt_oss) (clamp(u, -limit, limit) + 1) g' sigmoid(alpha g'),
// g' = min(g, limit). The default is plain SwiGLU without biases, the kernels' arithmetic before the plan existed.
struct ExpertMath {
  const float* gate_bias = nullptr;  // (E, I)
  const float* up_bias = nullptr;    // (E, I)
  const float* down_bias = nullptr;  // (E, H)
  bool clamped = false;
  float alpha = 1.702f, limit = 7.0f;
  SEEDLING_HD bool plain() const {
    return gate_bias == nullptr && up_bias == nullptr && down_bias == nullptr && !clamped;
  }
};
// For the pairs j of (row j / k, expert ids[j]) whose expert is present (table[ids[j]] != null; the table has e
// entries): act[j][n] = silu(gate . x[j / k]) * (up . x[j / k]) (or math's biases and activation), act: (m * k) x I.
// Pairs of absent experts are left alone.
void expert_gate_up(const float* x, int64_t m, int k, const int* ids, const uint8_t* const* table, int e,
                    const ExpertLayout& l, float* act, cudaStream_t stream, const ExpertMath& math = {});
// out[j][h] = down . act[j] (+ math's down bias) for the present pairs; out: (m * k) x H.
void expert_down(const float* act, int64_t pairs, const int* ids, const uint8_t* const* table, const ExpertLayout& l,
                 float* out, cudaStream_t stream, const ExpertMath& math = {});
// expert_down then moe_combine, for rows whose k experts are all present: the same bits as the two, in one launch
// when k <= 32 (otherwise the two launches, with scratch: m * k * H floats; it may be null when k <= 32).
void expert_down_combine(const float* act, int64_t m, int k, const int* ids, const float* weights,
                         const uint8_t* const* table, int e, const ExpertLayout& l, float* x, float* scratch,
                         cudaStream_t stream, const ExpertMath& math = {});
// x[i][h] += sum_s weights[i][s] * expert_out[i * k + s][h], s in slot order (as the CPU combine).
void moe_combine(const float* expert_out, const float* weights, int64_t m, int k, int64_t h, float* x,
                 cudaStream_t stream);

// Attention. A sequence's device cache holds its layers one after another (kv/kv_layout.h's KvRowLayout), each
// [planes][cap][width]: an attention layer its keys then its values of kv_heads * head_dim, an MLA layer its latent
// rows, a Gated DeltaNet layer nothing. The kernels reach a layer by its base (KvRowLayout::base: the floats per
// position of the layers before it), which with each row's own capacity says where the layer starts.
struct AttentionShape {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float scale = 1.0f;
  int window = 0;                // 0: all keys; else a row at position p sees keys [max(0, p - window + 1), p]
  const float* sinks = nullptr;  // (n_heads) or null: head h's softmax also counts the logit sinks[h] (gpt_oss)
};
struct KvRow {
  float* cache = nullptr;  // the sequence's whole device cache
  int cap = 0;             // its positions per layer
  int pos = 0;             // this row's position
  // The first row of the layer at `base` (its key rows; an attention layer's value rows follow cap rows later).
  SEEDLING_HD float* layer(int64_t base) const { return cache + base * cap; }
};
// Per row i (m rows of n_heads q heads and n_kv_heads k heads of head_dim): each head RMS-normed over head_dim with
// q_norm / k_norm when given (Qwen3's qk-norm), then rotate-half RoPE of its first rotary_dim dims at pos[i]
// (inv_freq: rotary_dim / 2; scaling multiplies cos and sin), in place; then k and v (m x kv_dim) are written at
// the row's position of the layer at `base` of its cache.
void qk_rope_kv(float* q, float* k, const float* v, int64_t m, int n_heads, int n_kv_heads, int head_dim,
                const float* q_norm, const float* k_norm, float eps, const int* pos, const float* inv_freq,
                int rotary_dim, float scaling, const KvRow* rows, int64_t base, cudaStream_t stream);
// qk_rope_kv's arguments for one decode row (pos[0], rows[0]).
struct QkRope {
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  const float* q_norm = nullptr;  // null: no qk-norm
  const float* k_norm = nullptr;
  float eps = 0.0f;
  const int* pos = nullptr;
  const float* inv_freq = nullptr;
  int rotary_dim = 0;
  float scaling = 1.0f;
  const KvRow* rows = nullptr;
  int64_t base = 0;  // the layer's place in the cache (KvRow::layer)
};
// Decode: matvec of x against w = {q, k, v} with the norm inside (as matvec: xn_out gets the normed row), then
// qk_rope_kv of that row, in one launch where matvec's is one launch and heads are whole blocks of outputs (the last
// block to finish a head finishes it with qk_rope_kv's arithmetic: the same bits as the two launches); otherwise the
// two launches. biases: q/k/v's, added before the norm and RoPE as matvec adds them. SEEDLING_NO_FUSED_ROPE=1 forces
// the two launches (for A/B measurements). head_counters: n_heads + 2 * n_kv_heads ints, zero before the first call
// (every call leaves them at zero). Returns whether it took the one launch.
bool matvec_qkv_rope(const float* x, const DeviceMatrix (&w)[3], float* q, float* k, float* v, const float* norm,
                     float eps, float* xn_out, const QkRope& r, int* head_counters, cudaStream_t stream,
                     std::span<const float* const> biases = {});
// Decode attention (flash decoding): for each listed row, q (rows x n_heads * head_dim) over keys [first, pos] of
// its cache (first from s.window; a sink logit, when given, counted once in the merge's denominator), cut into at most
// 64 splits whose size depends only on the cache's capacity (so a row gets the same bits alone or batched, eagerly or
// in a graph), each walked in tiles of 32 keys with an online softmax; the query heads that share a KV head (up to 8 at
// a time) read each key and value once, and the last split block of each group merges, so it is one launch. head_dim <=
// 256. scratch: decode_attention_scratch_floats(...) floats; counters: n_rows * n_heads ints, zero before the first
// call (every call leaves them at zero again).
int64_t decode_attention_scratch_floats(int64_t n_rows, const AttentionShape& s);
void attention_decode(const float* q, const int* row_ids, int64_t n_rows, const KvRow* rows, int64_t base,
                      const AttentionShape& s, float* out, float* scratch, int* counters, cudaStream_t stream);
// Prompt attention, flash style: n consecutive rows of one sequence at positions p0 .. p0 + n - 1 (row i of q is
// position p0 + i), causal, each row over keys [max(0, p - window + 1), p] (window 0: all), tiles of queries and
// keys in shared memory with an online softmax (s.sinks: each head's sink logit joins the denominator at the end).
// k_cache, v_cache: this layer's [cap][kv_dim] of the sequence. window: as s.window (this call reads only this one).
void attention_prompt(const float* q, int64_t n, int p0, const float* k_cache, const float* v_cache, int window,
                      const AttentionShape& s, float* out, cudaStream_t stream);

// Multi-head latent attention (model/mla.h; mla.cu), every row absorbed as model/mla.cpp runs it. An MLA layer of a
// sequence's device cache holds one row per position of the normalised latent then the rope key after RoPE:
// [cap][rank + rope] from its base (the host cache's KvLayerShape: no value rows). kv_b is (heads x (nope + v), rank):
// head h's nope rows W_UK[h] then its value rows W_UV[h].
struct MlaShape {
  int heads = 0, rank = 0, nope = 0, rope = 0, v = 0;    // q heads, kv_lora_rank, qk_nope/qk_rope/v_head_dim
  bool interleave = true;                                // rope_interleave: RoPE's pairs (2i, 2i + 1)
  float scale = 1.0f;                                    // MlaPlan::softmax_scale
  SEEDLING_HD int width() const { return rank + rope; }  // a cache row, and an absorbed query
  SEEDLING_HD int q_head() const { return nope + rope; }
};
// Per row i of m: the latent kv[i][0, rank) RMS-normed with `norm` (rms_norm's operations over rank), then the rope
// key kv[i][rank, rank + rope) and every head's rope part of q[i] (heads x (nope + rope)) rotated at pos[i] as
// mla_rope does (de-interleaved first with s.interleave; then rotate-half with inv_freq's rope / 2 angles, cos and sin
// times scaling: norm_rope_head's operations), in place; then kv's row is written at the row's position of the layer
// at `base` of its cache.
void mla_rope_cache(float* q, float* kv, int64_t m, const MlaShape& s, const float* norm, float eps, const int* pos,
                    const float* inv_freq, float scaling, const KvRow* rows, int64_t base, cudaStream_t stream);
// The absorbed queries of m rows, q_abs[i][h] = [W_UK[h]^T q_nope[i][h], q_rope[i][h]] (rank + rope floats): W_UK[h]
// read down its columns as stored (the float, affine and FP8 codecs; load_element's weights), each output the sum
// over the nope dims in order, so a row's bits do not depend on the rows beside it.
void mla_absorb_query(const float* q, int64_t m, const DeviceMatrix& kv_b, const MlaShape& s, float* q_abs,
                      cudaStream_t stream);
// Latent attention, flash decoding: for each row i of m and head h, lat[i][h] (rank floats) = the softmax(scale q_abs
// . row) weighted sum of the latents of the rows of the row's cache, positions [0, pos]. One kernel for decode and
// prompt rows: a row's keys are cut into at most 16 splits whose size depends only on its cache's capacity (whole
// tiles of 32 keys), each split walks its tiles with an online softmax for 8 heads at once (a key row read into shared
// memory once for all 8), and the last split block of each (row, head group) merges, so a row gets the same bits alone
// or batched, in a prompt or decoded, eagerly or in a graph. Rows go in launches of at most `rows_per_launch`, whose
// partial sums take mla_attention_scratch_floats(rows_per_launch, s) floats of scratch; counters: rows_per_launch *
// ceil(heads / 8) ints, zero before the first call (every launch leaves them at zero).
int64_t mla_attention_scratch_floats(int64_t rows_per_launch, const MlaShape& s);
int64_t mla_attention_counters(int64_t rows_per_launch, const MlaShape& s);
void mla_attention(const float* q_abs, int64_t m, const KvRow* rows, int64_t base, const MlaShape& s, float* lat,
                   float* scratch, int* counters, int64_t rows_per_launch, cudaStream_t stream);
// att[i][h * v + j] = W_UV[h] row j . lat[i][h] for m rows (lat: [m][heads][rank]), each output one warp's lane_dot
// as matmul sums it (the float, affine and FP8 codecs).
void mla_value(const float* lat, int64_t m, const DeviceMatrix& kv_b, const MlaShape& s, float* att,
               cudaStream_t stream);
// Gated attention (AttentionPlan::output_gate): qg holds m rows of n_heads x [head_dim query, head_dim gate] (q_proj
// twice as wide); q and gate get them apart, m x (n_heads * head_dim) each.
void split_gated_query(const float* qg, int64_t m, int n_heads, int head_dim, float* q, float* gate,
                       cudaStream_t stream);
// x[i] = x[i] * sigmoid(gate[i]) (the attention output times its gate, as decoder.cpp's attention).
void mul_sigmoid(float* x, const float* gate, int64_t n, cudaStream_t stream);

// Gated DeltaNet (model/linear_attention.cpp's mixer; gated_delta.cu). A row of a forward as these kernels see it:
// its sequence's recurrent states (every Gated DeltaNet layer's in one array, a layer's from DeltaShape::state_offset:
// its conv window [conv_kernel - 1][channels], oldest first, then a key_dim x value_dim float32 matrix per value head)
// and its run, the consecutive rows of that sequence in this forward (the run's first row, its length).
struct DeltaRow {
  float* state = nullptr;
  int first = 0;
  int n = 0;
};
// One layer's sizes (LinearAttentionPlan): the conv's input rows are [q (key_heads x key_dim), k (the same), v
// (value_heads x value_dim)] = channels floats; each key head serves value_heads / key_heads consecutive value heads.
struct DeltaShape {
  int key_heads = 0, value_heads = 0, key_dim = 0, value_dim = 0;
  int conv_kernel = 0;
  size_t state_offset = 0;  // floats into a row's state array
  SEEDLING_HD int64_t channels() const { return 2 * int64_t(key_heads) * key_dim + int64_t(value_heads) * value_dim; }
  SEEDLING_HD size_t conv_floats() const { return size_t(conv_kernel - 1) * size_t(channels()); }
};
// qwen3_next's grouped projections put back in order (model/linear_attention.cpp): qkvz holds per key head [q
// (key_dim), k (key_dim), v (r x value_dim), z (r x value_dim)], ba per key head [b (r), a (r)], r = value_heads /
// key_heads; into mixed (m x channels: q, k, v), z (m x value_heads * value_dim), b and a (m x value_heads).
void gated_delta_ungroup(const float* qkvz, const float* ba, int64_t m, const DeltaShape& s, float* mixed, float* z,
                         float* b, float* a, cudaStream_t stream);
// The causal depthwise conv1d + SiLU of m rows of `channels` (ops::causal_conv1d_silu_step for each row of a run in
// turn, in double as it): each row's inputs before its run's first come from its sequence's window (at
// window_offset in DeltaRow::state), which then holds the last kernel - 1 inputs of the run. w: channels x kernel.
void causal_conv1d_silu(const float* x, int64_t m, const float* w, const DeltaRow* rows, int64_t channels, int kernel,
                        size_t window_offset, float* out, cudaStream_t stream);
// ops::l2_normalize of `heads` consecutive heads of `dim` floats in each of m rows (row i at x + i * stride), in
// place, the first `scaled` heads also times scale (q's 1 / sqrt(key_dim)); one warp a head, float32 sums.
void l2_normalize_heads(float* x, int64_t m, int64_t stride, int heads, int dim, int scaled, float scale, float eps,
                        cudaStream_t stream);
// ops::delta_gates: beta = sigmoid(b), g = -exp(a_log[h]) * softplus(a + dt_bias[h]) (in double as on the CPU) for
// m rows of `heads` value heads.
void delta_gates(const float* b, const float* a, const float* a_log, const float* dt_bias, int64_t m, int heads,
                 float* beta, float* g, cudaStream_t stream);
// The gated delta rule (ops/gated_delta.h) of each value head over its sequence's state. qkv: m rows of `channels`
// with q and k L2-normalised (q scaled); g, beta: m x value_heads; out: m x value_heads * value_dim.
// Decode: the recurrent step (ops::ref::gated_delta_rule for one token) of each listed row, every row its own
// sequence's state, in one launch (a block per row and value head, a thread per value column; float32 sums in a
// fixed order, so a row gets the same bits alone or batched). 128 x 128 heads (Qwen3-Next's, Qwen3.5's) take a kernel
// that holds a state column in registers; any_dims = true takes the kernel for any dims instead (tests: the same bits).
void gated_delta_decode(const float* qkv, const float* g, const float* beta, const int* row_ids, int64_t n_rows,
                        const DeltaRow* rows, const DeltaShape& s, float* out, cudaStream_t stream,
                        bool any_dims = false);
// Prompts: the chunked form (ops::gated_delta_chunked, chunks of kDeltaChunk from the run's first row) over each run
// whose first row is listed, in one launch: a block per run and value head walks its chunks in order, each chunk's
// keys, queries, the triangular solve's right-hand sides and its two chunk x chunk matrices in shared memory, the
// state read and advanced in VRAM once per chunk (float32 throughout). A head's value columns may go to several blocks,
// value_cols each (0: 32 while the runs' heads alone leave SMs idle, else all of them), with the same bits.
constexpr int kDeltaChunk = 64;
void gated_delta_chunked(const float* qkv, const float* g, const float* beta, const int* runs, int64_t n_runs,
                         const DeltaRow* rows, const DeltaShape& s, float* out, cudaStream_t stream,
                         int value_cols = 0);
// The shared memory gated_delta_chunked needs at these head dims, and whether the current device gives a block that
// much (the layer is refused by name where not).
size_t gated_delta_chunked_smem_bytes(int key_dim, int value_dim);
bool gated_delta_chunked_fits(int key_dim, int value_dim);

// Stage clock, a measuring build (cmake -DSEEDLING_STAGE_CLOCK=ON): each block of the decode launches (the products,
// decode attention, gate/up, down + combine) notes the SM cycles from its start to its marks (past its wait for the
// launch before, operands ready, main loop done, end). stage_clock_reset zeroes the sums; stage_clock_report gives
// the means a block by launch kind, or "" in other builds.
void stage_clock_reset(cudaStream_t stream);
std::string stage_clock_report();

// Throws Error naming `what` when a CUDA call failed (or, after launches, the last error).
void check(cudaError_t e, const char* what);
// The current device's streaming multiprocessors.
int sm_count();

}  // namespace seedling::cuda
