#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace seedling {

namespace {
double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

GenerateResult generate_on(Engine& engine, int seq, std::span<const int32_t> prompt, const GenerateOptions& options,
                           const std::function<bool(int32_t)>& on_token, std::vector<int32_t>& context) {
  if (prompt.empty()) fail("the prompt is empty: at least one token is needed");
  const int V = engine.model().config().vocab_size;
  GenerateResult result;
  Sampler sampler(options.sampling);
  const double t0 = seconds();
  SequenceStep step{seq, prompt, false};
  std::vector<float> logits = engine.step({&step, 1});
  const double t1 = seconds();
  result.prompt_seconds = t1 - t0;
  result.stop_reason = "length";
  for (int i = 0; i < options.max_new_tokens; ++i) {
    const int32_t t = sampler.sample({logits.data(), size_t(V)}, context);
    result.tokens.push_back(t);
    context.push_back(t);
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), t) != options.stop_ids.end()) {
      result.stop_reason = "eos";
      break;
    }
    if (on_token && !on_token(t)) {
      result.stop_reason = "stop";
      break;
    }
    if (i + 1 == options.max_new_tokens) break;
    if (engine.length(seq) + 1 > engine.max_context()) {
      result.stop_reason = "context";
      break;
    }
    SequenceStep next{seq, {&context.back(), 1}, false};
    engine.step({&next, 1}, logits);
  }
  result.decode_seconds = seconds() - t1;
  return result;
}

GenerateResult generate(Engine& engine, std::span<const int32_t> prompt, const GenerateOptions& options,
                        const std::function<bool(int32_t)>& on_token) {
  std::vector<int32_t> context(prompt.begin(), prompt.end());
  const int seq = engine.add_sequence();
  struct Release {
    Engine& e;
    int s;
    ~Release() { e.remove_sequence(s); }
  } release{engine, seq};
  return generate_on(engine, seq, prompt, options, on_token, context);
}

}  // namespace seedling
