// GGUF files as models (model/gguf_config.h, model/gguf_source.h): the same bytes as a packed folder give the same
// logits bit for bit; files written by llama.cpp's own converter (tests/data/gguf/llama_cpp/) give the logits of the
// Hugging Face folders they were converted from; every missing key, unmapped architecture, refused type and tensor
// left unread is one Error naming the file and the key or tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "engine/engine.h"
#include "gguf_builder.h"
#include "io/gguf_codec.h"
#include "model/gguf_config.h"
#include "model/model.h"
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

// The metadata of a small qwen3moe: every key the mapping reads, no tensors.
test::GgufBuilder qwen3moe_keys(const std::string& arch = "qwen3moe") {
  test::GgufBuilder b;
  b.str("general.architecture", arch)
      .key(arch + ".block_count", GgufType::U32, uint32_t(2))
      .key(arch + ".embedding_length", GgufType::U32, uint32_t(64))
      .key(arch + ".attention.head_count", GgufType::U32, uint32_t(2))
      .key(arch + ".attention.head_count_kv", GgufType::U32, uint32_t(1))
      .key(arch + ".attention.key_length", GgufType::U32, uint32_t(32))
      .key(arch + ".attention.layer_norm_rms_epsilon", GgufType::F32, 1e-6f)
      .key(arch + ".expert_count", GgufType::U32, uint32_t(4))
      .key(arch + ".expert_used_count", GgufType::U32, uint32_t(2))
      .key(arch + ".expert_feed_forward_length", GgufType::U32, uint32_t(32))
      .key(arch + ".vocab_size", GgufType::U32, uint32_t(64));
  return b;
}

std::string map_error(const test::GgufBuilder& b) {
  test::ScratchDir dir("gguf-map");
  test::write_file(dir / "m.gguf", b.bytes());
  return test::error_of([&] { map_gguf_model(GgufFile(dir / "m.gguf")); });
}

}  // namespace

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

// llama-quantize's Q8_0 against the float model of its gguf-py-dequantized weights (make_gguf_goldens.py
// dequantize). Q8_0 values d * q (f16 d, int8 q) are exact in float32, so the two forwards differ only in the order
// of float32 additions: 1e-4 is far above that (logits of size ~3).
TEST(GgufModel, LlamaQuantizeQ8_0AgainstItsDequantizedWeights) {
  if (!ggml_codec(GgmlType::Q8_0)) GTEST_SKIP() << "Q8_0 is not a codec yet (io/gguf_codec.h)";
  const std::vector<int32_t> ids = {1, 5, 77, 200, 13, 42, 99, 128, 255, 0, 64, 31};
  const std::vector<float> got = logits_of(test::data_path("gguf/llama_cpp/kquant_qwen3moe_q8_0.gguf"), ids);
  EXPECT_LE(
      max_abs_diff(got, test::read_f32(test::data_path("gguf/llama_cpp/kquant_qwen3moe_q8_0.dequantized_logits.f32"))),
      1e-4);
}

TEST(GgufModel, UnmappedArchitectureNamesTheMappedOnes) {
  EXPECT_HAS(map_error(qwen3moe_keys("falcon")),
             "key 'general.architecture': 'falcon' is not mapped onto a Seedling family (mapped: qwen3moe, llama (with "
             "experts), olmoe, qwen2moe, glm4moe, gpt-oss)");
}

TEST(GgufModel, MissingRequiredKeyNamesIt) {
  test::GgufBuilder b;
  b.str("general.architecture", "qwen3moe").key("qwen3moe.vocab_size", GgufType::U32, uint32_t(64));
  EXPECT_HAS(map_error(b), "m.gguf: missing key 'qwen3moe.embedding_length' (expected an integer)");
  test::GgufBuilder c;
  c.str("general.architecture", "qwen3moe")
      .key("qwen3moe.vocab_size", GgufType::U32, uint32_t(64))
      .key("qwen3moe.block_count", GgufType::U32, uint32_t(2))
      .key("qwen3moe.embedding_length", GgufType::U32, uint32_t(64))
      .key("qwen3moe.attention.head_count", GgufType::U32, uint32_t(2))
      .key("qwen3moe.attention.layer_norm_rms_epsilon", GgufType::F32, 1e-6f)
      .key("qwen3moe.expert_count", GgufType::U32, uint32_t(4))
      .key("qwen3moe.expert_used_count", GgufType::U32, uint32_t(2));
  EXPECT_HAS(map_error(c), "missing key 'qwen3moe.expert_feed_forward_length'");
}

TEST(GgufModel, AValueTheFamilyRefusesNamesTheGgufKey) {
  test::GgufBuilder d;
  d.str("general.architecture", "qwen3moe")
      .key("qwen3moe.vocab_size", GgufType::U32, uint32_t(64))
      .key("qwen3moe.block_count", GgufType::U32, uint32_t(2))
      .key("qwen3moe.embedding_length", GgufType::U32, uint32_t(64))
      .key("qwen3moe.attention.head_count", GgufType::U32, uint32_t(2))
      .key("qwen3moe.attention.head_count_kv", GgufType::U32, uint32_t(3))
      .key("qwen3moe.attention.layer_norm_rms_epsilon", GgufType::F32, 1e-6f)
      .key("qwen3moe.expert_count", GgufType::U32, uint32_t(4))
      .key("qwen3moe.expert_used_count", GgufType::U32, uint32_t(2))
      .key("qwen3moe.expert_feed_forward_length", GgufType::U32, uint32_t(32));
  EXPECT_HAS(map_error(d),
             "key 'qwen3moe.attention.head_count_kv' (config.json's num_key_value_heads): 3 must be "
             "positive and divide num_attention_heads 2");
}

TEST(GgufModel, LlamaWithoutExpertsIsRefused) {
  test::GgufBuilder b;
  b.str("general.architecture", "llama")
      .key("llama.vocab_size", GgufType::U32, uint32_t(64))
      .key("llama.block_count", GgufType::U32, uint32_t(2))
      .key("llama.embedding_length", GgufType::U32, uint32_t(64))
      .key("llama.attention.head_count", GgufType::U32, uint32_t(2))
      .key("llama.attention.layer_norm_rms_epsilon", GgufType::F32, 1e-5f);
  EXPECT_HAS(map_error(b), "key 'llama.expert_count' is missing: a model without routed experts");
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
  EXPECT_FALSE(ggml_codec(GgmlType::Q2_K));
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
