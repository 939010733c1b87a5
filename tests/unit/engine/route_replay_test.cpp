// Route replay (--route-replay, RouteReplay): replaying a model's own trace changes no logit (bit for bit); replaying
// another model's trace forces exactly its routes (the trace written during the replay equals the one replayed), under
// any batching; a trace that does not fit the model, or runs out, is an Error naming the file and the position.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/engine.h"
#include "experts/route_trace.h"
#include "model/model.h"
#include "test_util.h"

namespace seedling {

namespace {

// A prefill of `ids` (logits of every row) then three decode steps, each feeding the first id again: several steps
// and layers, batched and single rows. Returns every logit in order.
std::vector<float> run_steps(Model& model, const std::vector<int32_t>& ids) {
  Engine engine(model, {});
  const int seq = engine.add_sequence();
  SequenceStep prefill{seq, ids, true};
  std::vector<float> all = engine.step({&prefill, 1});
  for (int i = 0; i < 3; ++i) {
    const int32_t one = ids[size_t(i)];
    SequenceStep step{seq, {&one, 1}, false};
    const std::vector<float> l = engine.step({&step, 1});
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

// Runs run_steps with an optional replay source, writing the routes taken to `trace_out`.
std::vector<float> traced_run(Model& model, const std::vector<int32_t>& ids, const std::string& trace_out,
                              RouteSource* replay = nullptr) {
  RouteTraceWriter w(trace_out);
  model.set_route_observer(&w);
  model.set_route_source(replay);
  std::vector<float> logits = run_steps(model, ids);
  model.set_route_observer(nullptr);
  model.set_route_source(nullptr);
  w.close();
  return logits;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

RouteReplay replay_for(const Model& model, const std::string& path) {
  const ModelConfig& c = model.config();
  return RouteReplay(path, c.layer_has_experts, c.num_experts, c.experts_per_token);
}

// The message of the Error `f` throws; empty (and a test failure) when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no Error thrown";
  return "";
}

}  // namespace

TEST(RouteReplay, ReplayingARunsOwnTraceGivesBitIdenticalLogits) {
  test::ScratchDir dir("replay");
  auto model = Model::load(test::data_path("models/qwen3_moe_a/hf"));
  const std::vector<int32_t> ids = test::golden_ids("qwen3_moe_a");
  const std::vector<float> plain = traced_run(*model, ids, dir / "own.csv");
  RouteReplay replay = replay_for(*model, dir / "own.csv");
  const std::vector<float> replayed = traced_run(*model, ids, dir / "again.csv", &replay);
  EXPECT_EQ(replay.used(), replay.size());
  ASSERT_EQ(plain.size(), replayed.size());
  for (size_t i = 0; i < plain.size(); ++i) ASSERT_EQ(plain[i], replayed[i]) << "logit " << i;
  EXPECT_EQ(read_text(dir / "again.csv"), read_text(dir / "own.csv"));
}

TEST(RouteReplay, ReplayingAnotherModelsTraceForcesExactlyItsRoutes) {
  // mixtral_b (3 experts, top-2, 2 layers) fits mixtral_a (4 experts, top-2, 2 layers); their routers differ.
  test::ScratchDir dir("replay");
  auto a = Model::load(test::data_path("models/mixtral_a/hf"));
  auto b = Model::load(test::data_path("models/mixtral_b/hf"));
  const std::vector<int32_t> ids = {1, 5, 9, 2, 7, 3};
  const std::vector<float> a_plain = traced_run(*a, ids, dir / "a.csv");
  traced_run(*b, ids, dir / "b.csv");
  ASSERT_NE(read_text(dir / "a.csv"), read_text(dir / "b.csv")) << "the two models route alike: nothing is tested";
  RouteReplay replay = replay_for(*a, dir / "b.csv");
  const std::vector<float> a_forced = traced_run(*a, ids, dir / "a_as_b.csv", &replay);
  EXPECT_EQ(replay.used(), replay.size());
  EXPECT_EQ(read_text(dir / "a_as_b.csv"), read_text(dir / "b.csv"));
  EXPECT_NE(a_forced, a_plain);  // other routes, other logits
}

TEST(RouteReplay, TracesThatDoNotFitTheModelAreRejectedNamingFileAndPosition) {
  test::ScratchDir dir("replay");
  auto model = Model::load(test::data_path("models/qwen3_moe_a/hf"));  // MoE layers 0 and 2, top-2
  const ModelConfig& c = model->config();
  const std::string path = dir / "bad.csv";
  const std::string header = "token_index,layer,expert_ids,weights,step\n";
  const auto rejected = [&](const std::string& body) {
    write_text(path, header + body);
    return error_of([&] { replay_for(*model, path); });
  };
  EXPECT_NE(rejected("0,1,0 1,0.5 0.5,0\n").find(path + ": route 1 (token 0, layer 1)"), std::string::npos);
  EXPECT_NE(rejected("0,7,0 1,0.5 0.5,0\n").find("no routed experts in that layer"), std::string::npos);
  EXPECT_NE(rejected("0,0,0 1 2,0.3 0.3 0.4,0\n").find("the model routes top-2"), std::string::npos);
  EXPECT_NE(rejected("0,0,0 1,0.5,0\n").find("2 experts and 1 weights"), std::string::npos);
  EXPECT_NE(rejected("0,0,0 1,,0\n").find("2 experts and 0 weights"), std::string::npos);
  const std::string too_big = fmt::format("0,0,0 {},0.5 0.5,0\n", c.num_experts);
  EXPECT_NE(rejected(too_big).find(fmt::format("expert {}, the model has {}", c.num_experts, c.num_experts)),
            std::string::npos);
  EXPECT_NE(rejected("0,0,3 3,0.5 0.5,0\n").find("expert 3 chosen twice"), std::string::npos);
  EXPECT_NE(rejected("0,0,0 1,nan 0.5,0\n").find("weight nan is not a finite number"), std::string::npos);
  EXPECT_NE(rejected("0,0,0 1,0.5 -inf,0\n").find("weight -inf is not a finite number"), std::string::npos);
  EXPECT_NE(rejected("").find("no routes to replay"), std::string::npos);

  EXPECT_NE(
      rejected("0,0,0 1,0.5 0.5,0\n0,0,1 2,0.5 0.5,1\n").find(path + ": route 2 (token 0, layer 0) repeats route 1"),
      std::string::npos);
  EXPECT_NE(rejected("-1,0,0 1,0.5 0.5,0\n").find("token_index out of range"), std::string::npos);

  // A trace of the right shape that runs out, or lacks a route the forward asks for, fails in the forward.
  const std::vector<int32_t> ids = test::golden_ids("qwen3_moe_a");
  traced_run(*model, ids, dir / "own.csv");
  std::string own = read_text(dir / "own.csv");
  own.erase(own.rfind('\n', own.size() - 2) + 1);  // drop the last route (the last token's layer 2)
  write_text(path, own);
  RouteReplay missing = replay_for(*model, path);
  const std::string gap = error_of([&] { traced_run(*model, ids, dir / "x.csv", &missing); });
  EXPECT_NE(gap.find(path + ": no route for token " + std::to_string(ids.size() + 2) + " layer 2"), std::string::npos)
      << gap;

  write_text(path, header + "0,0,0 1,0.5 0.5,0\n0,2,0 1,0.5 0.5,0\n");
  RouteReplay one_token = replay_for(*model, path);
  const std::string ran_out = error_of([&] { traced_run(*model, ids, dir / "y.csv", &one_token); });
  EXPECT_NE(
      ran_out.find(path + ": the route trace ran out after token 0 (2 routes); the model asked for token 1 layer 0"),
      std::string::npos)
      << ran_out;
}

// Next-layer predictions (--prefetch-replay) are handed out for the token whose routes the step is asking: a layer
// after the step's first, before its own route; they are checked like routes.
TEST(RouteReplay, PredictionsFollowTheReplayedTokens) {
  test::ScratchDir dir("replay");
  auto model = Model::load(test::data_path("models/qwen3_moe_a/hf"));  // MoE layers 0 and 2, 8 experts, top-2
  const std::string trace = dir / "t.csv", guesses = dir / "g.csv";
  write_text(trace,
             "token_index,layer,expert_ids,weights\n0,0,0 1,0.5 0.5\n0,2,2 3,0.5 0.5\n1,0,4 5,0.5 0.5\n"
             "1,2,6 7,0.5 0.5\n");
  write_text(guesses, "token_index,layer,predicted_ids\n0,2,3 2 1\n1,2,7 0\n");
  RouteReplay replay = replay_for(*model, trace);
  std::vector<int> guess(2, -1), ids(2);
  std::vector<float> w(2);
  EXPECT_EQ(replay.predict(2, 0, guess), -1);  // no predictions loaded: the forward keeps its own
  replay.load_predictions(guesses);
  EXPECT_EQ(replay.predict(0, 0, guess), 0);  // before the step's first route: no token to predict for
  replay.route(0, 0, ids, w);
  ASSERT_EQ(replay.predict(2, 0, guess), 2);  // token 0, layer 2: its first two guesses
  EXPECT_EQ(guess, (std::vector<int>{3, 2}));
  replay.route(2, 0, ids, w);
  replay.route(0, 0, ids, w);  // token 1
  ASSERT_EQ(replay.predict(2, 0, guess), 2);
  EXPECT_EQ(guess, (std::vector<int>{7, 0}));
  const auto rejected = [&](const std::string& body) {
    write_text(guesses, "token_index,layer,predicted_ids\n" + body);
    return error_of([&] { replay.load_predictions(guesses); });
  };
  EXPECT_NE(rejected("0,1,3\n").find(guesses + ": route 1 (token 0, layer 1): the model has no routed experts"),
            std::string::npos);
  EXPECT_NE(rejected("0,2,8\n").find("expert 8, the model has 8"), std::string::npos);
  EXPECT_NE(rejected("0,2,1 1\n").find("expert 1 chosen twice"), std::string::npos);
  EXPECT_NE(rejected("").find("no predictions"), std::string::npos);
  write_text(guesses, "token_index,layer,expert_ids\n0,2,1\n");
  EXPECT_NE(error_of([&] { replay.load_predictions(guesses); }).find("lacks token_index, layer or predicted_ids"),
            std::string::npos);
}

// Routes are keyed by token, not by the forward's batching: a trace written by a prefill of every id at once replays
// on a run that feeds the same ids one decode step at a time, and that run takes exactly the recorded routes.
TEST(RouteReplay, ATraceReplaysUnderAnyBatching) {
  test::ScratchDir dir("replay");
  auto a = Model::load(test::data_path("models/mixtral_a/hf"));
  auto b = Model::load(test::data_path("models/mixtral_b/hf"));
  const std::vector<int32_t> ids = {1, 5, 9, 2, 7, 3};
  // b's routes for a prefill of all six ids, then three decode steps (tokens 6 to 8).
  traced_run(*b, ids, dir / "b.csv");
  RouteReplay replay = replay_for(*a, dir / "b.csv");
  RouteTraceWriter w(dir / "a_as_b.csv");
  a->set_route_observer(&w);
  a->set_route_source(&replay);
  {
    Engine engine(*a, {});
    const int seq = engine.add_sequence();
    for (size_t i = 0; i < ids.size() + 3; ++i) {
      const int32_t one = i < ids.size() ? ids[i] : ids[i - ids.size()];
      SequenceStep step{seq, {&one, 1}, false};
      engine.step({&step, 1});
    }
  }
  a->set_route_observer(nullptr);
  a->set_route_source(nullptr);
  w.close();
  EXPECT_EQ(replay.used(), replay.size());
  // The same token_index, layer, experts and weights on every line; the step column and the order of the lines
  // (layer by layer in a prefill, token by token in a decode) differ.
  const auto without_steps = [](const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line.substr(0, line.rfind(',')));
    std::sort(lines.begin() + 1, lines.end());
    return lines;
  };
  EXPECT_EQ(without_steps(read_text(dir / "a_as_b.csv")), without_steps(read_text(dir / "b.csv")));
}

}  // namespace seedling
