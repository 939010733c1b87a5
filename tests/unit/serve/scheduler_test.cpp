// The scheduler's invariant and what it rests on: a prompt fed in chunks, or after a reused prefix, gives the logits
// of the prompt fed whole, bit for bit; and requests batched together get exactly the tokens each gets alone.
#include "serve/scheduler.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "engine/generate.h"
#include "model/model.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace seedling::serve {

namespace {
std::string demo_dir() {
  return std::string(SEEDLING_TEST_DATA) + "/../../models/seedling-demo-moe";
}

std::vector<int32_t> demo_prompt(const Model& model, size_t n) {
  const Tokenizer tok = Tokenizer::from_file(find_tokenizer_file(model.dir()));
  const std::string text = test::read_file(test::data_path("demo/heldout.txt"));
  std::vector<int32_t> ids = tok.encode(text.substr(0, 20000), false);
  ids.resize(std::min(ids.size(), n));
  return ids;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<float> logits_fed_in_chunks(Model& model, const std::vector<int32_t>& ids, size_t chunk) {
  Engine e(model, {});
  const int seq = e.add_sequence();
  std::vector<float> out;
  for (size_t at = 0; at < ids.size(); at += chunk) {
    const size_t n = std::min(chunk, ids.size() - at);
    SequenceStep s{seq, {ids.data() + at, n}, true};
    std::vector<float> l = e.step({&s, 1});
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}
}  // namespace

TEST(PromptChunks, ChunkedPrefillEqualsWholePromptBitForBit) {
  auto model = Model::load(demo_dir());
  const std::vector<int32_t> ids = demo_prompt(*model, 300);
  ASSERT_EQ(ids.size(), 300u);
  const std::vector<float> whole = logits_fed_in_chunks(*model, ids, ids.size());
  for (size_t chunk : {1, 7, 64, 299}) {
    EXPECT_TRUE(same_bits(logits_fed_in_chunks(*model, ids, chunk), whole)) << "chunk " << chunk;
  }
}

TEST(PromptChunks, PromptAfterReusedPrefixEqualsWholePromptBitForBit) {
  auto model = Model::load(demo_dir());
  const std::vector<int32_t> ids = demo_prompt(*model, 120);
  Engine whole(*model, {});
  const int a = whole.add_sequence();
  SequenceStep all{a, ids, false};
  const std::vector<float> want = whole.step({&all, 1});
  // A sequence that held another continuation after the first 50 ids is cut back to them and fed the rest.
  Engine reuse(*model, {});
  const int b = reuse.add_sequence();
  std::vector<int32_t> other(ids.begin(), ids.begin() + 50);
  for (int i = 0; i < 30; ++i) other.push_back(int32_t(100 + i));
  SequenceStep first{b, other, false};
  reuse.step({&first, 1});
  reuse.truncate(b, 50);
  SequenceStep rest{b, {ids.data() + 50, ids.size() - 50}, false};
  EXPECT_TRUE(same_bits(reuse.step({&rest, 1}), want));
}

namespace {
struct Case {
  size_t prompt_len;
  int max_tokens;
  SamplerParams sampling;
};

std::vector<int32_t> drain(Stream& s, Finish* how) {
  std::vector<int32_t> got;
  for (;;) {
    Stream::Update u = s.wait();
    got.insert(got.end(), u.tokens.begin(), u.tokens.end());
    if (u.finish != Finish::kRunning) {
      *how = u.finish;
      return got;
    }
  }
}
}  // namespace

// 8 requests of different prompt lengths and budgets, greedy and seeded, run together through the scheduler (with a
// small prompt chunk, so prompts are cut and interleaved with decode rows) return the tokens generate() gives each
// alone. A second round reuses the prefixes the slots kept and must give the same tokens again.
TEST(Scheduler, ConcurrentRequestsGetTheTokensEachGetsAlone) {
  auto model = Model::load(demo_dir());
  const std::vector<int32_t> text = demo_prompt(*model, 400);
  std::vector<Case> cases;
  for (int i = 0; i < 8; ++i) {
    SamplerParams p;
    if (i % 2 == 1)
      p = {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .repetition_penalty = 1.1f, .seed = uint64_t(1000 + i)};
    cases.push_back({size_t(5 + 37 * i), 6 + 5 * i, p});
  }
  std::vector<std::vector<int32_t>> alone;
  for (const Case& c : cases) {
    Engine e(*model, {});
    GenerateOptions go;
    go.max_new_tokens = c.max_tokens;
    go.sampling = c.sampling;
    go.stop_ids = {};
    alone.push_back(generate(e, {text.data() + (c.prompt_len % 13), c.prompt_len}, go).tokens);
  }
  Engine engine(*model, {});
  Scheduler sched(engine, {8, 64, 23}, nullptr);
  for (int round = 0; round < 2; ++round) {
    std::vector<std::shared_ptr<Stream>> streams;
    for (const Case& c : cases) {
      const int32_t* from = text.data() + (c.prompt_len % 13);
      streams.push_back(sched.submit({{from, from + c.prompt_len}, c.max_tokens, c.sampling, {}}));
      ASSERT_NE(streams.back(), nullptr);
    }
    for (size_t i = 0; i < cases.size(); ++i) {
      Finish how = Finish::kRunning;
      EXPECT_EQ(drain(*streams[i], &how), alone[i]) << "round " << round << " request " << i;
      EXPECT_EQ(how, Finish::kLength);
      if (round == 1) {
        EXPECT_GT(streams[i]->reused_tokens(), 0) << "request " << i;
      }
    }
  }
  EXPECT_EQ(sched.slots_in_use(), 0);
}

TEST(Scheduler, StopIdEndsTheRequestAndQueueLimitRefuses) {
  auto model = Model::load(demo_dir());
  const std::vector<int32_t> text = demo_prompt(*model, 40);
  Engine alone_engine(*model, {});
  GenerateOptions go;
  go.max_new_tokens = 8;
  const std::vector<int32_t> greedy = generate(alone_engine, text, go).tokens;
  Engine engine(*model, {});
  Scheduler sched(engine, {1, 0, 512}, nullptr);
  // The third greedy token as a stop id: the request ends right after it, with it.
  auto s = sched.submit({text, 8, SamplerParams(), {greedy[2]}});
  ASSERT_NE(s, nullptr);
  Finish how = Finish::kRunning;
  const std::vector<int32_t> got = drain(*s, &how);
  EXPECT_EQ(how, Finish::kStop);
  const auto first = std::find(greedy.begin(), greedy.end(), greedy[2]);
  EXPECT_EQ(got, std::vector<int32_t>(greedy.begin(), first + 1));
  // One slot, no queue: while a long request runs, another is refused; cancelling frees the slot.
  auto longer = sched.submit({text, 1000, SamplerParams(), {}});
  ASSERT_NE(longer, nullptr);
  while (sched.slots_in_use() == 0) std::this_thread::yield();
  EXPECT_EQ(sched.submit({text, 4, SamplerParams(), {}}), nullptr);
  longer->cancel();
  drain(*longer, &how);
  EXPECT_EQ(how, Finish::kCancelled);
  while (sched.slots_in_use() != 0) std::this_thread::yield();
  EXPECT_NE(sched.submit({text, 4, SamplerParams(), {}}), nullptr);
}

// A short request submitted while a long one decodes finishes first: it never waits for the long one to end.
TEST(Scheduler, NewRequestDoesNotWaitForARunningOne) {
  auto model = Model::load(demo_dir());
  const std::vector<int32_t> text = demo_prompt(*model, 60);
  Engine engine(*model, {});
  Scheduler sched(engine, {2, 4, 512}, nullptr);
  auto long_one = sched.submit({text, 1500, SamplerParams(), {}});
  ASSERT_NE(long_one, nullptr);
  Stream::Update first = long_one->wait();  // decoding has begun
  ASSERT_FALSE(first.tokens.empty());
  auto short_one = sched.submit({{text.begin(), text.begin() + 20}, 3, {}, {}});
  ASSERT_NE(short_one, nullptr);
  Finish how = Finish::kRunning;
  EXPECT_EQ(drain(*short_one, &how).size(), 3u);
  EXPECT_EQ(how, Finish::kLength);
  EXPECT_EQ(sched.slots_in_use(), 1);  // the long one still runs
  long_one->cancel();
  drain(*long_one, &how);
  EXPECT_EQ(how, Finish::kCancelled);
}

// A request with an unrelated prompt takes a never-used slot, not the one a finished request left its cache in, so
// that request's prefix is still there when it comes back (requests arriving one by one, as on a loaded machine).
TEST(Scheduler, UnrelatedRequestLeavesAFinishedRequestsCacheAlone) {
  auto model = Model::load(demo_dir());
  const std::vector<int32_t> text = demo_prompt(*model, 80);
  const std::vector<int32_t> a(text.begin() + 1, text.begin() + 30), b(text.begin() + 3, text.begin() + 40);
  ASSERT_NE(a[0], b[0]) << "the prompts must share no prefix";
  Engine engine(*model, {});
  Scheduler sched(engine, {4, 8, 512}, nullptr);
  std::vector<int> reused;
  for (const std::vector<int32_t>* p : {&a, &b, &a}) {
    auto s = sched.submit({*p, 3, {}, {}});
    ASSERT_NE(s, nullptr);
    Finish how = Finish::kRunning;
    drain(*s, &how);
    EXPECT_EQ(how, Finish::kLength);
    reused.push_back(s->reused_tokens());
  }
  EXPECT_EQ(reused, (std::vector<int>{0, 0, int(a.size()) - 1})) << "a's second run reuses all of a but its last id";
}

}  // namespace seedling::serve
