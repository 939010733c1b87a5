// kv/kv_cache.h - the keys and values of one sequence, for every layer, in float32.
//
// Storage starts small (initial_positions) and doubles on demand up to max_positions, copying every written
// position across each growth (NVMAI 3.9: a growth that dropped positions silently corrupted long answers).
// So memory follows the sequence's length, not --ctx. Layout per layer: [capacity][kv_heads * head_dim].
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace seedling {

class KvCache {
 public:
  // What another device keeps for this sequence (its own copy of the keys and values), owned here so that it lives
  // and dies with the sequence. The host arrays below then stay unused.
  struct DeviceState {
    virtual ~DeviceState() = default;
  };

  // host_arrays false: another device keeps the keys and values (DeviceState), so reserve() only tracks the
  // capacity and the host arrays stay empty.
  KvCache(int layers, int kv_dim, int initial_positions, int max_positions, bool host_arrays = true);

  // Makes room for positions [0, n). Throws Error when n exceeds max_positions.
  void reserve(int n);
  float* keys(int layer) { return k_[size_t(layer)].data(); }
  float* values(int layer) { return v_[size_t(layer)].data(); }
  const float* keys(int layer) const { return k_[size_t(layer)].data(); }
  const float* values(int layer) const { return v_[size_t(layer)].data(); }

  int capacity() const { return capacity_; }
  int max_positions() const { return max_; }
  int kv_dim() const { return kv_dim_; }
  size_t bytes() const { return 2 * k_.size() * size_t(capacity_) * size_t(kv_dim_) * sizeof(float); }

  // Positions already computed (the engine advances this after each forward).
  int length = 0;
  std::unique_ptr<DeviceState> device;

 private:
  int kv_dim_;
  bool host_arrays_;
  int capacity_ = 0;
  int initial_;
  int max_;
  std::vector<std::vector<float>> k_, v_;
};

}  // namespace seedling
