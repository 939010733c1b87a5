// cuda/seed_search.h - the seed search (codec/seed_search.h) with its per-block search on the GPU.
//
// The same plan as the CPU search (plan_seed_search: bias, padded blocks, groups by energies), each group's blocks
// searched over all seeds by cuda/seed_search.cu, the winners' q and code recomputed by recover_seed_block (which
// also checks the device's candidate and error against the scalar score): the CPU search's result, bit for bit.
#pragma once

#include <cstdint>

#include "codec/seed_search.h"

namespace seedling::cuda {

// seed::seed_search_slice on the current CUDA device (seeds 1..n_seeds). Throws Error as the CPU search does on bad
// input, and when no CUDA device is there.
seed::SeedSearchResult seed_search_slice_cuda(seed::SeedTier t, const float* w, int64_t rows, int64_t cols,
                                              const float* h, uint32_t n_seeds = seed::SeedSearchOptions::kLfsrSeeds);

}  // namespace seedling::cuda
