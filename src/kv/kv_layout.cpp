#include "kv/kv_layout.h"

#include "core/error.h"

namespace seedling {

KvRowLayout::KvRowLayout(std::span<const KvLayerShape> shapes)
    : shapes_(shapes.begin(), shapes.end()), base_(shapes.size()) {
  for (size_t l = 0; l < shapes_.size(); ++l) {
    base_[l] = per_position_;
    per_position_ += int64_t(shapes_[l].key_width) + int64_t(shapes_[l].value_width);
  }
}

int64_t KvRowLayout::row(int layer, bool values, int cap, int pos) const {
  const KvLayerShape& s = shapes_[size_t(layer)];
  SEEDLING_CHECK(pos >= 0 && pos < cap && (values ? s.value_width : s.key_width) > 0,
                 "layer {} keeps no {} row at position {} of {}", layer, values ? "value" : "key", pos, cap);
  const int64_t plane = base(layer) * cap + (values ? int64_t(s.key_width) * cap : 0);
  return plane + int64_t(pos) * (values ? s.value_width : s.key_width);
}

std::vector<KvRowLayout::Copy> KvRowLayout::growth(int from_cap, int to_cap) const {
  SEEDLING_CHECK(from_cap <= to_cap, "a KV array grows from {} to {} positions", from_cap, to_cap);
  std::vector<Copy> copies;
  for (size_t l = 0; l < shapes_.size(); ++l) {
    const int64_t key = shapes_[l].key_width, value = shapes_[l].value_width;
    if (key > 0) copies.push_back({base_[l] * from_cap, base_[l] * to_cap, key * from_cap});
    if (value > 0) copies.push_back({(base_[l] + key) * from_cap, (base_[l] + key) * to_cap, value * from_cap});
  }
  return copies;
}

}  // namespace seedling
