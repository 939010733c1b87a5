#include "kv/kv_cache.h"

#include <algorithm>

#include "core/error.h"

namespace seedling {

KvCache::KvCache(std::vector<KvLayerShape> layers, int initial_positions, int max_positions, bool host_arrays)
    : shapes_(std::move(layers)),
      host_arrays_(host_arrays),
      initial_(std::max(1, initial_positions)),
      max_(max_positions),
      k_(shapes_.size()),
      v_(shapes_.size()),
      s_(shapes_.size()) {
  for (size_t l = 0; l < shapes_.size(); ++l) {
    if (shapes_[l].state_floats == 0) continue;
    recurrent_ = true;
    if (host_arrays_) s_[l].assign(shapes_[l].state_floats, 0.0f);
  }
}

void KvCache::reserve(int n) {
  if (n <= capacity_) return;
  if (n > max_) fail("context full: {} positions requested, the context limit is {} (raise --ctx)", n, max_);
  int cap = capacity_ == 0 ? initial_ : capacity_;
  while (cap < n) cap *= 2;
  cap = std::min(cap, max_);
  for (size_t l = 0; host_arrays_ && l < k_.size(); ++l) {
    k_[l].resize(size_t(cap) * size_t(shapes_[l].key_width));  // resize keeps every written position
    v_[l].resize(size_t(cap) * size_t(shapes_[l].value_width));
  }
  capacity_ = cap;
}

void KvCache::reset() {
  length = 0;
  for (std::vector<float>& s : s_) std::fill(s.begin(), s.end(), 0.0f);
}

size_t KvCache::bytes_at(int positions) const {
  size_t n = 0;
  for (const KvLayerShape& s : shapes_) {
    n += (size_t(positions) * size_t(s.key_width + s.value_width) + s.state_floats) * sizeof(float);
  }
  return n;
}

size_t KvCache::bytes() const {
  return bytes_at(capacity_);
}

}  // namespace seedling
