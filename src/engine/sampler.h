// engine/sampler.h - picks the next token from logits: greedy, or sampled with the usual filters.
//
// Order, as transformers applies its logits processors: repetition penalty -> temperature -> top-k -> top-p ->
// min-p -> draw. temperature 0 is greedy (argmax, lowest id on ties). The generator is splitmix64 seeded by
// `seed`, so the same seed and logits give the same tokens on every machine.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace seedling {

struct SamplerParams {
  float temperature = 0.0f;
  int top_k = 0;                    // 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off
  float repetition_penalty = 1.0f;  // 1: off; >1 discourages tokens already in the context
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplerParams p);
  // `context` holds the ids the repetition penalty looks at (prompt and generated so far).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> context);
  const SamplerParams& params() const { return p_; }

 private:
  double next_uniform();  // [0, 1)

  SamplerParams p_;
  uint64_t state_;
  std::vector<float> work_;
  std::vector<int32_t> ids_;
};

int32_t argmax(std::span<const float> logits);

}  // namespace seedling
