// compare_logits: a model against itself gives KLD exactly 0, full top-1 agreement and the perplexity that
// perplexity() gives over the same windows; against another model of the same vocabulary KLD > 0, with max >= mean.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/perplexity.h"
#include "model/model.h"
#include "test_util.h"

namespace seedling {

TEST(CompareLogits, SelfIsExactlyZeroAndMatchesPerplexity) {
  auto model = Model::load(test::data_path("models/qwen3_moe_a/hf"));
  std::vector<int32_t> ids = test::golden_ids("qwen3_moe_a");
  const int ctx = 8;
  Engine a(*model, {}), b(*model, {});
  const LogitComparison c = compare_logits(a, b, ids, ctx);
  EXPECT_EQ(c.kld_mean, 0.0);
  EXPECT_EQ(c.kld_max, 0.0);
  EXPECT_EQ(c.top1_agreement, 1.0);
  const PerplexityResult p = perplexity(a, ids, ctx);
  EXPECT_EQ(c.ref.windows, p.windows);
  EXPECT_EQ(c.ref.scored, p.scored);
  EXPECT_EQ(c.ref.mean_nll, p.mean_nll);
  EXPECT_EQ(c.test.mean_nll, p.mean_nll);
}

TEST(CompareLogits, AnotherModelHasPositiveKld) {
  auto ref = Model::load(test::data_path("models/qwen3_moe_a/hf"));
  auto other = Model::load(test::data_path("models/qwen3_moe_b/hf"));
  std::vector<int32_t> ids = test::golden_ids("qwen3_moe_a");
  Engine a(*ref, {}), b(*other, {});
  const LogitComparison c = compare_logits(a, b, ids, 8);
  EXPECT_GT(c.kld_mean, 0.0);
  EXPECT_GE(c.kld_max, c.kld_mean);
  EXPECT_LT(c.top1_agreement, 1.0);
  EXPECT_NE(c.ref.mean_nll, c.test.mean_nll);
}

}  // namespace seedling
