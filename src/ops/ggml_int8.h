// ops/ggml_int8.h - int8-activation products for ggml's quant blocks (codec/ggml_quants.h), the GGUF twin of
// ops::matmul_int8 (ops/matmul.h), chosen by the same switch (int8_products, `--cpu-dot`).
//
// x is quantized once per call, row by row, into int8 blocks matching the weight's block: 32 values for the
// 32-element types (q8_0, q4_0, q5_0, q5_1, iq4_nl, mxfp4_ggml: quantize_int8_rows with group 32), 256 for the
// K types and iq4_xs (ggml's Q8_K: one scale per 256 and the sum of every 16 codes). Each weight block is taken in
// the integers of ggml_int_scales / ggml_code (value = d * (scale_g * code) - dmin * min_g, g the group of 16), and
// output y[i][n] is, for the row's blocks b in order, from acc = 0,
//   isum = sum_g scale_g * sum_{k in g} code_k * q_k        (an exact integer: no int32 sum can overflow)
//   msum = sum_g min_g * sum_{k in g} q_k                   (types with a min; exact)
//   t = d * float(isum) - dmin * float(msum)                (t = d * float(isum) for the types without)
//   acc = acc + scale_x[b] * t
// every step a float32 operation rounded on its own. So a row's bits do not depend on the SIMD target, the batch
// or the thread count; ref::ggml_matmul_int8 is the plain loop of this definition. Against the float path the error
// is W's dot with x's rounding, at most sum_b scale_x[b] / 2 * sum_k |w_k| plus float32 rounding
// (tests/unit/engine/ggml_int8_test.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "ops/matmul.h"

namespace seedling::ops {

// The activation block of codec c's int8 product: 32, 256, or 0 where c has none (not a ggml codec).
int64_t ggml_int8_group(Codec c);
// x quantized for one ggml codec (Int8Rows, ops/matmul.h): group 32 or 256, with bsum for 256.
void quantize_ggml_int8_rows(const float* x, int64_t m, int64_t cols, int64_t group, Int8Rows& out);
void ggml_matmul_int8(const float* x, int64_t m, const Matrix& w, float* y);
// Outputs [n0, n1) of every row, on the calling thread. It needs this CPU's SIMD kernel (ggml_int8_has_kernel);
// without one, ggml_matmul_int8 runs ref::ggml_matmul_int8 and no product is cut into pieces.
void ggml_matmul_int8_range(const Int8Rows& xq, const Matrix& w, float* y, int64_t n0, int64_t n1);
bool ggml_int8_has_kernel();

namespace ref {
void quantize_ggml_int8_rows(const float* x, int64_t m, int64_t cols, int64_t group, Int8Rows& out);
void ggml_matmul_int8(const float* x, int64_t m, const Matrix& w, float* y);
}  // namespace ref

}  // namespace seedling::ops
