// model/qwen2_moe.cpp - Qwen2-MoE and Qwen1.5-MoE (Qwen2-57B-A14B, Qwen1.5-MoE-A2.7B).
//
// Plan: GQA attention with q/k/v biases (qkv_bias) and no o bias; a softmax router over num_experts SwiGLU experts
// (renormalised when norm_topk_prob) beside an always-on shared expert of shared_expert_intermediate_size, whose
// output is scaled by sigmoid(shared_expert_gate . x); mlp_only_layers and decoder_sparse_step as qwen3_moe.
#include <string>

#include "model/family.h"

namespace seedling {

namespace {

void read_config(const ConfigReader& r, ModelConfig* c) {
  read_qwen_moe_config(r, c);
  AttentionPlan attn;
  attn.qkv_bias = r.get_bool_or("qkv_bias", true);
  FfnPlan ffn;
  ffn.router.renormalize = r.get_bool_or("norm_topk_prob", false);
  ffn.shared_width = r.get_int("shared_expert_intermediate_size");
  ffn.shared_gate = ffn.shared_width > 0;
  uniform_layer_plan(c, read_sparse_layers(r, *c), attn, ffn);
}

LayerNames layer_names(const ModelConfig&, int layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  return qwen_shared_expert_names(p);
}

}  // namespace

extern const Family kQwen2MoeFamily;
const Family kQwen2MoeFamily = {"qwen2_moe",         read_config,      "model.embed_tokens.weight",
                                "model.norm.weight", "lm_head.weight", layer_names,
                                mlp_expert_parts};

}  // namespace seedling
