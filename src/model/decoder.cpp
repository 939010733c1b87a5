// model/decoder.cpp - the forward pass, composed from ops/: each layer runs the blocks its LayerPlan names
// (config.h): GQA attention with its options (biases, q/k norm per head or whole, clip, partial rotary, sinks, a
// window), then a dense SwiGLU MLP or routed experts (softmax, top-k-softmax or sigmoid-group router; SwiGLU or
// clamped SwiGLU, with biases) beside an optional shared expert.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <numeric>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "ops/expert_products.h"
#include "ops/matmul.h"
#include "ops/ops.h"

namespace seedling {

namespace {
// A float buffer that grows without zeroing what it adds, for buffers whose every element is written before it is
// read (a prompt's are megabytes a layer: zeroing and faulting them in again in every layer is serial time).
class Floats {
 public:
  float* resize(size_t n) {
    if (n > capacity_) data_ = std::make_unique_for_overwrite<float[]>(capacity_ = n);
    return data_.get();
  }
  float* data() { return data_.get(); }

 private:
  std::unique_ptr<float[]> data_;
  size_t capacity_ = 0;
};
}  // namespace

void Model::forward(std::span<const BatchRow> rows, float* logits) {
  const ModelConfig& c = config_;
  const int64_t M = int64_t(rows.size()), H = c.hidden_size;
  if (M == 0) return;
  if (device_) {
    // The device forward reports routes (DeviceForward::set_route_observer) but not matrix inputs: refuse rather
    // than write an empty imatrix.
    if (activation_observer_ != nullptr) {
      fail("activation statistics (imatrix) are recorded by the CPU forward only: run without --device cuda");
    }
    return device_->forward(rows, logits);
  }
  std::vector<float> x(size_t(M * H)), xn(size_t(M * H)), delta(size_t(M * H));
  // Row-wise steps (the embedding, the residual adds, the norms) over the threads; each row's bits are its own.
  const auto rows_in_parallel = [&](const auto& fn) {
    ThreadPool::global().parallel_for(size_t(M), 4, [&](size_t i0, size_t i1) {
      for (int64_t i = int64_t(i0); i < int64_t(i1); ++i) fn(i);
    });
  };
  for (int64_t i = 0; i < M; ++i) {
    const int32_t t = rows[size_t(i)].token;
    if (t < 0 || t >= c.vocab_size) fail("token id {} is out of range: the vocabulary has {} ids", t, c.vocab_size);
  }
  rows_in_parallel([&](int64_t i) {  // embedding: (M, H)
    for (int64_t k = 0; k < H; ++k) x[size_t(i * H + k)] = w_.embed.at(rows[size_t(i)].token, k);
  });
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = w_.layers[size_t(l)];
    if (prefetch_width_ > 0 && lw.has_experts) guess_experts(l, M, x.data());  // reads run during the mixer
    rows_in_parallel([&](int64_t i) {
      ops::rms_norm_to(x.data() + i * H, xn.data() + i * H, 1, H, lw.attn_norm.data(), c.rms_norm_eps);
    });
    switch (c.plan(l).mixer) {
      case Mixer::Attention:
        attention(l, rows, xn.data(), delta.data());
        break;
      case Mixer::GatedDeltaNet:
        gated_delta_net(l, rows, xn.data(), delta.data());
        break;
      case Mixer::Mla:
        mla_attention(l, rows, xn.data(), delta.data());
        break;
    }
    rows_in_parallel([&](int64_t i) {
      float* xi = x.data() + i * H;
      const float* di = delta.data() + i * H;
      for (int64_t k = 0; k < H; ++k) xi[k] = xi[k] + di[k];
      ops::rms_norm_to(xi, xn.data() + i * H, 1, H, lw.ffn_norm.data(), c.rms_norm_eps);
    });
    if (lw.has_experts) {
      moe(l, M, xn.data(), delta.data());
    } else {
      dense_mlp(l, M, xn.data(), delta.data());
    }
    rows_in_parallel([&](int64_t i) {
      float* xi = x.data() + i * H;
      const float* di = delta.data() + i * H;
      for (int64_t k = 0; k < H; ++k) xi[k] = xi[k] + di[k];
    });
  }
  // Head over the rows that want logits: (wanted, H) -> (wanted, V).
  int64_t wanted = 0;
  for (int64_t i = 0; i < M; ++i) {
    if (!rows[size_t(i)].want_logits) continue;
    std::copy_n(x.data() + i * H, H, xn.data() + wanted * H);
    ++wanted;
  }
  if (wanted == 0) return;
  ops::rms_norm(xn.data(), wanted, H, w_.final_norm.data(), c.rms_norm_eps);
  ops::matmul(xn.data(), wanted, w_.lm_head, logits);
}

void Model::attention(int layer, std::span<const BatchRow> rows, const float* xn, float* out) {
  const ModelConfig& c = config_;
  const LayerWeights& lw = w_.layers[size_t(layer)];
  const AttentionPlan& plan = c.plan(layer).attn;
  const int64_t M = int64_t(rows.size());
  const int Q = c.q_dim(), KV = c.kv_dim(), hd = c.head_dim;
  // This thread's buffers, reused from layer to layer (each element is written before it is read).
  thread_local Floats q_buf, k_buf, v_buf, att_buf;
  float* const q = q_buf.resize(size_t(M * Q));
  float* const k = k_buf.resize(size_t(M * KV));
  float* const v = v_buf.resize(size_t(M * KV));
  float* const att = att_buf.resize(size_t(M * Q));
  if (activation_observer_ != nullptr)
    activation_observer_->on_input(layer, MatrixInput::AttnQkv, -1, xn, M, c.hidden_size);
  std::vector<float> gate;  // output_gate: sigmoid(gate) times the attention output, per head beside its query
  std::vector<float> qg(plan.output_gate ? size_t(M * 2 * Q) : 0);  // (M, 2Q): per head hd query, then hd gate rows
  // q, k and v in one parallel region (each with matmul's bits; with int8 activations xn is quantized once).
  ops::matmul_batch({{xn, M, lw.q, plan.output_gate ? qg.data() : q},  // (M, Q) or (M, 2Q)
                     {xn, M, lw.k, k},                                 // (M, KV)
                     {xn, M, lw.v, v}});                               // (M, KV)
  if (plan.output_gate) {
    gate.resize(size_t(M * Q));
    for (int64_t i = 0; i < M; ++i) {
      for (int h = 0; h < c.num_heads; ++h) {
        const float* src = qg.data() + i * 2 * Q + int64_t(h) * 2 * hd;
        std::copy_n(src, hd, q + i * Q + h * hd);
        std::copy_n(src + hd, hd, gate.data() + i * Q + h * hd);
      }
    }
  }
  // Each row's biases, norms, clamps and rotation, and its K and V into its cache (rows in parallel).
  ThreadPool::global().parallel_for(size_t(M), 4, [&](size_t i0, size_t i1) {
    for (int64_t i = int64_t(i0); i < int64_t(i1); ++i) {
      float* qi = q + i * Q;
      float* ki = k + i * KV;
      float* vi = v + i * KV;
      if (plan.qkv_bias) {
        ops::add_to(qi, lw.q_bias.data(), Q);
        ops::add_to(ki, lw.k_bias.data(), KV);
        ops::add_to(vi, lw.v_bias.data(), KV);
      }
      if (plan.qk_norm == QkNorm::PerHead) {
        ops::rms_norm(qi, c.num_heads, hd, lw.q_norm.data(), c.rms_norm_eps);
        ops::rms_norm(ki, c.num_kv_heads, hd, lw.k_norm.data(), c.rms_norm_eps);
      } else if (plan.qk_norm == QkNorm::Whole) {
        ops::rms_norm(qi, 1, Q, lw.q_norm.data(), c.rms_norm_eps);
        ops::rms_norm(ki, 1, KV, lw.k_norm.data(), c.rms_norm_eps);
      }
      if (plan.clip_qkv > 0) {
        ops::clamp(qi, Q, -plan.clip_qkv, plan.clip_qkv);
        ops::clamp(ki, KV, -plan.clip_qkv, plan.clip_qkv);
        ops::clamp(vi, KV, -plan.clip_qkv, plan.clip_qkv);
      }
      const BatchRow& r = rows[size_t(i)];
      ops::apply_rope(qi, c.num_heads, hd, r.pos, rope_, ki, c.num_kv_heads);  // q and k share the row's angles
      SEEDLING_CHECK(r.pos < r.kv->capacity(), "position {} beyond KV capacity {}", r.pos, r.kv->capacity());
      std::copy_n(ki, KV, r.kv->keys(layer) + int64_t(r.pos) * KV);
      std::copy_n(vi, KV, r.kv->values(layer) + int64_t(r.pos) * KV);
    }
  });
  ops::AttentionShape shape{c.num_heads, c.num_kv_heads, hd, 1.0f / std::sqrt(float(hd))};
  shape.sinks = plan.sinks ? lw.sinks.data() : nullptr;
  // One work item per (row, KV head): the query heads that share it read its keys and values once, and the threads
  // claim items one at a time, KV head by KV head, the longest rows first (a row costs its span of keys, which grows
  // along a prompt). With fewer rows x KV heads than threads (decode), an item is one chunk of a row's keys
  // (ops::kAttentionChunk) for one KV head's query heads, or for an equal share of them when there are still fewer
  // items than threads (a head's sums are its own, so the bits are the same), and each row's chunks are combined
  // after: every thread has work at any depth, and the bits are attention_row's.
  const auto span_first = [&](const BatchRow& r) { return plan.window > 0 ? std::max(0, r.pos - plan.window + 1) : 0; };
  ThreadPool& pool = ThreadPool::global();
  const int group = c.num_heads / c.num_kv_heads;
  std::atomic<int64_t> next{0};
  if (M * c.num_kv_heads >= int64_t(pool.size())) {
    std::vector<int64_t> order(static_cast<size_t>(M));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      const BatchRow &ra = rows[size_t(a)], &rb = rows[size_t(b)];
      return ra.pos - span_first(ra) > rb.pos - span_first(rb);
    });
    const int64_t items = M * c.num_kv_heads;
    pool.parallel_for(pool.size(), 1, [&](size_t, size_t) {
      for (int64_t it = next.fetch_add(1, std::memory_order_relaxed); it < items;
           it = next.fetch_add(1, std::memory_order_relaxed)) {
        const int64_t i = order[size_t(it % M)];
        const int h = int(it / M) * group;
        const BatchRow& r = rows[size_t(i)];
        ops::attention_row(q + i * Q, r.kv->keys(layer), r.kv->values(layer), span_first(r), r.pos, shape, h, h + group,
                           att + i * Q);
      }
    });
  } else {
    // Row i's chunks start at chunk_at[i] in the partials: o [chunk][heads][head_dim], ml [chunk][heads][2].
    std::vector<int64_t> chunk_at(size_t(M) + 1, 0);
    for (int64_t i = 0; i < M; ++i) {
      const BatchRow& r = rows[size_t(i)];
      chunk_at[size_t(i) + 1] = chunk_at[size_t(i)] + ops::attention_chunks(span_first(r), r.pos);
    }
    const int64_t chunks = chunk_at[size_t(M)], o_stride = Q, ml_stride = 2 * int64_t(c.num_heads);
    thread_local Floats o_buf, ml_buf;  // every element written by its item before the combine reads it
    float* const o = o_buf.resize(size_t(chunks * o_stride));
    float* const ml = ml_buf.resize(size_t(chunks * ml_stride));
    // A KV head's query heads in `parts` shares of `share` heads: the fewest shares that give every thread an item.
    int parts = 1;
    while (parts < group && (chunks * c.num_kv_heads * parts < pool.size() || group % parts != 0)) ++parts;
    const int share = group / parts, shares = c.num_heads / share;
    const int64_t items = chunks * shares;
    pool.parallel_for(size_t(std::min<int64_t>(items, pool.size())), 1, [&](size_t, size_t) {
      for (int64_t it = next.fetch_add(1, std::memory_order_relaxed); it < items;
           it = next.fetch_add(1, std::memory_order_relaxed)) {
        const int64_t chunk = it / shares;
        const int h = int(it % shares) * share;
        const int64_t i = std::upper_bound(chunk_at.begin(), chunk_at.end(), chunk) - chunk_at.begin() - 1;
        const BatchRow& r = rows[size_t(i)];
        const int c0 = span_first(r) + int(chunk - chunk_at[size_t(i)]) * ops::kAttentionChunk;
        ops::attention_chunk(q + i * Q, r.kv->keys(layer), r.kv->values(layer), c0,
                             std::min(r.pos, c0 + ops::kAttentionChunk - 1), shape, h, h + share,
                             o + chunk * o_stride + int64_t(h) * hd, ml + chunk * ml_stride + 2 * h);
      }
    });
    for (int64_t i = 0; i < M; ++i) {
      const int64_t c0 = chunk_at[size_t(i)];
      ops::attention_combine(shape, 0, c.num_heads, int(chunk_at[size_t(i) + 1] - c0), o + c0 * o_stride, o_stride,
                             ml + c0 * ml_stride, ml_stride, att + i * Q);
    }
  }
  if (plan.output_gate) {
    for (int64_t i = 0; i < M * Q; ++i) att[i] = att[i] * ops::sigmoid(gate[size_t(i)]);
  }
  if (activation_observer_ != nullptr) activation_observer_->on_input(layer, MatrixInput::AttnO, -1, att, M, Q);
  ops::matmul(att, M, lw.o, out);  // (M, H)
  if (plan.o_bias) {
    for (int64_t i = 0; i < M; ++i) ops::add_to(out + i * c.hidden_size, lw.o_bias.data(), c.hidden_size);
  }
}

namespace {
// One row's router logits p (E, overwritten) -> the plan's top-k ids and weights.
void gate_row(const RouterPlan& plan, const LayerWeights& lw, int E, int K, float* p, int* ids, float* w,
              std::vector<float>& scratch) {
  if (plan.bias) ops::add_to(p, lw.router_bias.data(), E);
  switch (plan.gating) {
    case Gating::SoftmaxTopK:
      ops::softmax(p, E);
      ops::top_k(p, E, K, ids);
      for (int s = 0; s < K; ++s) w[s] = p[ids[s]];
      break;
    case Gating::TopKSoftmax:
      ops::top_k(p, E, K, ids);
      for (int s = 0; s < K; ++s) w[s] = p[ids[s]];
      ops::softmax(w, K);
      break;
    case Gating::SigmoidGroupTopK:
      for (int e = 0; e < E; ++e) p[e] = ops::sigmoid(p[e]);
      ops::group_top_k(p, plan.correction_bias ? lw.router_correction.data() : nullptr, E, plan.n_group,
                       plan.topk_group, K, ids, &scratch, plan.masked_neg_inf ? -INFINITY : 0.0f);
      for (int s = 0; s < K; ++s) w[s] = p[ids[s]];
      break;
  }
  if (plan.renormalize && plan.gating != Gating::TopKSoftmax) {
    float sum = 0.0f;
    for (int s = 0; s < K; ++s) sum = sum + w[s];
    // transformers adds 1e-20 to the sum for sigmoid scores (they need not sum to 1), nothing for softmax ones.
    if (plan.gating == Gating::SigmoidGroupTopK) sum = sum + 1e-20f;
    for (int s = 0; s < K; ++s) w[s] = w[s] / sum;
  }
  if (plan.scale != 1.0f) {
    for (int s = 0; s < K; ++s) w[s] = w[s] * plan.scale;
  }
}
}  // namespace

void Model::route(int layer, int64_t M, const float* xn, int* chosen, float* weight) {
  const ModelConfig& c = config_;
  const LayerWeights& lw = w_.layers[size_t(layer)];
  const RouterPlan& plan = c.plan(layer).ffn.router;
  const int E = c.num_experts, K = c.experts_per_token;
  // Router: (M, E) logits -> the plan's gating -> top-k ids and weights per row.
  std::vector<float> logits(size_t(M * E));
  ops::matmul(xn, M, lw.router, logits.data());
  // Each row's gating alone (rows in parallel); then the replay and the observer see the rows in order.
  ThreadPool::global().parallel_for(size_t(M), 8, [&](size_t i0, size_t i1) {
    std::vector<float> scratch;
    for (int64_t i = int64_t(i0); i < int64_t(i1); ++i)
      gate_row(plan, lw, E, K, logits.data() + i * E, chosen + i * K, weight + i * K, scratch);
  });
  for (int64_t i = 0; i < M; ++i) {
    int* ids = chosen + i * K;
    float* w = weight + i * K;
    if (route_source_ != nullptr) route_source_->route(layer, int(i), {ids, size_t(K)}, {w, size_t(K)});
    if (observer_ != nullptr) observer_->on_route(layer, int(i), {ids, size_t(K)}, {w, size_t(K)});
  }
}

void Model::set_prefetch_width(int width) {
  if (width < 0 || width > config_.num_experts) {
    fail("--prefetch-width {}: the model has {} experts a layer", width, config_.num_experts);
  }
  prefetch_width_ = width;
}

// CudaForward::guess's twin: the FFN norm and the router's logits (with its bias; sigmoid scores plus the selection
// correction) on the residual before the mixer, and each row's top `width` of them, or the route source's
// predictions (--prefetch-replay). Group limits are left out: a guess only orders reads.
void Model::guess_experts(int layer, int64_t M, const float* x) {
  const ModelConfig& c = config_;
  const LayerWeights& lw = w_.layers[size_t(layer)];
  const RouterPlan& plan = c.plan(layer).ffn.router;
  const int64_t H = c.hidden_size;
  const int E = c.num_experts, W = prefetch_width_;
  thread_local std::vector<float> xn, logits;
  xn.resize(size_t(M * H));
  logits.resize(size_t(M * E));
  ops::rms_norm_to(x, xn.data(), M, H, lw.ffn_norm.data(), c.rms_norm_eps);
  ops::matmul(xn.data(), M, lw.router, logits.data());
  std::vector<int> guess;
  std::vector<int> row(static_cast<size_t>(W));
  for (int64_t i = 0; i < M; ++i) {
    float* p = logits.data() + i * E;
    if (plan.bias) ops::add_to(p, lw.router_bias.data(), E);
    if (plan.gating == Gating::SigmoidGroupTopK) {
      for (int e = 0; e < E; ++e)
        p[e] = ops::sigmoid(p[e]) + (plan.correction_bias ? lw.router_correction[size_t(e)] : 0.0f);
    }
    ops::top_k(p, E, W, row.data());
    const int n = route_source_ != nullptr ? route_source_->predict(layer, int(i), row) : -1;
    guess.insert(guess.end(), row.begin(), n < 0 ? row.end() : row.begin() + n);
  }
  std::sort(guess.begin(), guess.end());
  guess.erase(std::unique(guess.begin(), guess.end()), guess.end());
  experts_->prefetch_guess(layer, guess);
}

void Model::moe(int layer, int64_t M, const float* xn, float* out) {
  const int K = config_.experts_per_token;
  const int64_t H = config_.hidden_size;
  std::vector<int> chosen(size_t(M * K));
  std::vector<float> weight(size_t(M * K));
  route(layer, M, xn, chosen.data(), weight.data());
  if (routed_sum_ != nullptr) {
    routed_sum_->routed_sum(layer, M, xn, chosen.data(), weight.data(), out);  // the experts on other ranks
  } else {
    // The buffer outlives the call (this thread's, reused): a prompt's is tens of MB, which a fresh allocation
    // would map, fault in and zero again in every layer.
    thread_local std::vector<float> expert_out_buffer;
    std::vector<float>& expert_out = expert_out_buffer;  // (M, K, H)
    if (expert_out.size() < size_t(M * K * H)) expert_out.resize(size_t(M * K * H));
    std::vector<int64_t> pair_row(size_t(M * K));
    for (int64_t j = 0; j < M * K; ++j) pair_row[size_t(j)] = j / K;
    expert_outputs(layer, pair_row, chosen, xn, expert_out.data());
    combine_expert_outputs(M, K, H, weight.data(), expert_out.data(), nullptr, out);
  }
  add_shared_expert(layer, M, xn, out);
}

void Model::expert_outputs(int layer, std::span<const int64_t> pair_row, std::span<const int> pair_expert,
                           const float* xn, float* out) {
  const ModelConfig& c = config_;
  const LayerWeights& lw = w_.layers[size_t(layer)];
  const FfnPlan& plan = c.plan(layer).ffn;
  const int E = c.num_experts, K = c.experts_per_token;
  const int64_t H = c.hidden_size, I = plan.width;
  const int64_t P = int64_t(pair_row.size());
  if (pair_expert.size() != pair_row.size()) fail("expert_outputs: {} rows for {} experts", P, pair_expert.size());
  if (P == 0) return;  // an expert-parallel rank that was sent nothing
  // Pairs grouped by expert, so each chosen expert is fetched once per batch and runs as one matrix product.
  std::vector<std::vector<int64_t>> slots_of(static_cast<size_t>(E));  // expert -> indices of its pairs
  for (int64_t j = 0; j < P; ++j) {
    const int e = pair_expert[size_t(j)];
    if (e < 0 || e >= E) fail("expert_outputs: expert {} of layer {} is not one of its {}", e, layer, E);
    slots_of[size_t(e)].push_back(j);
  }
  // Tell the provider every expert this batch needs before the first acquire, so a streamed provider has their
  // reads in flight together instead of one miss at a time.
  std::vector<int> used;
  for (int e = 0; e < E; ++e) {
    if (!slots_of[size_t(e)].empty()) used.push_back(e);
  }
  experts_->prefetch(layer, used);
  // One expert's work: its rows of xn gathered, then gate and up (n, I), the activation, down (n, H).
  // Its buffers are Floats: zeroing them in every group of every layer cost a prompt 2% of its time.
  struct Work {
    int e = 0;
    int64_t n = 0;
    ExpertWeights w;
    Floats xe, g, u, a, d;
  };
  // The buffers outlive the call (this thread's, reused), as moe's output buffer does.
  thread_local std::vector<Work> work_buffer;
  const auto start = [&](Work& wk, int e) {  // acquires the expert and sizes its buffers
    wk.e = e;
    wk.n = int64_t(slots_of[size_t(e)].size());
    wk.w = experts_->acquire(layer, e);
    wk.xe.resize(size_t(wk.n * H));
    wk.g.resize(size_t(wk.n * I));
    wk.u.resize(size_t(wk.n * I));
    wk.a.resize(size_t(wk.n * I));
    wk.d.resize(size_t(wk.n * H));
  };
  const auto gather = [&](Work& wk) {  // its rows of xn
    const auto& slots = slots_of[size_t(wk.e)];
    for (int64_t r = 0; r < wk.n; ++r)
      std::copy_n(xn + pair_row[size_t(slots[size_t(r)])] * H, H, wk.xe.data() + r * H);
  };
  // Columns [n0, n1) of every row: gate and up computed, their biases, then the activation into a. Elementwise, so
  // any split of the columns gives the same bits.
  const auto activate = [&](Work& wk, int64_t n0, int64_t n1) {
    for (int64_t r = 0; r < wk.n; ++r) {
      float* g = wk.g.data() + r * I + n0;
      float* u = wk.u.data() + r * I + n0;
      if (plan.expert_bias) {
        ops::add_to(g, lw.expert_gate_bias.data() + wk.e * I + n0, n1 - n0);
        ops::add_to(u, lw.expert_up_bias.data() + wk.e * I + n0, n1 - n0);
      }
      if (plan.act == Activation::ClampedSwiGLU) {
        ops::clamped_swiglu(g, u, wk.a.data() + r * I + n0, n1 - n0, plan.swiglu_alpha, plan.swiglu_limit);
      } else {
        ops::silu_mul(g, u, wk.a.data() + r * I + n0, n1 - n0);
      }
    }
  };
  const auto finish = [&](Work& wk, int64_t n0, int64_t n1) {  // down's columns [n0, n1): bias, into out
    const auto& slots = slots_of[size_t(wk.e)];
    for (int64_t r = 0; r < wk.n; ++r) {
      float* d = wk.d.data() + r * H + n0;
      if (plan.expert_bias) ops::add_to(d, lw.expert_down_bias.data() + wk.e * H + n0, n1 - n0);
      std::copy(d, d + (n1 - n0), out + slots[size_t(r)] * H + n0);
    }
  };
  // At most k experts held at once (a slot budget is at least k): a decode row's all, a prompt's in groups of k.
  // Each group's experts run in one parallel region (ops::expert_products: every gate/up, activation and down piece
  // over the threads, no join per matrix), unless an observer must see each input whole or a matrix's kernel
  // runs threads of its own: then one expert after another.
  std::vector<Work>& work = work_buffer;
  if (work.size() < std::min(used.size(), size_t(K))) work.resize(std::min(used.size(), size_t(K)));
  std::vector<ops::ExpertJob> jobs;
  const ops::ExpertSteps steps{[&](size_t j) { gather(work[j]); },
                               [&](size_t j, int64_t n0, int64_t n1) { activate(work[j], n0, n1); },
                               [&](size_t j, int64_t n0, int64_t n1) { finish(work[j], n0, n1); }};
  // Groups in `used` order, except that a streaming provider's misses wait: each group takes the pending experts
  // the provider already holds (at most k), or when it holds none, the first pending one (waiting for its read) and
  // any that landed meanwhile. So the held experts compute while the others are read. An expert's products do not
  // depend on its group, so the bits are those of any grouping; a resident provider holds all, giving groups of k
  // in order.
  std::vector<int> pending(used.begin(), used.end()), group;
  const auto take_ready = [&] {
    for (size_t i = 0; i < pending.size() && group.size() < size_t(K);) {
      if (experts_->ready(layer, pending[i])) {
        group.push_back(pending[i]);
        pending.erase(pending.begin() + std::ptrdiff_t(i));
      } else {
        ++i;
      }
    }
  };
  while (!pending.empty()) {
    group.clear();
    size_t started = 0;
    take_ready();
    if (group.empty()) {
      group.push_back(pending.front());
      pending.erase(pending.begin());
      start(work[0], group[0]);  // waits for its read
      started = 1;
      take_ready();
    }
    const size_t count = group.size();
    bool region = activation_observer_ == nullptr;
    jobs.clear();
    for (size_t j = 0; j < count; ++j) {
      Work& wk = work[j];
      if (j >= started) start(wk, group[j]);
      region = region && ops::matmul_by_pieces(wk.w.gate) && ops::matmul_by_pieces(wk.w.up) &&
               ops::matmul_by_pieces(wk.w.down);
      jobs.push_back(
          {wk.n, wk.w.gate, wk.w.up, wk.w.down, wk.xe.data(), wk.g.data(), wk.u.data(), wk.a.data(), wk.d.data()});
    }
    if (region) {
      ops::expert_products(jobs, steps);
    } else {
      for (size_t j = 0; j < count; ++j) {
        Work& wk = work[j];
        gather(wk);
        if (activation_observer_ != nullptr)
          activation_observer_->on_input(layer, MatrixInput::ExpertGateUp, wk.e, wk.xe.data(), wk.n, H);
        ops::matmul_batch({{wk.xe.data(), wk.n, wk.w.gate, wk.g.data()}, {wk.xe.data(), wk.n, wk.w.up, wk.u.data()}});
        activate(wk, 0, I);
        if (activation_observer_ != nullptr)
          activation_observer_->on_input(layer, MatrixInput::ExpertDown, wk.e, wk.a.data(), wk.n, I);
        ops::matmul(wk.a.data(), wk.n, wk.w.down, wk.d.data());  // (n, H)
        finish(wk, 0, H);
      }
    }
    for (size_t j = 0; j < count; ++j) experts_->release(layer, work[j].e);
  }
}

void combine_expert_outputs(int64_t M, int K, int64_t H, const float* weight, const float* outputs,
                            const int64_t* pair_index, float* out) {
  // Each row's own slot order, so a row's sum never depends on the other rows of the batch, nor on where its
  // experts ran. Items are (row, slice of H): at decode the one row's slices spread over the threads (its K expert
  // outputs were written by other cores, and one thread reading them all was serial time in every layer).
  constexpr int64_t kSlice = 256;
  const int64_t slices = (H + kSlice - 1) / kSlice;
  ThreadPool::global().parallel_for(size_t(M * slices), size_t(M > 1 ? slices : 2), [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      const size_t i = t / size_t(slices);
      const int64_t h0 = int64_t(t % size_t(slices)) * kSlice, h1 = std::min(H, h0 + kSlice);
      float* o = out + int64_t(i) * H;
      std::fill(o + h0, o + h1, 0.0f);
      for (int s = 0; s < K; ++s) {
        const size_t j = i * size_t(K) + size_t(s);
        const float w = weight[j];
        const float* src = outputs + (pair_index != nullptr ? pair_index[j] : int64_t(j)) * H;
        for (int64_t h = h0; h < h1; ++h) o[h] = o[h] + w * src[h];
      }
    }
  });
}

void Model::add_shared_expert(int layer, int64_t M, const float* xn, float* out) {
  const ModelConfig& c = config_;
  const LayerWeights& lw = w_.layers[size_t(layer)];
  const FfnPlan& plan = c.plan(layer).ffn;
  const int64_t H = c.hidden_size;
  if (plan.shared_width == 0) return;
  // The shared expert, always on, added to the routed sum (times sigmoid(shared_expert_gate . x) where gated).
  std::vector<float> shared(static_cast<size_t>(M * H)), gate(static_cast<size_t>(M));
  if (plan.shared_gate) ops::matmul(xn, M, lw.shared_expert_gate, gate.data());
  // An observer sees the shared expert's inputs as a resident MLP's (a MoE layer has no dense MLP of its own).
  ops::MlpObserver seen;
  if (activation_observer_ != nullptr) {
    activation_observer_->on_input(layer, MatrixInput::MlpGateUp, -1, xn, M, H);
    seen = [&](const float* a) {
      activation_observer_->on_input(layer, MatrixInput::MlpDown, -1, a, M, plan.shared_width);
    };
  }
  ops::swiglu_mlp(xn, M, lw.shared_gate, lw.shared_up, lw.shared_down, shared.data(), seen);
  for (int64_t i = 0; i < M; ++i) {
    const float sg = plan.shared_gate ? ops::sigmoid(gate[size_t(i)]) : 1.0f;
    float* o = out + i * H;
    const float* sh = shared.data() + i * H;
    if (plan.shared_gate) {
      for (int64_t h = 0; h < H; ++h) o[h] = o[h] + sg * sh[h];
    } else {
      for (int64_t h = 0; h < H; ++h) o[h] = o[h] + sh[h];
    }
  }
}

void Model::dense_mlp(int layer, int64_t M, const float* xn, float* out) {
  const LayerWeights& lw = w_.layers[size_t(layer)];
  const int64_t I = lw.mlp_gate.rows;
  if (activation_observer_ != nullptr)
    activation_observer_->on_input(layer, MatrixInput::MlpGateUp, -1, xn, M, config_.hidden_size);
  ops::MlpObserver seen;
  if (activation_observer_ != nullptr) {
    seen = [&](const float* a) { activation_observer_->on_input(layer, MatrixInput::MlpDown, -1, a, M, I); };
  }
  ops::swiglu_mlp(xn, M, lw.mlp_gate, lw.mlp_up, lw.mlp_down, out, seen);
}

}  // namespace seedling
