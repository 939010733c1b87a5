#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace seedling {

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[size_t(best)]) best = int32_t(i);
  }
  return best;
}

Sampler::Sampler(SamplerParams p) : p_(p), state_(p.seed) {
  if (!(p_.temperature >= 0.0f)) fail("--temp must be >= 0, got {}", p_.temperature);
  if (p_.top_k < 0) fail("--top-k must be >= 0, got {}", p_.top_k);
  if (!(p_.top_p > 0.0f && p_.top_p <= 1.0f)) fail("--top-p must be in (0, 1], got {}", p_.top_p);
  if (!(p_.min_p >= 0.0f && p_.min_p <= 1.0f)) fail("--min-p must be in [0, 1], got {}", p_.min_p);
  if (!(p_.repetition_penalty > 0.0f)) fail("--repeat-penalty must be > 0, got {}", p_.repetition_penalty);
}

double Sampler::next_uniform() {
  // splitmix64
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return double(z >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> context) {
  work_.assign(logits.begin(), logits.end());
  const int n = int(work_.size());
  if (p_.repetition_penalty != 1.0f) {
    for (int32_t t : context) {
      if (t < 0 || t >= n) continue;
      float& l = work_[size_t(t)];
      l = l > 0 ? l / p_.repetition_penalty : l * p_.repetition_penalty;
    }
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

}  // namespace seedling
