// cuda/row_ops.cu - the small kernels of a layer (declared in cuda/kernels.h): RMS norm, qk-norm + RoPE + the cache
// write, SiLU product, bias, clamp, the shared expert's gated add, gated attention's query split and sigmoid gate,
// embedding rows, row gathers and the router's policies (softmax + top-k, top-k + softmax, sigmoid group top-k), each
// the twin of a CPU op.
#include <cmath>
#include <cstdint>

#include "cuda/codec_device.cuh"
#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "cuda/norm_rope_topk.cuh"
#include "cuda/warp_primitives.cuh"

namespace seedling::cuda {

namespace {

__global__ void rms_norm_kernel(const float* x, float* out, int64_t n, const float* weight, float eps) {
  const float* xr = x + blockIdx.x * n;
  float* o = out + blockIdx.x * n;
  const float inv = block_rms_inv(xr, n, eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) o[i] = weight[i] * (xr[i] * inv);
}

// Block (row, group of 8 heads), a warp per head: q's heads then k's, each through norm_rope_head in place; the
// warp of k head h then writes k head h and v head h at that position of the row's cache.
__global__ void qk_rope_kv_kernel(float* q, float* k, const float* v, int n_heads, int n_kv, int hd,
                                  const float* q_norm, const float* k_norm, float eps, const int* pos,
                                  const float* inv_freq, int half, float scaling, const KvRow* rows, int64_t base) {
  pdl_wait();
  const int64_t row = blockIdx.x;
  const int lane = threadIdx.x % kWarp;
  const int h = int(blockIdx.y) * kWarpsPerBlock + int(threadIdx.x) / kWarp;
  if (h >= n_heads + n_kv) return;
  const int kv_dim = n_kv * hd;
  const bool is_q = h < n_heads;
  float* vh = is_q ? q + (row * n_heads + h) * hd : k + row * kv_dim + int64_t(h - n_heads) * hd;
  norm_rope_head(vh, is_q ? q_norm : k_norm, eps, hd, pos[row], inv_freq, half, scaling);
  if (is_q) return;
  float* kc = cache_key_row(rows[row], base, kv_dim, h - n_heads, hd);
  float* vc = kc + int64_t(rows[row].cap) * kv_dim;
  const float* vr = v + row * kv_dim + int64_t(h - n_heads) * hd;
  for (int i = lane; i < hd; i += kWarp) {
    kc[i] = vh[i];
    vc[i] = vr[i];
  }
}

__global__ void silu_mul_kernel(const float* g, const float* u, float* out, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
}

__global__ void add_bias_kernel(float* x, const float* b, int64_t total, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) x[i] = x[i] + b[i % n];
}

template <CodecId C>
__global__ void embed_kernel(const int* tokens, const uint8_t* emb, int64_t cols, float* x) {
  constexpr int G = Unit<C>::G;
  const uint8_t* row = emb + size_t(tokens[blockIdx.x]) * row_bytes_of<C>(cols);
  float* out = x + int64_t(blockIdx.x) * cols;
  if constexpr (is_ggml(C)) {  // a piece of 8 a thread, widened as codec_value (ggml_pieces.h's values)
    for (int64_t k = 8 * int64_t(threadIdx.x); k < cols; k += 8 * int64_t(blockDim.x)) {
      uint32_t raw[8] = {};
      ggml_dev::fetch<C>(row + (k / G) * Unit<C>::bytes, int(k % G), raw);
      float v[8];
      ggml_dev::values<C>(ggml_dev::decode<C>(raw, int(k % G)), v);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (k + j < cols) out[k + j] = v[j];
      }
    }
  } else {
    float w[G];
    for (int64_t u = threadIdx.x; u * G < cols; u += blockDim.x) {
      const int valid = int(min_i64(G, cols - u * G));
      load_unit<C>(row, u, valid, w);
#pragma unroll
      for (int j = 0; j < G; ++j) {
        if (j < valid) out[u * G + j] = w[j];
      }
    }
  }
}

__global__ void gather_rows_kernel(const float* src, const int* idx, int64_t n, float* dst) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[blockIdx.x * n + i] = src[idx[blockIdx.x] * n + i];
}

__global__ void clamp_kernel(float* x, int64_t n, float lo, float hi) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = fminf(fmaxf(x[i], lo), hi);
}

__global__ void add_sigmoid_scaled_kernel(float* x, const float* y, const float* gate, int64_t total, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const float sg = 1.0f / (1.0f + expf(-gate[i / n]));  // ops::sigmoid
  x[i] = x[i] + sg * y[i];
}

__global__ void split_gated_query_kernel(const float* qg, int64_t total, int hd, float* q, float* gate) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // an element of q: (row and head) * hd + d
  if (i >= total) return;
  const int64_t head = i / hd, d = i % hd;
  q[i] = qg[head * 2 * hd + d];
  gate[i] = qg[head * 2 * hd + hd + d];
}

__global__ void mul_sigmoid_kernel(float* x, const float* gate, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * (1.0f / (1.0f + expf(-gate[i])));  // ops::sigmoid
}

// router_route: one row a warp.
__global__ void router_route_kernel(const float* logits, int e, int k, RouterPolicy p, int* ids, float* weights) {
  extern __shared__ float sm[];
  const int64_t row = blockIdx.x;
  route_row(logits + row * e, e, k, p, ids + row * k, weights + row * k, sm);
}

// One warp per row.
__global__ void router_topk_kernel(const float* logits, int e, int k, bool norm_topk, int* ids, float* weights) {
  extern __shared__ float p[];
  const int64_t row = blockIdx.x;
  topk_row(logits + row * e, e, k, norm_topk, ids + row * k, weights + row * k, p);
}

}  // namespace

void rms_norm(const float* x, float* out, int64_t rows, int64_t n, const float* weight, float eps,
              cudaStream_t stream) {
  if (rows == 0) return;
  rms_norm_kernel<<<unsigned(rows), kWarp * kWarpsPerBlock, 0, stream>>>(x, out, n, weight, eps);
  launched("rms_norm");
}

void qk_rope_kv(float* q, float* k, const float* v, int64_t m, int n_heads, int n_kv_heads, int head_dim,
                const float* q_norm, const float* k_norm, float eps, const int* pos, const float* inv_freq,
                int rotary_dim, float scaling, const KvRow* rows, int64_t base, cudaStream_t stream) {
  if (m == 0) return;
  const dim3 grid{unsigned(m), unsigned(blocks_for(n_heads + n_kv_heads, kWarpsPerBlock))};
  launch_pdl("qk_rope_kv", qk_rope_kv_kernel, grid, kWarp * kWarpsPerBlock, 0, stream, q, k, v, n_heads, n_kv_heads,
             head_dim, q_norm, k_norm, eps, pos, inv_freq, rotary_dim / 2, scaling, rows, base);
  launched("qk_rope_kv");
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  silu_mul_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(gate, up, out, n);
  launched("silu_mul");
}

void add_bias(float* x, const float* b, int64_t rows, int64_t n, cudaStream_t stream) {
  if (rows * n == 0) return;
  add_bias_kernel<<<blocks_for(rows * n, 256), 256, 0, stream>>>(x, b, rows * n, n);
  launched("add_bias");
}

void clamp(float* x, int64_t n, float lo, float hi, cudaStream_t stream) {
  if (n == 0) return;
  clamp_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(x, n, lo, hi);
  launched("clamp");
}

void add_sigmoid_scaled(float* x, const float* y, const float* gate, int64_t rows, int64_t n, cudaStream_t stream) {
  if (rows * n == 0) return;
  add_sigmoid_scaled_kernel<<<blocks_for(rows * n, 256), 256, 0, stream>>>(x, y, gate, rows * n, n);
  launched("add_sigmoid_scaled");
}

void split_gated_query(const float* qg, int64_t m, int n_heads, int head_dim, float* q, float* gate,
                       cudaStream_t stream) {
  const int64_t total = m * n_heads * head_dim;
  if (total == 0) return;
  split_gated_query_kernel<<<blocks_for(total, 256), 256, 0, stream>>>(qg, total, head_dim, q, gate);
  launched("split_gated_query");
}

void mul_sigmoid(float* x, const float* gate, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  mul_sigmoid_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(x, gate, n);
  launched("mul_sigmoid");
}

void embed(const int* tokens, int64_t m, const DeviceMatrix& emb, float* x, cudaStream_t stream) {
  if (m == 0) return;
  dispatch_codec(emb.codec, [&]<CodecId C>() {
    embed_kernel<C><<<unsigned(m), 128, 0, stream>>>(tokens, static_cast<const uint8_t*>(emb.data), emb.cols, x);
  });
  launched("embed");
}

void gather_rows(const float* src, const int* idx, int64_t m, int64_t n, float* dst, cudaStream_t stream) {
  if (m == 0) return;
  gather_rows_kernel<<<unsigned(m), 256, 0, stream>>>(src, idx, n, dst);
  launched("gather_rows");
}

void router_topk(const float* logits, int64_t m, int e, int k, bool norm_topk, int* ids, float* weights,
                 cudaStream_t stream) {
  if (m == 0) return;
  router_topk_kernel<<<unsigned(m), kWarp, size_t(e) * sizeof(float), stream>>>(logits, e, k, norm_topk, ids, weights);
  launched("router_topk");
}

void router_route(const float* logits, int64_t m, int e, int k, const RouterPolicy& p, int* ids, float* weights,
                  cudaStream_t stream) {
  if (m == 0) return;
  check_route_policy(e, k, p, "router_route");
  router_route_kernel<<<unsigned(m), kWarp, size_t(3) * size_t(e) * sizeof(float), stream>>>(logits, e, k, p, ids,
                                                                                             weights);
  launched("router_route");
}

}  // namespace seedling::cuda
