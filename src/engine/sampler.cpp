#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace seedling {

// The plain loop (best = i when logits[i] > logits[best]) carries a load of logits[best] from one element to the
// next: 575 us over a 151,936-entry vocabulary on this project's 2-core machine, most of a batch-1 GPU decode step's
// host time. Two passes instead, kLanes elements at a time in GCC/Clang vectors (SSE on any x86-64): the largest value
// (lane-wise x > m ? x : m, so a NaN never wins), then the first block holding it and its index there: 30-41 us. The
// same answer as the plain loop (argmax_reference in the tests): the first index of the maximum, 0 when logits[0]
// is NaN (nothing compares greater than it).
namespace {
constexpr size_t kLanes = 4;
using Lanes = float __attribute__((vector_size(kLanes * sizeof(float))));
Lanes load_lanes(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
}  // namespace

int32_t argmax(std::span<const float> logits) {
  const size_t n = logits.size();
  if (n == 0 || std::isnan(logits[0])) return 0;
  const float* p = logits.data();
  constexpr size_t kBlock = 4 * kLanes;  // four independent maxima, so the comparisons overlap
  Lanes m0 = Lanes{} + p[0], m1 = m0, m2 = m0, m3 = m0;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    const Lanes a = load_lanes(p + i), b = load_lanes(p + i + kLanes), c = load_lanes(p + i + 2 * kLanes),
                d = load_lanes(p + i + 3 * kLanes);
    m0 = a > m0 ? a : m0;
    m1 = b > m1 ? b : m1;
    m2 = c > m2 ? c : m2;
    m3 = d > m3 ? d : m3;
  }
  float m = p[0];
  for (; i < n; ++i) m = p[i] > m ? p[i] : m;
  for (const Lanes& v : {m0, m1, m2, m3}) {
    for (size_t j = 0; j < kLanes; ++j) m = v[j] > m ? v[j] : m;
  }
  size_t k = 0;  // the first block holding m (one branch a block), then its index
  const Lanes mv = Lanes{} + m;
  for (; k + kBlock <= n; k += kBlock) {
    const auto hit = (load_lanes(p + k) == mv) | (load_lanes(p + k + kLanes) == mv) |
                     (load_lanes(p + k + 2 * kLanes) == mv) | (load_lanes(p + k + 3 * kLanes) == mv);
    bool any = false;
    for (size_t j = 0; j < kLanes; ++j) any = any || hit[j] != 0;
    if (any) break;
  }
  for (; k < n; ++k) {
    if (p[k] == m) return int32_t(k);
  }
  return 0;  // not reached: m is one of the logits and not NaN
}

Sampler::Sampler(SamplerParams p) : p_(p), state_(p.seed) {
  if (!(p_.temperature >= 0.0f)) fail("--temp must be >= 0, got {}", p_.temperature);
  if (p_.top_k < 0) fail("--top-k must be >= 0, got {}", p_.top_k);
  if (!(p_.top_p > 0.0f && p_.top_p <= 1.0f)) fail("--top-p must be in (0, 1], got {}", p_.top_p);
  if (!(p_.min_p >= 0.0f && p_.min_p <= 1.0f)) fail("--min-p must be in [0, 1], got {}", p_.min_p);
  if (!(p_.repetition_penalty > 0.0f)) fail("--repeat-penalty must be > 0, got {}", p_.repetition_penalty);
  if (!std::isfinite(p_.presence_penalty)) fail("presence penalty must be finite, got {}", p_.presence_penalty);
  if (!std::isfinite(p_.frequency_penalty)) fail("frequency penalty must be finite, got {}", p_.frequency_penalty);
  for (const auto& [t, b] : p_.logit_bias) {
    if (t < 0) fail("logit bias: token id {} is negative", t);
    if (!std::isfinite(b)) fail("logit bias of token {} must be finite, got {}", t, b);
  }
}

double Sampler::next_uniform() {
  // splitmix64
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return double(z >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> context,
                        std::span<const uint64_t> allowed) {
  const int32_t t = draw(logits, context, allowed);
  if (p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f) {
    if (generated_count_.size() < logits.size()) generated_count_.resize(logits.size(), 0);
    ++generated_count_[size_t(t)];
  }
  return t;
}

int32_t Sampler::draw(std::span<const float> logits, std::span<const int32_t> context,
                      std::span<const uint64_t> allowed) {
  work_.assign(logits.begin(), logits.end());
  const int n = int(work_.size());
  if (!allowed.empty()) {
    bool any = false;
    for (size_t t = 0; t < size_t(n); ++t) {
      const bool ok = t / 64 < allowed.size() && ((allowed[t / 64] >> (t % 64)) & 1);
      if (!ok) work_[t] = -std::numeric_limits<float>::infinity();
      any = any || ok;
    }
    SEEDLING_CHECK(any, "the allowed-token mask allows no token");
  }
  for (const auto& [t, b] : p_.logit_bias) {
    if (t >= n) fail("logit bias: token id {} is not below the vocabulary size {}", t, n);
    work_[size_t(t)] += b;
  }
  if (p_.repetition_penalty != 1.0f) {
    for (int32_t t : context) {
      if (t < 0 || t >= n) continue;
      float& l = work_[size_t(t)];
      l = l > 0 ? l / p_.repetition_penalty : l * p_.repetition_penalty;
    }
  }
  for (size_t t = 0; t < generated_count_.size() && t < size_t(n); ++t) {
    const int32_t c = generated_count_[t];
    if (c > 0) work_[t] -= p_.presence_penalty + p_.frequency_penalty * float(c);
  }
  if (p_.temperature == 0.0f) return argmax(work_);
  for (float& l : work_) l /= p_.temperature;
  // Candidates sorted by logit, highest first (lower id first on ties).
  ids_.resize(size_t(n));
  std::iota(ids_.begin(), ids_.end(), 0);
  int keep = n;
  auto by_logit = [&](int32_t a, int32_t b) {
    return work_[size_t(a)] > work_[size_t(b)] || (work_[size_t(a)] == work_[size_t(b)] && a < b);
  };
  if (p_.top_k > 0 && p_.top_k < n) {
    keep = p_.top_k;
    std::partial_sort(ids_.begin(), ids_.begin() + keep, ids_.end(), by_logit);
  } else {
    std::sort(ids_.begin(), ids_.end(), by_logit);
  }
  // Masked tokens (-inf, sorted last) are never candidates, even where rounding leaves mass for the last ones.
  while (keep > 1 && work_[size_t(ids_[size_t(keep - 1)])] == -std::numeric_limits<float>::infinity()) --keep;
  // Softmax over the kept candidates.
  std::vector<double> prob(static_cast<size_t>(keep));
  const double mx = work_[size_t(ids_[0])];
  double sum = 0.0;
  for (int i = 0; i < keep; ++i) {
    prob[size_t(i)] = std::exp(double(work_[size_t(ids_[size_t(i)])]) - mx);
    sum += prob[size_t(i)];
  }
  for (double& q : prob) q /= sum;
  if (p_.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p (at least one token)
    double cum = 0.0;
    int cut = keep;
    for (int i = 0; i < keep; ++i) {
      cum += prob[size_t(i)];
      if (cum >= double(p_.top_p)) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
  }
  if (p_.min_p > 0.0f) {  // drop tokens below min_p times the top probability
    const double floor = double(p_.min_p) * prob[0];
    int cut = 1;
    while (cut < keep && prob[size_t(cut)] >= floor) ++cut;
    keep = cut;
  }
  double mass = 0.0;
  for (int i = 0; i < keep; ++i) mass += prob[size_t(i)];
  double r = next_uniform() * mass;
  for (int i = 0; i < keep; ++i) {
    r -= prob[size_t(i)];
    if (r < 0.0) return ids_[size_t(i)];
  }
  return ids_[size_t(keep - 1)];
}

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int top) {
  const int n = int(logits.size());
  SEEDLING_CHECK(token >= 0 && token < n, "token_logprobs: token {} of {} logits", token, n);
  double mx = logits[0];
  for (const float l : logits) mx = std::max(mx, double(l));
  double sum = 0.0;
  for (const float l : logits) sum += std::exp(double(l) - mx);
  const double log_z = mx + std::log(sum);
  TokenLogprobs out;
  out.token = token;
  out.logprob = float(double(logits[size_t(token)]) - log_z);
  const int k = std::min(std::max(top, 0), n);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  for (int i = 0; i < k; ++i)
    out.top.emplace_back(ids[size_t(i)], float(double(logits[size_t(ids[size_t(i)])]) - log_z));
  return out;
}

}  // namespace seedling
