// codec/seed_matmul.h - y = x W^T with W stored as a seed slice, computed on seeds: no weight matrix is
// materialised, only one decoded row (cols floats) per thread at a time.
//
// seed_matmul decodes each row of W once from its seeds (LFSR stream tables, codec/lfsr.h) into bf16-exact floats
// and dots it with every one of the m activation rows (ops::dot, one fixed order of additions), so a row's result
// does not depend on m or on the thread count: a row alone equals the same row in a batch, bit for bit. Threads
// split the rows of W. ref::seed_matmul decodes by the spec (decode_seed_matrix) then sums in plain index order;
// the two agree within float32 rounding of the dot products, tested.
#pragma once

#include <cstdint>

#include "codec/seed_codec.h"

namespace seedling::seed {

// x: m x w.cols (row-major), y: m x w.rows.
void seed_matmul(const float* x, int64_t m, const SeedMatrix& w, float* y);

// Decodes row r of W (cols floats) with the stream tables; equal to decode_seed_matrix's row, bit for bit.
void decode_seed_row(const SeedMatrix& w, int64_t r, float* out);

namespace ref {
void seed_matmul(const float* x, int64_t m, const SeedMatrix& w, float* y);
}  // namespace ref

}  // namespace seedling::seed
