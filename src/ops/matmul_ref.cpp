// The plain reference of ops/matmul.h: one multiply-add at a time, accumulated in double, weights through
// codec_value (codec/codec.h), the scalar definition of every float and affine codec; seed matrices go to
// seed::ref::seed_matmul, which decodes them by the format's spec (decode_seed_matrix).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "ops/matmul.h"
#include "ops/seed_matmul.h"

namespace seedling::ops {

float Matrix::at(int64_t r, int64_t c) const {
  if (codec_is_seed(codec)) {
    // One block by the spec: the block holding (r, c), decoded at its exponent.
    const seed::SeedTier t = codec_seed_tier(codec);
    const auto* blob = static_cast<const uint8_t*>(data);
    const seed::SeedSliceLayout L = seed::seed_slice_layout(t, rows, cols);
    const int C = seed::seed_tier_spec(t).block;
    const seed::SeedBlock b = seed::seed_blob_block(t, blob, L, r * L.blocks_per_row + c / C);
    float w[seed::kMaxBlock];
    seed::decode_block(t, b, seed::seed_blob_bias(blob) + b.code, w);
    return w[c % C];
  }
  return codec_value(codec, static_cast<const uint8_t*>(data) + size_t(r) * row_bytes(), c);
}

namespace ref {
void matmul(const float* x, int64_t m, const Matrix& w, float* y) {
  if (codec_is_seed(w.codec)) return seed::ref::seed_matmul(x, m, w.seed_matrix(), y);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t n = 0; n < w.rows; ++n) {
      double acc = 0.0;
      for (int64_t k = 0; k < w.cols; ++k) acc += double(x[i * w.cols + k]) * double(w.at(n, k));
      y[i * w.rows + n] = float(acc);
    }
  }
}

void quantize_int8_rows(const float* x, int64_t m, int64_t cols, int64_t group, Int8Rows& out) {
  const int64_t blocks = (cols + group - 1) / group;
  out.rows = m, out.cols = cols, out.group = group, out.blocks = blocks;
  out.q.assign(size_t(m * blocks * group), 0);
  out.scale.assign(size_t(m * blocks), 0.0f);
  out.sum.assign(size_t(m * blocks), 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* xb = x + i * cols + b * group;
      const int64_t n = std::min(group, cols - b * group), index = i * blocks + b;
      float amax = 0.0f;
      for (int64_t k = 0; k < n; ++k) amax = std::max(amax, std::fabs(xb[k]));
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      int sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        const int q = int(std::nearbyint(xb[k] * inv));
        out.q[size_t(index * group + k)] = int8_t(q);
        sum += q;
      }
      out.scale[size_t(index)] = amax / 127.0f;
      out.sum[size_t(index)] = float(sum);
    }
  }
}

namespace {
// The stored code q of element k of an affine row (codec/codec.h's layout), and its block's d and m.
int affine_code(Codec c, const uint8_t* row, int64_t k, float& d, float& m) {
  const int64_t g = codec_group(c);
  const uint8_t* block = row + size_t(k / g) * codec_block_bytes(c);
  uint16_t dh, mh;
  std::memcpy(&dh, block, 2);
  std::memcpy(&mh, block + 2, 2);
  d = f16_to_f32(dh), m = f16_to_f32(mh);
  const int64_t j = k % g;
  const uint8_t* q = block + 4;
  return codec_bits(c) == 8 ? q[j] : j < g / 2 ? q[j] & 0x0F : q[j - g / 2] >> 4;
}
}  // namespace

void matmul_int8(const float* x, int64_t m, const Matrix& w, float* y) {
  SEEDLING_CHECK(codec_is_affine(w.codec), "matmul_int8: {} is not an affine codec", codec_name(w.codec));
  const int64_t g = codec_group(w.codec);
  Int8Rows xq;
  ref::quantize_int8_rows(x, m, w.cols, g, xq);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t n = 0; n < w.rows; ++n) {
      const auto* row = static_cast<const uint8_t*>(w.data) + size_t(n) * w.row_bytes();
      float acc = 0.0f;
      for (int64_t b = 0; b < xq.blocks; ++b) {
        const int64_t index = i * xq.blocks + b;
        float d = 0, mn = 0;
        int32_t dot = 0;
        for (int64_t k = b * g; k < std::min(w.cols, (b + 1) * g); ++k)
          dot += affine_code(w.codec, row, k, d, mn) * xq.q[size_t(index * g + k - b * g)];
        const float s = d * float(dot) + mn * xq.sum[size_t(index)];
        acc = acc + xq.scale[size_t(index)] * s;
      }
      y[i * w.rows + n] = acc;
    }
  }
}
}  // namespace ref

}  // namespace seedling::ops
