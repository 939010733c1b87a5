// cuda/mla.cu - multi-head latent attention's kernels (declared in cuda/kernels.h), the device twins of model/mla.cpp's
// pieces: the latent's norm and RoPE with the cache write, the absorbed query, latent attention (flash decoding over
// the latent cache), and the value rows of kv_b applied to the latent sums. cuda/mla_forward.cpp runs them as
// Model::mla_attention runs its pieces.
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "cuda/codec_device.cuh"
#include "cuda/flash_decode.cuh"
#include "cuda/kernels.h"
#include "cuda/lane_dot.cuh"
#include "cuda/launch.cuh"
#include "cuda/norm_rope_topk.cuh"
#include "cuda/warp_primitives.cuh"

namespace seedling::cuda {

namespace {

// ---- Norm, RoPE and the cache write ----

// One warp: the rope part x[0, d) de-interleaved in place (x0, x1, x2, x3, ... -> x0, x2, ..., x1, x3, ...), as
// mla_rope does before rotating; d / 2 <= 8 * kWarp.
__device__ __forceinline__ void deinterleave(float* x, int d) {
  constexpr int kPer = 8;
  const int lane = threadIdx.x % kWarp, half = d / 2;
  float a[kPer], b[kPer];
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int i = lane + u * kWarp;
    a[u] = i < half ? x[2 * i] : 0.0f;
    b[u] = i < half ? x[2 * i + 1] : 0.0f;
  }
  __syncwarp();  // every lane has read before any writes
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int i = lane + u * kWarp;
    if (i < half) {
      x[i] = a[u];
      x[half + i] = b[u];
    }
  }
  __syncwarp();
}

// One warp's rope part (d floats at x) rotated at position p as model/mla.cpp's mla_rope: de-interleaved first when
// interleave, then norm_rope_head's rotate-half (no norm) with inv_freq's d / 2 angles.
__device__ __forceinline__ void mla_rope_part(float* x, const MlaShape& s, int p, const float* inv_freq,
                                              float scaling) {
  if (s.interleave) deinterleave(x, s.rope);
  norm_rope_head(x, nullptr, 0.0f, s.rope, p, inv_freq, s.rope / 2, scaling);
}

// Block (row, group of 8 warps): warp g < heads ropes head g's query; warp g == heads normalises the row's latent
// (norm_rope_head's norm over rank, no rotation), ropes its key and writes the row into the cache.
__global__ void mla_rope_cache_kernel(float* q, float* kv, MlaShape s, const float* norm, float eps, const int* pos,
                                      const float* inv_freq, float scaling, const KvRow* rows, int64_t base) {
  pdl_wait();
  const int64_t row = blockIdx.x;
  const int g = int(blockIdx.y) * kWarpsPerBlock + int(threadIdx.x) / kWarp;
  const int p = pos[row];
  if (g < s.heads) {
    mla_rope_part(q + (row * s.heads + g) * s.q_head() + s.nope, s, p, inv_freq, scaling);
    return;
  }
  if (g > s.heads) return;
  const int w = s.width();
  float* c = kv + row * w;
  norm_rope_head(c, norm, eps, s.rank, p, inv_freq, 0, scaling);  // half 0: the norm only
  mla_rope_part(c + s.rank, s, p, inv_freq, scaling);
  const KvRow r = rows[row];
  float* dst = r.layer(base) + int64_t(r.pos) * w;
  for (int i = int(threadIdx.x) % kWarp; i < w; i += kWarp) dst[i] = c[i];
}

// ---- The absorbed query ----

// Block (128 latent dims, head h, 8 rows): thread c sums W_UK[h][j][c] q_nope[row][h][j] over j in order (each weight
// widened as load_element), for each of the block's rows from shared memory; the block's first column tile also copies
// each row's rope part after the latent dims.
constexpr int kAbsorbThreads = 128, kAbsorbRows = 8;

template <CodecId C>
__global__ void __launch_bounds__(kAbsorbThreads)
    mla_absorb_kernel(const float* q, int64_t m, const uint8_t* kv_b, int64_t kv_rows, MlaShape s, float* q_abs) {
  extern __shared__ float qn[];  // kAbsorbRows x nope
  pdl_wait();
  const int h = int(blockIdx.y), tid = int(threadIdx.x), w = s.width(), qh = s.q_head();
  const int64_t i0 = int64_t(blockIdx.z) * kAbsorbRows;
  const int rows = int(min_i64(kAbsorbRows, m - i0));
  for (int t = tid; t < kAbsorbRows * s.nope; t += kAbsorbThreads) {
    const int r = t / s.nope, j = t % s.nope;
    qn[t] = r < rows ? q[((i0 + r) * s.heads + h) * qh + j] : 0.0f;
  }
  __syncthreads();
  const int c = int(blockIdx.x) * kAbsorbThreads + tid;
  if (c < s.rank) {
    float acc[kAbsorbRows] = {};
    const int64_t first = int64_t(h) * (s.nope + s.v);  // W_UK[h]'s first row in kv_b
    for (int j = 0; j < s.nope; ++j) {
      const float wv = load_element<C>(row_at<C>(kv_b, kv_rows, s.rank, first + j), c);
#pragma unroll
      for (int r = 0; r < kAbsorbRows; ++r) acc[r] = fmaf(wv, qn[r * s.nope + j], acc[r]);
    }
    for (int r = 0; r < rows; ++r) q_abs[((i0 + r) * s.heads + h) * w + c] = acc[r];
  }
  if (blockIdx.x == 0) {
    for (int t = tid; t < rows * s.rope; t += kAbsorbThreads) {
      const int r = t / s.rope, j = t % s.rope;
      q_abs[((i0 + r) * s.heads + h) * w + s.rank + j] = q[((i0 + r) * s.heads + h) * qh + s.nope + j];
    }
  }
}

// ---- Latent attention ----

// A block: 256 threads (scores: a warp per key; softmax and merge: a warp per head; value sums: thread t takes latent
// dims t, t + 256, ... of all the group's heads). kMlaGroup heads of one row share each staged key row; tiles of
// kMlaTile keys; at most kMlaSplits splits of a row's keys, of mla_split_keys(cap) keys each.
constexpr int kMlaThreads = 256, kMlaGroup = 8, kMlaTile = 32, kMlaSplits = 16;
constexpr int64_t kMaxGridZ = 65535;
static_assert(kMlaTile == kWarp, "the softmax gives each lane one key of the tile");
static_assert(kMlaGroup == kMlaThreads / kWarp, "a warp per head of the group in the softmax and the merge");
static_assert(kMlaGroup == 8, "the scores read the group's queries at a dimension as two float4");

__host__ __device__ __forceinline__ int mla_split_keys(int cap) {
  const int per = (cap + kMlaSplits - 1) / kMlaSplits;
  const int tiles = (per + kMlaTile - 1) / kMlaTile;
  return (tiles > 1 ? tiles : 1) * kMlaTile;
}

__host__ __device__ __forceinline__ int mla_groups(const MlaShape& s) {
  return (s.heads + kMlaGroup - 1) / kMlaGroup;
}

// Dynamic shared memory of the attention kernel, in floats: the group's queries, a tile of key rows, the tile's scores.
__host__ __device__ __forceinline__ int64_t mla_smem_floats(const MlaShape& s) {
  return int64_t(kMlaGroup + kMlaTile) * s.width() + kMlaGroup * kMlaTile;
}

// The last split block of a (row, head group) to finish merges its heads' partial sums (attention_decode.cu's scheme:
// each block counts itself after a fence that publishes its partials; the last resets the counter for the next
// launch). Only the first `used` splits hold keys. A warp per head: the max and the sum over splits, each split's
// weight exp(max_p - max), then each latent dim as the sum over splits of weight_p * lat_p in split order, over the
// sum.
__device__ __forceinline__ void mla_merge_if_last(const MlaShape& s, int used, const float* scratch, int* counters,
                                                  float* lat, int64_t row, int li, int h0, int nh) {
  __shared__ float weight[kMlaGroup][kMlaSplits];
  if (!last_block_in(counters + int64_t(li) * gridDim.y + blockIdx.y, int(gridDim.x))) return;
  const int r = s.rank, lane = int(threadIdx.x) % kWarp, hh = int(threadIdx.x) / kWarp;
  if (hh >= nh) return;
  const float* part = scratch + (int64_t(li) * s.heads + h0 + hh) * kMlaSplits * (r + 2);
  float* wt = weight[hh];
  const float total = merge_weights(part, r + 2, used, -INFINITY, wt);
  float* out = lat + (row * s.heads + h0 + hh) * r;
  for (int c = lane; c < r; c += kWarp) {
    float a = 0.0f;
    for (int p = 0; p < used; ++p) a += wt[p] * part[p * (r + 2) + 2 + c];
    out[c] = a / total;
  }
}

// Block (split, head group, row of the launch). The split walks its keys tile by tile: the tile's cache rows staged in
// shared memory (cp.async where rows are 16-byte aligned); scores by warps over keys (a key's dims spread over the
// lanes, then warp_sum); an online softmax per head (running max and sum; the sums rescaled); each thread adds the
// tile's weighted latents for its dims and heads. The split's [max, sum, lat[rank]] go to scratch (an empty split
// writes nothing); the last block of the group merges. Each output's operations depend only on its row's cache and
// query, never on the rows or heads beside it. KD: latent dims per thread, rank <= KD * kMlaThreads.
template <int KD>
__global__ void __launch_bounds__(kMlaThreads, 2)
    mla_attention_kernel(const float* q_abs, int64_t first_row, const KvRow* rows, int64_t base, MlaShape s, float* lat,
                         float* scratch, int* counters) {
  extern __shared__ __align__(16) float mla_sm[];
  __shared__ float run_max[kMlaGroup], run_sum[kMlaGroup], rescale[kMlaGroup];
  pdl_wait();
  const int w = s.width(), r = s.rank;
  float* qs = mla_sm;                // kMlaGroup x w
  float* ks = qs + kMlaGroup * w;    // kMlaTile x w
  float* score = ks + kMlaTile * w;  // kMlaGroup x kMlaTile
  const int split = int(blockIdx.x), li = int(blockIdx.z);
  const int64_t row = first_row + li;
  const int h0 = int(blockIdx.y) * kMlaGroup, nh = min(kMlaGroup, s.heads - h0);
  const KvRow kr = rows[row];
  const float* cache = kr.layer(base);
  const int split_keys = mla_split_keys(kr.cap);
  const int j0 = split * split_keys, j_end = min(kr.pos + 1, j0 + split_keys);  // keys [j0, j_end)
  const int used = min(kMlaSplits, (kr.pos + split_keys) / split_keys);         // splits with keys
  if (j0 >= j_end) {  // no keys: nothing to write, only to count in
    mla_merge_if_last(s, used, scratch, counters, lat, row, li, h0, nh);
    return;
  }
  const int tid = int(threadIdx.x), lane = tid % kWarp, warp = tid / kWarp;
  const float* qrow = q_abs + (row * s.heads + h0) * w;
  // The queries by dimension, four heads a float4: qs[(hh / 4) * 4w + 4d + hh % 4], so a lane's scores read the eight
  // heads' query at dimension d as two 16-byte loads (one shared-memory load a head before).
  for (int i = tid; i < kMlaGroup * w; i += kMlaThreads) {
    const int hh = i / w, d = i % w;
    qs[(hh / 4) * 4 * w + 4 * d + hh % 4] = hh < nh ? qrow[i] : 0.0f;
  }
  if (tid < kMlaGroup) {
    run_max[tid] = -INFINITY;
    run_sum[tid] = 0.0f;
    rescale[tid] = 0.0f;
  }
  const bool vec = w % 4 == 0;  // cache rows 16-byte aligned (the cache itself is cudaMalloc's)
  float o[KD][kMlaGroup] = {};
  for (int t0 = j0; t0 < j_end; t0 += kMlaTile) {
    const int nk = min(kMlaTile, j_end - t0);
    const float* src = cache + int64_t(t0) * w;
    if (vec) {
      for (int i = 4 * tid; i < nk * w; i += 4 * kMlaThreads) cp_async16(ks + i, src + i);
      cp_async_wait_all();
    } else {
      for (int i = tid; i < nk * w; i += kMlaThreads) ks[i] = src[i];
    }
    __syncthreads();  // the tile (and, the first time, the queries and running sums) in place
    for (int j = warp; j < nk; j += kMlaThreads / kWarp) {
      float a[kMlaGroup] = {};
      for (int d = lane; d < w; d += kWarp) {
        const float kv = ks[j * w + d];
        const float4 qa = *reinterpret_cast<const float4*>(qs + 4 * d);
        const float4 qb = *reinterpret_cast<const float4*>(qs + 4 * w + 4 * d);
        a[0] = fmaf(qa.x, kv, a[0]);
        a[1] = fmaf(qa.y, kv, a[1]);
        a[2] = fmaf(qa.z, kv, a[2]);
        a[3] = fmaf(qa.w, kv, a[3]);
        a[4] = fmaf(qb.x, kv, a[4]);
        a[5] = fmaf(qb.y, kv, a[5]);
        a[6] = fmaf(qb.z, kv, a[6]);
        a[7] = fmaf(qb.w, kv, a[7]);
      }
      // The eight heads' sums over the warp in one butterfly: at each step a lane keeps half of its heads and sends
      // the other half (9 shuffles where eight warp_sums took 40). Each head's additions are warp_sum's (the same
      // xor pairs in the same order), so the same bits; lane 4h ends with head h's sum.
      const bool u16 = (lane & 16) != 0, u8 = (lane & 8) != 0, u4 = (lane & 4) != 0;
      float b[4], c[2];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float send = u16 ? a[k] : a[k + 4];
        b[k] = (u16 ? a[k + 4] : a[k]) + __shfl_xor_sync(0xffffffffu, send, 16);
      }
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const float send = u8 ? b[k] : b[k + 2];
        c[k] = (u8 ? b[k + 2] : b[k]) + __shfl_xor_sync(0xffffffffu, send, 8);
      }
      float t = (u4 ? c[1] : c[0]) + __shfl_xor_sync(0xffffffffu, u4 ? c[0] : c[1], 4);
      t += __shfl_xor_sync(0xffffffffu, t, 2);
      t += __shfl_xor_sync(0xffffffffu, t, 1);
      if ((lane & 3) == 0) score[(lane >> 2) * kMlaTile + j] = t * s.scale;
    }
    __syncthreads();
    if (warp < nh) online_softmax_tile(score + warp * kMlaTile, nk, run_max[warp], run_sum[warp], rescale[warp]);
    __syncthreads();
    // Keys outside, dims inside: each key's eight weights are read once for the KD dims (once a dim before); every
    // o[i][hh] still adds the keys in order, so the same sums.
#pragma unroll
    for (int i = 0; i < KD; ++i) {
#pragma unroll
      for (int hh = 0; hh < kMlaGroup; ++hh) o[i][hh] = o[i][hh] * rescale[hh];
    }
    for (int j = 0; j < nk; ++j) {
      float p[kMlaGroup];
#pragma unroll
      for (int hh = 0; hh < kMlaGroup; ++hh) p[hh] = score[hh * kMlaTile + j];
#pragma unroll
      for (int i = 0; i < KD; ++i) {
        const int c = tid + i * kMlaThreads;
        const float vv = c < r ? ks[j * w + c] : 0.0f;  // dims past the rank: never stored
#pragma unroll
        for (int hh = 0; hh < kMlaGroup; ++hh) o[i][hh] = fmaf(p[hh], vv, o[i][hh]);
      }
    }
    __syncthreads();  // the next tile overwrites the rows and the scores
  }
  auto part = [&](int hh) { return scratch + ((int64_t(li) * s.heads + h0 + hh) * kMlaSplits + split) * (r + 2); };
  if (tid < nh) {
    part(tid)[0] = run_max[tid];
    part(tid)[1] = run_sum[tid];
  }
#pragma unroll
  for (int i = 0; i < KD; ++i) {
    const int c = tid + i * kMlaThreads;
    if (c >= r) break;
#pragma unroll
    for (int hh = 0; hh < kMlaGroup; ++hh) {
      if (hh < nh) part(hh)[2 + c] = o[i][hh];
    }
  }
  mla_merge_if_last(s, used, scratch, counters, lat, row, li, h0, nh);
}

// ---- The value rows ----

// Warp n of the launch: output (head n / v, dim n % v) for kValueRows rows, W_UV[h] row j as matmul_kernel reads a
// weight row (lane_dot, then warp_sum), x the row's latent sum of head h (rows heads * rank floats apart).
constexpr int kValueRows = 4;

template <CodecId C, bool V>
__global__ void mla_value_kernel(const float* lat, int64_t m, const uint8_t* kv_b, int64_t kv_rows, MlaShape s,
                                 float* att) {
  pdl_wait();
  const int64_t n = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int64_t r0 = int64_t(blockIdx.y) * kValueRows;
  if (n >= int64_t(s.heads) * s.v) return;
  const int h = int(n / s.v), j = int(n % s.v);
  const int rows = int(min_i64(kValueRows, m - r0));
  float acc[1][kValueRows] = {};
  const WRow<C> wr[1] = {row_at<C>(kv_b, kv_rows, s.rank, int64_t(h) * (s.nope + s.v) + s.nope + j)};
  const float* xr[1] = {lat + (r0 * s.heads + h) * s.rank};
  lane_dot<C, kValueRows, V>(wr, s.rank, xr, int64_t(s.heads) * s.rank, rows, acc);
  for (int i = 0; i < rows; ++i) {
    const float sum = warp_sum(acc[0][i]);
    if (threadIdx.x % kWarp == 0) att[(r0 + i) * s.heads * s.v + n] = sum;
  }
}

// kv_b must be heads x (nope + v) rows of rank.
void check_kv_b(const DeviceMatrix& kv_b, const MlaShape& s, const char* what) {
  if (kv_b.rows != int64_t(s.heads) * (s.nope + s.v) || kv_b.cols != s.rank) {
    char msg[200];
    std::snprintf(msg, sizeof msg, "%s: kv_b is %lld x %lld, expected %d heads x (%d + %d) rows of %d", what,
                  static_cast<long long>(kv_b.rows), static_cast<long long>(kv_b.cols), s.heads, s.nope, s.v, s.rank);
    check(cudaErrorInvalidValue, msg);
  }
}

}  // namespace

void mla_rope_cache(float* q, float* kv, int64_t m, const MlaShape& s, const float* norm, float eps, const int* pos,
                    const float* inv_freq, float scaling, const KvRow* rows, int64_t base, cudaStream_t stream) {
  if (m == 0) return;
  check(s.rope % 2 == 0 && s.rope / 2 <= 8 * kWarp ? cudaSuccess : cudaErrorInvalidValue,
        "mla_rope_cache: the rope part must be even and at most 512 wide");
  const dim3 grid{unsigned(m), unsigned(blocks_for(s.heads + 1, kWarpsPerBlock))};
  launch_pdl("mla_rope_cache", mla_rope_cache_kernel, grid, kWarp * kWarpsPerBlock, 0, stream, q, kv, s, norm, eps, pos,
             inv_freq, scaling, rows, base);
}

void mla_absorb_query(const float* q, int64_t m, const DeviceMatrix& kv_b, const MlaShape& s, float* q_abs,
                      cudaStream_t stream) {
  if (m == 0) return;
  check_kv_b(kv_b, s, "mla_absorb_query");
  const dim3 grid{unsigned(blocks_for(s.rank, kAbsorbThreads)), unsigned(s.heads),
                  unsigned(blocks_for(m, kAbsorbRows))};
  const size_t smem = size_t(kAbsorbRows) * size_t(s.nope) * sizeof(float);
  const auto* w = static_cast<const uint8_t*>(kv_b.data);
  dispatch_codec(kv_b.codec, [&]<CodecId C>() {
    launch_pdl("mla_absorb_query", mla_absorb_kernel<C>, grid, kAbsorbThreads, smem, stream, q, m, w, kv_b.rows, s,
               q_abs);
  });
}

int64_t mla_attention_scratch_floats(int64_t rows_per_launch, const MlaShape& s) {
  return rows_per_launch * s.heads * kMlaSplits * (s.rank + 2);
}

int64_t mla_attention_counters(int64_t rows_per_launch, const MlaShape& s) {
  return rows_per_launch * mla_groups(s);
}

void mla_attention(const float* q_abs, int64_t m, const KvRow* rows, int64_t base, const MlaShape& s, float* lat,
                   float* scratch, int* counters, int64_t rows_per_launch, cudaStream_t stream) {
  if (m == 0) return;
  const size_t smem = size_t(mla_smem_floats(s)) * sizeof(float);
  int device = 0, optin = 0;
  check(cudaGetDevice(&device), "mla_attention: cudaGetDevice");
  check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
        "mla_attention: reading the shared memory per block");
  if (s.rank > 4 * kMlaThreads || smem > size_t(optin) || rows_per_launch <= 0) {
    char what[200];
    std::snprintf(what, sizeof what,
                  "mla_attention at rank %d, rope %d (needs rank <= %d and %zu bytes of shared memory per block; %d "
                  "here), %lld rows a launch",
                  s.rank, s.rope, 4 * kMlaThreads, smem, optin, static_cast<long long>(rows_per_launch));
    check(cudaErrorInvalidValue, what);
  }
  const int64_t per = rows_per_launch < kMaxGridZ ? rows_per_launch : kMaxGridZ;  // grid z: a launch's rows
  for (int64_t first = 0; first < m; first += per) {
    const int64_t n = per < m - first ? per : m - first;
    const dim3 grid{unsigned(kMlaSplits), unsigned(mla_groups(s)), unsigned(n)};
    auto go = [&]<int KD>() {
      launch_pdl("mla_attention", mla_attention_kernel<KD>, grid, kMlaThreads, smem, stream, q_abs, first, rows, base,
                 s, lat, scratch, counters);
    };
    if (s.rank <= kMlaThreads) {
      go.template operator()<1>();
    } else if (s.rank <= 2 * kMlaThreads) {
      go.template operator()<2>();
    } else {
      go.template operator()<4>();
    }
  }
}

void mla_value(const float* lat, int64_t m, const DeviceMatrix& kv_b, const MlaShape& s, float* att,
               cudaStream_t stream) {
  if (m == 0) return;
  check_kv_b(kv_b, s, "mla_value");
  const bool v = aligned16(kv_b.data, row_bytes(kv_b.codec, kv_b.cols));
  const auto* w = static_cast<const uint8_t*>(kv_b.data);
  const dim3 grid{unsigned(blocks_for(int64_t(s.heads) * s.v, kWarpsPerBlock)), unsigned(blocks_for(m, kValueRows))};
  dispatch_codec(kv_b.codec, [&]<CodecId C>() {
    auto* kernel = v ? mla_value_kernel<C, true> : mla_value_kernel<C, false>;
    launch_pdl("mla_value", kernel, grid, kWarp * kWarpsPerBlock, 0, stream, lat, m, w, kv_b.rows, s, att);
  });
}

}  // namespace seedling::cuda
