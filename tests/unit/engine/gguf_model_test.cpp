// GGUF files as models (model/gguf_config.h, model/gguf_source.h): the same bytes as a packed folder give the same
// logits bit for bit; files written by llama.cpp's own converter (tests/data/gguf/llama_cpp/) give the logits of the
// Hugging Face folders they were converted from; every missing key, unmapped architecture, refused type and tensor
// left unread is one Error naming the file and the key or tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>

#include "engine/engine.h"
#include "gguf_builder.h"
#include "io/gguf_codec.h"
#include "io/safetensors.h"
#include "model/gguf_config.h"
#include "model/model.h"
#include "ops/matmul.h"
#include "test_util.h"

namespace seedling {

namespace {

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

std::vector<float> logits_of(const std::string& path, const std::vector<int32_t>& ids) {
  auto model = Model::load(path);
  Engine engine(*model, {});
  const int seq = engine.add_sequence();
  SequenceStep step{seq, ids, true};
  return engine.step({&step, 1});
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
  return worst;
}

std::vector<int32_t> reference_ids(const std::string& model) {
  return test::read_json(test::data_path("models/" + model + "/reference.json"))["ids"].get<std::vector<int32_t>>();
}

// The metadata of a small qwen3moe (or another architecture's keys of the same names): every key the mapping reads
// but `without`, attention.head_count_kv `kv_heads`; no tensors.
test::GgufBuilder qwen3moe_keys(const std::string& arch = "qwen3moe", const std::string& without = "",
                                uint32_t kv_heads = 1) {
  test::GgufBuilder b;
  b.str("general.architecture", arch);
  for (auto [key, value] : {std::pair{"block_count", 2u},
                            {"embedding_length", 64u},
                            {"attention.head_count", 2u},
                            {"attention.head_count_kv", kv_heads},
                            {"attention.key_length", 32u},
                            {"expert_count", 4u},
                            {"expert_used_count", 2u},
                            {"expert_feed_forward_length", 32u},
                            {"vocab_size", 64u}}) {
    if (key != without) b.key(arch + "." + key, GgufType::U32, uint32_t(value));
  }
  b.key(arch + ".attention.layer_norm_rms_epsilon", GgufType::F32, 1e-6f);
  return b;
}

std::string map_error(const test::GgufBuilder& b) {
  test::ScratchDir dir("gguf-map");
  test::write_file(dir / "m.gguf", b.bytes());
  return test::error_of([&] { map_gguf_model(GgufFile(dir / "m.gguf")); });
}

// olmoe and gpt-oss in llama.cpp's layout, written here from the tiny checkpoints because this tree's
// convert_hf_to_gguf.py converts neither: the names and dimensions its loader reads (llama.cpp's
// src/llama-load-tensors.cpp: gpt-oss's post_attention_norm, attn_sinks, ffn_gate_inp.bias, the experts'
// ffn_{gate,up,down}_exps.{weight,bias} with gate and up apart; olmoe's attn_q_norm / attn_k_norm over the whole
// projection and stacked experts), the bf16 bytes of the folder moved, never changed.
class LayoutWriter {
 public:
  explicit LayoutWriter(const std::string& dir) : ck_(dir) {}
  test::GgufBuilder& b() { return b_; }
  // The tensor as stored, dimensions reversed (ne0 first).
  void same(const std::string& gguf, const std::string& hf) {
    const TensorInfo& t = ck_.get(hf);
    std::vector<uint64_t> dims(t.shape.rbegin(), t.shape.rend());
    b_.raw_tensor(gguf, dims, GgmlType::BF16, std::string(reinterpret_cast<const char*>(t.data), t.nbytes));
  }
  // MLA's kv_b (heads (nope + v) x rank) as llama.cpp's split attn_k_b [nope, rank, heads] (per head the key rows
  // transposed) and attn_v_b [rank, v, heads] (the value rows), in bf16 as stored or widened to float32.
  void split_kv_b(const std::string& b, const std::string& hf, int64_t heads, int64_t nope, int64_t v, int64_t rank,
                  bool f32, bool k_dims_swapped = false) {
    const auto* src = reinterpret_cast<const uint16_t*>(ck_.get(hf).data);
    std::vector<uint16_t> k(size_t(heads * rank * nope)), vv(size_t(heads * v * rank));
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t r = 0; r < nope; ++r)
        for (int64_t c = 0; c < rank; ++c) k[size_t((h * rank + c) * nope + r)] = src[(h * (nope + v) + r) * rank + c];
      for (int64_t r = 0; r < v; ++r)
        for (int64_t c = 0; c < rank; ++c)
          vv[size_t((h * v + r) * rank + c)] = src[(h * (nope + v) + nope + r) * rank + c];
    }
    const auto bytes = [&](const std::vector<uint16_t>& x) {
      if (!f32) return std::string(reinterpret_cast<const char*>(x.data()), x.size() * 2);
      std::string out(x.size() * 4, '\0');
      for (size_t i = 0; i < x.size(); ++i) {
        const uint32_t bits = uint32_t(x[i]) << 16;
        std::memcpy(out.data() + i * 4, &bits, 4);
      }
      return out;
    };
    const GgmlType t = f32 ? GgmlType::F32 : GgmlType::BF16;
    const std::vector<uint64_t> k_dims = k_dims_swapped
                                             ? std::vector<uint64_t>{uint64_t(rank), uint64_t(nope), uint64_t(heads)}
                                             : std::vector<uint64_t>{uint64_t(nope), uint64_t(rank), uint64_t(heads)};
    b_.raw_tensor(b + "attn_k_b.weight", k_dims, t, bytes(k));
    b_.raw_tensor(b + "attn_v_b.weight", {uint64_t(rank), uint64_t(v), uint64_t(heads)}, t, bytes(vv));
  }
  // Per-expert tensors `hf(e)` (rows, cols) stacked: [E x rows x cols].
  void stacked(const std::string& gguf, const std::function<std::string(int)>& hf, int experts) {
    std::string bytes;
    std::vector<int64_t> shape;
    for (int e = 0; e < experts; ++e) {
      const TensorInfo& t = ck_.get(hf(e));
      shape = t.shape;
      bytes.append(reinterpret_cast<const char*>(t.data), t.nbytes);
    }
    b_.raw_tensor(gguf, {uint64_t(shape[1]), uint64_t(shape[0]), uint64_t(experts)}, GgmlType::BF16, bytes);
  }
  // A layer's router (mlp.gate) and its per-expert gate/up/down stacked as llama.cpp's ffn_*_exps; p and b the
  // layer's Hugging Face and GGUF prefixes.
  void routed_experts(const std::string& p, const std::string& b, int experts) {
    same(b + "ffn_gate_inp.weight", p + "mlp.gate.weight");
    for (auto [g, h] :
         {std::pair{"ffn_gate_exps", "gate_proj"}, {"ffn_up_exps", "up_proj"}, {"ffn_down_exps", "down_proj"}}) {
      stacked(
          b + g + ".weight", [&, h = h](int e) { return p + "mlp.experts." + std::to_string(e) + "." + h + ".weight"; },
          experts);
    }
  }
  // gpt-oss's (E, H, 2I) gate_up_proj (gate and up interleaved along the last axis) or (E, I, H) down_proj as the
  // [E x rows x cols] experts llama.cpp reads: rows `out` of every `step` from `offset` of the last axis, transposed.
  void transposed(const std::string& gguf, const std::string& hf, int step, int offset) {
    const TensorInfo& t = ck_.get(hf);
    const int64_t E = t.shape[0], in = t.shape[1], all = t.shape[2], out = all / step;
    const auto* src = reinterpret_cast<const uint16_t*>(t.data);
    std::string bytes(size_t(E * out * in) * 2, '\0');
    auto* dst = reinterpret_cast<uint16_t*>(bytes.data());
    for (int64_t e = 0; e < E; ++e) {
      for (int64_t r = 0; r < out; ++r) {
        for (int64_t c = 0; c < in; ++c) dst[(e * out + r) * in + c] = src[(e * in + c) * all + r * step + offset];
      }
    }
    b_.raw_tensor(gguf, {uint64_t(in), uint64_t(out), uint64_t(E)}, GgmlType::BF16, bytes);
  }
  // A (E, 2I) gate_up bias's entries `offset`, `offset + step`, ...: [E x I].
  void strided_bias(const std::string& gguf, const std::string& hf, int step, int offset) {
    const TensorInfo& t = ck_.get(hf);
    const int64_t E = t.shape[0], all = t.shape[1], out = all / step;
    const auto* src = reinterpret_cast<const uint16_t*>(t.data);
    std::string bytes(size_t(E * out) * 2, '\0');
    auto* dst = reinterpret_cast<uint16_t*>(bytes.data());
    for (int64_t e = 0; e < E; ++e) {
      for (int64_t r = 0; r < out; ++r) dst[e * out + r] = src[e * all + r * step + offset];
    }
    b_.raw_tensor(gguf, {uint64_t(out), uint64_t(E)}, GgmlType::BF16, bytes);
  }
  // A bf16 tensor's values as float32 (exact), each through `f`, stored F32 with dimensions `dims` (ne0 first).
  void f32_of(const std::string& gguf, const std::string& hf, const std::vector<uint64_t>& dims,
              const std::function<float(float)>& f) {
    const TensorInfo& t = ck_.get(hf);
    const auto* src = reinterpret_cast<const uint16_t*>(t.data);
    std::string bytes(t.nbytes * 2, '\0');
    for (size_t i = 0; i < t.nbytes / 2; ++i) {
      const float v = f(std::bit_cast<float>(uint32_t(src[i]) << 16));
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
    b_.raw_tensor(gguf, dims, GgmlType::F32, bytes);
  }
  // The tensor's bytes as stored, under other dimensions (ne0 first): a conv's (C, 1, K) as llama.cpp's [K, C].
  void reshaped(const std::string& gguf, const std::string& hf, const std::vector<uint64_t>& dims) {
    const TensorInfo& t = ck_.get(hf);
    b_.raw_tensor(gguf, dims, GgmlType::BF16, std::string(reinterpret_cast<const char*>(t.data), t.nbytes));
  }
  void u32(const std::string& key, int64_t v) { b_.key(key, GgufType::U32, uint32_t(v)); }
  void f32(const std::string& key, double v) { b_.key(key, GgufType::F32, float(v)); }

 private:
  Checkpoint ck_;
  test::GgufBuilder b_;
};

// Keys every llama-style architecture has, from the folder's config.json.
void common_keys(LayoutWriter& w, const std::string& arch, const nlohmann::json& c) {
  w.b().str("general.architecture", arch);
  w.u32(arch + ".block_count", c["num_hidden_layers"]);
  w.u32(arch + ".context_length", c["max_position_embeddings"]);
  w.u32(arch + ".embedding_length", c["hidden_size"]);
  w.u32(arch + ".attention.head_count", c["num_attention_heads"]);
  w.u32(arch + ".attention.head_count_kv", c["num_key_value_heads"]);
  w.f32(arch + ".attention.layer_norm_rms_epsilon", c["rms_norm_eps"]);
  w.u32(arch + ".expert_used_count", c["num_experts_per_tok"]);
  w.f32(arch + ".rope.freq_base", c["rope_parameters"]["rope_theta"]);
}

// The tensors every llama-style layout has: embedding, final norm, head; per layer the two norms (the FFN's named
// `ffn_norm`) and q/k/v/o (with their biases when `biases`); then `rest(p, b)` with the layer's Hugging Face and GGUF
// prefixes.
void llama_layout(LayoutWriter& w, int layers, const char* ffn_norm, bool biases,
                  const std::function<void(const std::string&, const std::string&)>& rest) {
  w.same("token_embd.weight", "model.embed_tokens.weight");
  w.same("output_norm.weight", "model.norm.weight");
  w.same("output.weight", "lm_head.weight");
  for (int l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".", b = "blk." + std::to_string(l) + ".";
    w.same(b + "attn_norm.weight", p + "input_layernorm.weight");
    w.same(b + ffn_norm + ".weight", p + "post_attention_layernorm.weight");
    for (auto [g, h] :
         {std::pair{"attn_q", "q_proj"}, {"attn_k", "k_proj"}, {"attn_v", "v_proj"}, {"attn_output", "o_proj"}}) {
      w.same(b + g + ".weight", p + "self_attn." + h + ".weight");
      if (biases) w.same(b + g + ".bias", p + "self_attn." + h + ".bias");
    }
    rest(p, b);
  }
}

std::string olmoe_gguf(const test::ScratchDir& dir) {
  const std::string hf = test::data_path("models/olmoe_a/hf");
  const nlohmann::json c = test::read_json(hf + "/config.json");
  LayoutWriter w(hf);
  common_keys(w, "olmoe", c);
  w.u32("olmoe.expert_count", c["num_experts"]);
  w.u32("olmoe.feed_forward_length", c["intermediate_size"]);
  w.f32("olmoe.attention.clamp_kqv", c["clip_qkv"]);
  llama_layout(w, c["num_hidden_layers"], "ffn_norm", false, [&](const std::string& p, const std::string& b) {
    w.same(b + "attn_q_norm.weight", p + "self_attn.q_norm.weight");
    w.same(b + "attn_k_norm.weight", p + "self_attn.k_norm.weight");
    w.routed_experts(p, b, c["num_experts"]);
  });
  test::write_file(dir / "olmoe.gguf", w.b().bytes());
  return dir / "olmoe.gguf";
}

std::string gpt_oss_gguf(const test::ScratchDir& dir) {
  const std::string hf = test::data_path("models/gpt_oss_a/hf");
  const nlohmann::json c = test::read_json(hf + "/config.json");
  const nlohmann::json& rope = c["rope_parameters"];
  LayoutWriter w(hf);
  common_keys(w, "gpt-oss", c);
  w.u32("gpt-oss.expert_count", c["num_local_experts"]);
  w.u32("gpt-oss.expert_feed_forward_length", c["intermediate_size"]);
  w.u32("gpt-oss.attention.key_length", c["head_dim"]);
  w.u32("gpt-oss.attention.value_length", c["head_dim"]);
  w.u32("gpt-oss.attention.sliding_window", c["sliding_window"]);
  w.b().str("gpt-oss.rope.scaling.type", "yarn");
  w.f32("gpt-oss.rope.scaling.factor", rope["factor"]);
  w.u32("gpt-oss.rope.scaling.original_context_length", rope["original_max_position_embeddings"]);
  llama_layout(w, c["num_hidden_layers"], "post_attention_norm", true, [&](const std::string& p, const std::string& b) {
    w.same(b + "attn_sinks.weight", p + "self_attn.sinks");
    w.same(b + "ffn_gate_inp.weight", p + "mlp.router.weight");
    w.same(b + "ffn_gate_inp.bias", p + "mlp.router.bias");
    w.transposed(b + "ffn_gate_exps.weight", p + "mlp.experts.gate_up_proj", 2, 0);
    w.transposed(b + "ffn_up_exps.weight", p + "mlp.experts.gate_up_proj", 2, 1);
    w.transposed(b + "ffn_down_exps.weight", p + "mlp.experts.down_proj", 1, 0);
    w.strided_bias(b + "ffn_gate_exps.bias", p + "mlp.experts.gate_up_proj_bias", 2, 0);
    w.strided_bias(b + "ffn_up_exps.bias", p + "mlp.experts.gate_up_proj_bias", 2, 1);
    w.same(b + "ffn_down_exps.bias", p + "mlp.experts.down_proj_bias");
  });
  test::write_file(dir / "gpt_oss.gguf", w.b().bytes());
  return dir / "gpt_oss.gguf";
}

// qwen35moe as llama.cpp's loader reads it (src/llama-load-tensors.cpp create_qwen35moe_tensors) and its converter
// writes it: the zero-centred norms stored as 1 + w (F32), ssm_a = -exp(A_log) (F32), the conv as [kernel, channels],
// the Gated DeltaNet projections as attn_qkv / attn_gate / ssm_beta / ssm_alpha / ssm_out; from the released
// (multimodal) tiny checkpoint's text model. `inner` overrides ssm.inner_size, `a_sign` multiplies ssm_a (bad input).
std::string qwen35moe_gguf(const test::ScratchDir& dir, int64_t inner = 0, float a_sign = 1.0f) {
  const std::string hf = test::data_path("models/qwen3_5_moe_a/hf");
  const nlohmann::json c = test::read_json(hf + "/config.json")["text_config"];
  const int layers = c["num_hidden_layers"], head_dim = c["head_dim"];
  LayoutWriter w(hf);
  const std::string a = "qwen35moe";
  common_keys(w, a, c);
  w.u32(a + ".attention.key_length", head_dim);
  w.u32(a + ".attention.value_length", head_dim);
  w.u32(a + ".rope.dimension_count", int64_t(head_dim * c["partial_rotary_factor"].get<double>()));
  w.u32(a + ".expert_count", c["num_experts"]);
  w.u32(a + ".expert_feed_forward_length", c["moe_intermediate_size"]);
  w.u32(a + ".expert_shared_feed_forward_length", c["shared_expert_intermediate_size"]);
  w.u32(a + ".ssm.conv_kernel", c["linear_conv_kernel_dim"]);
  w.u32(a + ".ssm.state_size", c["linear_key_head_dim"]);
  w.u32(a + ".ssm.group_count", c["linear_num_key_heads"]);
  w.u32(a + ".ssm.time_step_rank", c["linear_num_value_heads"]);
  const int64_t value_width = c["linear_num_value_heads"].get<int64_t>() * c["linear_value_head_dim"].get<int64_t>();
  w.u32(a + ".ssm.inner_size", inner > 0 ? inner : value_width);
  w.u32(a + ".full_attention_interval", 2);  // the checkpoint's layer_types: linear, full, linear, full
  const auto plus_one = [](float v) { return v + 1.0f; };
  const std::string m = "model.language_model.";
  const uint64_t H = c["hidden_size"];
  w.same("token_embd.weight", m + "embed_tokens.weight");
  w.f32_of("output_norm.weight", m + "norm.weight", {H}, plus_one);
  w.same("output.weight", "lm_head.weight");
  for (int l = 0; l < layers; ++l) {
    const std::string p = m + "layers." + std::to_string(l) + ".", b = "blk." + std::to_string(l) + ".";
    w.f32_of(b + "attn_norm.weight", p + "input_layernorm.weight", {H}, plus_one);
    w.f32_of(b + "post_attention_norm.weight", p + "post_attention_layernorm.weight", {H}, plus_one);
    if (c["layer_types"][size_t(l)] == "full_attention") {
      for (auto [g, h] :
           {std::pair{"attn_q", "q_proj"}, {"attn_k", "k_proj"}, {"attn_v", "v_proj"}, {"attn_output", "o_proj"}}) {
        w.same(b + g + ".weight", p + "self_attn." + h + ".weight");
      }
      w.f32_of(b + "attn_q_norm.weight", p + "self_attn.q_norm.weight", {uint64_t(head_dim)}, plus_one);
      w.f32_of(b + "attn_k_norm.weight", p + "self_attn.k_norm.weight", {uint64_t(head_dim)}, plus_one);
    } else {
      const std::string la = p + "linear_attn.";
      for (auto [g, h] : {std::pair{"attn_qkv", "in_proj_qkv"},
                          {"attn_gate", "in_proj_z"},
                          {"ssm_beta", "in_proj_b"},
                          {"ssm_alpha", "in_proj_a"},
                          {"ssm_out", "out_proj"}}) {
        w.same(b + g + ".weight", la + h + ".weight");
      }
      const uint64_t K = c["linear_conv_kernel_dim"], channels = 2 * c["linear_num_key_heads"].get<uint64_t>() *
                                                                     c["linear_key_head_dim"].get<uint64_t>() +
                                                                 uint64_t(value_width);
      w.reshaped(b + "ssm_conv1d.weight", la + "conv1d.weight", {K, channels});
      w.same(b + "ssm_dt.bias", la + "dt_bias");
      w.f32_of(b + "ssm_a", la + "A_log", {uint64_t(c["linear_num_value_heads"])},
               [&](float v) { return a_sign * -std::exp(v); });
      w.same(b + "ssm_norm.weight", la + "norm.weight");
    }
    w.routed_experts(p, b, c["num_experts"]);
    w.same(b + "ffn_gate_inp_shexp.weight", p + "mlp.shared_expert_gate.weight");
    for (auto [g, h] :
         {std::pair{"ffn_gate_shexp", "gate_proj"}, {"ffn_up_shexp", "up_proj"}, {"ffn_down_shexp", "down_proj"}}) {
      w.same(b + g + ".weight", p + "mlp.shared_expert." + h + ".weight");
    }
  }
  test::write_file(dir / "qwen35moe.gguf", w.b().bytes());
  return dir / "qwen35moe.gguf";
}

// deepseek2 (DeepSeek-V3's MLA, group routing, dense lead layers, shared experts) as llama.cpp's converter writes it
// (DeepseekV2Model): attn_q_a / attn_q_a_norm / attn_q_b (or attn_q), attn_kv_a_mqa, attn_kv_a_norm, attn_kv_b and,
// beside it, the split attn_k_b / attn_v_b its absorbed attention reads (per head kv_b's key rows transposed,
// [nope, kv_lora, heads], and its value rows, [kv_lora, v, heads]); the keys it writes, YaRN's log multiplier 0.1 *
// mscale_all_dim. `split_only` leaves attn_kv_b out (newer conversions); `split_f32` writes the split parts as
// float32 (as a quantized file's parts are read: decoded to float32); `k_dims_swapped` gives attn_k_b the dimensions
// [kv_lora, nope, heads] (the same bytes, a lying file).
std::string deepseek2_gguf(const test::ScratchDir& dir, const std::string& name, bool split_only = false,
                           bool split_f32 = false, bool k_dims_swapped = false) {
  const std::string hf = test::data_path("models/" + name + "/hf");
  const nlohmann::json c = test::read_json(hf + "/config.json");
  const nlohmann::json& rope = c["rope_parameters"];
  const int layers = c["num_hidden_layers"], heads = c["num_attention_heads"];
  const int64_t nope = c["qk_nope_head_dim"], rot = c["qk_rope_head_dim"], v = c["v_head_dim"],
                rank = c["kv_lora_rank"];
  LayoutWriter w(hf);
  const std::string a = "deepseek2";
  common_keys(w, a, c);
  w.u32(a + ".attention.key_length", nope + rot);
  w.u32(a + ".attention.value_length", v);
  w.u32(a + ".rope.dimension_count", rot);
  if (!c["q_lora_rank"].is_null()) w.u32(a + ".attention.q_lora_rank", c["q_lora_rank"]);
  w.u32(a + ".attention.kv_lora_rank", rank);
  w.u32(a + ".expert_count", c["n_routed_experts"]);
  w.u32(a + ".expert_feed_forward_length", c["moe_intermediate_size"]);
  w.u32(a + ".feed_forward_length", c["intermediate_size"]);
  w.u32(a + ".expert_shared_count", c["n_shared_experts"]);
  w.u32(a + ".leading_dense_block_count", c["first_k_dense_replace"]);
  w.f32(a + ".expert_weights_scale", c["routed_scaling_factor"]);
  w.b().key(a + ".expert_weights_norm", GgufType::Bool, c["norm_topk_prob"].get<bool>());
  w.u32(a + ".expert_gating_func", 2);
  w.u32(a + ".expert_group_count", c["n_group"]);
  w.u32(a + ".expert_group_used_count", c["topk_group"]);
  if (rope["rope_type"] == "yarn") {
    w.b().str(a + ".rope.scaling.type", "yarn");
    w.f32(a + ".rope.scaling.factor", rope["factor"]);
    w.u32(a + ".rope.scaling.original_context_length", rope["original_max_position_embeddings"]);
    w.f32(a + ".rope.scaling.yarn_beta_fast", rope["beta_fast"]);
    w.f32(a + ".rope.scaling.yarn_beta_slow", rope["beta_slow"]);
    w.f32(a + ".rope.scaling.yarn_log_multiplier", 0.1 * rope["mscale_all_dim"].get<double>());
  }
  w.same("token_embd.weight", "model.embed_tokens.weight");
  w.same("output_norm.weight", "model.norm.weight");
  w.same("output.weight", "lm_head.weight");
  for (int l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".", b = "blk." + std::to_string(l) + ".";
    const std::string sa = p + "self_attn.";
    w.same(b + "attn_norm.weight", p + "input_layernorm.weight");
    w.same(b + "ffn_norm.weight", p + "post_attention_layernorm.weight");
    if (c["q_lora_rank"].is_null()) {
      w.same(b + "attn_q.weight", sa + "q_proj.weight");
    } else {
      w.same(b + "attn_q_a.weight", sa + "q_a_proj.weight");
      w.same(b + "attn_q_a_norm.weight", sa + "q_a_layernorm.weight");
      w.same(b + "attn_q_b.weight", sa + "q_b_proj.weight");
    }
    w.same(b + "attn_kv_a_mqa.weight", sa + "kv_a_proj_with_mqa.weight");
    w.same(b + "attn_kv_a_norm.weight", sa + "kv_a_layernorm.weight");
    if (!split_only) w.same(b + "attn_kv_b.weight", sa + "kv_b_proj.weight");
    w.split_kv_b(b, sa + "kv_b_proj.weight", heads, nope, v, rank, split_f32, k_dims_swapped);
    w.same(b + "attn_output.weight", sa + "o_proj.weight");
    if (l < c["first_k_dense_replace"].get<int>()) {
      for (auto [g, h] : {std::pair{"ffn_gate", "gate_proj"}, {"ffn_up", "up_proj"}, {"ffn_down", "down_proj"}}) {
        w.same(b + g + ".weight", p + "mlp." + h + ".weight");
      }
      continue;
    }
    w.routed_experts(p, b, c["n_routed_experts"]);
    w.same(b + "exp_probs_b.bias", p + "mlp.gate.e_score_correction_bias");
    for (auto [g, h] :
         {std::pair{"ffn_gate_shexp", "gate_proj"}, {"ffn_up_shexp", "up_proj"}, {"ffn_down_shexp", "down_proj"}}) {
      w.same(b + g + ".weight", p + "mlp.shared_experts." + h + ".weight");
    }
  }
  const std::string file = dir / (name + (split_only ? (split_f32 ? "_split_f32" : "_split") : "") +
                                  (k_dims_swapped ? "_swapped" : "") + ".gguf");
  test::write_file(file, w.b().bytes());
  return file;
}

}  // namespace

// deepseek2 (deepseek2_gguf above) runs as the folder it was written from, bit for bit: every tensor is its bytes, and
// the split attn_k_b / attn_v_b beside attn_kv_b are not a part left unread. The file holds YaRN's mscale_all_dim
// alone (yarn_log_multiplier), which the mapping takes for mscale too: deepseek_v3_a's folder (mscale 1.0,
// mscale_all_dim 0.8) is compared with both 0.8; deepseek_v3_b has no q_lora_rank and no YaRN. A file with only the
// split kv_b runs too.
TEST(GgufModel, Deepseek2InLlamaCppsLayoutRunsAsItsFolder) {
  test::ScratchDir dir("gguf-deepseek2");
  for (const std::string name : {"deepseek_v3_a", "deepseek_v3_b"}) {
    const std::string gguf = deepseek2_gguf(dir, name);
    std::string folder = test::data_path("models/" + name + "/hf");
    if (name == "deepseek_v3_a") {
      const test::ScratchDir copy("gguf-deepseek2-folder");
      std::filesystem::copy(folder, copy.str(), std::filesystem::copy_options::recursive);
      nlohmann::json cfg = test::read_json(copy / "config.json");
      cfg["rope_parameters"]["mscale"] = cfg["rope_parameters"]["mscale_all_dim"];
      test::write_file(copy / "config.json", cfg.dump());
      folder = dir / "folder_a";
      std::filesystem::copy(copy.str(), folder, std::filesystem::copy_options::recursive);
    }
    const GgufModel m = map_gguf_model(GgufFile(gguf));
    EXPECT_STREQ(m.family->model_type, "deepseek_v3");
    const ModelConfig a = m.c, b = read_model_config(folder);
    EXPECT_EQ(a.rope.mscale, b.rope.mscale) << name;
    EXPECT_EQ(a.rope.mscale_all_dim, b.rope.mscale_all_dim) << name;
    for (int l = 0; l < b.num_layers; ++l) {
      EXPECT_EQ(a.plan(l).mla.q_lora_rank, b.plan(l).mla.q_lora_rank) << name << " layer " << l;
      EXPECT_EQ(a.plan(l).mla.softmax_scale, b.plan(l).mla.softmax_scale) << name << " layer " << l;
      EXPECT_EQ(a.has_experts(l), b.has_experts(l)) << name << " layer " << l;
    }
    const std::vector<int32_t> ids = reference_ids(name);
    const std::vector<float> want = logits_of(folder, ids);
    EXPECT_EQ(max_abs_diff(logits_of(gguf, ids), want), 0.0) << name;
    // kv_b only split (newer conversions), put back together: bf16 parts are kv_b's own bytes; float32 parts (as
    // quantized ones are decoded) the same values in another codec, whose kernel need not add in the same order:
    // within float32 rounding of these logits (|logit| up to 30; 0 on the 2-core machine, 2026-12-06).
    EXPECT_EQ(max_abs_diff(logits_of(deepseek2_gguf(dir, name, true), ids), want), 0.0) << name;
    EXPECT_LT(max_abs_diff(logits_of(deepseek2_gguf(dir, name, true, true), ids), want), 1e-4) << name;
  }
  // A split attn_k_b whose dimensions are not [nope, kv_lora, heads]: one error naming it.
  const std::string swapped = test::error_of([&] {
    logits_of(deepseek2_gguf(dir, "deepseek_v3_b", true, false, true), {1, 2});
  });
  EXPECT_NE(swapped.find("tensor 'blk.0.attn_k_b.weight' has dimensions"), std::string::npos) << swapped;
  EXPECT_NE(swapped.find("expected ["), std::string::npos) << swapped;
}

// qwen35moe (Qwen3.5 MoE's text model in llama.cpp's layout, qwen35moe_gguf above) runs as the released folder it was
// written from: the norms read as stored (1 + w) give the folder's own floats, every matrix is its bytes, and only
// the decay rate differs: ssm_a holds A = -exp(A_log) rounded to float32 (half an ulp, 6e-8 relative) where the
// folder's A_log gives exp in double, so the logits (up to about 34 here) agree within 1e-5 (the folder itself is held
// to transformers by golden_test.cpp). A decay rate that is not negative and an ssm.inner_size other than the value
// heads' width are one clear error each.
TEST(GgufModel, Qwen35MoeInLlamaCppsLayoutRunsAsItsFolder) {
  test::ScratchDir dir("gguf-qwen35");
  const std::string gguf = qwen35moe_gguf(dir), folder = test::data_path("models/qwen3_5_moe_a/hf");
  const GgufModel m = map_gguf_model(GgufFile(gguf));
  EXPECT_STREQ(m.family->model_type, "qwen3_5_moe_text");
  const ModelConfig a = m.c, b = read_model_config(folder);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.rope.partial_rotary_factor, b.rope.partial_rotary_factor);
  EXPECT_EQ(a.rope.theta, b.rope.theta);
  EXPECT_EQ(a.norm_weight_offset, 0.0f) << "the file's norms are 1 + w already";
  for (int l = 0; l < b.num_layers; ++l) {
    EXPECT_EQ(a.plan(l).mixer, b.plan(l).mixer) << "layer " << l;
    EXPECT_EQ(a.plan(l).linear.key_heads, b.plan(l).linear.key_heads) << "layer " << l;
    EXPECT_EQ(a.plan(l).linear.value_heads, b.plan(l).linear.value_heads) << "layer " << l;
    EXPECT_EQ(a.plan(l).ffn.shared_width, b.plan(l).ffn.shared_width) << "layer " << l;
  }
  const std::vector<int32_t> ids = reference_ids("qwen3_5_moe_a");
  const std::vector<float> x = logits_of(gguf, ids), y = logits_of(folder, ids);
  EXPECT_LE(max_abs_diff(x, y), 1e-5);

  test::ScratchDir bad("gguf-qwen35-bad");
  const std::string wide = test::error_of([&] { map_gguf_model(GgufFile(qwen35moe_gguf(bad, 80))); });
  EXPECT_NE(wide.find("key 'qwen35moe.ssm.inner_size' is 80, expected 4 value heads x 16 (64)"), std::string::npos)
      << wide;
  const std::string positive = test::error_of([&] { logits_of(qwen35moe_gguf(bad, 0, -1.0f), ids); });
  EXPECT_NE(positive.find("tensor 'blk.0.ssm_a' entry 0 is"), std::string::npos) << positive;
  EXPECT_NE(positive.find("expected a negative decay rate (-exp(A_log))"), std::string::npos) << positive;
}

// olmoe and gpt-oss in llama.cpp's layout (LayoutWriter above): the folder's logits bit for bit, so the mapping reads
// every part where the family's plan needs it (gpt-oss: sinks, the router bias, the experts' gate and up biases
// joined, sliding layers every other one from the first, YaRN untruncated; olmoe: whole-projection q/k norms, clip).
TEST(GgufModel, OlmoeAndGptOssInLlamaCppsLayoutRunAsTheirFolders) {
  test::ScratchDir dir("gguf-layout");
  for (auto [name, gguf] : {std::pair{"olmoe_a", olmoe_gguf(dir)}, std::pair{"gpt_oss_a", gpt_oss_gguf(dir)}}) {
    const std::vector<int32_t> ids = reference_ids(name);
    const std::vector<float> x = logits_of(gguf, ids),
                             y = logits_of(test::data_path("models/" + std::string(name) + "/hf"), ids);
    EXPECT_EQ(max_abs_diff(x, y), 0.0) << name;
    const ModelConfig a = map_gguf_model(GgufFile(gguf)).c,
                      b = read_model_config(test::data_path("models/" + std::string(name) + "/hf"));
    for (int l = 0; l < b.num_layers; ++l) {
      EXPECT_EQ(a.plan(l).attn.window, b.plan(l).attn.window) << name << " layer " << l;
      EXPECT_EQ(a.plan(l).attn.clip_qkv, b.plan(l).attn.clip_qkv) << name << " layer " << l;
    }
    EXPECT_EQ(a.rope.truncate, b.rope.truncate) << name;
  }
}

// Oracle 1: tests/data/gguf/qwen3moe_q4_1.gguf holds the bytes of the packed folder beside it (tools/packed_to_gguf.py:
// Q4_1 is q4_g32 byte for byte, norms widened exactly to f32).
TEST(GgufModel, SameBytesAsThePackedFolderSameLogits) {
  const std::string gguf = test::data_path("gguf/qwen3moe_q4_1.gguf"), packed = test::data_path("gguf/qwen3moe_q4_1");
  const GgufModel m = map_gguf_model(GgufFile(gguf));
  EXPECT_STREQ(m.family->model_type, "qwen3_moe");
  const ModelConfig a = m.c, b = read_model_config(packed);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.num_experts, b.num_experts);
  EXPECT_EQ(a.experts_per_token, b.experts_per_token);
  EXPECT_EQ(a.moe_intermediate_size, b.moe_intermediate_size);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.rope.theta, b.rope.theta);
  EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
  EXPECT_EQ(a.layer_has_experts, b.layer_has_experts);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  const std::vector<int32_t> ids = {1, 7, 33, 2, 63, 0, 12, 45};
  const std::vector<float> x = logits_of(gguf, ids), y = logits_of(packed, ids);
  EXPECT_EQ(max_abs_diff(x, y), 0.0);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0);
}

// Oracle 2: llama.cpp's convert_hf_to_gguf.py on the tiny checkpoints (tests/data/gguf/llama_cpp/README.md). The
// bf16 matrices are the folder's bytes (llama's permuted q/k rows put back), so the logits are the folder's bit for
// bit, and within the golden tolerance of transformers' float64 reference.
class ConvertedCheckpoint : public ::testing::TestWithParam<std::string> {};

TEST_P(ConvertedCheckpoint, LogitsOfTheFolderItWasConvertedFrom) {
  const std::string name = GetParam();
  const std::string gguf = test::data_path("gguf/llama_cpp/" + name + "_bf16.gguf");
  std::string folder = test::data_path("models/" + name + "/hf");
  const std::vector<int32_t> ids = reference_ids(name);
  test::ScratchDir dir("gguf-converted");
  if (name == "glm4_moe_a") {
    // llama.cpp's glm4moe has no group-limited routing (GLM-4.5 has one group), so the converter drops n_group and
    // topk_group; the folder it equals is this one with both 1.
    std::filesystem::copy(folder, dir.str(), std::filesystem::copy_options::recursive);
    nlohmann::json cfg = test::read_json(dir / "config.json");
    cfg["n_group"] = 1;
    cfg["topk_group"] = 1;
    test::write_file(dir / "config.json", cfg.dump());
    folder = dir.str();
  }
  const std::vector<float> x = logits_of(gguf, ids), y = logits_of(folder, ids);
  EXPECT_EQ(max_abs_diff(x, y), 0.0) << name;
  if (name != "glm4_moe_a") {
    EXPECT_LE(max_abs_diff(x, test::read_f32(test::data_path("models/" + name + "/logits.f32"))), 1e-4) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, ConvertedCheckpoint,
                         ::testing::Values("qwen3_moe_a", "mixtral_a", "qwen2_moe_a", "glm4_moe_a"));

// The converted checkpoints map as their folders' configs do: dense layers by the tensors present (mlp_only_layers),
// the tied head, biases, the shared expert, glm4moe's MTP layer stored past block_count - nextn_predict_layers.
TEST(GgufModel, ConvertedConfigsMapAsTheirFolders) {
  for (const char* name : {"qwen3_moe_a", "mixtral_a", "qwen2_moe_a", "glm4_moe_a"}) {
    const GgufModel m = map_gguf_model(GgufFile(test::data_path("gguf/llama_cpp/" + std::string(name) + "_bf16.gguf")));
    const ModelConfig f = read_model_config(test::data_path("models/" + std::string(name) + "/hf"));
    EXPECT_EQ(m.c.model_type, f.model_type);
    EXPECT_EQ(m.c.num_layers, f.num_layers) << name;
    EXPECT_EQ(m.c.layer_has_experts, f.layer_has_experts) << name;
    EXPECT_EQ(m.c.stored_extra_layers, f.stored_extra_layers) << name;
    EXPECT_EQ(m.c.rotary_dim(), f.rotary_dim()) << name;
    EXPECT_EQ(m.c.rope.theta, f.rope.theta) << name;
    for (int l = 0; l < f.num_layers; ++l) {
      EXPECT_EQ(m.c.plan(l).ffn.width, f.plan(l).ffn.width) << name << " layer " << l;
      EXPECT_EQ(m.c.plan(l).ffn.shared_width, f.plan(l).ffn.shared_width) << name << " layer " << l;
      EXPECT_EQ(m.c.plan(l).ffn.shared_gate, f.plan(l).ffn.shared_gate) << name << " layer " << l;
      EXPECT_EQ(m.c.plan(l).ffn.router.renormalize, f.plan(l).ffn.router.renormalize) << name << " layer " << l;
      EXPECT_EQ(m.c.plan(l).ffn.router.scale, f.plan(l).ffn.router.scale) << name << " layer " << l;
      EXPECT_EQ(m.c.plan(l).attn.qkv_bias, f.plan(l).attn.qkv_bias) << name << " layer " << l;
      EXPECT_EQ(m.c.plan(l).attn.qk_norm, f.plan(l).attn.qk_norm) << name << " layer " << l;
    }
  }
}

// llama-quantize's Q8_0 against transformers' float64 forward of its gguf-py-dequantized weights
// (tools/gguf_f64_reference.py, run on the GPU machine). Q8_0 values d * q (f16 d, int8 q) are exact in float32, so
// the two forwards differ only by float32 rounding in ours (1.9e-6 measured, logits of size ~3): 1e-4 is the issue's
// bound and far above that.
TEST(GgufModel, LlamaQuantizeQ8_0AgainstItsDequantizedWeights) {
  const ops::ScopedCpuDot float_dot(ops::CpuDot::Float);  // the float path's definition
  if (!ggml_codec(GgmlType::Q8_0)) GTEST_SKIP() << "Q8_0 is not a codec yet (io/gguf_codec.h)";
  const std::vector<int32_t> ids = {1, 5, 77, 200, 13, 42, 99, 128, 255, 0, 64, 31};
  const std::vector<float> got = logits_of(test::data_path("gguf/llama_cpp/kquant_qwen3moe_q8_0.gguf"), ids);
  const double err =
      max_abs_diff(got, test::read_f32(test::data_path("gguf/llama_cpp/kquant_qwen3moe_q8_0.f64_logits.f32")));
  EXPECT_LE(err, 1e-4);
  std::printf("q8_0: float vs float64 reference %.3g\n", err);
}

// llama-quantize's Q4_K_M, Q6_K and IQ4_XS of kquant_small (make_gguf_goldens.py shrink: the converter's K-quant-sized
// qwen3moe cut to 1 layer and 3 experts), their matrices Q4_K, Q6_K, IQ4_XS and Q8_0.
// - Float path: within 1e-4 of transformers' float64 forward of the file's gguf-py-dequantized weights, as Q8_0 above
//   (every SIMD-decoded weight is gguf-py's value bit for bit, ggml_codec_test.cpp; 1.4e-6 to 1.6e-6 measured).
// - int8 path (--cpu-dot int8): x rounded per 256 values to int8, at most amax/254 from x per element (half a step
//   of 127 levels), where these weights are rounded to at most 6.6 bits (Q6_K: 64 levels per 16 values, half a step
//   amax_16/64), so each product's int8 error is below its weights' quantization error and the int8 logits lie
//   nearer the float path than the float path lies to the unquantized model (Seedling's logits of the shrunk bf16
//   file, kquant_small_bf16_logits.f32): both the largest logit difference and the mean KLD.
class LlamaQuantizeKQuant : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaQuantizeKQuant, FloatPathIsItsDequantizedWeightsAndInt8StaysNearerThanTheWeightsQuantization) {
  const std::vector<int32_t> ids = {1, 5, 77, 200, 13, 42, 99, 128, 255, 0, 64, 31};
  const std::string stem = test::data_path("gguf/llama_cpp/kquant_small_" + GetParam());
  const ops::ScopedCpuDot restore(ops::cpu_dot());  // the mode before, back at the end
  ops::set_cpu_dot(ops::CpuDot::Float);
  const std::vector<float> flt = logits_of(stem + ".gguf", ids);
  ops::set_cpu_dot(ops::CpuDot::Int8);
  const std::vector<float> int8 = logits_of(stem + ".gguf", ids);
  const double f64_err = max_abs_diff(flt, test::read_f32(stem + ".f64_logits.f32"));
  EXPECT_LE(f64_err, 1e-4);
  const std::vector<float> bf16 = test::read_f32(test::data_path("gguf/llama_cpp/kquant_small_bf16_logits.f32"));
  ASSERT_EQ(bf16.size(), flt.size());
  const double int8_err = max_abs_diff(int8, flt), weight_err = max_abs_diff(flt, bf16);
  EXPECT_GT(int8_err, 0.0) << "the int8 path was not taken";
  EXPECT_LT(int8_err, weight_err);
  // Mean KLD(p || q) over the positions, in double.
  const auto kld = [&](const std::vector<float>& p, const std::vector<float>& q) {
    const size_t vocab = p.size() / ids.size();
    double total = 0;
    for (size_t r = 0; r < ids.size(); ++r) {
      const auto log_softmax = [&](const std::vector<float>& l) {
        std::vector<double> out(l.begin() + std::ptrdiff_t(r * vocab), l.begin() + std::ptrdiff_t((r + 1) * vocab));
        const double mx = *std::max_element(out.begin(), out.end());
        double z = 0;
        for (double v : out) z += std::exp(v - mx);
        for (double& v : out) v = v - mx - std::log(z);
        return out;
      };
      const std::vector<double> lp = log_softmax(p), lq = log_softmax(q);
      for (size_t v = 0; v < vocab; ++v) total += std::exp(lp[v]) * (lp[v] - lq[v]);
    }
    return total / double(ids.size());
  };
  const double int8_kld = kld(flt, int8), weight_kld = kld(bf16, flt);
  EXPECT_LT(int8_kld, weight_kld);
  std::printf(
      "%s: float vs float64 reference %.3g; float vs int8 max |dlogit| %.4f, KLD %.3g; bf16 vs float %.4f, "
      "KLD %.3g\n",
      GetParam().c_str(), f64_err, int8_err, int8_kld, weight_err, weight_kld);
}

INSTANTIATE_TEST_SUITE_P(Types, LlamaQuantizeKQuant, ::testing::Values("q4_k_m", "q6_k", "iq4_xs"));

TEST(GgufModel, UnmappedArchitectureNamesTheMappedOnes) {
  EXPECT_HAS(map_error(qwen3moe_keys("falcon")),
             "key 'general.architecture': 'falcon' is not mapped onto a Seedling family (mapped: qwen3moe, llama (with "
             "experts), olmoe, qwen2moe, glm4moe, gpt-oss, qwen35moe, deepseek2)");
}

TEST(GgufModel, MissingRequiredKeyNamesIt) {
  EXPECT_HAS(map_error(qwen3moe_keys("qwen3moe", "embedding_length")),
             "m.gguf: missing key 'qwen3moe.embedding_length' (expected an integer)");
  EXPECT_HAS(map_error(qwen3moe_keys("qwen3moe", "expert_feed_forward_length")),
             "missing key 'qwen3moe.expert_feed_forward_length'");
}

TEST(GgufModel, AValueTheFamilyRefusesNamesTheGgufKey) {
  EXPECT_HAS(map_error(qwen3moe_keys("qwen3moe", "", 3)),
             "key 'qwen3moe.attention.head_count_kv' (config.json's num_key_value_heads): 3 must be "
             "positive and divide num_attention_heads 2");
}

TEST(GgufModel, LlamaWithoutExpertsIsRefused) {
  EXPECT_HAS(map_error(qwen3moe_keys("llama", "expert_count")),
             "key 'llama.expert_count' is missing: a model without routed experts");
}

TEST(GgufModel, RopeScalingTypesAndRefusals) {
  test::GgufBuilder b = qwen3moe_keys();
  b.str("qwen3moe.rope.scaling.type", "yarn")
      .key("qwen3moe.rope.scaling.factor", GgufType::F32, 4.0f)
      .key("qwen3moe.rope.scaling.original_context_length", GgufType::U32, uint32_t(4096));
  test::ScratchDir dir("gguf-rope");
  test::write_file(dir / "y.gguf", b.bytes());
  const GgufModel m = map_gguf_model(GgufFile(dir / "y.gguf"));
  EXPECT_EQ(m.c.rope.type, "yarn");
  EXPECT_EQ(m.c.rope.factor, 4.0);
  EXPECT_EQ(m.c.rope.original_max_position_embeddings, 4096);
  test::GgufBuilder c = qwen3moe_keys();
  c.str("qwen3moe.rope.scaling.type", "longrope");
  EXPECT_HAS(map_error(c),
             "key 'qwen3moe.rope.scaling.type' is 'longrope': not supported (supported: none, linear, yarn)");
  test::GgufBuilder d = qwen3moe_keys();
  d.str("qwen3moe.rope.scaling.type", "yarn").key("qwen3moe.rope.scaling.factor", GgufType::F32, 4.0f);
  EXPECT_HAS(map_error(d), "missing key 'qwen3moe.rope.scaling.original_context_length'");
}

// A type that is not a codec yet is refused by its name, naming the tensor; a tensor no role reads is an Error.
TEST(GgufModel, RefusedTypesAndUnreadTensorsAreNamed) {
  EXPECT_EQ(ggml_codec(GgmlType::Q4_1), Codec::Q4_G32);
  EXPECT_EQ(ggml_codec(GgmlType::BF16), Codec::BF16);
  EXPECT_FALSE(ggml_codec(GgmlType::IQ2_XS));
  EXPECT_HAS(ggml_types_read(), "F32, F16");
  test::ScratchDir dir("gguf-types");
  const std::string mx = test::data_path("gguf/gpt_oss_mxfp4.gguf");
  if (!ggml_codec(GgmlType::MXFP4)) {
    EXPECT_HAS(test::error_of([&] { Model::load(mx); }),
               "gpt_oss_mxfp4.gguf: tensor 'blk.0.ffn_gate_exps.weight' is "
               "MXFP4, which Seedling does not compute on yet");
  }
  // The packed-bytes file with one more tensor: the mapping would drop it.
  const GgufFile src(test::data_path("gguf/qwen3moe_q4_1.gguf"));
  test::GgufBuilder b;
  for (const auto& [key, v] : src.metadata()) {
    if (v.type == GgufType::String) b.str(key, std::string(v.str));
    if (v.type == GgufType::U32) b.key(key, GgufType::U32, uint32_t(v.u));
    if (v.type == GgufType::F32) b.key(key, GgufType::F32, float(v.f));
    if (v.type == GgufType::Bool) b.key(key, GgufType::Bool, uint8_t(v.b));
  }
  for (const GgufTensor& t : src.tensors()) {
    std::vector<uint64_t> dims(t.dims.begin(), t.dims.end());
    b.tensor(t.name, dims, t.type, t.nbytes);
  }
  b.tensor("blk.0.attn_q.bias", {64}, GgmlType::F32, 256);
  test::write_file(dir / "extra.gguf", b.bytes());
  EXPECT_HAS(test::error_of([&] { Model::load(dir / "extra.gguf"); }),
             "extra.gguf: tensor 'blk.0.attn_q.bias' is not read by the qwen3moe mapping (as qwen3_moe), so running "
             "would drop it");
}

}  // namespace seedling
