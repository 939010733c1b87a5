// model/model.cpp - loading: config.json -> ModelConfig, tensor names -> checked views into the mapped shards
// of a Hugging Face folder or the mapped files of a packed folder, through one WeightSource interface.
#include "model/model.h"

#include <array>
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

// One stored tensor as a weight source hands it out: its codec, bytes and shape, and where it came from.
struct WeightView {
  Codec codec = Codec::F32;
  const void* data = nullptr;
  std::vector<int64_t> shape;
  std::string file;  // for error messages
};

// Where the weights of a model come from: a Hugging Face checkpoint or a packed folder. Model::load asks by
// tensor name and does every shape check itself, so both sources are held to the same rules.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool has(const std::string& name) const = 0;
  virtual WeightView get(const std::string& name) const = 0;
  // gate, up, down of one routed expert (names as the family gives them).
  virtual std::array<WeightView, 3> expert(int layer, int expert, const ExpertTensorNames& n) const = 0;
  // The default provider over the experts table built from expert() views.
  virtual std::unique_ptr<ExpertProvider> resident_experts(std::vector<std::vector<ExpertWeights>> table) = 0;
};

class CheckpointSource final : public WeightSource {
 public:
  explicit CheckpointSource(const Checkpoint& ck) : ck_(ck) {}
  bool has(const std::string& name) const override { return ck_.has(name); }
  WeightView get(const std::string& name) const override {
    const TensorInfo& t = ck_.get(name);
    const std::optional<Codec> c = codec_of_dtype(t.dtype);
    if (!c) fail("{}: tensor '{}' has dtype {}, expected BF16, F16 or F32", t.file, name, dtype_name(t.dtype));
    return {*c, t.data, t.shape, t.file};
  }
  std::array<WeightView, 3> expert(int, int, const ExpertTensorNames& n) const override {
    return {get(n.gate), get(n.up), get(n.down)};
  }
  std::unique_ptr<ExpertProvider> resident_experts(std::vector<std::vector<ExpertWeights>> table) override {
    return std::make_unique<ResidentExperts>(std::move(table));
  }

 private:
  const Checkpoint& ck_;
};

class PackedSource final : public WeightSource {
 public:
  explicit PackedSource(std::shared_ptr<const PackedModel> pm)
      : pm_(std::move(pm)), experts_(ResidentExperts::from_packed(pm_)) {}
  bool has(const std::string& name) const override { return pm_->has(name); }
  WeightView get(const std::string& name) const override {
    const PackedTensor& t = pm_->tensor(name);
    return {t.codec, t.data, t.shape, pm_->dir() + "/resident.bin"};
  }
  std::array<WeightView, 3> expert(int layer, int e, const ExpertTensorNames& n) const override {
    if (!pm_->layer_has_experts(layer) || e >= pm_->num_experts(layer)) {
      fail("{}/manifest.json: layer {} has no expert {} (config.json asks for it)", pm_->dir(), layer, e);
    }
    const ExpertWeights& w = experts_->table()[size_t(layer)][size_t(e)];
    const std::string& file = pm_->expert_blob(layer, e).file;
    auto view = [&](const ops::Matrix& m) { return WeightView{m.codec, m.data, {m.rows, m.cols}, file}; };
    return {view(w.gate), view(w.up), view(w.down)};
  }
  std::unique_ptr<ExpertProvider> resident_experts(std::vector<std::vector<ExpertWeights>>) override {
    return std::move(experts_);  // the same views, with checksums on first use
  }

 private:
  std::shared_ptr<const PackedModel> pm_;
  std::unique_ptr<ResidentExperts> experts_;
};

std::string shape_string(const std::vector<int64_t>& shape) {
  TensorInfo t;
  t.shape = shape;
  return t.shape_string();
}

const WeightView& checked(const WeightView& t, const std::string& name, const std::vector<int64_t>& shape) {
  if (t.shape != shape) {
    fail("{}: tensor '{}' has shape {}, expected {} from config.json", t.file, name, shape_string(t.shape),
         shape_string(shape));
  }
  return t;
}

ops::Matrix matrix(const WeightView& t, const std::string& name, int64_t rows, int64_t cols) {
  checked(t, name, {rows, cols});
  return ops::Matrix{t.codec, t.data, rows, cols};
}

ops::Matrix matrix(const WeightSource& src, const std::string& name, int64_t rows, int64_t cols) {
  return matrix(src.get(name), name, rows, cols);
}

// Norms and biases: exact floats only (a quantized norm would be a packing bug).
std::vector<float> vector_f32(const WeightSource& src, const std::string& name, int64_t n,
                              int64_t* elem_bytes = nullptr) {
  const WeightView t = src.get(name);
  checked(t, name, {n});
  if (!codec_is_float(t.codec))
    fail("{}: tensor '{}' is stored as {}, expected f32, f16 or bf16", t.file, name, codec_name(t.codec));
  const ops::Matrix m{t.codec, t.data, 1, n};
  std::vector<float> out(size_t(n), 0.0f);
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = m.at(0, i);
  if (elem_bytes != nullptr) *elem_bytes = int64_t(codec_block_bytes(t.codec));
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
  std::unique_ptr<WeightSource> source;
  if (is_packed_model_dir(dir)) {
    m->packed_ = PackedModel::open(dir);
    if (m->packed_->config() != read_json_file(fs::path(dir) / "config.json")) {
      fail("{}/manifest.json: key 'config' differs from {}/config.json", dir, dir);
    }
    source = std::make_unique<PackedSource>(m->packed_);
  } else {
    m->checkpoint_ = std::make_unique<Checkpoint>(dir);
    source = std::make_unique<CheckpointSource>(*m->checkpoint_);
  }
  const WeightSource& src = *source;
  const ModelConfig& c = m->config_;
  const Family& f = *m->family_;
  const int64_t H = c.hidden_size, V = c.vocab_size;

  m->w_.embed = matrix(src, f.embed, V, H);
  m->w_.final_norm = vector_f32(src, f.final_norm, H, &m->norm_elem_bytes_);
  if (c.tie_word_embeddings && !src.has(f.lm_head)) {
    m->w_.lm_head = m->w_.embed;
  } else {
    m->w_.lm_head = matrix(src, f.lm_head, V, H);
  }
  std::vector<std::vector<ExpertWeights>> experts(size_t(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerTensorNames n = f.layer_names(c, l);
    LayerWeights& lw = m->w_.layers.emplace_back();
    lw.attn_norm = vector_f32(src, n.attn_norm, H);
    lw.ffn_norm = vector_f32(src, n.ffn_norm, H);
    lw.q = matrix(src, n.q, c.q_dim(), H);
    lw.k = matrix(src, n.k, c.kv_dim(), H);
    lw.v = matrix(src, n.v, c.kv_dim(), H);
    lw.o = matrix(src, n.o, H, c.q_dim());
    if (!n.q_bias.empty()) {
      lw.q_bias = vector_f32(src, n.q_bias, c.q_dim());
      lw.k_bias = vector_f32(src, n.k_bias, c.kv_dim());
      lw.v_bias = vector_f32(src, n.v_bias, c.kv_dim());
    }
    if (c.qk_norm) {
      lw.q_norm = vector_f32(src, n.q_norm, c.head_dim);
      lw.k_norm = vector_f32(src, n.k_norm, c.head_dim);
    }
    lw.has_experts = c.layer_has_experts[size_t(l)] != 0;
    if (lw.has_experts) {
      lw.router = matrix(src, n.router, c.num_experts, H);
      const int64_t I = c.moe_intermediate_size;
      for (int e = 0; e < c.num_experts; ++e) {
        const ExpertTensorNames en = f.expert_names(l, e);
        const std::array<WeightView, 3> v = source->expert(l, e, en);
        ExpertWeights w{matrix(v[0], en.gate, I, H), matrix(v[1], en.up, I, H), matrix(v[2], en.down, H, I)};
        m->expert_bytes_ = int64_t(w.gate.nbytes() + w.up.nbytes() + w.down.nbytes());
        experts[size_t(l)].push_back(w);
      }
    } else {
      const int64_t I = c.intermediate_size;
      lw.mlp_gate = matrix(src, n.mlp_gate, I, H);
      lw.mlp_up = matrix(src, n.mlp_up, I, H);
      lw.mlp_down = matrix(src, n.mlp_down, H, I);
    }
  }
  if (m->packed_ != nullptr) {
    for (int l = 0; l < m->packed_->num_layers(); ++l) {
      if (m->packed_->layer_has_experts(l) && (l >= c.num_layers || !c.layer_has_experts[size_t(l)])) {
        fail("{}/manifest.json: layer {} has experts that config.json does not", dir, l);
      }
      if (m->packed_->layer_has_experts(l) && m->packed_->num_experts(l) != c.num_experts) {
        fail("{}/manifest.json: layer {} has {} experts, config.json says {}", dir, l, m->packed_->num_experts(l),
             c.num_experts);
      }
    }
  }
  m->experts_ = source->resident_experts(std::move(experts));
  m->rope_ = make_rope(c);
  return m;
}

const Checkpoint& Model::checkpoint() const {
  if (checkpoint_ == nullptr) fail("{}: a packed folder has no Hugging Face checkpoint", dir_);
  return *checkpoint_;
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
  const int64_t elem = norm_elem_bytes_;
  // Embedding: all of it exists, one row is read per token.
  s.total_params += w_.embed.rows * w_.embed.cols;
  s.active_params += w_.embed.cols;
  s.bytes_per_token += int64_t(w_.embed.row_bytes());
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
      s.bytes_per_token += expert_bytes_ * c.experts_per_token;
    } else {
      for (const auto* x : {&lw.mlp_gate, &lw.mlp_up, &lw.mlp_down}) count(*x, true);
    }
  }
  return s;
}

}  // namespace seedling
