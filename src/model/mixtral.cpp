// model/mixtral.cpp - Mixtral (Mixtral-8x7B, 8x22B): every layer routes top-k of num_local_experts SwiGLU experts
// (w1 gate, w3 up, w2 down) with the top-k softmax weights renormalised; GQA or MQA attention without q/k norm;
// an optional sliding window.
#include <string>

#include "model/family.h"

namespace seedling {

namespace {

void read_config(const ConfigReader& r, ModelConfig* c) {
  read_common_config(r, c);
  c->num_experts = r.get_int_any({"num_local_experts", "num_experts"});
  c->experts_per_token = r.get_int("num_experts_per_tok");
  c->moe_intermediate_size = r.get_int("intermediate_size");
  c->norm_topk_prob = true;
  c->sliding_window = r.get_int_or("sliding_window", 0);
  c->layer_has_experts.assign(size_t(c->num_layers), 1);
}

LayerTensorNames layer_names(const ModelConfig& c, int layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  LayerTensorNames n = llama_attention_names(c, p);
  n.router = p + "block_sparse_moe.gate.weight";
  return n;
}

ExpertTensorNames expert_names(int layer, int expert) {
  const std::string p =
      "model.layers." + std::to_string(layer) + ".block_sparse_moe.experts." + std::to_string(expert) + ".";
  return {p + "w1.weight", p + "w3.weight", p + "w2.weight"};
}

}  // namespace

extern const Family kMixtralFamily;
const Family kMixtralFamily = {"mixtral",           read_config,      "model.embed_tokens.weight",
                               "model.norm.weight", "lm_head.weight", layer_names,
                               expert_names};

}  // namespace seedling
