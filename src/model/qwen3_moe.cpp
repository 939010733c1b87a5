// model/qwen3_moe.cpp - Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder-30B-A3B).
//
// Plan: GQA attention with RMSNorm over each head of q and k, head_dim independent of hidden_size / heads; a softmax
// router choosing num_experts_per_tok of num_experts SwiGLU experts, renormalised when norm_topk_prob; layers
// listed in mlp_only_layers, or not on the decoder_sparse_step grid, use a dense MLP of intermediate_size.
#include <string>

#include "model/family.h"

namespace seedling {

namespace {

void read_config(const ConfigReader& r, ModelConfig* c) {
  read_qwen_moe_config(r, c);
  AttentionPlan attn;
  attn.qk_norm = QkNorm::PerHead;
  attn.qkv_bias = attn.o_bias = r.get_bool_or("attention_bias", false);
  FfnPlan ffn;
  ffn.router.renormalize = r.get_bool_or("norm_topk_prob", false);
  uniform_layer_plan(c, read_sparse_layers(r, *c), attn, ffn);
}

LayerNames layer_names(const ModelConfig& c, int layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  LayerNames n = llama_attention_names(p);
  n.router = p + "mlp.gate.weight";
  swiglu_names(p + "mlp.", &n.mlp_gate, &n.mlp_up, &n.mlp_down);
  return n;
}

}  // namespace

extern const Family kQwen3MoeFamily;
const Family kQwen3MoeFamily = {"qwen3_moe",         read_config,      "model.embed_tokens.weight",
                                "model.norm.weight", "lm_head.weight", layer_names,
                                mlp_expert_parts};

}  // namespace seedling
