// model/model_config.cpp - config.json (and generation_config.json) of a model folder -> a checked ModelConfig.
// Apart from model.cpp so that what reads config.json builds without the weights and the forward (the config fuzz
// target, tests/fuzz/fuzz_config.cpp, compiles this file with the family readers only).
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/gguf.h"
#include "model/gguf_config.h"
#include "model/model.h"

namespace seedling {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) fail("{}: cannot open", path.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    fail("{}: not valid JSON: {}", path.string(), e.what());
  }
}

std::vector<KvLayerShape> cache_shapes(const ModelConfig& c) {
  std::vector<KvLayerShape> shapes(size_t(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    switch (c.plan(l).mixer) {
      case Mixer::Attention:
        shapes[size_t(l)] = {c.kv_dim(), c.kv_dim(), 0};
        break;
      case Mixer::GatedDeltaNet:
        shapes[size_t(l)] = {0, 0, c.plan(l).linear.state_floats()};
        break;
      case Mixer::Mla:  // the normalised latent and the rope key (model/mla.cpp)
        shapes[size_t(l)] = {c.plan(l).mla.cache_width(), 0, 0};
        break;
    }
  }
  return shapes;
}

bool folder_stores_tensor(const std::string& config_path, const std::string& tensor) {
  const fs::path dir = fs::path(config_path).parent_path();
  std::error_code ec;
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index, ec)) {
    const json j = read_json_file(index);
    return j.is_object() && j.contains("weight_map") && j["weight_map"].is_object() && j["weight_map"].contains(tensor);
  }
  if (!fs::is_directory(dir, ec)) return false;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".safetensors") continue;
    // The header only: its 8-byte little-endian length, then that much JSON (Checkpoint checks the rest).
    std::ifstream in(e.path(), std::ios::binary);
    unsigned char len[8] = {};
    if (!in.read(reinterpret_cast<char*>(len), 8)) continue;
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
    if (n == 0 || n > (uint64_t(1) << 30)) continue;
    std::string header(size_t(n), '\0');
    if (!in.read(header.data(), std::streamsize(n))) continue;
    const json h = json::parse(header, nullptr, /*allow_exceptions=*/false);
    if (h.is_object() && h.contains(tensor)) return true;
  }
  return false;
}

ModelConfig read_model_config(const std::string& dir, const Family** family_out) {
  const fs::path cfg_path = fs::path(dir) / "config.json";
  if (!fs::exists(dir)) fail("{}: no such model folder", dir);
  if (is_gguf_file(dir)) {  // its metadata, mapped onto a family (model/gguf_config.h)
    const GgufModel m = map_gguf_model(GgufFile(dir));
    if (family_out != nullptr) *family_out = m.family;
    return m.c;
  }
  if (!fs::is_directory(dir)) {
    fail("{}: a file, not a model folder (expected a Hugging Face folder with config.json, or a packed folder)", dir);
  }
  if (!fs::exists(cfg_path)) fail("{}: missing config.json (expected a Hugging Face model folder)", dir);
  const json j = read_json_file(cfg_path);
  if (!j.is_object()) fail("{}: expected a JSON object", cfg_path.string());
  const ConfigReader r(j, cfg_path.string());
  const std::string model_type = r.get_string_or("model_type", "");
  if (model_type.empty()) r.bad("model_type", "missing (a string naming the family is required)");
  const Family& family = family_for(model_type, cfg_path.string());
  ModelConfig c;
  c.model_type = model_type;
  family.read_config(r, &c);
  validate_config(c, cfg_path.string());
  const fs::path gen_path = fs::path(dir) / "generation_config.json";
  if (fs::exists(gen_path)) {
    const json g = read_json_file(gen_path);
    const ConfigReader gr(g, gen_path.string());
    c.eos_token_ids = gr.get_int_list_or("eos_token_id", c.eos_token_ids);
    c.bos_token_id = gr.get_int_or("bos_token_id", c.bos_token_id);
  }
  if (family_out != nullptr) *family_out = &family;
  return c;
}

}  // namespace seedling
