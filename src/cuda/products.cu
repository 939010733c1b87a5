// cuda/products.cu - the CUDA-core matrix products: matmul (any rows of x) and the fused decode products (matvec:
// one row, the RMS norm inside; the q/k/v product with qk-norm + RoPE + the cache write as its epilogue; the router
// with its softmax and top-k), declared in cuda/kernels.h; has_kernel, the codecs they read.
//
// Each output element is one warp's lane_dot (lane_dot.cuh) then warp_sum, whatever the launch, so a row gives the
// same bits alone or batched, staged in shared memory or not, fused or not.
#include <algorithm>
#include <cstdint>
#include <span>

#include "cuda/codec_device.cuh"
#include "cuda/kernels.h"
#include "cuda/lane_dot.cuh"
#include "cuda/launch.cuh"
#include "cuda/norm_rope_topk.cuh"
#include "cuda/stage_clock.cuh"
#include "cuda/warp_primitives.cuh"

// No fmt here: nvcc cannot evaluate fmt's compile-time format checks, so errors go through check() (runtime.cpp).
namespace seedling::cuda {

namespace {

constexpr int kMatmulRows = 4;  // rows of x one warp serves per pass over a weight row

template <CodecId C, int R, bool V>
__global__ void matmul_kernel(const float* x, int64_t m, const uint8_t* w, int64_t n_out, int64_t cols, float* y,
                              bool accumulate) {
  const int64_t n = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int64_t r0 = int64_t(blockIdx.y) * R;
  if (n >= n_out) return;
  const int rows = int(min_i64(R, m - r0));
  float acc[1][R] = {};
  const WRow<C> wr[1] = {row_at<C>(w, n_out, cols, n)};
  const float* xr[1] = {x + r0 * cols};
  lane_dot<C, R, V>(wr, cols, xr, cols, rows, acc);
  for (int r = 0; r < rows; ++r) {
    const float s = warp_sum(acc[0][r]);
    if (threadIdx.x % kWarp == 0) {
      float* out = y + (r0 + r) * n_out + n;
      *out = accumulate ? *out + s : s;
    }
  }
}

// Decode products of one row of x against up to three matrices of one codec and width, stacked: warp n of the
// launch computes output row n of the first matrix, then of the second, and so on. With `norm`, x is first
// RMS-normed into shared memory exactly as rms_norm_kernel does (block 0 also writes it to xn_out).
struct MatvecTargets {
  const uint8_t* w[3] = {};
  float* y[3] = {};
  int64_t rows[3] = {};
  int count = 0;
  // Per matrix, a bias added to each output after its sum (and after the accumulation: (y + sum) + b, add_bias's
  // operation after the launch it replaces), or null.
  const float* bias[3] = {};
  // With a counter: the router's softmax and top-k of y[0] (e = rows[0]) by the last block to finish; with `routed`,
  // route_row's policy instead (router_route's arithmetic).
  int* topk_counter = nullptr;
  int topk_k = 0;
  bool topk_norm = false;
  bool routed = false;
  RouterPolicy route;
  int* topk_ids = nullptr;
  float* topk_weights = nullptr;
  // With rope_counters (one per head of q, k and v, stacked in that order as y[0..2]): the last block to finish a
  // head's rows puts it through norm_rope_head (q, k) and writes it into the cache (k, v), as qk_rope_kv does for
  // row 0. Every block then lies inside one head: heads are whole blocks of rows (the launcher checks).
  int* rope_counters = nullptr;
  QkRope rope;
  // Matrices split and after take matvec_kernel's second codec (C2): a Q4_K_M file's attn_q is Q4_K where its
  // attn_k and attn_v are Q8_0 or Q6_K. 3: every matrix is of the first codec.
  int split = 3;
  // Float codecs read x with 16-byte loads where it is aligned (lane_dot_float); false (SEEDLING_NO_VECTOR_X=1, for
  // comparison): one float at a time, as before 2026-12-06 (though still once for a warp's rows). The same sums.
  bool vector_x = true;
};

// The fused q/k/v epilogue (MatvecTargets::rope_counters): after a fence that publishes this block's outputs, the
// block counts itself in its head's counter; the last of the head's hd / kWarpsPerBlock blocks resets the counter
// and finishes the head with one warp.
__device__ __forceinline__ void rope_epilogue(const MatvecTargets& t, int block_rows) {
  __shared__ int last_of_head;
  const QkRope& r = t.rope;
  int64_t n = int64_t(blockIdx.x) * block_rows;  // the block's first output row, in the stacked q, k, v
  int mi = 0;
  while (mi < t.count && n >= t.rows[mi]) n -= t.rows[mi++];
  if (mi >= t.count) return;
  const int head = int(n / r.head_dim);
  const int counter = mi == 0 ? head : mi == 1 ? r.n_heads + head : r.n_heads + r.n_kv_heads + head;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last_of_head = atomicAdd(t.rope_counters + counter, 1) == r.head_dim / block_rows - 1;
    if (last_of_head) t.rope_counters[counter] = 0;  // for the next launch
  }
  __syncthreads();
  if (!last_of_head || threadIdx.x >= kWarp) return;
  __threadfence();
  float* vh = t.y[mi] + int64_t(head) * r.head_dim;
  if (mi < 2) {
    norm_rope_head(vh, mi == 0 ? r.q_norm : r.k_norm, r.eps, r.head_dim, r.pos[0], r.inv_freq, r.rotary_dim / 2,
                   r.scaling);
  }
  if (mi == 0) return;
  const KvRow kv = r.rows[0];
  const int kv_dim = r.n_kv_heads * r.head_dim;
  float* dst = cache_key_row(kv, r.base, kv_dim, head, r.head_dim) + (mi == 2 ? int64_t(kv.cap) * kv_dim : 0);
  for (int i = threadIdx.x; i < r.head_dim; i += kWarp) dst[i] = vh[i];
}

// S (staged): each warp first copies its weight rows into its part of shared memory with cp.async (stage_bytes
// per warp; every copy in flight before any arithmetic, the norm included), then widens them from there. The
// arithmetic is the same either way.

// RW: output rows a warp takes at once (rows g .. g + RW - 1 of one matrix: the launcher picks RW = 2 only when every
// matrix's rows are even), their loads in flight together and, for the affine codecs, each block's x read once for
// both. A row's sum is lane_dot's whatever RW is.
//
// C2 (not C: the mixed launch, neither staged nor two rows a warp): matrices t.split and after are of codec C2. A
// warp's rows lie in one matrix, so it takes one codec's lane_dot, the same sum as in a launch of that codec alone.
template <CodecId C, bool V, bool S, int RW, CodecId C2 = C>
__global__ void __launch_bounds__(kWarp* kWarpsPerBlock, kMatvecBlocksPerSm)
    matvec_kernel(const float* x, int64_t cols, const float* norm, float eps, float* xn_out, MatvecTargets t,
                  bool accumulate, size_t stage_bytes, int buffers) {
  extern __shared__ __align__(16) uint8_t smem_bytes[];
  float* xs = reinterpret_cast<float*>(smem_bytes);  // cols floats, with norm
  const size_t xs_bytes = norm != nullptr ? (size_t(cols) * 4 + 15) / 16 * 16 : 0;
  const int64_t total = t.rows[0] + t.rows[1] + t.rows[2];
  const int64_t stride = int64_t(gridDim.x) * kWarpsPerBlock * RW;
  // Output row g of the stacked matrices: matrix mi, its row n.
  auto locate = [&](int64_t g, int& mi, int64_t& n) {
    n = g;
    mi = 0;
    while (mi < t.count && n >= t.rows[mi]) n -= t.rows[mi++];
  };
  [[maybe_unused]] uint8_t* stage = smem_bytes + xs_bytes + size_t(threadIdx.x / kWarp) * buffers * RW * stage_bytes;
  [[maybe_unused]] const size_t rb = row_bytes_of<C>(cols);
  // S: the warp's next RW rows into buffer b (an empty group past the last row), so a wait leaves them in flight.
  [[maybe_unused]] auto stage_rows = [&](int64_t g, int b) {
    if constexpr (S) {
      if (g < total) {
        int mi;
        int64_t n;
        locate(g, mi, n);
#pragma unroll
        for (int r = 0; r < RW; ++r) {
          warp_stage(stage + size_t(b * RW + r) * stage_bytes, row_at<C>(t.w[mi], t.rows[mi], cols, n + r), rb);
        }
      }
      cp_async_commit();
    }
  };
  int64_t g = (int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp) * RW;
  BlockClock clk;
  const int kind = t.rope_counters != nullptr  ? kClkQkv
                   : t.topk_counter != nullptr ? kClkRouter
                   : accumulate                ? kClkO
                                               : kClkHead;
  if constexpr (S) stage_rows(g, 0);  // never for the seed codecs
  // A row the block holds in one batch (kNormBatch values a thread): the norm's weights are read before the wait
  // like the weight rows, and x once, kept in registers for both passes (the same operations as block_rms_inv).
  const bool one_batch = norm != nullptr && cols <= kNormBatch * int64_t(blockDim.x);
  float nv[kNormBatch];
  if (one_batch) {
#pragma unroll
    for (int u = 0; u < kNormBatch; ++u) {
      const int64_t i = threadIdx.x + u * int64_t(blockDim.x);
      nv[u] = i < cols ? norm[i] : 0.0f;
    }
  }
  pdl_wait();  // the weight rows are on their way; x and the outputs belong to the launches before
  clk.mark(0);
  const float* xin = x;
  if (one_batch) {
    float xv[kNormBatch], ss = 0.0f;
#pragma unroll
    for (int u = 0; u < kNormBatch; ++u) {
      const int64_t i = threadIdx.x + u * int64_t(blockDim.x);
      xv[u] = i < cols ? x[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kNormBatch; ++u) {
      if (threadIdx.x + u * int64_t(blockDim.x) < cols) ss = fmaf(xv[u], xv[u], ss);
    }
    const float inv = block_rms_finish(ss, cols, eps);
    float* const xn = blockIdx.x == 0 ? xn_out : nullptr;
#pragma unroll
    for (int u = 0; u < kNormBatch; ++u) {
      const int64_t i = threadIdx.x + u * int64_t(blockDim.x);
      if (i >= cols) break;
      xs[i] = nv[u] * (xv[u] * inv);
      if (xn != nullptr) xn[i] = xs[i];
    }
    __syncthreads();
    xin = xs;
  } else if (norm != nullptr) {
    const float inv = block_rms_inv(x, cols, eps);
    float* const xn = blockIdx.x == 0 ? xn_out : nullptr;
    for (int64_t i0 = threadIdx.x; i0 < cols; i0 += kNormBatch * int64_t(blockDim.x)) {  // loads first, as above
      float xv[kNormBatch], nv[kNormBatch];
#pragma unroll
      for (int u = 0; u < kNormBatch; ++u) {
        const int64_t i = i0 + u * int64_t(blockDim.x);
        xv[u] = i < cols ? x[i] : 0.0f;
        nv[u] = i < cols ? norm[i] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kNormBatch; ++u) {
        const int64_t i = i0 + u * int64_t(blockDim.x);
        if (i >= cols) break;
        xs[i] = nv[u] * (xv[u] * inv);
        if (xn != nullptr) xn[i] = xs[i];
      }
    }
    __syncthreads();
    xin = xs;
  }
  clk.mark(1);
  // A warp's rows g, g + stride, ...: once unless the grid is smaller than the rows (then, staged, two buffers: the
  // next rows are copied in while these are multiplied).
  for (int it = 0; g < total; g += stride, ++it) {
    int mi;
    int64_t n;
    locate(g, mi, n);
    float acc[RW][1] = {};
    const float* xr[RW];
#pragma unroll
    for (int r = 0; r < RW; ++r) xr[r] = xin;
    if constexpr (C2 != C) {
      static_assert(!S && RW == 1 && !is_seed(C) && !is_seed(C2), "the mixed launch is neither staged nor paired");
      if (mi >= t.split) {
        const WRow<C2> w2[1] = {row_at<C2>(t.w[mi], t.rows[mi], cols, n)};
        lane_dot<C2, 1, V, 1, true>(w2, cols, xr, 0, 1, acc);
      }
    }
    WRow<C> wr[RW];
#pragma unroll
    for (int r = 0; r < RW; ++r) wr[r] = row_at<C>(t.w[mi], t.rows[mi], cols, n + r);
    if constexpr (S) {
      if (buffers == 2) {
        stage_rows(g + stride, (it + 1) % 2);
        cp_async_wait_group<1>();
      } else {
        if (it > 0) stage_rows(g, 0);
        cp_async_wait_group<0>();
      }
      __syncwarp();
#pragma unroll
      for (int r = 0; r < RW; ++r) wr[r] = stage + size_t((buffers == 2 ? it % 2 : 0) * RW + r) * stage_bytes;
    }
    if constexpr (is_float(C)) {  // one codec (the mixed launch pairs quantized codecs only)
      if (t.vector_x) {
        lane_dot<C, 1, V, RW, true>(wr, cols, xr, 0, 1, acc);
      } else {
        lane_dot_float_shaped<C, 1, V, RW, true, false>(wr, cols, xr, 0, 1, acc);
      }
    } else if (mi < t.split) {
      lane_dot<C, 1, V, RW, true>(wr, cols, xr, 0, 1, acc);
    }
    if (g + stride >= total) pdl_trigger();
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      const float sum = warp_sum(acc[r][0]);
      if (threadIdx.x % kWarp == 0) {
        float* out = t.y[mi] + n + r;
        float v = accumulate ? *out + sum : sum;
        if (t.bias[mi] != nullptr) v = v + t.bias[mi][n + r];
        *out = v;
      }
    }
    if constexpr (S) __syncwarp();  // every lane is done with the buffers before they are staged into again
  }
  clk.mark(2);
  if (t.rope_counters != nullptr) rope_epilogue(t, kWarpsPerBlock * RW);
  if (t.topk_counter == nullptr) {
    clk.done(kind);
    return;
  }
  __shared__ int last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(t.topk_counter, 1) == int(gridDim.x) - 1;
    if (last) *t.topk_counter = 0;  // for the next launch
  }
  __syncthreads();
  if (!last) {
    clk.done(kind);
    return;
  }
  __threadfence();
  if (threadIdx.x < kWarp) {
    float* sm = reinterpret_cast<float*>(smem_bytes);
    if (t.routed) {
      route_row(t.y[0], int(t.rows[0]), t.topk_k, t.route, t.topk_ids, t.topk_weights, sm);
    } else {
      topk_row(t.y[0], int(t.rows[0]), t.topk_k, t.topk_norm, t.topk_ids, t.topk_weights, sm);
    }
  }
  clk.done(kind);
}

// Defined below: the matvec launcher (matmul's one-row products take it too).
void matvec_launch(const float* x, std::span<const DeviceMatrix> ws, std::span<float* const> ys, const float* norm,
                   float eps, float* xn_out, bool accumulate, const MatvecTargets& extra, cudaStream_t stream);

}  // namespace

bool has_kernel(Codec c) {
  switch (Id(uint8_t(c))) {
    case Id::F32:
    case Id::F16:
    case Id::BF16:
    case Id::Q8_G32:
    case Id::Q8_G64:
    case Id::Q4_G32:
    case Id::Q4_G64:
    case Id::P3:
    case Id::P4:
    case Id::S3:
    case Id::MXFP4:
    case Id::FP8_G32:
    case Id::Q8_0:
    case Id::Q4_0:
    case Id::Q5_0:
    case Id::Q5_1:
    case Id::Q2_K:
    case Id::Q3_K:
    case Id::Q4_K:
    case Id::Q5_K:
    case Id::Q6_K:
    case Id::IQ4_NL:
    case Id::IQ4_XS:
    case Id::MXFP4_GGML:
      return true;
    default:
      return false;
  }
}

void matmul(const float* x, int64_t m, const DeviceMatrix& w, float* y, bool accumulate, cudaStream_t stream) {
  if (m == 0 || w.rows == 0) return;
  if (m == 1) {
    // Decode: matvec's launch (rows staged or two a warp, one wave, its loads in flight together; it checks the
    // weights' alignment itself), which sums each output as matmul_kernel does, so the same bits: DeepSeek-V3's
    // decode 1.6% faster on an H100 (docs/results/2026-12-08-h100-one-row-products-and-int8-x-session42.md).
    float* const ys[1] = {y};
    matvec_launch(x, {&w, 1}, ys, nullptr, 0.0f, nullptr, accumulate, MatvecTargets{}, stream);
    return;
  }
  check_weight_alignment(w.codec, w.data);
  const bool v = aligned16(w.data, row_bytes(w.codec, w.cols));
  const auto* wd = static_cast<const uint8_t*>(w.data);
  const unsigned threads = kWarp * kWarpsPerBlock;
  dispatch_codec<true, true>(w.codec, [&]<CodecId C>() {
    const dim3 grid(blocks_for(w.rows, kWarpsPerBlock), blocks_for(m, kMatmulRows));
    if (v) {
      matmul_kernel<C, kMatmulRows, kBytes<C>><<<grid, threads, 0, stream>>>(x, m, wd, w.rows, w.cols, y, accumulate);
    } else {
      matmul_kernel<C, kMatmulRows, false><<<grid, threads, 0, stream>>>(x, m, wd, w.rows, w.cols, y, accumulate);
    }
  });
  launched("matmul");
}

namespace {
// The codec pairs of the mixed matvec launch (matvec_kernel's C2): ggml's types as llama-quantize mixes them in one
// layer's q/k/v (Q4_K_M: attn_q Q4_K, attn_k and attn_v Q8_0, Q6_K or Q4_K); f<C, C2>() for a pair of two of them.
template <CodecId... Cs>
struct CodecList {};
using MixedCodecs = CodecList<Id::Q4_K, Id::Q5_K, Id::Q6_K, Id::Q8_0>;

template <typename F, CodecId... Cs>
void dispatch_pair_in(CodecList<Cs...>, Codec a, Codec b, F& f) {
  const auto second = [&]<CodecId C>() {
    const auto pair = [&]<CodecId C2>() {
      if constexpr (C2 != C) {
        if (Id(uint8_t(b)) == C2) f.template operator()<C, C2>();
      }
    };
    (pair.template operator()<Cs>(), ...);
  };
  ((Id(uint8_t(a)) == Cs ? second.template operator()<Cs>() : void()), ...);
}
template <typename F>
void dispatch_mixed_pair(Codec a, Codec b, F&& f) {
  dispatch_pair_in(MixedCodecs{}, a, b, f);
}
// The first of ws (at most 3, one width) past its one change of codec, ws.size() where all are of one codec; -1
// where the codecs change twice, the widths differ or the pair has no mixed launch (ggml's types, read at any row
// alignment their blocks allow).
int codec_split(std::span<const DeviceMatrix> ws) {
  if (ws.empty() || ws.size() > 3) return -1;
  int split = int(ws.size());
  for (size_t i = 1; i < ws.size(); ++i) {
    if (ws[i].cols != ws[0].cols) return -1;
    if (ws[i].codec == ws[i - 1].codec) continue;
    if (split != int(ws.size())) return -1;
    split = int(i);
  }
  if (split == int(ws.size())) return split;
  bool pair = false;
  dispatch_mixed_pair(ws[0].codec, ws.back().codec, [&pair]<CodecId, CodecId>() { pair = true; });
  return pair ? split : -1;
}

// Targets whose only epilogue is the biases (at most 3; null entries: none for that matrix).
MatvecTargets with_biases(std::span<const float* const> biases) {
  check(biases.size() <= 3 ? cudaSuccess : cudaErrorInvalidValue, "matvec: at most 3 biases");
  MatvecTargets t;
  for (size_t i = 0; i < biases.size(); ++i) t.bias[i] = biases[i];
  return t;
}

// Targets of a router launch: its counter and where its k choices and their weights go.
MatvecTargets router_targets(int* counter, int k, int* ids, float* weights) {
  MatvecTargets t;
  t.topk_counter = counter;
  t.topk_k = k;
  t.topk_ids = ids;
  t.topk_weights = weights;
  return t;
}

// matvec with `extra`'s epilogues: its biases added to the outputs; with its top-k counter set, the router's top-k
// (or route_row's policy) in the same launch when the fused path is taken, else in a launch after it.
void matvec_launch(const float* x, std::span<const DeviceMatrix> ws, std::span<float* const> ys, const float* norm,
                   float eps, float* xn_out, bool accumulate, const MatvecTargets& extra, cudaStream_t stream) {
  if (ws.empty()) return;
  const int64_t cols = ws[0].cols;
  bool same = ws.size() <= 3 && ws.size() == ys.size();
  bool v = true;
  for (const DeviceMatrix& w : ws) {
    same = same && w.codec == ws[0].codec && w.cols == cols;
    check_weight_alignment(w.codec, w.data);
    v = v && aligned16(w.data, row_bytes(w.codec, w.cols));
  }
  const int split = ws.size() == ys.size() ? codec_split(ws) : -1;
  const bool mixed = !same && split > 0 && split < int(ws.size());
  if (norm != nullptr && (!(same || mixed) || cols > kMatvecSharedCols)) {  // normalise once, then the plain products
    check(xn_out != nullptr ? cudaSuccess : cudaErrorInvalidValue, "matvec: a fused norm without xn_out");
    rms_norm(x, xn_out, 1, cols, norm, eps, stream);
    matvec_launch(xn_out, ws, ys, nullptr, eps, nullptr, accumulate, extra, stream);
    return;
  }
  if (!same && !mixed) {
    for (size_t i = 0; i < ws.size(); ++i) {
      matmul(x, 1, ws[i], ys[i], accumulate, stream);
      if (i < 3 && extra.bias[i] != nullptr) add_bias(ys[i], extra.bias[i], 1, ws[i].rows, stream);
    }
    if (extra.topk_counter != nullptr && extra.routed) {
      router_route(ys[0], 1, int(ws[0].rows), extra.topk_k, extra.route, extra.topk_ids, extra.topk_weights, stream);
    } else if (extra.topk_counter != nullptr) {
      router_topk(ys[0], 1, int(ws[0].rows), extra.topk_k, extra.topk_norm, extra.topk_ids, extra.topk_weights, stream);
    }
    return;
  }
  static const bool scalar_x = env_flag("SEEDLING_NO_VECTOR_X");
  MatvecTargets t = extra;
  t.vector_x = !scalar_x;
  int64_t total = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    t.w[i] = static_cast<const uint8_t*>(ws[i].data);
    t.y[i] = ys[i];
    t.rows[i] = ws[i].rows;
    total += ws[i].rows;
  }
  t.count = int(ws.size());
  t.split = mixed ? split : 3;
  if (total == 0) return;
  const size_t xs_bytes = norm != nullptr ? (size_t(cols) * sizeof(float) + 15) / 16 * 16 : 0;
  const size_t rb = row_bytes(ws[0].codec, cols);
  // A warp RW rows (two where every matrix's rows are even and that still leaves two blocks an SM, as for the
  // q/k/v product and the head), in one wave at most: a larger product (the head) loops over its rows, each warp
  // staging its next rows while it multiplies these. The epilogues (top-k, RoPE) count blocks, so their launches
  // cover every row.
  const int64_t sms = sm_count();
  bool even = true;
  for (int i = 0; i < t.count; ++i) even = even && t.rows[i] % 2 == 0;
  const bool heads_whole = t.rope_counters == nullptr || t.rope.head_dim % (2 * kWarpsPerBlock) == 0;
  const int rw = !mixed && even && heads_whole && blocks_for(total, 2 * kWarpsPerBlock) >= 2 * sms ? 2 : 1;
  const int64_t needed = blocks_for(total, int64_t(kWarpsPerBlock) * rw);
  const bool epilogue = t.topk_counter != nullptr || t.rope_counters != nullptr;
  const int64_t grid64 = epilogue ? needed : std::min<int64_t>(needed, int64_t(kMatvecBlocksPerSm) * sms);
  const int buffers = grid64 < needed ? 2 : 1;
  const size_t stage_all = size_t(buffers) * kWarpsPerBlock * size_t(rw) * rb;
  const bool staged = !mixed && v && xs_bytes + stage_all <= kStageSharedBytes;
  size_t smem = xs_bytes + (staged ? stage_all : 0);
  if (t.topk_counter != nullptr) {  // the softmax's probabilities, or route_row's three rows
    smem = std::max(smem, size_t(t.routed ? 3 : 1) * size_t(ws[0].rows) * sizeof(float));
  }
  const unsigned grid = unsigned(grid64);
  const unsigned threads = kWarp * kWarpsPerBlock;
  if (mixed) {
    dispatch_mixed_pair(ws[0].codec, ws.back().codec, [&]<CodecId C, CodecId C2>() {
      launch_pdl("matvec", matvec_kernel<C, true, false, 1, C2>, grid, threads, smem, stream, x, cols, norm, eps,
                 xn_out, t, accumulate, size_t(0), buffers);
    });
    launched("matvec");
    return;
  }
  dispatch_codec<true, true>(ws[0].codec, [&]<CodecId C>() {
    auto pick = [&]<int RW>() {
      return staged ? matvec_kernel<C, kBytes<C>, kBytes<C>, RW>
             : v    ? matvec_kernel<C, kBytes<C>, false, RW>
                    : matvec_kernel<C, false, false, RW>;
    };
    auto* kernel = rw == 2 ? pick.template operator()<2>() : pick.template operator()<1>();
    launch_pdl("matvec", kernel, grid, threads, smem, stream, x, cols, norm, eps, xn_out, t, accumulate,
               staged ? rb : size_t(0), buffers);
  });
  launched("matvec");
}
}  // namespace

void matvec(const float* x, std::span<const DeviceMatrix> ws, std::span<float* const> ys, const float* norm, float eps,
            float* xn_out, bool accumulate, cudaStream_t stream, std::span<const float* const> biases) {
  matvec_launch(x, ws, ys, norm, eps, xn_out, accumulate, with_biases(biases), stream);
}

void router_matvec_topk(const float* x, const DeviceMatrix& router, const float* norm, float eps, float* xn_out,
                        float* logits, int k, bool norm_topk, int* ids, float* weights, int* counter,
                        cudaStream_t stream, const DeviceMatrix* also, float* also_y) {
  MatvecTargets t = router_targets(counter, k, ids, weights);
  t.topk_norm = norm_topk;
  const DeviceMatrix ws[2] = {router, also != nullptr ? *also : DeviceMatrix{}};
  float* const ys[2] = {logits, also_y};
  const size_t n = also != nullptr ? 2 : 1;
  matvec_launch(x, {ws, n}, {ys, n}, norm, eps, xn_out, false, t, stream);
}

void router_matvec_route(const float* x, const DeviceMatrix& router, const float* norm, float eps, float* xn_out,
                         float* logits, int k, const RouterPolicy& p, int* ids, float* weights, int* counter,
                         cudaStream_t stream) {
  check_route_policy(router.rows, k, p, "router_matvec_route");
  MatvecTargets t = router_targets(counter, k, ids, weights);
  t.routed = true;
  t.route = p;
  float* const ys[1] = {logits};
  matvec_launch(x, {&router, 1}, ys, norm, eps, xn_out, false, t, stream);
}

bool matvec_qkv_rope(const float* x, const DeviceMatrix (&w)[3], float* q, float* k, float* v, const float* norm,
                     float eps, float* xn_out, const QkRope& r, int* head_counters, cudaStream_t stream,
                     std::span<const float* const> biases) {
  static const bool off = env_flag("SEEDLING_NO_FUSED_ROPE");
  float* const ys[3] = {q, k, v};
  const int64_t hd = r.head_dim;
  bool fused = !off && norm != nullptr && w[0].cols <= kMatvecSharedCols && hd % kWarpsPerBlock == 0 &&
               w[0].rows == r.n_heads * hd && w[1].rows == r.n_kv_heads * hd && w[2].rows == r.n_kv_heads * hd;
  fused = fused && codec_split(w) > 0;  // one codec, or two with a mixed launch
  if (!fused) {
    matvec(x, w, ys, norm, eps, xn_out, false, stream, biases);
    qk_rope_kv(q, k, v, 1, r.n_heads, r.n_kv_heads, r.head_dim, r.q_norm, r.k_norm, r.eps, r.pos, r.inv_freq,
               r.rotary_dim, r.scaling, r.rows, r.base, stream);
    return false;
  }
  MatvecTargets t = with_biases(biases);
  t.rope_counters = head_counters;
  t.rope = r;
  matvec_launch(x, w, ys, norm, eps, xn_out, false, t, stream);
  return true;
}

}  // namespace seedling::cuda
