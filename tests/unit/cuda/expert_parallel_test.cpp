// Expert parallelism on CUDA (--devices): two GPUs as two threads of one process over NCCL, each rank holding half
// of every MoE layer's experts, against one GPU holding all: the same logits bit for bit, prompt rows (on each side
// of kTensorCoreRows) and decode rows alike, with a uniform and a load-balanced placement. Skips, saying why, with
// fewer than two GPUs or without libnccl.so.2 (CI has neither; the CPU side is tests/unit/parallel/).
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "cuda/device.h"
#include "cuda_test_util.h"
#include "parallel/ep_test_util.h"
#include "parallel/placement.h"
#include "test_util.h"

namespace seedling {

class CudaExpertParallelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaExpertParallelTest, TwoGpusGiveTheOneGpuLogitsBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  if (cuda_devices().devices.size() < 2) GTEST_SKIP() << "expert parallelism needs two GPUs; this machine has one";
  std::vector<uint8_t> id;
  try {
    id = nccl_unique_id();
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
  const std::string dir = test::data_path("models/" + GetParam() + "/hf");
  const std::vector<int32_t> short_ids =
      test::read_json(test::data_path("models/" + GetParam() + "/reference.json"))["ids"].get<std::vector<int32_t>>();
  std::vector<int32_t> long_ids;  // past kTensorCoreRows: the prompt's experts on tensor cores
  while (long_ids.size() < 150) long_ids.insert(long_ids.end(), short_ids.begin(), short_ids.end());
  long_ids.resize(150);
  std::vector<std::vector<float>> want;
  {
    auto single = Model::load(dir);
    CudaForwardOptions o;
    o.verbose = false;
    use_cuda_forward(*single, o);
    for (const auto& ids : {short_ids, long_ids}) want.push_back(test::prompt_and_greedy_logits(*single, ids, 6));
  }
  auto probe = Model::load(dir);
  const ModelConfig& c = probe->config();
  for (const bool measured : {false, true}) {
    PlacementInput in;
    in.ranks = 2;
    in.num_experts = c.num_experts;
    in.layer_has_experts = c.layer_has_experts;
    in.expert_bytes.assign(size_t(c.num_layers), uint64_t(probe->expert_bytes()));
    if (measured) {  // skewed counts, so the ranks hold different numbers of hot experts
      in.load.assign(size_t(c.num_layers), {});
      for (int l = 0; l < c.num_layers; ++l) {
        for (int e = 0; c.layer_has_experts[size_t(l)] && e < c.num_experts; ++e)
          in.load[size_t(l)].push_back(uint64_t(e * e + 1));
      }
    }
    auto placement = std::make_shared<const ExpertPlacement>(plan_placement(in));
    if (measured) id = nccl_unique_id();  // a new group
    std::vector<std::vector<std::vector<float>>> got(2);
    std::vector<std::string> errors(2);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r) {
      ranks.emplace_back([&, r] {
        try {
          auto transport = nccl_transport(r, r, 2, id);
          auto model = Model::load(dir);
          CudaForwardOptions o;
          o.device = r;
          o.verbose = false;
          use_cuda_expert_parallel(*model, o, placement, *transport);
          for (const auto& ids : {short_ids, long_ids})
            got[size_t(r)].push_back(test::prompt_and_greedy_logits(*model, ids, 6));
          model.reset();  // the forward before the transport it exchanges through
        } catch (const std::exception& e) {
          errors[size_t(r)] = e.what();
        }
      });
    }
    for (auto& t : ranks) t.join();
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(errors[size_t(r)], "") << "rank " << r;
      for (size_t k = 0; k < want.size(); ++k) {
        EXPECT_EQ(got[size_t(r)][k], want[k]) << GetParam() << " rank " << r << (k ? " long prompt" : " short prompt")
                                              << (measured ? ", measured placement" : ", uniform placement");
      }
    }
  }
}

// qwen3_moe: the fused decode launches; mixtral: 4 experts, 2 a rank; gpt_oss: expert biases and clamped SwiGLU;
// deepseek_v3: dense first layers, a shared expert, group routing.
INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, CudaExpertParallelTest,
                         ::testing::Values("qwen3_moe_a", "mixtral_a", "gpt_oss_a", "deepseek_v3_a"));

}  // namespace seedling
