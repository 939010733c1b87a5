// ops::expert_products (a MoE layer's experts in one parallel region) against the products one after another
// (matmul, the activation, matmul) bit for bit, for float and int8 activations, any thread count; a failing step
// ends the region with its exception; and a model's affine pack under int8 gives a row the same logits in a prompt
// of 24 rows (the GEMM kernel, the region) as decoded one row at a time (the decode kernel), on 1-3 threads; and the
// MoE block runs the experts its provider holds before one still being read, with the same bits.
#include "ops/expert_products.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "codec/quantize.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "experts/expert_provider.h"
#include "model/model.h"
#include "ops/ops.h"
#include "test_util.h"

namespace seedling {

namespace {

struct Expert {
  int64_t m = 0;
  std::vector<uint8_t> gate, up, down;
  std::vector<float> src, x, g, u, a, d;
};

std::vector<uint8_t> encode(Codec c, int64_t rows, int64_t cols, uint64_t seed) {
  const auto w = test::gaussian(size_t(rows * cols), seed);
  std::vector<uint8_t> out(codec_matrix_bytes(c, rows, cols));
  encode_matrix(c, DType::F32, w.data(), rows, cols, out.data());
  return out;
}

// Another model's provider, through which the first expert of every prefetch is "still being read": ready() is false
// for it until it is acquired. Records each prefetch's first expert and the order of the acquires that follow.
class LateFirstExpert final : public ExpertProvider {
 public:
  explicit LateFirstExpert(ExpertProvider& inner) : inner_(inner) {}
  void prefetch(int layer, std::span<const int> experts) override {
    late_layer_ = layer;
    late_ = experts.empty() ? -1 : experts[0];
    firsts.push_back(late_);
    acquired.emplace_back();
    inner_.prefetch(layer, experts);
  }
  ExpertWeights acquire(int layer, int expert) override {
    acquired.back().push_back(expert);
    if (layer == late_layer_ && expert == late_) late_ = -1;
    return inner_.acquire(layer, expert);
  }
  void release(int layer, int expert) override { inner_.release(layer, expert); }
  bool ready(int layer, int expert) override { return !(layer == late_layer_ && expert == late_); }
  const char* name() const override { return "late-first"; }

  std::vector<int> firsts;
  std::vector<std::vector<int>> acquired;

 private:
  ExpertProvider& inner_;
  int late_layer_ = -1, late_ = -1;
};

void restore_threads() {
  ThreadPool::set_global_threads(int(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace

TEST(ExpertProducts, OneRegionEqualsTheProductsOneAfterAnotherBitForBit) {
  const int64_t H = 130, I = 100;                   // short last pieces (64 outputs) and blocks (32, 64)
  const ops::ScopedCpuDot restore(ops::cpu_dot());  // the mode before, back at the end
  for (const Codec c : {Codec::Q4_G32, Codec::Q8_G64, Codec::BF16}) {
    for (const ops::CpuDot dot : {ops::CpuDot::Float, ops::CpuDot::Int8}) {
      ops::set_cpu_dot(dot);
      std::vector<Expert> experts;
      for (const int64_t m : {1, 9, 3, 20}) {
        Expert e;
        e.m = m, e.gate = encode(c, I, H, 1 + m), e.up = encode(c, I, H, 2 + m), e.down = encode(c, H, I, 3 + m);
        e.src = test::gaussian(size_t(m * H), 4 + m);
        experts.push_back(std::move(e));
      }
      const auto matrices = [&](const Expert& e) {
        return std::array<ops::Matrix, 3>{ops::Matrix{c, e.gate.data(), I, H}, ops::Matrix{c, e.up.data(), I, H},
                                          ops::Matrix{c, e.down.data(), H, I}};
      };
      // The products one after another: matmul (its own threads), silu_mul over the whole of g and u.
      std::vector<std::vector<float>> want;
      for (const Expert& e : experts) {
        const auto [gate, up, down] = matrices(e);
        std::vector<float> g(size_t(e.m * I)), u(g.size()), d(size_t(e.m * H));
        ops::matmul(e.src.data(), e.m, gate, g.data());
        ops::matmul(e.src.data(), e.m, up, u.data());
        ops::silu_mul(g.data(), u.data(), g.data(), e.m * I);
        ops::matmul(g.data(), e.m, down, d.data());
        want.push_back(d);
      }
      for (const int threads : {1, 2, 3}) {
        ThreadPool::set_global_threads(threads);
        std::vector<ops::ExpertJob> jobs;
        for (Expert& e : experts) {
          e.x.assign(size_t(e.m * H), 0.0f);
          e.g.assign(size_t(e.m * I), 0.0f), e.u = e.g, e.a = e.g;
          e.d.assign(size_t(e.m * H), -1.0f);
          const auto [gate, up, down] = matrices(e);
          ASSERT_TRUE(ops::matmul_by_pieces(gate));
          jobs.push_back({e.m, gate, up, down, e.x.data(), e.g.data(), e.u.data(), e.a.data(), e.d.data()});
        }
        const ops::ExpertSteps steps{[&](size_t j) { experts[j].x = experts[j].src; },
                                     [&](size_t j, int64_t n0, int64_t n1) {
                                       Expert& e = experts[j];
                                       for (int64_t r = 0; r < e.m; ++r)
                                         ops::silu_mul(e.g.data() + r * I + n0, e.u.data() + r * I + n0,
                                                       e.a.data() + r * I + n0, n1 - n0);
                                     },
                                     [&](size_t, int64_t, int64_t) {}};
        ops::expert_products(jobs, steps);
        for (size_t j = 0; j < experts.size(); ++j) {
          ASSERT_EQ(std::memcmp(experts[j].d.data(), want[j].data(), want[j].size() * 4), 0)
              << codec_name(c) << " int8 " << (dot == ops::CpuDot::Int8) << " threads " << threads << " expert " << j;
        }
      }
    }
  }
  restore_threads();
}

TEST(ExpertProducts, AFailingStepEndsTheRegionWithItsException) {
  const int64_t H = 64, I = 256;
  const auto bytes = encode(Codec::BF16, I, H, 7), down = encode(Codec::BF16, H, I, 8);
  std::vector<float> x(size_t(2 * H), 1.0f), g(size_t(2 * I)), u(g.size()), a(g.size()), d(size_t(2 * H));
  const ops::Matrix w{Codec::BF16, bytes.data(), I, H}, wd{Codec::BF16, down.data(), H, I};
  std::vector<ops::ExpertJob> jobs(3, {2, w, w, wd, x.data(), g.data(), u.data(), a.data(), d.data()});
  for (const int threads : {1, 3}) {
    ThreadPool::set_global_threads(threads);
    const ops::ExpertSteps steps{[](size_t) {},
                                 [](size_t j, int64_t n0, int64_t) {
                                   if (j == 1 && n0 == 128) throw std::runtime_error("step failed");
                                 },
                                 [](size_t, int64_t, int64_t) {}};
    EXPECT_THROW(ops::expert_products(jobs, steps), std::runtime_error) << threads;
  }
  restore_threads();
}

TEST(ExpertProducts, AnAffinePackUnderInt8GivesAPromptRowTheBitsOfDecodingItAlone) {
  const test::ScratchDir tmp("xprod");
  const std::string cmd = std::string(SEEDLING_BINARY) + " pack -m " + test::data_path("models/qwen3_moe_a/hf") +
                          " -o " + (tmp / "p") + " --force --experts q4_g32 --dense q8_g64 2>/dev/null >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const ops::ScopedCpuDot restore(ops::cpu_dot());  // the mode before, back at the end
  ops::set_cpu_dot(ops::CpuDot::Int8);
  auto model = Model::load(tmp / "p");
  const auto ids =
      test::read_json(test::data_path("models/qwen3_moe_a/reference.json"))["ids"].get<std::vector<int32_t>>();
  std::vector<float> full, stepwise;
  for (const int threads : {1, 2, 3}) {
    ThreadPool::set_global_threads(threads);
    Engine whole(*model, {});
    const int a = whole.add_sequence();
    SequenceStep all{a, ids, true};
    const std::vector<float> prompt = whole.step({&all, 1});
    Engine one(*model, {});
    const int b = one.add_sequence();
    std::vector<float> rows;
    for (const int32_t& id : ids) {
      SequenceStep s{b, {&id, 1}, true};
      const std::vector<float> row = one.step({&s, 1});
      rows.insert(rows.end(), row.begin(), row.end());
    }
    ASSERT_EQ(prompt.size(), rows.size());
    EXPECT_EQ(std::memcmp(prompt.data(), rows.data(), rows.size() * 4), 0) << "threads " << threads;
    if (threads == 1) full = prompt, stepwise = rows;
    EXPECT_EQ(std::memcmp(prompt.data(), full.data(), full.size() * 4), 0) << "threads " << threads;
  }
  restore_threads();
}

// The MoE block runs the experts its provider holds before one still being read (ExpertProvider::ready), and the
// logits are those of the plain order bit for bit: a prompt and its decode steps through a provider that holds back
// the first expert of every layer's batch.
TEST(ExpertProducts, HeldExpertsRunBeforeOneStillBeingReadWithTheSameBits) {
  const std::string dir = test::data_path("models/qwen3_moe_a/hf");
  auto plain = Model::load(dir), late = Model::load(dir);
  auto provider = std::make_unique<LateFirstExpert>(plain->experts());
  LateFirstExpert& seen = *provider;
  late->set_expert_provider(std::move(provider));
  const auto ids =
      test::read_json(test::data_path("models/qwen3_moe_a/reference.json"))["ids"].get<std::vector<int32_t>>();
  std::vector<std::vector<float>> out;
  for (Model* m : {plain.get(), late.get()}) {
    Engine engine(*m, {});
    const int seq = engine.add_sequence();
    SequenceStep prompt{seq, {ids.data(), ids.size() - 4}, true};
    std::vector<float> logits = engine.step({&prompt, 1});
    for (size_t i = ids.size() - 4; i < ids.size(); ++i) {
      SequenceStep step{seq, {&ids[i], 1}, true};
      const std::vector<float> row = engine.step({&step, 1});
      logits.insert(logits.end(), row.begin(), row.end());
    }
    out.push_back(std::move(logits));
  }
  ASSERT_EQ(out[0].size(), out[1].size());
  EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4), 0);
  ASSERT_FALSE(seen.acquired.empty());
  int checked = 0;
  for (size_t b = 0; b < seen.acquired.size(); ++b) {
    if (seen.acquired[b].size() < 2) continue;
    EXPECT_EQ(seen.acquired[b].back(), seen.firsts[b]) << "batch " << b;
    EXPECT_NE(seen.acquired[b].front(), seen.firsts[b]) << "batch " << b;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

}  // namespace seedling
