// model/family.h - what a model family declares: how it reads config.json into a layer plan, and what its tensors
// are called.
//
// One file per family (qwen3_moe.cpp, mixtral.cpp, olmoe.cpp, ...) defines a Family and one line in family.cpp
// registers it. The family's read_config fills ModelConfig, one LayerPlan per layer (config.h: the mixer with its
// attention options, the FFN: dense, routed experts, routed + shared, and the router policy); its names() gives the
// tensor name of each role the plan uses. The schema (layer_tensors, below) turns plan + names into the list of
// tensors with their shapes, which loading, sizes(), pack, synth, info and the device upload all iterate: a tensor
// list is written once, here, for every family. The blocks that compute on them are shared (model/decoder.cpp).
#pragma once

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "model/config.h"

namespace seedling {

// What a tensor is to the forward. Layer roles first; the model's own (embedding, final norm, head) last.
enum class Role : uint8_t {
  AttnNorm,
  FfnNorm,
  Q,
  K,
  V,
  O,
  QBias,
  KBias,
  VBias,
  OBias,
  QNorm,
  KNorm,
  Sinks,
  Router,
  RouterBias,
  RouterCorrection,  // e_score_correction_bias: added to the scores for the selection only
  MlpGate,
  MlpUp,
  MlpDown,
  SharedGate,
  SharedUp,
  SharedDown,
  SharedExpertGate,  // (1, hidden): the shared expert's output times sigmoid(this . x)
  ExpertGateUpBias,  // (experts, 2 x width), gate and up as the family's expert_parts lay out their rows
  ExpertDownBias,    // (experts, hidden)
  // Gated DeltaNet (LinearAttentionPlan): grouped projections (qwen3_next) or split ones (qwen3_5_moe)
  LinearQkvz,    // (2 key_width + 2 value_width, hidden), [q k v z] per key head group
  LinearBa,      // (2 value_heads, hidden), [b a] per key head group
  LinearQkv,     // (2 key_width + value_width, hidden): q, k, v
  LinearZ,       // (value_width, hidden)
  LinearB,       // (value_heads, hidden)
  LinearA,       // (value_heads, hidden)
  LinearConv,    // (conv channels, 1, conv_kernel): the depthwise causal conv1d
  LinearDtBias,  // (value_heads)
  LinearALog,    // (value_heads): the decay rate is -exp(A_log)
  LinearNorm,    // (value_head_dim): the gated RMSNorm's weight
  LinearOut,     // (hidden, value_width)
  MlaQA,         // q_a_proj (q_lora_rank, hidden)
  MlaQANorm,     // q_a_layernorm (q_lora_rank)
  MlaQB,         // q_b_proj (heads * (nope + rope), q_lora_rank)
  MlaKvA,        // kv_a_proj_with_mqa (kv_lora_rank + rope, hidden)
  MlaKvANorm,    // kv_a_layernorm (kv_lora_rank)
  MlaKvB,        // kv_b_proj (heads * (nope + v), kv_lora_rank)
  Embed,
  FinalNorm,
  Head,
};
inline constexpr size_t kRoleCount = size_t(Role::Head) + 1;
const char* role_name(Role r);

// One stored tensor the plan needs: its role, name, shape as the forward uses it, and whether it is a dense
// matrix that `pack --dense CODEC` may re-encode (attention projections, dense and shared MLPs, embedding, head) or
// kept exactly as stored (norms, biases, sinks, routers: a router's top-k is a discrete choice a small error flips).
struct TensorSpec {
  Role role;
  std::string name;
  std::vector<int64_t> shape;
  bool dense = false;
  int layer = -1;  // -1: the model's own (embedding, final norm, head)
};

// Where one part (gate, up or down, as (out_features, in_features)) of a routed expert is stored in a checkpoint.
struct ExpertPart {
  std::string name;
  int stacked = -1;         // -1: a tensor of its own; else the expert's index in a tensor of all experts
  bool transposed = false;  // the stacked tensor is (experts, in, out) rather than (experts, out, in)
  int row_step = 1;         // rows of out taken: row_offset, row_offset + row_step, ... (interleaved gate_up: 2)
  int row_offset = 0;
  // The stacked tensor's out dimension holds this many parts' rows (rows x row_step x row_blocks): 2 where gate and
  // up are stacked one block after the other (fused_expert_parts: up's row_offset is the width).
  int row_blocks = 1;
};
using ExpertParts = std::array<ExpertPart, 3>;  // gate, up, down

// The tensor name of each role, as a family spells it; empty where the family has none. Which roles a layer needs
// comes from its plan; a role the plan needs but the family does not name is a bug caught by layer_tensors.
struct LayerNames {
  std::string attn_norm, ffn_norm;
  std::string q, k, v, o, q_bias, k_bias, v_bias, o_bias, q_norm, k_norm, sinks;
  std::string router, router_bias, router_correction;
  std::string mlp_gate, mlp_up, mlp_down;  // dense layers
  std::string shared_gate, shared_up, shared_down, shared_expert_gate;
  std::string expert_gate_up_bias, expert_down_bias;
  std::string linear_qkvz, linear_ba, linear_qkv, linear_z, linear_b, linear_a;  // Gated DeltaNet
  std::string linear_conv, linear_dt_bias, linear_a_log, linear_norm, linear_out;
  std::string mla_q_a, mla_q_a_norm, mla_q_b, mla_kv_a, mla_kv_a_norm, mla_kv_b;  // Mixer::Mla (q: q_proj)
};

struct Family {
  const char* model_type;
  void (*read_config)(const ConfigReader& r, ModelConfig* c);
  const char* embed;
  const char* final_norm;
  const char* lm_head;
  LayerNames (*layer_names)(const ModelConfig& c, int layer);
  ExpertParts (*expert_parts)(const ModelConfig& c, int layer, int expert);
};

// Names of the Llama-style attention block under `prefix` ("model.layers.N."): input/post-attention norms, the
// q/k/v/o projections with their biases and self_attn.q_norm/k_norm. Families fill in the rest.
LayerNames llama_attention_names(const std::string& prefix);
// The Qwen MoE block's names under `prefix` (qwen2_moe, qwen3_next, qwen3_5_moe): llama_attention_names, the router
// mlp.gate, the dense mlp.{gate,up,down}_proj, mlp.shared_expert.* and mlp.shared_expert_gate.
LayerNames qwen_shared_expert_names(const std::string& prefix);
// The DeepSeek MoE block's FFN names under `prefix` (glm4_moe, deepseek_v3, kimi_k2): the router mlp.gate with its
// e_score_correction_bias, the dense mlp.{gate,up,down}_proj and mlp.shared_experts.*, into `n`.
void group_moe_names(const std::string& prefix, LayerNames* n);
// A SwiGLU MLP's three projections `prefix`{gate,up,down}_proj.weight into the given names.
void swiglu_names(const std::string& prefix, std::string* gate, std::string* up, std::string* down);
// Routed expert parts stored one tensor each: `prefix`{gate}.weight, {up}.weight, {down}.weight.
ExpertParts per_expert_parts(const std::string& prefix, const char* gate, const char* up, const char* down);
// The Hub layout most families share: model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight.
ExpertParts mlp_expert_parts(const ModelConfig& c, int layer, int expert);

// Names of a Gated DeltaNet block under `prefix` ("model.layers.N."): linear_attn.{in_proj_qkvz, in_proj_ba,
// in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, conv1d, dt_bias, A_log, norm, out_proj}; the plan picks which.
void linear_attention_names(const std::string& prefix, LayerNames* n);
// Routed experts fused as transformers holds them: `prefix`gate_up_proj (experts, 2 x width, hidden), gate rows then
// up rows, and `prefix`down_proj (experts, hidden, width).
ExpertParts fused_expert_parts(const std::string& prefix, int expert, int width);

// The resident tensors of layer `layer` that its plan uses, in one fixed order (the order pack writes them).
std::vector<TensorSpec> layer_tensors(const ModelConfig& c, const Family& f, int layer);
// Every resident tensor of the model: embedding, final norm, head (when `with_head`), then each layer's; `experts`
// is called after the resident tensors of each layer with routed experts, where pack and synth write them.
void for_each_tensor(const ModelConfig& c, const Family& f, bool with_head,
                     const std::function<void(const TensorSpec&)>& tensor,
                     const std::function<void(int layer)>& experts);

// The family of `model_type`; an Error naming the config file and the value when there is none.
const Family& family_for(const std::string& model_type, const std::string& config_path);

}  // namespace seedling
