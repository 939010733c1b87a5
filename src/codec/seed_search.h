// codec/seed_search.h - find each block's seed, coefficients and exponent code (docs/formats/seed.md, "The search").
//
// For a block x of C weights with per-input-channel energies h (1 when not weighted), every seed s in 1..n_seeds is
// scored: least-squares t from the Cholesky factor of U^T H U (U = float(S) * fl(1/32767)), candidate exponents
// e0, e0 - 1, e0 + 1 (e0 = floor(log2 max|t|) - 2) clamped to [bias, bias + 15], q = clamp(rne(t / 2^e), -8, 7), and
// the error sum_c h_c (x_c - w_c)^2 of the DECODED bf16 weights w. The smallest error wins; ties go to the lowest
// seed, then the first candidate. search_block_ref is the scalar reference; seed_search_slice (Highway SIMD over
// seeds, threads over blocks) returns exactly the same blocks, tested.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "codec/seed_codec.h"

namespace seedling::seed {

struct SeedSearchProgress {
  int64_t blocks_done = 0, blocks_total = 0;
  double seconds = 0, blocks_per_s = 0, eta_s = 0;
};

struct SeedSearchOptions {
  uint32_t n_seeds = kLfsrSeeds;  // search seeds 1..n_seeds (fewer only for quick tests and previews)
  bool use_reference = false;     // the scalar reference on one thread instead of the fast search
  // Called from a worker thread at most every progress_interval_s, and once at the end.
  std::function<void(const SeedSearchProgress&)> progress;
  double progress_interval_s = 0.5;
  static constexpr uint32_t kLfsrSeeds = 65535;
};

struct SeedSearchResult {
  int32_t exp_bias = 0;
  std::vector<SeedBlock> blocks;  // rows * blocks_per_row, row-major (docs/formats/seed.md)
};

// The slice's exponent bias: E - 15 with E the largest floor(log2 max|x|) over its blocks, clamped to
// [kMinExponent, kMaxExponent - 15]; -15 for an all-zero slice. Throws Error on a non-finite weight.
int32_t choose_exp_bias(SeedTier t, const float* w, int64_t rows, int64_t cols);

// One block by the scalar reference: x[C] and h[C] (h >= 0; zero past the end of a partial block).
SeedBlock search_block_ref(SeedTier t, const float* x, const float* h, int32_t exp_bias, uint32_t n_seeds);

// What every search of a slice walks (seed_search_slice here, cuda/seed_search.h on the GPU): the bias, the blocks
// padded to C weights (zero weight and zero energy past a row's end), and the blocks grouped by their column's
// energy vector (unweighted: the full columns and the partial one), each group's blocks row by row.
struct SeedSearchPlan {
  int32_t exp_bias = 0;
  std::vector<float> xpad;  // n_blocks x C
  struct Group {
    std::vector<float> h;         // C energies
    std::vector<int64_t> blocks;  // block indices
  };
  std::vector<Group> groups;
};
// Throws Error on n_seeds outside 1..65535, an energy that is not finite >= 0, or a weight that is not finite.
SeedSearchPlan plan_seed_search(SeedTier t, const float* w, int64_t rows, int64_t cols, const float* h,
                                uint32_t n_seeds);

// The block a search chose for x (C weights, energies h): seed index i (seed i + 1) and candidate cand, its q and
// code recomputed by the scalar score (seed_search_detail.h). Throws Error when that score's candidate is not cand
// (a search that disagrees with the reference's arithmetic); *err: the score's error.
SeedBlock recover_seed_block(SeedTier t, const float* x, const float* h, int32_t exp_bias, uint32_t i, int cand,
                             float* err);

// Searches a rows x cols matrix (row-major float32) with optional energies h[cols] (nullptr: unweighted).
SeedSearchResult seed_search_slice(SeedTier t, const float* w, int64_t rows, int64_t cols, const float* h,
                                   const SeedSearchOptions& opt = {});

// seed_search_slice then write_seed_blob.
std::vector<uint8_t> encode_seed_slice(SeedTier t, const float* w, int64_t rows, int64_t cols, const float* h,
                                       const SeedSearchOptions& opt = {});

}  // namespace seedling::seed
