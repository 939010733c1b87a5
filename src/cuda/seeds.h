// cuda/seeds.h - seed codecs (docs/formats/seed.md) on the device beyond the matrix products of kernels.h: the
// decode of a whole slice, which the tests hold against the CPU's decode_seed_matrix bit for bit.
#pragma once

#include <cuda_runtime.h>

#include "cuda/kernels.h"

namespace seedling::cuda {

// out (w.rows x w.cols floats, device) = every weight of the seed matrix w (p3, p4 or s3; data: its slice blob,
// 4-byte aligned), decoded as the products decode it: bit for bit seed::decode_seed_matrix. Throws Error for any
// other codec.
void decode_seed_matrix(const DeviceMatrix& w, float* out, cudaStream_t stream);

}  // namespace seedling::cuda
