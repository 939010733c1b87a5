// Helpers of the expert-parallel tests (tests/unit/parallel, tests/unit/cuda/expert_parallel_test.cpp).
#pragma once

#include <algorithm>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"

namespace seedling::test {

// The logits of every prompt row, then greedy decoding of `steps` tokens, one row a step, each step's logits kept.
inline std::vector<float> prompt_and_greedy_logits(Model& model, const std::vector<int32_t>& prompt, int steps) {
  Engine e(model, {});
  const int seq = e.add_sequence();
  SequenceStep p{seq, prompt, true};
  std::vector<float> all = e.step({&p, 1});
  const size_t V = size_t(model.config().vocab_size);
  std::vector<int32_t> tokens;
  for (int t = 0; t < steps; ++t) {
    const float* last = all.data() + all.size() - V;
    tokens.push_back(int32_t(std::max_element(last, last + V) - last));
    SequenceStep d{seq, {&tokens.back(), 1}, false};
    const std::vector<float> l = e.step({&d, 1});
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

}  // namespace seedling::test
