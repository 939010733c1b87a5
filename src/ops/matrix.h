// ops/matrix.h - a read-only view of a stored weight matrix.
#pragma once

#include <cstdint>

#include "codec/codec.h"
#include "codec/seed_codec.h"
#include "core/dtype.h"
#include "core/error.h"

namespace seedling::ops {

// A weight matrix of `rows` x `cols` elements, row-major, stored in `codec` (codec/codec.h: f32, f16, bf16, an
// affine q8/q4 codec in blocks along cols, or a seed tier p3/p4/s3 whose `data` is one slice blob, header first),
// usually inside a memory map. A linear layer y = x W^T has W of shape (out_features, in_features) = (rows, cols).
// A seed matrix has no row size: row_bytes() and row_slice() refuse it with an Error; nbytes() is its blob's size.
struct Matrix {
  Codec codec = Codec::F32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;

  Matrix() = default;
  Matrix(Codec c, const void* d, int64_t r, int64_t n) : codec(c), data(d), rows(r), cols(n) {}
  // A float tensor as stored in a checkpoint (f32, f16 or bf16).
  Matrix(DType t, const void* d, int64_t r, int64_t n) : data(d), rows(r), cols(n) {
    const std::optional<Codec> c = codec_of_dtype(t);
    if (!c) fail("a matrix cannot hold dtype {} (expected f32, f16 or bf16)", dtype_name(t));
    codec = *c;
  }

  size_t row_bytes() const {
    if (codec_is_seed(codec)) {
      fail("a {} x {} {} seed matrix has no row size: its blob holds the whole slice (docs/formats/seed.md)", rows,
           cols, codec_name(codec));
    }
    return codec_row_bytes(codec, cols);
  }
  size_t nbytes() const { return codec_matrix_bytes(codec, rows, cols); }
  // Rows [begin, begin + count) as a matrix of their own (not for seed matrices: row_bytes() refuses them).
  Matrix row_slice(int64_t begin, int64_t count) const {
    return {codec, static_cast<const uint8_t*>(data) + size_t(begin) * row_bytes(), count, cols};
  }
  // The seed slice this matrix is (codec_is_seed(codec) only).
  seed::SeedMatrix seed_matrix() const {
    return {codec_seed_tier(codec), static_cast<const uint8_t*>(data), rows, cols};
  }
  // Element (r, c) widened (dequantized) to float; for references and tests, never for hot loops.
  float at(int64_t r, int64_t c) const;
};

}  // namespace seedling::ops
