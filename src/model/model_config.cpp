// model/model_config.cpp - config.json (and generation_config.json) of a model folder -> a checked ModelConfig.
// Apart from model.cpp so that what reads config.json builds without the weights and the forward (the config fuzz
// target, tests/fuzz/fuzz_config.cpp, compiles this file with the family readers only).
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/gguf.h"
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
      case Mixer::Mla:  // the normalised latent and the rope key (model/mla.cpp)
        shapes[size_t(l)] = {c.plan(l).mla.cache_width(), 0, 0};
        break;
    }
  }
  return shapes;
}

ModelConfig read_model_config(const std::string& dir, const Family** family_out) {
  const fs::path cfg_path = fs::path(dir) / "config.json";
  if (!fs::exists(dir)) fail("{}: no such model folder", dir);
  refuse_gguf_model(dir);
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
