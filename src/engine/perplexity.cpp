#include "engine/perplexity.h"

#include <cmath>

#include "core/error.h"

namespace seedling {

PerplexityResult perplexity(Engine& engine, std::span<const int32_t> tokens, int ctx,
                            const std::function<void(int, int)>& progress) {
  if (ctx < 2) fail("--ctx must be at least 2, got {}", ctx);
  PerplexityResult r;
  r.windows = int(tokens.size() / size_t(ctx));
  if (r.windows == 0) fail("the text has {} tokens, fewer than one window of --ctx {}", tokens.size(), ctx);
  const int V = engine.model().config().vocab_size;
  double sum = 0, sum_sq = 0;
  for (int w = 0; w < r.windows; ++w) {
    const std::span<const int32_t> window = tokens.subspan(size_t(w) * size_t(ctx), size_t(ctx));
    const int seq = engine.add_sequence();
    SequenceStep step{seq, window, true};
    const std::vector<float> logits = engine.step({&step, 1});
    engine.remove_sequence(seq);
    for (int j = 1; j < ctx; ++j) {
      const float* row = logits.data() + size_t(j - 1) * size_t(V);
      double mx = row[0];
      for (int v = 1; v < V; ++v) mx = std::max(mx, double(row[v]));
      double z = 0;
      for (int v = 0; v < V; ++v) z += std::exp(double(row[v]) - mx);
      const double nll = -(double(row[window[size_t(j)]]) - mx - std::log(z));
      sum += nll;
      sum_sq += nll * nll;
    }
    if (progress) progress(w + 1, r.windows);
  }
  r.scored = int64_t(r.windows) * (ctx - 1);
  r.mean_nll = sum / double(r.scored);
  const double var = (sum_sq - double(r.scored) * r.mean_nll * r.mean_nll) / double(r.scored - 1);
  r.nll_stderr = std::sqrt(std::max(var, 0.0) / double(r.scored));
  r.ppl = std::exp(r.mean_nll);
  return r;
}

}  // namespace seedling
