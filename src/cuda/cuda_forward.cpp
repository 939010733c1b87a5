// cuda/cuda_forward.cpp - the CUDA twin of model/decoder.cpp (read them side by side).
#include "cuda/cuda_forward.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>

#include "codec/codec.h"
#include "core/error.h"
#include "cuda/device_layout.h"
#include "cuda/forward_products.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "cuda/linear_attention.h"
#include "cuda/mla_forward.h"
#include "cuda/vram_experts.h"
#include "kv/kv_layout.h"
#include "parallel/dispatch.h"
#include "parallel/ep_moe.h"

namespace seedling {

namespace {

using cuda::accurate_product;
using cuda::check;
using cuda::DeviceMatrix;
using cuda::DeviceScratch;
using cuda::kTensorCoreRows;
using cuda::on_tensor_cores;
using cuda::product;
using cuda::products;

// Page-locked host memory that only grows: copies to and from it run at the link's speed and never stage through
// a driver buffer (a pageable copy of a decode step's 608 KB of logits did).
class PinnedScratch {
 public:
  ~PinnedScratch() {
    if (p_) cudaFreeHost(p_);
  }
  uint8_t* get(size_t bytes) {
    if (bytes > bytes_) {
      if (p_) check(cudaFreeHost(p_), "freeing pinned host memory");
      p_ = nullptr;
      check(cudaHostAlloc(&p_, bytes, cudaHostAllocDefault), "allocating pinned host memory");
      bytes_ = bytes;
    }
    return static_cast<uint8_t*>(p_);
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// SEEDLING_DECODE_SKIP (parse_decode_skips, cuda_forward.h), read once.
unsigned decode_skips() {
  static const unsigned skips = [] {
    const char* env = std::getenv("SEEDLING_DECODE_SKIP");
    return parse_decode_skips(env != nullptr ? env : "");
  }();
  return skips;
}
// Whether this step leaves launch `s` out (batch-1 decode only).
bool skipped(int64_t m, DecodeSkip s) {
  return m == 1 && (decode_skips() & s) != 0;
}

// A softmax router without bias or scale: router_topk's policy, in the router's launch for a decode row.
bool softmax_topk(const RouterPlan& rp) {
  return rp.gating == Gating::SoftmaxTopK && !rp.bias && rp.scale == 1.0f;
}

// The router's logits for m rows: from kTensorCoreRows rows, on tensor cores with x carried to float32 accuracy
// where the weights widen exactly to TF32 (bf16, f16: matmul_tc_split), so the top-k sees about float32's error.
// k is split in parts (split_scratch), so the router's few outputs fill the GPU.
void router_product(const float* x, int64_t m, const DeviceMatrix& w, float* y, cudaStream_t stream,
                    DeviceScratch& split_scratch) {
  if (m >= kTensorCoreRows && (w.codec == Codec::BF16 || w.codec == Codec::F16)) {
    cuda::matmul_tc_split(x, m, w, y, false, stream,
                          split_scratch.get<uint8_t>(cuda::matmul_tc_split_scratch_bytes(m, w)));
  } else {
    cuda::matmul(x, m, w, y, false, stream);
  }
}

// One sequence's cache in VRAM, float32: its layers one after another, each [planes][cap][width] as cache_shapes says
// (CudaForward::kv_layout_, kv/kv_layout.h): keys then values of kv_dim for attention, one plane of latent rows for MLA
// (cuda/mla_forward.h); a Gated DeltaNet layer takes no rows, only its part of the recurrent state array
// (cuda/linear_attention.h), allocated once.
struct CudaKv final : KvCache::DeviceState {
  float* data = nullptr;
  int cap = 0;
  float* state = nullptr;
  ~CudaKv() override {
    if (data) cudaFree(data);
    if (state) cudaFree(state);
  }
};

class CudaForward final : public DeviceForward {
 public:
  CudaForward(Model& model, const CudaForwardOptions& o);
  ~CudaForward() override;
  void forward(std::span<const BatchRow> rows, float* logits) override;
  const char* name() const override { return "cuda"; }
  // Prompt passes of up to 4096 rows: a VRAM cache copies each missed expert once per 4096 prompt tokens, and the
  // activations of a pass (about 0.2 GB at Qwen3-30B-A3B's widths) stay small beside the weights.
  int rows_per_forward() const override { return 4096; }
  double last_device_seconds() const override { return device_seconds_; }
  void allocate(KvCache& kv) override { device_kv(kv); }
  ExpertStats expert_stats() const override {
    ExpertStats s = experts_ ? experts_->stats() : ExpertStats{};
    s.host_computed = host_computed_;
    s.host_seconds = host_seconds_;
    return s;
  }
  Exchanges exchanges() const override { return exchanges_; }
  void set_route_source(RouteSource* s) override { route_source_ = s; }
  void set_route_observer(RouteObserver* o) override { route_observer_ = o; }

 private:
  // One layer's device copies, by role (model/family.h): what the family's schema lists for the layer's plan.
  struct Layer {
    std::array<DeviceMatrix, kRoleCount> matrices{};
    std::array<const float*, kRoleCount> vectors{};  // norms, biases, sinks; null where the plan has none
    const DeviceMatrix& m(Role r) const { return matrices[size_t(r)]; }
    const float* v(Role r) const { return vectors[size_t(r)]; }
    bool has_experts = false;
    cuda::ExpertMath expert_math;  // biases (E, I) (E, I) (E, H), activation
    LayerPlan plan;
    cuda::MlaWeights mla;  // Mixer::Mla: the matrices and norms above, as mla_forward.h takes them
  };

  DeviceMatrix upload(const ops::Matrix& m);
  const float* upload(const std::vector<float>& v);
  CudaKv& device_kv(KvCache& kv);
  void enqueue(int64_t wanted);  // the whole forward on stream_, up to the logits in s_logits_
  std::vector<const void*> graph_key() const;
  void attention(int layer, float* x, float* xn);
  void mla_attention(int layer, float* x, float* xn);  // cuda/mla_forward.h
  void moe(int layer, float* x, float* xn);
  // Expert parallelism (--devices): the routed sum with this rank's experts and the others' over the transport.
  void moe_expert_parallel(int layer, float* x, const float* xn, const int* ids, const float* weights);
  void shared_expert(int layer, float* x, const float* xn);
  // Whether a decode row's router launch also computes the shared expert's gate logit (into s_shared_gl_).
  bool shared_gate_in_router(const Layer& lw) const {
    return m_ == 1 && lw.plan.ffn.shared_width > 0 && lw.plan.ffn.shared_gate && softmax_topk(lw.plan.ffn.router) &&
           !skipped(m_, kSkipRouter);
  }
  // Next-layer prefetch (CudaForwardOptions::prefetch_width): guess() enqueues the guess for `layer` from the
  // residual x entering it, prefetch() (after the attention is enqueued) waits for it and starts the copies.
  void guess(int layer, const float* x);
  void prefetch(int layer);
  // --route-replay and --route-trace: the router's top-k of the batch's rows to the host, replaced there by
  // route_source_ row by row and uploaded back, then shown to route_observer_ (as decoder.cpp's route does; a
  // measuring tool: it waits for the router at every MoE layer).
  void host_routes(int layer, int* ids, float* weights);
  // --cpu-misses (CudaForwardOptions::cpu_misses), a decode step over a VRAM cache read in place: the layer's routes
  // and xn come back to the host (the one wait a layer); the hits and the GPU's share of the misses run on the GPU
  // from the direct table (its misses read over PCIe) while the host computes its share of the misses through the
  // model's own expert path (Model::expert_outputs: the CPU kernels, the host's copy of the weights); then their
  // outputs are added to x on the GPU. Each part sums its experts in slot order, the GPU's first.
  void moe_host_misses(int layer, float* x, const float* xn, const int* ids, const float* weights);

  const ModelConfig c_;
  cudaStream_t stream_ = nullptr;
  std::vector<void*> owned_;                               // weight copies, freed at the end
  std::unordered_map<const void*, const void*> uploaded_;  // host bytes -> device copy (a tied head shares it)
  DeviceMatrix embed_, head_;
  const float* final_norm_ = nullptr;
  const float* inv_freq_ = nullptr;
  int rotary_dim_ = 0;
  float rope_scaling_ = 1.0f;
  KvRowLayout kv_layout_;  // CudaKv's rows: each layer's base (the kernels' KvRow::layer)
  cuda::MlaAttention mla_;
  std::vector<Layer> layers_;
  std::unique_ptr<cuda::VramExperts> experts_;
  std::unique_ptr<cuda::GatedDeltaNet> delta_net_;  // the Gated DeltaNet layers (cuda/linear_attention.h)
  // Every product keeps float32's accuracy (kTensorCoreRows says why): a model with Gated DeltaNet layers.
  bool float32_ = false;

  // Per forward: the batch as the kernels see it.
  struct Run {
    int row = 0, n = 0, p0 = 0;
    CudaKv* kv = nullptr;
  };
  int64_t m_ = 0;
  std::vector<Run> prompt_runs_;
  int64_t decode_rows_ = 0;
  int* d_tokens_ = nullptr;
  int* d_pos_ = nullptr;
  cuda::KvRow* d_kvrows_ = nullptr;
  int* d_decode_ = nullptr;
  int* d_wanted_ = nullptr;
  cuda::DeltaBatch delta_batch_;
  DeviceScratch s_meta_, s_x_, s_xn_, s_q_, s_k_, s_v_, s_att_, s_router_, s_ids_, s_w_, s_act_, s_up_, s_eout_,
      s_attn_scratch_, s_attn_counters_, s_router_counter_, s_rope_counters_, s_bucket_, s_logits_,
      s_f16_,                                                  // the f16 GEMM's operand (cuda/gemm.h's matmul_tc)
      s_split_,                                                // the router product's partial sums (matmul_tc_split)
      s_shared_g_, s_shared_u_, s_shared_out_, s_shared_gl_,   // the shared expert's gate/up, output, gate logit
      s_guess_xn_, s_guess_logits_, s_guess_ids_, s_guess_w_,  // the prefetch's norm, router logits and top-width
      s_qg_, s_gate_;                                          // gated attention: q_proj's output, the gate
  PinnedScratch meta_host_, logits_host_;
  cudaEvent_t span_[2] = {};  // recorded around a forward's device work
  double device_seconds_ = 0.0;
  std::vector<int> ids_host_;
  std::vector<float> weights_host_;
  PinnedScratch guess_host_;
  cudaEvent_t guessed_ = nullptr;  // the guess's ids are in guess_host_
  RouteSource* route_source_ = nullptr;
  RouteObserver* route_observer_ = nullptr;
  int prefetch_width_ = 0;
  // Expert parallelism (CudaForwardOptions::placement): this rank's share of the experts and its peers; the index
  // lists of a layer's gathers (pinned, one upload) and its exchange buffers.
  std::shared_ptr<const ExpertPlacement> placement_;
  Transport* transport_ = nullptr;
  PinnedScratch ep_index_host_;
  // Events around each exchange of a forward (pairs, reused), read once the forward has synchronised.
  std::vector<cudaEvent_t> ep_events_;
  size_t ep_events_used_ = 0;
  Exchanges exchanges_;
  cudaEvent_t ep_event();
  DeviceScratch s_ep_index_, s_ep_send_, s_ep_recv_, s_ep_pairs_, s_ep_out_, s_ep_back_;

  // Decode as one CUDA graph (batch 1, every expert resident): the graph reads token, position and cache row from
  // the batch description in device memory, and decode attention sizes its splits from the cache's capacity read
  // there too (splits past the position are empty and add nothing), so one capture serves every position. It is
  // captured when a decode finds the same buffers (the key) as the eager decode before it, and replaced when they
  // change.
  bool graphs_ = true;
  cudaGraphExec_t graph_ = nullptr;
  std::vector<const void*> graph_key_, eager_key_;
  int64_t graph_replays_ = 0;
  // This step is one decode row over a VRAM cache read in place (VramExperts::direct): each layer's routes land in
  // their own rows of s_ids_, which the host reads after the step to fill the cache.
  bool direct_step_ = false;
  // --cpu-misses: the share of a direct step's misses the host computes, and whether this step does (a direct step
  // with a share above 0: not graphed, a host round trip each MoE layer).
  Model* model_ = nullptr;
  double cpu_misses_ = 0.0;
  bool host_step_ = false;
  PinnedScratch host_routes_, host_outputs_;  // the layer's ids, weights and xn back; the split and the CPU's outputs
  DeviceScratch s_host_split_;                // the GPU's ids and weights, then the CPU's weights and outputs
  uint64_t host_computed_ = 0;
  double host_seconds_ = 0.0;

 public:
  int64_t graph_replays() const { return graph_replays_; }
};

namespace {
// The parts of a layer plan (model/config.h) the CUDA forward runs so far; anything else is refused up front,
// naming the layer and the part, rather than computed as if it were absent.
void check_plan_runs_on_cuda(const ModelConfig& c) {
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerPlan& p = c.plan(l);
    // The per-head norm runs inside qk_rope_kv, after which nothing could clamp before RoPE as decoder.cpp does.
    if (p.attn.qk_norm == QkNorm::PerHead && p.attn.clip_qkv > 0) {
      fail(
          "--device cuda: {} layer {} uses clip_qkv with a per-head q/k norm, which the CUDA forward does not run yet "
          "(use --device cpu)",
          c.model_type, l);
    }
  }
}

cuda::RouterPolicy router_policy(const RouterPlan& p, const float* bias, const float* correction) {
  cuda::RouterPolicy r;
  r.gating = p.gating == Gating::SoftmaxTopK   ? cuda::RouteGating::SoftmaxTopK
             : p.gating == Gating::TopKSoftmax ? cuda::RouteGating::TopKSoftmax
                                               : cuda::RouteGating::SigmoidGroupTopK;
  r.renormalize = p.renormalize;
  r.bias = p.bias ? bias : nullptr;
  r.correction = p.correction_bias ? correction : nullptr;
  r.n_group = p.n_group;
  r.topk_group = p.topk_group;
  r.scale = p.scale;
  r.masked = p.masked_neg_inf ? -INFINITY : 0.0f;
  return r;
}
}  // namespace

CudaForward::CudaForward(Model& model, const CudaForwardOptions& o)
    : c_(model.config()), kv_layout_(cache_shapes(c_)), graphs_(o.graphs), model_(&model) {
  check_plan_runs_on_cuda(c_);
  check(cudaSetDevice(o.device), "selecting the CUDA device");
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating the compute stream");
  for (cudaEvent_t& e : span_) check(cudaEventCreate(&e), "creating a timing event");
  const ModelWeights& w = model.weights();
  embed_ = upload(w.embed);
  head_ = upload(w.lm_head);
  final_norm_ = upload(w.final_norm);
  const ops::Rope& rope = model.rope();
  inv_freq_ = upload(rope.inv_freq);
  rotary_dim_ = rope.rotary_dim;
  rope_scaling_ = rope.attention_scaling;
  for (size_t li = 0; li < w.layers.size(); ++li) {
    const LayerWeights& lw = w.layers[li];
    Layer l;
    l.plan = c_.plan(int(li));
    const FfnPlan& fp = l.plan.ffn;
    for (const TensorSpec& t : layer_tensors(c_, model.family(), int(li))) {
      const LayerWeights::ConstSlot host = lw.slot(t.role);
      if (host.matrix != nullptr) {
        l.matrices[size_t(t.role)] = upload(*host.matrix);
      } else {
        l.vectors[size_t(t.role)] = upload(*host.vector);
      }
    }
    l.has_experts = lw.has_experts;
    if (fp.expert_bias) {  // Model::load split the stored (E, 2I) gate_up bias into gate and up rows
      l.expert_math.gate_bias = l.v(Role::ExpertGateUpBias);
      l.expert_math.up_bias = upload(lw.expert_up_bias);
      l.expert_math.down_bias = l.v(Role::ExpertDownBias);
    }
    l.expert_math.clamped = fp.act == Activation::ClampedSwiGLU;
    l.expert_math.alpha = fp.swiglu_alpha;
    l.expert_math.limit = fp.swiglu_limit;
    if (l.plan.mixer == Mixer::Mla) {
      l.mla = {.q_a = l.m(Role::MlaQA),
               .q_b = l.m(Role::MlaQB),
               .q = l.m(Role::Q),
               .kv_a = l.m(Role::MlaKvA),
               .kv_b = l.m(Role::MlaKvB),
               .o = l.m(Role::O),
               .attn_norm = l.v(Role::AttnNorm),
               .q_a_norm = l.v(Role::MlaQANorm),
               .kv_a_norm = l.v(Role::MlaKvANorm)};
      cuda::check_mla_layer(l.plan.mla, l.mla, rotary_dim_, int(li));
    }
    layers_.push_back(l);
  }
  delta_net_ = std::make_unique<cuda::GatedDeltaNet>(
      c_, [this](const float* x, int64_t m, const DeviceMatrix& w, float* y, bool accumulate) {
        product(x, m, w, y, accumulate, stream_, s_f16_, float32_);
      });
  float32_ = delta_net_->state_floats() > 0;
  size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "reading free VRAM");
  experts_ = std::make_unique<cuda::VramExperts>(model, o, free_b, stream_);
  if (o.cpu_misses > 0.0) {
    if (!(o.cpu_misses <= 1.0)) fail("--cpu-misses {}: a share of the misses, from 0 to 1", o.cpu_misses);
    if (experts_->direct() && o.placement == nullptr && o.prefetch_width == 0) {
      cpu_misses_ = o.cpu_misses;
    } else if (o.verbose) {
      std::fprintf(stderr, "experts: --cpu-misses %g changes nothing here: %s\n", o.cpu_misses,
                   experts_->why_not_direct() != nullptr ? experts_->why_not_direct()
                   : o.placement != nullptr              ? "experts are placed across devices (--devices)"
                                                         : "--prefetch-width copies its guesses first");
    }
  }
  if (o.placement != nullptr) {
    if (o.transport == nullptr) fail("expert parallelism: a placement without a transport");
    if (o.prefetch_width > 0) fail("--prefetch-width does not run with --devices yet");
    placement_ = o.placement;
    transport_ = o.transport;
    transport_->set_stream(stream_);  // exchanges in order with the kernels around them
  }
  if (o.prefetch_width > 0) {
    if (o.prefetch_width > c_.num_experts) {
      fail("--prefetch-width {}: the model has {} experts a layer", o.prefetch_width, c_.num_experts);
    }
    if (experts_->resident()) fail("--prefetch-width: every expert is in VRAM, there is nothing to prefetch");
    if (experts_->three_tier()) {
      fail(
          "--prefetch-width: the VRAM cache is fed through a RAM budget (three tiers); prefetch runs from pinned "
          "host memory only (no --ram-budget)");
    }
    prefetch_width_ = o.prefetch_width;
    check(cudaEventCreateWithFlags(&guessed_, cudaEventDisableTiming), "creating the prefetch event");
  }
}

CudaForward::~CudaForward() {
  if (stream_) cudaStreamSynchronize(stream_);
  if (graph_) cudaGraphExecDestroy(graph_);
  if (guessed_) cudaEventDestroy(guessed_);
  for (cudaEvent_t e : ep_events_) cudaEventDestroy(e);
  for (cudaEvent_t e : span_) {
    if (e) cudaEventDestroy(e);
  }
  for (void* p : owned_) cudaFree(p);
  if (stream_) cudaStreamDestroy(stream_);
}

DeviceMatrix CudaForward::upload(const ops::Matrix& m) {
  DeviceMatrix d{m.codec, nullptr, m.rows, m.cols};
  if (!cuda::has_kernel(m.codec)) {
    fail("--device cuda: a {} x {} weight is stored as {}, which has no CUDA kernel ({} have)", m.rows, m.cols,
         codec_name(m.codec), cuda::kernel_codec_names());
  }
  if (m.data == nullptr || m.nbytes() == 0) return d;
  auto it = uploaded_.find(m.data);
  if (it != uploaded_.end()) {
    d.data = it->second;
    return d;
  }
  void* p = nullptr;
  check(cudaMalloc(&p, cuda::device_matrix_bytes(m.codec, m.rows, m.cols)), "allocating VRAM for a weight");
  owned_.push_back(p);
  if (cuda::rearranged_on_device(m.codec)) {  // the stored bytes into VRAM, then into their VRAM form there
    void* stored = nullptr;
    check(cudaMalloc(&stored, m.nbytes()), "allocating VRAM for a weight");
    check(cudaMemcpy(stored, m.data, m.nbytes(), cudaMemcpyHostToDevice), "copying a weight to VRAM");
    cuda::to_device_layout(m.codec, stored, p, m.rows, m.cols, nullptr);
    check(cudaStreamSynchronize(nullptr), "rearranging a weight in VRAM");
    check(cudaFree(stored), "freeing a weight's stored copy");
  } else {
    check(cudaMemcpy(p, m.data, m.nbytes(), cudaMemcpyHostToDevice), "copying a weight to VRAM");
  }
  uploaded_[m.data] = p;
  d.data = p;
  return d;
}

const float* CudaForward::upload(const std::vector<float>& v) {
  if (v.empty()) return nullptr;
  void* p = nullptr;
  check(cudaMalloc(&p, v.size() * sizeof(float)), "allocating VRAM for a vector");
  owned_.push_back(p);
  check(cudaMemcpy(p, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice), "copying a vector to VRAM");
  return static_cast<const float*>(p);
}

// The sequence's device cache, grown to the host cache's capacity (which the engine has already reserved); a
// growth copies every position of every layer's planes (KvRowLayout::growth: one copy a plane, a few hundred
// at most, once per doubling).
CudaKv& CudaForward::device_kv(KvCache& kv) {
  if (!kv.device) kv.device = std::make_unique<CudaKv>();
  auto* d = dynamic_cast<CudaKv*>(kv.device.get());
  SEEDLING_CHECK(d != nullptr, "a KV cache holds another device's state");
  if (d->state == nullptr && delta_net_->state_floats() > 0) {
    check(cudaMalloc(&d->state, delta_net_->state_floats() * sizeof(float)), "allocating the recurrent state in VRAM");
  }
  const int need = kv.capacity();
  if (d->cap >= need) return *d;
  const size_t floats = size_t(kv_layout_.per_position()) * size_t(need);
  float* fresh = nullptr;
  if (floats > 0) check(cudaMalloc(&fresh, floats * sizeof(float)), "allocating the KV cache in VRAM");
  if (d->data) {
    for (const KvRowLayout::Copy& c : kv_layout_.growth(d->cap, need)) {
      check(cudaMemcpyAsync(fresh + c.to, d->data + c.from, size_t(c.floats) * sizeof(float), cudaMemcpyDeviceToDevice,
                            stream_),
            "growing the KV cache");
    }
    check(cudaStreamSynchronize(stream_), "growing the KV cache");
    cudaFree(d->data);
  }
  d->data = fresh;
  d->cap = need;
  return *d;
}

void CudaForward::forward(std::span<const BatchRow> rows, float* logits) {
  const int64_t M = int64_t(rows.size());
  m_ = M;
  // The batch as the kernels see it: tokens, positions, each row's cache, prompt runs (consecutive positions of
  // one sequence: flash attention) and single rows (split-key decode attention), and the rows that want logits.
  const size_t rows_n = rows.size();
  std::vector<int> tokens(rows_n), pos(rows_n), decode, wanted;
  std::vector<cuda::KvRow> kvrows(rows_n);
  prompt_runs_.clear();
  for (int64_t i = 0; i < M; ++i) {
    const BatchRow& r = rows[size_t(i)];
    if (r.token < 0 || r.token >= c_.vocab_size) {
      fail("token id {} is out of range: the vocabulary has {} ids", r.token, c_.vocab_size);
    }
    SEEDLING_CHECK(r.pos < r.kv->capacity(), "position {} beyond KV capacity {}", r.pos, r.kv->capacity());
    CudaKv& kv = device_kv(*r.kv);
    if (r.pos == 0 && kv.state != nullptr) {  // a sequence starts (or restarts) from a zero recurrent state
      check(cudaMemsetAsync(kv.state, 0, delta_net_->state_floats() * sizeof(float), stream_), "zeroing a state");
    }
    tokens[size_t(i)] = r.token;
    pos[size_t(i)] = r.pos;
    kvrows[size_t(i)] = {kv.data, kv.cap, r.pos};  // each layer's window is its attention's (AttentionShape)
    if (r.want_logits) wanted.push_back(int(i));
    const bool continues = i > 0 && rows[size_t(i - 1)].kv == r.kv && rows[size_t(i - 1)].pos + 1 == r.pos;
    if (continues && !prompt_runs_.empty() && prompt_runs_.back().row + prompt_runs_.back().n == int(i)) {
      ++prompt_runs_.back().n;
    } else {
      prompt_runs_.push_back({int(i), 1, r.pos, &kv});
    }
  }
  // The Gated DeltaNet layers' view: each row's state and run; runs of two or more take the chunked form.
  std::vector<cuda::DeltaRow> delta;
  std::vector<int> delta_runs;
  if (delta_net_->state_floats() > 0) {
    delta.resize(rows_n);
    for (const Run& r : prompt_runs_) {
      for (int i = r.row; i < r.row + r.n; ++i) delta[size_t(i)] = {r.kv->state, r.row, r.n};
      if (r.n >= 2) delta_runs.push_back(r.row);
    }
  }
  // Runs of one row go to decode attention.
  std::vector<Run> runs;
  for (const Run& r : prompt_runs_) {
    if (r.n >= 2) {
      runs.push_back(r);
    } else {
      decode.push_back(r.row);
    }
  }
  prompt_runs_ = std::move(runs);
  decode_rows_ = int64_t(decode.size());
  const int64_t W = int64_t(wanted.size());
  direct_step_ = M == 1 && decode_rows_ == 1 && !experts_->resident() && experts_->direct() && prefetch_width_ == 0 &&
                 transport_ == nullptr;
  host_step_ = direct_step_ && cpu_misses_ > 0.0;
  const bool graphed = graphs_ && M == 1 && decode_rows_ == 1 && W == 1 &&
                       (experts_->resident() || (direct_step_ && !host_step_)) && route_source_ == nullptr &&
                       route_observer_ == nullptr && transport_ == nullptr;
  // One upload of the batch description.
  auto align = [](size_t n) { return (n + 15) / 16 * 16; };
  const size_t o_pos = align(tokens.size() * 4), o_kv = o_pos + align(pos.size() * 4),
               o_dec = o_kv + align(kvrows.size() * sizeof(cuda::KvRow)), o_want = o_dec + align(decode.size() * 4),
               o_delta = o_want + align(wanted.size() * 4),
               o_runs = o_delta + align(delta.size() * sizeof(cuda::DeltaRow)),
               total = o_runs + align(delta_runs.size() * 4);
  uint8_t* mh = meta_host_.get(total);  // the last forward's copy from it finished (it ended in a synchronize)
  std::memset(mh, 0, total);
  std::memcpy(mh, tokens.data(), tokens.size() * 4);
  std::memcpy(mh + o_pos, pos.data(), pos.size() * 4);
  std::memcpy(mh + o_kv, kvrows.data(), kvrows.size() * sizeof(cuda::KvRow));
  std::memcpy(mh + o_dec, decode.data(), decode.size() * 4);
  std::memcpy(mh + o_want, wanted.data(), wanted.size() * 4);
  std::memcpy(mh + o_delta, delta.data(), delta.size() * sizeof(cuda::DeltaRow));
  std::memcpy(mh + o_runs, delta_runs.data(), delta_runs.size() * 4);
  uint8_t* meta = s_meta_.get<uint8_t>(total);
  check(cudaEventRecord(span_[0], stream_), "timing the forward");
  check(cudaMemcpyAsync(meta, mh, total, cudaMemcpyHostToDevice, stream_), "uploading the batch");
  d_tokens_ = reinterpret_cast<int*>(meta);
  d_pos_ = reinterpret_cast<int*>(meta + o_pos);
  d_kvrows_ = reinterpret_cast<cuda::KvRow*>(meta + o_kv);
  d_decode_ = reinterpret_cast<int*>(meta + o_dec);
  d_wanted_ = reinterpret_cast<int*>(meta + o_want);
  delta_batch_ = {M,
                  reinterpret_cast<cuda::DeltaRow*>(meta + o_delta),
                  d_decode_,
                  decode_rows_,
                  reinterpret_cast<int*>(meta + o_runs),
                  int64_t(delta_runs.size())};

  if (direct_step_) experts_->refresh_direct();  // before the graph: the tables it reads, the misses' copies
  if (!graphed) {
    enqueue(W);
  } else if (graph_ != nullptr && graph_key() == graph_key_) {
    check(cudaGraphLaunch(graph_, stream_), "replaying the decode graph");
    ++graph_replays_;
  } else if (graph_key() == eager_key_) {
    // The eager decode before this one sized every buffer: capturing allocates nothing.
    if (graph_) check(cudaGraphExecDestroy(graph_), "dropping the old decode graph");
    graph_ = nullptr;
    cudaGraph_t g = nullptr;
    check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "capturing the decode graph");
    try {
      enqueue(W);
    } catch (...) {
      cudaStreamEndCapture(stream_, &g);
      if (g) cudaGraphDestroy(g);
      throw;
    }
    check(cudaStreamEndCapture(stream_, &g), "capturing the decode graph");
    const cudaError_t e = cudaGraphInstantiate(&graph_, g, 0);
    cudaGraphDestroy(g);
    check(e, "instantiating the decode graph");
    graph_key_ = graph_key();
    check(cudaGraphLaunch(graph_, stream_), "replaying the decode graph");
    ++graph_replays_;
  } else {
    enqueue(W);
    eager_key_ = graph_key();
  }
  // Logits come back through pinned memory up to kPinnedLogitBytes (a decode step's are 0.6 MB); a prompt pass
  // that wants every row's logits copies them straight into pageable memory rather than pin gigabytes.
  constexpr size_t kPinnedLogitBytes = size_t(64) << 20;
  const size_t logit_bytes = size_t(W) * size_t(c_.vocab_size) * sizeof(float);
  const bool via_pinned = W > 0 && logit_bytes <= kPinnedLogitBytes;
  uint8_t* lh = via_pinned ? logits_host_.get(logit_bytes) : nullptr;
  if (W > 0) {
    check(cudaMemcpyAsync(via_pinned ? static_cast<void*>(lh) : logits, s_logits_.ptr(), logit_bytes,
                          cudaMemcpyDeviceToHost, stream_),
          "copying the logits back");
  }
  if (direct_step_) {  // every layer's routes, for the cache
    ids_host_.resize(size_t(c_.num_layers) * size_t(c_.experts_per_token));
    check(cudaMemcpyAsync(ids_host_.data(), s_ids_.ptr(), ids_host_.size() * sizeof(int), cudaMemcpyDeviceToHost,
                          stream_),
          "copying the routes back");
  }
  check(cudaEventRecord(span_[1], stream_), "timing the forward");
  check(cudaStreamSynchronize(stream_), "the forward pass");
  if (direct_step_) experts_->learn(ids_host_, c_.experts_per_token);
  if (via_pinned) std::memcpy(logits, lh, logit_bytes);
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, span_[0], span_[1]), "timing the forward");
  device_seconds_ = double(ms) / 1e3;
  for (size_t i = 0; i + 1 < ep_events_used_; i += 2) {
    check(cudaEventElapsedTime(&ms, ep_events_[i], ep_events_[i + 1]), "timing an exchange");
    exchanges_.seconds += double(ms) / 1e3;
  }
  ep_events_used_ = 0;
}

cudaEvent_t CudaForward::ep_event() {
  if (ep_events_used_ == ep_events_.size()) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreate(&e), "creating an exchange timing event");
    ep_events_.push_back(e);
  }
  return ep_events_[ep_events_used_++];
}

// Every buffer a batch-1 decode's launches name: a graph captured with them stays valid while they are unchanged.
std::vector<const void*> CudaForward::graph_key() const {
  return {s_meta_.ptr(),
          s_x_.ptr(),
          s_xn_.ptr(),
          s_q_.ptr(),
          s_k_.ptr(),
          s_v_.ptr(),
          s_att_.ptr(),
          s_router_.ptr(),
          s_ids_.ptr(),
          s_w_.ptr(),
          s_act_.ptr(),
          s_up_.ptr(),
          s_eout_.ptr(),
          s_attn_scratch_.ptr(),
          s_attn_counters_.ptr(),
          s_router_counter_.ptr(),
          s_rope_counters_.ptr(),
          s_logits_.ptr(),
          s_shared_g_.ptr(),
          s_shared_u_.ptr(),
          s_shared_out_.ptr(),
          s_shared_gl_.ptr(),
          mla_.buffer(),
          mla_.counters(),
          s_qg_.ptr(),
          s_gate_.ptr(),
          delta_net_->scratch()};
}

// The forward on stream_. One row (decode) takes the fused path: each RMS norm inside the launch that reads its
// output, q/k/v in one launch, the router with its top-k, the down products with the combine; its numbers are the
// unfused launches' bit for bit (kernels.h says why), so a row alone and the rows of a batch of fewer than
// kTensorCoreRows agree (from kTensorCoreRows the products run on tensor cores, with TF32 or f16 inputs).
void CudaForward::enqueue(int64_t W) {
  const int64_t M = m_, H = c_.hidden_size;
  float* x = s_x_.get<float>(size_t(M * H));
  float* xn = s_xn_.get<float>(size_t(M * H));
  cuda::embed(d_tokens_, M, embed_, x, stream_);  // (M, H)
  for (int l = 0; l < c_.num_layers; ++l) {
    const Layer& lw = layers_[size_t(l)];
    const bool guessing = prefetch_width_ > 0 && lw.has_experts;
    if (guessing) guess(l, x);  // the layer's likeliest experts, from the residual entering it
    if (lw.plan.mixer == Mixer::Mla) {
      mla_attention(l, x, xn);  // x += o(latent attention(norm(x)))
    } else if (lw.plan.mixer == Mixer::GatedDeltaNet) {
      delta_net_->run(l, lw.matrices, lw.vectors, x, xn, delta_batch_, stream_);  // x += out(delta net(norm(x)))
    } else {
      attention(l, x, xn);  // x += o(attention(norm(x)))
    }
    if (guessing) prefetch(l);  // their copies start while the attention runs
    if (lw.has_experts) {
      moe(l, x, xn);                                              // x += sum of the experts of norm(x)
      if (lw.plan.ffn.shared_width > 0) shared_expert(l, x, xn);  // x += the shared expert of norm(x)
    } else {
      const int64_t I = lw.m(Role::MlpGate).rows;
      float* g = s_act_.get<float>(size_t(M * I));
      float* u = s_up_.get<float>(size_t(M * I));
      cuda::rms_norm(x, xn, M, H, lw.v(Role::FfnNorm), c_.rms_norm_eps, stream_);
      product(xn, M, lw.m(Role::MlpGate), g, false, stream_, s_f16_, float32_);
      product(xn, M, lw.m(Role::MlpUp), u, false, stream_, s_f16_, float32_);
      cuda::silu_mul(g, u, g, M * I, stream_);
      product(g, M, lw.m(Role::MlpDown), x, true, stream_, s_f16_, float32_);
    }
  }
  // Head over the rows that want logits: (wanted, H) -> (wanted, V).
  if (W > 0) {
    float* out = s_logits_.get<float>(size_t(W) * size_t(c_.vocab_size));
    if (M == 1) {
      float* const ys[1] = {out};
      if (!skipped(M, kSkipHead)) cuda::matvec(x, {&head_, 1}, ys, final_norm_, c_.rms_norm_eps, xn, false, stream_);
    } else {
      cuda::gather_rows(x, d_wanted_, W, H, xn, stream_);
      cuda::rms_norm(xn, xn, W, H, final_norm_, c_.rms_norm_eps, stream_);
      accurate_product(xn, W, head_, out, false, stream_);
    }
  }
}

void CudaForward::attention(int layer, float* x, float* xn) {
  const Layer& lw = layers_[size_t(layer)];
  const int64_t M = m_, H = c_.hidden_size;
  const int Q = c_.q_dim(), KV = c_.kv_dim(), hd = c_.head_dim;
  float* q = s_q_.get<float>(size_t(M * Q));
  float* k = s_k_.get<float>(size_t(M * KV));
  float* v = s_v_.get<float>(size_t(M * KV));
  float* att = s_att_.get<float>(size_t(M * Q));
  const AttentionPlan& plan = lw.plan.attn;
  const bool whole_norm = plan.qk_norm == QkNorm::Whole;
  const float* q_head_norm = whole_norm ? nullptr : lw.v(Role::QNorm);  // per head: inside qk_rope_kv
  const float* k_head_norm = whole_norm ? nullptr : lw.v(Role::KNorm);
  // Gated attention: q_proj's rows (per head its query, then its gate) into qg, split into q and gate below.
  float* qg = plan.output_gate ? s_qg_.get<float>(size_t(M * 2 * Q)) : q;
  // One launch for a decode row whose q, k and v go from the product (biases added there) to the per-head norm and
  // RoPE; a whole-projection norm, a clip or an output gate come between them, so those plans take separate launches.
  // A decode row's biases are added by the product's launch; prompt rows take add_bias after theirs.
  const bool fused = M == 1 && !whole_norm && plan.clip_qkv <= 0 && !plan.output_gate;
  const float* const qkv_bias[3] = {lw.v(Role::QBias), lw.v(Role::KBias), lw.v(Role::VBias)};
  if (fused) {  // q/k/v, qk-norm, RoPE and the cache write in one launch
    const DeviceMatrix ws[3] = {lw.m(Role::Q), lw.m(Role::K), lw.m(Role::V)};
    const cuda::QkRope rope{.n_heads = c_.num_heads,
                            .n_kv_heads = c_.num_kv_heads,
                            .head_dim = hd,
                            .q_norm = q_head_norm,
                            .k_norm = k_head_norm,
                            .eps = c_.rms_norm_eps,
                            .pos = d_pos_,
                            .inv_freq = inv_freq_,
                            .rotary_dim = rotary_dim_,
                            .scaling = rope_scaling_,
                            .rows = d_kvrows_,
                            .base = kv_layout_.base(layer)};
    int* counters = s_rope_counters_.get_zeroed<int>(size_t(c_.num_heads + 2 * c_.num_kv_heads), stream_);
    if (!skipped(M, kSkipQkv)) {
      cuda::matvec_qkv_rope(x, ws, q, k, v, lw.v(Role::AttnNorm), c_.rms_norm_eps, xn, rope, counters, stream_,
                            qkv_bias);
    }
  } else if (M == 1) {
    const DeviceMatrix ws[3] = {lw.m(Role::Q), lw.m(Role::K), lw.m(Role::V)};
    float* const ys[3] = {qg, k, v};
    cuda::matvec(x, ws, ys, lw.v(Role::AttnNorm), c_.rms_norm_eps, xn, false, stream_, qkv_bias);
  } else {
    cuda::rms_norm(x, xn, M, H, lw.v(Role::AttnNorm), c_.rms_norm_eps, stream_);
    const DeviceMatrix ws[3] = {lw.m(Role::Q), lw.m(Role::K), lw.m(Role::V)};
    float* const ys[3] = {qg, k, v};
    products(xn, M, ws, ys, 3, stream_, s_f16_, float32_);  // (M, Q) or (M, 2Q) gated, (M, KV) (M, KV)
  }
  float* gate = plan.output_gate ? s_gate_.get<float>(size_t(M * Q)) : nullptr;
  if (gate != nullptr) cuda::split_gated_query(qg, M, c_.num_heads, hd, q, gate, stream_);
  if (M > 1 && lw.v(Role::QBias) != nullptr) {
    cuda::add_bias(q, lw.v(Role::QBias), M, Q, stream_);
    cuda::add_bias(k, lw.v(Role::KBias), M, KV, stream_);
    cuda::add_bias(v, lw.v(Role::VBias), M, KV, stream_);
  }
  if (!fused) {
    if (whole_norm) {  // one RMSNorm over each row's whole q (Q) and k (KV), before the heads split
      cuda::rms_norm(q, q, M, Q, lw.v(Role::QNorm), c_.rms_norm_eps, stream_);
      cuda::rms_norm(k, k, M, KV, lw.v(Role::KNorm), c_.rms_norm_eps, stream_);
    }
    if (plan.clip_qkv > 0) {
      cuda::clamp(q, M * Q, -plan.clip_qkv, plan.clip_qkv, stream_);
      cuda::clamp(k, M * KV, -plan.clip_qkv, plan.clip_qkv, stream_);
      cuda::clamp(v, M * KV, -plan.clip_qkv, plan.clip_qkv, stream_);
    }
    cuda::qk_rope_kv(q, k, v, M, c_.num_heads, c_.num_kv_heads, hd, q_head_norm, k_head_norm, c_.rms_norm_eps, d_pos_,
                     inv_freq_, rotary_dim_, rope_scaling_, d_kvrows_, kv_layout_.base(layer), stream_);
  }
  const cuda::AttentionShape shape{c_.num_heads, c_.num_kv_heads,
                                   hd,           1.0f / std::sqrt(float(hd)),
                                   plan.window,  plan.sinks ? lw.v(Role::Sinks) : nullptr};
  if (decode_rows_ > 0 && !skipped(M, kSkipAttention)) {
    float* scratch = s_attn_scratch_.get<float>(size_t(cuda::decode_attention_scratch_floats(decode_rows_, shape)));
    int* counters = s_attn_counters_.get_zeroed<int>(size_t(decode_rows_ * c_.num_heads), stream_);
    cuda::attention_decode(q, d_decode_, decode_rows_, d_kvrows_, kv_layout_.base(layer), shape, att, scratch, counters,
                           stream_);
  }
  for (const Run& r : prompt_runs_) {
    const float* kc = r.kv->data + size_t(kv_layout_.base(layer)) * size_t(r.kv->cap);
    const float* vc = kc + size_t(r.kv->cap) * size_t(KV);
    cuda::attention_prompt(q + int64_t(r.row) * Q, r.n, r.p0, kc, vc, plan.window, shape, att + int64_t(r.row) * Q,
                           stream_);
  }
  if (gate != nullptr) cuda::mul_sigmoid(att, gate, M * Q, stream_);  // the attention output times sigmoid(gate)
  if (M == 1) {
    float* const ys[1] = {x};
    const float* const bias[1] = {lw.v(Role::OBias)};
    if (!skipped(M, kSkipO)) {
      cuda::matvec(att, {&lw.m(Role::O), 1}, ys, nullptr, 0.0f, nullptr, true, stream_, bias);  // x += o . att (+ b)
    }
  } else {
    product(att, M, lw.m(Role::O), x, true, stream_, s_f16_, float32_);                     // x += (M, H)
    if (lw.v(Role::OBias) != nullptr) cuda::add_bias(x, lw.v(Role::OBias), M, H, stream_);  // x += o's bias
  }
}

// The latent attention of an MLA layer (model/mla.cpp's Model::mla_attention): cuda/mla_forward.h.
void CudaForward::mla_attention(int layer, float* x, float* xn) {
  const Layer& lw = layers_[size_t(layer)];
  const cuda::MlaRows rows{.m = m_,
                           .pos = d_pos_,
                           .rows = d_kvrows_,
                           .inv_freq = inv_freq_,
                           .rope_scaling = rope_scaling_,
                           .eps = c_.rms_norm_eps};
  mla_.run(kv_layout_.base(layer), lw.plan.mla, c_.num_heads, lw.mla, rows, x, xn, stream_, s_f16_);
}

void CudaForward::moe(int layer, float* x, float* xn) {
  const Layer& lw = layers_[size_t(layer)];
  const int64_t M = m_, H = c_.hidden_size, I = c_.moe_intermediate_size;
  const int E = c_.num_experts, K = c_.experts_per_token;
  float* router = s_router_.get<float>(size_t(M * E));
  int* ids = direct_step_ ? s_ids_.get<int>(size_t(c_.num_layers * K)) + size_t(layer) * size_t(K)
                          : s_ids_.get<int>(size_t(M * K));
  float* weights = s_w_.get<float>(size_t(M * K));
  float* act = s_act_.get<float>(size_t(M * K * I));
  const RouterPlan& rp = lw.plan.ffn.router;
  // A softmax router without bias or scale runs router_topk (fused into the product for a decode row); the other
  // policies run router_route on the logits.
  const bool softmax_router = softmax_topk(rp);
  if (softmax_router && M == 1) {  // (1, E) logits, xn, and the top-k in one launch (and the shared expert's gate)
    int* counter = s_router_counter_.get_zeroed<int>(1, stream_);
    if (!skipped(M, kSkipRouter)) {
      const bool gate = shared_gate_in_router(lw);
      cuda::router_matvec_topk(x, lw.m(Role::Router), lw.v(Role::FfnNorm), c_.rms_norm_eps, xn, router, K,
                               rp.renormalize, ids, weights, counter, stream_,
                               gate ? &lw.m(Role::SharedExpertGate) : nullptr,
                               gate ? s_shared_gl_.get<float>(1) : nullptr);
    }
  } else if (softmax_router) {
    cuda::rms_norm(x, xn, M, H, lw.v(Role::FfnNorm), c_.rms_norm_eps, stream_);
    router_product(xn, M, lw.m(Role::Router), router, stream_, s_split_);  // (M, E)
    cuda::router_topk(router, M, E, K, rp.renormalize, ids, weights, stream_);
  } else if (!skipped(M, kSkipRouter)) {
    const cuda::RouterPolicy policy = router_policy(rp, lw.v(Role::RouterBias), lw.v(Role::RouterCorrection));
    if (M == 1) {  // (1, E) logits, xn, and the policy in one launch
      int* counter = s_router_counter_.get_zeroed<int>(1, stream_);
      cuda::router_matvec_route(x, lw.m(Role::Router), lw.v(Role::FfnNorm), c_.rms_norm_eps, xn, router, K, policy, ids,
                                weights, counter, stream_);
    } else {
      cuda::rms_norm(x, xn, M, H, lw.v(Role::FfnNorm), c_.rms_norm_eps, stream_);
      router_product(xn, M, lw.m(Role::Router), router, stream_, s_split_);  // (M, E)
      cuda::router_route(router, M, E, K, policy, ids, weights, stream_);
    }
  }
  if (route_source_ != nullptr || route_observer_ != nullptr) host_routes(layer, ids, weights);
  if (transport_ != nullptr) return moe_expert_parallel(layer, x, xn, ids, weights);
  if (host_step_) return moe_host_misses(layer, x, xn, ids, weights);
  const cuda::ExpertLayout& el = experts_->layout(layer);
  const cuda::ExpertMath& em = lw.expert_math;
  // One pass over every chosen expert: down products and combine in one launch. Several passes (a VRAM cache
  // smaller than the batch's experts): each pass's down products into eout, the combine after the last.
  float* eout = nullptr;
  // From kTensorCoreRows rows: rows bucketed by expert, tensor-core GEMMs (cuda/gemm.h; seed experts too, their
  // blocks decoded in registers; the plan's expert biases and activation in their epilogues). They do not read MXFP4:
  // MXFP4 experts take the CUDA-core expert kernels for prompt rows too (correct, slower on long prompts).
  // A float32 forward's (hybrids) carry float32's accuracy there (x and weights split: gemm.h).
  const bool tc = on_tensor_cores(M, el.gate_up) && on_tensor_cores(M, el.down);
  void* bucket = tc ? s_bucket_.get<uint8_t>(cuda::expert_gemm_scratch_bytes(M, K, E, el)) : nullptr;
  auto run = [&](const uint8_t* const* table, bool only_pass) {
    if (tc) {
      if (eout == nullptr) eout = s_eout_.get<float>(size_t(M * K * H));
      cuda::expert_gemms_tc(xn, M, K, ids, table, E, el, act, eout, bucket, stream_, em,
                            float32_);  // (M*K, I), (M*K, H)
      return;
    }
    if (!skipped(M, kSkipGateUp)) cuda::expert_gate_up(xn, M, K, ids, table, E, el, act, stream_, em);  // (M * K, I)
    if (only_pass) {  // x += sum_s w_s * down_s
      float* scratch = K > 32 ? s_eout_.get<float>(size_t(M * K * H)) : nullptr;
      if (!skipped(M, kSkipDown)) {
        cuda::expert_down_combine(act, M, K, ids, weights, table, E, el, x, scratch, stream_, em);
      }
    } else {
      if (eout == nullptr) eout = s_eout_.get<float>(size_t(M * K * H));
      cuda::expert_down(act, M * K, ids, table, el, eout, stream_, em);  // (M * K, H)
    }
  };
  if (experts_->resident() || direct_step_) {
    run(direct_step_ ? experts_->direct_table(layer) : experts_->table(layer), true);
    if (eout != nullptr) cuda::moe_combine(eout, weights, M, K, H, x, stream_);  // x += sum_s w_s * expert_s
    return;
  }
  // The host learns the chosen experts (this waits for the router), then admits them in ascending order.
  ids_host_.resize(size_t(M * K));
  check(cudaMemcpyAsync(ids_host_.data(), ids, size_t(M * K) * sizeof(int), cudaMemcpyDeviceToHost, stream_),
        "copying the routes back");
  check(cudaStreamSynchronize(stream_), "the router");
  std::vector<int> used(ids_host_);
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  experts_->run_layer(layer, used, run);
  if (eout != nullptr) cuda::moe_combine(eout, weights, M, K, H, x, stream_);  // x += sum_s w_s * expert_s
}

void CudaForward::moe_host_misses(int layer, float* x, const float* xn, const int* ids, const float* weights) {
  const Layer& lw = layers_[size_t(layer)];
  const int64_t H = c_.hidden_size;
  const int E = c_.num_experts, K = c_.experts_per_token;
  // Back: the K ids, the K weights, xn.
  uint8_t* back = host_routes_.get(size_t(K) * 8 + size_t(H) * 4);
  const int* hid = reinterpret_cast<const int*>(back);
  const float* hw = reinterpret_cast<const float*>(back + size_t(K) * 4);
  const float* hxn = reinterpret_cast<const float*>(back + size_t(K) * 8);
  check(cudaMemcpyAsync(back, ids, size_t(K) * 4, cudaMemcpyDeviceToHost, stream_), "copying the routes back");
  check(cudaMemcpyAsync(back + size_t(K) * 4, weights, size_t(K) * 4, cudaMemcpyDeviceToHost, stream_),
        "copying the routes back");
  check(cudaMemcpyAsync(back + size_t(K) * 8, xn, size_t(H) * 4, cudaMemcpyDeviceToHost, stream_),
        "copying the layer's input back");
  check(cudaStreamSynchronize(stream_), "the router");
  // The split: hits, then the misses in slot order; the host takes the last round(share x misses) of them.
  std::vector<int> gpu, misses;
  for (int s = 0; s < K; ++s) {
    SEEDLING_CHECK(hid[s] >= 0 && hid[s] < E, "layer {} routed to expert {} of {}", layer, hid[s], E);
    (experts_->in_vram(layer, hid[s]) ? gpu : misses).push_back(s);
  }
  const size_t host_n = size_t(std::llround(cpu_misses_ * double(misses.size())));
  gpu.insert(gpu.end(), misses.begin(), misses.end() - std::ptrdiff_t(host_n));
  std::sort(gpu.begin(), gpu.end());
  const std::vector<int> host(misses.end() - std::ptrdiff_t(host_n), misses.end());
  // Up: the host's outputs (C x H) and weights, then the GPU's ids and weights: two uploads, each one piece.
  const size_t G = gpu.size(), C = host.size();
  const size_t host_bytes = C * size_t(H) * 4 + C * 4, up_bytes = host_bytes + G * 8;
  uint8_t* up = host_outputs_.get(up_bytes);  // the last layer's upload finished before this layer's router did
  float* host_out = reinterpret_cast<float*>(up);
  float* cw = reinterpret_cast<float*>(up + C * size_t(H) * 4);
  int* gid = reinterpret_cast<int*>(up + host_bytes);
  float* gw = reinterpret_cast<float*>(up + host_bytes + G * 4);
  for (size_t j = 0; j < G; ++j) gid[j] = hid[gpu[j]], gw[j] = hw[gpu[j]];
  for (size_t j = 0; j < C; ++j) cw[j] = hw[host[j]];
  uint8_t* dev = s_host_split_.get<uint8_t>(up_bytes);
  const cuda::ExpertLayout& el = experts_->layout(layer);
  const cuda::ExpertMath& em = lw.expert_math;
  if (G > 0) {  // the GPU's part first, on the direct table (VRAM slots and, for its misses, pinned host blobs)
    check(cudaMemcpyAsync(dev + host_bytes, up + host_bytes, G * 8, cudaMemcpyHostToDevice, stream_),
          "uploading the GPU's experts");
    const int* did = reinterpret_cast<const int*>(dev + host_bytes);
    const float* dw = reinterpret_cast<const float*>(dev + host_bytes + G * 4);
    const uint8_t* const* table = experts_->direct_table(layer);
    float* act = s_act_.get<float>(size_t(K) * size_t(c_.moe_intermediate_size));
    float* scratch = G > 32 ? s_eout_.get<float>(G * size_t(H)) : nullptr;
    cuda::expert_gate_up(xn, 1, int(G), did, table, E, el, act, stream_, em);
    cuda::expert_down_combine(act, 1, int(G), did, dw, table, E, el, x, scratch, stream_, em);
  }
  if (C == 0) return;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int> experts(C);
  for (size_t j = 0; j < C; ++j) experts[j] = hid[host[j]];
  const std::vector<int64_t> rows(C, 0);
  model_->expert_outputs(layer, rows, experts, hxn, host_out);  // (C, H), while the GPU runs its part
  host_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  host_computed_ += C;
  check(cudaMemcpyAsync(dev, up, host_bytes, cudaMemcpyHostToDevice, stream_), "uploading the CPU's expert outputs");
  const float* dhost_out = reinterpret_cast<const float*>(dev);
  const float* dcw = reinterpret_cast<const float*>(dev + C * size_t(H) * 4);
  cuda::moe_combine(dhost_out, dcw, 1, int(C), H, x, stream_);  // x += sum_j w_j * cpu_out_j
}

// parallel/ep_moe.h's steps with device buffers, every exchange on stream_ in order with the kernels: the routes to
// the host (the one wait), the layer's plans from them (replicated_exchange: every rank has every route), this
// rank's shard of the rows gathered and sent to the owners of their experts, this rank's experts on the pairs it
// received (each pair a row with one slot, on the kernels the single-GPU path takes for a batch of M rows), the
// outputs back, the shard's rows combined in slot order by the single-GPU combine, and every shard to every rank.
void CudaForward::moe_expert_parallel(int layer, float* x, const float* xn, const int* ids, const float* weights) {
  const Layer& lw = layers_[size_t(layer)];
  const int64_t M = m_, H = c_.hidden_size, I = c_.moe_intermediate_size;
  const int E = c_.num_experts, K = c_.experts_per_token;
  Transport& t = *transport_;
  ids_host_.resize(size_t(M * K));
  check(cudaMemcpyAsync(ids_host_.data(), ids, size_t(M * K) * sizeof(int), cudaMemcpyDeviceToHost, stream_),
        "copying the routes back");
  check(cudaStreamSynchronize(stream_), "the router");  // also: the last layer's uploads from ep_index_host_ are done
  const ReplicatedExchange ex = replicated_exchange(M, K, ids_host_, *placement_, layer, t.rank());
  const DispatchPlan& plan = ex.plan;
  const int64_t m = ex.shard.end - ex.shard.begin, sent = int64_t(plan.send_row.size());
  const int64_t P = int64_t(ex.pairs.pair_row.size()), back_rows = plan.return_offset.back();
  int64_t received = 0;
  for (int64_t n : ex.recv_rows) received += n;
  // One upload of the gathers' indices: rows to send, the received row of each pair, each pair's expert, and where
  // each (row, slot) of the shard finds its output among those returned.
  const size_t n_index = size_t(sent + 2 * P + m * K);
  int* hi = reinterpret_cast<int*>(ep_index_host_.get(std::max<size_t>(n_index, 1) * sizeof(int)));
  for (int64_t r = 0; r < sent; ++r) hi[r] = int(ex.shard.begin + plan.send_row[size_t(r)]);
  for (int64_t j = 0; j < P; ++j) hi[sent + j] = int(ex.pairs.pair_row[size_t(j)]);
  for (int64_t j = 0; j < P; ++j) hi[sent + P + j] = ex.pairs.pair_expert[size_t(j)];
  for (int64_t j = 0; j < m * K; ++j) hi[sent + 2 * P + j] = int(plan.pair_index[size_t(j)]);
  int* d_index = s_ep_index_.get<int>(std::max<size_t>(n_index, 1));
  check(cudaMemcpyAsync(d_index, hi, n_index * sizeof(int), cudaMemcpyHostToDevice, stream_), "uploading indices");
  const int *send_index = d_index, *pair_row = d_index + sent, *pair_expert = d_index + sent + P,
            *combine_index = d_index + sent + 2 * P;
  // Dispatch.
  float* send = s_ep_send_.get<float>(size_t(std::max<int64_t>(sent, 1) * H));
  float* recv = s_ep_recv_.get<float>(size_t(std::max<int64_t>(received, 1) * H));
  if (sent > 0) cuda::gather_rows(xn, send_index, sent, H, send, stream_);
  check(cudaEventRecord(ep_event(), stream_), "timing the dispatch");
  all_to_all_rows(t, send, plan.send_counts(), recv, ex.recv_rows, H);
  check(cudaEventRecord(ep_event(), stream_), "timing the dispatch");
  // This rank's experts. The tensor cores or not as the single GPU decides for this batch, so the bits match.
  const cuda::ExpertLayout& el = experts_->layout(layer);
  const cuda::ExpertMath& em = lw.expert_math;
  const uint8_t* const* table = experts_->table(layer);
  float* out = s_ep_out_.get<float>(size_t(std::max<int64_t>(P, 1) * H));
  if (P > 0) {
    float* xp = s_ep_pairs_.get<float>(size_t(P * H));
    float* act = s_act_.get<float>(size_t(P * I));
    cuda::gather_rows(recv, pair_row, P, H, xp, stream_);
    if (on_tensor_cores(M, el.gate_up) && on_tensor_cores(M, el.down)) {
      void* bucket = s_bucket_.get<uint8_t>(cuda::expert_gemm_scratch_bytes(P, 1, E, el));
      cuda::expert_gemms_tc(xp, P, 1, pair_expert, table, E, el, act, out, bucket, stream_, em, float32_);
    } else {
      cuda::expert_gate_up(xp, P, 1, pair_expert, table, E, el, act, stream_, em);
      cuda::expert_down(act, P, pair_expert, table, el, out, stream_, em);
    }
  }
  // Return, combine, all-gather.
  float* back = s_ep_back_.get<float>(size_t(std::max<int64_t>(back_rows, 1) * H));
  check(cudaEventRecord(ep_event(), stream_), "timing the return");
  all_to_all_rows(t, out, ex.pairs.return_counts(), back, plan.return_counts(), H);
  check(cudaEventRecord(ep_event(), stream_), "timing the return");
  if (m > 0) {
    float* eout = s_eout_.get<float>(size_t(m * K * H));
    cuda::gather_rows(back, combine_index, m * K, H, eout, stream_);
    cuda::moe_combine(eout, weights + ex.shard.begin * K, m, K, H, x + ex.shard.begin * H, stream_);
  }
  check(cudaEventRecord(ep_event(), stream_), "timing the all-gather");
  all_gather_shards(t, x, M, H);
  check(cudaEventRecord(ep_event(), stream_), "timing the all-gather");
  exchanges_.layers += 1;
  // Rows to the other ranks (what a rank sends itself is a copy on its own GPU).
  const int self = t.rank();
  const int64_t rows_out =
      sent - plan.send_counts()[size_t(self)] + P - ex.pairs.return_counts()[size_t(self)] + m * (t.ranks() - 1);
  exchanges_.bytes_sent += uint64_t(rows_out) * uint64_t(H) * sizeof(float);
}

void CudaForward::host_routes(int layer, int* ids, float* weights) {
  const int64_t M = m_, K = c_.experts_per_token;
  ids_host_.resize(size_t(M * K));
  weights_host_.resize(size_t(M * K));
  check(cudaMemcpyAsync(ids_host_.data(), ids, size_t(M * K) * sizeof(int), cudaMemcpyDeviceToHost, stream_),
        "copying the routes back");
  check(cudaMemcpyAsync(weights_host_.data(), weights, size_t(M * K) * sizeof(float), cudaMemcpyDeviceToHost, stream_),
        "copying the route weights back");
  check(cudaStreamSynchronize(stream_), "the router");
  for (int64_t i = 0; i < M; ++i) {
    const std::span<int> row_ids(ids_host_.data() + i * K, size_t(K));
    const std::span<float> row_weights(weights_host_.data() + i * K, size_t(K));
    if (route_source_ != nullptr) route_source_->route(layer, int(i), row_ids, row_weights);
    if (route_observer_ != nullptr) route_observer_->on_route(layer, int(i), row_ids, row_weights);
  }
  if (route_source_ == nullptr) return;
  check(cudaMemcpyAsync(ids, ids_host_.data(), size_t(M * K) * sizeof(int), cudaMemcpyHostToDevice, stream_),
        "uploading the replayed routes");
  check(cudaMemcpyAsync(weights, weights_host_.data(), size_t(M * K) * sizeof(float), cudaMemcpyHostToDevice, stream_),
        "uploading the replayed route weights");
  check(cudaStreamSynchronize(stream_), "uploading the replayed routes");  // the host vectors are reused
}

// The guess is the layer's own router (its norm and product, softmax top-width) on the residual before the
// attention: what Pre-gated MoE and ProMoE predict with. Its ids come back to pinned memory behind an event, so the
// attention is enqueued before the host waits; the host then asks a route source for its predictions instead
// (--prefetch-replay, with --route-replay), and admits the union of the rows' guesses, whose copies run on the copy
// stream while the GPU runs the attention.
void CudaForward::guess(int layer, const float* x) {
  const Layer& lw = layers_[size_t(layer)];
  const int64_t M = m_, H = c_.hidden_size, W = prefetch_width_;
  const int E = c_.num_experts;
  float* xn = s_guess_xn_.get<float>(size_t(M * H));
  float* logits = s_guess_logits_.get<float>(size_t(M * E));
  int* ids = s_guess_ids_.get<int>(size_t(M * W));
  float* weights = s_guess_w_.get<float>(size_t(M * W));
  cuda::rms_norm(x, xn, M, H, lw.v(Role::FfnNorm), c_.rms_norm_eps, stream_);
  router_product(xn, M, lw.m(Role::Router), logits, stream_, s_split_);  // (M, E)
  cuda::router_topk(logits, M, E, int(W), false, ids, weights, stream_);
  int* host = reinterpret_cast<int*>(guess_host_.get(size_t(M * W) * sizeof(int)));
  check(cudaMemcpyAsync(host, ids, size_t(M * W) * sizeof(int), cudaMemcpyDeviceToHost, stream_),
        "copying the prefetch guess back");
  check(cudaEventRecord(guessed_, stream_), "recording the prefetch guess");
}

void CudaForward::prefetch(int layer) {
  const int64_t M = m_, W = prefetch_width_;
  check(cudaEventSynchronize(guessed_), "the prefetch guess");
  int* host = reinterpret_cast<int*>(guess_host_.get(size_t(M * W) * sizeof(int)));
  std::vector<int> guess;
  for (int64_t i = 0; i < M; ++i) {
    const std::span<int> row{host + i * W, size_t(W)};
    const int n = route_source_ != nullptr ? route_source_->predict(layer, int(i), row) : -1;
    guess.insert(guess.end(), row.begin(), n < 0 ? row.end() : row.begin() + n);
  }
  std::sort(guess.begin(), guess.end());
  guess.erase(std::unique(guess.begin(), guess.end()), guess.end());
  experts_->prefetch(layer, guess);
}

// The shared expert (decoder.cpp's moe, after the routed sum): a SwiGLU MLP of norm(x), added to x, times
// sigmoid(shared_expert_gate . norm(x)) where the plan gates it (that logit through the router's product, which keeps
// float32's accuracy from kTensorCoreRows rows).
void CudaForward::shared_expert(int layer, float* x, const float* xn) {
  const Layer& lw = layers_[size_t(layer)];
  const int64_t M = m_, H = c_.hidden_size, S = lw.m(Role::SharedGate).rows;
  float* g = s_shared_g_.get<float>(size_t(M * S));
  float* u = s_shared_u_.get<float>(size_t(M * S));
  if (M == 1) {  // one launch where gate and up share a codec
    const DeviceMatrix ws[2] = {lw.m(Role::SharedGate), lw.m(Role::SharedUp)};
    float* const ys[2] = {g, u};
    cuda::matvec(xn, ws, ys, nullptr, 0.0f, nullptr, false, stream_);
  } else {
    product(xn, M, lw.m(Role::SharedGate), g, false, stream_, s_f16_, float32_);  // (M, S)
    product(xn, M, lw.m(Role::SharedUp), u, false, stream_, s_f16_, float32_);    // (M, S)
  }
  cuda::silu_mul(g, u, g, M * S, stream_);
  if (!lw.plan.ffn.shared_gate) {
    product(g, M, lw.m(Role::SharedDown), x, true, stream_, s_f16_, float32_);  // x += (M, H)
    return;
  }
  float* out = s_shared_out_.get<float>(size_t(M * H));
  float* gate = s_shared_gl_.get<float>(size_t(M));
  product(g, M, lw.m(Role::SharedDown), out, false, stream_, s_f16_, float32_);  // (M, H)
  if (!shared_gate_in_router(lw)) {
    router_product(xn, M, lw.m(Role::SharedExpertGate), gate, stream_, s_split_);  // (M, 1)
  }
  cuda::add_sigmoid_scaled(x, out, gate, M, H, stream_);
}

}  // namespace

std::unique_ptr<DeviceForward> make_cuda_forward(Model& model, const CudaForwardOptions& options) {
  return std::make_unique<CudaForward>(model, options);
}

int64_t cuda_graph_replays(const DeviceForward& forward) {
  const auto* f = dynamic_cast<const CudaForward*>(&forward);
  SEEDLING_CHECK(f != nullptr, "cuda_graph_replays: the forward is not the CUDA one");
  return f->graph_replays();
}

unsigned parse_decode_skips(std::string_view list) {
  static const std::pair<const char*, unsigned> kNames[] = {
      {"qkv", kSkipQkv},        {"attention", kSkipAttention}, {"o", kSkipO},      {"router", kSkipRouter},
      {"gate_up", kSkipGateUp}, {"down", kSkipDown},           {"head", kSkipHead}};
  unsigned out = 0;
  size_t at = 0;
  while (at < list.size()) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string_view name = list.substr(at, end - at);
    unsigned bit = 0;
    for (const auto& [n, b] : kNames) bit = name == n ? b : bit;
    if (bit == 0) {
      fail("SEEDLING_DECODE_SKIP: '{}' is not a decode launch (known: qkv, attention, o, router, gate_up, down, head)",
           name);
    }
    out |= bit;
    at = end + 1;
  }
  return out;
}

}  // namespace seedling
