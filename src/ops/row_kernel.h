// ops/row_kernel.h - the frame of the per-row block kernels (MXFP4, FP8): threads over the rows of W, each output
// one row_dot of its row of x, and the fixed fold of a block's eight lanes. An output's bits depend on its row of x
// alone: the same alone, batched, or with any thread count.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "ops/matrix.h"

namespace seedling::ops {

// The eight lanes of a block's products, summed in one fixed order.
inline float fold_lanes(const float* lane) {
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
}

// y (m x w.rows) = x W^T, each y[i][n] = row_dot(x row i, W row n bytes, cols).
template <class RowDot>
void row_kernel_matmul(const float* x, int64_t m, const Matrix& w, float* y, RowDot row_dot) {
  const size_t row_bytes = w.row_bytes();
  const auto* base = static_cast<const uint8_t*>(w.data);
  ThreadPool::global().parallel_for(size_t(w.rows), 8, [&](size_t n0, size_t n1) {
    for (int64_t i = 0; i < m; ++i) {
      for (size_t n = n0; n < n1; ++n) {
        y[i * w.rows + int64_t(n)] = row_dot(x + i * w.cols, base + n * row_bytes, w.cols);
      }
    }
  });
}

}  // namespace seedling::ops
