#include "kv/kv_cache.h"

#include <algorithm>

#include "core/error.h"

namespace seedling {

KvCache::KvCache(int layers, int kv_dim, int initial_positions, int max_positions, bool host_arrays)
    : kv_dim_(kv_dim),
      host_arrays_(host_arrays),
      initial_(std::max(1, initial_positions)),
      max_(max_positions),
      k_(size_t(layers)),
      v_(size_t(layers)) {}

void KvCache::reserve(int n) {
  if (n <= capacity_) return;
  if (n > max_) fail("context full: {} positions requested, the context limit is {} (raise --ctx)", n, max_);
  int cap = capacity_ == 0 ? initial_ : capacity_;
  while (cap < n) cap *= 2;
  cap = std::min(cap, max_);
  for (size_t l = 0; host_arrays_ && l < k_.size(); ++l) {
    k_[l].resize(size_t(cap) * size_t(kv_dim_));  // resize keeps every written position
    v_[l].resize(size_t(cap) * size_t(kv_dim_));
  }
  capacity_ = cap;
}

}  // namespace seedling
