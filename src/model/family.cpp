#include "model/family.h"

#include "core/error.h"

namespace seedling {

extern const Family kQwen3MoeFamily;
extern const Family kMixtralFamily;

namespace {
const Family* const kFamilies[] = {&kQwen3MoeFamily, &kMixtralFamily};
}

LayerTensorNames llama_attention_names(const ModelConfig& c, const std::string& p) {
  LayerTensorNames n;
  n.attn_norm = p + "input_layernorm.weight";
  n.ffn_norm = p + "post_attention_layernorm.weight";
  n.q = p + "self_attn.q_proj.weight";
  n.k = p + "self_attn.k_proj.weight";
  n.v = p + "self_attn.v_proj.weight";
  n.o = p + "self_attn.o_proj.weight";
  if (c.attention_bias) {
    n.q_bias = p + "self_attn.q_proj.bias";
    n.k_bias = p + "self_attn.k_proj.bias";
    n.v_bias = p + "self_attn.v_proj.bias";
  }
  return n;
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
