// model/glm4_moe.cpp - GLM-4.5 / GLM-4.6 MoE (zai-org/GLM-4.5, GLM-4.5-Air, GLM-4.6).
//
// Plan: GQA attention with partial rotary (partial_rotary_factor of head_dim), q/k/v biases when attention_bias,
// optional per-head q/k norm (use_qk_norm); the first first_k_dense_replace layers a dense MLP, the others routed
// experts chosen by sigmoid scores plus e_score_correction_bias within the topk_group best of n_group groups, the
// weights renormalised (norm_topk_prob) and scaled by routed_scaling_factor, beside n_shared_experts always-on
// experts as one shared MLP of n_shared_experts * moe_intermediate_size. The MTP layers past num_hidden_layers
// (num_nextn_predict_layers) are not loaded.
#include <string>

#include "model/family.h"

namespace seedling {

namespace {

void read_config(const ConfigReader& r, ModelConfig* c) {
  read_common_config(r, c);
  std::vector<uint8_t> moe;
  const FfnPlan ffn = read_group_moe(r, c, GroupMoeDefaults{}, &moe);
  AttentionPlan attn;
  attn.qkv_bias = r.get_bool_or("attention_bias", false);
  if (r.get_bool_or("use_qk_norm", false)) attn.qk_norm = QkNorm::PerHead;
  uniform_layer_plan(c, moe, attn, ffn);
}

LayerNames layer_names(const ModelConfig&, int layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  LayerNames n = llama_attention_names(p);
  group_moe_names(p, &n);
  return n;
}

}  // namespace

extern const Family kGlm4MoeFamily;
const Family kGlm4MoeFamily = {"glm4_moe",          read_config,      "model.embed_tokens.weight",
                               "model.norm.weight", "lm_head.weight", layer_names,
                               mlp_expert_parts};

}  // namespace seedling
