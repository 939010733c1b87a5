// ops/matrix.h - a read-only view of a stored weight matrix.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace seedling::ops {

// A weight matrix of `rows` x `cols` elements, row-major, in its stored type (bf16, f16 or f32), usually inside
// a memory map. A linear layer y = x W^T has W of shape (out_features, in_features) = (rows, cols).
struct Matrix {
  DType dtype = DType::F32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;

  size_t nbytes() const { return size_t(rows) * size_t(cols) * dtype_size(dtype); }
  // Rows [begin, begin + count) as a matrix of their own.
  Matrix row_slice(int64_t begin, int64_t count) const {
    return {dtype, static_cast<const uint8_t*>(data) + size_t(begin) * size_t(cols) * dtype_size(dtype), count, cols};
  }
  // Element (r, c) widened to float; for references and tests, never for hot loops.
  float at(int64_t r, int64_t c) const;
};

}  // namespace seedling::ops
