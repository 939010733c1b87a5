// engine/perplexity.cpp - perplexity in windows, and the same windows run through two models side by side.
#include "engine/perplexity.h"

#include <cmath>

#include "core/error.h"

namespace seedling {

namespace {

// The number of whole windows of `ctx` tokens; Errors for a bad ctx or too few tokens.
int count_windows(size_t tokens, int ctx) {
  if (ctx < 2) fail("--ctx must be at least 2, got {}", ctx);
  const int windows = int(tokens / size_t(ctx));
  if (windows == 0) fail("the text has {} tokens, fewer than one window of --ctx {}", tokens, ctx);
  return windows;
}

// Logits of every position of one window, run from position 0 on a fresh sequence.
std::vector<float> window_logits(Engine& engine, std::span<const int32_t> window) {
  const int seq = engine.add_sequence();
  SequenceStep step{seq, window, true};
  std::vector<float> logits = engine.step({&step, 1});
  engine.remove_sequence(seq);
  return logits;
}

// A row's softmax normaliser in double: log sum_v exp(row[v]) = max + log_z; log p(v) = (row[v] - max) - log_z.
struct LogNorm {
  double max = 0, log_z = 0;
  double log_p(float x) const { return double(x) - max - log_z; }
};
LogNorm log_norm(const float* row, int V) {
  LogNorm n;
  n.max = row[0];
  for (int v = 1; v < V; ++v) n.max = std::max(n.max, double(row[v]));
  double z = 0;
  for (int v = 0; v < V; ++v) z += std::exp(double(row[v]) - n.max);
  n.log_z = std::log(z);
  return n;
}

// Sums of the scored nll values, and what they give.
struct NllSums {
  double sum = 0, sum_sq = 0;
  void add(double nll) {
    sum += nll;
    sum_sq += nll * nll;
  }
  PerplexityResult result(int windows, int ctx) const {
    PerplexityResult r;
    r.windows = windows;
    r.scored = int64_t(windows) * (ctx - 1);
    r.mean_nll = sum / double(r.scored);
    const double var = (sum_sq - double(r.scored) * r.mean_nll * r.mean_nll) / double(r.scored - 1);
    r.nll_stderr = std::sqrt(std::max(var, 0.0) / double(r.scored));
    r.ppl = std::exp(r.mean_nll);
    return r;
  }
};

}  // namespace

PerplexityResult perplexity(Engine& engine, std::span<const int32_t> tokens, int ctx,
                            const std::function<void(int, int)>& progress) {
  const int windows = count_windows(tokens.size(), ctx);
  const int V = engine.model().config().vocab_size;
  NllSums nll;
  for (int w = 0; w < windows; ++w) {
    const std::span<const int32_t> window = tokens.subspan(size_t(w) * size_t(ctx), size_t(ctx));
    const std::vector<float> logits = window_logits(engine, window);
    for (int j = 1; j < ctx; ++j) {
      const float* row = logits.data() + size_t(j - 1) * size_t(V);
      nll.add(-log_norm(row, V).log_p(row[window[size_t(j)]]));
    }
    if (progress) progress(w + 1, windows);
  }
  return nll.result(windows, ctx);
}

LogitComparison compare_logits(Engine& ref, Engine& test, std::span<const int32_t> tokens, int ctx,
                               const std::function<void(int, int)>& progress) {
  const int windows = count_windows(tokens.size(), ctx);
  const int V = ref.model().config().vocab_size;
  if (test.model().config().vocab_size != V)
    fail("the models' vocabularies differ: {} has {} ids, {} has {}", ref.model().dir(), V, test.model().dir(),
         test.model().config().vocab_size);
  LogitComparison c;
  NllSums nll_ref, nll_test;
  double kld_sum = 0;
  int64_t agree = 0;
  for (int w = 0; w < windows; ++w) {
    const std::span<const int32_t> window = tokens.subspan(size_t(w) * size_t(ctx), size_t(ctx));
    const std::vector<float> a = window_logits(ref, window), b = window_logits(test, window);
    for (int j = 1; j < ctx; ++j) {
      const float* p = a.data() + size_t(j - 1) * size_t(V);
      const float* q = b.data() + size_t(j - 1) * size_t(V);
      const LogNorm np = log_norm(p, V), nq = log_norm(q, V);
      double kld = 0;
      int top_p = 0, top_q = 0;
      for (int v = 0; v < V; ++v) {
        const double log_p = np.log_p(p[v]), log_q = nq.log_p(q[v]);
        kld += std::exp(log_p) * (log_p - log_q);
        if (p[v] > p[top_p]) top_p = v;
        if (q[v] > q[top_q]) top_q = v;
      }
      kld_sum += kld;
      c.kld_max = std::max(c.kld_max, kld);
      agree += top_p == top_q ? 1 : 0;
      nll_ref.add(-np.log_p(p[window[size_t(j)]]));
      nll_test.add(-nq.log_p(q[window[size_t(j)]]));
    }
    if (progress) progress(w + 1, windows);
  }
  c.ref = nll_ref.result(windows, ctx);
  c.test = nll_test.result(windows, ctx);
  c.kld_mean = kld_sum / double(c.ref.scored);
  c.top1_agreement = double(agree) / double(c.ref.scored);
  return c;
}

}  // namespace seedling
