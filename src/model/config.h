// model/config.h - the typed configuration of a decoder-only MoE model, read from a checkpoint's config.json.
//
// Each family file (qwen3_moe.cpp, mixtral.cpp, ...) fills this from its own keys; everything downstream reads
// only this struct. Both config dialects on the Hub are accepted: transformers 4.x (`rope_theta`, `rope_scaling`,
// `num_experts`, `torch_dtype`) and 5.x (`rope_parameters`, `num_local_experts`, `dtype`). A value we cannot run
// is an Error naming the key and the value, never a silent default.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace seedling {

struct RopeConfig {
  std::string type = "default";  // default | linear | yarn
  double theta = 10000.0;
  double factor = 1.0;                 // linear: positions divided by factor; yarn: the context extension
  double partial_rotary_factor = 1.0;  // rotary dimensions = head_dim * this (the rest pass unrotated)
  // yarn only (transformers' _compute_yarn_parameters): the ramp between beta_fast and beta_slow rotations over
  // original_max_position_embeddings; attention_factor scales cos and sin (0: 0.1 ln(factor) + 1, or mscale's).
  double beta_fast = 32.0, beta_slow = 1.0;
  int original_max_position_embeddings = 0;
  double attention_factor = 0.0;
  double mscale = 0.0, mscale_all_dim = 0.0;
  bool truncate = true;
};

// The layer plan (model/decoder.cpp runs it): what each layer's mixer, FFN and router are. Each
// family's read_config fills one LayerPlan per layer from its own keys; every block reads only these.
enum class QkNorm : uint8_t {
  None,
  PerHead,  // RMSNorm over each head of q and k, weights (head_dim) (qwen3_moe)
  Whole,    // RMSNorm over the whole q (q_dim) and k (kv_dim) projections before the heads split (olmoe)
};
struct AttentionPlan {
  QkNorm qk_norm = QkNorm::None;
  bool qkv_bias = false;  // biases on q, k and v
  bool o_bias = false;
  bool sinks = false;     // one learned logit per head in the softmax's denominator (gpt_oss)
  float clip_qkv = 0.0f;  // > 0: q, k and v clamped to [-clip_qkv, clip_qkv] after their norms (olmoe)
  int window = 0;         // 0: full causal attention; else each query sees the last `window` positions
  // q_proj twice as wide: per head its query then as many output-gate logits; the attention output times
  // sigmoid(gate) before o (qwen3_next, qwen3_5_moe)
  bool output_gate = false;
};
enum class Gating : uint8_t {
  SoftmaxTopK,       // softmax over all experts, then the top k (qwen3_moe, mixtral, olmoe, qwen2_moe)
  TopKSoftmax,       // the top k of the logits, then a softmax over those k (gpt_oss)
  SigmoidGroupTopK,  // sigmoid scores; selection over score + correction bias within the best groups (glm4_moe)
};
struct RouterPlan {
  Gating gating = Gating::SoftmaxTopK;
  bool renormalize = true;       // the k weights divided by their sum
  bool bias = false;             // a bias on the router's logits (gpt_oss)
  bool correction_bias = false;  // e_score_correction_bias, added for the selection only
  int n_group = 1, topk_group = 1;
  float scale = 1.0f;  // routed_scaling_factor, times the final weights
  // SigmoidGroupTopK: the choices of the groups not kept become -inf (DeepSeek-V3 in transformers), not 0 (glm4_moe);
  // they differ where a kept expert's score + correction bias is negative.
  bool masked_neg_inf = false;
};
enum class FfnKind : uint8_t { Dense, Moe };
enum class Activation : uint8_t {
  SwiGLU,         // silu(gate) * up
  ClampedSwiGLU,  // (clamp(up, -limit, limit) + 1) * g * sigmoid(alpha g), g = min(gate, limit) (gpt_oss)
};
struct FfnPlan {
  FfnKind kind = FfnKind::Moe;
  int width = 0;  // the dense MLP's width (Dense) or one routed expert's (Moe)
  Activation act = Activation::SwiGLU;
  float swiglu_alpha = 1.702f, swiglu_limit = 7.0f;  // ClampedSwiGLU
  bool expert_bias = false;                          // biases on the routed experts' projections (gpt_oss)
  int shared_width = 0;      // > 0: an always-on shared expert of this width beside the routed ones
  bool shared_gate = false;  // the shared expert's output times sigmoid(shared_expert_gate . x) (qwen2_moe)
  RouterPlan router;
};
// A layer's token mixer: what it keeps per sequence is cache_shapes' (model.h) to say.
enum class Mixer : uint8_t {
  Attention,
  GatedDeltaNet,  // linear attention: conv1d + the gated delta rule over a per-sequence state (LinearAttentionPlan)
  Mla,            // multi-head latent attention (DeepSeek-V2/V3): a latent KV cache, MlaPlan
};
// Multi-head latent attention (transformers' DeepseekV3Attention): q from q_proj, or q_a_proj -> q_a_layernorm ->
// q_b_proj when q_lora_rank > 0; kv_a_proj_with_mqa gives the latent (kv_lora_rank, then kv_a_layernorm) and one
// rope key shared by every head (qk_rope_head_dim); kv_b_proj expands the latent into each head's nope key
// (qk_nope_head_dim) and value (v_head_dim). RoPE on the rope parts only (rope_interleave: pairs (2i, 2i+1)).
struct MlaPlan {
  int q_lora_rank = 0;  // 0: q_proj
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  bool rope_interleave = true;
  float softmax_scale = 0.0f;  // (nope + rope)^-0.5, times mscale(factor, mscale_all_dim)^2 under YaRN
  int q_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int cache_width() const { return kv_lora_rank + qk_rope_head_dim; }  // floats per position: latent, rope key
};
// A Gated DeltaNet layer (model/linear_attention.cpp): q, k, v from one projection through a causal depthwise
// conv1d + SiLU, z (the output gate), b (beta) and a (the decay); key heads repeated to the value heads.
struct LinearAttentionPlan {
  int key_heads = 0, value_heads = 0;        // linear_num_key_heads, linear_num_value_heads
  int key_head_dim = 0, value_head_dim = 0;  // linear_key_head_dim, linear_value_head_dim
  int conv_kernel = 0;                       // linear_conv_kernel_dim
  // qwen3_next: in_proj_qkvz and in_proj_ba, rows grouped per key head ([q k v z] and [b a] of each group); else
  // (qwen3_5_moe) in_proj_qkv ([q k v]), in_proj_z, in_proj_b, in_proj_a.
  bool grouped = false;
  int key_width() const { return key_heads * key_head_dim; }
  int value_width() const { return value_heads * value_head_dim; }
  int conv_channels() const { return 2 * key_width() + value_width(); }  // q, k, v through the conv
  // What a sequence keeps: the last conv_kernel - 1 conv inputs of every channel, then each value head's state.
  size_t conv_state_floats() const { return size_t(conv_kernel - 1) * size_t(conv_channels()); }
  size_t state_floats() const {
    return conv_state_floats() + size_t(value_heads) * size_t(key_head_dim) * size_t(value_head_dim);
  }
};
struct LayerPlan {
  Mixer mixer = Mixer::Attention;
  AttentionPlan attn;
  FfnPlan ffn;
  LinearAttentionPlan linear;  // Mixer::GatedDeltaNet only
  MlaPlan mla;                 // Mixer::Mla only
};

struct ModelConfig {
  std::string model_type;
  int vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int intermediate_size = 0;  // width of the dense MLP of layers without experts
  int num_experts = 0;
  int experts_per_token = 0;
  int moe_intermediate_size = 0;  // width of one routed expert
  std::vector<LayerPlan> layers;  // [num_layers]: the plan every block follows
  // Layers a checkpoint stores past num_layers that the forward does not run (multi-token-prediction layers:
  // num_nextn_predict_layers); more stored layers than num_layers + this is an Error, never a layer dropped.
  int stored_extra_layers = 0;
  // Derived from `layers` by finish_layer_plan, for the parts that predate the plan (the CUDA forward, the packed
  // manifest): whether each layer routes experts, and the one router/attention setting every layer shares.
  std::vector<uint8_t> layer_has_experts;  // [num_layers]
  bool norm_topk_prob = true;
  bool qk_norm = false;  // every layer PerHead
  int sliding_window = 0;
  bool tie_word_embeddings = false;
  float rms_norm_eps = 1e-6f;
  RopeConfig rope;
  int max_position_embeddings = 0;
  std::string dtype;  // as stated by config.json (informational)
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;
  // Zero-centred RMSNorms (qwen3_next, qwen3_5_moe): every layer norm, q/k norm and the final norm scale by
  // (1 + weight); Model::load adds this offset to those weights, so the blocks multiply by the loaded weight as ever.
  float norm_weight_offset = 0.0f;
  // The checkpoint stores the routed experts fused (qwen3_5_moe: experts.gate_up_proj and experts.down_proj) rather
  // than one tensor per expert; read_config decides from the folder's tensor names (folder_stores_tensor).
  bool fused_experts = false;

  // quantization_config fp8 (DeepSeek-V3, Qwen3-FP8 releases): F8_E4M3 weights with one F32 weight_scale_inv per
  // block of weight_block_size (rows, cols); 0: none (model/fp8_weights.h).
  int fp8_block_rows = 0, fp8_block_cols = 0;

  int q_dim() const { return num_heads * head_dim; }
  int kv_dim() const { return num_kv_heads * head_dim; }
  int rotary_dim() const { return int(double(head_dim) * rope.partial_rotary_factor); }
  const LayerPlan& plan(int layer) const { return layers[size_t(layer)]; }
  bool has_experts(int layer) const { return layers[size_t(layer)].ffn.kind == FfnKind::Moe; }
};

// Reads typed values from a config.json object; every failure names the file and the key.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {}

  const nlohmann::json& root() const { return j_; }
  const std::string& path() const { return path_; }
  bool has(const std::string& key) const;  // present and not null

  int get_int(const std::string& key) const;
  int get_int_or(const std::string& key, int fallback) const;
  double get_double(const std::string& key) const;
  double get_double_or(const std::string& key, double fallback) const;
  bool get_bool_or(const std::string& key, bool fallback) const;
  std::string get_string_or(const std::string& key, const std::string& fallback) const;
  std::vector<int> get_int_list_or(const std::string& key, const std::vector<int>& fallback) const;
  // The first key of `keys` that is present (for renamed keys such as num_experts / num_local_experts).
  int get_int_any(std::initializer_list<const char*> keys) const;

  [[noreturn]] void bad(const std::string& key, const std::string& what) const;

 private:
  const nlohmann::json& j_;
  std::string path_;
};

// Fields every llama-style family shares: sizes, heads, norms, rope (both dialects), activation, dtype, ids.
void read_common_config(const ConfigReader& r, ModelConfig* c);
// One plan per layer from what a family read: `moe[l]` says whether layer l routes experts (of
// moe_intermediate_size, else a dense MLP of intermediate_size); every layer gets `attn` and the MoE layers `ffn`
// (its kind and width are set here). Families adjust single layers afterwards (windows, dense layers).
void uniform_layer_plan(ModelConfig* c, const std::vector<uint8_t>& moe, const AttentionPlan& attn, const FfnPlan& ffn);
// The Qwen MoE dialect (qwen2_moe, qwen3_moe): the common fields, num_experts (or num_local_experts),
// num_experts_per_tok, moe_intermediate_size, and use_sliding_window refused when true (published checkpoints set
// false).
void read_qwen_moe_config(const ConfigReader& r, ModelConfig* c);
// The layers with routed experts in the Qwen dialect: not in mlp_only_layers and on the decoder_sparse_step grid.
std::vector<uint8_t> read_sparse_layers(const ConfigReader& r, const ModelConfig& c);
// The layer_types list (transformers 5.x: "full_attention" | "sliding_attention" per layer): sets each layer's
// window to `window` or 0; an unknown entry or a wrong length is an Error naming the key.
void read_layer_types(const ConfigReader& r, ModelConfig* c, int window);
// Whether the safetensors of the folder holding `config_path` name `tensor` (read from the index or the file
// headers only); false where there are none (a packed folder, a config without weights).
bool folder_stores_tensor(const std::string& config_path, const std::string& tensor);
// The DeepSeek-V3 MoE dialect (deepseek_v3, kimi_k2, glm4_moe): n_routed_experts, num_experts_per_tok,
// moe_intermediate_size, num_nextn_predict_layers (stored unrun), the first first_k_dense_replace layers dense (into
// `moe`), and the sigmoid group router (norm_topk_prob, n_group, topk_group, routed_scaling_factor, the correction
// bias) beside n_shared_experts as one shared MLP. `defaults` stand where a key is absent (the families differ).
struct GroupMoeDefaults {
  int first_k_dense_replace = 0, n_group = 1, topk_group = 1, n_shared_experts = 0;
  double routed_scaling_factor = 1.0;
};
FfnPlan read_group_moe(const ConfigReader& r, ModelConfig* c, const GroupMoeDefaults& defaults,
                       std::vector<uint8_t>* moe);
// Fills the derived fields (layer_has_experts, ...) from `layers`; validate_config calls it.
void finish_layer_plan(ModelConfig* c);
// Checks sizes are positive and consistent (heads divide, top-k <= experts, groups divide experts, ...) and fills
// the plan's derived fields.
void validate_config(ModelConfig& c, const std::string& path);

}  // namespace seedling
