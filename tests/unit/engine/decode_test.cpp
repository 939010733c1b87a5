// Decode paths agree: token by token after a prefill = one full-prompt forward; KV growth changes nothing;
// sequences decoded together = each decoded alone, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "model/model.h"
#include "test_util.h"

namespace seedling {

namespace {
std::vector<int32_t> ids_of(const std::string& name) {
  return test::read_json(test::data_path("models/" + name + "/reference.json"))["ids"].get<std::vector<int32_t>>();
}
}  // namespace

class DecodeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DecodeTest, TokenByTokenEqualsFullPromptAcrossKvGrowth) {
  auto model = Model::load(test::data_path("models/" + GetParam() + "/hf"));
  const int V = model->config().vocab_size;
  const std::vector<int32_t> ids = ids_of(GetParam());  // 24 tokens
  Engine whole(*model, {});
  const int a = whole.add_sequence();
  SequenceStep all{a, ids, true};
  const std::vector<float> full = whole.step({&all, 1});

  EngineOptions small;
  small.kv_initial_positions = 2;  // grows 2 -> 4 -> 8 -> 16 -> 32 while decoding
  Engine stepwise(*model, small);
  const int b = stepwise.add_sequence();
  const size_t prefill = 3;
  SequenceStep first{b, {ids.data(), prefill}, true};
  std::vector<float> got = stepwise.step({&first, 1});
  std::vector<int> capacities;
  for (size_t i = prefill; i < ids.size(); ++i) {
    SequenceStep one{b, {&ids[i], 1}, true};
    const std::vector<float> row = stepwise.step({&one, 1});
    got.insert(got.end(), row.begin(), row.end());
    capacities.push_back(stepwise.kv(b).capacity());
  }
  EXPECT_EQ(capacities.back(), 32);
  EXPECT_EQ(capacities.front(), 4);
  ASSERT_EQ(got.size(), full.size());
  // Each row's arithmetic does not depend on which rows share its forward or on the cache's capacity: bit for bit.
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - double(full[i])));
  EXPECT_EQ(std::memcmp(got.data(), full.data(), got.size() * sizeof(float)), 0) << "max |diff| " << worst;
  (void)V;
}

// Decode's attention cuts a row's keys into chunks, and a KV head's query heads into shares, when a forward has fewer
// rows x KV heads than threads: the same bits at any thread count (16 threads on a 2-core machine run every split),
// over 140 positions so the keys span two chunks.
TEST_P(DecodeTest, TokenByTokenGivesTheSameBitsAtAnyThreadCount) {
  auto model = Model::load(test::data_path("models/" + GetParam() + "/hf"));
  const std::vector<int32_t> base = ids_of(GetParam());
  std::vector<int32_t> ids;
  for (size_t i = 0; ids.size() < 140; ++i) ids.push_back(base[i % base.size()]);
  const int threads = ThreadPool::global().size();
  const auto decode = [&](int t) {
    ThreadPool::set_global_threads(t);
    Engine e(*model, {});
    const int seq = e.add_sequence();
    SequenceStep first{seq, {ids.data(), 3}, true};
    std::vector<float> got = e.step({&first, 1});
    for (size_t i = 3; i < ids.size(); ++i) {
      SequenceStep one{seq, {&ids[i], 1}, true};
      const std::vector<float> row = e.step({&one, 1});
      got.insert(got.end(), row.begin(), row.end());
    }
    return got;
  };
  const std::vector<float> one = decode(1), three = decode(3), sixteen = decode(16);
  ThreadPool::set_global_threads(threads);  // before any assertion can return
  for (const auto* many : {&three, &sixteen}) {
    ASSERT_EQ(many->size(), one.size());
    EXPECT_EQ(std::memcmp(many->data(), one.data(), one.size() * sizeof(float)), 0)
        << (many == &three ? 3 : 16) << " threads";
  }
}

// Batched = alone holds for every family, the hybrid ones too: each sequence's rows run their own conv window and
// recurrent state, whatever other sequences share the forward.
class BatchedDecodeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchedDecodeTest, BatchedDecodeOfThreeSequencesEqualsEachAloneBitForBit) {
  auto model = Model::load(test::data_path("models/" + GetParam() + "/hf"));
  const int V = model->config().vocab_size;
  const std::vector<int32_t> ids = ids_of(GetParam());
  const size_t lengths[3] = {5, 17, 11};
  const int steps = 6;
  // Alone: each sequence prefilled and greedily decoded by itself.
  std::vector<std::vector<float>> alone(3);
  std::vector<std::vector<int32_t>> alone_tokens(3);
  for (int s = 0; s < 3; ++s) {
    Engine e(*model, {});
    const int seq = e.add_sequence();
    SequenceStep p{seq, {ids.data() + s, lengths[s]}, false};
    std::vector<float> l = e.step({&p, 1});
    for (int t = 0; t < steps; ++t) {
      int32_t tok = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
      alone_tokens[size_t(s)].push_back(tok);
      SequenceStep d{seq, {&alone_tokens[size_t(s)].back(), 1}, false};
      l = e.step({&d, 1});
      alone[size_t(s)].insert(alone[size_t(s)].end(), l.begin(), l.end());
    }
  }
  // Together: prefilled in one mixed forward, then decoded as one batch of three rows per step.
  EngineOptions eo;
  eo.kv_initial_positions = 4;
  Engine e(*model, eo);
  int seq[3];
  std::vector<SequenceStep> prefill;
  for (int s = 0; s < 3; ++s) {
    seq[s] = e.add_sequence();
    prefill.push_back({seq[s], {ids.data() + s, lengths[s]}, false});
  }
  std::vector<float> l = e.step(prefill);
  std::vector<std::vector<int32_t>> toks(3);
  for (int t = 0; t < steps; ++t) {
    std::vector<SequenceStep> batch;
    for (int s = 0; s < 3; ++s) {
      const float* row = l.data() + size_t(s) * size_t(V);
      toks[size_t(s)].push_back(int32_t(std::max_element(row, row + V) - row));
    }
    for (int s = 0; s < 3; ++s) batch.push_back({seq[s], {&toks[size_t(s)].back(), 1}, false});
    l = e.step(batch);
    for (int s = 0; s < 3; ++s) {
      const float* row = l.data() + size_t(s) * size_t(V);
      const float* want = alone[size_t(s)].data() + size_t(t) * size_t(V);
      for (int v = 0; v < V; ++v) ASSERT_EQ(row[v], want[v]) << "seq " << s << " step " << t << " id " << v;
    }
  }
  EXPECT_EQ(toks, alone_tokens);
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, DecodeTest,
                         ::testing::Values("qwen3_moe_a", "mixtral_b", "olmoe_a", "qwen2_moe_a", "glm4_moe_a",
                                           "gpt_oss_a", "deepseek_v3_a", "deepseek_v3_b"));
INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, BatchedDecodeTest,
                         ::testing::Values("qwen3_moe_a", "mixtral_b", "olmoe_a", "qwen2_moe_a", "glm4_moe_a",
                                           "gpt_oss_a", "qwen3_next_a", "qwen3_5_moe_a", "deepseek_v3_a",
                                           "deepseek_v3_b"));

TEST(KvCache, GrowsByDoublingKeepsPositionsAndStopsAtTheLimit) {
  KvCache kv(std::vector<KvLayerShape>(2, {3, 3, 0}), 4, 20);
  EXPECT_EQ(kv.bytes(), 0u);
  kv.reserve(3);
  EXPECT_EQ(kv.capacity(), 4);
  for (int p = 0; p < 3; ++p) kv.keys(1)[p * 3 + 2] = float(p + 1);
  kv.reserve(9);
  EXPECT_EQ(kv.capacity(), 16);
  for (int p = 0; p < 3; ++p) EXPECT_EQ(kv.keys(1)[p * 3 + 2], float(p + 1));
  kv.reserve(17);
  EXPECT_EQ(kv.capacity(), 20);  // capped at the limit
  EXPECT_THROW(kv.reserve(21), Error);
}

TEST(KvCache, MemoryForAShortPromptDoesNotDependOnTheContextLimit) {
  const std::vector<KvLayerShape> shapes(4, {64, 64, 0});
  KvCache small(shapes, 256, 4096), large(shapes, 256, 1 << 20);
  small.reserve(10);
  large.reserve(10);
  EXPECT_EQ(small.bytes(), large.bytes());
}

TEST(KvCache, ARecurrentStateIsFixedSizeStartsAtZeroAndResets) {
  // Layer 0 attention rows, layer 1 a recurrent state of 5 floats and no rows, layer 2 latent rows with no values.
  KvCache kv({{4, 4, 0}, {0, 0, 5}, {6, 0, 0}}, 2, 64);
  EXPECT_TRUE(kv.recurrent());
  EXPECT_EQ(kv.bytes(), 5 * sizeof(float));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(kv.state(1)[i], 0.0f);
  kv.reserve(3);
  EXPECT_EQ(kv.bytes(), (4 * (4 + 4 + 6) + 5) * sizeof(float));
  EXPECT_EQ(kv.bytes_at(10), (10 * (4 + 4 + 6) + 5) * sizeof(float));
  kv.state(1)[4] = 2.5f;
  kv.length = 3;
  kv.reset();
  EXPECT_EQ(kv.length, 0);
  EXPECT_EQ(kv.state(1)[4], 0.0f);
  EXPECT_FALSE(KvCache(std::vector<KvLayerShape>(2, {3, 3, 0}), 4, 20).recurrent());
}

}  // namespace seedling
