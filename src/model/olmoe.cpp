// model/olmoe.cpp - OLMoE (allenai/OLMoE-1B-7B).
//
// Plan: attention with RMSNorm over the whole q and k projections (before the heads split), optional clip_qkv,
// q/k/v/o biases when attention_bias; every layer a softmax router over num_experts SwiGLU experts of
// intermediate_size, renormalised only when norm_topk_prob.
#include <string>

#include "model/family.h"

namespace seedling {

namespace {

void read_config(const ConfigReader& r, ModelConfig* c) {
  read_common_config(r, c);
  c->num_experts = r.get_int("num_experts");
  c->experts_per_token = r.get_int("num_experts_per_tok");
  c->moe_intermediate_size = r.get_int("intermediate_size");
  AttentionPlan attn;
  attn.qk_norm = QkNorm::Whole;
  attn.qkv_bias = attn.o_bias = r.get_bool_or("attention_bias", false);
  attn.clip_qkv = float(r.get_double_or("clip_qkv", 0.0));
  if (r.has("clip_qkv") && !(attn.clip_qkv > 0)) r.bad("clip_qkv", "must be positive or null");
  FfnPlan ffn;
  ffn.router.renormalize = r.get_bool_or("norm_topk_prob", false);
  uniform_layer_plan(c, std::vector<uint8_t>(size_t(c->num_layers), 1), attn, ffn);
}

LayerNames layer_names(const ModelConfig&, int layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  LayerNames n = llama_attention_names(p);
  n.router = p + "mlp.gate.weight";
  return n;
}

}  // namespace

extern const Family kOlmoeFamily;
const Family kOlmoeFamily = {
    "olmoe",     read_config,     "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
    layer_names, mlp_expert_parts};

}  // namespace seedling
