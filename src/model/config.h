// model/config.h - the typed configuration of a decoder-only MoE model, read from a checkpoint's config.json.
//
// Each family file (qwen3_moe.cpp, mixtral.cpp, ...) fills this from its own keys; everything downstream reads
// only this struct. Both config dialects on the Hub are accepted: transformers 4.x (`rope_theta`, `rope_scaling`,
// `num_experts`, `torch_dtype`) and 5.x (`rope_parameters`, `num_local_experts`, `dtype`). A value we cannot run
// is an Error naming the key and the value, never a silent default.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace seedling {

struct RopeConfig {
  std::string type = "default";  // default | linear
  double theta = 10000.0;
  double factor = 1.0;  // linear: positions divided by factor
};

struct ModelConfig {
  std::string model_type;
  int vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int intermediate_size = 0;  // width of the dense MLP of layers without experts
  int num_experts = 0;
  int experts_per_token = 0;
  int moe_intermediate_size = 0;           // width of one routed expert
  bool norm_topk_prob = true;              // renormalise the top-k routing weights to sum to 1
  std::vector<uint8_t> layer_has_experts;  // [num_layers]
  bool qk_norm = false;                    // RMSNorm over each head of q and k (Qwen3)
  bool attention_bias = false;
  bool tie_word_embeddings = false;
  float rms_norm_eps = 1e-6f;
  RopeConfig rope;
  int sliding_window = 0;  // 0: full causal attention; else each query sees the last `sliding_window` positions
  int max_position_embeddings = 0;
  std::string dtype;  // as stated by config.json (informational)
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;

  int q_dim() const { return num_heads * head_dim; }
  int kv_dim() const { return num_kv_heads * head_dim; }
};

// Reads typed values from a config.json object; every failure names the file and the key.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {}

  const nlohmann::json& root() const { return j_; }
  const std::string& path() const { return path_; }
  bool has(const std::string& key) const;  // present and not null

  int get_int(const std::string& key) const;
  int get_int_or(const std::string& key, int fallback) const;
  double get_double(const std::string& key) const;
  double get_double_or(const std::string& key, double fallback) const;
  bool get_bool_or(const std::string& key, bool fallback) const;
  std::string get_string_or(const std::string& key, const std::string& fallback) const;
  std::vector<int> get_int_list_or(const std::string& key, const std::vector<int>& fallback) const;
  // The first key of `keys` that is present (for renamed keys such as num_experts / num_local_experts).
  int get_int_any(std::initializer_list<const char*> keys) const;

  [[noreturn]] void bad(const std::string& key, const std::string& what) const;

 private:
  const nlohmann::json& j_;
  std::string path_;
};

// Fields every llama-style family shares: sizes, heads, norms, rope (both dialects), activation, dtype, ids.
void read_common_config(const ConfigReader& r, ModelConfig* c);
// Checks sizes are positive and consistent (heads divide, top-k <= experts, ...).
void validate_config(const ModelConfig& c, const std::string& path);

}  // namespace seedling
