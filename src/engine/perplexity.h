// engine/perplexity.h - perplexity of a token sequence in non-overlapping windows, and the logits of two models
// compared over the same windows (KLD, top-1 agreement).
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

// The same windows through a reference model and a test model (e.g. a packed copy): at every scored position,
// KL(p_ref || p_test) = sum_v p_ref(v) (log p_ref(v) - log p_test(v)) in double, whether the two argmaxes (the first
// maximum) agree, and each model's nll of the actual next token. Identical logits give a KLD of exactly 0.
struct LogitComparison {
  double kld_mean = 0, kld_max = 0;
  double top1_agreement = 0;  // fraction of scored positions
  PerplexityResult ref, test;
};
LogitComparison compare_logits(Engine& ref, Engine& test, std::span<const int32_t> tokens, int ctx,
                               const std::function<void(int done, int total)>& progress = {});

}  // namespace seedling
