// model/qwen3_next.cpp - Qwen3-Next (Qwen3-Next-80B-A3B): a hybrid of Gated DeltaNet and gated full attention.
//
// Plan: layer_types (or full_attention_interval) picks each layer's mixer. Linear layers: in_proj_qkvz and in_proj_ba
// with their rows grouped per key head ([q k v z] and [b a] of each group), a causal depthwise conv1d + SiLU over
// q, k, v, the gated delta rule per value head, a gated RMSNorm and out_proj. Full layers: q_proj twice as wide (per
// head the query, then its sigmoid output gate), per-head q/k norms, partial rotary. Every norm but the gated one
// scales by (1 + w). FFN: a softmax router over num_experts SwiGLU experts (renormalised when norm_topk_prob,
// default true) beside a shared expert times sigmoid(shared_expert_gate . x); mlp_only_layers and
// decoder_sparse_step as qwen3_moe.
#include <string>

#include "core/error.h"
#include "model/family.h"
#include "model/linear_attention.h"

namespace seedling {

void read_gated_delta_config(const ConfigReader& r, ModelConfig* c, const std::vector<uint8_t>& moe, bool grouped,
                             bool renormalize) {
  const nlohmann::json& j = r.root();
  const bool rotary_stated =
      r.has("partial_rotary_factor") || (r.has("rope_parameters") && j["rope_parameters"].is_object() &&
                                         j["rope_parameters"].contains("partial_rotary_factor"));
  if (!rotary_stated) c->rope.partial_rotary_factor = 0.25;  // transformers' default for these families
  c->head_dim = r.get_int_or("head_dim", 256);               // likewise
  // Zero-centred norms: (1 + w), unless the weights were stored with the 1 added (a GGUF of llama.cpp's converter).
  c->norm_weight_offset = r.get_bool_or("norm_weights_include_offset", false) ? 0.0f : 1.0f;
  if (r.get_bool_or("attention_bias", false)) {
    r.bad("attention_bias", "true is not supported for " + c->model_type + " (released checkpoints set false)");
  }
  AttentionPlan attn;
  attn.qk_norm = QkNorm::PerHead;
  attn.output_gate = true;
  FfnPlan ffn;
  ffn.router.renormalize = renormalize;
  ffn.shared_width = r.get_int("shared_expert_intermediate_size");
  ffn.shared_gate = ffn.shared_width > 0;
  uniform_layer_plan(c, moe, attn, ffn);

  LinearAttentionPlan lin;
  lin.key_heads = r.get_int_or("linear_num_key_heads", 16);
  lin.value_heads = r.get_int_or("linear_num_value_heads", 32);
  lin.key_head_dim = r.get_int_or("linear_key_head_dim", 128);
  lin.value_head_dim = r.get_int_or("linear_value_head_dim", 128);
  lin.conv_kernel = r.get_int_or("linear_conv_kernel_dim", 4);
  lin.grouped = grouped;
  if (lin.key_heads <= 0) r.bad("linear_num_key_heads", "must be positive");
  if (lin.value_heads <= 0 || lin.value_heads % lin.key_heads != 0) {
    r.bad("linear_num_value_heads",
          fmt::format("{} must be a positive multiple of linear_num_key_heads {}", lin.value_heads, lin.key_heads));
  }
  if (lin.key_head_dim <= 0) r.bad("linear_key_head_dim", "must be positive");
  if (lin.value_head_dim <= 0) r.bad("linear_value_head_dim", "must be positive");
  if (lin.conv_kernel < 1 || lin.conv_kernel > 64) r.bad("linear_conv_kernel_dim", "must be between 1 and 64");

  std::vector<std::string> types(size_t(c->num_layers));
  if (r.has("layer_types")) {
    const nlohmann::json& v = j["layer_types"];
    if (!v.is_array() || int(v.size()) != c->num_layers) {
      r.bad("layer_types", fmt::format("expected a list of {} strings (one per layer), got {}", c->num_layers,
                                       v.dump().substr(0, 200)));
    }
    for (int l = 0; l < c->num_layers; ++l) {
      const nlohmann::json& t = v[size_t(l)];
      types[size_t(l)] = t.is_string() ? t.get<std::string>() : t.dump();
    }
  } else {
    const int interval = r.get_int_or("full_attention_interval", 4);
    if (interval < 1) r.bad("full_attention_interval", "must be at least 1");
    for (int l = 0; l < c->num_layers; ++l)
      types[size_t(l)] = (l + 1) % interval != 0 ? "linear_attention" : "full_attention";
  }
  for (int l = 0; l < c->num_layers; ++l) {
    LayerPlan& p = c->layers[size_t(l)];
    if (types[size_t(l)] == "linear_attention") {
      p.mixer = Mixer::GatedDeltaNet;
      p.linear = lin;
    } else if (types[size_t(l)] != "full_attention") {
      r.bad("layer_types", fmt::format("entry {} '{}' is not supported (supported: linear_attention, full_attention)",
                                       l, types[size_t(l)]));
    }
  }
}

namespace {

void read_config(const ConfigReader& r, ModelConfig* c) {
  read_qwen_moe_config(r, c);
  read_gated_delta_config(r, c, read_sparse_layers(r, *c), /*grouped=*/true, r.get_bool_or("norm_topk_prob", true));
}

LayerNames layer_names(const ModelConfig&, int layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  LayerNames n = qwen_shared_expert_names(p);
  linear_attention_names(p, &n);
  return n;
}

}  // namespace

extern const Family kQwen3NextFamily;
const Family kQwen3NextFamily = {"qwen3_next",        read_config,      "model.embed_tokens.weight",
                                 "model.norm.weight", "lm_head.weight", layer_names,
                                 mlp_expert_parts};

}  // namespace seedling
