// ops/seed_matmul.h - y = x W^T with W stored as a seed slice, computed on seeds: no weight matrix is
// materialised.
//
// seed_matmul decodes blocks of W with SIMD from the GF(2) pair tables (ops/seed_matmul.cpp) into bf16-exact
// floats equal to the spec's, fused into the dot at m = 1 and decoded once per chunk for all m rows of x at m > 1,
// with one fixed order of additions per output, so a row's result does not depend on m or on the thread count: a
// row alone equals the same row in a batch, bit for bit. Threads split the rows of W. ref::seed_matmul decodes by
// the spec (decode_seed_matrix) then sums in plain index order; the two agree within float32 rounding of the dot
// products (tests/unit/engine/seed_matmul_test.cpp, with the bound derived there).
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
