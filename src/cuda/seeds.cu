// cuda/seeds.cu - the kernels of cuda/seeds.h.
//
// Invariant: every weight comes from seed_device.cuh's seed_decode_blob_block, the function the products of
// lane_dot.cuh decode with, so a test of this decode against the CPU checks the weights those products use.
#include "cuda/codec_device.cuh"
#include "cuda/seeds.h"

namespace seedling::cuda {

namespace {

// One thread per block of the slice: block i is row i / per_row, weights (i % per_row) * C .. of it.
template <CodecId C>
__global__ void decode_seed_matrix_kernel(const uint8_t* blob, int64_t rows, int64_t cols, float* out) {
  constexpr seeddev::Geom g = seed_geom(C);
  const int64_t per_row = (cols + g.C - 1) / g.C, n = rows * per_row;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float w[g.C];
  seeddev::seed_decode_blob_block<g.C, g.P>(g, blob, n, i, kDeviceStreamTables.lo, kDeviceStreamTables.hi, w);
  const int64_t r = i / per_row, k0 = (i % per_row) * g.C;
  for (int c = 0; c < g.C && k0 + c < cols; ++c) out[r * cols + k0 + c] = w[c];
}

}  // namespace

void decode_seed_matrix(const DeviceMatrix& w, float* out, cudaStream_t stream) {
  const bool seed = is_seed(Id(uint8_t(w.codec)));
  check(seed ? cudaSuccess : cudaErrorInvalidValue, "decode_seed_matrix: the matrix is not a seed codec");
  check(reinterpret_cast<uintptr_t>(w.data) % 4 == 0 ? cudaSuccess : cudaErrorMisalignedAddress,
        "decode_seed_matrix: a seed blob must start 4-byte aligned");
  if (w.rows == 0 || w.cols == 0) return;
  dispatch_codec<true>(w.codec, [&]<CodecId C>() {
    if constexpr (is_seed(C)) {
      const int64_t n = w.rows * ((w.cols + seed_geom(C).C - 1) / seed_geom(C).C);
      decode_seed_matrix_kernel<C>
          <<<unsigned((n + 255) / 256), 256, 0, stream>>>(static_cast<const uint8_t*>(w.data), w.rows, w.cols, out);
    }
  });
  check(cudaGetLastError(), "decode_seed_matrix");
}

}  // namespace seedling::cuda
