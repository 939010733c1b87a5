// The plain reference of ops/matmul.h: one multiply-add at a time, accumulated in double, weights through
// codec_value (codec/codec.h), the scalar definition of every codec.
#include "core/error.h"
#include "ops/matmul.h"

namespace seedling::ops {

float Matrix::at(int64_t r, int64_t c) const {
  return codec_value(codec, static_cast<const uint8_t*>(data) + size_t(r) * row_bytes(), c);
}

namespace ref {
void matmul(const float* x, int64_t m, const Matrix& w, float* y) {
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
