// ops/matmul_fp8.cpp - ops::matmul for FP8_G32 weights (codec/codec.h: e4m3 codes, a float32 scale per 32), computed
// on the blocks as stored.
//
// Each block adds d * sum_j x[j] * e4m3(code[j]). Against codec_value's d * e4m3 per weight this differs by float
// rounding only (exactly equal where d is a power of two, as in the tiny golden). The 32 products of a block are
// summed in eight lanes then folded in one fixed order, and the blocks in order, so an output element's bits depend on
// its row of x alone: the same alone, batched, or with any thread count.
#include <algorithm>

#include "ops/matmul.h"
#include "ops/row_kernel.h"

namespace seedling::ops {

namespace {

float row_dot(const float* x, const uint8_t* row, int64_t cols) {
  float acc = 0.0f;
  const int64_t blocks = (cols + 31) / 32;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = row + b * int64_t(sizeof(BlockFp8G32));
    float d;
    std::memcpy(&d, blk, 4);
    const uint8_t* q = blk + 4;
    const float* xb = x + b * 32;
    const int64_t n = std::min<int64_t>(32, cols - b * 32);
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (n == 32) {
      for (int j = 0; j < 32; j += 8) {
        for (int l = 0; l < 8; ++l) lane[l] = lane[l] + xb[j + l] * kE4m3Values.v[q[j + l]];
      }
    } else {
      for (int64_t j = 0; j < n; ++j) lane[j % 8] = lane[j % 8] + xb[j] * kE4m3Values.v[q[j]];
    }
    const float s = fold_lanes(lane);
    acc = acc + s * d;
  }
  return acc;
}

}  // namespace

void fp8_matmul(const float* x, int64_t m, const Matrix& w, float* y) {
  row_kernel_matmul(x, m, w, y, row_dot);
}

}  // namespace seedling::ops
