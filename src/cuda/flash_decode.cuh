// cuda/flash_decode.cuh - what the two flash-decoding kernels (attention_decode.cu over K/V rows, mla.cu over latent
// rows) share: the online softmax step over a tile of keys, the count that finds a group's last split block, and the
// weights of the splits' merge. One copy of each, so both attentions compute their softmax with the same operations.
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/warp_primitives.cuh"

namespace seedling::cuda {

// One warp, one head's tile of scores (lane j: score[j], key j of the tile; keys from nk on absent): flash decoding's
// online softmax step. The running max and sum (shared memory; lane 0 writes them once every lane has read) become
// m_new = max(m_old, the tile's) and sum * a + the tile's exp(score - m_new), a = exp(m_old - m_new) (0 before any
// key), left in rescale for the sums of values; the tile's probabilities replace its scores.
__device__ __forceinline__ void online_softmax_tile(float* score, int nk, float& run_max, float& run_sum,
                                                    float& rescale) {
  const int lane = int(threadIdx.x) % kWarp;
  const float sc = lane < nk ? score[lane] : -INFINITY;
  const float m_old = run_max;
  const float m_new = fmaxf(m_old, warp_max(sc));
  const float p = lane < nk ? expf(sc - m_new) : 0.0f;
  score[lane] = p;
  const float sum = warp_sum(p);
  if (lane == 0) {
    const float a = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
    run_sum = run_sum * a + sum;
    run_max = m_new;
    rescale = a;
  }
}

// Whether this block is the last of `blocks` to count itself in *counter, after a fence that publishes what it wrote
// before; the last one resets the counter to 0 for the next launch and fences again before reading the others'
// writes. Every thread of the block calls it.
__device__ __forceinline__ bool last_block_in(int* counter, int blocks) {
  __shared__ int last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(counter, 1) == blocks - 1;
    if (last) *counter = 0;
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

// One warp merging one head's `used` splits (split p's running max at part[p * stride], its sum at part[p * stride +
// 1]): w[p] = exp(max_p - max) for the largest max (a sink, ops::attention_row's extra logit, joins the max and, as
// exp(sink - max), the sum; -inf: none), and the returned denominator, the sum of w[p] sum_p. Ends with the warp's
// barrier: every lane's weights are written before any lane reads them.
__device__ __forceinline__ float merge_weights(const float* part, int64_t stride, int used, float sink, float* w) {
  const int lane = int(threadIdx.x) % kWarp;
  float mx = -INFINITY;
  for (int p = lane; p < used; p += kWarp) mx = fmaxf(mx, part[p * stride]);
  mx = fmaxf(warp_max(mx), sink);
  float total = 0.0f;
  for (int p = lane; p < used; p += kWarp) {
    w[p] = expf(part[p * stride] - mx);
    total += w[p] * part[p * stride + 1];
  }
  total = warp_sum(total);
  if (sink != -INFINITY) total += expf(sink - mx);
  __syncwarp();
  return total;
}

}  // namespace seedling::cuda
