// cuda/attention_decode.cu - decode attention, flash decoding on float32 CUDA cores: the kernel behind
// attention_decode (cuda/kernels.h). Prompt attention is its neighbour, attention_prompt.cu.
#include <cmath>
#include <cstdint>

#include "cuda/flash_decode.cuh"
#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "cuda/stage_clock.cuh"
#include "cuda/warp_primitives.cuh"

namespace seedling::cuda {

namespace {

// Decode attention's block: 8 warps (scores: a warp per key; softmax and merge: a warp per head); in the value sums
// thread t takes dims t % kDimThreads (+ kDimThreads) of half t / kDimThreads of the group's heads.
constexpr int kAttnThreads = 256, kDimThreads = 128, kHeadHalves = kAttnThreads / kDimThreads;
constexpr int kMaxSplits = 64;  // splits of one row's keys in decode attention (kDecodeSplits)

// The last split block of a (listed row, head group) to finish merges the group's partial softmax sums (each block
// counts itself in `counters`, after a fence that publishes its partials; the last one resets the counter to 0 for
// the next launch). Only the first `used` splits hold keys (those past the row's position are empty), so only they
// are read. A warp per head: the max and the sum over splits, each split's weight exp(max_p - max) once into shared
// memory, then each output dim as the sum over splits of weight_p * out_p, in split order (D: dims per lane).
constexpr int kMergeBatch = 8;  // splits whose partials a merging lane loads at once

template <int D>
__device__ __forceinline__ void merge_if_last(const int* row_ids, const AttentionShape& s, int splits, int used,
                                              const float* scratch, int* counters, float* out, int li, int h0, int nh) {
  __shared__ float weight[kAttnThreads / kWarp][kMaxSplits];
  if (!last_block_in(counters + int64_t(li) * gridDim.y + blockIdx.y, splits)) return;
  const int hd = s.head_dim, lane = threadIdx.x % kWarp;
  for (int hh = int(threadIdx.x) / kWarp; hh < nh; hh += int(blockDim.x) / kWarp) {
    const float* part = scratch + (int64_t(li) * s.n_heads + h0 + hh) * splits * (hd + 2);
    float* w = weight[threadIdx.x / kWarp];
    const float total = merge_weights(part, hd + 2, used, s.sinks != nullptr ? s.sinks[h0 + hh] : -INFINITY, w);
    float* o = out + int64_t(row_ids[li]) * s.n_heads * hd + int64_t(h0 + hh) * hd;
    // Each lane's D dims summed over the splits in split order; the partials of kMergeBatch splits are loaded
    // before any is added (one load after another, each waiting for the last, the launch took 28.8 us at 9 splits;
    // batched, with the scores' warp sums interleaved, 19.1: ncu).
    float a[D] = {};
    for (int p0 = 0; p0 < used; p0 += kMergeBatch) {
      float v[kMergeBatch][D];
#pragma unroll
      for (int u = 0; u < kMergeBatch; ++u) {
#pragma unroll
        for (int i = 0; i < D; ++i) {
          const int d = lane + i * kWarp;
          v[u][i] = p0 + u < used && d < hd ? part[(p0 + u) * (hd + 2) + 2 + d] : 0.0f;
        }
      }
#pragma unroll
      for (int u = 0; u < kMergeBatch; ++u) {
        if (p0 + u >= used) break;
#pragma unroll
        for (int i = 0; i < D; ++i) a[i] += w[p0 + u] * v[u][i];
      }
    }
#pragma unroll
    for (int i = 0; i < D; ++i) {
      const int d = lane + i * kWarp;
      if (d < hd) o[d] = a[i] / total;
    }
    __syncwarp();  // the next head's weights overwrite these
  }
}

// Flash decoding. Block (split, head group, listed row): a group is up to kGroupHeads query heads sharing one KV
// head, so each key and value row is read once for all of them. A row's cache of `cap` positions is cut into at
// most kDecodeSplits splits of decode_split_keys(cap) keys (whole tiles of kTileKeys), so the split boundaries of
// a row depend only on its own cache: the same bits alone or batched, eager or in a graph. A split walks its keys
// tile by tile: (S) the tile's key and value rows staged in shared memory with cp.async; scores by warps over keys
// (a key's dims spread over the lanes, summed by warp_sum); an online softmax per head (running max and sum, the
// accumulators rescaled); then each thread adds the tile's weighted values for its dims and heads. The split's [max,
// sum, out[head_dim]] go to scratch (an empty split writes nothing); the last block of the group merges the splits that
// hold keys. D: dims per lane of a key, head_dim <= 32 * D. Splits of one tile (32 keys) or more, more keys a split
// once 64 splits would not cover the cache: with the merge's loads batched and 8 warps a block, 32 splits of 32 keys
// beat 16 of 64 at a 1024-position cache (48-layer decode 275.9 vs 270.4 tok/s;
// docs/results/2026-11-30-cuda-decode-attention-threads.md); before that, 16 of 64 had won (166 vs 151), and 64 splits
// of 64 beat 16 of 256 at 4096 (133 vs 118): 2026-11-30-cuda-decode-fused.md.
constexpr int kGroupHeads = 8, kTileKeys = 32, kDecodeSplits = kMaxSplits, kMinSplitTiles = 1;
static_assert(kGroupHeads % kHeadHalves == 0, "the value sums split a group's heads in halves");

__host__ __device__ __forceinline__ int decode_split_keys(int cap) {
  const int per = (cap + kDecodeSplits - 1) / kDecodeSplits;
  const int tiles = (per + kTileKeys - 1) / kTileKeys;
  return (tiles > kMinSplitTiles ? tiles : kMinSplitTiles) * kTileKeys;
}

template <int D, bool S>
__global__ void __launch_bounds__(kAttnThreads, 2)
    attention_decode_split_kernel(const float* q, const int* row_ids, const KvRow* rows, int64_t base, AttentionShape s,
                                  float* scratch, int* counters, float* out) {
  BlockClock clk;
  pdl_wait();
  clk.mark(0);
  extern __shared__ __align__(16) float att_sm[];
  __shared__ float run_max[kGroupHeads], run_sum[kGroupHeads], rescale[kGroupHeads];
  constexpr int kDims = 2;  // dims per thread of the value sums: head_dim <= kDims * kDimThreads
  constexpr int kHalf = kGroupHeads / kHeadHalves;  // heads per thread of the value sums
  float* score = att_sm;                            // kGroupHeads x kTileKeys
  float* ks = score + kGroupHeads * kTileKeys;      // kTileKeys x head_dim (S)
  float* vs = ks + kTileKeys * s.head_dim;          // kTileKeys x head_dim (S)
  const int split = blockIdx.x, li = blockIdx.z;
  const int per_kv = s.n_heads / s.n_kv_heads, groups_per_kv = (per_kv + kGroupHeads - 1) / kGroupHeads;
  const int kvh = int(blockIdx.y) / groups_per_kv;
  const int h0 = kvh * per_kv + (int(blockIdx.y) % groups_per_kv) * kGroupHeads;
  const int nh = min(kGroupHeads, kvh * per_kv + per_kv - h0);
  const int row = row_ids[li];
  const KvRow r = rows[row];
  const int hd = s.head_dim, kv_dim = s.n_kv_heads * hd;
  const float* kc = r.layer(base) + kvh * hd;
  const float* vc = kc + int64_t(r.cap) * kv_dim;
  const int split_keys = decode_split_keys(r.cap);
  const int first = s.window > 0 ? max(0, r.pos - s.window + 1) : 0;  // the first key this row sees
  const int j0 = first + split * split_keys;
  const int j_end = min(r.pos + 1, j0 + split_keys);  // keys [j0, j_end)
  auto part = [&](int hh) {
    return scratch + ((int64_t(li) * s.n_heads + h0 + hh) * kDecodeSplits + split) * (hd + 2);
  };
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp, warps = int(blockDim.x) / kWarp;
  const int used = min(kDecodeSplits, (r.pos + 1 - first + split_keys - 1) / split_keys);  // splits with keys
  if (j0 >= j_end) {  // no keys: nothing to write, only to count in
    merge_if_last<D>(row_ids, s, kDecodeSplits, used, scratch, counters, out, li, h0, nh);
    clk.done(kClkAttention);
    return;
  }
  clk.mark(1);
  float qr[kGroupHeads][D];
  const float* qrow = q + int64_t(row) * s.n_heads * hd;
#pragma unroll
  for (int hh = 0; hh < kGroupHeads; ++hh) {
#pragma unroll
    for (int i = 0; i < D; ++i) {
      const int d = lane + i * kWarp;
      qr[hh][i] = hh < nh && d < hd ? qrow[(h0 + hh) * hd + d] : 0.0f;
    }
  }
  if (tid < kGroupHeads) {
    run_max[tid] = -INFINITY;
    run_sum[tid] = 0.0f;
    rescale[tid] = 0.0f;
  }
  const int dt = tid % kDimThreads, hh0 = (tid / kDimThreads) * kHalf;  // value sums: dims dt + .., heads hh0 + ..
  float o[kDims][kHalf] = {};
  for (int t0 = j0; t0 < j_end; t0 += kTileKeys) {
    const int nk = min(kTileKeys, j_end - t0);
    if constexpr (S) {
      const int chunks = hd / 4;
      for (int t = tid; t < nk * chunks; t += blockDim.x) {
        const int j = t / chunks, c = 4 * (t % chunks);
        cp_async16(ks + j * hd + c, kc + int64_t(t0 + j) * kv_dim + c);
        cp_async16(vs + j * hd + c, vc + int64_t(t0 + j) * kv_dim + c);
      }
      cp_async_wait_all();
    }
    __syncthreads();
    for (int j = warp; j < nk; j += warps) {
      const float* kr = S ? ks + j * hd : kc + int64_t(t0 + j) * kv_dim;
      float kv[D];
#pragma unroll
      for (int i = 0; i < D; ++i) {
        const int d = lane + i * kWarp;
        kv[i] = d < hd ? kr[d] : 0.0f;
      }
      // Every head of the group, those past nh too (their q is zero, their score unused): with no early exit
      // the eight warp sums interleave instead of running one after another.
#pragma unroll
      for (int hh = 0; hh < kGroupHeads; ++hh) {
        float a = 0.0f;
#pragma unroll
        for (int i = 0; i < D; ++i) a = fmaf(qr[hh][i], kv[i], a);
        a = warp_sum(a) * s.scale;
        if (lane == 0 && hh < nh) score[hh * kTileKeys + j] = a;
      }
    }
    __syncthreads();
    for (int hh = warp; hh < nh; hh += warps) {  // lane j: key j of the tile (kTileKeys == kWarp)
      online_softmax_tile(score + hh * kTileKeys, nk, run_max[hh], run_sum[hh], rescale[hh]);
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kDims; ++i) {
      const int d = dt + i * kDimThreads;
      if (d >= hd) break;
#pragma unroll
      for (int e = 0; e < kHalf; ++e) o[i][e] = o[i][e] * rescale[hh0 + e];
      for (int j = 0; j < nk; ++j) {
        const float vv = S ? vs[j * hd + d] : vc[int64_t(t0 + j) * kv_dim + d];
#pragma unroll
        for (int e = 0; e < kHalf; ++e) o[i][e] = fmaf(score[(hh0 + e) * kTileKeys + j], vv, o[i][e]);
      }
    }
    __syncthreads();  // the next tile overwrites the staged rows and the scores
  }
  if (tid < nh) {
    part(tid)[0] = run_max[tid];
    part(tid)[1] = run_sum[tid];
  }
#pragma unroll
  for (int i = 0; i < kDims; ++i) {
    const int d = dt + i * kDimThreads;
    if (d >= hd) break;
#pragma unroll
    for (int e = 0; e < kHalf; ++e) {
      if (hh0 + e < nh) part(hh0 + e)[2 + d] = o[i][e];
    }
  }
  pdl_trigger();
  clk.mark(2);
  merge_if_last<D>(row_ids, s, kDecodeSplits, used, scratch, counters, out, li, h0, nh);
  clk.done(kClkAttention);
}

}  // namespace

int64_t decode_attention_scratch_floats(int64_t n_rows, const AttentionShape& s) {
  return n_rows * s.n_heads * kDecodeSplits * (s.head_dim + 2);
}

void attention_decode(const float* q, const int* row_ids, int64_t n_rows, const KvRow* rows, int64_t base,
                      const AttentionShape& s, float* out, float* scratch, int* counters, cudaStream_t stream) {
  if (n_rows == 0) return;
  check(s.head_dim <= 256 ? cudaSuccess : cudaErrorInvalidValue, "attention_decode: head_dim above 256");
  // Staged when every key row starts 16-byte aligned (head_dim and the cache's width multiples of 4 floats).
  // (and the tile fits the shared memory a launch gets without raising its limit: head_dim <= 176).
  const size_t staged_smem = size_t(kTileKeys) * (kGroupHeads + 2 * size_t(s.head_dim)) * sizeof(float);
  const bool staged = s.head_dim % 4 == 0 && staged_smem <= kStageSharedBytes;
  const size_t smem = staged ? staged_smem : size_t(kTileKeys) * kGroupHeads * sizeof(float);
  const int per_kv = s.n_heads / s.n_kv_heads, groups = s.n_kv_heads * ((per_kv + kGroupHeads - 1) / kGroupHeads);
  const dim3 grid{unsigned(kDecodeSplits), unsigned(groups), unsigned(n_rows)};
  auto go = [&]<int D>() {
    launch_pdl("attention_decode",
               staged ? attention_decode_split_kernel<D, true> : attention_decode_split_kernel<D, false>, grid,
               kAttnThreads, smem, stream, q, row_ids, rows, base, s, scratch, counters, out);
  };
  if (s.head_dim <= 32) {
    go.template operator()<1>();
  } else if (s.head_dim <= 64) {
    go.template operator()<2>();
  } else if (s.head_dim <= 128) {
    go.template operator()<4>();
  } else {
    go.template operator()<8>();
  }
  launched("attention_decode");
}

}  // namespace seedling::cuda
