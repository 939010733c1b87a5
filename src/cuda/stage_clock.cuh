// cuda/stage_clock.cuh - the per-block clock of the decode launches (products.cu, experts.cu, attention_decode.cu)
// in a measuring build; stage_clock.cu zeroes and reports its sums (kernels.h: stage_clock_reset, stage_clock_report).
//
// Without relocatable device code each translation unit has its own copy of a __device__ variable, so the sums sit
// in an unnamed namespace here: every file that includes this header gets its own, and registers a reset and a read
// of them with stage_clock.cu before main (register_stage_clock); the report adds every registered copy.
#pragma once

#include <cuda_runtime.h>

#include "cuda/kernels.h"

namespace seedling::cuda {

// Stage clock, a measuring build (cmake -DSEEDLING_STAGE_CLOCK=ON; `seedling bench` prints stage_clock_report):
// thread 0 of each block of a decode launch notes the SM cycles from the block's start to each of its marks, and
// a block that reaches done() adds them to its launch kind's sums. Marks: 0 past the wait for the launch before,
// 1 operands ready (products: the normed row; gate/up: the expert's blob; down + combine: the down products;
// attention: the split's keys), 2 the main loop done, 3 the block's end. In other builds BlockClock is empty.
enum ClockKind : int { kClkQkv, kClkO, kClkRouter, kClkHead, kClkAttention, kClkGateUp, kClkDown, kClkKinds };
#ifdef SEEDLING_STAGE_CLOCK
constexpr int kClkMarks = 4;
// One translation unit's sums: reset zeroes them (queued on the stream), add adds them into sum and blocks.
struct StageClockSums {
  void (*reset)(cudaStream_t stream) = nullptr;
  void (*add)(unsigned long long (&sum)[kClkKinds][kClkMarks], unsigned long long (&blocks)[kClkKinds]) = nullptr;
};
// Adds s to the copies stage_clock_reset and stage_clock_report go over (stage_clock.cu); returns true.
bool register_stage_clock(const StageClockSums& s);

namespace {  // this translation unit's copy (see above)
__device__ unsigned long long g_clock_sum[kClkKinds][kClkMarks];
__device__ unsigned long long g_clock_blocks[kClkKinds];
inline void stage_clock_reset_here(cudaStream_t stream) {
  unsigned long long zero[kClkKinds * kClkMarks] = {};
  check(cudaMemcpyToSymbolAsync(g_clock_sum, zero, sizeof(zero), 0, cudaMemcpyHostToDevice, stream), "stage clock");
  check(cudaMemcpyToSymbolAsync(g_clock_blocks, zero, kClkKinds * sizeof(unsigned long long), 0, cudaMemcpyHostToDevice,
                                stream),
        "stage clock");
}
inline void stage_clock_add_here(unsigned long long (&sum)[kClkKinds][kClkMarks],
                                 unsigned long long (&blocks)[kClkKinds]) {
  unsigned long long s[kClkKinds][kClkMarks] = {}, b[kClkKinds] = {};
  check(cudaMemcpyFromSymbol(s, g_clock_sum, sizeof(s)), "stage clock");
  check(cudaMemcpyFromSymbol(b, g_clock_blocks, sizeof(b)), "stage clock");
  for (int k = 0; k < kClkKinds; ++k) {
    blocks[k] += b[k];
    for (int m = 0; m < kClkMarks; ++m) sum[k][m] += s[k][m];
  }
}
[[maybe_unused]] const bool g_clock_registered = register_stage_clock({stage_clock_reset_here, stage_clock_add_here});
}  // namespace

__device__ __forceinline__ long long sm_clock() {
#ifdef __CUDA_ARCH__
  return clock64();
#else
  return 0;
#endif
}
struct BlockClock {
  long long t0;
  long long at[kClkMarks] = {};
  __device__ BlockClock() : t0(sm_clock()) {}
  __device__ void mark(int m) {
    if (threadIdx.x == 0) at[m] = sm_clock() - t0;
  }
  __device__ void done(int kind) {
    if (threadIdx.x != 0) return;
    at[kClkMarks - 1] = sm_clock() - t0;
    for (int m = 0; m < kClkMarks; ++m) atomicAdd(&g_clock_sum[kind][m], static_cast<unsigned long long>(at[m]));
    atomicAdd(&g_clock_blocks[kind], 1ull);
  }
};
#else
struct BlockClock {
  __device__ void mark(int) {}
  __device__ void done(int) {}
};
#endif

}  // namespace seedling::cuda
