// The CUDA forward against the CPU forward on every tiny checkpoint: logits within 2e-2 (they differ only by the
// order of float32 sums: no bf16 rounding happens on the device), the same greedy tokens, and bit-identical
// logits whatever the VRAM budget, down to one that evicts on every token, with three tiers (NVMe -> RAM slots ->
// VRAM slots) and with the decode graph on or off. Bad input: no GPU, a budget below one layer's top-k experts.
#include "cuda/cuda_forward.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "cuda/forward_products.h"
#include "cuda/gemm.h"
#include "cuda/vram_experts.h"
#include "cuda_test_util.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "experts/streamed_experts.h"
#include "test_util.h"

namespace seedling {

namespace {

const std::vector<std::string> kModels = {"qwen3_moe_a", "qwen3_moe_b", "mixtral_a", "mixtral_b"};

std::vector<int32_t> ids_of(const std::string& name) {
  return test::read_json(test::data_path("models/" + name + "/reference.json"))["ids"].get<std::vector<int32_t>>();
}

// Prompt logits of every position, then 12 greedy tokens, on whatever forward the model has.
struct Outcome {
  std::vector<float> logits;
  std::vector<int32_t> greedy;
  std::vector<float> decode_logits;  // the logits of each decoded token, token by token
};
Outcome run_model(Model& model, const std::vector<int32_t>& ids) {
  Outcome o;
  Engine engine(model, {});
  const int seq = engine.add_sequence();
  SequenceStep step{seq, ids, true};
  o.logits = engine.step({&step, 1});
  Engine gen(model, {});
  GenerateOptions go;
  go.max_new_tokens = 12;
  o.greedy = generate(gen, ids, go).tokens;
  // Decode one token at a time after a 3-token prompt: split-key decode attention, a miss or a hit per token.
  Engine dec(model, {});
  const int s = dec.add_sequence();
  SequenceStep first{s, {ids.data(), 3}, false};
  dec.step({&first, 1});
  for (size_t i = 3; i < ids.size(); ++i) {
    SequenceStep one{s, {&ids[i], 1}, false};
    const std::vector<float> l = dec.step({&one, 1});
    o.decode_logits.insert(o.decode_logits.end(), l.begin(), l.end());
  }
  return o;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])));
  return worst;
}

// The model at dir on the CPU and on CUDA: prompt logits and token-by-token decode logits within `tolerance`, the
// same greedy tokens.
void expect_cuda_near_cpu(const std::string& dir, const std::vector<int32_t>& ids, const std::string& what,
                          double tolerance = 2e-2) {
  auto cpu_model = Model::load(dir);
  const Outcome cpu = run_model(*cpu_model, ids);
  auto model = Model::load(dir);
  CudaForwardOptions o;
  o.verbose = false;
  use_cuda_forward(*model, o);
  const Outcome gpu = run_model(*model, ids);
  ASSERT_EQ(gpu.logits.size(), cpu.logits.size());
  const double prompt_err = max_abs_diff(gpu.logits, cpu.logits),
               decode_err = max_abs_diff(gpu.decode_logits, cpu.decode_logits);
  EXPECT_LE(prompt_err, tolerance) << what;
  EXPECT_LE(decode_err, tolerance) << what;
  ::testing::Test::RecordProperty("max_abs_prompt_logit_diff", std::to_string(prompt_err));
  ::testing::Test::RecordProperty("max_abs_decode_logit_diff", std::to_string(decode_err));
  std::printf("%s: CUDA vs CPU max |logit diff| prompt %.3g, decode %.3g\n", what.c_str(), prompt_err, decode_err);
  EXPECT_EQ(gpu.greedy, cpu.greedy) << what;
}

// The decode graph (captured once, replayed) against op-by-op launches of the model at dir: the same bits.
void expect_graph_bit_identical(const std::string& dir, const std::vector<int32_t>& ids, const std::string& what) {
  std::vector<Outcome> outcomes;
  std::vector<int64_t> replays;
  for (const bool graphs : {false, true}) {
    auto model = Model::load(dir);
    CudaForwardOptions o;
    o.verbose = false;
    o.graphs = graphs;
    use_cuda_forward(*model, o);
    outcomes.push_back(run_model(*model, ids));
    replays.push_back(cuda_graph_replays(*model->device_forward()));
  }
  EXPECT_EQ(replays[0], 0) << "graphs off";
  // Decodes replay the graph except the eager one after each change of buffers (first decode, cache growth).
  const int64_t decodes = 11 + int64_t(ids.size()) - 3;
  EXPECT_GE(replays[1], decodes / 2) << what << ": graphs on, most decodes should replay the graph";
  EXPECT_EQ(outcomes[1].logits, outcomes[0].logits) << what;
  EXPECT_EQ(outcomes[1].decode_logits, outcomes[0].decode_logits) << what;
  EXPECT_EQ(outcomes[1].greedy, outcomes[0].greedy) << what;
  std::printf("%s: %lld decode graph replays, logits bit-identical to op-by-op launches\n", what.c_str(),
              (long long)replays[1]);
}

// The prompt in three steps, then 5 decoded tokens, on a device cache grown from 1 position (doubling at each step:
// every layer's rows moved to its base at the new capacity, kv/kv_layout.h's growth) and on one allocated once at the
// final capacity: the same logits bit for bit. Prompt attention reads the keys wherever they sit and both end at one
// capacity (which alone sizes decode attention's splits), so only a row lost or misplaced by a growth moves a bit.
void expect_growth_bit_identical(const std::string& dir, const std::vector<int32_t>& ids, const std::string& what) {
  auto model = Model::load(dir);
  CudaForwardOptions o;
  o.verbose = false;
  use_cuda_forward(*model, o);
  const int decoded = 5, full = int(std::bit_ceil(ids.size() + decoded));
  const size_t piece = (ids.size() + 2) / 3;
  auto run = [&](int initial) {
    EngineOptions eo;
    eo.kv_initial_positions = initial;
    Engine engine(*model, eo);
    const int seq = engine.add_sequence();
    std::vector<float> out;
    std::vector<int> caps;
    for (size_t at = 0; at < ids.size(); at += piece) {
      SequenceStep step{seq, {ids.data() + at, std::min(piece, ids.size() - at)}, true};
      const std::vector<float> l = engine.step({&step, 1});
      out.insert(out.end(), l.begin(), l.end());
      caps.push_back(engine.kv(seq).capacity());
    }
    for (int t = 0; t < decoded; ++t) {
      SequenceStep one{seq, {&ids[size_t(t)], 1}, false};
      const std::vector<float> l = engine.step({&one, 1});
      out.insert(out.end(), l.begin(), l.end());
    }
    EXPECT_EQ(engine.kv(seq).capacity(), full) << what;
    return std::pair{out, caps};
  };
  const auto [grown, grown_caps] = run(1);
  const auto [once, once_caps] = run(full);
  EXPECT_EQ(once_caps, std::vector<int>(once_caps.size(), full)) << what;
  EXPECT_NE(grown_caps.front(), grown_caps.back()) << what << ": the cache grew between the prompt's steps";
  EXPECT_EQ(grown, once) << what;
}

}  // namespace

class CudaForwardTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaForwardTest, LogitsWithin2e2OfCpuAndSameGreedyTokens) {
  SKIP_WITHOUT_CUDA_DEVICE();
  expect_cuda_near_cpu(test::data_path("models/" + GetParam() + "/hf"), ids_of(GetParam()), GetParam());
}

TEST_P(CudaForwardTest, ACacheGrownAcrossStepsGivesTheLogitsOfOneAllocatedOnceBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  expect_growth_bit_identical(test::data_path("models/" + GetParam() + "/hf"), ids_of(GetParam()), GetParam());
}

TEST_P(CudaForwardTest, LogitsBitIdenticalAcrossVramBudgetsThatEvictEveryToken) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::string dir = test::data_path("models/" + GetParam() + "/hf");
  const std::vector<int32_t> ids = ids_of(GetParam());
  std::vector<Outcome> outcomes;
  std::vector<ExpertStats> stats;
  std::vector<int64_t> replays;
  auto probe = Model::load(dir);
  const uint64_t blob = cuda::expert_slot_bytes(*probe);
  const int k = probe->config().experts_per_token;
  // All in VRAM (no budget given), exactly top-k slots (a miss nearly every layer of every token), top-k + 1, each
  // decode step's misses all copied into slots after it; then top-k slots with the decode steps' misses copied in
  // before their layer runs (SEEDLING_NO_DIRECT_MISSES) instead of read in place from pinned memory by the step's
  // graph; then top-k + 1 slots with at most one miss a step copied in (--vram-admit 1).
  struct Arm {
    uint64_t budget;
    int admit;
    bool copies_first;
  };
  const int all = CudaForwardOptions::kAdmitEveryMiss;
  const std::vector<Arm> arms = {{0, all, false},
                                 {uint64_t(k) * blob, all, false},
                                 {(k + 1) * blob, all, false},
                                 {uint64_t(k) * blob, all, true},
                                 {(k + 1) * blob, 1, false}};
  for (const Arm& arm : arms) {
    if (arm.copies_first) ::setenv("SEEDLING_NO_DIRECT_MISSES", "1", 1);
    auto model = Model::load(dir);
    CudaForwardOptions o;
    o.verbose = false;
    o.vram_budget = arm.budget;
    o.budget_given = arm.budget > 0;
    o.vram_admit = arm.admit;
    use_cuda_forward(*model, o);
    if (arm.copies_first) ::unsetenv("SEEDLING_NO_DIRECT_MISSES");
    outcomes.push_back(run_model(*model, ids));
    stats.push_back(model->device_forward()->expert_stats());
    replays.push_back(cuda_graph_replays(*model->device_forward()));
  }
  for (size_t i = 1; i < outcomes.size(); ++i) {
    EXPECT_EQ(outcomes[i].logits, outcomes[0].logits) << "arm " << i;
    EXPECT_EQ(outcomes[i].decode_logits, outcomes[0].decode_logits) << "arm " << i;
    EXPECT_EQ(outcomes[i].greedy, outcomes[0].greedy) << "arm " << i;
  }
  EXPECT_EQ(stats[0].slots, 0) << "no budget: every expert resident";
  EXPECT_EQ(stats[1].slots, k);
  // With top-k slots, every decoded token misses at least once in each MoE layer whose choice changed; over the
  // run the misses must outnumber the tokens.
  const int64_t tokens = int64_t(ids.size()) * 3 + 12;
  // Reading misses in place, the cache's decode steps run as the decode graph; copying them first, they cannot.
  EXPECT_GT(replays[1], 0) << "top-k slots, misses read in place";
  EXPECT_GT(replays[2], 0) << "top-k + 1 slots, misses read in place";
  EXPECT_EQ(replays[3], 0) << "top-k slots, misses copied first";
  for (const size_t i : {size_t(1), size_t(3)}) {
    EXPECT_GT(int64_t(stats[i].misses), tokens) << "the smallest budget should evict all the time (" << i << ")";
    EXPECT_EQ(stats[i].bytes_read, stats[i].misses * blob) << i;
  }
  // Capped, a decode step copies at most one of its misses: the others count as misses and cross the bus once.
  EXPECT_EQ(stats[2].reads, stats[2].misses) << "uncapped: every miss copied";
  EXPECT_EQ(stats[4].bytes_read, stats[4].reads * blob);
  EXPECT_LT(stats[4].reads, stats[4].misses) << "--vram-admit 1: some misses stay out of the cache";
  EXPECT_LT(stats[4].bytes_read, stats[2].bytes_read) << "--vram-admit 1 copies less than every miss";
}

// --cpu-misses: top-k + 1 VRAM slots (a miss in most MoE layers of most decode steps), the host computing all (1) or
// about a third (0.3, rounded per layer) of each layer's misses while the GPU runs the hits and the other misses.
// Prompt passes do not take part: their logits are all-in-VRAM's bit for bit. A decode step's are not (the CPU's
// kernels, and its part added after the GPU's): the two devices' float sums of the same bf16 experts differ by float32
// rounding (about 1e-6 of an expert's output, so a few 1e-5 in these logits of up to 37); 1e-3 leaves room for that and
// catches a dropped or doubled expert (whole units). Greedy tokens the same; the host computed misses, fewer at the
// smaller share. Run for the Llama-shaped checkpoints here, the hybrids (Gated DeltaNet layers between the MoE
// blocks) and MLA (sigmoid group routing with its scaling factor, a shared expert, a dense first layer) below.
namespace {
void expect_host_misses_near_all_in_vram(const std::string& dir, const std::vector<int32_t>& ids,
                                         const std::string& label) {
  auto probe = Model::load(dir);
  const uint64_t blob = cuda::expert_slot_bytes(*probe);
  const int k = probe->config().experts_per_token;
  auto base_model = Model::load(dir);
  CudaForwardOptions base_options;
  base_options.verbose = false;
  use_cuda_forward(*base_model, base_options);
  const Outcome base = run_model(*base_model, ids);
  uint64_t all_on_host = 0;
  for (const double share : {1.0, 0.3}) {
    auto model = Model::load(dir);
    CudaForwardOptions o;
    o.verbose = false;
    o.vram_budget = uint64_t(k + 1) * blob;
    o.budget_given = true;
    o.cpu_misses = share;
    use_cuda_forward(*model, o);
    const Outcome got = run_model(*model, ids);
    const ExpertStats st = model->device_forward()->expert_stats();
    EXPECT_EQ(got.logits, base.logits) << label << " share " << share << ": a prompt pass computes no miss on the host";
    const double err = max_abs_diff(got.decode_logits, base.decode_logits);
    EXPECT_LE(err, 1e-3) << label << " share " << share;
    ::testing::Test::RecordProperty("max_abs_decode_logit_diff_share_" + std::to_string(int(share * 100)),
                                    std::to_string(err));
    EXPECT_EQ(got.greedy, base.greedy) << label << " share " << share;
    EXPECT_GT(st.host_computed, 0u) << label << " share " << share;
    EXPECT_LE(st.host_computed, st.misses) << label << " share " << share;
    if (share == 1.0) {
      all_on_host = st.host_computed;
    } else {
      EXPECT_LT(st.host_computed, all_on_host) << "some misses stay on the GPU";
    }
    EXPECT_EQ(cuda_graph_replays(*model->device_forward()), 0) << "a host round trip each layer: no graph";
  }
}
}  // namespace

TEST_P(CudaForwardTest, HostComputedMissesGiveAllInVramDecodeWithinRoundingAndItsGreedyTokens) {
  SKIP_WITHOUT_CUDA_DEVICE();
  expect_host_misses_near_all_in_vram(test::data_path("models/" + GetParam() + "/hf"), ids_of(GetParam()), GetParam());
}

TEST_P(CudaForwardTest, DecodeGraphBitIdenticalToOpByOpLaunches) {
  SKIP_WITHOUT_CUDA_DEVICE();
  expect_graph_bit_identical(test::data_path("models/" + GetParam() + "/hf"), ids_of(GetParam()), GetParam());
}

namespace {

// A 150-token prompt (the reference ids over and over): from 64 rows the products run on tensor cores (TF32
// inputs, or f16 for the affine codecs: cuda/gemm.h) and the experts as grouped GEMMs over rows bucketed by expert;
// the router and the head keep float32's accuracy (cuda_forward.cpp). TF32 and f16 round an input to 2^-11 of
// itself; these random tiny models' logits reach 25-37, and 2^-11 of 32 is 0.016, so these prompts land at
// 0.0013-0.0164 of the CPU on the H200 (docs/results/2026-11-30-cuda-prompt-logit-error.md). The router's top-k
// then sees about float32's error, so the routes and the greedy tokens agree.
std::vector<int32_t> long_ids(const std::string& name) {
  const std::vector<int32_t> ids = ids_of(name);
  std::vector<int32_t> out;
  while (out.size() < 150) out.push_back(ids[out.size() % ids.size()]);
  return out;
}

// The long prompt on the checkpoint or packed folder at dir: CUDA within 2e-2 of the CPU with its greedy tokens,
// and bit-identical with top-k VRAM slots (passes over subsets of experts).
double expect_long_prompt_on_tensor_cores(const std::string& dir, const std::vector<int32_t>& ids,
                                          const std::string& what, double tolerance = 2e-2) {
  auto cpu_model = Model::load(dir);
  const Outcome cpu = run_model(*cpu_model, ids);
  auto probe = Model::load(dir);
  const uint64_t blob = cuda::expert_slot_bytes(*probe);
  const int k = probe->config().experts_per_token;
  std::vector<Outcome> gpu;
  for (const uint64_t budget : {uint64_t(0), uint64_t(k) * blob}) {
    auto model = Model::load(dir);
    CudaForwardOptions o;
    o.verbose = false;
    o.vram_budget = budget;
    o.budget_given = budget > 0;
    use_cuda_forward(*model, o);
    gpu.push_back(run_model(*model, ids));
  }
  const double prompt_err = max_abs_diff(gpu[0].logits, cpu.logits);
  EXPECT_LE(prompt_err, tolerance) << what;
  EXPECT_LE(max_abs_diff(gpu[0].decode_logits, cpu.decode_logits), tolerance) << what;
  EXPECT_EQ(gpu[0].greedy, cpu.greedy) << what;
  EXPECT_EQ(gpu[1].logits, gpu[0].logits) << what << ": top-k VRAM slots, passes over subsets of experts";
  EXPECT_EQ(gpu[1].decode_logits, gpu[0].decode_logits) << what;
  std::printf("%s: 150-token prompt on tensor cores, max |logit diff| vs CPU %.3g; bit-identical with top-k slots\n",
              what.c_str(), prompt_err);
  return prompt_err;
}

}  // namespace

// The checkpoint, then packs of it with seed experts (p4, s3: the tensor-core GEMMs decode their blocks in
// registers; a search over 16 seeds, since only CPU against CUDA on one pack is compared), then packs whose experts
// and dense matrices are affine (q4, q8: the f16 GEMM kernel, with x rows scaled into f16's range; the CPU reads
// the same quantized weights, so only the kernels' rounding differs).
// The checkpoints (bf16) and their seed packs round one operand, x; their weights widen exactly to TF32, or round
// where a seed block's float32 value does. The affine packs round both at the same 2^-11: a code's q d + m in f16
// (or TF32), and x. Two independent roundings of one size give sqrt(2) times the error of one, so these packs are
// held to sqrt(2) x 2e-2. The TF32 kernel, which rounds both operands at the same unit, runs the same packs as a
// control, held to the same, and both errors are printed.
TEST_P(CudaForwardTest, LongPromptOnTensorCoresNearTheCpuAndBitIdenticalAcrossBudgets) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::string hf = test::data_path("models/" + GetParam() + "/hf");
  const std::vector<int32_t> ids = long_ids(GetParam());
  expect_long_prompt_on_tensor_cores(hf, ids, GetParam());
  const test::ScratchDir tmp("longseed");
  for (const std::string tier : {"p4", "s3"}) {
    test::pack_checkpoint(hf, tmp / tier, "--experts " + tier + " --seed-search-seeds 16");
    expect_long_prompt_on_tensor_cores(tmp / tier, ids, GetParam() + " --experts " + tier);
  }
  const std::pair<const char*, const char*> affine[] = {{"q4", "--experts q4_g64 --dense q4_g64"},
                                                        {"q8", "--experts q8_g32 --dense q4_g32"}};
  const double two_roundings = std::sqrt(2.0) * 2e-2;
  for (const auto& [name, codecs] : affine) {
    test::pack_checkpoint(hf, tmp / name, codecs);
    const std::string what = GetParam() + " " + codecs;
    const double f16 = expect_long_prompt_on_tensor_cores(tmp / name, ids, what, two_roundings);
    cuda::use_gemm_kernel(cuda::GemmKernel::MmaTf32);
    const double tf32 = expect_long_prompt_on_tensor_cores(tmp / name, ids, what + " (TF32 kernel)", two_roundings);
    cuda::use_gemm_kernel(cuda::GemmKernel::Mma);
    std::printf("%s: f16 kernel %.3g, TF32 kernel %.3g from the CPU\n", what.c_str(), f16, tf32);
  }
}

namespace {

// The packed folder at dir on the GPU with a VRAM cache of `vram_budget` bytes, fed from pinned host memory, or with
// ram_slots > 0 from that many RAM slots of the streamed provider (three tiers).
std::unique_ptr<Model> load_cached(const std::string& dir, uint64_t vram_budget, int ram_slots) {
  auto model = Model::load(dir);
  if (ram_slots > 0) {
    StreamedOptions so;
    so.min_slots = ram_slots;
    so.slots = ram_slots;
    model->set_expert_provider(StreamedExperts::from_packed(model->packed(), so));
  }
  CudaForwardOptions o;
  o.verbose = false;
  o.vram_budget = vram_budget;
  o.budget_given = true;
  use_cuda_forward(*model, o);
  return model;
}

}  // namespace

// Three tiers: the packed folder's experts streamed into top-k RAM slots (an NVMe read on nearly every access) and
// fetched from there into top-k or top-k + 1 VRAM slots (a pass of k + 1 misses cycles the k staging buffers),
// against every expert in VRAM: the same bits, short prompt, decode and a 150-row prompt alike. Every VRAM miss is
// one access of the RAM tier, so the VRAM misses equal the RAM tier's hits + misses over the run.
TEST_P(CudaForwardTest, ThreeTiersGiveTheAllInVramLogitsBitForBitAndTheirStatsAddUp) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const test::ScratchDir tmp("threetier");
  test::pack_checkpoint(test::data_path("models/" + GetParam() + "/hf"), tmp / "p", "");
  const std::vector<int32_t> ids = ids_of(GetParam()), longer = long_ids(GetParam());
  auto reference = Model::load(tmp / "p");
  const uint64_t blob = cuda::expert_slot_bytes(*reference);
  const int k = reference->config().experts_per_token;
  CudaForwardOptions all;
  all.verbose = false;
  use_cuda_forward(*reference, all);
  const Outcome want = run_model(*reference, ids), want_long = run_model(*reference, longer);
  for (const int vram_slots : {k, k + 1}) {
    auto model = load_cached(tmp / "p", uint64_t(vram_slots) * blob, k);
    const ExpertStats ram0 = model->experts().stats();  // the layout probes' accesses, one a MoE layer
    const Outcome got = run_model(*model, ids), got_long = run_model(*model, longer);
    const ExpertStats ram = model->experts().stats(), vram = model->device_forward()->expert_stats();
    EXPECT_EQ(got.logits, want.logits) << vram_slots << " VRAM slots";
    EXPECT_EQ(got.decode_logits, want.decode_logits) << vram_slots << " VRAM slots";
    EXPECT_EQ(got.greedy, want.greedy) << vram_slots << " VRAM slots";
    EXPECT_EQ(got_long.logits, want_long.logits) << vram_slots << " VRAM slots, 150 rows";
    EXPECT_EQ(vram.slots, vram_slots);
    EXPECT_EQ(vram.misses, (ram.hits + ram.misses) - (ram0.hits + ram0.misses)) << "VRAM misses = RAM accesses";
    EXPECT_GT(int64_t(ram.misses - ram0.misses), int64_t(ids.size()) * 3) << "top-k RAM slots should evict";
    EXPECT_EQ(ram.reads, ram.misses);
    EXPECT_EQ(vram.bytes_read, vram.misses * blob);
    std::printf(
        "%s: three tiers, %d VRAM slots over %d RAM slots: bit-identical; VRAM %llu hits %llu misses = RAM "
        "%llu hits + %llu misses\n",
        GetParam().c_str(), vram_slots, k, (unsigned long long)vram.hits, (unsigned long long)vram.misses,
        (unsigned long long)(ram.hits - ram0.hits), (unsigned long long)(ram.misses - ram0.misses));
  }
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, CudaForwardTest, ::testing::ValuesIn(kModels));

// The families that run from layer plans (issue 21), each checkpoint in the layout named after the slash: olmoe
// (q/k norm over the whole projection, clip_qkv), qwen2_moe (q/k/v biases, a gated shared expert, a dense layer),
// glm4_moe (partial rotary, sigmoid group routing with a correction bias and a scale, a dense first layer, a shared
// expert), gpt_oss (o bias, sinks, a window on alternate layers, top-k-softmax router with a bias, expert biases,
// the clamped SwiGLU) with bf16 experts and with MXFP4 experts as released (hub). Each: a short prompt and
// token-by-token decode, then a 150-row prompt (tensor cores, gpt_oss's expert biases and clamped SwiGLU in the
// grouped GEMMs' epilogues; MXFP4 experts on the CUDA-core kernels, which the GEMMs do not read), both within 2e-2 of
// the CPU with its greedy tokens, bit-identical with top-k VRAM slots, and the decode graph bit-identical to op-by-op
// launches.
class CudaForwardPlanTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::string name() const { return GetParam().substr(0, GetParam().find('/')); }
  std::string dir() const { return test::data_path("models/" + GetParam()); }
};
namespace {
// A test's name from its "checkpoint/layout" parameter.
std::string folder_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& ch : n) ch = ch == '/' ? '_' : ch;
  return n;
}
}  // namespace

TEST_P(CudaForwardPlanTest, ShortPromptAndDecodeWithin2e2OfCpuAndSameGreedyTokens) {
  SKIP_WITHOUT_CUDA_DEVICE();
  expect_cuda_near_cpu(dir(), ids_of(name()), GetParam());
}

namespace {

// Rounds every input of a matrix product that the CUDA forward runs on tensor cores (q/k/v, o, the experts, dense and
// shared MLPs: the ActivationObserver's inputs) to TF32 in place, round to nearest even: the CPU forward then computes
// what a tensor-core prompt computes up to float32 summation order (the router and the head keep float32 on CUDA and
// are not observed; these checkpoints' bf16 weights are exact in TF32). A measuring oracle: it writes into the
// forward's own buffers through the observer's pointer, which the forward multiplies right after.
struct Tf32Rounding final : ActivationObserver {
  void on_input(int, MatrixInput, int, const float* x, int64_t n, int64_t width) override {
    auto* v = const_cast<float*>(x);
    for (int64_t i = 0; i < n * width; ++i) {
      uint32_t b;
      std::memcpy(&b, v + i, 4);
      b = (b + 0x0fffu + ((b >> 13) & 1u)) & ~0x1fffu;
      std::memcpy(v + i, &b, 4);
    }
  }
};

std::vector<float> prompt_logits(Model& model, const std::vector<int32_t>& ids, int rows_per_forward) {
  EngineOptions eo;
  eo.max_rows_per_forward = rows_per_forward;
  Engine engine(model, eo);
  const int seq = engine.add_sequence();
  SequenceStep step{seq, ids, true};
  return engine.step({&step, 1});
}

// The long prompt on CUDA in chunks of 32 rows (below kTensorCoreRows: every product in float32 on CUDA cores), its
// largest |logit| difference from the CPU's logits `cpu`.
double float32_chunks_error(const std::string& dir, const std::vector<int32_t>& ids, const std::vector<float>& cpu) {
  auto model = Model::load(dir);
  CudaForwardOptions o;
  o.verbose = false;
  use_cuda_forward(*model, o);
  return max_abs_diff(prompt_logits(*model, ids, 32), cpu);
}

}  // namespace

// The plans' long prompt, in two checks. Float32 control: in chunks of 32 rows (below kTensorCoreRows) every product
// runs on CUDA cores in float32, so CUDA must be within 1e-4 of the CPU over all 150 positions (windows, sinks and the
// plan's parts past short prompts). Tensor cores: the error bound comes from TF32 itself. The CPU forward with every
// tensor-core product's input rounded to TF32 (Tf32Rounding) is off the exact CPU by e; CUDA rounds the same inputs
// (up to float32 differences upstream that move a few roundings), so |cuda - cpu| <= |cuda - cpu_tf32| +
// |cpu_tf32 - cpu|, each of the size e: the bound is 2e + 1e-4.
TEST_P(CudaForwardPlanTest, LongPromptNearTheCpuAndBitIdenticalAcrossBudgets) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<int32_t> ids = long_ids(name());
  auto cpu_model = Model::load(dir());
  const std::vector<float> cpu = prompt_logits(*cpu_model, ids, 512);
  Tf32Rounding tf32;
  cpu_model->set_activation_observer(&tf32);
  const double e = max_abs_diff(prompt_logits(*cpu_model, ids, 512), cpu);
  const double f32_err = float32_chunks_error(dir(), ids, cpu);
  EXPECT_LE(f32_err, 1e-4) << GetParam() << ": float32 products (32-row chunks)";
  const double tc = expect_long_prompt_on_tensor_cores(dir(), ids, GetParam(), 2 * e + 1e-4);
  std::printf("%s: 150-token prompt: float32 chunks %.3g from the CPU; tensor cores %.3g, TF32-rounded CPU %.3g\n",
              GetParam().c_str(), f32_err, tc, e);
}

TEST_P(CudaForwardPlanTest, DecodeGraphBitIdenticalToOpByOpLaunches) {
  SKIP_WITHOUT_CUDA_DEVICE();
  expect_graph_bit_identical(dir(), ids_of(name()), GetParam());
}

INSTANTIATE_TEST_SUITE_P(PlanFamilies, CudaForwardPlanTest,
                         ::testing::Values("olmoe_a/hf", "qwen2_moe_a/hf", "glm4_moe_a/hf", "gpt_oss_a/hf",
                                           "gpt_oss_mxfp4/hub"),
                         folder_test_name);

// The hybrid linear-attention families (issue 23), each checkpoint in the layout named after the slash: qwen3_next
// (grouped in_proj_qkvz / in_proj_ba put in order on the device, a dense layer) and qwen3_5_moe (split projections;
// hub: the multimodal folder with fused experts). Gated DeltaNet layers (conv windows and delta-rule states per
// sequence in VRAM: the recurrent step for decode rows, the chunked form for prompt runs) beside gated attention with
// partial rotary and (1 + w) norms, a gated shared expert. Their recurrent states amplify rounding (TF32 inputs moved
// these logits by up to 0.37 on the CPU), so every product of such a model keeps float32's accuracy at any row count
// (cuda_forward.cpp's float32_): prompts as well as decode are held to the CPU within 1e-3, the hybrids' golden
// tolerance (float32-sized changes of every product's input move these logits by 1.5e-4).
class CudaForwardHybridTest : public CudaForwardPlanTest {};

TEST_P(CudaForwardHybridTest, PromptAndDecodeWithin1e3OfCpuAndSameGreedyTokens) {
  SKIP_WITHOUT_CUDA_DEVICE();
  expect_cuda_near_cpu(dir(), ids_of(name()), GetParam(), 1e-3);
}

// A prompt of 140 ids (past two chunks of 64) fed as one forward, in pieces of 65, 64 and 63 rows and token by token:
// the states carried across forwards (the chunked form over runs that start mid-sequence, the recurrent step), each
// within 1e-3 of the CPU's one forward (the CPU's own pieces are 4e-5 from it: hybrid_test.cpp).
TEST_P(CudaForwardHybridTest, PromptInPiecesAndTokenByTokenNearTheCpusOneForward) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::vector<int32_t> ids = ids_of(name());
  ids.resize(std::min<size_t>(ids.size(), 140));
  auto cpu_model = Model::load(dir());
  const std::vector<float> cpu = prompt_logits(*cpu_model, ids, 512);
  auto model = Model::load(dir());
  CudaForwardOptions o;
  o.verbose = false;
  use_cuda_forward(*model, o);
  for (const int rows : {140, 65, 64, 63, 1}) {
    const std::vector<float> got = prompt_logits(*model, ids, rows);
    ASSERT_EQ(got.size(), cpu.size());
    const double err = max_abs_diff(got, cpu);
    EXPECT_LE(err, 1e-3) << GetParam() << ": pieces of " << rows << " rows";
    std::printf("%s: prompt in pieces of %d rows: max |logit diff| vs the CPU's one forward %.3g\n", GetParam().c_str(),
                rows, err);
  }
}

// A sequence rewound to position 0 (chat's /reset, the server recomputing a prompt) starts from a zero state: the
// same prompt on the same cache gives the same logits bits again.
TEST_P(CudaForwardHybridTest, ASequenceRewoundToZeroStartsFromAZeroState) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::vector<int32_t> ids = ids_of(name());
  ids.resize(20);
  auto model = Model::load(dir());
  CudaForwardOptions o;
  o.verbose = false;
  use_cuda_forward(*model, o);
  Engine engine(*model, {});
  const int seq = engine.add_sequence();
  SequenceStep step{seq, ids, true};
  const std::vector<float> first = engine.step({&step, 1});
  SequenceStep more{seq, {ids.data(), 3}, true};
  engine.step({&more, 1});  // the state moves on
  engine.truncate(seq, 0);
  EXPECT_EQ(engine.step({&step, 1}), first);
}

// Two sequences prompted and then decoded in the same forwards, each row its own sequence's state, give each one's
// logits alone bit for bit (below 64 rows a row's bits do not depend on the rows beside it).
TEST_P(CudaForwardHybridTest, SequencesDecodedTogetherGiveTheirLogitsAloneBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<int32_t> ids = ids_of(name());
  const std::vector<int32_t> pa(ids.begin(), ids.begin() + 10), pb(ids.begin() + 10, ids.begin() + 25);
  auto model = Model::load(dir());
  CudaForwardOptions o;
  o.verbose = false;
  use_cuda_forward(*model, o);
  // Each sequence's prompt, then 5 decode steps of ids[30 + t] (a's) and ids[40 + t] (b's): every forward's logits.
  auto run = [&](bool with_a, bool with_b) {
    Engine engine(*model, {});
    const int a = engine.add_sequence(), b = engine.add_sequence();
    std::vector<std::vector<float>> out;
    for (int t = -1; t < 5; ++t) {
      const std::vector<int32_t> ta = t < 0 ? pa : std::vector<int32_t>{ids[size_t(30 + t)]},
                                 tb = t < 0 ? pb : std::vector<int32_t>{ids[size_t(40 + t)]};
      std::vector<SequenceStep> steps;
      if (with_a) steps.push_back({a, ta, false});
      if (with_b) steps.push_back({b, tb, false});
      out.push_back(engine.step(steps));
    }
    return out;
  };
  const auto together = run(true, true), a_alone = run(true, false), b_alone = run(false, true);
  const size_t V = size_t(model->config().vocab_size);
  for (size_t t = 0; t < together.size(); ++t) {
    ASSERT_EQ(together[t].size(), 2 * V);
    EXPECT_TRUE(std::equal(a_alone[t].begin(), a_alone[t].end(), together[t].begin())) << "step " << t;
    EXPECT_TRUE(std::equal(b_alone[t].begin(), b_alone[t].end(), together[t].begin() + long(V))) << "step " << t;
  }
}

// 150 rows (every product float32-accurate: on tensor cores with x, and weights not exact in TF32, split in two):
// within 1e-3 of the CPU, and bit-identical with top-k VRAM slots.
TEST_P(CudaForwardHybridTest, LongPromptNearTheCpuAndBitIdenticalAcrossBudgets) {
  SKIP_WITHOUT_CUDA_DEVICE();
  expect_long_prompt_on_tensor_cores(dir(), long_ids(name()), GetParam(), 1e-3);
}

// The attention layers' rows sit after one another, the linear layers taking none (kv/kv_layout.h): a growth moves
// each attention layer's rows to its base at the new capacity.
TEST_P(CudaForwardHybridTest, ACacheGrownAcrossStepsGivesTheLogitsOfOneAllocatedOnceBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::vector<int32_t> ids = ids_of(name());
  ids.resize(std::min<size_t>(ids.size(), 140));
  expect_growth_bit_identical(dir(), ids, GetParam());
}

TEST_P(CudaForwardHybridTest, DecodeGraphBitIdenticalToOpByOpLaunches) {
  SKIP_WITHOUT_CUDA_DEVICE();
  expect_graph_bit_identical(dir(), ids_of(name()), GetParam());
}

TEST_P(CudaForwardHybridTest, HostComputedMissesGiveAllInVramDecodeWithinRoundingAndItsGreedyTokens) {
  SKIP_WITHOUT_CUDA_DEVICE();
  expect_host_misses_near_all_in_vram(dir(), ids_of(name()), GetParam());
}

INSTANTIATE_TEST_SUITE_P(HybridFamilies, CudaForwardHybridTest,
                         ::testing::Values("qwen3_next_a/hf", "qwen3_5_moe_a/hf", "qwen3_5_moe_a/hub"),
                         folder_test_name);

// deepseek_v3 (multi-head latent attention, issue 24) as checked in: with q_lora_rank, YaRN and group routing with a
// correction bias and a dense first layer (a); with q_proj and plain RoPE (b); as released in FP8 (fp8/hub: the
// attention, dense and shared MLPs' weights in fp8_g32). Each: a short prompt and token-by-token decode within 2e-2 of
// the CPU with its greedy tokens; a 150-row prompt in 32-row chunks (every product in float32 on CUDA cores) within
// 1e-4 of the CPU, and whole (tensor cores: TF32 inputs, and FP8 weights rounded to TF32, which the TF32-rounded CPU
// of the plan families' test cannot mimic) within 2e-2, bit-identical with top-k VRAM slots; the decode graph
// bit-identical to op-by-op launches. Every MLA row, prompt or decode, runs the same absorbed kernels, so a
// position's logits in a prompt (below kTensorCoreRows rows) are the bits it gets decoded after the prompt before it.
class CudaForwardMlaTest : public CudaForwardPlanTest {};

TEST_P(CudaForwardMlaTest, ShortPromptAndDecodeWithin2e2OfCpuAndSameGreedyTokens) {
  SKIP_WITHOUT_CUDA_DEVICE();
  expect_cuda_near_cpu(dir(), ids_of(name()), GetParam());
}

TEST_P(CudaForwardMlaTest, LongPromptNearTheCpuAndBitIdenticalAcrossBudgets) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<int32_t> ids = long_ids(name());
  auto cpu_model = Model::load(dir());
  const double f32_err = float32_chunks_error(dir(), ids, prompt_logits(*cpu_model, ids, 512));
  EXPECT_LE(f32_err, 1e-4) << GetParam() << ": float32 products (32-row chunks)";
  // On tensor cores an MLA query passes three TF32-rounded products in series (q_a, q_b, then the absorbed query
  // against the cache row that kv_a's product made) where a GQA query passes one (q): three roundings of 2^-11
  // against logits of 25-37 is 3 x 2^-11 x 37 = 0.054, where expect_long_prompt_on_tensor_cores' 2e-2 allows one.
  // Measured on an H100 (2026-12-05, docs/results/2026-12-05-cuda-new-families.md): 0.025-0.036, greedy tokens
  // equal; the first run asserted 2e-2 and failed at those values.
  const double tc = expect_long_prompt_on_tensor_cores(dir(), ids, GetParam(), 3 * 37.0 / 2048);
  std::printf("%s: 150-token prompt: float32 chunks %.3g from the CPU; tensor cores %.3g\n", GetParam().c_str(),
              f32_err, tc);
}

TEST_P(CudaForwardMlaTest, DecodeGraphBitIdenticalToOpByOpLaunches) {
  SKIP_WITHOUT_CUDA_DEVICE();
  expect_graph_bit_identical(dir(), ids_of(name()), GetParam());
}

TEST_P(CudaForwardMlaTest, PromptRowEqualsTheSameRowDecodedBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<int32_t> ids = ids_of(name());
  ASSERT_LT(int64_t(ids.size()), cuda::kTensorCoreRows) << "the prompt must stay on CUDA cores";
  auto model = Model::load(dir());
  CudaForwardOptions o;
  o.verbose = false;
  use_cuda_forward(*model, o);
  const std::vector<float> prompt = prompt_logits(*model, ids, 512);
  const int64_t vocab = model->config().vocab_size, n = int64_t(ids.size());
  Engine engine(*model, {});
  const int seq = engine.add_sequence();
  SequenceStep first{seq, {ids.data(), size_t(n - 1)}, false};
  engine.step({&first, 1});
  SequenceStep last{seq, {&ids[size_t(n - 1)], 1}, true};
  const std::vector<float> decoded = engine.step({&last, 1});
  ASSERT_EQ(decoded.size(), size_t(vocab));
  const std::vector<float> in_prompt(prompt.end() - vocab, prompt.end());
  EXPECT_EQ(decoded, in_prompt) << GetParam() << ": position " << n - 1 << " decoded against in the prompt";
}

TEST_P(CudaForwardMlaTest, HostComputedMissesGiveAllInVramDecodeWithinRoundingAndItsGreedyTokens) {
  SKIP_WITHOUT_CUDA_DEVICE();
  expect_host_misses_near_all_in_vram(dir(), ids_of(name()), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Mla, CudaForwardMlaTest,
                         ::testing::Values("deepseek_v3_a/hf", "deepseek_v3_b/hf", "deepseek_v3_fp8/hub"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) ch = ch == '/' ? '_' : ch;
                           return n;
                         });

// GGUF files (docs/formats/gguf.md) on CUDA, every quant type computed on as stored (cuda/ggml_pieces.h): llama.cpp's
// own llama-quantize outputs of a K-quant-sized qwen3_moe (Q4_K_M: Q4_K with Q6_K and Q5_0 among them; Q6_K; IQ4_XS
// with a Q8_0 attn_v; Q8_0: tests/data/gguf/llama_cpp/README.md), Seedling's Q4_1 file (q4_g32), gpt-oss with
// MXFP4 experts as ggml stores them (mxfp4_ggml, put in mxfp4's VRAM form) and qwen35moe (Gated DeltaNet, norms stored
// as 1 + w). Each: a short prompt (CUDA cores) and
// token-by-token decode within 2e-2 of the CPU with its greedy tokens, the decode graph bit-identical to op-by-op
// launches; a 150-row prompt on tensor cores (q8_0, q5_0 on the f16 kernel, the K types and iq4_xs on TF32,
// mxfp4_ggml on CUDA cores) within the larger of 2e-2 and 4e + 1e-4 of the CPU, e the CPU's own distance when every
// tensor-core product's input is rounded to TF32 (Tf32Rounding, above: the weights round at that unit too), and
// bit-identical with top-k VRAM slots. Then `pack -m FILE.gguf` (every expert's bytes as stored): the pack's CUDA
// logits are the file's bit for bit, and the same checks hold on it.
struct GgufCase {
  std::string file;  // under tests/data/gguf/
  std::vector<int32_t> ids;
};
const std::vector<int32_t> kKquantIds = {1, 5, 77, 200, 13, 42, 99, 128, 255, 0, 64, 31};

class CudaGgufTest : public ::testing::TestWithParam<GgufCase> {
 protected:
  std::string path() const { return test::data_path("gguf/" + GetParam().file + ".gguf"); }
  std::vector<int32_t> long_prompt() const {
    std::vector<int32_t> out;
    while (out.size() < 150) out.push_back(GetParam().ids[out.size() % GetParam().ids.size()]);
    return out;
  }
};

TEST_P(CudaGgufTest, ShortPromptAndDecodeWithin2e2OfCpuAndSameGreedyTokens) {
  SKIP_WITHOUT_CUDA_DEVICE();
  expect_cuda_near_cpu(path(), GetParam().ids, GetParam().file);
  expect_graph_bit_identical(path(), GetParam().ids, GetParam().file);
}

TEST_P(CudaGgufTest, LongPromptOnTensorCoresNearTheCpuAlsoPackedAndBitIdenticalAcrossBudgets) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<int32_t> ids = long_prompt();
  auto cpu_model = Model::load(path());
  const std::vector<float> cpu = prompt_logits(*cpu_model, ids, 512);
  Tf32Rounding tf32;
  cpu_model->set_activation_observer(&tf32);
  const double e = max_abs_diff(prompt_logits(*cpu_model, ids, 512), cpu);
  const double tolerance = std::max(2e-2, 4 * e + 1e-4);
  const double err = expect_long_prompt_on_tensor_cores(path(), ids, GetParam().file, tolerance);
  std::printf("%s: 150-token prompt on tensor cores %.3g from the CPU (TF32-rounded CPU %.3g; tolerance %.3g)\n",
              GetParam().file.c_str(), err, e, tolerance);
  const test::ScratchDir tmp("ggufpack");
  test::pack_checkpoint(path(), tmp / "p", "");
  expect_long_prompt_on_tensor_cores(tmp / "p", ids, GetParam().file + " packed", tolerance);
  std::vector<Outcome> outcomes;
  for (const std::string& dir : {path(), tmp / "p"}) {
    auto model = Model::load(dir);
    CudaForwardOptions o;
    o.verbose = false;
    use_cuda_forward(*model, o);
    outcomes.push_back(run_model(*model, ids));
  }
  EXPECT_EQ(outcomes[1].logits, outcomes[0].logits) << GetParam().file << ": the pack's bytes are the file's";
  EXPECT_EQ(outcomes[1].decode_logits, outcomes[0].decode_logits) << GetParam().file;
}

INSTANTIATE_TEST_SUITE_P(Files, CudaGgufTest,
                         ::testing::Values(GgufCase{"llama_cpp/kquant_small_q4_k_m", kKquantIds},
                                           GgufCase{"llama_cpp/kquant_small_q6_k", kKquantIds},
                                           GgufCase{"llama_cpp/kquant_small_iq4_xs", kKquantIds},
                                           GgufCase{"llama_cpp/kquant_qwen3moe_q8_0", kKquantIds},
                                           GgufCase{"llama_cpp/kquant_qwen3moe_q4_k_m", kKquantIds},
                                           GgufCase{"qwen3moe_q4_1", {1, 7, 33, 2, 63, 0, 12, 45}},
                                           GgufCase{"gpt_oss_mxfp4", {1, 5, 9, 2, 40}},
                                           GgufCase{"qwen35moe_q4_1", {1, 5, 9, 200, 33, 7, 100, 64}}),
                         [](const auto& info) {
                           std::string n = info.param.file;
                           return n.substr(n.find('/') + 1);
                         });

// A Q4_K_M file keeps some layers' down projections in Q6_K and the rest in Q4_K (llama-quantize's use_more_bits):
// kquant_qwen3moe_q4_k_m has Q4_K in layer 0 and Q6_K in layer 1. Each layer's kernels get its own layout and a VRAM
// slot holds the larger blob, so its pack gives one set of logits all in VRAM, in top-k VRAM slots fed from pinned
// memory, and in three tiers (top-k RAM slots over the pack's files), within 2e-2 of the CPU.
TEST(CudaForward, LayersWhoseExpertsDifferInCodecRunInEveryPlacementWithTheSameBits) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const test::ScratchDir tmp("mixedlayers");
  test::pack_checkpoint(test::data_path("gguf/llama_cpp/kquant_qwen3moe_q4_k_m.gguf"), tmp / "p", "");
  auto reference = Model::load(tmp / "p");
  const cuda::ExpertLayout l0 = cuda::expert_layout(*reference, 0), l1 = cuda::expert_layout(*reference, 1);
  ASSERT_NE(l0.down, l1.down) << "the file should mix down codecs across layers";
  const uint64_t slot = cuda::expert_slot_bytes(*reference);
  EXPECT_EQ(slot, std::max(l0.bytes, l1.bytes));
  const int k = reference->config().experts_per_token;
  const Outcome cpu = run_model(*Model::load(tmp / "p"), kKquantIds);
  CudaForwardOptions all;
  all.verbose = false;
  use_cuda_forward(*reference, all);
  const Outcome want = run_model(*reference, kKquantIds);
  EXPECT_LE(max_abs_diff(want.logits, cpu.logits), 2e-2);
  EXPECT_EQ(want.greedy, cpu.greedy);
  for (const bool three_tiers : {false, true}) {
    auto model = load_cached(tmp / "p", uint64_t(k) * slot, three_tiers ? k : 0);
    const Outcome got = run_model(*model, kKquantIds);
    const ExpertStats vram = model->device_forward()->expert_stats();
    EXPECT_EQ(got.logits, want.logits) << (three_tiers ? "three tiers" : "pinned");
    EXPECT_EQ(got.decode_logits, want.decode_logits) << (three_tiers ? "three tiers" : "pinned");
    EXPECT_EQ(vram.slots, k);
    EXPECT_EQ(vram.slot_bytes, slot);
    EXPECT_GT(vram.misses, 0u);
  }
}

TEST(CudaForward, VramBudgetBelowOneLayersTopKIsOneClearError) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto model = Model::load(test::data_path("models/qwen3_moe_a/hf"));
  const uint64_t blob = cuda::expert_slot_bytes(*model);
  CudaForwardOptions o;
  o.verbose = false;
  o.vram_budget = uint64_t(model->config().experts_per_token) * blob - 1;
  o.budget_given = true;
  try {
    use_cuda_forward(*model, o);
    FAIL() << "a budget below top-k experts was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--vram-budget"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("top-2 experts need at least"), std::string::npos) << e.what();
  }
}

// --route-trace on CUDA: the forward hands each MoE layer's routes to the observer, the same experts as the CPU's
// router for the same prompt (weights within float rounding of the two softmaxes); an activation observer (imatrix),
// which the CUDA forward cannot feed, is refused rather than left empty.
TEST(CudaForward, RouteObserverSeesTheRoutesTheCpuChooses) {
  SKIP_WITHOUT_CUDA_DEVICE();
  struct Recording : RouteObserver {
    std::vector<std::tuple<int, int, std::vector<int>, std::vector<float>>> routes;
    void on_route(int layer, int row, std::span<const int> e, std::span<const float> w) override {
      routes.emplace_back(layer, row, std::vector<int>(e.begin(), e.end()), std::vector<float>(w.begin(), w.end()));
    }
  };
  const std::vector<int32_t> ids = {1, 2, 3, 4, 5};
  auto run = [&](bool cuda, Recording& observer) {
    auto model = Model::load(test::data_path("models/qwen3_moe_a/hf"));
    CudaForwardOptions o;
    o.verbose = false;
    if (cuda) use_cuda_forward(*model, o);
    model->set_route_observer(&observer);
    Engine engine(*model, {});
    const int seq = engine.add_sequence();
    SequenceStep step{seq, ids, false};
    engine.step({&step, 1});
    model->set_route_observer(nullptr);
  };
  Recording cpu, gpu;
  run(false, cpu);
  run(true, gpu);
  ASSERT_FALSE(cpu.routes.empty());
  ASSERT_EQ(gpu.routes.size(), cpu.routes.size());
  for (size_t i = 0; i < cpu.routes.size(); ++i) {
    const auto& [cl, cr, ce, cw] = cpu.routes[i];
    const auto& [gl, gr, ge, gw] = gpu.routes[i];
    EXPECT_EQ(gl, cl);
    EXPECT_EQ(gr, cr);
    EXPECT_EQ(ge, ce) << "layer " << cl << " row " << cr;
    for (size_t k = 0; k < cw.size(); ++k) EXPECT_NEAR(gw[k], cw[k], 1e-5) << "layer " << cl << " row " << cr;
  }

  struct Inputs : ActivationObserver {
    int calls = 0;
    void on_input(int, MatrixInput, int, const float*, int64_t, int64_t) override { ++calls; }
  } inputs;
  auto model = Model::load(test::data_path("models/qwen3_moe_a/hf"));
  CudaForwardOptions o;
  o.verbose = false;
  use_cuda_forward(*model, o);
  model->set_activation_observer(&inputs);
  Engine engine(*model, {});
  const int seq = engine.add_sequence();
  SequenceStep step{seq, ids, false};
  try {
    engine.step({&step, 1});
    FAIL() << "an activation observer was accepted by the CUDA forward";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CPU forward only"), std::string::npos) << e.what();
  }
  EXPECT_EQ(inputs.calls, 0);
}

TEST(CudaDevice, NoGpuIsOneClearError) {
  const CudaDevices d = cuda_devices();
  if (!d.devices.empty()) GTEST_SKIP() << "a GPU is present; this checks the machine without one";
  EXPECT_FALSE(d.why_none.empty());
  auto model = Model::load(test::data_path("models/qwen3_moe_a/hf"));
  try {
    use_cuda_forward(*model, {});
    FAIL() << "--device cuda without a GPU was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
}

}  // namespace seedling
