// model/model.cpp - loading: config.json -> ModelConfig, tensor names -> checked views into the mapped shards.
#include "model/model.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "experts/resident_experts.h"

namespace seedling {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_json_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) fail("{}: cannot open", path.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    fail("{}: not valid JSON: {}", path.string(), e.what());
  }
}

const TensorInfo& checked(const Checkpoint& ck, const std::string& name, std::vector<int64_t> shape) {
  const TensorInfo& t = ck.get(name);
  if (t.shape != shape) {
    TensorInfo want;
    want.shape = shape;
    fail("{}: tensor '{}' has shape {}, expected {} from config.json", t.file, name, t.shape_string(),
         want.shape_string());
  }
  if (t.dtype != DType::BF16 && t.dtype != DType::F16 && t.dtype != DType::F32) {
    fail("{}: tensor '{}' has dtype {}, expected BF16, F16 or F32", t.file, name, dtype_name(t.dtype));
  }
  return t;
}

ops::Matrix matrix(const Checkpoint& ck, const std::string& name, int64_t rows, int64_t cols) {
  const TensorInfo& t = checked(ck, name, {rows, cols});
  return ops::Matrix{t.dtype, t.data, rows, cols};
}

std::vector<float> vector_f32(const Checkpoint& ck, const std::string& name, int64_t n) {
  const TensorInfo& t = checked(ck, name, {n});
  const ops::Matrix m{t.dtype, t.data, 1, n};
  std::vector<float> out(size_t(n), 0.0f);
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = m.at(0, i);
  return out;
}

ops::Rope make_rope(const ModelConfig& c) {
  // As transformers computes it, in float32: inv_freq[i] = 1 / theta^(2i / d).
  ops::Rope rope;
  rope.rotary_dim = c.head_dim;
  for (int i = 0; i < c.head_dim / 2; ++i) {
    const float e = float(2 * i) / float(c.head_dim);
    float f = 1.0f / std::pow(float(c.rope.theta), e);
    if (c.rope.type == "linear") f = f / float(c.rope.factor);
    rope.inv_freq.push_back(f);
  }
  return rope;
}

}  // namespace

ModelConfig read_model_config(const std::string& dir, const Family** family_out) {
  const fs::path cfg_path = fs::path(dir) / "config.json";
  if (!fs::exists(dir)) fail("{}: no such model folder", dir);
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

std::unique_ptr<Model> Model::load(const std::string& dir) {
  auto m = std::unique_ptr<Model>(new Model());
  m->dir_ = dir;
  m->config_ = read_model_config(dir, &m->family_);
  m->checkpoint_ = std::make_unique<Checkpoint>(dir);
  const ModelConfig& c = m->config_;
  const Family& f = *m->family_;
  const Checkpoint& ck = *m->checkpoint_;
  const int64_t H = c.hidden_size, V = c.vocab_size;

  m->w_.embed = matrix(ck, f.embed, V, H);
  m->w_.final_norm = vector_f32(ck, f.final_norm, H);
  if (c.tie_word_embeddings && !ck.has(f.lm_head)) {
    m->w_.lm_head = m->w_.embed;
  } else {
    m->w_.lm_head = matrix(ck, f.lm_head, V, H);
  }
  std::vector<std::vector<ExpertWeights>> experts(size_t(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerTensorNames n = f.layer_names(c, l);
    LayerWeights& lw = m->w_.layers.emplace_back();
    lw.attn_norm = vector_f32(ck, n.attn_norm, H);
    lw.ffn_norm = vector_f32(ck, n.ffn_norm, H);
    lw.q = matrix(ck, n.q, c.q_dim(), H);
    lw.k = matrix(ck, n.k, c.kv_dim(), H);
    lw.v = matrix(ck, n.v, c.kv_dim(), H);
    lw.o = matrix(ck, n.o, H, c.q_dim());
    if (!n.q_bias.empty()) {
      lw.q_bias = vector_f32(ck, n.q_bias, c.q_dim());
      lw.k_bias = vector_f32(ck, n.k_bias, c.kv_dim());
      lw.v_bias = vector_f32(ck, n.v_bias, c.kv_dim());
    }
    if (c.qk_norm) {
      lw.q_norm = vector_f32(ck, n.q_norm, c.head_dim);
      lw.k_norm = vector_f32(ck, n.k_norm, c.head_dim);
    }
    lw.has_experts = c.layer_has_experts[size_t(l)] != 0;
    if (lw.has_experts) {
      lw.router = matrix(ck, n.router, c.num_experts, H);
      const int64_t I = c.moe_intermediate_size;
      for (int e = 0; e < c.num_experts; ++e) {
        const ExpertTensorNames en = f.expert_names(l, e);
        experts[size_t(l)].push_back(
            {matrix(ck, en.gate, I, H), matrix(ck, en.up, I, H), matrix(ck, en.down, H, I)});
        m->expert_dtype_ = experts[size_t(l)].back().gate.dtype;
      }
    } else {
      const int64_t I = c.intermediate_size;
      lw.mlp_gate = matrix(ck, n.mlp_gate, I, H);
      lw.mlp_up = matrix(ck, n.mlp_up, I, H);
      lw.mlp_down = matrix(ck, n.mlp_down, H, I);
    }
  }
  m->experts_ = std::make_unique<ResidentExperts>(std::move(experts));
  m->rope_ = make_rope(c);
  return m;
}

Model::Sizes Model::sizes() const {
  const ModelConfig& c = config_;
  Sizes s;
  auto count = [&](const ops::Matrix& x, bool active) {
    const int64_t n = x.rows * x.cols;
    s.total_params += n;
    if (active) {
      s.active_params += n;
      s.bytes_per_token += int64_t(x.nbytes());
    }
  };
  auto count_vec = [&](const std::vector<float>& v, int64_t bytes_each) {
    s.total_params += int64_t(v.size());
    s.active_params += int64_t(v.size());
    s.bytes_per_token += int64_t(v.size()) * bytes_each;
  };
  const int64_t elem = int64_t(dtype_size(w_.embed.dtype));
  // Embedding: all of it exists, one row is read per token.
  s.total_params += w_.embed.rows * w_.embed.cols;
  s.active_params += w_.embed.cols;
  s.bytes_per_token += w_.embed.cols * elem;
  if (w_.lm_head.data != w_.embed.data) {
    count(w_.lm_head, true);
  } else {
    s.bytes_per_token += int64_t(w_.lm_head.nbytes());  // tied: the head reads the whole matrix again
  }
  count_vec(w_.final_norm, elem);
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = w_.layers[size_t(l)];
    for (const auto* v : {&lw.attn_norm, &lw.ffn_norm, &lw.q_bias, &lw.k_bias, &lw.v_bias, &lw.q_norm, &lw.k_norm}) {
      count_vec(*v, elem);
    }
    for (const auto* x : {&lw.q, &lw.k, &lw.v, &lw.o}) count(*x, true);
    if (lw.has_experts) {
      count(lw.router, true);
      const int64_t per_expert = 3 * int64_t(c.moe_intermediate_size) * c.hidden_size;
      s.total_params += per_expert * c.num_experts;
      s.expert_params += per_expert * c.num_experts;
      s.active_params += per_expert * c.experts_per_token;
      s.bytes_per_token += per_expert * c.experts_per_token * int64_t(dtype_size(expert_dtype_));
    } else {
      for (const auto* x : {&lw.mlp_gate, &lw.mlp_up, &lw.mlp_down}) count(*x, true);
    }
  }
  return s;
}

}  // namespace seedling
