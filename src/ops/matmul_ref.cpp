// The plain reference of ops/matmul.h: one multiply-add at a time, accumulated in double, weights through
// codec_value (codec/codec.h), the scalar definition of every float and affine codec; seed matrices go to
// seed::ref::seed_matmul, which decodes them by the format's spec (decode_seed_matrix).
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
}  // namespace ref

}  // namespace seedling::ops
