// model/family.h - what a model family says: how it reads config.json and what its tensors are called.
//
// One file per family (qwen3_moe.cpp, mixtral.cpp) defines a Family and one line in family.cpp registers it.
// Families of the Llama-MoE shape (RMSNorm, rotary GQA attention, a softmax router over SwiGLU experts) share the
// forward pass in decoder.cpp and differ only in config keys, tensor names and the switches of ModelConfig.
#pragma once

#include <string>

#include "model/config.h"

namespace seedling {

struct LayerTensorNames {
  std::string attn_norm, ffn_norm;
  std::string q, k, v, o;                  // projections, (out_features, in_features)
  std::string q_bias, k_bias, v_bias;      // empty when the family has none
  std::string q_norm, k_norm;              // per-head RMSNorm weights, empty when absent
  std::string router;                      // (num_experts, hidden) for layers with experts
  std::string mlp_gate, mlp_up, mlp_down;  // dense SwiGLU MLP for layers without experts
};

struct ExpertTensorNames {
  std::string gate, up, down;  // gate/up: (moe_intermediate, hidden); down: (hidden, moe_intermediate)
};

struct Family {
  const char* model_type;
  void (*read_config)(const ConfigReader& r, ModelConfig* c);
  const char* embed;
  const char* final_norm;
  const char* lm_head;
  LayerTensorNames (*layer_names)(const ModelConfig& c, int layer);
  ExpertTensorNames (*expert_names)(int layer, int expert);
};

// Names of the Llama-style attention block under `prefix` ("model.layers.N."): input/post-attention norms and the
// q/k/v/o projections (with biases when c.attention_bias). Families fill in the rest.
LayerTensorNames llama_attention_names(const ModelConfig& c, const std::string& prefix);

// The family of `model_type`; an Error naming the config file and the value when there is none.
const Family& family_for(const std::string& model_type, const std::string& config_path);

}  // namespace seedling
