// engine/sampler.h - picks the next token from logits: greedy, or sampled with the usual filters.
//
// Order: the allowed-token mask (-inf) -> logit bias -> repetition penalty -> presence and frequency penalties ->
// temperature -> top-k -> top-p -> min-p -> draw (transformers' order of its processors, with OpenAI's bias and
// penalties first). temperature 0 is greedy (argmax, lowest id on ties) over the biased and penalised logits. The
// generator is splitmix64 seeded by `seed`, so the same seed and logits give the same tokens on every machine.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace seedling {

struct SamplerParams {
  float temperature = 0.0f;
  int top_k = 0;                    // 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off
  float repetition_penalty = 1.0f;  // 1: off; >1 discourages tokens already in the context
  // OpenAI's: logit[t] -= presence * (c[t] > 0) + frequency * c[t], c[t] the times t was generated so far (this
  // sampler's own draws; the prompt does not count). 0: off.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<std::pair<int32_t, float>> logit_bias = {};  // added to token's logit first (OpenAI's logit_bias)
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplerParams p);
  // `context` holds the ids the repetition penalty looks at (prompt and generated so far). `allowed`, when not
  // empty, is a bitset over the ids (bit id % 64 of word id / 64; structured output): the others get -inf before
  // anything else, so neither greedy nor sampling picks them. At least one id must be allowed.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> context,
                 std::span<const uint64_t> allowed = {});
  const SamplerParams& params() const { return p_; }

 private:
  double next_uniform();  // [0, 1)
  int32_t draw(std::span<const float> logits, std::span<const int32_t> context, std::span<const uint64_t> allowed);

  SamplerParams p_;
  uint64_t state_;
  std::vector<int32_t> generated_count_;  // per token id, draws so far (sized on first use when penalties are on)
  std::vector<float> work_;
  std::vector<int32_t> ids_;
};

int32_t argmax(std::span<const float> logits);

// A generated token's log-probability under the model (the log-softmax of the raw logits, before logit bias,
// penalties and temperature, as vLLM reports by default), and the `top` most likely ids with theirs (highest first,
// lower id first on ties). Computed in double.
struct TokenLogprobs {
  int32_t token = -1;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;
};
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int top);

}  // namespace seedling
