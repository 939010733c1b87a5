#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.h"

namespace seedling {

using nlohmann::json;

bool ConfigReader::has(const std::string& key) const {
  return j_.contains(key) && !j_[key].is_null();
}

void ConfigReader::bad(const std::string& key, const std::string& what) const {
  fail("{}: key '{}': {}", path_, key, what);
}

namespace {
// An integer that fits int32, or nullopt (a float, a string, or a value past int32 either way: never truncated).
std::optional<int> int32_of(const json& v) {
  if (!v.is_number_integer()) return std::nullopt;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(INT32_MAX)) return std::nullopt;
    return int(u);
  }
  const int64_t x = v.get<int64_t>();
  if (x < INT32_MIN || x > INT32_MAX) return std::nullopt;
  return int(x);
}
}  // namespace

int ConfigReader::get_int(const std::string& key) const {
  if (!has(key)) bad(key, "missing (an integer is required)");
  const json& v = j_[key];
  if (!v.is_number_integer()) bad(key, "expected an integer, got " + v.dump());
  const std::optional<int> x = int32_of(v);
  if (!x) bad(key, "value " + v.dump() + " out of range");
  return *x;
}

int ConfigReader::get_int_or(const std::string& key, int fallback) const {
  return has(key) ? get_int(key) : fallback;
}

double ConfigReader::get_double(const std::string& key) const {
  if (!has(key)) bad(key, "missing (a number is required)");
  const json& v = j_[key];
  if (!v.is_number()) bad(key, "expected a number, got " + v.dump());
  return v.get<double>();
}

double ConfigReader::get_double_or(const std::string& key, double fallback) const {
  return has(key) ? get_double(key) : fallback;
}

bool ConfigReader::get_bool_or(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  if (!j_[key].is_boolean()) bad(key, "expected true or false, got " + j_[key].dump());
  return j_[key].get<bool>();
}

std::string ConfigReader::get_string_or(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  if (!j_[key].is_string()) bad(key, "expected a string, got " + j_[key].dump());
  return j_[key].get<std::string>();
}

std::vector<int> ConfigReader::get_int_list_or(const std::string& key, const std::vector<int>& fallback) const {
  if (!has(key)) return fallback;
  const json& v = j_[key];
  auto one = [&](const json& e) {
    const std::optional<int> x = int32_of(e);
    if (!x) bad(key, "expected a list of 32-bit integers, got " + v.dump().substr(0, 200));
    return *x;
  };
  if (v.is_number_integer()) return {one(v)};
  if (!v.is_array()) bad(key, "expected a list of integers, got " + v.dump().substr(0, 200));
  std::vector<int> out;
  for (const auto& e : v) out.push_back(one(e));
  return out;
}

int ConfigReader::get_int_any(std::initializer_list<const char*> keys) const {
  for (const char* k : keys) {
    if (has(k)) return get_int(k);
  }
  std::string names;
  for (const char* k : keys) names += (names.empty() ? "" : " or ") + std::string(k);
  fail("{}: missing key {} (an integer is required)", path_, names);
}

namespace {

// rope_parameters (5.x) or rope_theta + rope_scaling (4.x).
RopeConfig read_rope(const ConfigReader& r) {
  RopeConfig rope;
  const json& j = r.root();
  const json* scaling = nullptr;
  std::string where;
  if (r.has("rope_parameters")) {
    if (!j["rope_parameters"].is_object()) r.bad("rope_parameters", "expected an object");
    scaling = &j["rope_parameters"];
    where = "rope_parameters";
    if (scaling->contains("rope_theta")) {
      if (!(*scaling)["rope_theta"].is_number()) r.bad("rope_parameters.rope_theta", "expected a number");
      rope.theta = (*scaling)["rope_theta"].get<double>();
    } else {
      rope.theta = r.get_double("rope_theta");
    }
  } else {
    rope.theta = r.get_double_or("rope_theta", 10000.0);
    if (r.has("rope_scaling")) {
      if (!j["rope_scaling"].is_object()) r.bad("rope_scaling", "expected an object or null");
      scaling = &j["rope_scaling"];
      where = "rope_scaling";
    }
  }
  if (scaling != nullptr) {
    std::string type = "default";
    for (const char* k : {"rope_type", "type"}) {
      if (scaling->contains(k) && !(*scaling)[k].is_null()) {
        if (!(*scaling)[k].is_string()) r.bad(where + "." + k, "expected a string");
        type = (*scaling)[k].get<std::string>();
        break;
      }
    }
    auto number = [&](const char* key, double fallback, bool required) {
      if (!scaling->contains(key) || (*scaling)[key].is_null()) {
        if (required) r.bad(where + "." + key, type + " rope scaling needs a number");
        return fallback;
      }
      if (!(*scaling)[key].is_number()) r.bad(where + "." + key, "expected a number");
      return (*scaling)[key].get<double>();
    };
    if (scaling->contains("partial_rotary_factor")) {
      rope.partial_rotary_factor = number("partial_rotary_factor", 1.0, true);
    }
    if (type == "linear") {
      rope.factor = number("factor", 1.0, true);
      if (!(rope.factor > 0)) r.bad(where + ".factor", "must be positive");
    } else if (type == "yarn") {
      rope.factor = number("factor", 1.0, true);
      if (!(rope.factor >= 1)) r.bad(where + ".factor", "must be at least 1");
      rope.beta_fast = number("beta_fast", 32.0, false);
      rope.beta_slow = number("beta_slow", 1.0, false);
      rope.attention_factor = number("attention_factor", 0.0, false);
      rope.mscale = number("mscale", 0.0, false);
      rope.mscale_all_dim = number("mscale_all_dim", 0.0, false);
      const double orig = number("original_max_position_embeddings", 0.0, true);
      // The range first: converting a double beyond int's range to int is undefined (fuzz_config, 2026-12-02).
      if (!(orig >= 1 && orig <= double(INT32_MAX)) || orig != std::floor(orig))
        r.bad(where + ".original_max_position_embeddings", "must be a positive integer");
      rope.original_max_position_embeddings = int(orig);
      if (scaling->contains("truncate")) {
        if (!(*scaling)["truncate"].is_boolean()) r.bad(where + ".truncate", "expected true or false");
        rope.truncate = (*scaling)["truncate"].get<bool>();
      }
    } else if (type != "default") {
      r.bad(where + ".rope_type", "'" + type + "' is not supported (supported: default, linear, yarn)");
    }
    rope.type = type;
  }
  if (r.has("partial_rotary_factor")) rope.partial_rotary_factor = r.get_double("partial_rotary_factor");
  if (!(rope.theta > 0)) r.bad("rope_theta", "must be positive");
  if (!(rope.partial_rotary_factor > 0 && rope.partial_rotary_factor <= 1)) {
    r.bad("partial_rotary_factor", fmt::format("{} must be in (0, 1]", rope.partial_rotary_factor));
  }
  return rope;
}

}  // namespace

namespace {

// FP8 as DeepSeek releases it (transformers' FineGrainedFP8Config): e4m3 codes, a float32 scale per
// weight_block_size block. Block columns must be whole 32-wide groups of the fp8_g32 codec the loader reads them into.
void read_fp8_config(const ConfigReader& r, const json& q, ModelConfig* c) {
  const std::string fmt_key = q.contains("fmt") && q["fmt"].is_string() ? q["fmt"].get<std::string>() : "e4m3";
  if (fmt_key != "e4m3") r.bad("quantization_config.fmt", "'" + fmt_key + "' is not supported (supported: e4m3)");
  const json* b = q.contains("weight_block_size") ? &q["weight_block_size"] : nullptr;
  if (b == nullptr || !b->is_array() || b->size() != 2 || !(*b)[0].is_number_integer() ||
      !(*b)[1].is_number_integer()) {
    r.bad("quantization_config.weight_block_size",
          "expected [rows, cols] of the scale blocks, got " + (b == nullptr ? std::string("nothing") : b->dump()));
  }
  c->fp8_block_rows = (*b)[0].get<int>();
  c->fp8_block_cols = (*b)[1].get<int>();
  if (c->fp8_block_rows <= 0 || c->fp8_block_cols <= 0 || c->fp8_block_cols % 32 != 0) {
    r.bad("quantization_config.weight_block_size",
          b->dump() + ": rows must be positive and cols a positive multiple of 32");
  }
}

}  // namespace

void read_common_config(const ConfigReader& r, ModelConfig* c) {
  c->vocab_size = r.get_int("vocab_size");
  c->hidden_size = r.get_int("hidden_size");
  c->num_layers = r.get_int("num_hidden_layers");
  // Checked here, not only in validate_config: every family sizes its layer plan by it first, and a negative count
  // was a std::length_error that ended the process.
  constexpr int kMaxLayers = 100000;
  if (c->num_layers <= 0 || c->num_layers > kMaxLayers) {
    r.bad("num_hidden_layers", fmt::format("{} is not a layer count in 1..{}", c->num_layers, kMaxLayers));
  }
  c->num_heads = r.get_int("num_attention_heads");
  c->num_kv_heads = r.get_int_or("num_key_value_heads", c->num_heads);
  c->head_dim = r.get_int_or("head_dim", c->num_heads > 0 ? c->hidden_size / c->num_heads : 0);
  c->intermediate_size = r.get_int_or("intermediate_size", 0);
  c->rms_norm_eps = float(r.get_double_or("rms_norm_eps", 1e-6));
  c->tie_word_embeddings = r.get_bool_or("tie_word_embeddings", false);
  c->max_position_embeddings = r.get_int_or("max_position_embeddings", 4096);
  c->rope = read_rope(r);
  const std::string act = r.get_string_or("hidden_act", "silu");
  if (act != "silu") r.bad("hidden_act", "'" + act + "' is not supported (supported: silu)");
  c->dtype = r.get_string_or("dtype", r.get_string_or("torch_dtype", ""));
  if (r.has("quantization_config")) {
    // MXFP4 is read as released (model/expert_parts.h); any other scheme's tensors would be misread: refuse it.
    const json& q = r.root()["quantization_config"];
    const std::string method = q.is_object() && q.contains("quant_method") && q["quant_method"].is_string()
                                   ? q["quant_method"].get<std::string>()
                                   : q.dump().substr(0, 80);
    if (method == "fp8") {
      read_fp8_config(r, q, c);
    } else if (method != "mxfp4") {
      r.bad("quantization_config.quant_method", "'" + method + "' is not supported (supported: mxfp4, fp8)");
    }
  }
  c->bos_token_id = r.get_int_or("bos_token_id", -1);
  c->eos_token_ids = r.get_int_list_or("eos_token_id", {});
  if (r.get_double_or("attention_dropout", 0.0) != 0.0) {
    // Dropout is a training setting; inference ignores it exactly as transformers does in eval mode.
  }
}

void uniform_layer_plan(ModelConfig* c, const std::vector<uint8_t>& moe, const AttentionPlan& attn,
                        const FfnPlan& ffn) {
  c->layers.assign(size_t(c->num_layers), LayerPlan{});
  for (int l = 0; l < c->num_layers; ++l) {
    LayerPlan& p = c->layers[size_t(l)];
    p.attn = attn;
    if (moe[size_t(l)]) {
      p.ffn = ffn;
      p.ffn.kind = FfnKind::Moe;
      p.ffn.width = c->moe_intermediate_size;
    } else {
      p.ffn.kind = FfnKind::Dense;
      p.ffn.width = c->intermediate_size;
    }
  }
}

void read_qwen_moe_config(const ConfigReader& r, ModelConfig* c) {
  read_common_config(r, c);
  c->num_experts = r.get_int_any({"num_experts", "num_local_experts"});
  c->experts_per_token = r.get_int("num_experts_per_tok");
  c->moe_intermediate_size = r.get_int("moe_intermediate_size");
  if (r.get_bool_or("use_sliding_window", false)) {
    r.bad("use_sliding_window", "true is not supported for " + c->model_type + " (published checkpoints set false)");
  }
}

std::vector<uint8_t> read_sparse_layers(const ConfigReader& r, const ModelConfig& c) {
  const int step = r.get_int_or("decoder_sparse_step", 1);
  if (step < 1) r.bad("decoder_sparse_step", "must be at least 1");
  const std::vector<int> dense = r.get_int_list_or("mlp_only_layers", {});
  for (int l : dense) {
    if (l < 0 || l >= c.num_layers) r.bad("mlp_only_layers", "layer " + std::to_string(l) + " does not exist");
  }
  std::vector<uint8_t> moe(size_t(c.num_layers), 0);
  for (int l = 0; l < c.num_layers; ++l) {
    const bool listed = std::find(dense.begin(), dense.end(), l) != dense.end();
    moe[size_t(l)] = !listed && c.num_experts > 0 && (l + 1) % step == 0;
  }
  return moe;
}

void read_layer_types(const ConfigReader& r, ModelConfig* c, int window) {
  if (!r.has("layer_types")) return;
  const json& v = r.root()["layer_types"];
  if (!v.is_array() || int(v.size()) != c->num_layers) {
    r.bad("layer_types",
          fmt::format("expected a list of {} strings (one per layer), got {}", c->num_layers, v.dump().substr(0, 200)));
  }
  for (int l = 0; l < c->num_layers; ++l) {
    const json& t = v[size_t(l)];
    const std::string type = t.is_string() ? t.get<std::string>() : t.dump();
    if (type == "full_attention") {
      c->layers[size_t(l)].attn.window = 0;
    } else if (type == "sliding_attention") {
      if (window <= 0)
        r.bad("layer_types", fmt::format("layer {} is sliding_attention but sliding_window is not set", l));
      c->layers[size_t(l)].attn.window = window;
    } else {
      r.bad("layer_types",
            fmt::format("entry {} '{}' is not supported (supported: full_attention, sliding_attention)", l, type));
    }
  }
}

FfnPlan read_group_moe(const ConfigReader& r, ModelConfig* c, const GroupMoeDefaults& d, std::vector<uint8_t>* moe) {
  c->num_experts = r.get_int_any({"n_routed_experts", "num_local_experts"});
  c->experts_per_token = r.get_int("num_experts_per_tok");
  c->moe_intermediate_size = r.get_int("moe_intermediate_size");
  c->stored_extra_layers = r.get_int_or("num_nextn_predict_layers", 0);
  if (c->stored_extra_layers < 0) r.bad("num_nextn_predict_layers", "must not be negative");
  const int first_dense = r.get_int_or("first_k_dense_replace", d.first_k_dense_replace);
  if (first_dense < 0 || first_dense > c->num_layers) {
    r.bad("first_k_dense_replace", std::to_string(first_dense) + " must be between 0 and num_hidden_layers");
  }
  FfnPlan ffn;
  ffn.router.gating = Gating::SigmoidGroupTopK;
  ffn.router.correction_bias = true;
  ffn.router.renormalize = r.get_bool_or("norm_topk_prob", true);
  ffn.router.n_group = r.get_int_or("n_group", d.n_group);
  ffn.router.topk_group = r.get_int_or("topk_group", d.topk_group);
  ffn.router.scale = float(r.get_double_or("routed_scaling_factor", d.routed_scaling_factor));
  const int shared = r.get_int_or("n_shared_experts", d.n_shared_experts);
  if (shared < 0) r.bad("n_shared_experts", "must not be negative");
  ffn.shared_width = shared * c->moe_intermediate_size;
  moe->assign(size_t(c->num_layers), 1);
  for (int l = 0; l < first_dense; ++l) (*moe)[size_t(l)] = 0;
  return ffn;
}

void finish_layer_plan(ModelConfig* c) {
  c->layer_has_experts.assign(c->layers.size(), 0);
  c->qk_norm = !c->layers.empty();
  c->sliding_window = c->layers.empty() ? 0 : c->layers[0].attn.window;
  for (size_t l = 0; l < c->layers.size(); ++l) {
    const LayerPlan& p = c->layers[l];
    c->layer_has_experts[l] = p.ffn.kind == FfnKind::Moe;
    if (p.ffn.kind == FfnKind::Moe) c->norm_topk_prob = p.ffn.router.renormalize;
    c->qk_norm = c->qk_norm && p.attn.qk_norm == QkNorm::PerHead;
  }
}

void validate_config(ModelConfig& c, const std::string& path) {
  auto need = [&](bool ok, const char* key, const std::string& what) {
    if (!ok) fail("{}: key '{}': {}", path, key, what);
  };
  need(c.vocab_size > 0, "vocab_size", "must be positive");
  need(c.hidden_size > 0, "hidden_size", "must be positive");
  need(c.num_layers > 0, "num_hidden_layers", "must be positive");
  need(c.num_heads > 0, "num_attention_heads", "must be positive");
  need(c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0, "num_key_value_heads",
       fmt::format("{} must be positive and divide num_attention_heads {}", c.num_kv_heads, c.num_heads));
  need(c.head_dim > 0 && c.head_dim % 2 == 0, "head_dim", fmt::format("{} must be positive and even", c.head_dim));
  need(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps > 0, "rms_norm_eps",
       fmt::format("{} must be a positive number", c.rms_norm_eps));
  need(c.num_experts > 0, "num_experts", "must be positive");
  need(c.experts_per_token > 0 && c.experts_per_token <= c.num_experts, "num_experts_per_tok",
       fmt::format("{} must be between 1 and the number of experts {}", c.experts_per_token, c.num_experts));
  need(c.moe_intermediate_size > 0, "moe_intermediate_size", "must be positive");
  need(int(c.layers.size()) == c.num_layers, "num_hidden_layers", "layer plan does not match");
  const int rot = c.rotary_dim();
  need(rot >= 2 && rot % 2 == 0 && rot <= c.head_dim, "partial_rotary_factor",
       fmt::format("gives {} rotary dimensions of head_dim {}: expected an even number from 2 to head_dim", rot,
                   c.head_dim));
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerPlan& p = c.layers[size_t(l)];
    need(p.attn.window >= 0, "sliding_window", "must not be negative");
    need(p.attn.clip_qkv >= 0, "clip_qkv", "must not be negative");
    if (p.ffn.kind == FfnKind::Dense) {
      need(c.intermediate_size > 0, "intermediate_size", "must be positive when some layers are dense");
      continue;
    }
    const RouterPlan& r = p.ffn.router;
    need(r.n_group >= 1 && c.num_experts % r.n_group == 0, "n_group",
         fmt::format("{} must be positive and divide the {} experts", r.n_group, c.num_experts));
    need(r.topk_group >= 1 && r.topk_group <= r.n_group, "topk_group",
         fmt::format("{} must be between 1 and n_group {}", r.topk_group, r.n_group));
    if (r.gating == Gating::SigmoidGroupTopK) {
      need(c.num_experts / r.n_group >= 2, "n_group",
           fmt::format("{} groups of {} experts: a group's score is its two best experts", r.n_group,
                       c.num_experts / r.n_group));
      need(c.experts_per_token <= r.topk_group * (c.num_experts / r.n_group), "num_experts_per_tok",
           fmt::format("{} is more than the {} experts of topk_group {} groups", c.experts_per_token,
                       r.topk_group * (c.num_experts / r.n_group), r.topk_group));
    }
    need(std::isfinite(r.scale) && r.scale > 0, "routed_scaling_factor", "must be a positive number");
    need(p.ffn.shared_width >= 0, "shared_expert_intermediate_size", "must not be negative");
    if (p.ffn.act == Activation::ClampedSwiGLU) {
      need(std::isfinite(p.ffn.swiglu_limit) && p.ffn.swiglu_limit > 0, "swiglu_limit", "must be positive");
    }
  }
  finish_layer_plan(&c);
}

}  // namespace seedling
