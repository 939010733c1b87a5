// model/gguf_source.cpp - a GGUF file's tensors by the family's names (see the header).
#include "model/gguf_source.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "core/error.h"
#include "experts/resident_experts.h"
#include "io/gguf_codec.h"
#include "ops/matmul.h"
#include "ops/matrix.h"

namespace seedling {

namespace {

// "[64, 32]": shapes as (rows, cols), for messages.
std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::vector<int64_t> squeezed(const std::vector<int64_t>& s) {
  std::vector<int64_t> out;
  for (int64_t d : s) {
    if (d != 1) out.push_back(d);
  }
  return out;
}

// The layer N of a "blk.N." name, or -1.
int64_t block_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  int64_t n = 0;
  size_t i = 4;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && n < (int64_t(1) << 31); ++i)
    n = n * 10 + (name[i] - '0');
  return i > 4 && i < name.size() && name[i] == '.' ? n : -1;
}

class GgufSource final : public WeightSource {
 public:
  GgufSource(const GgufFile& g, const GgufModel& m, std::vector<std::vector<uint8_t>>* owned)
      : g_(g), m_(m), owned_(owned) {
    for_each_tensor(
        m_.c, *m_.family, true, [&](const TensorSpec& t) { specs_[t.name] = t; }, [](int) {});
  }

  bool has(const std::string& name) const override {
    const TensorSpec* s = spec(name);
    if (s == nullptr) return false;
    if (s->role == Role::ExpertGateUpBias) {
      return g_.find_tensor(gguf_expert_name(s->layer, 0, "bias")) != nullptr &&
             g_.find_tensor(gguf_expert_name(s->layer, 1, "bias")) != nullptr;
    }
    if (s->role == Role::MlaKvB && g_.find_tensor(gguf_name(*s)) == nullptr) return split_kv_b_present(*s);
    return g_.find_tensor(gguf_name(*s)) != nullptr;
  }

  WeightView get(const std::string& name) const override {
    const TensorSpec* s = spec(name);
    SEEDLING_CHECK(s != nullptr, "the GGUF source has no role for tensor '{}'", name);
    if (s->role == Role::ExpertGateUpBias) return joined_gate_up_bias(*s);
    if (s->role == Role::MlaKvB && g_.find_tensor(gguf_name(*s)) == nullptr && split_kv_b_present(*s)) {
      return kv_b_from_split(*s);
    }
    const GgufTensor& t = tensor(gguf_name(*s), *s);
    WeightView v{gguf_tensor_codec(g_, t), t.data, rows_cols(t, s->shape), g_.path()};
    if (s->role == Role::LinearALog) return a_log_of(v, t.name);
    const bool q = s->role == Role::Q || s->role == Role::QBias, k = s->role == Role::K || s->role == Role::KBias;
    if (m_.arch->permute_qk && (q || k)) v.data = unpermuted(v, q ? m_.c.num_heads : m_.c.num_kv_heads);
    return v;
  }

  ExpertWeights expert(int layer, int e, const ExpertParts&, int64_t I, int64_t H) const override {
    ops::Matrix parts[3];
    for (int p = 0; p < 3; ++p) {
      const int64_t rows = p == 2 ? H : I, cols = p == 2 ? I : H;
      const std::string stacked = gguf_expert_name(layer, p);
      if (const GgufTensor* t = g_.find_tensor(stacked)) {
        check_dims(*t, {cols, rows, m_.c.num_experts}, "the stacked experts of a layer");
        const Codec c = gguf_tensor_codec(g_, *t);
        const size_t bytes = size_t(rows) * codec_row_bytes(c, cols);
        parts[p] = {c, t->data + size_t(e) * bytes, rows, cols};
        used_.insert(stacked);
        continue;
      }
      const std::string single = gguf_single_expert_name(layer, e, p);
      if (const GgufTensor* t = g_.find_tensor(single)) {
        check_dims(*t, {cols, rows}, "one expert's part");
        parts[p] = {gguf_tensor_codec(g_, *t), t->data, rows, cols};
        used_.insert(single);
        continue;
      }
      const std::string fused = "blk." + std::to_string(layer) + ".ffn_gate_up_exps.weight";
      if (p < 2 && g_.find_tensor(fused) != nullptr) {
        fail(
            "{}: tensor '{}' holds gate and up experts fused (ik_llama.cpp's merged layout): not read yet; a file "
            "with ffn_gate_exps and ffn_up_exps apart runs",
            g_.path(), fused);
      }
      fail("{}: missing tensor '{}' (the {} mapping reads layer {}'s routed experts from it)", g_.path(), stacked,
           m_.arch->arch, layer);
    }
    return {parts[0], parts[1], parts[2]};
  }

  std::unique_ptr<ExpertProvider> resident_experts(std::vector<std::vector<ExpertWeights>> table) override {
    return std::make_unique<ResidentExperts>(std::move(table));
  }

  void finish() const override {
    for (const GgufTensor& t : g_.tensors()) {
      if (used_.count(t.name)) continue;
      if (split_kv_b_beside_read_kv_b(t.name)) continue;
      const int64_t layer = block_of(t.name);
      if (layer >= m_.c.num_layers) continue;  // stored layers the config does not run (glm4moe's MTP layers)
      fail("{}: tensor '{}' is not read by the {} mapping (as {}), so running would drop it", g_.path(), t.name,
           m_.arch->arch, m_.family->model_type);
    }
  }

 private:
  const TensorSpec* spec(const std::string& name) const {
    auto it = specs_.find(name);
    return it == specs_.end() ? nullptr : &it->second;
  }

  std::string gguf_name(const TensorSpec& s) const {
    const std::string n = gguf_tensor_name(*m_.arch, s.role, s.layer);
    SEEDLING_CHECK(!n.empty(), "role {} has no GGUF tensor in the {} mapping", role_name(s.role), m_.arch->arch);
    return n;
  }

  // llama.cpp's converter writes MLA's attn_kv_b and, beside it, the same weights split as attn_k_b / attn_v_b (for
  // its absorbed attention): read from attn_kv_b, the split copies are not a part left behind.
  bool split_kv_b_beside_read_kv_b(const std::string& name) const {
    for (const char* split : {".attn_k_b.weight", ".attn_v_b.weight"}) {
      const size_t n = std::strlen(split);
      if (name.size() > n && name.compare(name.size() - n, n, split) == 0) {
        return used_.count(name.substr(0, name.size() - n) + ".attn_kv_b.weight") != 0;
      }
    }
    return false;
  }

  const GgufTensor& tensor(const std::string& gguf, const TensorSpec& s) const {
    const GgufTensor* t = g_.find_tensor(gguf);
    if (t == nullptr) {
      fail("{}: missing tensor '{}' (the {} mapping reads role {}{} from it)", g_.path(), gguf, m_.arch->arch,
           role_name(s.role), s.layer >= 0 ? " of layer " + std::to_string(s.layer) : "");
    }
    used_.insert(gguf);
    return *t;
  }

  // The layer's attn_k_b / attn_v_b names, beside the attn_kv_b of spec s.
  std::pair<std::string, std::string> split_names(const TensorSpec& s) const {
    const std::string kv = gguf_name(s), stem = kv.substr(0, kv.size() - std::strlen("attn_kv_b.weight"));
    return {stem + "attn_k_b.weight", stem + "attn_v_b.weight"};
  }
  bool split_kv_b_present(const TensorSpec& s) const {
    const auto [k, v] = split_names(s);
    return g_.find_tensor(k) != nullptr && g_.find_tensor(v) != nullptr;
  }

  // Newer llama.cpp conversions write MLA's kv_b only split, for absorbed attention: per head h, attn_k_b [kv_lora x
  // nope] (its kv_b rows transposed) and attn_v_b [v x kv_lora] (its rows as they are). kv_b is put back together,
  // head by head: rows h (nope + v) + r = k_b[h]^T row r for r < nope, then v_b[h]'s rows. A transpose moves single
  // weights across a block-quantized row, so quantized parts are decoded to float32 (the values the kernels would
  // compute with; kv_b is 4 bytes a weight then); two float16 or bfloat16 parts keep their codec, exactly.
  WeightView kv_b_from_split(const TensorSpec& s) const {
    const auto [kn, vn] = split_names(s);
    const GgufTensor &kt = tensor(kn, s), &vt = tensor(vn, s);
    const int64_t H = m_.c.num_heads, rank = m_.c.plan(s.layer).mla.kv_lora_rank;
    const int64_t nope = m_.c.plan(s.layer).mla.qk_nope_head_dim, vd = m_.c.plan(s.layer).mla.v_head_dim;
    // [nope, kv_lora, heads] and [kv_lora, v, heads] (ne0 first) as the converter writes them, or flattened to 2D.
    const auto check = [&](const GgufTensor& t, int64_t cols, int64_t per_head) {
      if (t.dims != std::vector<int64_t>{cols, per_head, H} && t.dims != std::vector<int64_t>{cols, H * per_head}) {
        fail("{}: tensor '{}' has dimensions {} (ne0 first), expected [{}, {}, {}] from the metadata", g_.path(),
             t.name, t.dims_string(), cols, per_head, H);
      }
    };
    check(kt, nope, rank);
    check(vt, rank, vd);
    const ops::Matrix k{gguf_tensor_codec(g_, kt), kt.data, H * rank, nope};
    const ops::Matrix v{gguf_tensor_codec(g_, vt), vt.data, H * vd, rank};
    const int64_t rows = H * (nope + vd);
    const bool keep = k.codec == v.codec && (k.codec == Codec::BF16 || k.codec == Codec::F16);
    const Codec out_codec = keep ? k.codec : Codec::F32;
    const size_t elem = keep ? 2 : 4;
    std::vector<uint8_t>& out = owned_->emplace_back(size_t(rows * rank) * elem);
    if (keep) {  // 16-bit values moved as they are
      const auto* kb = static_cast<const uint16_t*>(k.data);
      const auto* vb = static_cast<const uint16_t*>(v.data);
      auto* dst = reinterpret_cast<uint16_t*>(out.data());
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t r = 0; r < nope; ++r)
          for (int64_t c = 0; c < rank; ++c) dst[(h * (nope + vd) + r) * rank + c] = kb[(h * rank + c) * nope + r];
        std::memcpy(dst + (h * (nope + vd) + nope) * rank, vb + h * vd * rank, size_t(vd * rank) * 2);
      }
      return {out_codec, out.data(), {rows, rank}, g_.path()};
    }
    // Each source row decoded once (ggml's types by the kernels' row decoder, codec_value's values), then placed.
    auto* dst = reinterpret_cast<float*>(out.data());
    const auto decode_row = [](const ops::Matrix& m, int64_t r, float* row) {
      if (codec_is_ggml(m.codec)) {
        return ops::ggml_decode_row(m.codec, static_cast<const uint8_t*>(m.data) + size_t(r) * m.row_bytes(), m.cols,
                                    row);
      }
      for (int64_t c = 0; c < m.cols; ++c) row[c] = m.at(r, c);
    };
    std::vector<float> krow(static_cast<size_t>(nope));
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t c = 0; c < rank; ++c) {
        decode_row(k, h * rank + c, krow.data());
        for (int64_t r = 0; r < nope; ++r) dst[(h * (nope + vd) + r) * rank + c] = krow[size_t(r)];
      }
      for (int64_t r = 0; r < vd; ++r) decode_row(v, h * vd + r, dst + (h * (nope + vd) + nope + r) * rank);
    }
    return {out_codec, out.data(), {rows, rank}, g_.path()};
  }

  // ne0-first dimensions `want` (exactly, for experts).
  void check_dims(const GgufTensor& t, const std::vector<int64_t>& want, const char* what) const {
    if (t.dims != want) {
      std::vector<int64_t> w(want.begin(), want.end());
      fail("{}: tensor '{}' has dimensions {} (ne0 first), expected {} for {}", g_.path(), t.name, t.dims_string(),
           shape_text(w), what);
    }
  }

  // The tensor's dimensions reversed, as the plan's `want` (rows, cols) when they agree but for size-1 dimensions.
  std::vector<int64_t> rows_cols(const GgufTensor& t, const std::vector<int64_t>& want) const {
    const std::vector<int64_t> shape(t.dims.rbegin(), t.dims.rend());
    if (shape == want) return shape;
    if (squeezed(shape) == squeezed(want)) return want;
    const std::vector<int64_t> ne0_first(want.rbegin(), want.rend());
    fail("{}: tensor '{}' has dimensions {} (ne0 first), expected {} from the metadata", g_.path(), t.name,
         t.dims_string(), shape_text(ne0_first));
  }

  // llama.cpp's LlamaModel.permute, undone: within each head of d rows, GGUF row 2i + j is Hugging Face row
  // j * d/2 + i (j = 0, 1). Rows are whole codec rows, so any codec's rows move as they are.
  const void* unpermuted(const WeightView& v, int heads) const {
    const int64_t rows = v.shape[0];
    const size_t row_bytes = v.shape.size() == 2 ? codec_row_bytes(v.codec, v.shape[1]) : codec_block_bytes(v.codec);
    if (heads <= 0 || rows % heads != 0 || (rows / heads) % 2 != 0) {
      fail("{}: {} rows cannot be {} heads of an even size (llama's q/k permutation)", g_.path(), rows, heads);
    }
    const int64_t d = rows / heads, half = d / 2;
    std::vector<uint8_t>& out = owned_->emplace_back(size_t(rows) * row_bytes);
    const auto* src = static_cast<const uint8_t*>(v.data);
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t r = 0; r < d; ++r) {
        const int64_t from = h * d + 2 * (r % half) + r / half;
        std::memcpy(out.data() + size_t(h * d + r) * row_bytes, src + size_t(from) * row_bytes, row_bytes);
      }
    }
    return out.data();
  }

  // llama.cpp's ssm_a holds A = -exp(A_log) (its converter takes the exp); the family reads A_log: log(-A) in
  // double, rounded once, so the kernels' -exp(A_log) gives A back within a rounding. Every entry must be negative.
  WeightView a_log_of(const WeightView& v, const std::string& name) const {
    int64_t n = 1;
    for (int64_t d : v.shape) n *= d;
    const ops::Matrix m{v.codec, v.data, 1, n};
    if (!codec_is_float(m.codec)) fail("{}: tensor '{}' is not a float type", g_.path(), name);
    std::vector<uint8_t>& out = owned_->emplace_back(size_t(n) * sizeof(float));
    float* dst = reinterpret_cast<float*>(out.data());
    for (int64_t i = 0; i < n; ++i) {
      const double a = double(m.at(0, i));
      if (!(a < 0.0) || !std::isfinite(a)) {
        fail("{}: tensor '{}' entry {} is {}: expected a negative decay rate (-exp(A_log))", g_.path(), name, i, a);
      }
      dst[i] = float(std::log(-a));
    }
    return {Codec::F32, out.data(), v.shape, g_.path()};
  }

  // gpt-oss's ffn_gate_exps.bias and ffn_up_exps.bias ([I x E] each) as the family's (E, 2I) gate_up bias, each
  // part's entries where its expert_parts put its rows.
  WeightView joined_gate_up_bias(const TensorSpec& s) const {
    const int64_t E = m_.c.num_experts, I = m_.c.plan(s.layer).ffn.width;
    const ExpertParts parts = m_.family->expert_parts(m_.c, s.layer, 0);
    std::vector<uint8_t>& out = owned_->emplace_back(size_t(E * 2 * I) * sizeof(float));
    float* dst = reinterpret_cast<float*>(out.data());
    for (int p = 0; p < 2; ++p) {
      const std::string name = gguf_expert_name(s.layer, p, "bias");
      const GgufTensor& t = tensor(name, s);
      check_dims(t, {I, E}, "the experts' biases");
      const ops::Matrix m{gguf_tensor_codec(g_, t), t.data, E, I};
      if (!codec_is_float(m.codec)) fail("{}: tensor '{}' is not a float type", g_.path(), name);
      for (int64_t e = 0; e < E; ++e) {
        for (int64_t r = 0; r < I; ++r) {
          dst[e * 2 * I + parts[size_t(p)].row_offset + r * parts[size_t(p)].row_step] = m.at(e, r);
        }
      }
    }
    return {Codec::F32, out.data(), {E, 2 * I}, g_.path()};
  }

  const GgufFile& g_;
  GgufModel m_;
  std::vector<std::vector<uint8_t>>* owned_;
  std::map<std::string, TensorSpec> specs_;
  mutable std::set<std::string> used_;
};

}  // namespace

std::unique_ptr<WeightSource> make_gguf_source(const GgufFile& g, const GgufModel& m,
                                               std::vector<std::vector<uint8_t>>* owned) {
  return std::make_unique<GgufSource>(g, m, owned);
}

}  // namespace seedling
