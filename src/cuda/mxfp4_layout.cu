// cuda/mxfp4_layout.cu - stored MXFP4 (or mxfp4_ggml) rows into their VRAM layout (cuda/mxfp4_layout.h), one thread
// a block.
#include <cstdint>

#include "cuda/device_layout.h"
#include "cuda/launch.cuh"
#include "cuda/mxfp4_layout.h"

namespace seedling::cuda {

namespace {

// Thread i places block i % nb of row i / nb; the last block's thread also zeroes its row's padding.
__global__ void mxfp4_rows_to_device_kernel(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols,
                                            bool ggml_order) {
  const int64_t nb = mxfp4::blocks(cols);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * nb) return;
  const int64_t r = i / nb, u = i % nb;
  uint8_t* row = dst + size_t(r) * mxfp4::row_bytes(cols);
  uint8_t block[mxfp4::kStored];
  if (ggml_order) mxfp4::ggml_block_to_mxfp4(src + size_t(i) * mxfp4::kStored, block);
  mxfp4::place_block(ggml_order ? block : src + size_t(i) * mxfp4::kStored, nb, u, row);
  if (u == nb - 1) {
    for (size_t p = size_t(nb) * mxfp4::kStored; p < mxfp4::row_bytes(cols); ++p) row[p] = 0;
  }
}

}  // namespace

void mxfp4_rows_to_device(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols, bool ggml_order,
                          cudaStream_t stream) {
  const int64_t n = rows * mxfp4::blocks(cols);
  if (n == 0) return;
  constexpr int kThreads = 256;
  mxfp4_rows_to_device_kernel<<<unsigned((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(src, dst, rows, cols,
                                                                                                ggml_order);
  launched("mxfp4_rows_to_device");
}

}  // namespace seedling::cuda
