// Expert parallelism on the CPU, R = 1..4 ranks as threads, each with its own copy of a tiny checkpoint: the MoE
// layers' routed sums and whole forwards (prompt, then decode rows that leave most ranks without a row of their own)
// equal the single-device model bit for bit, with uniform and load-balanced placements and with every row routed
// to one rank's experts.
#include "parallel/ep_moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <thread>

#include "engine/engine.h"
#include "model/model.h"
#include "parallel/ep_test_util.h"
#include "parallel/thread_transport.h"
#include "test_util.h"

namespace seedling {

namespace {

std::string model_path(const std::string& name) {
  return test::data_path("models/" + name + "/hf");
}

PlacementInput placement_input(const ModelConfig& c, int ranks) {
  PlacementInput in;
  in.ranks = ranks;
  in.num_experts = c.num_experts;
  in.layer_has_experts = c.layer_has_experts;
  in.expert_bytes.assign(size_t(c.num_layers), 1);
  return in;
}

// Runs body(rank, model, ep) on R threads, each rank with its own model and transport.
void on_ranks(const std::string& name, const ExpertPlacement& placement, bool from_routes,
              const std::function<void(int, Model&, ExpertParallelMoe&)>& body) {
  const int R = placement.ranks;
  ThreadGroup g(R);
  std::vector<std::unique_ptr<Model>> models;
  for (int r = 0; r < R; ++r) models.push_back(Model::load(model_path(name)));
  std::vector<std::string> errors(static_cast<size_t>(R));
  std::vector<std::thread> threads;
  for (int r = 0; r < R; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto t = g.transport(r);
        ExpertParallelMoe ep(*models[size_t(r)], placement, *t, from_routes);
        body(r, *models[size_t(r)], ep);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < R; ++r) EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

class ExpertParallelTest : public ::testing::TestWithParam<std::string> {};

// Every rank runs the whole forward (attention and dense parts replicated); each MoE layer's routed sum goes
// through dispatch, the owners' experts, return, combine and all-gather.
TEST_P(ExpertParallelTest, ForwardOnOneToFourRanksEqualsOneDeviceBitForBit) {
  auto single = Model::load(model_path(GetParam()));
  const std::vector<int32_t> prompt =
      test::read_json(test::data_path("models/" + GetParam() + "/reference.json"))["ids"].get<std::vector<int32_t>>();
  const std::vector<float> want = test::prompt_and_greedy_logits(*single, prompt, 4);
  const ModelConfig& c = single->config();
  for (int R = 1; R <= 4; ++R) {
    PlacementInput in = placement_input(c, R);
    if (R == 3) {  // a measured placement: skewed loads
      in.load.assign(size_t(c.num_layers), {});
      for (int l = 0; l < c.num_layers; ++l) {
        if (!c.layer_has_experts[size_t(l)]) continue;
        for (int e = 0; e < c.num_experts; ++e) in.load[size_t(l)].push_back(uint64_t((e * 7 + l) % 5) * 100 + 1);
      }
    }
    const ExpertPlacement placement = plan_placement(in);
    for (bool from_routes : {false, true}) {
      std::vector<std::vector<float>> got(static_cast<size_t>(R));
      on_ranks(GetParam(), placement, from_routes, [&](int r, Model& m, ExpertParallelMoe& ep) {
        m.set_routed_sum(&ep);
        got[size_t(r)] = test::prompt_and_greedy_logits(m, prompt, 4);
      });
      for (int r = 0; r < R; ++r) {
        EXPECT_TRUE(same_bits(got[size_t(r)], want)) << "R " << R << " rank " << r << " from routes " << from_routes;
      }
    }
  }
}

// One MoE layer on random rows and routes, through the real expert code: every route sends all rows to the
// experts of one rank, then routes at random with rows more than ranks and fewer.
TEST_P(ExpertParallelTest, RoutedSumOnRandomRowsEqualsTheSingleDeviceSum) {
  auto single = Model::load(model_path(GetParam()));
  const ModelConfig& c = single->config();
  int layer = 0;
  while (!c.layer_has_experts[size_t(layer)]) ++layer;
  const int E = c.num_experts, K = c.experts_per_token;
  const int64_t H = c.hidden_size;
  for (int R : {2, 4}) {
    const ExpertPlacement placement = plan_placement(placement_input(c, R));
    const std::vector<int> rank0 = placement.experts_of(layer, 0);
    for (int64_t M : {int64_t(1), int64_t(3), int64_t(9)}) {
      for (bool one_rank : {true, false}) {
        if (one_rank && int(rank0.size()) < K) continue;  // rank 0 cannot hold a whole top-k
        const std::vector<float> xn = test::gaussian(size_t(M * H), uint32_t(M * 10 + R));
        std::vector<int> chosen(size_t(M * K));
        std::vector<float> weight(size_t(M * K));
        std::mt19937 rng(uint32_t(M + R));
        for (int64_t i = 0; i < M; ++i) {
          std::vector<int> ids(static_cast<size_t>(E));
          std::iota(ids.begin(), ids.end(), 0);
          if (one_rank) ids = rank0;
          std::shuffle(ids.begin(), ids.end(), rng);
          for (int s = 0; s < K; ++s) {
            chosen[size_t(i * K + s)] = ids[size_t(s)];
            weight[size_t(i * K + s)] = std::uniform_real_distribution<float>(0.01f, 1.0f)(rng);
          }
        }
        // The single-device sum: every pair here, then the combine.
        std::vector<int64_t> pair_row(size_t(M * K));
        for (int64_t j = 0; j < M * K; ++j) pair_row[size_t(j)] = j / K;
        std::vector<float> outputs(size_t(M * K * H)), want(size_t(M * H));
        single->expert_outputs(layer, pair_row, chosen, xn.data(), outputs.data());
        combine_expert_outputs(M, K, H, weight.data(), outputs.data(), nullptr, want.data());
        std::vector<std::vector<float>> got(size_t(R), std::vector<float>(size_t(M * H), -1.0f));
        on_ranks(GetParam(), placement, M == 3, [&](int r, Model&, ExpertParallelMoe& ep) {
          ep.routed_sum(layer, M, xn.data(), chosen.data(), weight.data(), got[size_t(r)].data());
          if (one_rank && r > 0) {
            EXPECT_EQ(ep.last_traffic().returned_rows, 0);  // no pair of theirs
          }
        });
        for (int r = 0; r < R; ++r) {
          EXPECT_TRUE(same_bits(got[size_t(r)], want)) << "R " << R << " M " << M << " one rank " << one_rank;
        }
      }
    }
  }
}

// qwen3_moe: plain; qwen2_moe: a gated shared expert; gpt_oss: expert biases and clamped SwiGLU; deepseek_v3: dense
// first layers, group routing, a shared expert; mixtral: 4 experts (ranks with one expert each).
INSTANTIATE_TEST_SUITE_P(Families, ExpertParallelTest,
                         ::testing::Values("qwen3_moe_a", "qwen2_moe_a", "gpt_oss_a", "deepseek_v3_a", "mixtral_a"));

TEST(ExpertParallelSetupTest, APlacementMustMatchTheTransportAndTheModel) {
  auto m = Model::load(model_path("qwen3_moe_a"));
  ThreadGroup g(2);
  auto t = g.transport(0);
  const ExpertPlacement three = plan_placement(placement_input(m->config(), 3));
  EXPECT_THROW(ExpertParallelMoe(*m, three, *t), Error);
  PlacementInput in = placement_input(m->config(), 2);
  in.layer_has_experts.push_back(0);
  in.expert_bytes.push_back(1);
  const ExpertPlacement longer = plan_placement(in);
  EXPECT_THROW(ExpertParallelMoe(*m, longer, *t), Error);
}

}  // namespace seedling
