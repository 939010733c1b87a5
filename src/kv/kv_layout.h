// kv/kv_layout.h - a sequence's position rows as one array, layer after layer: how a device keeps its copy of a
// KvCache (cuda_forward.cpp's CudaKv), each layer taking only what its shape (KvLayerShape) keeps.
//
// At a capacity of `cap` positions, layer l holds [planes][cap][width] from float base(l) * cap: its key rows, then
// (attention) its value rows; base(l) is the floats per position of the layers before it, so the kernels find a layer
// from its base and the row's capacity alone. A layer that keeps no rows (Gated DeltaNet: a recurrent state only)
// takes no room: a hybrid with 3 of 4 layers linear needs a quarter of what one [layers][2][cap][width] array took.
// A uniform model's bases are layer * planes * width, that array's offsets. Growing the capacity moves every plane but
// the first (a base times the new capacity): growth() lists the copies that carry each written position across.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_cache.h"

namespace seedling {

class KvRowLayout {
 public:
  explicit KvRowLayout(std::span<const KvLayerShape> shapes);

  // Floats per position of the layers before `layer`: its key rows start at base(layer) * cap, its value rows
  // key_width * cap after them.
  int64_t base(int layer) const { return base_[size_t(layer)]; }
  // Floats per position of every layer: an array of cap positions holds per_position() * cap floats.
  int64_t per_position() const { return per_position_; }
  // Where position `pos`'s key row (values: its value row) of `layer` starts in an array of `cap` positions.
  int64_t row(int layer, bool values, int cap, int pos) const;

  // One contiguous copy: `floats` floats from offset `from` of the old array to offset `to` of the new one.
  struct Copy {
    int64_t from = 0, to = 0, floats = 0;
  };
  // The copies that carry positions [0, from_cap) of every layer's planes from an array of from_cap positions into
  // one of to_cap >= from_cap positions: one per plane that keeps rows.
  std::vector<Copy> growth(int from_cap, int to_cap) const;

 private:
  std::vector<KvLayerShape> shapes_;
  std::vector<int64_t> base_;
  int64_t per_position_ = 0;
};

}  // namespace seedling
