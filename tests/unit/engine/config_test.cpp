// config.json of real checkpoints (both transformers dialects) parses to the published shapes; values we cannot
// run fail closed with the key and the value in the message.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "core/error.h"
#include "engine/engine.h"
#include "io/safetensors_writer.h"
#include "model/model.h"
#include "test_util.h"

namespace seedling {

namespace {

ModelConfig parse(const nlohmann::json& j) {
  test::ScratchDir dir("cfg");
  test::write_file(dir / "config.json", j.dump());
  return read_model_config(dir.str());
}

nlohmann::json real(const std::string& name) {
  return test::read_json(test::data_path("configs/" + name));
}

std::string error_of(const nlohmann::json& j) {
  try {
    parse(j);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Config, Qwen3_30B_A3B) {
  const ModelConfig c = parse(real("qwen3-30b-a3b.json"));
  EXPECT_EQ(c.model_type, "qwen3_moe");
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_layers, 48);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.experts_per_token, 8);
  EXPECT_EQ(c.moe_intermediate_size, 768);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.rope.theta, 1000000.0);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_FALSE(c.tie_word_embeddings);
  for (uint8_t b : c.layer_has_experts) EXPECT_TRUE(b);
}

TEST(Config, Mixtral_8x7B) {
  const ModelConfig c = parse(real("mixtral-8x7b-v0.1.json"));
  EXPECT_EQ(c.model_type, "mixtral");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.experts_per_token, 2);
  EXPECT_EQ(c.moe_intermediate_size, 14336);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.rope.theta, 1000000.0);
}

TEST(Config, Qwen3_235B_Instruct_2507) {
  const ModelConfig c = parse(real("qwen3-235b-a22b-instruct-2507.json"));
  EXPECT_EQ(c.num_layers, 94);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.max_position_embeddings, 262144);
}

TEST(Config, Transformers5DialectReadsTheSameAs4) {
  // The same model written by transformers 4.x and by 5.x (rope_parameters, num_local_experts, dtype).
  nlohmann::json v4 = real("qwen3-30b-a3b.json");
  nlohmann::json v5 = v4;
  v5.erase("rope_theta");
  v5.erase("rope_scaling");
  v5.erase("torch_dtype");
  v5.erase("num_experts");
  v5["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  v5["num_local_experts"] = 128;
  v5["dtype"] = "bfloat16";
  const ModelConfig a = parse(v4), b = parse(v5);
  EXPECT_EQ(a.rope.theta, b.rope.theta);
  EXPECT_EQ(a.num_experts, b.num_experts);
  EXPECT_EQ(a.dtype, b.dtype);
  // And the tiny golden checkpoints, saved by transformers 5.17, read too.
  const ModelConfig t = read_model_config(test::data_path("models/qwen3_moe_a/hf"));
  EXPECT_EQ(t.num_experts, 8);
  EXPECT_EQ(t.head_dim, 32);
  EXPECT_EQ(t.layer_has_experts, (std::vector<uint8_t>{1, 0, 1}));
  const ModelConfig m = read_model_config(test::data_path("models/mixtral_a/hf"));  // "head_dim": null
  EXPECT_EQ(m.head_dim, 16);
}

TEST(Config, DecoderSparseStepAndMlpOnlyLayersPlanDenseLayers) {
  nlohmann::json j = real("qwen3-30b-a3b.json");
  j["num_hidden_layers"] = 6;
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3};
  EXPECT_EQ(parse(j).layer_has_experts, (std::vector<uint8_t>{0, 1, 0, 0, 0, 1}));
}

TEST(Config, LinearRopeScalingIsReadInBothDialects) {
  nlohmann::json j = real("qwen3-30b-a3b.json");
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  EXPECT_EQ(parse(j).rope.factor, 4.0);
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 5e5}};
  EXPECT_EQ(parse(j).rope.factor, 2.0);
  EXPECT_EQ(parse(j).rope.theta, 5e5);
}

TEST(Config, UnsupportedValuesNameKeyAndValue) {
  nlohmann::json j = real("qwen3-30b-a3b.json");
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 4.0}};
  std::string msg = error_of(j);
  EXPECT_NE(msg.find("rope_scaling.rope_type"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'dynamic'"), std::string::npos) << msg;

  j = real("qwen3-30b-a3b.json");
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};  // yarn needs its original context
  msg = error_of(j);
  EXPECT_NE(msg.find("rope_scaling.original_max_position_embeddings"), std::string::npos) << msg;
  // Beyond int's range (found by fuzz_config: the old check converted it to int first, undefined behaviour) or not
  // a whole number: refused naming the key.
  for (double orig : {642949672964.0, 2147483648.0, 4096.5}) {
    j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", orig}};
    msg = error_of(j);
    EXPECT_NE(msg.find("rope_scaling.original_max_position_embeddings"), std::string::npos) << orig << ": " << msg;
    EXPECT_NE(msg.find("must be a positive integer"), std::string::npos) << orig << ": " << msg;
  }
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 2147483647.0}};
  EXPECT_EQ(parse(j).rope.original_max_position_embeddings, 2147483647);

  j = real("qwen3-30b-a3b.json");
  j["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
  msg = error_of(j);
  EXPECT_NE(msg.find("quantization_config.quant_method"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'gptq'"), std::string::npos) << msg;

  j = real("qwen3-30b-a3b.json");  // Qwen3-30B-A3B-FP8's: read (model/fp8_weights.h), the block size kept
  j["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"weight_block_size", {128, 128}}};
  EXPECT_EQ(parse(j).fp8_block_cols, 128);
  j["quantization_config"]["weight_block_size"] = {128};
  msg = error_of(j);
  EXPECT_NE(msg.find("'quantization_config.weight_block_size'"), std::string::npos) << msg;
  j["quantization_config"]["weight_block_size"] = {128, 128};
  j["quantization_config"]["fmt"] = "e5m2";
  msg = error_of(j);
  EXPECT_NE(msg.find("'quantization_config.fmt'"), std::string::npos) << msg;

  j = real("qwen3-30b-a3b.json");
  j["hidden_act"] = "gelu";
  msg = error_of(j);
  EXPECT_NE(msg.find("hidden_act"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'gelu'"), std::string::npos) << msg;

  j["model_type"] = "llama4";
  msg = error_of(j);
  EXPECT_NE(msg.find("model_type"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'llama4'"), std::string::npos) << msg;

  j = real("qwen3-30b-a3b.json");
  j["hidden_size"] = "2048";
  msg = error_of(j);
  EXPECT_NE(msg.find("hidden_size"), std::string::npos) << msg;

  j = real("qwen3-30b-a3b.json");
  j["num_experts_per_tok"] = 200;
  msg = error_of(j);
  EXPECT_NE(msg.find("num_experts_per_tok"), std::string::npos) << msg;

  j = real("qwen3-30b-a3b.json");
  j.erase("num_experts");
  msg = error_of(j);
  EXPECT_NE(msg.find("num_experts or num_local_experts"), std::string::npos) << msg;
}

// The configs transformers 5.17 wrote for the tiny checkpoints (tests/data/models) parse to their layer plans.
nlohmann::json tiny(const std::string& name) {
  return test::read_json(test::data_path("models/" + name + "/hf/config.json"));
}

TEST(Config, GptOssPlanAlternatesWindowsWithSinksYarnAndTopKSoftmax) {
  const ModelConfig c = parse(tiny("gpt_oss_a"));
  ASSERT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.plan(0).attn.window, 6);  // layer_types: sliding, full
  EXPECT_EQ(c.plan(1).attn.window, 0);
  EXPECT_TRUE(c.plan(0).attn.sinks && c.plan(0).attn.qkv_bias && c.plan(0).attn.o_bias);
  EXPECT_EQ(c.plan(0).ffn.router.gating, Gating::TopKSoftmax);
  EXPECT_TRUE(c.plan(0).ffn.router.bias && c.plan(0).ffn.expert_bias);
  EXPECT_EQ(c.plan(0).ffn.act, Activation::ClampedSwiGLU);
  EXPECT_EQ(c.plan(0).ffn.swiglu_limit, 7.0f);
  EXPECT_EQ(c.rope.type, "yarn");
  EXPECT_EQ(c.rope.factor, 8.0);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 64);
  EXPECT_FALSE(c.rope.truncate);
}

TEST(Config, Glm4MoePlanHasADenseFirstLayerGroupRoutingAndPartialRotary) {
  const ModelConfig c = parse(tiny("glm4_moe_a"));
  EXPECT_EQ(c.plan(0).ffn.kind, FfnKind::Dense);
  EXPECT_EQ(c.plan(0).ffn.width, 96);
  const FfnPlan& f = c.plan(1).ffn;
  EXPECT_EQ(f.kind, FfnKind::Moe);
  EXPECT_EQ(f.router.gating, Gating::SigmoidGroupTopK);
  EXPECT_TRUE(f.router.correction_bias && f.router.renormalize);
  EXPECT_EQ(f.router.n_group, 2);
  EXPECT_EQ(f.router.topk_group, 1);
  EXPECT_EQ(f.router.scale, 2.5f);
  EXPECT_EQ(f.shared_width, 32);
  EXPECT_EQ(c.rotary_dim(), 16);  // head_dim 32, partial_rotary_factor 0.5
}

TEST(Config, OlmoeAndQwen2MoePlans) {
  const ModelConfig o = parse(tiny("olmoe_a"));
  EXPECT_EQ(o.plan(0).attn.qk_norm, QkNorm::Whole);
  EXPECT_EQ(o.plan(0).attn.clip_qkv, 2.5f);
  EXPECT_FALSE(o.plan(0).ffn.router.renormalize);
  const ModelConfig q = parse(tiny("qwen2_moe_a"));
  EXPECT_TRUE(q.plan(0).attn.qkv_bias);
  EXPECT_FALSE(q.plan(0).attn.o_bias);
  EXPECT_EQ(q.plan(0).ffn.shared_width, 48);
  EXPECT_TRUE(q.plan(0).ffn.shared_gate);
  EXPECT_EQ(q.plan(2).ffn.kind, FfnKind::Dense);  // mlp_only_layers [2]
}

// Integers are never truncated to fit (2^32 read as an int is 0), and a norm epsilon must be a positive number.
TEST(Config, IntegersPastInt32AndBadEpsilonAreErrors) {
  nlohmann::json j = real("qwen3-30b-a3b.json");
  j["eos_token_id"] = 4294967296ULL;
  std::string msg = error_of(j);
  EXPECT_NE(msg.find("eos_token_id"), std::string::npos) << msg;
  j = real("qwen3-30b-a3b.json");
  j["mlp_only_layers"] = {1, 4294967297ULL};
  msg = error_of(j);
  EXPECT_NE(msg.find("mlp_only_layers"), std::string::npos) << msg;
  j = real("qwen3-30b-a3b.json");
  j["num_hidden_layers"] = 18446744073709551615ULL;
  msg = error_of(j);
  EXPECT_NE(msg.find("num_hidden_layers"), std::string::npos) << msg;
  j = real("qwen3-30b-a3b.json");
  j["rms_norm_eps"] = -1;
  msg = error_of(j);
  EXPECT_NE(msg.find("rms_norm_eps"), std::string::npos) << msg;
}

// Found by tests/fuzz/fuzz_config.cpp (a gpt_oss config with num_hidden_layers -2): each family sized its layer plan
// by the count before it was checked, so a negative one threw std::length_error past every handler.
TEST(Config, ANegativeOrHugeLayerCountIsAnErrorInEveryFamily) {
  const std::vector<nlohmann::json> configs = {real("qwen3-30b-a3b.json"),
                                               real("mixtral-8x7b-v0.1.json"),
                                               test::read_json(test::data_path("models/gpt_oss_a/hf/config.json")),
                                               test::read_json(test::data_path("models/glm4_moe_a/hf/config.json")),
                                               test::read_json(test::data_path("models/olmoe_a/hf/config.json")),
                                               test::read_json(test::data_path("models/qwen2_moe_a/hf/config.json"))};
  for (nlohmann::json j : configs) {
    for (int64_t layers : {int64_t(-2), int64_t(0), int64_t(1000000)}) {
      j["num_hidden_layers"] = layers;
      const std::string msg = error_of(j);
      EXPECT_NE(msg.find("num_hidden_layers"), std::string::npos) << j["model_type"] << " " << layers << ": " << msg;
    }
  }
}

TEST(Config, PlanValuesAFamilyCannotRunNameTheKey) {
  nlohmann::json j = tiny("gpt_oss_a");
  j["layer_types"] = {"sliding_attention", "chunked_attention"};
  std::string msg = error_of(j);
  EXPECT_NE(msg.find("layer_types"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'chunked_attention'"), std::string::npos) << msg;
  j["layer_types"] = {"full_attention"};
  msg = error_of(j);
  EXPECT_NE(msg.find("layer_types"), std::string::npos) << msg;

  j = tiny("glm4_moe_a");
  j["n_group"] = 3;  // 8 experts
  msg = error_of(j);
  EXPECT_NE(msg.find("'n_group'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("divide the 8 experts"), std::string::npos) << msg;
  j = tiny("glm4_moe_a");
  j["topk_group"] = 3;  // n_group 2
  msg = error_of(j);
  EXPECT_NE(msg.find("'topk_group'"), std::string::npos) << msg;
  j = tiny("glm4_moe_a");
  j["first_k_dense_replace"] = 9;
  msg = error_of(j);
  EXPECT_NE(msg.find("first_k_dense_replace"), std::string::npos) << msg;
  j = tiny("glm4_moe_a");
  j["partial_rotary_factor"] = 0.01;
  j["rope_parameters"].erase("partial_rotary_factor");
  msg = error_of(j);
  EXPECT_NE(msg.find("partial_rotary_factor"), std::string::npos) << msg;
}

// A copy of the checkpoint folder src (its tensors in one safetensors file, plus config.json) in dir, without the
// tensors `keep` refuses; `edit` sees each tensor's bytes as they are written and may change them.
using TensorEdit = std::function<void(const std::string& name, uint8_t* bytes, size_t offset)>;
void copy_checkpoint(const std::string& src, const std::string& dir,
                     const std::function<bool(const std::string&)>& keep, const TensorEdit& edit) {
  const Checkpoint ck(src);
  SafetensorsWriter w;
  for (const auto& [name, t] : ck.all()) {
    if (!keep(name)) continue;
    w.add(name, t->dtype, t->shape, [t = t, name = name, &edit](uint8_t* out, size_t offset, size_t bytes) {
      std::memcpy(out, t->data + offset, bytes);
      edit(name, out, offset);
    });
  }
  w.write(dir + "/model.safetensors");
  std::filesystem::copy_file(src + "/config.json", dir + "/config.json");
}

// A released-layout MXFP4 folder with one `*_scales` tensor left out: the error names the tensor that is missing.
TEST(ModelLoad, MissingMxfp4ScalesNameTheTensor) {
  test::ScratchDir dir("mxfp4");
  const std::string src = test::data_path("models/gpt_oss_mxfp4/hub");
  const std::string dropped = "model.layers.1.mlp.experts.down_proj_scales";
  copy_checkpoint(
      src, dir.str(), [&](const std::string& name) { return name != dropped; },
      [](const std::string&, uint8_t*, size_t) {});
  const std::string msg = test::error_of([&] { Model::load(dir.str()); });
  EXPECT_NE(msg.find(dropped), std::string::npos) << msg;
  EXPECT_NE(msg.find("e8m0 scales"), std::string::npos) << msg;
}

// A NaN in a weight (here one element of the final norm, bf16 0x7fc0) is an error at the first forward, naming the
// model, never a token sampled from NaN logits.
TEST(ModelLoad, NanWeightIsAnErrorNotAToken) {
  test::ScratchDir dir("nan");
  const std::string src = test::data_path("models/qwen3_moe_a/hf");
  copy_checkpoint(
      src, dir.str(), [](const std::string&) { return true; },
      [](const std::string& name, uint8_t* bytes, size_t offset) {
        if (name == "model.norm.weight" && offset == 0) {
          bytes[0] = 0xc0;
          bytes[1] = 0x7f;
        }
      });
  auto model = Model::load(dir.str());
  Engine engine(*model, {});
  const int seq = engine.add_sequence();
  const std::vector<int32_t> ids = {5, 6, 7};
  SequenceStep step{seq, ids, false};
  const std::string msg = test::error_of([&] { engine.step({&step, 1}); });
  EXPECT_NE(msg.find("non-finite logit"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir.str()), std::string::npos) << msg;
}

// num_hidden_layers smaller than the checkpoint: the layers past it would be dropped; an Error names one of them.
TEST(ModelLoad, FewerLayersThanTheCheckpointIsAnError) {
  test::ScratchDir dir("layers");
  const std::string src = test::data_path("models/qwen3_moe_a/hf");
  std::filesystem::copy_file(src + "/model.safetensors", dir / "model.safetensors");
  nlohmann::json cfg = test::read_json(src + "/config.json");
  cfg["num_hidden_layers"] = 2;  // the checkpoint has 3
  cfg["mlp_only_layers"] = {1};
  test::write_file(dir / "config.json", cfg.dump());
  const std::string msg = test::error_of([&] { Model::load(dir.str()); });
  EXPECT_NE(msg.find("model.layers.2."), std::string::npos) << msg;
  EXPECT_NE(msg.find("num_hidden_layers is 2"), std::string::npos) << msg;
}

TEST(ModelLoad, WrongTensorShapeNamesTheTensorAndBothShapes) {
  test::ScratchDir dir("load");
  const std::string src = test::data_path("models/mixtral_a/hf");
  std::filesystem::copy_file(src + "/model.safetensors", dir / "model.safetensors");
  nlohmann::json cfg = test::read_json(src + "/config.json");
  cfg["intermediate_size"] = 48;  // the checkpoint's experts are 40 wide
  test::write_file(dir / "config.json", cfg.dump());
  try {
    Model::load(dir.str());
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("block_sparse_moe.experts.0.w1.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[40, 64]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[48, 64]"), std::string::npos) << msg;
  }
}

TEST(ModelLoad, MissingConfigAndMissingFolderAreClear) {
  test::ScratchDir dir("load");
  EXPECT_THROW(
      {
        try {
          Model::load(dir.str());
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("missing config.json"), std::string::npos);
          throw;
        }
      },
      Error);
  EXPECT_THROW(Model::load(dir / "nope"), Error);
}

}  // namespace seedling
