// cuda/seeds.h - seed codecs (docs/formats/seed.md) on the device beyond the matrix products of kernels.h: the
// decode of a whole slice, which the tests hold against the CPU's decode_seed_matrix bit for bit, and the kernel of
// the seed search (cuda/seed_search.h drives it). Free of fmt: .cu files include it.
#pragma once

#include <cuda_runtime.h>

#include "cuda/kernels.h"

namespace seedling::cuda {

// out (w.rows x w.cols floats, device) = every weight of the seed matrix w (p3, p4 or s3; data: its slice blob,
// 4-byte aligned), decoded as the products decode it: bit for bit seed::decode_seed_matrix. Throws Error for any
// other codec.
void decode_seed_matrix(const DeviceMatrix& w, float* out, cudaStream_t stream);

// The search of n_blocks blocks of one tier (codec p3, p4 or s3) that share the energies h: x (n_blocks x C floats,
// device; zero past a row's end), h (C floats, device), exponents lo..hi (= bias..bias + 15), seeds 1..n_seeds. For
// each block, keys[b] (device; set to ~0 here first) becomes the smallest key (error bits << 32 | (seed - 1) << 2 |
// candidate) over the seeds, scored by codec/seed_search_detail.h's very functions (so the smallest error, ties to
// the lower seed then the first candidate: the CPU search's choice), or stays ~0 when no seed scored finite.
void seed_search_blocks(Codec tier, const float* x, int64_t n_blocks, const float* h, int lo, int hi, uint32_t n_seeds,
                        unsigned long long* keys, cudaStream_t stream);

}  // namespace seedling::cuda
