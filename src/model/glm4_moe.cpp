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
  c->num_experts = r.get_int_any({"n_routed_experts", "num_local_experts"});
  c->experts_per_token = r.get_int("num_experts_per_tok");
  c->moe_intermediate_size = r.get_int("moe_intermediate_size");
  c->stored_extra_layers = r.get_int_or("num_nextn_predict_layers", 0);
  if (c->stored_extra_layers < 0) r.bad("num_nextn_predict_layers", "must not be negative");
  const int first_dense = r.get_int_or("first_k_dense_replace", 0);
  if (first_dense < 0 || first_dense > c->num_layers) {
    r.bad("first_k_dense_replace", std::to_string(first_dense) + " must be between 0 and num_hidden_layers");
  }
  AttentionPlan attn;
  attn.qkv_bias = r.get_bool_or("attention_bias", false);
  if (r.get_bool_or("use_qk_norm", false)) attn.qk_norm = QkNorm::PerHead;
  FfnPlan ffn;
  ffn.router.gating = Gating::SigmoidGroupTopK;
  ffn.router.correction_bias = true;
  ffn.router.renormalize = r.get_bool_or("norm_topk_prob", true);
  ffn.router.n_group = r.get_int_or("n_group", 1);
  ffn.router.topk_group = r.get_int_or("topk_group", 1);
  ffn.router.scale = float(r.get_double_or("routed_scaling_factor", 1.0));
  const int shared = r.get_int_or("n_shared_experts", 0);
  if (shared < 0) r.bad("n_shared_experts", "must not be negative");
  ffn.shared_width = shared * c->moe_intermediate_size;
  std::vector<uint8_t> moe(size_t(c->num_layers), 1);
  for (int l = 0; l < first_dense; ++l) moe[size_t(l)] = 0;
  uniform_layer_plan(c, moe, attn, ffn);
}

LayerNames layer_names(const ModelConfig&, int layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  LayerNames n = llama_attention_names(p);
  n.router = p + "mlp.gate.weight";
  n.router_correction = p + "mlp.gate.e_score_correction_bias";
  swiglu_names(p + "mlp.", &n.mlp_gate, &n.mlp_up, &n.mlp_down);
  swiglu_names(p + "mlp.shared_experts.", &n.shared_gate, &n.shared_up, &n.shared_down);
  return n;
}

}  // namespace

extern const Family kGlm4MoeFamily;
const Family kGlm4MoeFamily = {"glm4_moe",          read_config,      "model.embed_tokens.weight",
                               "model.norm.weight", "lm_head.weight", layer_names,
                               mlp_expert_parts};

}  // namespace seedling
