// model/model.cpp - loading: config.json -> ModelConfig, tensor names -> checked views into the mapped shards
// of a Hugging Face folder or the mapped files of a packed folder, through one WeightSource interface.
#include "model/model.h"

#include <array>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "experts/resident_experts.h"
#include "model/expert_parts.h"
#include "model/gguf_source.h"
#include "model/mla.h"
#include "model/weight_source.h"

namespace seedling {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

class CheckpointSource final : public WeightSource {
 public:
  CheckpointSource(const Checkpoint& ck, int num_experts, std::vector<std::vector<uint8_t>>* owned, Fp8Blocks fp8)
      : ck_(ck), num_experts_(num_experts), owned_(owned), fp8_(fp8) {}
  bool has(const std::string& name) const override { return ck_.has(name); }
  WeightView get(const std::string& name) const override {
    const TensorInfo& t = ck_.get(name);
    if (t.dtype == DType::F8_E4M3) {  // FP8 + its block scales, into fp8_g32 (model/fp8_weights.h)
      return {Codec::FP8_G32, read_fp8_matrix(ck_, t, fp8_, owned_).data, t.shape, t.file};
    }
    return {stored_float_codec(t), t.data, t.shape, t.file};
  }
  ExpertWeights expert(int, int, const ExpertParts& p, int64_t I, int64_t H) const override {
    return {read_expert_part(ck_, p[0], num_experts_, I, H, owned_, fp8_),
            read_expert_part(ck_, p[1], num_experts_, I, H, owned_, fp8_),
            read_expert_part(ck_, p[2], num_experts_, H, I, owned_, fp8_)};
  }
  std::unique_ptr<ExpertProvider> resident_experts(std::vector<std::vector<ExpertWeights>> table) override {
    return std::make_unique<ResidentExperts>(std::move(table));
  }

 private:
  const Checkpoint& ck_;
  int num_experts_;
  std::vector<std::vector<uint8_t>>* owned_;
  Fp8Blocks fp8_;
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
  ExpertWeights expert(int layer, int e, const ExpertParts&, int64_t I, int64_t H) const override {
    if (!pm_->layer_has_experts(layer) || e >= pm_->num_experts(layer)) {
      fail("{}/manifest.json: layer {} has no expert {} (config.json asks for it)", pm_->dir(), layer, e);
    }
    const ExpertWeights& w = experts_->table()[size_t(layer)][size_t(e)];
    const std::string& file = pm_->expert_blob(layer, e).file;
    const char* part_names[3] = {"gate", "up", "down"};
    const ops::Matrix* parts[3] = {&w.gate, &w.up, &w.down};
    const int64_t shapes[3][2] = {{I, H}, {I, H}, {H, I}};
    for (int p = 0; p < 3; ++p) {
      if (parts[p]->rows != shapes[p][0] || parts[p]->cols != shapes[p][1]) {
        fail("{}: layer {} expert {} part {} is {} x {}, expected {} x {} from config.json", file, layer, e,
             part_names[p], parts[p]->rows, parts[p]->cols, shapes[p][0], shapes[p][1]);
      }
    }
    return w;
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

// Norms and biases: exact floats only (a quantized norm would be a packing bug), read whole (any shape) in order.
std::vector<float> vector_f32(const WeightSource& src, const std::string& name, const std::vector<int64_t>& shape,
                              int64_t* elem_bytes = nullptr) {
  const WeightView t = src.get(name);
  checked(t, name, shape);
  if (!codec_is_float(t.codec))
    fail("{}: tensor '{}' is stored as {}, expected f32, f16 or bf16", t.file, name, codec_name(t.codec));
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const ops::Matrix m{t.codec, t.data, 1, n};
  std::vector<float> out(size_t(n), 0.0f);
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = m.at(0, i);
  if (elem_bytes != nullptr) *elem_bytes = int64_t(codec_block_bytes(t.codec));
  return out;
}

ops::Rope make_rope(const ModelConfig& c) {
  // As transformers computes it, in float32: inv_freq[i] = 1 / theta^(2i / d) over the d rotary dimensions.
  const RopeConfig& rc = c.rope;
  ops::Rope rope;
  const int d = c.rotary_dim();
  rope.rotary_dim = d;
  for (int i = 0; i < d / 2; ++i) {
    const float e = float(2 * i) / float(d);
    float f = 1.0f / std::pow(float(rc.theta), e);
    if (rc.type == "linear") f = f / float(rc.factor);
    rope.inv_freq.push_back(f);
  }
  if (rc.type != "yarn") return rope;
  // YaRN (transformers' _compute_yarn_parameters): frequencies past beta_slow rotations over the original context
  // are interpolated (divided by factor), those under beta_fast kept, a linear ramp between; cos and sin scaled.
  const double pi = 3.14159265358979323846;
  auto correction_dim = [&](double rotations) {
    return (double(d) * std::log(double(rc.original_max_position_embeddings) / (rotations * 2 * pi))) /
           (2 * std::log(rc.theta));
  };
  double low = correction_dim(rc.beta_fast), high = correction_dim(rc.beta_slow);
  if (rc.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(d - 1));
  if (low == high) high += 0.001;
  for (int i = 0; i < d / 2; ++i) {
    const float pos_freq = std::pow(float(rc.theta), float(2 * i) / float(d));
    const float extrapolation = 1.0f / pos_freq, interpolation = 1.0f / (float(rc.factor) * pos_freq);
    const float ramp = std::clamp((float(i) - float(low)) / (float(high) - float(low)), 0.0f, 1.0f);
    const float keep = 1.0f - ramp;  // weight of the unscaled frequency
    rope.inv_freq[size_t(i)] = interpolation * (1.0f - keep) + extrapolation * keep;
  }
  auto mscale = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
  double factor = rc.attention_factor;
  if (factor == 0.0) {
    factor = rc.mscale != 0.0 && rc.mscale_all_dim != 0.0
                 ? mscale(rc.factor, rc.mscale) / mscale(rc.factor, rc.mscale_all_dim)
                 : mscale(rc.factor, 1.0);
  }
  rope.attention_scaling = float(factor);
  return rope;
}

// A checkpoint whose tensors name layers past num_hidden_layers (and past the layers it may store unrun, such as
// multi-token-prediction ones) would run with those layers silently dropped: an Error naming the tensor.
void check_no_layer_dropped(const Checkpoint& ck, const ModelConfig& c, const std::string& dir) {
  const std::string prefix = "model.layers.";
  for (const auto& [name, t] : ck.all()) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t end = name.find('.', prefix.size());
    if (end == std::string::npos) continue;
    int64_t layer = 0;
    for (size_t i = prefix.size(); i < end; ++i) {
      if (name[i] < '0' || name[i] > '9' || layer > (int64_t(1) << 31)) {
        layer = -1;
        break;
      }
      layer = layer * 10 + (name[i] - '0');
    }
    if (layer >= int64_t(c.num_layers) + c.stored_extra_layers) {
      fail(
          "{}: tensor '{}' belongs to layer {}, but config.json's num_hidden_layers is {}{}: the checkpoint has "
          "layers the config would drop",
          dir, name, layer, c.num_layers,
          c.stored_extra_layers > 0 ? fmt::format(" (+ {} stored unrun)", c.stored_extra_layers) : "");
    }
  }
}

// The norms a zero-centred RMSNorm scales by (1 + weight) (ModelConfig::norm_weight_offset); not the gated norm.
bool offset_norm(Role r) {
  return r == Role::AttnNorm || r == Role::FfnNorm || r == Role::QNorm || r == Role::KNorm || r == Role::FinalNorm;
}

// A tensor a layer's mixer needs that the checkpoint lacks, in a model whose config picks each layer's mixer
// (layer_types): when the checkpoint holds the other mixer's tensors for that layer, the key is what is wrong.
void check_present(const WeightSource& src, const ModelConfig& c, const Family& f, const TensorSpec& t,
                   const std::string& dir) {
  if (src.has(t.name) || t.layer < 0) return;
  bool hybrid = false;
  for (const LayerPlan& p : c.layers) hybrid = hybrid || p.mixer == Mixer::GatedDeltaNet;
  if (!hybrid) return;  // the source's own error names the tensor
  const LayerNames n = f.layer_names(c, t.layer);
  const bool linear = c.plan(t.layer).mixer == Mixer::GatedDeltaNet;
  const std::string& other = linear ? n.q : n.linear_conv;
  const char* kind = linear ? "linear_attention" : "full_attention";
  if (!other.empty() && src.has(other)) {
    fail(
        "{}: no tensor '{}', which layer {} needs as a {} layer by config.json's key 'layer_types', but '{}' is "
        "there: the key does not match the stored tensors",
        dir, t.name, t.layer, kind, other);
  }
  fail("{}: no tensor '{}' (layer {}, a {} layer by config.json's key 'layer_types', needs it)", dir, t.name, t.layer,
       kind);
}

// A resident tensor into the member of LayerWeights its role names.
void load_tensor(const WeightSource& src, const ModelConfig& c, const TensorSpec& t, LayerWeights* lw) {
  const LayerWeights::Slot slot = lw->slot(t.role);
  if (slot.matrix != nullptr) {
    *slot.matrix = matrix(src, t.name, t.shape[0], t.shape[1]);
    return;
  }
  if (t.role == Role::LinearConv) {  // a kernel other than the config's: say which key it disagrees with
    const WeightView v = src.get(t.name);
    if (v.shape.size() == 3 && v.shape[0] == t.shape[0] && v.shape[1] == 1 && v.shape[2] != t.shape[2]) {
      fail("{}: tensor '{}' has a conv kernel of {}, but config.json's key 'linear_conv_kernel_dim' is {}", v.file,
           t.name, v.shape[2], t.shape[2]);
    }
  }
  *slot.vector = vector_f32(src, t.name, t.shape);
  if (offset_norm(t.role) && c.norm_weight_offset != 0.0f) {
    for (float& w : *slot.vector) w = w + c.norm_weight_offset;
  }
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& dir) {
  auto m = std::unique_ptr<Model>(new Model());
  m->dir_ = dir;
  std::unique_ptr<WeightSource> source;
  if (is_gguf_file(dir)) {  // model/gguf_config.h: the architecture mapped onto its family
    m->gguf_ = std::make_shared<const GgufFile>(dir);
    const GgufModel gm = map_gguf_model(*m->gguf_);
    m->config_ = gm.c;
    m->family_ = gm.family;
    source = make_gguf_source(*m->gguf_, gm, &m->rearranged_);
  } else if (is_packed_model_dir(dir)) {
    m->config_ = read_model_config(dir, &m->family_);
    m->packed_ = PackedModel::open(dir);
    if (m->packed_->config() != read_json_file(fs::path(dir) / "config.json")) {
      fail("{}/manifest.json: key 'config' differs from {}/config.json", dir, dir);
    }
    source = std::make_unique<PackedSource>(m->packed_);
  } else {
    m->config_ = read_model_config(dir, &m->family_);
    m->checkpoint_ = std::make_unique<Checkpoint>(dir);
    source = std::make_unique<CheckpointSource>(*m->checkpoint_, m->config_.num_experts, &m->rearranged_,
                                                Fp8Blocks{m->config_.fp8_block_rows, m->config_.fp8_block_cols});
    check_no_layer_dropped(*m->checkpoint_, m->config_, dir);
  }
  const WeightSource& src = *source;
  const ModelConfig& c = m->config_;
  const Family& f = *m->family_;
  const int64_t H = c.hidden_size, V = c.vocab_size;

  m->w_.embed = matrix(src, f.embed, V, H);
  m->w_.final_norm = vector_f32(src, f.final_norm, {H}, &m->norm_elem_bytes_);
  for (float& w : m->w_.final_norm) w = w + c.norm_weight_offset;
  if (c.tie_word_embeddings && !src.has(f.lm_head)) {
    m->w_.lm_head = m->w_.embed;
  } else {
    m->w_.lm_head = matrix(src, f.lm_head, V, H);
  }
  std::vector<std::vector<ExpertWeights>> experts(size_t(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights& lw = m->w_.layers.emplace_back();
    for (const TensorSpec& t : layer_tensors(c, f, l)) {
      check_present(src, c, f, t, dir);
      load_tensor(src, c, t, &lw);
    }
    if (c.plan(l).mixer == Mixer::Mla) lw.mla_k_absorb = mla_absorbed_keys(lw.mla_kv_b, c.num_heads, c.plan(l).mla);
    lw.has_experts = c.has_experts(l);
    if (!lw.has_experts) continue;
    const int64_t I = c.plan(l).ffn.width;
    for (int e = 0; e < c.num_experts; ++e) {
      const ExpertWeights w = source->expert(l, e, f.expert_parts(c, l, e), I, H);
      m->expert_bytes_ = int64_t(w.gate.nbytes() + w.up.nbytes() + w.down.nbytes());
      experts[size_t(l)].push_back(w);
    }
    if (c.plan(l).ffn.expert_bias) {  // (E, 2I) as stored -> gate and up rows as the parts lay them out
      const ExpertParts parts = f.expert_parts(c, l, 0);
      const std::vector<float> gate_up = std::move(lw.expert_gate_bias);
      lw.expert_gate_bias = expert_part_rows(gate_up, parts[0], c.num_experts, I);
      lw.expert_up_bias = expert_part_rows(gate_up, parts[1], c.num_experts, I);
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
  source->finish();
  m->experts_ = source->resident_experts(std::move(experts));
  m->rope_ = make_rope(c);
  return m;
}

const Checkpoint& Model::checkpoint() const {
  if (checkpoint_ == nullptr) {
    fail("{}: a {} has no Hugging Face checkpoint", dir_, gguf_ != nullptr ? "GGUF file" : "packed folder");
  }
  return *checkpoint_;
}

Model::Sizes Model::sizes() const {
  const ModelConfig& c = config_;
  Sizes s;
  // Every resident tensor is read by every token, except the routed experts' stacked biases (k rows of E).
  auto count = [&](int64_t n, int64_t bytes, double active_share) {
    s.total_params += n;
    s.active_params += int64_t(double(n) * active_share);
    s.bytes_per_token += int64_t(double(bytes) * active_share);
  };
  const int64_t elem = norm_elem_bytes_;
  // Embedding: all of it exists, one row is read per token.
  s.total_params += w_.embed.rows * w_.embed.cols;
  s.active_params += w_.embed.cols;
  s.bytes_per_token += int64_t(w_.embed.row_bytes());
  if (w_.lm_head.data != w_.embed.data) {
    count(w_.lm_head.rows * w_.lm_head.cols, int64_t(w_.lm_head.nbytes()), 1.0);
  } else {
    s.bytes_per_token += int64_t(w_.lm_head.nbytes());  // tied: the head reads the whole matrix again
  }
  count(int64_t(w_.final_norm.size()), int64_t(w_.final_norm.size()) * elem, 1.0);
  for (int l = 0; l < c.num_layers; ++l) {
    for (const TensorSpec& t : layer_tensors(c, *family_, l)) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      const bool stacked = t.role == Role::ExpertGateUpBias || t.role == Role::ExpertDownBias;
      const double share = stacked ? double(c.experts_per_token) / double(c.num_experts) : 1.0;
      if (const ops::Matrix* m = w_.layers[size_t(l)].matrix_of(t.role)) {
        count(n, int64_t(m->nbytes()), share);
      } else {
        count(n, n * elem, share);
      }
    }
    if (c.has_experts(l)) {
      const int64_t per_expert = 3 * int64_t(c.plan(l).ffn.width) * c.hidden_size;
      s.total_params += per_expert * c.num_experts;
      s.expert_params += per_expert * c.num_experts;
      s.active_params += per_expert * c.experts_per_token;
      s.bytes_per_token += expert_bytes_ * c.experts_per_token;
    }
  }
  return s;
}

LayerWeights::Slot LayerWeights::slot(Role role) {
  switch (role) {
    case Role::Q:
      return {&q, nullptr};
    case Role::K:
      return {&k, nullptr};
    case Role::V:
      return {&v, nullptr};
    case Role::O:
      return {&o, nullptr};
    case Role::Router:
      return {&router, nullptr};
    case Role::MlpGate:
      return {&mlp_gate, nullptr};
    case Role::MlpUp:
      return {&mlp_up, nullptr};
    case Role::MlpDown:
      return {&mlp_down, nullptr};
    case Role::SharedGate:
      return {&shared_gate, nullptr};
    case Role::SharedUp:
      return {&shared_up, nullptr};
    case Role::SharedDown:
      return {&shared_down, nullptr};
    case Role::SharedExpertGate:
      return {&shared_expert_gate, nullptr};
    case Role::AttnNorm:
      return {nullptr, &attn_norm};
    case Role::FfnNorm:
      return {nullptr, &ffn_norm};
    case Role::QBias:
      return {nullptr, &q_bias};
    case Role::KBias:
      return {nullptr, &k_bias};
    case Role::VBias:
      return {nullptr, &v_bias};
    case Role::OBias:
      return {nullptr, &o_bias};
    case Role::QNorm:
      return {nullptr, &q_norm};
    case Role::KNorm:
      return {nullptr, &k_norm};
    case Role::Sinks:
      return {nullptr, &sinks};
    case Role::RouterBias:
      return {nullptr, &router_bias};
    case Role::RouterCorrection:
      return {nullptr, &router_correction};
    case Role::ExpertGateUpBias:
      return {nullptr, &expert_gate_bias};  // as stored (E, 2I); Model::load splits it into gate and up
    case Role::ExpertDownBias:
      return {nullptr, &expert_down_bias};
    case Role::LinearQkvz:
      return {&lin_qkvz, nullptr};
    case Role::LinearBa:
      return {&lin_ba, nullptr};
    case Role::LinearQkv:
      return {&lin_qkv, nullptr};
    case Role::LinearZ:
      return {&lin_z, nullptr};
    case Role::LinearB:
      return {&lin_b, nullptr};
    case Role::LinearA:
      return {&lin_a, nullptr};
    case Role::LinearOut:
      return {&lin_out, nullptr};
    case Role::LinearConv:
      return {nullptr, &lin_conv};
    case Role::LinearDtBias:
      return {nullptr, &lin_dt_bias};
    case Role::LinearALog:
      return {nullptr, &lin_a_log};
    case Role::LinearNorm:
      return {nullptr, &lin_norm};
    case Role::MlaQA:
      return {&mla_q_a, nullptr};
    case Role::MlaQB:
      return {&mla_q_b, nullptr};
    case Role::MlaKvA:
      return {&mla_kv_a, nullptr};
    case Role::MlaKvB:
      return {&mla_kv_b, nullptr};
    case Role::MlaQANorm:
      return {nullptr, &mla_q_a_norm};
    case Role::MlaKvANorm:
      return {nullptr, &mla_kv_a_norm};
    case Role::Embed:
    case Role::FinalNorm:
    case Role::Head:
      break;
  }
  fail("role {} is not a layer's tensor", role_name(role));
}

}  // namespace seedling
