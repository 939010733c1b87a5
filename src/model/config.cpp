#include "model/config.h"

#include "core/error.h"

namespace seedling {

using nlohmann::json;

bool ConfigReader::has(const std::string& key) const {
  return j_.contains(key) && !j_[key].is_null();
}

void ConfigReader::bad(const std::string& key, const std::string& what) const {
  fail("{}: key '{}': {}", path_, key, what);
}

int ConfigReader::get_int(const std::string& key) const {
  if (!has(key)) bad(key, "missing (an integer is required)");
  const json& v = j_[key];
  if (!v.is_number_integer()) bad(key, "expected an integer, got " + v.dump());
  const int64_t x = v.get<int64_t>();
  if (x < INT32_MIN || x > INT32_MAX) bad(key, "value " + v.dump() + " out of range");
  return int(x);
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
  if (v.is_number_integer()) return {v.get<int>()};
  if (!v.is_array()) bad(key, "expected a list of integers, got " + v.dump());
  std::vector<int> out;
  for (const auto& e : v) {
    if (!e.is_number_integer()) bad(key, "expected a list of integers, got " + v.dump());
    out.push_back(e.get<int>());
  }
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
    if (type == "linear") {
      if (!scaling->contains("factor") || !(*scaling)["factor"].is_number()) {
        r.bad(where + ".factor", "linear rope scaling needs a numeric factor");
      }
      rope.factor = (*scaling)["factor"].get<double>();
      if (!(rope.factor > 0)) r.bad(where + ".factor", "must be positive");
    } else if (type != "default") {
      r.bad(where + ".rope_type", "'" + type + "' is not supported (supported: default, linear)");
    }
    rope.type = type;
  }
  if (!(rope.theta > 0)) r.bad("rope_theta", "must be positive");
  return rope;
}

}  // namespace

void read_common_config(const ConfigReader& r, ModelConfig* c) {
  c->vocab_size = r.get_int("vocab_size");
  c->hidden_size = r.get_int("hidden_size");
  c->num_layers = r.get_int("num_hidden_layers");
  c->num_heads = r.get_int("num_attention_heads");
  c->num_kv_heads = r.get_int_or("num_key_value_heads", c->num_heads);
  c->head_dim = r.get_int_or("head_dim", c->num_heads > 0 ? c->hidden_size / c->num_heads : 0);
  c->intermediate_size = r.get_int_or("intermediate_size", 0);
  c->rms_norm_eps = float(r.get_double_or("rms_norm_eps", 1e-6));
  c->tie_word_embeddings = r.get_bool_or("tie_word_embeddings", false);
  c->attention_bias = r.get_bool_or("attention_bias", false);
  c->max_position_embeddings = r.get_int_or("max_position_embeddings", 4096);
  c->rope = read_rope(r);
  const std::string act = r.get_string_or("hidden_act", "silu");
  if (act != "silu") r.bad("hidden_act", "'" + act + "' is not supported (supported: silu)");
  c->dtype = r.get_string_or("dtype", r.get_string_or("torch_dtype", ""));
  c->bos_token_id = r.get_int_or("bos_token_id", -1);
  c->eos_token_ids = r.get_int_list_or("eos_token_id", {});
  if (r.get_double_or("attention_dropout", 0.0) != 0.0) {
    // Dropout is a training setting; inference ignores it exactly as transformers does in eval mode.
  }
}

void validate_config(const ModelConfig& c, const std::string& path) {
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
  need(c.num_experts > 0, "num_experts", "must be positive");
  need(c.experts_per_token > 0 && c.experts_per_token <= c.num_experts, "num_experts_per_tok",
       fmt::format("{} must be between 1 and the number of experts {}", c.experts_per_token, c.num_experts));
  need(c.moe_intermediate_size > 0, "moe_intermediate_size", "must be positive");
  need(c.sliding_window >= 0, "sliding_window", "must not be negative");
  need(int(c.layer_has_experts.size()) == c.num_layers, "num_hidden_layers", "layer plan does not match");
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.layer_has_experts[size_t(l)]) {
      need(c.intermediate_size > 0, "intermediate_size", "must be positive when some layers are dense");
    }
  }
}

}  // namespace seedling
