// Every tiny checkpoint against transformers 5.x (tools/make_model_goldens.py made the references: float32 for the
// four first ones, float64 for the others, whose error is then our float32 arithmetic alone).
#include <gtest/gtest.h>

#include <cmath>

#include "engine/engine.h"
#include "engine/generate.h"
#include "model/model.h"
#include "test_util.h"

namespace seedling {

namespace {
// Every model with the layouts its folder holds (hf/: as transformers saves it; hub/: as the Hub releases it).
const std::vector<std::string> kModels = {"qwen3_moe_a",   "qwen3_moe_b",    "mixtral_a",  "mixtral_b",
                                          "olmoe_a",       "qwen2_moe_a",    "glm4_moe_a", "gpt_oss_a",
                                          "gpt_oss_mxfp4", "deepseek_v3_fp8"};
const std::vector<std::string> kHfOnly = {"deepseek_v3_a", "deepseek_v3_b"};
// Against a float64 reference our float32 forward is off by float32 rounding: about 1e-5 of logits of size 30-40.
// Against the float32 references of the first four both sides round, so they keep the bound they were made with.
double tolerance(const nlohmann::json& ref) {
  return ref.value("reference_dtype", "float32") == "float64" ? 1e-4 : 1e-3;
}
const std::vector<std::string> kLayouts = {"hf", "hub"};
std::vector<std::tuple<std::string, std::string>> cases() {
  std::vector<std::tuple<std::string, std::string>> out;
  for (const std::string& m : kModels) {
    for (const std::string& l : kLayouts) out.emplace_back(m, l);
  }
  for (const std::string& m : kHfOnly) out.emplace_back(m, "hf");
  return out;
}
}  // namespace

class GoldenTest : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(GoldenTest, LogitsWithinToleranceAndGreedyEqualsTransformers) {
  const auto [name, layout] = GetParam();
  const std::string dir = test::data_path("models/" + name);
  const auto ref = test::read_json(dir + "/reference.json");
  const std::vector<float> want = test::read_f32(dir + "/logits.f32");
  auto model = Model::load(dir + "/" + layout);
  const int V = model->config().vocab_size;
  const std::vector<int32_t> ids = ref["ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(want.size(), ids.size() * size_t(V));

  Engine engine(*model, {});
  const int seq = engine.add_sequence();
  SequenceStep step{seq, ids, true};
  const std::vector<float> got = engine.step({&step, 1});
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - double(want[i])));
  EXPECT_LE(worst, tolerance(ref)) << name << "/" << layout;
  RecordProperty("max_abs_logit_error", std::to_string(worst));

  GenerateOptions go;
  go.max_new_tokens = 12;
  const GenerateResult r = generate(engine, ids, go);
  EXPECT_EQ(r.tokens, ref["greedy"].get<std::vector<int32_t>>()) << name << "/" << layout;
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, GoldenTest, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

}  // namespace seedling
