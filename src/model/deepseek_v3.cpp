// model/deepseek_v3.cpp - DeepSeek-V3 / R1 (deepseek-ai/DeepSeek-V3, DeepSeek-R1) and Kimi-K2 (moonshotai/Kimi-K2-*,
// the same architecture under model_type kimi_k2).
//
// Plan: multi-head latent attention on every layer (MlaPlan, model/mla.cpp): q through q_a_proj -> q_a_layernorm ->
// q_b_proj (or q_proj when q_lora_rank is null), kv_a_proj_with_mqa into a latent of kv_lora_rank (kv_a_layernorm)
// and one rope key of qk_rope_head_dim shared by the heads, kv_b_proj expanding the latent into each head's nope key
// and value; RoPE (YaRN in the releases) on the rope parts only, pairs interleaved when rope_interleave; the softmax
// scale (nope + rope)^-0.5 times mscale(factor, mscale_all_dim)^2 under YaRN. The cache keeps the normalised latent
// and the rope key per position. FFN: the first first_k_dense_replace layers a dense MLP, the others n_routed_experts
// chosen by sigmoid scores plus e_score_correction_bias (selection only) within the topk_group best of n_group groups
// (a group's score: its two best choices; the other groups' choices -inf), weights the unbiased scores, renormalised
// (norm_topk_prob) and times routed_scaling_factor, beside n_shared_experts as one shared MLP. The MTP layers past
// num_hidden_layers (num_nextn_predict_layers) are not loaded. FP8 releases (quantization_config fp8) are read as
// stored (model/fp8_weights.h).
#include <cmath>
#include <string>

#include "model/family.h"

namespace seedling {

namespace {

void read_config(const ConfigReader& r, ModelConfig* c) {
  read_common_config(r, c);
  // Defaults are transformers' (configuration_deepseek_v3.py) where a key is absent.
  std::vector<uint8_t> moe;
  FfnPlan ffn = read_group_moe(r, c, {3, 8, 4, 1, 2.5}, &moe);
  ffn.router.masked_neg_inf = true;
  if (r.get_bool_or("attention_bias", false)) r.bad("attention_bias", "true is not supported for MLA");
  // The releases' remote code names the router it runs; anything else (DeepSeek-V2's softmax, greedy) is refused.
  const std::string scoring = r.get_string_or("scoring_func", "sigmoid");
  if (scoring != "sigmoid") r.bad("scoring_func", "'" + scoring + "' is not supported (supported: sigmoid)");
  const std::string topk_method = r.get_string_or("topk_method", "noaux_tc");
  if (topk_method != "noaux_tc") {
    r.bad("topk_method", "'" + topk_method + "' is not supported (supported: noaux_tc)");
  }
  MlaPlan mla;
  if (!r.root().contains("q_lora_rank")) r.bad("q_lora_rank", "missing (a rank, or null for q_proj)");
  mla.q_lora_rank = r.has("q_lora_rank") ? r.get_int("q_lora_rank") : 0;
  if (r.has("q_lora_rank") && mla.q_lora_rank <= 0) r.bad("q_lora_rank", "must be positive, or null for q_proj");
  mla.kv_lora_rank = r.get_int("kv_lora_rank");
  mla.qk_nope_head_dim = r.get_int("qk_nope_head_dim");
  mla.qk_rope_head_dim = r.get_int("qk_rope_head_dim");
  mla.v_head_dim = r.get_int("v_head_dim");
  for (auto [key, v] : {std::pair{"kv_lora_rank", mla.kv_lora_rank},
                        std::pair{"qk_nope_head_dim", mla.qk_nope_head_dim}, std::pair{"v_head_dim", mla.v_head_dim}}) {
    if (v <= 0) r.bad(key, std::to_string(v) + " must be positive");
  }
  if (mla.qk_rope_head_dim <= 0 || mla.qk_rope_head_dim % 2 != 0) {
    r.bad("qk_rope_head_dim", std::to_string(mla.qk_rope_head_dim) + " must be positive and even");
  }
  if (r.has("head_dim") && r.get_int("head_dim") != mla.qk_rope_head_dim) {
    r.bad("head_dim", "must equal qk_rope_head_dim " + std::to_string(mla.qk_rope_head_dim) +
                          " (the rotary dimensions, as transformers sets it)");
  }
  c->head_dim = mla.qk_rope_head_dim;  // what RoPE rotates: the rope part of q and k
  mla.rope_interleave = r.get_bool_or("rope_interleave", true);
  // transformers' yarn_apply_mscale: under a scaled RoPE with mscale_all_dim, the scale times mscale^2.
  double scale = 1.0 / std::sqrt(double(mla.q_head_dim()));
  if (c->rope.type != "default" && c->rope.mscale_all_dim != 0.0 && c->rope.factor > 1.0) {
    const double m = 0.1 * c->rope.mscale_all_dim * std::log(c->rope.factor) + 1.0;
    scale = scale * m * m;
  }
  mla.softmax_scale = float(scale);
  uniform_layer_plan(c, moe, AttentionPlan{}, ffn);
  for (LayerPlan& p : c->layers) {
    p.mixer = Mixer::Mla;
    p.mla = mla;
  }
}

LayerNames layer_names(const ModelConfig&, int layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  const std::string a = p + "self_attn.";
  LayerNames n;
  n.attn_norm = p + "input_layernorm.weight";
  n.ffn_norm = p + "post_attention_layernorm.weight";
  n.q = a + "q_proj.weight";
  n.o = a + "o_proj.weight";
  n.mla_q_a = a + "q_a_proj.weight";
  n.mla_q_a_norm = a + "q_a_layernorm.weight";
  n.mla_q_b = a + "q_b_proj.weight";
  n.mla_kv_a = a + "kv_a_proj_with_mqa.weight";
  n.mla_kv_a_norm = a + "kv_a_layernorm.weight";
  n.mla_kv_b = a + "kv_b_proj.weight";
  group_moe_names(p, &n);
  return n;
}

}  // namespace

extern const Family kDeepseekV3Family;
const Family kDeepseekV3Family = {"deepseek_v3",       read_config,      "model.embed_tokens.weight",
                                  "model.norm.weight", "lm_head.weight", layer_names,
                                  mlp_expert_parts};
extern const Family kKimiK2Family;
const Family kKimiK2Family = {"kimi_k2",           read_config,      "model.embed_tokens.weight",
                              "model.norm.weight", "lm_head.weight", layer_names,
                              mlp_expert_parts};

}  // namespace seedling
