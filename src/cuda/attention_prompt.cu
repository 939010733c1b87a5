// cuda/attention_prompt.cu - prompt (prefill) attention, flash-attention-2 style on float32 CUDA cores: the kernel
// behind attention_prompt (cuda/kernels.h).
//
// A block owns kQ = 64 query rows of one head (grid x: heads, y: query tiles, the last rows first). It stages them once
// in shared memory, then walks the keys from its first row's first key (0, or the sliding window's start) to its last
// row's position in tiles of kK = 32 keys and values, double-buffered in shared memory where the device allows it (the
// next tile's cp.async copies fly while this one is used; plain loads when the cache is not 16-byte aligned; one buffer
// on GPUs with 99 KB per block, where head_dim 128 fits only once); fully masked tiles past the causal limit are never
// visited. Each of the block's 128 threads owns, in registers, a 4 x 4 micro-tile of S = Q K^T (rows ty + 16 i, keys tx
// + 8 j), the running max and sum of its 4 rows, and a 4 x (HD / 8) micro-tile of O (dims 4 tx + 32 g + e); the 8
// threads that share rows are 8 lanes of one warp, so a row's max and sum meet by shuffles and its probabilities pass
// through shared memory under a warp barrier. head_dim is padded to HD = 64, 128 or 256 with zeros (which add nothing
// to any dot product). Invariant: float32 throughout (no TF32, no fast exp): scores, exponentials and sums are float32
// fmaf/expf, so the result differs from ops::attention_row only by the order of float32 additions; the same inputs give
// the same bits.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>

#include "cuda/kernels.h"
#include "cuda/warp_primitives.cuh"

namespace seedling::cuda {

namespace {

constexpr int kQ = 64;         // query rows per block
constexpr int kK = 32;         // keys per staged tile
constexpr int kThreads = 128;  // 16 row groups (ty) x 8 key/dim lanes (tx)
constexpr int kPStride = kK + 4;
constexpr int kMaxTiles = 65535;  // query tiles a call: grid y

// Shared memory of the kernel for padded head_dim HD, in floats: Q (kQ rows), P (kQ x kPStride), then one or two
// tiles of K (kK rows) and V (kK x HD); Q and K rows have HD + 4 floats so that float4 reads of 4 (resp. 8) different
// rows fall in different banks. Two buffers: 60 KB at HD 64, 110 KB at 128 (two blocks per H200 SM), 208 KB at 256;
// one buffer: 43, 76 and 142 KB.
__host__ __device__ constexpr int kv_tile_floats(int hd) {
  return kK * (hd + 4) + kK * hd;
}
__host__ __device__ constexpr int prompt_smem_floats(int hd, int buffers) {
  return kQ * (hd + 4) + kQ * kPStride + buffers * kv_tile_floats(hd);
}

__device__ __forceinline__ float4 load4(const float* p) {
  return *reinterpret_cast<const float4*>(p);
}

// Keys and values j0 .. j0 + kK - 1 of this KV head into ks (rows of HD + 4) and vs (rows of HD); keys past pl
// (which may lie past the cache) and dims past hd as zeros, so masked probabilities multiply zeros, never garbage.
// A: hd % 4 == 0 and both caches 16-byte aligned, so rows go by cp.async (the caller commits and waits).
template <int HD, bool A>
__device__ __forceinline__ void stage_kv(float* ks, float* vs, const float* kh, const float* vh, int j0, int pl, int hd,
                                         int64_t kv_dim) {
  constexpr int QS = HD + 4;
  if constexpr (A) {
    for (int t = int(threadIdx.x); t < kK * HD / 4; t += kThreads) {
      const int c = t / (HD / 4), d = t % (HD / 4) * 4;
      float* kd = ks + c * QS + d;
      float* vd = vs + c * HD + d;
      if (j0 + c <= pl && d < hd) {
        const int64_t at = int64_t(j0 + c) * kv_dim + d;
        cp_async16(kd, kh + at);
        cp_async16(vd, vh + at);
      } else {
        *reinterpret_cast<float4*>(kd) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        *reinterpret_cast<float4*>(vd) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    }
  } else {
    for (int t = int(threadIdx.x); t < kK * HD; t += kThreads) {
      const int c = t / HD, d = t % HD;
      const bool ok = j0 + c <= pl && d < hd;
      const int64_t at = int64_t(j0 + c) * kv_dim + d;
      ks[c * QS + d] = ok ? kh[at] : 0.0f;
      vs[c * HD + d] = ok ? vh[at] : 0.0f;
    }
  }
}

template <int HD, bool A>
__global__ void __launch_bounds__(kThreads)
    attention_prompt_kernel(const float* __restrict__ q, int n, int p0, const float* __restrict__ kc,
                            const float* __restrict__ vc, int window, AttentionShape s, bool two,
                            float* __restrict__ out) {
  constexpr int QS = HD + 4, G = HD / 32;
  extern __shared__ float4 smem4[];
  float* qs = reinterpret_cast<float*>(smem4);  // kQ x QS
  float* ps = qs + kQ * QS;                     // kQ x kPStride
  float* kv = ps + kQ * kPStride;               // one or two (`two`) tiles: K (kK x QS) then V (kK x HD)
  const int hd = s.head_dim;
  const int tid = int(threadIdx.x), tx = tid % 8, ty = tid / 8;
  const int tiles = (n + kQ - 1) / kQ;
  const int i0 = (tiles - 1 - int(blockIdx.y)) * kQ;  // the last (longest) rows start first
  const int h = int(blockIdx.x);
  const int rows = min(kQ, n - i0);
  const int kvh = h / (s.n_heads / s.n_kv_heads);
  const int64_t qstride = int64_t(s.n_heads) * hd;
  const int64_t kv_dim = int64_t(s.n_kv_heads) * hd;
  const float* qh = q + int64_t(i0) * qstride + int64_t(h) * hd;
  for (int t = tid; t < kQ * HD; t += kThreads) {
    const int r = t / HD, d = t % HD;
    qs[r * QS + d] = r < rows && d < hd ? qh[int64_t(r) * qstride + d] : 0.0f;
  }
  const int pf = p0 + i0, pl = pf + rows - 1;  // positions of the block's first and last rows
  const int key_begin = window > 0 ? max(0, pf - window + 1) : 0;
  // Rows past n take positions past pl: they see keys up to pl (or none), are never written, and cannot make NaNs.
  int pos[4], first[4];
  float m[4], l[4];
  float o[4][G][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    pos[i] = pf + ty + 16 * i;
    first[i] = window > 0 ? max(0, pos[i] - window + 1) : 0;
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int e = 0; e < 4; ++e) o[i][g][e] = 0.0f;
    }
  }
  const float* kh = kc + int64_t(kvh) * hd;
  const float* vh = vc + int64_t(kvh) * hd;
  stage_kv<HD, A>(kv, kv + kK * QS, kh, vh, key_begin, pl, hd, kv_dim);  // key_begin <= pl always
  cp_async_commit();
  for (int j0 = key_begin, buf = 0; j0 <= pl; j0 += kK, buf = two ? buf ^ 1 : 0) {
    float* ks = kv + buf * kv_tile_floats(HD);
    float* vs = ks + kK * QS;
    if (two && j0 + kK <= pl) {  // the next tile into the other buffer, last read before the previous barrier
      float* kn = kv + (buf ^ 1) * kv_tile_floats(HD);
      stage_kv<HD, A>(kn, kn + kK * QS, kh, vh, j0 + kK, pl, hd, kv_dim);
    }
    cp_async_commit();
    cp_async_wait_group<1>();  // this thread's copies of this tile have landed (all groups but the newest)
    __syncthreads();           // everyone's have (and Q is staged)
    float sc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) sc[i][j] = 0.0f;
    }
#pragma unroll 4
    for (int d = 0; d < HD; d += 4) {
      float4 a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = load4(qs + (ty + 16 * i) * QS + d);
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = load4(ks + (tx + 8 * j) * QS + d);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          float acc = sc[i][j];
          acc = fmaf(a[i].x, b[j].x, acc);
          acc = fmaf(a[i].y, b[j].y, acc);
          acc = fmaf(a[i].z, b[j].z, acc);
          sc[i][j] = fmaf(a[i].w, b[j].w, acc);
        }
      }
    }
    // Online softmax of the tile, row by row: the 8 lanes of a row group (lane bits 0..2) meet by shuffles.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int key = j0 + tx + 8 * j;
        const bool seen = key <= pos[i] && key >= first[i] && key <= pl;
        sc[i][j] = seen ? sc[i][j] * s.scale : -INFINITY;
        mx = fmaxf(mx, sc[i][j]);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      const float m_new = fmaxf(m[i], mx);
      const float base = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key yet keeps zeros, not NaNs
      const float alpha = expf(m[i] - base);
      m[i] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float p = expf(sc[i][j] - base);
        sum += p;
        ps[(ty + 16 * i) * kPStride + tx + 8 * j] = p;
      }
      l[i] = l[i] * alpha + sum;  // this lane's keys only; the 8 lanes' sums meet at the end
#pragma unroll
      for (int g = 0; g < G; ++g) {
#pragma unroll
        for (int e = 0; e < 4; ++e) o[i][g][e] *= alpha;
      }
    }
    __syncwarp();  // a row group's P rows are written and read by its own 8 lanes only
#pragma unroll 2
    for (int c = 0; c < kK; c += 4) {
      float pr[4][4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float4 t = load4(ps + (ty + 16 * i) * kPStride + c);
        pr[i][0] = t.x;
        pr[i][1] = t.y;
        pr[i][2] = t.z;
        pr[i][3] = t.w;
      }
#pragma unroll
      for (int cc = 0; cc < 4; ++cc) {
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const float4 v = load4(vs + (c + cc) * HD + 4 * tx + 32 * g);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            o[i][g][0] = fmaf(pr[i][cc], v.x, o[i][g][0]);
            o[i][g][1] = fmaf(pr[i][cc], v.y, o[i][g][1]);
            o[i][g][2] = fmaf(pr[i][cc], v.z, o[i][g][2]);
            o[i][g][3] = fmaf(pr[i][cc], v.w, o[i][g][3]);
          }
        }
      }
    }
    __syncthreads();              // every thread is done with this tile's K, V and P before they are overwritten
    if (!two && j0 + kK <= pl) {  // one buffer: the next tile now, in its own group (the top commits an empty one)
      stage_kv<HD, A>(ks, vs, kh, vh, j0 + kK, pl, hd, kv_dim);
      cp_async_commit();
    }
  }
  float* oh = out + int64_t(i0) * qstride + int64_t(h) * hd;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    // A butterfly gives all 8 lanes the same bits (each pair sum is commutative).
    float sum = l[i];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    sum += __shfl_xor_sync(0xffffffffu, sum, 4);
    const int r = ty + 16 * i;
    if (r >= rows) continue;
    // A sink (ops::attention_row's extra logit) joins the denominator: with the max over keys and sink, the sums so
    // far rescale by exp(m - max) and the sink adds exp(sink - max).
    float rescale = 1.0f;
    if (s.sinks != nullptr) {
      const float sink = s.sinks[h], mx = fmaxf(m[i], sink);
      rescale = expf(m[i] - mx);
      sum = sum * rescale + expf(sink - mx);
    }
    const float inv = rescale / sum;
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int d = 4 * tx + 32 * g + e;
        if (d < hd) oh[int64_t(r) * qstride + d] = o[i][g][e] * inv;
      }
    }
  }
}

template <int HD, bool A>
void launch_prompt(const float* q, int n, int p0, const float* k_cache, const float* v_cache, int window,
                   const AttentionShape& s, float* out, cudaStream_t stream) {
  // Two K/V buffers where the device's opt-in shared memory per block holds them (H100/H200: 227 KB), else one.
  int device = 0, optin = 0;
  check(cudaGetDevice(&device), "attention_prompt: cudaGetDevice");
  check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
        "attention_prompt: reading the shared memory per block");
  const bool two = prompt_smem_floats(HD, 2) * int(sizeof(float)) <= optin;
  const int smem = prompt_smem_floats(HD, two ? 2 : 1) * int(sizeof(float));
  if (smem > optin) {
    char what[200];
    std::snprintf(what, sizeof what,
                  "attention_prompt at head_dim %d (needs %d bytes of shared memory per block; %d here)", s.head_dim,
                  smem, optin);
    check(cudaErrorInvalidValue, what);
  }
  if (smem > 48 * 1024) {
    // Per device and cheap: raised on every call rather than remembered for one device.
    check(cudaFuncSetAttribute(attention_prompt_kernel<HD, A>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
          "raising attention_prompt's shared memory");
  }
  // Heads along x: blocks start in x-then-y order, so every head's longest tile goes before any head's next longest
  // (1.22x at 512 rows and 1.21x at 2,048 over tiles along x, which ran one head's tiles long to short, then the
  // next head's: docs/results/2026-11-30-cuda-session9-prefill.md).
  const dim3 grid(unsigned(s.n_heads), unsigned((n + kQ - 1) / kQ));
  attention_prompt_kernel<HD, A>
      <<<grid, kThreads, size_t(smem), stream>>>(q, n, p0, k_cache, v_cache, window, s, two, out);
  check(cudaGetLastError(), "attention_prompt");
}

template <int HD>
void launch_prompt(const float* q, int n, int p0, const float* k_cache, const float* v_cache, int window,
                   const AttentionShape& s, float* out, cudaStream_t stream) {
  const bool aligned = s.head_dim % 4 == 0 && reinterpret_cast<uintptr_t>(k_cache) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(v_cache) % 16 == 0;
  if (aligned) {
    launch_prompt<HD, true>(q, n, p0, k_cache, v_cache, window, s, out, stream);
  } else {
    launch_prompt<HD, false>(q, n, p0, k_cache, v_cache, window, s, out, stream);
  }
}

}  // namespace

void attention_prompt(const float* q, int64_t n, int p0, const float* k_cache, const float* v_cache, int window,
                      const AttentionShape& s, float* out, cudaStream_t stream) {
  if (n <= 0) return;
  if (s.head_dim <= 0 || s.head_dim > 256 || s.n_heads <= 0 || s.n_kv_heads <= 0 || s.n_heads % s.n_kv_heads != 0 ||
      n > int64_t(kMaxTiles) * kQ) {
    char what[256];  // no fmt in .cu files: check() throws Error with this text
    std::snprintf(what, sizeof what,
                  "attention_prompt of %lld rows, head_dim %d, %d q heads, %d kv heads (expected head_dim 1..256, q "
                  "heads a positive multiple of kv heads, at most %d rows)",
                  static_cast<long long>(n), s.head_dim, s.n_heads, s.n_kv_heads, kMaxTiles * kQ);
    check(cudaErrorInvalidValue, what);
  }
  const int rows = int(n);
  if (s.head_dim <= 64) {
    launch_prompt<64>(q, rows, p0, k_cache, v_cache, window, s, out, stream);
  } else if (s.head_dim <= 128) {
    launch_prompt<128>(q, rows, p0, k_cache, v_cache, window, s, out, stream);
  } else {
    launch_prompt<256>(q, rows, p0, k_cache, v_cache, window, s, out, stream);
  }
}

}  // namespace seedling::cuda
