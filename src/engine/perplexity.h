// engine/perplexity.h - perplexity of a token sequence in non-overlapping windows.
//
// The definition (the same as tools/train_demo_model.py's reference): n_windows = floor(n / ctx); window w is
// tokens[w*ctx, (w+1)*ctx), run from position 0 on a fresh sequence; positions 1..ctx-1 are scored with
// nll_j = -log softmax(logits[j-1])[tokens[j]]; the tail that does not fill a window is dropped.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "engine/engine.h"

namespace seedling {

struct PerplexityResult {
  int windows = 0;
  int64_t scored = 0;
  double mean_nll = 0;
  double nll_stderr = 0;  // std(nll, ddof=1) / sqrt(scored)
  double ppl = 0;
};

PerplexityResult perplexity(Engine& engine, std::span<const int32_t> tokens, int ctx,
                            const std::function<void(int done, int total)>& progress = {});

}  // namespace seedling
