// The plain reference of ops/matmul.h: one multiply-add at a time, accumulated in double.
#include "core/error.h"
#include "ops/matmul.h"

namespace seedling::ops {

float Matrix::at(int64_t r, int64_t c) const {
  const size_t i = size_t(r) * size_t(cols) + size_t(c);
  switch (dtype) {
    case DType::F32:
      return static_cast<const float*>(data)[i];
    case DType::BF16:
      return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::F16:
      return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    default:
      fail("matrix of dtype {} cannot be read as float", dtype_name(dtype));
  }
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
