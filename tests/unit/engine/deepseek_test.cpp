// deepseek_v3 / kimi_k2 (model/deepseek_v3.cpp): config.json to the MLA plan and DeepSeek's router; kimi_k2 the same
// architecture (its tiktoken tokenizer refused by name: tests/unit/text/tokenizer_unit_test.cpp); values it cannot
// run refused naming the key.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "engine/engine.h"
#include "model/model.h"
#include "test_util.h"

namespace seedling {

namespace {

const std::string kTiny = "models/deepseek_v3_a/hf";

nlohmann::json tiny_config() {
  return test::read_json(test::data_path(kTiny + "/config.json"));
}

std::string error_of(const nlohmann::json& j) {
  test::ScratchDir dir("dsv3");
  test::write_file(dir / "config.json", j.dump());
  try {
    read_model_config(dir.str());
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<float> logits_of(const std::string& dir, const std::vector<int32_t>& ids) {
  auto model = Model::load(dir);
  Engine engine(*model, {});
  SequenceStep step{engine.add_sequence(), ids, true};
  return engine.step({&step, 1});
}

}  // namespace

TEST(Deepseek, TinyConfigIsMlaWithYarnScaleAndGroupRouting) {
  const ModelConfig c = read_model_config(test::data_path(kTiny));
  ASSERT_EQ(c.num_layers, 3);
  EXPECT_FALSE(c.has_experts(0));  // first_k_dense_replace 1
  for (int l = 0; l < 3; ++l) {
    const LayerPlan& p = c.plan(l);
    EXPECT_EQ(p.mixer, Mixer::Mla);
    EXPECT_EQ(p.mla.q_lora_rank, 32);
    EXPECT_EQ(p.mla.kv_lora_rank, 32);
    EXPECT_EQ(p.mla.cache_width(), 40);
    EXPECT_TRUE(p.mla.rope_interleave);
    // 24^-0.5 * (0.1 * 0.8 * ln 4 + 1)^2, as yarn_apply_mscale
    const double m = 0.1 * 0.8 * std::log(4.0) + 1.0;
    EXPECT_NEAR(p.mla.softmax_scale, m * m / std::sqrt(24.0), 1e-7);
  }
  const RouterPlan& r = c.plan(1).ffn.router;
  EXPECT_EQ(r.gating, Gating::SigmoidGroupTopK);
  EXPECT_TRUE(r.correction_bias && r.masked_neg_inf && r.renormalize);
  EXPECT_EQ(r.n_group, 4);
  EXPECT_EQ(r.topk_group, 2);
  EXPECT_FLOAT_EQ(r.scale, 2.5f);
  EXPECT_EQ(c.plan(1).ffn.shared_width, 32);
  EXPECT_EQ(c.stored_extra_layers, 1);
  const std::vector<KvLayerShape> shapes = cache_shapes(c);
  EXPECT_EQ(shapes[0].key_width, 40);
  EXPECT_EQ(shapes[0].value_width, 0);
}

TEST(Deepseek, WithoutQLoraRankQProjIsRead) {
  const ModelConfig c = read_model_config(test::data_path("models/deepseek_v3_b/hf"));
  EXPECT_EQ(c.plan(0).mla.q_lora_rank, 0);
  EXPECT_FLOAT_EQ(c.plan(0).mla.softmax_scale, 1.0f / 4.0f);  // default RoPE: 16^-0.5
  bool has_q = false;
  const Family& f = family_for("deepseek_v3", "config.json");
  for (const TensorSpec& t : layer_tensors(c, f, 0)) has_q = has_q || t.role == Role::Q;
  EXPECT_TRUE(has_q);
}

TEST(Deepseek, BadKeysAreRefusedByName) {
  auto with = [](const char* key, nlohmann::json v) {
    nlohmann::json j = tiny_config();
    if (v.is_discarded()) {
      j.erase(key);
    } else {
      j[key] = v;
    }
    return error_of(j);
  };
  EXPECT_NE(with("topk_group", 5).find("'topk_group'"), std::string::npos) << with("topk_group", 5);
  EXPECT_NE(with("n_group", 3).find("'n_group'"), std::string::npos);
  EXPECT_NE(with("scoring_func", "softmax").find("'scoring_func'"), std::string::npos);
  EXPECT_NE(with("topk_method", "greedy").find("'topk_method'"), std::string::npos);
  EXPECT_NE(with("attention_bias", true).find("'attention_bias'"), std::string::npos);
  EXPECT_NE(with("qk_rope_head_dim", 7).find("'qk_rope_head_dim'"), std::string::npos);
  EXPECT_NE(with("kv_lora_rank", nlohmann::json::value_t::discarded).find("'kv_lora_rank'"), std::string::npos);
  EXPECT_NE(with("q_lora_rank", nlohmann::json::value_t::discarded).find("'q_lora_rank'"), std::string::npos);
}

// Kimi-K2 is DeepSeek-V3 under model_type kimi_k2: the same weights give the same bits; ids run without
// a tokenizer.json.
TEST(Deepseek, KimiK2IsTheSameArchitecture) {
  test::ScratchDir dir("kimi");
  const std::string src = test::data_path(kTiny);
  nlohmann::json cfg = tiny_config();
  cfg["model_type"] = "kimi_k2";
  test::write_file(dir / "config.json", cfg.dump());
  std::filesystem::copy_file(src + "/model.safetensors", dir / "model.safetensors");
  test::write_file(dir / "tiktoken.model", "aGVsbG8= 0\n");
  const std::vector<int32_t> ids = {5, 9, 200, 31, 7};
  EXPECT_EQ(logits_of(dir.str(), ids), logits_of(src, ids));
}

}  // namespace seedling
