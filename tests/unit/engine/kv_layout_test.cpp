// KvRowLayout (kv/kv_layout.h): where each layer's rows sit in a device's one-array copy of a sequence's cache. A
// layer without rows (Gated DeltaNet) takes none, layers of another width get their own, a uniform model keeps the
// offsets of the [layers][planes][cap][width] array the kernels read before, and growth carries every written position.
#include "kv/kv_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "model/model.h"
#include "test_util.h"

namespace seedling {

namespace {

const KvLayerShape kLinear{0, 0, 100};  // a Gated DeltaNet layer: a recurrent state only

KvLayerShape attention(int kv_dim) {
  return {kv_dim, kv_dim, 0};
}

// Every float of every plane of every layer at positions [0, cap), tagged (layer, plane, position, index) and set
// where `layout` puts it in an array of cap positions; the array's other floats stay -1.
std::vector<double> tagged(const KvRowLayout& layout, const std::vector<KvLayerShape>& shapes, int cap, int written) {
  std::vector<double> a(size_t(layout.per_position() * cap), -1.0);
  for (size_t l = 0; l < shapes.size(); ++l) {
    for (const bool values : {false, true}) {
      const int width = values ? shapes[l].value_width : shapes[l].key_width;
      for (int p = 0; p < written && width > 0; ++p) {
        const int64_t at = layout.row(int(l), values, cap, p);
        for (int i = 0; i < width; ++i) a[size_t(at + i)] = ((double(l) * 2 + values) * 1e4 + p) * 1e3 + i;
      }
    }
  }
  return a;
}

}  // namespace

// Qwen3.5-35B-A3B's plan (3 of 4 layers linear; full attention 2 kv heads of 256): the linear layers take no room,
// each attention layer follows the one before it, and the array is a quarter of a [layers][2][cap][512] one.
TEST(KvRowLayout, LinearLayersOfAHybridTakeNoRows) {
  const int kv = 512;
  std::vector<KvLayerShape> shapes;
  for (int l = 0; l < 40; ++l) shapes.push_back(l % 4 == 3 ? attention(kv) : kLinear);
  const KvRowLayout layout(shapes);
  for (int l = 0; l < 40; ++l) EXPECT_EQ(layout.base(l), int64_t(l / 4) * 2 * kv) << "layer " << l;
  EXPECT_EQ(layout.per_position(), 10 * 2 * kv);
  EXPECT_EQ(layout.per_position() * 4, int64_t(40) * 2 * kv);
  const int cap = 256;
  EXPECT_EQ(layout.row(3, false, cap, 0), 0);
  EXPECT_EQ(layout.row(3, true, cap, 5), int64_t(cap) * kv + 5 * kv);
  EXPECT_EQ(layout.row(7, false, cap, 0), int64_t(2) * cap * kv);
  EXPECT_EQ(layout.row(39, true, cap, cap - 1), int64_t(20) * cap * kv - kv);  // the array's last row
  EXPECT_THROW(layout.row(0, false, cap, 0), Error) << "a linear layer has no rows";
  EXPECT_THROW(layout.row(3, false, cap, cap), Error) << "position past the capacity";
}

// The tiny checkpoints' plans through cache_shapes: qwen3_next_a (layers 0-2 linear, 3 attention of 2 kv heads of
// 32) and deepseek_v3_a (3 MLA layers of one latent row, rank 32 + rope 8): bases as the kernels read them.
TEST(KvRowLayout, FromTheTinyCheckpointsCacheShapes) {
  const ModelConfig hybrid = read_model_config(test::data_path("models/qwen3_next_a/hf"));
  const KvRowLayout h(cache_shapes(hybrid));
  for (int l = 0; l < 4; ++l) EXPECT_EQ(h.base(l), 0) << "layer " << l;
  EXPECT_EQ(h.per_position(), 2 * 64);
  const ModelConfig mla = read_model_config(test::data_path("models/deepseek_v3_a/hf"));
  const KvRowLayout m(cache_shapes(mla));
  for (int l = 0; l < 3; ++l) EXPECT_EQ(m.base(l), int64_t(l) * 40) << "layer " << l;
  EXPECT_EQ(m.per_position(), 3 * 40);
  EXPECT_EQ(m.row(2, false, 10, 4), (2 * 10 + 4) * 40);  // the MLA kernels' (layer * cap + pos) * width before
  EXPECT_THROW(m.row(0, true, 10, 0), Error) << "an MLA layer keeps no value rows";
}

// A uniform attention model and a uniform MLA model: the offsets of the single-width arrays the kernels addressed
// before, (layer * planes) * cap * width + position * width, so those models' addresses (and bits) are unchanged.
TEST(KvRowLayout, UniformModelsKeepTheOneWidthArraysOffsets) {
  for (const int planes : {1, 2}) {
    const int width = 96, layers = 5, cap = 33;
    const std::vector<KvLayerShape> shapes(layers, KvLayerShape{width, planes == 2 ? width : 0, 0});
    const KvRowLayout layout(shapes);
    EXPECT_EQ(layout.per_position(), int64_t(layers) * planes * width);
    for (int l = 0; l < layers; ++l) {
      EXPECT_EQ(layout.base(l) * cap, int64_t(l) * planes * cap * width);
      for (const int p : {0, 7, cap - 1}) {
        EXPECT_EQ(layout.row(l, false, cap, p), (int64_t(l) * planes * cap + p) * width);
        if (planes == 2) {
          EXPECT_EQ(layout.row(l, true, cap, p), (int64_t(l) * planes * cap + cap + p) * width);
        }
      }
    }
  }
}

// Layers of different widths (attention of two widths, an MLA-like layer with keys only, linear layers between): no
// two rows share a float and the rows fill the array exactly, at any capacity.
TEST(KvRowLayout, LayersOfDifferentWidthsEachGetTheirOwnRows) {
  const std::vector<KvLayerShape> shapes = {kLinear, attention(64), KvLayerShape{40, 0, 0},
                                            kLinear, attention(8),  KvLayerShape{24, 16, 0}};
  const KvRowLayout layout(shapes);
  EXPECT_EQ(layout.per_position(), 128 + 40 + 16 + 40);
  EXPECT_EQ(layout.base(0), 0);
  EXPECT_EQ(layout.base(1), 0);
  EXPECT_EQ(layout.base(2), 128);
  EXPECT_EQ(layout.base(3), 168);
  EXPECT_EQ(layout.base(4), 168);
  EXPECT_EQ(layout.base(5), 184);
  for (const int cap : {1, 7, 256}) {
    const std::vector<double> a = tagged(layout, shapes, cap, cap);
    std::vector<int> hits(a.size(), 0);
    for (size_t l = 0; l < shapes.size(); ++l) {
      for (const bool values : {false, true}) {
        const int width = values ? shapes[l].value_width : shapes[l].key_width;
        for (int p = 0; p < cap && width > 0; ++p) {
          const int64_t at = layout.row(int(l), values, cap, p);
          for (int i = 0; i < width; ++i) ++hits[size_t(at + i)];
        }
      }
    }
    for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << "float " << i << " at capacity " << cap;
  }
}

// Growth: the copies growth() lists carry every written position of every plane from an array of the old capacity
// to where the layout puts it at the new one (the CUDA cache's doublings, and a capacity that stays), for a hybrid and
// for mixed widths.
TEST(KvRowLayout, GrowthCarriesEveryWrittenPosition) {
  const std::vector<std::vector<KvLayerShape>> models = {
      {kLinear, kLinear, kLinear, attention(16), kLinear, kLinear, kLinear, attention(16)},
      {attention(8), KvLayerShape{12, 0, 0}, kLinear, KvLayerShape{4, 20, 0}}};
  for (const std::vector<KvLayerShape>& shapes : models) {
    const KvRowLayout layout(shapes);
    for (const auto& [from, to, written] :
         {std::tuple{1, 2, 1}, std::tuple{256, 512, 200}, std::tuple{3, 3, 3}, std::tuple{5, 40, 5}}) {
      const std::vector<double> old = tagged(layout, shapes, from, written);
      std::vector<double> grown(size_t(layout.per_position() * to), -1.0);
      const std::vector<KvRowLayout::Copy> copies = layout.growth(from, to);
      size_t planes = 0;
      for (const KvLayerShape& s : shapes) planes += size_t(s.key_width > 0) + size_t(s.value_width > 0);
      EXPECT_EQ(copies.size(), planes);
      for (const KvRowLayout::Copy& c : copies) {
        ASSERT_LE(c.from + c.floats, int64_t(old.size()));
        ASSERT_LE(c.to + c.floats, int64_t(grown.size()));
        std::copy(old.begin() + c.from, old.begin() + c.from + c.floats, grown.begin() + c.to);
      }
      const std::vector<double> want = tagged(layout, shapes, to, written);
      // The positions past `written` were never written: what they carry does not matter, what is written must match.
      for (size_t i = 0; i < want.size(); ++i) {
        if (want[i] >= 0) {
          ASSERT_EQ(grown[i], want[i]) << "float " << i << ", " << from << " -> " << to;
        }
      }
    }
  }
  EXPECT_THROW(KvRowLayout(std::vector<KvLayerShape>{attention(8)}).growth(4, 2), Error);
}

}  // namespace seedling
