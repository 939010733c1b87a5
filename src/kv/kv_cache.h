// kv/kv_cache.h - what one sequence keeps between forwards, for every layer, in float32.
//
// Each layer has a shape (KvLayerShape) that its mixer decides: GQA attention keeps a key and a value row per
// position; latent attention (MLA) one latent row and no value row; a linear-attention layer (Gated DeltaNet) no
// rows at all but a fixed-size recurrent state (its conv window and its per-head state matrix). Position rows start
// small (initial_positions) and double on demand up to max_positions, copying every written position across each
// growth (NVMAI 3.9: a growth that dropped positions silently corrupted long answers), so memory follows the
// sequence's length, not --ctx. Layout per layer: [capacity][width]; the state: [state_floats], zero at start.
//
// Position rows can be rewound (truncate to a prefix), a recurrent state cannot: it holds every position at once.
// recurrent() says whether a cache has one; rewinding such a cache to anything but 0 is refused (engine.h).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace seedling {

struct KvLayerShape {
  int key_width = 0;        // floats per position of the key rows (attention: kv_heads * head_dim)
  int value_width = 0;      // floats per position of the value rows (0: none)
  size_t state_floats = 0;  // a recurrent state of this many floats (0: none)
};

class KvCache {
 public:
  // What another device keeps for this sequence (its own copy of the keys and values), owned here so that it lives
  // and dies with the sequence. The host arrays below then stay unused.
  struct DeviceState {
    virtual ~DeviceState() = default;
  };

  // host_arrays false: another device keeps the keys, values and states (DeviceState), so reserve() only tracks the
  // capacity and the host arrays stay empty.
  KvCache(std::vector<KvLayerShape> layers, int initial_positions, int max_positions, bool host_arrays = true);

  // Makes room for positions [0, n). Throws Error when n exceeds max_positions.
  void reserve(int n);
  float* keys(int layer) { return k_[size_t(layer)].data(); }
  float* values(int layer) { return v_[size_t(layer)].data(); }
  const float* keys(int layer) const { return k_[size_t(layer)].data(); }
  const float* values(int layer) const { return v_[size_t(layer)].data(); }
  float* state(int layer) { return s_[size_t(layer)].data(); }
  const float* state(int layer) const { return s_[size_t(layer)].data(); }
  const KvLayerShape& shape(int layer) const { return shapes_[size_t(layer)]; }

  int capacity() const { return capacity_; }
  int max_positions() const { return max_; }
  bool recurrent() const { return recurrent_; }
  // Back to an empty sequence: length 0 and every recurrent state zero (position rows are simply overwritten).
  void reset();
  // Bytes of the position rows at the current capacity plus the recurrent states (on the host, or on the device
  // that keeps them: the same float32 layout).
  size_t bytes() const;
  // The same at `positions` positions.
  size_t bytes_at(int positions) const;

  // Positions already computed (the engine advances this after each forward).
  int length = 0;
  std::unique_ptr<DeviceState> device;

 private:
  std::vector<KvLayerShape> shapes_;
  bool host_arrays_;
  bool recurrent_ = false;
  int capacity_ = 0;
  int initial_;
  int max_;
  std::vector<std::vector<float>> k_, v_, s_;
};

}  // namespace seedling
