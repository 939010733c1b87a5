// model/gguf_config.cpp - GGUF metadata -> the config.json of a family, one GgufArch per mapped architecture.
//
// The keys are llama.cpp's (gguf-py's constants.py Keys.LLM / Attention / Rope, read as src/llama-hparams.cpp reads
// them); what llama.cpp decides from which tensors a file holds (a tied head, q/k/v biases, q/k norms, dense layers)
// is decided here the same way, from the tensors.
#include "model/gguf_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "core/error.h"

namespace seedling {

using nlohmann::json;

int64_t ConfigWriter::int_key(const char* name, const std::string& suffix, int64_t min, int64_t max) {
  const int64_t v = g_.get_int(key(suffix), min, max);  // missing or mistyped: an Error naming the key
  j_[name] = v;
  from(name, key(suffix));
  return v;
}

bool ConfigWriter::int_key_if(const char* name, const std::string& suffix, int64_t min, int64_t max) {
  if (!has(suffix)) return false;
  int_key(name, suffix, min, max);
  return true;
}

void ConfigWriter::real_key_if(const char* name, const std::string& suffix) {
  if (!has(suffix)) return;
  j_[name] = g_.get_float(key(suffix));
  from(name, key(suffix));
}

void ConfigWriter::bool_key_if(const char* name, const std::string& suffix) {
  if (!has(suffix)) return;
  j_[name] = g_.get_bool(key(suffix));
  from(name, key(suffix));
}

namespace {

std::string blk(int layer, const char* rest) {
  return "blk." + std::to_string(layer) + "." + rest;
}

int64_t num_layers(const json& j) {
  return j.at("num_hidden_layers").get<int64_t>();
}

// RoPE: rope.freq_base, rope.dimension_count (partial rotary), rope.scaling.* (none, linear, yarn). With `mla`
// (deepseek2) the rotary dimensions are the family's qk_rope_head_dim (its reader), and YaRN's log multiplier is
// 0.1 * mscale_all_dim (llama.cpp's converter), which gives mscale too: the file holds one number for both.
void rope_config(ConfigWriter& w, int64_t head_dim, bool mla) {
  json& j = w.json();
  const GgufFile& g = w.file();
  w.real_key_if("rope_theta", "rope.freq_base");
  if (!mla && w.has("rope.dimension_count")) {
    const int64_t n_rot = g.get_int(w.key("rope.dimension_count"), 1, INT32_MAX);
    if (n_rot != head_dim) {
      j["partial_rotary_factor"] = double(n_rot) / double(head_dim);
      w.from("partial_rotary_factor", w.key("rope.dimension_count"));
    }
  }
  std::string type = "none";
  if (w.has("rope.scaling.type")) type = std::string(g.get_string(w.key("rope.scaling.type")));
  double factor = 0.0;
  for (const char* k : {"rope.scaling.factor", "rope.scale_linear"}) {
    if (w.has(k)) {
      factor = g.get_float(w.key(k));
      w.from("rope_scaling.factor", w.key(k));
      break;
    }
  }
  if (w.has("rope.scaling.attn_factor") && g.get_float(w.key("rope.scaling.attn_factor")) != 1.0) {
    fail("{}: key '{}' is {}: an attention factor other than 1 is not supported", g.path(),
         w.key("rope.scaling.attn_factor"), g.get_float(w.key("rope.scaling.attn_factor")));
  }
  double log_mul = 0.0;
  if (w.has("rope.scaling.yarn_log_multiplier")) log_mul = g.get_float(w.key("rope.scaling.yarn_log_multiplier"));
  if (!mla && log_mul != 0.0) {
    fail("{}: key '{}' is set: YaRN's log multiplier (DeepSeek's mscale) is not supported for {}", g.path(),
         w.key("rope.scaling.yarn_log_multiplier"), w.arch());
  }
  if (type == "none" || ((type == "linear") && (factor == 0.0 || factor == 1.0))) return;
  json s = json::object();
  w.from("rope_scaling.rope_type", w.key("rope.scaling.type"));
  if (type == "linear") {
    s["rope_type"] = "linear";
    s["factor"] = factor;
  } else if (type == "yarn") {
    s["rope_type"] = "yarn";
    s["factor"] = factor == 0.0 ? 1.0 : factor;
    s["original_max_position_embeddings"] = g.get_int(w.key("rope.scaling.original_context_length"), 1, INT32_MAX);
    w.from("rope_scaling.original_max_position_embeddings", w.key("rope.scaling.original_context_length"));
    for (auto [name, k] : {std::pair{"beta_fast", "rope.scaling.yarn_beta_fast"},
                           std::pair{"beta_slow", "rope.scaling.yarn_beta_slow"}}) {
      if (w.has(k)) {
        s[name] = g.get_float(w.key(k));
        w.from(std::string("rope_scaling.") + name, w.key(k));
      }
    }
    if (mla && log_mul != 0.0) {
      // The key is a float32 of 0.1 * a config's decimal (1.0 in the releases): its 7 significant digits give the
      // decimal back (0.08f / 0.1 is 0.79999998, 0.8 once rounded), as the folder's config states it.
      s["mscale_all_dim"] = s["mscale"] = std::stod(fmt::format("{:.7g}", log_mul / 0.1));
      w.from("rope_scaling.mscale_all_dim", w.key("rope.scaling.yarn_log_multiplier"));
    }
  } else {
    fail("{}: key '{}' is '{}': not supported (supported: none, linear, yarn)", g.path(), w.key("rope.scaling.type"),
         type);
  }
  j["rope_scaling"] = s;
}

// What every mapped architecture shares: sizes, heads, norms, RoPE, the head, the token ids. With `mla` (deepseek2)
// the key and value lengths are MLA's (nope + rope, v_head_dim: deepseek2_config reads them), not a head_dim.
void common_config(ConfigWriter& w, bool mla = false) {
  json& j = w.json();
  const GgufFile& g = w.file();
  j["hidden_act"] = "silu";
  j["dtype"] = "gguf";
  if (!w.int_key_if("vocab_size", "vocab_size", 1)) {
    if (g.has("tokenizer.ggml.tokens")) {  // llama.cpp sizes the vocabulary by the token list
      j["vocab_size"] = g.get_string_array("tokenizer.ggml.tokens").size();
      w.from("vocab_size", "tokenizer.ggml.tokens");
    } else {  // no tokenizer: the embedding's rows
      const GgufTensor& e = g.tensor("token_embd.weight");
      if (e.dims.size() != 2) {
        fail("{}: tensor 'token_embd.weight' has dimensions {}, expected [hidden, vocab]", g.path(), e.dims_string());
      }
      j["vocab_size"] = e.dims[1];
      w.from("vocab_size", "token_embd.weight");
    }
  }
  const int64_t hidden = w.int_key("hidden_size", "embedding_length", 1);
  w.int_key("num_hidden_layers", "block_count", 1, 100000);
  const int64_t heads = w.int_key("num_attention_heads", "attention.head_count", 1);
  w.int_key_if("num_key_value_heads", "attention.head_count_kv", 1);
  int64_t head_dim = hidden / heads;
  if (!mla && w.has("attention.key_length")) head_dim = w.int_key("head_dim", "attention.key_length", 1);
  if (!mla && w.has("attention.value_length")) {
    const int64_t v = g.get_int(w.key("attention.value_length"), 1, INT32_MAX);
    if (v != head_dim) {
      fail("{}: key '{}' is {}, but the key length is {}: value heads of another width are not supported", g.path(),
           w.key("attention.value_length"), v, head_dim);
    }
  }
  j["rms_norm_eps"] = g.get_float(w.key("attention.layer_norm_rms_epsilon"));
  w.from("rms_norm_eps", w.key("attention.layer_norm_rms_epsilon"));
  w.int_key_if("max_position_embeddings", "context_length", 1);
  rope_config(w, head_dim, mla);
  j["tie_word_embeddings"] = !w.has_tensor("output.weight");
  // Token ids: BOS, and every id that ends a generation (llama.cpp's EOS, EOT and EOM).
  if (g.has("tokenizer.ggml.bos_token_id")) {
    j["bos_token_id"] = g.get_int("tokenizer.ggml.bos_token_id", 0, INT32_MAX);
    w.from("bos_token_id", "tokenizer.ggml.bos_token_id");
  }
  json eos = json::array();
  for (const char* k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (!g.has(k)) continue;
    const int64_t id = g.get_int(k, 0, INT32_MAX);
    if (std::find(eos.begin(), eos.end(), json(id)) == eos.end()) eos.push_back(id);
    w.from("eos_token_id", k);
  }
  if (!eos.empty()) j["eos_token_id"] = eos;
}

// Routed experts: expert_count, expert_used_count and the expert width under `width_name`.
void experts_config(ConfigWriter& w, const char* count_name, const char* width_name, bool width_required) {
  const GgufFile& g = w.file();
  if (!w.has("expert_count") || g.get_int(w.key("expert_count")) == 0) {
    fail("{}: key '{}' is {}: a model without routed experts (Seedling runs mixture-of-experts models)", g.path(),
         w.key("expert_count"), w.has("expert_count") ? "0" : "missing");
  }
  w.int_key(count_name, "expert_count", 1);
  w.int_key("num_experts_per_tok", "expert_used_count", 1);
  if (width_required || w.has("expert_feed_forward_length")) {
    w.int_key(width_name, "expert_feed_forward_length", 1);
  } else {
    w.int_key(width_name, "feed_forward_length", 1);  // llama.cpp's llama and olmoe: feed_forward_length
  }
}

// The renormalisation of the top-k weights: expert_weights_norm when the file says, else the architecture's
// llama.cpp graph's choice.
void norm_topk(ConfigWriter& w, bool fallback) {
  w.json()["norm_topk_prob"] = fallback;
  w.bool_key_if("norm_topk_prob", "expert_weights_norm");
}

// Layers with a dense MLP (blk.N.ffn_gate.weight) and no router (blk.N.ffn_gate_inp.weight) are dense: Qwen's
// mlp_only_layers. Any other layer routes experts (a router missing there is then the error).
void dense_layers_by_tensor(ConfigWriter& w) {
  json dense = json::array();
  for (int64_t l = 0; l < num_layers(w.json()); ++l) {
    if (w.has_tensor(blk(int(l), "ffn_gate.weight")) && !w.has_tensor(blk(int(l), "ffn_gate_inp.weight"))) {
      dense.push_back(l);
    }
  }
  w.json()["mlp_only_layers"] = dense;
  w.json()["decoder_sparse_step"] = 1;
}

void qwen3moe_config(ConfigWriter& w) {
  common_config(w);
  experts_config(w, "num_experts", "moe_intermediate_size", true);
  w.int_key_if("intermediate_size", "feed_forward_length", 1);
  norm_topk(w, true);  // build_qwen3moe renormalises
  dense_layers_by_tensor(w);
  w.json()["attention_bias"] = false;
}

void qwen2moe_config(ConfigWriter& w) {
  common_config(w);
  experts_config(w, "num_experts", "moe_intermediate_size", false);
  w.int_key_if("intermediate_size", "feed_forward_length", 1);
  // llama.cpp: the shared expert's width, else feed_forward_length.
  if (!w.int_key_if("shared_expert_intermediate_size", "expert_shared_feed_forward_length", 1)) {
    w.int_key("shared_expert_intermediate_size", "feed_forward_length", 1);
  }
  norm_topk(w, false);  // build_qwen2moe does not renormalise
  dense_layers_by_tensor(w);
  w.json()["qkv_bias"] = w.has_tensor(blk(0, "attn_q.bias"));
}

void llama_config(ConfigWriter& w) {
  common_config(w);
  experts_config(w, "num_local_experts", "intermediate_size", false);
}

void olmoe_config(ConfigWriter& w) {
  common_config(w);
  experts_config(w, "num_experts", "intermediate_size", false);
  norm_topk(w, false);
  w.real_key_if("clip_qkv", "attention.clamp_kqv");
  w.json()["attention_bias"] = false;
}

// The converter counts the multi-token-prediction layers in block_count (glm4moe, qwen35moe: num_hidden_layers +
// nextn_predict_layers); they are stored, not run.
void mtp_layers(ConfigWriter& w) {
  json& j = w.json();
  const int64_t blocks = num_layers(j);
  if (w.int_key_if("num_nextn_predict_layers", "nextn_predict_layers", 0, blocks - 1)) {
    j["num_hidden_layers"] = blocks - j["num_nextn_predict_layers"].get<int64_t>();
  }
}

// The routed experts of glm4moe and deepseek2 (the MTP layers, a dense lead, shared experts, a weight scale, groups),
// as llama.cpp's keys state them; norm_topk_prob false where expert_weights_norm is absent (llama.cpp's default).
void group_moe_config(ConfigWriter& w) {
  json& j = w.json();
  mtp_layers(w);
  experts_config(w, "n_routed_experts", "moe_intermediate_size", true);
  w.int_key_if("intermediate_size", "feed_forward_length", 1);
  w.int_key("n_shared_experts", "expert_shared_count", 0);
  j["first_k_dense_replace"] = 0;
  w.int_key_if("first_k_dense_replace", "leading_dense_block_count", 0);
  w.real_key_if("routed_scaling_factor", "expert_weights_scale");
  norm_topk(w, false);
  w.int_key_if("n_group", "expert_group_count", 1);
  w.int_key_if("topk_group", "expert_group_used_count", 1);
}

void glm4moe_config(ConfigWriter& w) {
  common_config(w);
  json& j = w.json();
  const GgufFile& g = w.file();
  group_moe_config(w);
  if (w.has("expert_gating_func")) {
    const int64_t f = g.get_int(w.key("expert_gating_func"));
    if (f != 0 && f != 2) {  // llama.cpp: 0 (unset) means sigmoid for glm4moe, 1 softmax, 2 sigmoid
      fail("{}: key '{}' is {}: glm4moe routes by sigmoid scores (2); softmax (1) is not supported", g.path(),
           w.key("expert_gating_func"), f);
    }
  }
  j["attention_bias"] = w.has_tensor(blk(0, "attn_q.bias"));
  j["use_qk_norm"] = w.has_tensor(blk(0, "attn_q_norm.weight"));
}

void gpt_oss_config(ConfigWriter& w) {
  common_config(w);
  json& j = w.json();
  experts_config(w, "num_local_experts", "intermediate_size", true);
  j["attention_bias"] = true;
  // llama.cpp's gpt-oss: attention.sliding_window on every other layer, the first sliding (set_swa_pattern(2)), as
  // transformers' layer_types; its clamped SwiGLU with limit 7.
  const int64_t window = w.int_key("sliding_window", "attention.sliding_window", 1);
  (void)window;
  json types = json::array();
  for (int64_t l = 0; l < num_layers(j); ++l) types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
  j["layer_types"] = types;
  j["swiglu_limit"] = 7.0;
  // gpt-oss trained with transformers' YaRN without truncation (its config.json's rope_parameters.truncate: false);
  // a GGUF has no key for it.
  if (j.contains("rope_scaling") && j["rope_scaling"].value("rope_type", "") == "yarn") {
    j["rope_scaling"]["truncate"] = false;
  }
}

// qwen35moe (Qwen3.5/3.6 MoE, text): llama.cpp's keys for the Gated DeltaNet layers (ssm.conv_kernel, ssm.state_size
// for both head widths, ssm.group_count key heads, ssm.time_step_rank value heads, ssm.inner_size their width) and a
// full-attention layer every full_attention_interval; the shared expert's width; the router renormalises (the
// family's rule); the MTP layers counted in block_count stored, not run; the norms as stored (1 + w). Its
// rope.dimension_sections (mrope) are plain RoPE for text.
void qwen35moe_config(ConfigWriter& w) {
  common_config(w);
  json& j = w.json();
  const GgufFile& g = w.file();
  mtp_layers(w);
  experts_config(w, "num_experts", "moe_intermediate_size", true);
  w.int_key("shared_expert_intermediate_size", "expert_shared_feed_forward_length", 0);
  w.int_key("linear_conv_kernel_dim", "ssm.conv_kernel", 1, 64);
  const int64_t state = w.int_key("linear_key_head_dim", "ssm.state_size", 1);
  j["linear_value_head_dim"] = state;
  w.from("linear_value_head_dim", w.key("ssm.state_size"));
  w.int_key("linear_num_key_heads", "ssm.group_count", 1);
  const int64_t value_heads = w.int_key("linear_num_value_heads", "ssm.time_step_rank", 1);
  const int64_t inner = g.get_int(w.key("ssm.inner_size"), 1, INT32_MAX);
  if (inner != value_heads * state) {
    fail("{}: key '{}' is {}, expected {} value heads x {} ({}): value heads of another width are not supported",
         g.path(), w.key("ssm.inner_size"), inner, value_heads, state, value_heads * state);
  }
  w.int_key("full_attention_interval", "full_attention_interval", 1, INT32_MAX);
  // llama.cpp's converter stores the zero-centred norms' weights as 1 + w: read as stored (a pack of this file keeps
  // them so, and this key with them).
  j["norm_weights_include_offset"] = true;
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = json::array();
}

// deepseek2 (DeepSeek-V3/R1, Kimi-K2, as llama.cpp's convert_hf_to_gguf.py writes them): MLA's attention.q_lora_rank
// (absent: q_proj), attention.kv_lora_rank, key_length = qk_nope + qk_rope, value_length = v_head_dim,
// rope.dimension_count = qk_rope; head_count_kv is the query heads (llama.cpp's MLA convention; MLA has no KV heads);
// sigmoid routing with the correction bias (expert_gating_func 2; softmax, DeepSeek-V2's, refused) in groups,
// expert_weights_scale, leading_dense_block_count, expert_shared_count; the MTP layers stored, not run.
void deepseek2_config(ConfigWriter& w) {
  common_config(w, true);
  json& j = w.json();
  const GgufFile& g = w.file();
  group_moe_config(w);
  const int64_t gating = w.has("expert_gating_func") ? g.get_int(w.key("expert_gating_func")) : 0;
  if (gating != 2) {
    fail(
        "{}: key '{}' is {}: deepseek2 is read with sigmoid routing (2), as DeepSeek-V3 and Kimi-K2 route; softmax "
        "(DeepSeek-V2's) is not supported",
        g.path(), w.key("expert_gating_func"), w.has("expert_gating_func") ? std::to_string(gating) : "missing");
  }
  j["scoring_func"] = "sigmoid";
  j["topk_method"] = "noaux_tc";
  j["q_lora_rank"] = nullptr;
  w.int_key_if("q_lora_rank", "attention.q_lora_rank", 1);
  w.int_key("kv_lora_rank", "attention.kv_lora_rank", 1);
  const int64_t rope = w.int_key("qk_rope_head_dim", "rope.dimension_count", 1);
  const int64_t key = g.get_int(w.key("attention.key_length"), 1, INT32_MAX);
  if (key <= rope) {
    fail("{}: key '{}' is {}: MLA's key length is qk_nope + qk_rope, more than rope.dimension_count {}", g.path(),
         w.key("attention.key_length"), key, rope);
  }
  j["qk_nope_head_dim"] = key - rope;
  w.from("qk_nope_head_dim", w.key("attention.key_length"));
  w.int_key("v_head_dim", "attention.value_length", 1);
  j["rope_interleave"] = true;  // llama.cpp's deepseek2 rotates pairs (its rope type NORM), as transformers does
  j["attention_bias"] = false;
}

const GgufArch kArchs[] = {
    {"qwen3moe", "qwen3_moe", "ffn_norm", false, qwen3moe_config},
    {"llama", "mixtral", "ffn_norm", true, llama_config},
    {"olmoe", "olmoe", "ffn_norm", false, olmoe_config},
    {"qwen2moe", "qwen2_moe", "ffn_norm", false, qwen2moe_config},
    {"glm4moe", "glm4_moe", "post_attention_norm", false, glm4moe_config},
    {"gpt-oss", "gpt_oss", "post_attention_norm", false, gpt_oss_config},
    {"qwen35moe", "qwen3_5_moe_text", "post_attention_norm", false, qwen35moe_config},
    {"deepseek2", "deepseek_v3", "ffn_norm", false, deepseek2_config},
};

// "FILE: key 'hidden_size': ..." from a family's reader -> "FILE: key 'qwen3moe.embedding_length' (config.json's
// hidden_size): ...".
std::string with_gguf_keys(std::string msg, const std::map<std::string, std::string>& sources) {
  for (const auto& [cfg, gguf] : sources) {
    for (const std::string& pattern : {"key '" + cfg + "'", "key " + cfg + " "}) {
      const size_t at = msg.find(pattern);
      if (at == std::string::npos) continue;
      msg.replace(at, pattern.size(),
                  "key '" + gguf + "' (config.json's " + cfg + ")" + (pattern.back() == ' ' ? " " : ""));
      return msg;
    }
  }
  return msg;
}

}  // namespace

std::string gguf_archs_mapped() {
  std::string out;
  for (const GgufArch& a : kArchs) {
    out += (out.empty() ? "" : ", ") + std::string(a.arch) + (a.permute_qk ? " (with experts)" : "");
  }
  return out;
}

GgufModel map_gguf_model(const GgufFile& g) {
  const std::string arch(g.get_string("general.architecture"));
  const GgufArch* found = nullptr;
  for (const GgufArch& a : kArchs) {
    if (arch == a.arch) found = &a;
  }
  if (found == nullptr) {
    fail("{}: key 'general.architecture': '{}' is not mapped onto a Seedling family (mapped: {})", g.path(), arch,
         gguf_archs_mapped());
  }
  ConfigWriter w(g, arch);
  w.json()["model_type"] = found->model_type;
  found->config(w);
  GgufModel m;
  m.arch = found;
  m.family = &family_for(found->model_type, g.path());
  m.config = w.json();
  m.c.model_type = found->model_type;
  try {
    const ConfigReader r(m.config, g.path());
    m.family->read_config(r, &m.c);
    validate_config(m.c, g.path());
  } catch (const Error& e) {
    throw Error(with_gguf_keys(e.what(), w.sources()));
  }
  return m;
}

std::string gguf_tensor_name(const GgufArch& arch, Role role, int layer) {
  const char* rest = nullptr;
  switch (role) {
    case Role::Embed:
      return "token_embd.weight";
    case Role::FinalNorm:
      return "output_norm.weight";
    case Role::Head:
      return "output.weight";
    case Role::AttnNorm:
      rest = "attn_norm.weight";
      break;
    case Role::FfnNorm:
      return blk(layer, arch.ffn_norm) + ".weight";
    case Role::Q:
      rest = "attn_q.weight";
      break;
    case Role::K:
      rest = "attn_k.weight";
      break;
    case Role::V:
      rest = "attn_v.weight";
      break;
    case Role::O:
      rest = "attn_output.weight";
      break;
    case Role::QBias:
      rest = "attn_q.bias";
      break;
    case Role::KBias:
      rest = "attn_k.bias";
      break;
    case Role::VBias:
      rest = "attn_v.bias";
      break;
    case Role::OBias:
      rest = "attn_output.bias";
      break;
    case Role::QNorm:
      rest = "attn_q_norm.weight";
      break;
    case Role::KNorm:
      rest = "attn_k_norm.weight";
      break;
    case Role::Sinks:
      rest = "attn_sinks.weight";
      break;
    case Role::Router:
      rest = "ffn_gate_inp.weight";
      break;
    case Role::RouterBias:
      rest = "ffn_gate_inp.bias";
      break;
    case Role::RouterCorrection:
      rest = "exp_probs_b.bias";
      break;
    case Role::MlpGate:
      rest = "ffn_gate.weight";
      break;
    case Role::MlpUp:
      rest = "ffn_up.weight";
      break;
    case Role::MlpDown:
      rest = "ffn_down.weight";
      break;
    case Role::SharedGate:
      rest = "ffn_gate_shexp.weight";
      break;
    case Role::SharedUp:
      rest = "ffn_up_shexp.weight";
      break;
    case Role::SharedDown:
      rest = "ffn_down_shexp.weight";
      break;
    case Role::SharedExpertGate:
      rest = "ffn_gate_inp_shexp.weight";
      break;
    case Role::ExpertDownBias:
      rest = "ffn_down_exps.bias";
      break;
    // Gated DeltaNet, split projections (qwen35moe); ssm_a holds -exp(A_log) (the source takes the log back).
    case Role::LinearQkv:
      rest = "attn_qkv.weight";
      break;
    case Role::LinearZ:
      rest = "attn_gate.weight";
      break;
    case Role::LinearB:
      rest = "ssm_beta.weight";
      break;
    case Role::LinearA:
      rest = "ssm_alpha.weight";
      break;
    case Role::LinearConv:
      rest = "ssm_conv1d.weight";
      break;
    case Role::LinearDtBias:
      rest = "ssm_dt.bias";
      break;
    case Role::LinearALog:
      rest = "ssm_a";
      break;
    case Role::LinearNorm:
      rest = "ssm_norm.weight";
      break;
    case Role::LinearOut:
      rest = "ssm_out.weight";
      break;
    // MLA (deepseek2): attn_kv_b as llama.cpp's converter writes it beside its split attn_k_b / attn_v_b.
    case Role::MlaQA:
      rest = "attn_q_a.weight";
      break;
    case Role::MlaQANorm:
      rest = "attn_q_a_norm.weight";
      break;
    case Role::MlaQB:
      rest = "attn_q_b.weight";
      break;
    case Role::MlaKvA:
      rest = "attn_kv_a_mqa.weight";
      break;
    case Role::MlaKvANorm:
      rest = "attn_kv_a_norm.weight";
      break;
    case Role::MlaKvB:
      rest = "attn_kv_b.weight";
      break;
    default:  // ExpertGateUpBias (two GGUF tensors), qwen3next's grouped projections (not mapped)
      return "";
  }
  return blk(layer, rest);
}

std::string gguf_expert_name(int layer, int part, const char* suffix) {
  static const char* const kParts[3] = {"ffn_gate_exps.", "ffn_up_exps.", "ffn_down_exps."};
  return blk(layer, kParts[part]) + suffix;
}

std::string gguf_single_expert_name(int layer, int expert, int part) {
  static const char* const kParts[3] = {"ffn_gate.", "ffn_up.", "ffn_down."};
  return blk(layer, kParts[part]) + std::to_string(expert) + ".weight";
}

}  // namespace seedling
