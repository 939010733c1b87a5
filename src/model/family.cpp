#include "model/family.h"

#include "core/error.h"

namespace seedling {

extern const Family kQwen3MoeFamily;
extern const Family kMixtralFamily;
extern const Family kOlmoeFamily;
extern const Family kQwen2MoeFamily;
extern const Family kGlm4MoeFamily;
extern const Family kGptOssFamily;
extern const Family kQwen3NextFamily;
extern const Family kQwen35MoeFamily;
extern const Family kQwen35MoeTextFamily;
extern const Family kDeepseekV3Family;
extern const Family kKimiK2Family;

namespace {
const Family* const kFamilies[] = {&kQwen3MoeFamily,      &kMixtralFamily,    &kOlmoeFamily,     &kQwen2MoeFamily,
                                   &kGlm4MoeFamily,       &kGptOssFamily,     &kQwen3NextFamily, &kQwen35MoeFamily,
                                   &kQwen35MoeTextFamily, &kDeepseekV3Family, &kKimiK2Family};
}

const char* role_name(Role r) {
  switch (r) {
    case Role::AttnNorm:
      return "attn_norm";
    case Role::FfnNorm:
      return "ffn_norm";
    case Role::Q:
      return "q";
    case Role::K:
      return "k";
    case Role::V:
      return "v";
    case Role::O:
      return "o";
    case Role::QBias:
      return "q_bias";
    case Role::KBias:
      return "k_bias";
    case Role::VBias:
      return "v_bias";
    case Role::OBias:
      return "o_bias";
    case Role::QNorm:
      return "q_norm";
    case Role::KNorm:
      return "k_norm";
    case Role::Sinks:
      return "sinks";
    case Role::Router:
      return "router";
    case Role::RouterBias:
      return "router_bias";
    case Role::RouterCorrection:
      return "router_correction";
    case Role::MlpGate:
      return "mlp_gate";
    case Role::MlpUp:
      return "mlp_up";
    case Role::MlpDown:
      return "mlp_down";
    case Role::SharedGate:
      return "shared_gate";
    case Role::SharedUp:
      return "shared_up";
    case Role::SharedDown:
      return "shared_down";
    case Role::SharedExpertGate:
      return "shared_expert_gate";
    case Role::ExpertGateUpBias:
      return "expert_gate_up_bias";
    case Role::ExpertDownBias:
      return "expert_down_bias";
    case Role::LinearQkvz:
      return "linear_qkvz";
    case Role::LinearBa:
      return "linear_ba";
    case Role::LinearQkv:
      return "linear_qkv";
    case Role::LinearZ:
      return "linear_z";
    case Role::LinearB:
      return "linear_b";
    case Role::LinearA:
      return "linear_a";
    case Role::LinearConv:
      return "linear_conv";
    case Role::LinearDtBias:
      return "linear_dt_bias";
    case Role::LinearALog:
      return "linear_a_log";
    case Role::LinearNorm:
      return "linear_norm";
    case Role::LinearOut:
      return "linear_out";
    case Role::MlaQA:
      return "mla_q_a";
    case Role::MlaQANorm:
      return "mla_q_a_norm";
    case Role::MlaQB:
      return "mla_q_b";
    case Role::MlaKvA:
      return "mla_kv_a";
    case Role::MlaKvANorm:
      return "mla_kv_a_norm";
    case Role::MlaKvB:
      return "mla_kv_b";
    case Role::Embed:
      return "embed";
    case Role::FinalNorm:
      return "final_norm";
    case Role::Head:
      return "head";
  }
  return "?";
}

LayerNames llama_attention_names(const std::string& p) {
  LayerNames n;
  n.attn_norm = p + "input_layernorm.weight";
  n.ffn_norm = p + "post_attention_layernorm.weight";
  for (auto [proj, w, b] : {std::tuple{"q", &n.q, &n.q_bias}, std::tuple{"k", &n.k, &n.k_bias},
                            std::tuple{"v", &n.v, &n.v_bias}, std::tuple{"o", &n.o, &n.o_bias}}) {
    *w = p + "self_attn." + proj + "_proj.weight";
    *b = p + "self_attn." + proj + "_proj.bias";
  }
  n.q_norm = p + "self_attn.q_norm.weight";
  n.k_norm = p + "self_attn.k_norm.weight";
  return n;
}

LayerNames qwen_shared_expert_names(const std::string& p) {
  LayerNames n = llama_attention_names(p);
  n.router = p + "mlp.gate.weight";
  swiglu_names(p + "mlp.", &n.mlp_gate, &n.mlp_up, &n.mlp_down);
  swiglu_names(p + "mlp.shared_expert.", &n.shared_gate, &n.shared_up, &n.shared_down);
  n.shared_expert_gate = p + "mlp.shared_expert_gate.weight";
  return n;
}

void group_moe_names(const std::string& p, LayerNames* n) {
  n->router = p + "mlp.gate.weight";
  n->router_correction = p + "mlp.gate.e_score_correction_bias";
  swiglu_names(p + "mlp.", &n->mlp_gate, &n->mlp_up, &n->mlp_down);
  swiglu_names(p + "mlp.shared_experts.", &n->shared_gate, &n->shared_up, &n->shared_down);
}

void swiglu_names(const std::string& prefix, std::string* gate, std::string* up, std::string* down) {
  *gate = prefix + "gate_proj.weight";
  *up = prefix + "up_proj.weight";
  *down = prefix + "down_proj.weight";
}

ExpertParts per_expert_parts(const std::string& prefix, const char* gate, const char* up, const char* down) {
  ExpertParts p;
  p[0].name = prefix + gate + ".weight";
  p[1].name = prefix + up + ".weight";
  p[2].name = prefix + down + ".weight";
  return p;
}

ExpertParts mlp_expert_parts(const ModelConfig&, int layer, int expert) {
  return per_expert_parts("model.layers." + std::to_string(layer) + ".mlp.experts." + std::to_string(expert) + ".",
                          "gate_proj", "up_proj", "down_proj");
}

void linear_attention_names(const std::string& p, LayerNames* n) {
  const std::string a = p + "linear_attn.";
  n->linear_qkvz = a + "in_proj_qkvz.weight";
  n->linear_ba = a + "in_proj_ba.weight";
  n->linear_qkv = a + "in_proj_qkv.weight";
  n->linear_z = a + "in_proj_z.weight";
  n->linear_b = a + "in_proj_b.weight";
  n->linear_a = a + "in_proj_a.weight";
  n->linear_conv = a + "conv1d.weight";
  n->linear_dt_bias = a + "dt_bias";
  n->linear_a_log = a + "A_log";
  n->linear_norm = a + "norm.weight";
  n->linear_out = a + "out_proj.weight";
}

ExpertParts fused_expert_parts(const std::string& prefix, int expert, int width) {
  ExpertParts p;
  p[0] = {prefix + "gate_up_proj", expert, false, 1, 0, 2};
  p[1] = {prefix + "gate_up_proj", expert, false, 1, width, 2};
  p[2] = {prefix + "down_proj", expert, false, 1, 0, 1};
  return p;
}

namespace {
// The GQA attention block's tensors (Mixer::Attention).
template <class Add>
void attention_tensors(const ModelConfig& c, const LayerNames& n, const AttentionPlan& a, Add& add) {
  const int64_t H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim();
  add(Role::Q, n.q, {a.output_gate ? 2 * Q : Q, H}, true);  // gated: query then gate per head
  add(Role::K, n.k, {KV, H}, true);
  add(Role::V, n.v, {KV, H}, true);
  add(Role::O, n.o, {H, Q}, true);
  if (a.qkv_bias) {
    add(Role::QBias, n.q_bias, {Q}, false);
    add(Role::KBias, n.k_bias, {KV}, false);
    add(Role::VBias, n.v_bias, {KV}, false);
  }
  if (a.qk_norm != QkNorm::None) {
    const bool whole = a.qk_norm == QkNorm::Whole;
    add(Role::QNorm, n.q_norm, {whole ? Q : c.head_dim}, false);
    add(Role::KNorm, n.k_norm, {whole ? KV : c.head_dim}, false);
  }
  if (a.o_bias) add(Role::OBias, n.o_bias, {H}, false);
  if (a.sinks) add(Role::Sinks, n.sinks, {c.num_heads}, false);
}
}  // namespace

std::vector<TensorSpec> layer_tensors(const ModelConfig& c, const Family& f, int layer) {
  const LayerPlan& plan = c.plan(layer);
  const LayerNames n = f.layer_names(c, layer);
  const int64_t H = c.hidden_size, E = c.num_experts;
  std::vector<TensorSpec> out;
  auto add = [&](Role role, const std::string& name, std::vector<int64_t> shape, bool dense) {
    SEEDLING_CHECK(!name.empty(), "family {} names no tensor for role {} of layer {}", f.model_type, role_name(role),
                   layer);
    out.push_back({role, name, std::move(shape), dense, layer});
  };
  const AttentionPlan& a = plan.attn;
  add(Role::AttnNorm, n.attn_norm, {H}, false);
  add(Role::FfnNorm, n.ffn_norm, {H}, false);
  if (plan.mixer == Mixer::GatedDeltaNet) {
    const LinearAttentionPlan& g = plan.linear;
    const int64_t KW = g.key_width(), VW = g.value_width(), NV = g.value_heads;
    if (g.grouped) {
      add(Role::LinearQkvz, n.linear_qkvz, {2 * KW + 2 * VW, H}, true);
      add(Role::LinearBa, n.linear_ba, {2 * NV, H}, false);
    } else {
      add(Role::LinearQkv, n.linear_qkv, {2 * KW + VW, H}, true);
      add(Role::LinearZ, n.linear_z, {VW, H}, true);
      add(Role::LinearB, n.linear_b, {NV, H}, false);
      add(Role::LinearA, n.linear_a, {NV, H}, false);
    }
    add(Role::LinearConv, n.linear_conv, {g.conv_channels(), 1, g.conv_kernel}, false);
    add(Role::LinearDtBias, n.linear_dt_bias, {NV}, false);
    add(Role::LinearALog, n.linear_a_log, {NV}, false);
    add(Role::LinearNorm, n.linear_norm, {g.value_head_dim}, false);
    add(Role::LinearOut, n.linear_out, {H, VW}, true);
  } else if (plan.mixer == Mixer::Mla) {
    const MlaPlan& m = plan.mla;
    const int64_t heads = c.num_heads, qh = m.q_head_dim();
    if (m.q_lora_rank > 0) {
      add(Role::MlaQA, n.mla_q_a, {m.q_lora_rank, H}, true);
      add(Role::MlaQANorm, n.mla_q_a_norm, {m.q_lora_rank}, false);
      add(Role::MlaQB, n.mla_q_b, {heads * qh, m.q_lora_rank}, true);
    } else {
      add(Role::Q, n.q, {heads * qh, H}, true);
    }
    add(Role::MlaKvA, n.mla_kv_a, {m.cache_width(), H}, true);
    add(Role::MlaKvANorm, n.mla_kv_a_norm, {m.kv_lora_rank}, false);
    // kept as stored: its rows are split per head and its nope part transposed at load (model/mla.cpp)
    add(Role::MlaKvB, n.mla_kv_b, {heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank}, false);
    add(Role::O, n.o, {H, heads * m.v_head_dim}, true);
  } else {
    attention_tensors(c, n, a, add);
  }
  const FfnPlan& ffn = plan.ffn;
  if (ffn.kind == FfnKind::Dense) {
    add(Role::MlpGate, n.mlp_gate, {ffn.width, H}, true);
    add(Role::MlpUp, n.mlp_up, {ffn.width, H}, true);
    add(Role::MlpDown, n.mlp_down, {H, ffn.width}, true);
    return out;
  }
  add(Role::Router, n.router, {E, H}, false);
  if (ffn.router.bias) add(Role::RouterBias, n.router_bias, {E}, false);
  if (ffn.router.correction_bias) add(Role::RouterCorrection, n.router_correction, {E}, false);
  if (ffn.shared_width > 0) {
    add(Role::SharedGate, n.shared_gate, {ffn.shared_width, H}, true);
    add(Role::SharedUp, n.shared_up, {ffn.shared_width, H}, true);
    add(Role::SharedDown, n.shared_down, {H, ffn.shared_width}, true);
    if (ffn.shared_gate) add(Role::SharedExpertGate, n.shared_expert_gate, {1, H}, false);
  }
  if (ffn.expert_bias) {
    add(Role::ExpertGateUpBias, n.expert_gate_up_bias, {E, 2 * int64_t(ffn.width)}, false);
    add(Role::ExpertDownBias, n.expert_down_bias, {E, H}, false);
  }
  return out;
}

void for_each_tensor(const ModelConfig& c, const Family& f, bool with_head,
                     const std::function<void(const TensorSpec&)>& tensor,
                     const std::function<void(int layer)>& experts) {
  const int64_t H = c.hidden_size, V = c.vocab_size;
  tensor({Role::Embed, f.embed, {V, H}, true});
  tensor({Role::FinalNorm, f.final_norm, {H}, false});
  if (with_head) tensor({Role::Head, f.lm_head, {V, H}, true});
  for (int l = 0; l < c.num_layers; ++l) {
    for (const TensorSpec& t : layer_tensors(c, f, l)) tensor(t);
    if (c.has_experts(l)) experts(l);
  }
}

const Family& family_for(const std::string& model_type, const std::string& config_path) {
  std::string known;
  for (const Family* f : kFamilies) {
    if (model_type == f->model_type) return *f;
    known += (known.empty() ? "" : ", ") + std::string(f->model_type);
  }
  fail("{}: key 'model_type': '{}' is not supported (supported: {})", config_path, model_type, known);
}

}  // namespace seedling
