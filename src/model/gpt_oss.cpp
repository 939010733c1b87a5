// model/gpt_oss.cpp - gpt-oss (openai/gpt-oss-20b, gpt-oss-120b).
//
// Plan: GQA attention with q/k/v/o biases and one learned sink logit per head, full and sliding-window layers as
// layer_types alternate them, YaRN RoPE; every layer routes top-k of num_local_experts, the softmax taken over the
// k largest logits of a biased router; experts with biases and the clamped SwiGLU
// ((clamp(up, -limit, limit) + 1) * g * sigmoid(alpha g), g = min(gate, limit)), stored stacked: gate_up_proj
// (experts, hidden, 2 x width) with gate and up interleaved along its last axis, down_proj (experts, width, hidden).
#include <string>

#include "model/family.h"

namespace seedling {

namespace {

void read_config(const ConfigReader& r, ModelConfig* c) {
  read_common_config(r, c);
  c->num_experts = r.get_int_any({"num_local_experts", "num_experts"});
  c->experts_per_token = r.get_int_any({"num_experts_per_tok", "experts_per_token"});
  c->moe_intermediate_size = r.get_int("intermediate_size");
  AttentionPlan attn;
  attn.qkv_bias = attn.o_bias = r.get_bool_or("attention_bias", true);
  attn.sinks = true;
  FfnPlan ffn;
  ffn.router.gating = Gating::TopKSoftmax;
  ffn.router.bias = true;
  ffn.act = Activation::ClampedSwiGLU;
  ffn.swiglu_limit = float(r.get_double_or("swiglu_limit", 7.0));
  ffn.expert_bias = true;
  uniform_layer_plan(c, std::vector<uint8_t>(size_t(c->num_layers), 1), attn, ffn);
  const int window = r.get_int_or("sliding_window", 0);
  if (window < 0) r.bad("sliding_window", "must not be negative");
  read_layer_types(r, c, window);
}

LayerNames layer_names(const ModelConfig&, int layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  LayerNames n = llama_attention_names(p);
  n.sinks = p + "self_attn.sinks";
  n.router = p + "mlp.router.weight";
  n.router_bias = p + "mlp.router.bias";
  n.expert_gate_up_bias = p + "mlp.experts.gate_up_proj_bias";
  n.expert_down_bias = p + "mlp.experts.down_proj_bias";
  return n;
}

ExpertParts expert_parts(const ModelConfig&, int layer, int expert) {
  const std::string p = "model.layers." + std::to_string(layer) + ".mlp.experts.";
  ExpertParts parts;
  parts[0] = {p + "gate_up_proj", expert, true, 2, 0};
  parts[1] = {p + "gate_up_proj", expert, true, 2, 1};
  parts[2] = {p + "down_proj", expert, true, 1, 0};
  return parts;
}

}  // namespace

extern const Family kGptOssFamily;
const Family kGptOssFamily = {"gpt_oss",           read_config,      "model.embed_tokens.weight",
                              "model.norm.weight", "lm_head.weight", layer_names,
                              expert_parts};

}  // namespace seedling
