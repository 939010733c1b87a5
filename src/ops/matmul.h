// ops/matmul.h - the matrix products every layer spends its time in.
//
// matmul computes y[i][n] = sum_k x[i][k] * W[n][k] for m rows of float32 activations x (row-major, m x cols)
// against a stored weight matrix W (rows x cols), into y (m x rows). The fast version (SIMD through Highway,
// threads over output columns n) computes each y[i][n] with one fixed order of additions that does not depend on
// m, on the thread count or on the other rows: a row gives the same bits alone or in a batch. ref::matmul is the
// plain loop it is tested against.
#pragma once

#include <cstdint>

#include "ops/matrix.h"

namespace seedling::ops {

void matmul(const float* x, int64_t m, const Matrix& w, float* y);
// The MXFP4 kernel matmul hands those weights to (ops/matmul_mxfp4.cpp).
void mxfp4_matmul(const float* x, int64_t m, const Matrix& w, float* y);

// sum_k a[k] * b[k] in the fast kernels' order; for attention scores.
float dot(const float* a, const float* b, int64_t n);
// y[k] += s * x[k]; for attention's weighted sum of values.
void axpy(float s, const float* x, float* y, int64_t n);

// Sum of n floats read once, front to back, by every thread of the pool: the streaming-read ceiling that decode
// speed is reported against (bench). Four accumulators per thread keep the loads, not the adds, the limit.
float stream_read(const float* x, int64_t n);

namespace ref {
void matmul(const float* x, int64_t m, const Matrix& w, float* y);
}  // namespace ref

}  // namespace seedling::ops
