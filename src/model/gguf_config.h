// model/gguf_config.h - a GGUF file's architecture mapped onto a Seedling family, once (docs/formats/gguf.md).
//
// Each mapped `general.architecture` is one GgufArch: the family it is, and a function that writes the config.json
// that family reads from the file's `<arch>.*` metadata (and from which tensors the file holds, where llama.cpp
// decides by presence: the head, biases, q/k norms, dense layers). The family's own read_config and validate_config
// then run unchanged on that JSON, so a GGUF is held to every rule a Hugging Face folder is; their errors name the
// GGUF key the config key came from. Tensors are named by role here too (gguf_tensor_name): llama.cpp's
// `blk.N.attn_q.weight`, `token_embd.weight`, ..., and the stacked experts `blk.N.ffn_{gate,up,down}_exps.weight`
// ([E x I x H], ne0 first). model/gguf_source.cpp hands the tensors out by those names.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "model/config.h"
#include "model/family.h"

namespace seedling {

class ConfigWriter;

struct GgufArch {
  const char* arch;        // general.architecture
  const char* model_type;  // the family it runs as
  // The norm before the FFN, after "blk.N.": "ffn_norm" (most) or "post_attention_norm" (glm4moe, gpt-oss).
  const char* ffn_norm;
  // llama.cpp's convert_hf_to_gguf.py permuted q and k rows for its interleaved RoPE (LlamaModel.permute): the
  // mapping puts them back in the Hugging Face (half-split) order once, at load.
  bool permute_qk;
  // The config.json keys of the family, from the metadata and the tensors present.
  void (*config)(ConfigWriter& w);
};

// What a GGUF file runs as.
struct GgufModel {
  const GgufArch* arch = nullptr;
  const Family* family = nullptr;
  nlohmann::json config;  // the config.json the metadata stands for
  ModelConfig c;          // read and validated from it by the family
};

// Maps `g` onto its family; an Error naming the file and the key (or tensor) for an architecture not mapped, a
// required key missing, or a value the family refuses.
GgufModel map_gguf_model(const GgufFile& g);

// The GGUF name of the tensor of `role` in layer `layer` (-1 for embedding, final norm and head), or "" where the
// role has no single GGUF tensor (ExpertGateUpBias: gpt-oss stores gate and up biases apart, gguf_source.cpp joins
// them).
std::string gguf_tensor_name(const GgufArch& arch, Role role, int layer);
// The stacked expert tensors of a layer, gate, up, down: "blk.N.ffn_gate_exps.weight", ... ([E x I x H] and
// [E x H x I] as (rows, cols) per expert); and one expert's own tensor where a file stores them apart, as older
// llama conversions did ("blk.N.ffn_gate.E.weight").
std::string gguf_expert_name(int layer, int part, const char* suffix = "weight");
std::string gguf_single_expert_name(int layer, int expert, int part);

// The mapped architectures, in the order docs/formats/gguf.md lists them ("qwen3moe, llama (with experts), ...").
std::string gguf_archs_mapped();

// Builds the config.json of a family from GGUF metadata, remembering which GGUF key gave each config key (for
// error messages). Used by the GgufArch config functions.
class ConfigWriter {
 public:
  ConfigWriter(const GgufFile& g, std::string arch) : g_(g), arch_(std::move(arch)) {}
  const GgufFile& file() const { return g_; }
  const std::string& arch() const { return arch_; }
  nlohmann::json& json() { return j_; }
  // "<arch>.suffix".
  std::string key(const std::string& suffix) const { return arch_ + "." + suffix; }
  bool has(const std::string& suffix) const { return g_.has(key(suffix)); }
  bool has_tensor(const std::string& name) const { return g_.find_tensor(name) != nullptr; }

  // config[name] = the integer (or float, bool) at <arch>.suffix; the int versions check [min, max]. Missing: an
  // Error naming the file and the key (int, real), or nothing set (the _if versions).
  int64_t int_key(const char* name, const std::string& suffix, int64_t min = 0, int64_t max = INT32_MAX);
  bool int_key_if(const char* name, const std::string& suffix, int64_t min = 0, int64_t max = INT32_MAX);
  void real_key_if(const char* name, const std::string& suffix);
  void bool_key_if(const char* name, const std::string& suffix);
  // Records that config key `name` came from GGUF key `gguf_key` (set by the functions above).
  void from(const std::string& name, const std::string& gguf_key) { source_[name] = gguf_key; }
  const std::map<std::string, std::string>& sources() const { return source_; }

 private:
  const GgufFile& g_;
  std::string arch_;
  nlohmann::json j_ = nlohmann::json::object();
  std::map<std::string, std::string> source_;
};

}  // namespace seedling
