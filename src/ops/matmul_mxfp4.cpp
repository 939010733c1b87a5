// ops/matmul_mxfp4.cpp - ops::matmul for MXFP4 weights (codec/codec.h), computed on the blocks as stored.
//
// Each block adds scale * sum_j x[j] * fp4(code[j]): the scale is a power of two, so that equals the sum of
// x[j] * value[j] exactly as codec_value defines the values (barring float32 underflow of tiny scales). The 32 products
// of a block are summed in eight lanes then folded in one fixed order, and the blocks in order, so an output element's
// bits depend on its row of x alone: the same alone, batched, or with any thread count.
#include <algorithm>

#include "core/thread_pool.h"
#include "ops/matmul.h"

namespace seedling::ops {

namespace {

// The two FP4 values of each byte (low nibble first), so a block decodes 16 bytes by table.
struct PairTable {
  float v[256][2];
  PairTable() {
    for (int b = 0; b < 256; ++b) {
      v[b][0] = kFp4Values[b & 0x0F];
      v[b][1] = kFp4Values[b >> 4];
    }
  }
};
const PairTable kPairs;

float row_dot(const float* x, const uint8_t* row, int64_t cols) {
  float acc = 0.0f;
  const int64_t blocks = (cols + 31) / 32;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = row + b * int64_t(sizeof(BlockMxfp4));
    const float* xb = x + b * 32;
    const int64_t n = std::min<int64_t>(32, cols - b * 32);
    float w[32];
    for (int i = 0; i < 16; ++i) {
      w[2 * i] = kPairs.v[blk[1 + i]][0];
      w[2 * i + 1] = kPairs.v[blk[1 + i]][1];
    }
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (n == 32) {
      for (int j = 0; j < 32; j += 8) {
        for (int l = 0; l < 8; ++l) lane[l] = lane[l] + xb[j + l] * w[j + l];
      }
    } else {
      for (int64_t j = 0; j < n; ++j) lane[j % 8] = lane[j % 8] + xb[j] * w[j];
    }
    const float s = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
    acc = acc + s * mxfp4_scale(blk[0]);
  }
  return acc;
}

}  // namespace

void mxfp4_matmul(const float* x, int64_t m, const Matrix& w, float* y) {
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
