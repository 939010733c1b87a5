// model/qwen3_moe.cpp - Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder-30B-A3B).
//
// GQA attention with RMSNorm over each head of q and k, head_dim independent of hidden_size / heads; a softmax
// router choosing num_experts_per_tok of num_experts SwiGLU experts, renormalised when norm_topk_prob; layers
// listed in mlp_only_layers, or not on the decoder_sparse_step grid, use a dense MLP of intermediate_size.
#include <algorithm>
#include <string>

#include "model/family.h"

namespace seedling {

namespace {

void read_config(const ConfigReader& r, ModelConfig* c) {
  read_common_config(r, c);
  c->qk_norm = true;
  c->num_experts = r.get_int_any({"num_experts", "num_local_experts"});
  c->experts_per_token = r.get_int("num_experts_per_tok");
  c->moe_intermediate_size = r.get_int("moe_intermediate_size");
  c->norm_topk_prob = r.get_bool_or("norm_topk_prob", false);
  if (r.get_bool_or("use_sliding_window", false)) {
    r.bad("use_sliding_window", "true is not supported for qwen3_moe (published checkpoints set false)");
  }
  const int step = r.get_int_or("decoder_sparse_step", 1);
  if (step < 1) r.bad("decoder_sparse_step", "must be at least 1");
  const std::vector<int> dense = r.get_int_list_or("mlp_only_layers", {});
  for (int l : dense) {
    if (l < 0 || l >= c->num_layers) r.bad("mlp_only_layers", "layer " + std::to_string(l) + " does not exist");
  }
  c->layer_has_experts.assign(size_t(c->num_layers), 0);
  for (int l = 0; l < c->num_layers; ++l) {
    const bool listed = std::find(dense.begin(), dense.end(), l) != dense.end();
    c->layer_has_experts[size_t(l)] = !listed && c->num_experts > 0 && (l + 1) % step == 0;
  }
}

LayerTensorNames layer_names(const ModelConfig& c, int layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  LayerTensorNames n = llama_attention_names(c, p);
  n.q_norm = p + "self_attn.q_norm.weight";
  n.k_norm = p + "self_attn.k_norm.weight";
  if (c.layer_has_experts[size_t(layer)]) {
    n.router = p + "mlp.gate.weight";
  } else {
    n.mlp_gate = p + "mlp.gate_proj.weight";
    n.mlp_up = p + "mlp.up_proj.weight";
    n.mlp_down = p + "mlp.down_proj.weight";
  }
  return n;
}

ExpertTensorNames expert_names(int layer, int expert) {
  const std::string p = "model.layers." + std::to_string(layer) + ".mlp.experts." + std::to_string(expert) + ".";
  return {p + "gate_proj.weight", p + "up_proj.weight", p + "down_proj.weight"};
}

}  // namespace

extern const Family kQwen3MoeFamily;
const Family kQwen3MoeFamily = {"qwen3_moe",         read_config,      "model.embed_tokens.weight",
                                "model.norm.weight", "lm_head.weight", layer_names,
                                expert_names};

}  // namespace seedling
