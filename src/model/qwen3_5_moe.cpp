// model/qwen3_5_moe.cpp - Qwen3.5 MoE (Qwen3.5-35B-A3B, 122B-A10B, 397B-A17B): qwen3_next's hybrid with split
// projections, as released in a multimodal folder.
//
// Plan: as qwen3_next (model/qwen3_next.cpp) but the linear layers store in_proj_qkv ([q k v]), in_proj_z, in_proj_b
// and in_proj_a apart; every layer routes experts and the router always renormalises (transformers'
// Qwen3_5MoeTopKRouter has no norm_topk_prob). The released folders are multimodal (`qwen3_5_moe`): the text model's
// keys sit in `text_config` and its tensors under model.language_model.*; the vision tower (model.visual.*) is not
// read (`seedling info` says so). Their rotary is mrope, which for text (the same position on its three axes) is
// plain RoPE. A text-only folder (`qwen3_5_moe_text`) keeps its keys at the top and its tensors under model.*. Routed
// experts: one tensor per expert, or fused (experts.gate_up_proj (E, 2I, H), gate rows then up; experts.down_proj).
#include <string>

#include "model/family.h"
#include "model/linear_attention.h"

namespace seedling {

namespace {

std::string layer_prefix(const ModelConfig& c, int layer) {
  const char* base = c.model_type == "qwen3_5_moe" ? "model.language_model.layers." : "model.layers.";
  return base + std::to_string(layer) + ".";
}

void read_text(const ConfigReader& r, ModelConfig* c) {
  read_qwen_moe_config(r, c);
  read_gated_delta_config(r, c, std::vector<uint8_t>(size_t(c->num_layers), 1), /*grouped=*/false,
                          /*renormalize=*/true);
  c->fused_experts = folder_stores_tensor(r.path(), layer_prefix(*c, 0) + "mlp.experts.gate_up_proj");
}

void read_multimodal(const ConfigReader& r, ModelConfig* c) {
  if (!r.has("text_config") || !r.root()["text_config"].is_object()) {
    r.bad("text_config", "missing (a qwen3_5_moe folder keeps the text model's keys there)");
  }
  const ConfigReader text(r.root()["text_config"], r.path() + " (text_config)");
  read_text(text, c);
}

LayerNames layer_names(const ModelConfig& c, int layer) {
  const std::string p = layer_prefix(c, layer);
  LayerNames n = qwen_shared_expert_names(p);
  linear_attention_names(p, &n);
  return n;
}

ExpertParts expert_parts(const ModelConfig& c, int layer, int expert) {
  const std::string p = layer_prefix(c, layer) + "mlp.experts.";
  if (c.fused_experts) return fused_expert_parts(p, expert, c.plan(layer).ffn.width);
  return per_expert_parts(p + std::to_string(expert) + ".", "gate_proj", "up_proj", "down_proj");
}

}  // namespace

extern const Family kQwen35MoeFamily;
const Family kQwen35MoeFamily = {"qwen3_5_moe",
                                 read_multimodal,
                                 "model.language_model.embed_tokens.weight",
                                 "model.language_model.norm.weight",
                                 "lm_head.weight",
                                 layer_names,
                                 expert_parts};
extern const Family kQwen35MoeTextFamily;
const Family kQwen35MoeTextFamily = {"qwen3_5_moe_text",  read_text,        "model.embed_tokens.weight",
                                     "model.norm.weight", "lm_head.weight", layer_names,
                                     expert_parts};

}  // namespace seedling
