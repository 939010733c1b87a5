// model/mixtral.cpp - Mixtral (Mixtral-8x7B, 8x22B).
//
// Plan: every layer routes top-k of num_local_experts SwiGLU experts (w1 gate, w3 up, w2 down) with the top-k
// softmax weights renormalised; GQA or MQA attention without q/k norm; an optional sliding window.
#include <string>

#include "model/family.h"

namespace seedling {

namespace {

void read_config(const ConfigReader& r, ModelConfig* c) {
  read_common_config(r, c);
  c->num_experts = r.get_int_any({"num_local_experts", "num_experts"});
  c->experts_per_token = r.get_int("num_experts_per_tok");
  c->moe_intermediate_size = r.get_int("intermediate_size");
  AttentionPlan attn;
  attn.qkv_bias = attn.o_bias = r.get_bool_or("attention_bias", false);
  attn.window = r.get_int_or("sliding_window", 0);
  uniform_layer_plan(c, std::vector<uint8_t>(size_t(c->num_layers), 1), attn, FfnPlan{});
}

LayerNames layer_names(const ModelConfig&, int layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  LayerNames n = llama_attention_names(p);
  n.router = p + "block_sparse_moe.gate.weight";
  return n;
}

ExpertParts expert_parts(const ModelConfig&, int layer, int expert) {
  return per_expert_parts(
      "model.layers." + std::to_string(layer) + ".block_sparse_moe.experts." + std::to_string(expert) + ".", "w1", "w3",
      "w2");
}

}  // namespace

extern const Family kMixtralFamily;
const Family kMixtralFamily = {"mixtral",           read_config,      "model.embed_tokens.weight",
                               "model.norm.weight", "lm_head.weight", layer_names,
                               expert_parts};

}  // namespace seedling
