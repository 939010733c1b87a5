// model/imatrix.cpp - collecting, writing and reading activation energies (docs/formats/imatrix.md).
#include "model/imatrix.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "io/gguf.h"
#include "io/safetensors_writer.h"

namespace seedling {

namespace {

constexpr int kInputs = 6;
constexpr MatrixInput kAllInputs[kInputs] = {MatrixInput::AttnQkv,    MatrixInput::AttnO,     MatrixInput::ExpertGateUp,
                                             MatrixInput::ExpertDown, MatrixInput::MlpGateUp, MatrixInput::MlpDown};

bool is_expert_input(MatrixInput w) {
  return w == MatrixInput::ExpertGateUp || w == MatrixInput::ExpertDown;
}

// The matrix whose row count stands for its group (attention, experts, MLP): the first input of each.
MatrixInput group_head(MatrixInput w) {
  switch (w) {
    case MatrixInput::AttnQkv:
    case MatrixInput::AttnO:
      return MatrixInput::AttnQkv;
    case MatrixInput::ExpertGateUp:
    case MatrixInput::ExpertDown:
      return MatrixInput::ExpertGateUp;
    case MatrixInput::MlpGateUp:
    case MatrixInput::MlpDown:
      return MatrixInput::MlpGateUp;
  }
  return w;
}

const char* group_name(MatrixInput w) {
  switch (group_head(w)) {
    case MatrixInput::AttnQkv:
      return "attn";
    case MatrixInput::ExpertGateUp:
      return "experts";
    default:
      return "mlp";
  }
}

const char* input_name(MatrixInput w) {
  switch (w) {
    case MatrixInput::AttnQkv:
      return "qkv";
    case MatrixInput::AttnO:
      return "o";
    case MatrixInput::ExpertGateUp:
    case MatrixInput::MlpGateUp:
      return "gate_up";
    case MatrixInput::ExpertDown:
    case MatrixInput::MlpDown:
      return "down";
  }
  return "?";
}

int64_t group_count(const ModelConfig& c, MatrixInput w) {
  return is_expert_input(w) ? c.num_experts : 1;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  TensorInfo t;
  t.shape = shape;
  return t.shape_string();
}

}  // namespace

std::string imatrix_sum_name(int layer, MatrixInput which) {
  return fmt::format("layers.{}.{}.{}.sum_sq", layer, group_name(which), input_name(which));
}

std::string imatrix_rows_name(int layer, MatrixInput which) {
  return fmt::format("layers.{}.{}.rows", layer, group_name(which));
}

int64_t imatrix_width(const ModelConfig& c, int layer, MatrixInput which) {
  const bool moe = c.layer_has_experts[size_t(layer)] != 0;
  const bool attention = c.plan(layer).mixer == Mixer::Attention;  // a Gated DeltaNet layer has no q/k/v/o
  const int shared = moe ? c.plan(layer).ffn.shared_width : 0;     // the shared expert is observed as a dense MLP
  switch (which) {
    case MatrixInput::AttnQkv:
      return attention ? c.hidden_size : 0;
    case MatrixInput::AttnO:
      return attention ? c.q_dim() : 0;
    case MatrixInput::ExpertGateUp:
      return moe ? c.hidden_size : 0;
    case MatrixInput::ExpertDown:
      return moe ? c.moe_intermediate_size : 0;
    case MatrixInput::MlpGateUp:
      return moe && shared == 0 ? 0 : c.hidden_size;
    case MatrixInput::MlpDown:
      return moe ? shared : c.intermediate_size;
  }
  return 0;
}

ImatrixCollector::ImatrixCollector(const ModelConfig& c) : c_(c), slots_(size_t(c.num_layers) * kInputs) {
  for (int l = 0; l < c.num_layers; ++l) {
    for (MatrixInput w : kAllInputs) {
      Slot& s = slot(l, w);
      s.width = imatrix_width(c, l, w);
      if (s.width == 0) continue;
      s.sum.assign(size_t(group_count(c, w) * s.width), 0.0);
      s.rows.assign(size_t(group_count(c, w)), 0);
    }
  }
}

ImatrixCollector::Slot& ImatrixCollector::slot(int layer, MatrixInput which) {
  SEEDLING_CHECK(layer >= 0 && layer < c_.num_layers, "imatrix: layer {} out of range", layer);
  return slots_[size_t(layer) * kInputs + size_t(which)];
}

const ImatrixCollector::Slot& ImatrixCollector::slot(int layer, MatrixInput which) const {
  SEEDLING_CHECK(layer >= 0 && layer < c_.num_layers, "imatrix: layer {} out of range", layer);
  return slots_[size_t(layer) * kInputs + size_t(which)];
}

void ImatrixCollector::on_input(int layer, MatrixInput which, int expert, const float* x, int64_t n, int64_t width) {
  Slot& s = slot(layer, which);
  const int64_t g = is_expert_input(which) ? expert : 0;
  SEEDLING_CHECK(width == s.width && g >= 0 && g < int64_t(s.rows.size()),
                 "imatrix: input {} of layer {} (expert {}) has width {}, expected {}", imatrix_sum_name(layer, which),
                 layer, expert, width, s.width);
  double* sum = s.sum.data() + g * width;
  for (int64_t r = 0; r < n; ++r) {
    const float* row = x + r * width;
    for (int64_t j = 0; j < width; ++j) sum[j] += double(row[j]) * double(row[j]);
  }
  s.rows[size_t(g)] += n;
}

std::span<const double> ImatrixCollector::sum_sq(int layer, MatrixInput which, int expert) const {
  const Slot& s = slot(layer, which);
  const int64_t g = is_expert_input(which) ? expert : 0;
  SEEDLING_CHECK(s.width > 0 && g >= 0 && g < int64_t(s.rows.size()), "imatrix: no {} for expert {}",
                 imatrix_sum_name(layer, which), expert);
  return {s.sum.data() + g * s.width, size_t(s.width)};
}

int64_t ImatrixCollector::rows(int layer, MatrixInput which, int expert) const {
  const Slot& s = slot(layer, which);
  const int64_t g = is_expert_input(which) ? expert : 0;
  SEEDLING_CHECK(s.width > 0 && g >= 0 && g < int64_t(s.rows.size()), "imatrix: no {} for expert {}",
                 imatrix_rows_name(layer, which), expert);
  return s.rows[size_t(g)];
}

void write_imatrix(const std::string& path, const ImatrixCollector& col,
                   const std::map<std::string, std::string>& metadata) {
  const ModelConfig& c = col.config();
  SafetensorsWriter w;
  w.set_metadata("seedling_format", kImatrixFormatName);
  w.set_metadata("seedling_format_version", std::to_string(kImatrixFormatVersion));
  for (const auto& [k, v] : metadata) w.set_metadata(k, v);
  for (int l = 0; l < c.num_layers; ++l) {
    for (MatrixInput which : kAllInputs) {
      const int64_t width = imatrix_width(c, l, which), groups = group_count(c, which);
      if (width == 0) continue;
      std::vector<int64_t> shape = is_expert_input(which) ? std::vector<int64_t>{groups, width} : std::vector{width};
      w.add(imatrix_sum_name(l, which), DType::F32, shape, [&col, l, which, width](uint8_t* out, size_t off, size_t n) {
        for (size_t b = 0; b < n; b += 4) {
          const int64_t i = int64_t((off + b) / 4);
          const float v = float(col.sum_sq(l, which, is_expert_input(which) ? int(i / width) : -1)[size_t(i % width)]);
          std::memcpy(out + b, &v, 4);
        }
      });
      if (group_head(which) != which) continue;
      w.add(imatrix_rows_name(l, which), DType::I64, {groups}, [&col, l, which](uint8_t* out, size_t off, size_t n) {
        for (size_t b = 0; b < n; b += 8) {
          const int64_t i = int64_t((off + b) / 8);
          const int64_t v = col.rows(l, which, is_expert_input(which) ? int(i) : -1);
          std::memcpy(out + b, &v, 8);
        }
      });
    }
  }
  w.write(path);
}

Imatrix Imatrix::load(const std::string& path, const ModelConfig& c) {
  return is_gguf_file(path) ? load_llama_cpp(path, c) : load_safetensors(path, c);
}

Imatrix Imatrix::load_safetensors(const std::string& path, const ModelConfig& c) {
  Imatrix m;
  const SafetensorsFile file(path);
  m.path_ = path;
  m.c_ = c;
  m.metadata_ = file.metadata();
  const auto& meta = file.metadata();
  const auto fmt_it = meta.find("seedling_format");
  if (fmt_it == meta.end() || fmt_it->second != kImatrixFormatName)
    fail("{}: not an imatrix file (expected __metadata__ seedling_format '{}')", path, kImatrixFormatName);
  const auto ver = meta.find("seedling_format_version");
  if (ver == meta.end() || ver->second != std::to_string(kImatrixFormatVersion))
    fail("{}: imatrix format version '{}', expected {}", path, ver == meta.end() ? "" : ver->second,
         kImatrixFormatVersion);
  size_t expected = 0;
  auto check = [&](const std::string& name, DType dtype, std::vector<int64_t> shape) {
    ++expected;
    const auto it = file.tensors().find(name);
    if (it == file.tensors().end())
      fail("{}: tensor '{}' is missing: the model ({}, {} layers) needs it {} (made on another model?)", path, name,
           c.model_type, c.num_layers, shape_string(shape));
    const TensorInfo& t = it->second;
    if (t.shape != shape)
      fail("{}: tensor '{}' has shape {}, the model expects {} (made on another model?)", path, name, t.shape_string(),
           shape_string(shape));
    if (t.dtype != dtype)
      fail("{}: tensor '{}' has dtype {}, expected {}", path, name, dtype_name(t.dtype), dtype_name(dtype));
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (dtype == DType::F32) {
        float v;
        std::memcpy(&v, t.data + i * 4, 4);
        if (!std::isfinite(v) || v < 0)
          fail("{}: tensor '{}' element {} is {}, expected finite >= 0", path, name, i, v);
      } else {
        int64_t v;
        std::memcpy(&v, t.data + i * 8, 8);
        if (v < 0) fail("{}: tensor '{}' element {} is {}, expected a row count >= 0", path, name, i, v);
      }
    }
    if (dtype == DType::F32) {
      std::vector<float>& v = m.sums_[name];
      v.resize(size_t(t.numel()));
      std::memcpy(v.data(), t.data, v.size() * 4);
    } else {
      std::vector<int64_t>& v = m.rows_[name];
      v.resize(size_t(t.numel()));
      std::memcpy(v.data(), t.data, v.size() * 8);
    }
  };
  for (int l = 0; l < c.num_layers; ++l) {
    for (MatrixInput which : kAllInputs) {
      const int64_t width = imatrix_width(c, l, which), groups = group_count(c, which);
      if (width == 0) continue;
      check(imatrix_sum_name(l, which), DType::F32,
            is_expert_input(which) ? std::vector<int64_t>{groups, width} : std::vector{width});
      if (group_head(which) == which) check(imatrix_rows_name(l, which), DType::I64, {groups});
    }
  }
  if (file.tensors().size() != expected) {
    for (const auto& [name, t] : file.tensors()) {
      bool known = false;
      for (int l = 0; l < c.num_layers && !known; ++l) {
        for (MatrixInput which : kAllInputs) {
          if (imatrix_width(c, l, which) == 0) continue;
          known = known || name == imatrix_sum_name(l, which) || name == imatrix_rows_name(l, which);
        }
      }
      if (!known)
        fail("{}: tensor '{}' is not one the model ({}, {} layers) has (made on another model?)", path, name,
             c.model_type, c.num_layers);
    }
  }
  return m;
}

// llama.cpp's imatrix GGUF: for a matrix `<tensor>` of ne0 = K input columns, `<tensor>.in_sum2` F32 [K, n] with n
// its experts (1 for a dense matrix) and `<tensor>.counts` F32 [1, n]: per expert the sum over its rows of x_j^2, and
// the rows. Those are this format's sum_sq and rows; only the routed experts' are read (the seed search's inputs).
Imatrix Imatrix::load_llama_cpp(const std::string& path, const ModelConfig& c) {
  const GgufFile file(path);
  Imatrix m;
  m.path_ = path;
  m.c_ = c;
  for (const auto& [key, value] : file.metadata()) m.metadata_[key] = gguf_value_text(value);
  bool any_sums = false;
  for (const GgufTensor& t : file.tensors()) {
    if (!t.name.ends_with(".in_sum2")) continue;
    any_sums = true;
    int layer = -1;  // a blk.N tensor of a layer the model does not have: made on another model
    if (std::sscanf(t.name.c_str(), "blk.%d.", &layer) == 1 && (layer < 0 || layer >= c.num_layers))
      fail("{}: tensor '{}' is of layer {}, the model ({}, {} layers) has none (made on another model?)", path, t.name,
           layer, c.model_type, c.num_layers);
  }
  if (!any_sums)
    fail(
        "{}: a GGUF with no '<tensor>.in_sum2' tensors is not an imatrix (llama.cpp's imatrix files hold one per "
        "matrix, beside its '.counts')",
        path);
  // One F32 tensor of the shape expected, every element finite and >= 0 (counts: whole numbers too).
  const auto read = [&](const std::string& name, const std::vector<int64_t>& dims, bool counts) {
    const GgufTensor* t = file.find_tensor(name);
    if (t == nullptr)
      fail("{}: tensor '{}' is missing: the model ({}, {} layers) needs it {} (made on another model?)", path, name,
           c.model_type, c.num_layers, shape_string(dims));
    if (t->type != GgmlType::F32) fail("{}: tensor '{}' is {}, expected F32", path, name, ggml_type_name(t->type));
    if (t->dims != dims)
      fail("{}: tensor '{}' has shape {} (ne0 first), the model expects {} (made on another model?)", path, name,
           t->dims_string(), shape_string(dims));
    std::vector<float> v(size_t(t->numel()));
    std::memcpy(v.data(), t->data, v.size() * 4);
    for (size_t i = 0; i < v.size(); ++i) {
      if (!std::isfinite(v[i]) || v[i] < 0 || (counts && (v[i] != std::floor(v[i]) || v[i] > 9007199254740992.0f)))
        fail("{}: tensor '{}' element {} is {}, expected {}", path, name, i, v[i],
             counts ? "a whole row count >= 0" : "finite >= 0");
    }
    return v;
  };
  for (int l = 0; l < c.num_layers; ++l) {
    for (MatrixInput which : {MatrixInput::ExpertGateUp, MatrixInput::ExpertDown}) {
      const int64_t width = imatrix_width(c, l, which), groups = group_count(c, which);
      if (width == 0) continue;
      std::string base = fmt::format("blk.{}.ffn_down_exps.weight", l);
      if (which == MatrixInput::ExpertGateUp) {
        base = fmt::format("blk.{}.ffn_gate_exps.weight", l);  // gate and up read the same input: either will do
        if (file.find_tensor(base + ".in_sum2") == nullptr) base = fmt::format("blk.{}.ffn_up_exps.weight", l);
      }
      m.sums_[imatrix_sum_name(l, which)] = read(base + ".in_sum2", {width, groups}, false);
      const std::vector<float> counts = read(base + ".counts", {1, groups}, true);
      std::vector<int64_t> rows(counts.size());
      for (size_t e = 0; e < rows.size(); ++e) rows[e] = int64_t(counts[e]);
      const std::string rows_name = imatrix_rows_name(l, which);
      const auto it = m.rows_.find(rows_name);
      if (it != m.rows_.end() && it->second != rows)
        fail(
            "{}: '{}.counts' differs from the rows the layer's other expert matrix counted: its experts' inputs are "
            "the same rows",
            path, base);
      m.rows_[rows_name] = std::move(rows);
    }
  }
  return m;
}

std::span<const float> Imatrix::sum_sq(int layer, MatrixInput which, int expert) const {
  if (layer < 0 || layer >= c_.num_layers || imatrix_width(c_, layer, which) == 0)
    fail("{}: layer {} has no {}", path_, layer, imatrix_sum_name(layer, which));
  const int64_t width = imatrix_width(c_, layer, which);
  const int64_t g = is_expert_input(which) ? expert : 0;
  if (g < 0 || g >= group_count(c_, which)) fail("{}: expert {} out of range", path_, expert);
  const auto it = sums_.find(imatrix_sum_name(layer, which));
  if (it == sums_.end())
    fail("{}: no '{}' (a llama.cpp imatrix is read for the routed experts' inputs only)", path_,
         imatrix_sum_name(layer, which));
  return {it->second.data() + g * width, size_t(width)};
}

int64_t Imatrix::rows(int layer, MatrixInput which, int expert) const {
  sum_sq(layer, which, expert);  // range checks
  const auto it = rows_.find(imatrix_rows_name(layer, which));
  if (it == rows_.end()) fail("{}: no '{}'", path_, imatrix_rows_name(layer, which));
  return it->second[size_t(is_expert_input(which) ? expert : 0)];
}

std::vector<float> Imatrix::mean_energy(int layer, MatrixInput which, int expert) const {
  const std::span<const float> s = sum_sq(layer, which, expert);
  const int64_t n = rows(layer, which, expert);
  if (n == 0) return {};
  std::vector<float> h(s.size());
  for (size_t j = 0; j < s.size(); ++j) h[j] = float(double(s[j]) / double(n));
  return h;
}

std::vector<float> Imatrix::expert_search_weights(int layer, int expert, MatrixInput which) const {
  if (!is_expert_input(which)) fail("{}: search weights are for routed experts' inputs", path_);
  std::vector<float> h = mean_energy(layer, which, expert);
  double sum = 0;
  for (float v : h) sum += double(v);
  if (!(sum > 0)) return {};
  const double scale = double(h.size()) / sum;
  for (float& v : h) v = float(double(v) * scale);
  return h;
}

}  // namespace seedling
