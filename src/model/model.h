// model/model.h - a loaded model: config, resident weights, the expert provider, and the forward pass.
//
// Data path of forward(): tokens -> embedding -> for each layer { RMSNorm -> attention (KV cache) -> residual ;
// RMSNorm -> router -> expert provider -> SwiGLU experts (or a dense MLP) -> residual } -> final norm -> head.
// Shapes in comments: M rows in a batch, H hidden, Q = heads * head_dim, KV = kv_heads * head_dim, E experts,
// I expert width, V vocab.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "experts/expert_provider.h"
#include "io/gguf.h"
#include "io/packed_model.h"
#include "io/safetensors.h"
#include "kv/kv_cache.h"
#include "model/config.h"
#include "model/family.h"
#include "ops/matrix.h"
#include "ops/ops.h"

namespace seedling {

// One layer's resident tensors, filled by role from the family's schema (model/family.h: layer_tensors); what a
// layer's plan does not use stays empty.
struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;  // (H)
  ops::Matrix q, k, v, o;                  // (Q, H) (KV, H) (KV, H) (H, Q)
  std::vector<float> q_bias, k_bias, v_bias, o_bias;
  std::vector<float> q_norm, k_norm;  // (head_dim) per head, or (Q) and (KV) over the whole projection
  std::vector<float> sinks;           // (heads)
  bool has_experts = false;
  ops::Matrix router;  // (E, H)
  std::vector<float> router_bias, router_correction;
  ops::Matrix mlp_gate, mlp_up, mlp_down;           // dense layers: (intermediate, H) x2, (H, intermediate)
  ops::Matrix shared_gate, shared_up, shared_down;  // the shared expert: (S, H) x2, (H, S)
  ops::Matrix shared_expert_gate;                   // (1, H)
  std::vector<float> expert_gate_bias, expert_up_bias, expert_down_bias;  // (E, I) (E, I) (E, H)
  // Gated DeltaNet (LinearAttentionPlan): grouped qkvz + ba, or qkv, z, b, a; conv (channels x kernel), dt_bias and
  // A_log (value heads), the gated norm (value_head_dim), out (H, value_width).
  ops::Matrix lin_qkvz, lin_ba, lin_qkv, lin_z, lin_b, lin_a, lin_out;
  std::vector<float> lin_conv, lin_dt_bias, lin_a_log, lin_norm;
  // Mixer::Mla (model/mla.h): q_a (q_lora_rank, H), q_b (heads * (nope + rope), q_lora_rank) or q = q_proj,
  // kv_a (kv_lora_rank + rope, H), kv_b (heads * (nope + v), kv_lora_rank); o is (H, heads * v).
  ops::Matrix mla_q_a, mla_q_b, mla_kv_a, mla_kv_b;
  std::vector<float> mla_q_a_norm, mla_kv_a_norm;
  // kv_b's nope rows transposed per head, float32 [heads][kv_lora_rank][nope], for the query's absorption.
  std::vector<float> mla_k_absorb;

  // The member a role of layer_tensors loads into: a matrix or a vector of floats (the other is null).
  struct Slot {
    ops::Matrix* matrix;
    std::vector<float>* vector;
  };
  struct ConstSlot {
    const ops::Matrix* matrix;
    const std::vector<float>* vector;
  };
  Slot slot(Role role);
  ConstSlot slot(Role role) const {
    const Slot s = const_cast<LayerWeights*>(this)->slot(role);
    return {s.matrix, s.vector};
  }
  const ops::Matrix* matrix_of(Role role) const { return slot(role).matrix; }
};

struct ModelWeights {
  ops::Matrix embed;              // (V, H)
  ops::Matrix lm_head;            // (V, H); the embedding when tied
  std::vector<float> final_norm;  // (H)
  std::vector<LayerWeights> layers;
};

// One row of a forward: a token at a position of a sequence whose cache already holds positions [0, pos).
struct BatchRow {
  int32_t token = 0;
  int pos = 0;
  KvCache* kv = nullptr;
  bool want_logits = false;
};

// The same forward on another machine (cuda/cuda_forward.h): reads this model's config and weights, keeps its own
// copies where it computes, and is held to the CPU forward by tests. When set, Model::forward hands rows to it.
class DeviceForward {
 public:
  virtual ~DeviceForward() = default;
  virtual void forward(std::span<const BatchRow> rows, float* logits) = 0;
  virtual const char* name() const = 0;
  // Its expert cache's counters (hits, misses, bytes copied), as the CPU providers report theirs.
  virtual ExpertStats expert_stats() const { return {}; }
  // Rows a forward should carry at most: a long prompt runs layer by layer over chunks of this many rows, so an
  // expert cache admits each missed expert once per chunk.
  virtual int rows_per_forward() const { return 512; }
  // Seconds the device spent on the last forward, from its first copy or launch to its logits on the host (0 where
  // not measured): against the wall time of a step, what the host adds.
  virtual double last_device_seconds() const { return 0.0; }
  // Allocates the sequence's copy on the device (its rows at kv's capacity, its recurrent state) now, which its next
  // forward would otherwise do: so that `bench` can measure what a sequence takes (Engine::reserve).
  virtual void allocate(KvCache& kv) { (void)kv; }
  // Expert parallelism (--devices): over the run, the MoE layers' exchanges (dispatch, return, all-gather) as timed
  // on the device's stream, waits for peers included, and the bytes this rank sent to the others. Zero without.
  struct Exchanges {
    int64_t layers = 0;
    double seconds = 0.0;
    uint64_t bytes_sent = 0;
  };
  virtual Exchanges exchanges() const { return {}; }
  // Routes to replace the router's (Model::set_route_source hands its source on); null: the router's own.
  virtual void set_route_source(RouteSource* s) = 0;
  // Sees each row's route after any replay, as the CPU's MoE block reports it (Model::set_route_observer hands its
  // observer on); null: none. Never changes a logit.
  virtual void set_route_observer(RouteObserver* o) = 0;
};

// Where a MoE layer's routed sum is computed when not here (expert parallelism, parallel/ep_moe.h): given the
// layer's normalised rows and their routes, it writes out[i] = sum over s of weight[i][s] * expert(xn[i]) in the
// row's slot order, the bits of the single-device sum (combine_expert_outputs), wherever the experts ran.
class RoutedSum {
 public:
  virtual ~RoutedSum() = default;
  // xn (M, H); chosen and weight (M, K) as the router left them; out (M, H).
  virtual void routed_sum(int layer, int64_t M, const float* xn, const int* chosen, const float* weight,
                          float* out) = 0;
};

class Model {
 public:
  // Reads config.json and the safetensors of a Hugging Face folder, a packed folder (one with manifest.json,
  // docs/formats/packed.md) or a GGUF file (docs/formats/gguf.md; `dir` is then the file); checks every tensor's
  // presence, codec and shape the same way for all three. Experts stay mapped (the resident provider) unless
  // set_expert_provider replaces it.
  static std::unique_ptr<Model> load(const std::string& dir);

  const ModelConfig& config() const { return config_; }
  const Family& family() const { return *family_; }
  const std::string& dir() const { return dir_; }
  // The Hugging Face checkpoint; an Error for a packed folder (see packed()).
  const Checkpoint& checkpoint() const;
  // The packed folder's manifest, blob locations and decoder (for a streamed provider); null for an HF folder.
  std::shared_ptr<const PackedModel> packed() const { return packed_; }
  // The GGUF file the model was loaded from (model/gguf_config.h); null for a folder.
  std::shared_ptr<const GgufFile> gguf() const { return gguf_; }
  ExpertProvider& experts() { return *experts_; }
  void set_expert_provider(std::unique_ptr<ExpertProvider> p) { experts_ = std::move(p); }
  void set_route_observer(RouteObserver* o) {
    observer_ = o;
    if (device_) device_->set_route_observer(o);
  }
  // Replaces the router's choices with the source's (a measuring tool that changes logits); null: the router's own.
  // (The device forward, when set, gets the same source and asks it the same way.)
  void set_route_source(RouteSource* s) {
    route_source_ = s;
    if (device_) device_->set_route_source(s);
  }
  // Sees the input of every matrix product of the forward (imatrix); null: none. Never changes a logit.
  void set_activation_observer(ActivationObserver* o) { activation_observer_ = o; }
  // Next-layer prefetch on the CPU (--prefetch-width; CudaForwardOptions::prefetch_width is the device's): before
  // each MoE layer's mixer, the layer's FFN norm and router on the residual entering it (or the route source's
  // predictions) name `width` experts a row, handed to the provider's prefetch_guess so their reads run while the
  // mixer computes. 0: off. Never changes a logit. An Error when `width` exceeds the experts of a layer.
  void set_prefetch_width(int width);
  // Weights as loaded (views into the mapped files) and the RoPE table, for a device forward to copy.
  const ModelWeights& weights() const { return w_; }
  const ops::Rope& rope() const { return rope_; }
  void set_device_forward(std::unique_ptr<DeviceForward> f) {
    device_ = std::move(f);
    if (device_) device_->set_route_source(route_source_);
    if (device_) device_->set_route_observer(observer_);
  }
  DeviceForward* device_forward() const { return device_.get(); }

  // Hands every MoE layer's routed sum to `s` (expert parallelism); null: computed here. The router, the shared
  // expert and everything else stay here.
  void set_routed_sum(RoutedSum* s) { routed_sum_ = s; }

  // The routed experts of `layer` on pairs: out[j] (H floats) = expert pair_expert[j] applied to row pair_row[j] of
  // xn (biases and activation included, not weighted). What moe computes for its M * K pairs, and an
  // expert-parallel rank for the pairs sent to it: each output's bits depend on its row and expert alone.
  void expert_outputs(int layer, std::span<const int64_t> pair_row, std::span<const int> pair_expert, const float* xn,
                      float* out);

  // Runs the rows (several sequences may share a batch; rows of one sequence come in position order). Writes the
  // logits of the rows with want_logits, in row order, into `logits` ([wanted x V]).
  void forward(std::span<const BatchRow> rows, float* logits);

  // Stored bytes of one routed expert (gate + up + down), 0 without experts.
  int64_t expert_bytes() const { return expert_bytes_; }
  // Parameter counts and bytes per decoded token at the stored codecs.
  struct Sizes {
    int64_t total_params = 0;
    int64_t active_params = 0;    // per token: attention, norms, routers, top-k experts, head, one embedding row
    int64_t expert_params = 0;    // all routed experts
    int64_t bytes_per_token = 0;  // bytes of weights one decoded token reads
  };
  Sizes sizes() const;

 private:
  void attention(int layer, std::span<const BatchRow> rows, const float* xn, float* out);
  void mla_attention(int layer, std::span<const BatchRow> rows, const float* xn, float* out);  // model/mla.cpp
  void moe(int layer, int64_t m, const float* xn, float* out);
  void add_shared_expert(int layer, int64_t m, const float* xn, float* out);  // out += the shared expert, if any
  void route(int layer, int64_t m, const float* xn, int* chosen, float* weight);
  void guess_experts(int layer, int64_t m, const float* x);  // set_prefetch_width's guess for `layer`
  void dense_mlp(int layer, int64_t m, const float* xn, float* out);
  // A Gated DeltaNet layer (model/linear_attention.cpp): each row's sequence's conv and recurrent state advance.
  void gated_delta_net(int layer, std::span<const BatchRow> rows, const float* xn, float* out);

  std::string dir_;
  ModelConfig config_;
  const Family* family_ = nullptr;
  std::unique_ptr<Checkpoint> checkpoint_;
  std::shared_ptr<const PackedModel> packed_;
  std::shared_ptr<const GgufFile> gguf_;
  ModelWeights w_;
  std::unique_ptr<ExpertProvider> experts_;
  ops::Rope rope_;
  RouteObserver* observer_ = nullptr;
  RouteSource* route_source_ = nullptr;
  RoutedSum* routed_sum_ = nullptr;
  ActivationObserver* activation_observer_ = nullptr;
  int prefetch_width_ = 0;
  // After the weights, so destroyed before them: it copied from them.
  std::unique_ptr<DeviceForward> device_;
  int64_t expert_bytes_ = 0;     // stored bytes of one routed expert (gate + up + down)
  int64_t norm_elem_bytes_ = 2;  // stored bytes of one norm weight
  // Expert parts a checkpoint stores in a layout the kernels cannot read as they are (stacked and transposed or
  // interleaved), rearranged once at load (model/expert_parts.h).
  std::vector<std::vector<uint8_t>> rearranged_;
};

// out[i] = sum over s in 0..K of weight[i * K + s] * outputs[p * H], p = pair_index[i * K + s] (i * K + s when
// pair_index is null), summed in slot order from 0: the MoE block's combine, one order for every row whatever the
// batch or where its experts ran. weight (M, K); out (M, H).
void combine_expert_outputs(int64_t M, int K, int64_t H, const float* weight, const float* outputs,
                            const int64_t* pair_index, float* out);

// The JSON of a file; an Error naming it when it cannot be read or is not JSON.
nlohmann::json read_json_file(const std::filesystem::path& path);

// What a sequence keeps per layer between forwards, as each layer's mixer needs it (kv/kv_cache.h).
std::vector<KvLayerShape> cache_shapes(const ModelConfig& c);

// Reads and validates config.json of a folder: family, typed config, and generation_config.json's eos ids; or the
// metadata of a GGUF file, mapped onto its family (model/gguf_config.h).
ModelConfig read_model_config(const std::string& dir, const Family** family = nullptr);

}  // namespace seedling
